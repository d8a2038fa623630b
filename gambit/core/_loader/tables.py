"""The front-matter tables: `[modelParams]` (with `reasoning` and `additionalParams`),
`[guardrails]`, `[permissions]` (also on entries), `[handlers.*]` and
`[[responseItemExtensions]]`.

Each parser reports every problem in its table and returns what is usable; an unknown key
inside a table warns and is ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

from .._deck import (
    REASONING_EFFORTS,
    REASONING_SUMMARIES,
    SUPPORTED_MODEL_PARAMS,
    Guardrails,
    HandlerDecl,
    ModelParams,
    Permissions,
)
from .._schema import Schema
from .load import Load
from .paths import local, resolve_deck_path
from .schemas import resolve_schema
from .values import flag_unknown_keys, non_json_paths, opt_number, opt_str, table, type_name

_HandlerKind = Literal["onBusy", "onIdle", "onError"]


def parse_model_params(load: Load, value: Any, file: str) -> ModelParams:
    params = ModelParams()
    params_table = table(load, value, file, "modelParams")
    if params_table is None:
        return params
    prefix = "modelParams."
    model = params_table.get("model")
    if model is not None:
        if isinstance(model, str) and model.strip():
            params.models = [model.strip()]
        elif (
            isinstance(model, list)
            and model
            and all(isinstance(m, str) and m.strip() for m in model)
        ):
            params.models = [m.strip() for m in model]
        else:
            load.diag.error(
                "must be a model name or a non-empty list of model names (an ordered fallback list)",
                file=file,
                key=prefix + "model",
                hint='model = "openrouter/openai/gpt-4o-mini" or model = ["ollama/llama3.1", "openrouter/openai/gpt-4o-mini"]',
            )
    params.temperature = opt_number(load, params_table, "temperature", file, prefix, minimum=0)
    params.top_p = opt_number(load, params_table, "top_p", file, prefix, minimum=0)
    params.frequency_penalty = opt_number(load, params_table, "frequency_penalty", file, prefix)
    params.presence_penalty = opt_number(load, params_table, "presence_penalty", file, prefix)
    params.max_tokens = opt_number(
        load, params_table, "max_tokens", file, prefix, integer=True, minimum=1
    )
    if "reasoning" in params_table:
        params.reasoning = _parse_reasoning(load, params_table["reasoning"], file)
    _parse_context_keys(load, params_table, params, file)
    if "additionalParams" in params_table:
        extra = table(load, params_table["additionalParams"], file, prefix + "additionalParams")
        if extra is not None:
            bad = non_json_paths(extra, prefix + "additionalParams")
            for path, kind in bad:
                load.diag.error(
                    f"is a {kind}, which is not JSON-serialisable",
                    file=file,
                    key=path,
                    hint="quote it as a string",
                )
            if not bad:
                params.additional_params = extra
            for key in extra:
                if key in SUPPORTED_MODEL_PARAMS and key in params_table:
                    load.diag.warn(
                        f"set both in [modelParams] and in additionalParams; [modelParams].{key} wins",
                        file=file,
                        key=prefix + "additionalParams." + key,
                        hint="remove one of them",
                    )
    for key in params_table:
        if key not in (*SUPPORTED_MODEL_PARAMS, *CONTEXT_KEYS, "model", "additionalParams"):
            load.diag.warn(
                "is not a supported model parameter, so it is not passed to the provider",
                file=file,
                key=prefix + key,
                hint=f"move it under [modelParams.additionalParams] ({key} = ...)",
            )
    return params


# The runtime's own keys of [modelParams] (docs/decks.md, "Context window and compaction"):
# key -> (the ModelParams attribute, whether a value is valid, its conversion, what a valid
# value is, an example).
_CONTEXT_RULES: dict[str, tuple[str, Callable[[Any], bool], Callable[[Any], Any], str, str]] = {
    "contextWindow": (
        "context_window",
        lambda v: type(v) is int and v >= 256,
        int,
        "the model's context window in tokens, a whole number of at least 256",
        "contextWindow = 128000",
    ),
    "compactRatio": (
        "compact_ratio",
        lambda v: type(v) in (int, float) and 0 < v <= 1,
        float,
        "a number above 0 and at most 1 (the share of contextWindow at which the conversation "
        "is compacted)",
        "compactRatio = 0.8",
    ),
    "compact": (
        "compact",
        lambda v: type(v) is bool,
        bool,
        "true or false",
        "compact = false turns compaction off for this deck",
    ),
}
CONTEXT_KEYS = tuple(_CONTEXT_RULES)


def _parse_context_keys(load: Load, table: dict[str, Any], params: ModelParams, file: str) -> None:
    for key, (attribute, valid, convert, wanted, hint) in _CONTEXT_RULES.items():
        value = table.get(key)
        if value is None:
            continue
        if valid(value):
            setattr(params, attribute, convert(value))
        else:
            load.diag.error(
                f"must be {wanted}; got {value!r}", file=file, key="modelParams." + key, hint=hint
            )


def _parse_reasoning(load: Load, value: Any, file: str) -> dict[str, str] | None:
    reasoning = table(load, value, file, "modelParams.reasoning")
    if reasoning is None:
        return None
    result: dict[str, str] = {}
    for key, allowed in (("effort", REASONING_EFFORTS), ("summary", REASONING_SUMMARIES)):
        if key not in reasoning:
            continue
        if reasoning[key] in allowed:
            result[key] = reasoning[key]
        else:
            load.diag.error(
                f"must be one of {', '.join(allowed)}; got {reasoning[key]!r}",
                file=file,
                key=f"modelParams.reasoning.{key}",
            )
    flag_unknown_keys(
        load.diag.error,
        reasoning,
        ("effort", "summary"),
        file,
        "modelParams.reasoning.",
        "unknown reasoning setting",
        "reasoning supports effort and summary; put provider-specific settings in additionalParams",
    )
    return result


def parse_guardrails(load: Load, value: Any, file: str) -> Guardrails:
    limits = table(load, value, file, "guardrails")
    if limits is None:
        return Guardrails()
    guardrails = Guardrails(
        max_depth=opt_number(
            load, limits, "maxDepth", file, "guardrails.", integer=True, minimum=1
        ),
        max_passes=opt_number(
            load, limits, "maxPasses", file, "guardrails.", integer=True, minimum=1
        ),
        timeout_ms=opt_number(
            load, limits, "timeoutMs", file, "guardrails.", integer=True, minimum=0
        ),
    )
    flag_unknown_keys(
        load.diag.warn,
        limits,
        ("maxDepth", "maxPasses", "timeoutMs"),
        file,
        "guardrails.",
        "unknown guardrail; it is ignored",
        "use maxDepth, maxPasses or timeoutMs",
    )
    return guardrails


def parse_permissions(load: Load, value: Any, file: str, key: str) -> Permissions | None:
    """`[permissions]` of a deck, or of an entry (`key` is then e.g. `actions[x].permissions`)."""
    if not isinstance(value, dict):
        load.diag.error(f"must be a table, not {type_name(value)}", file=file, key=key)
        return None
    base = Path(file).parent
    perms = Permissions()
    for kind in ("read", "write", "net", "env"):
        raw = value.get(kind)
        resolved = _permission_list(
            load, raw, kind, file, key, base if kind in ("read", "write") else None
        )
        if resolved is not None:
            setattr(perms, kind, resolved)
    raw_run = value.get("run")
    if raw_run is None or isinstance(raw_run, bool):
        perms.run = bool(raw_run)
    elif isinstance(raw_run, list):
        commands = _permission_list(load, raw_run, "run", file, key, None)
        # a list in gives a list (or None, after an error), never True
        perms.run = (
            {"paths": [], "commands": commands}
            if isinstance(commands, list) and commands
            else False
        )
    elif isinstance(raw_run, dict):
        flag_unknown_keys(
            load.diag.warn,
            raw_run,
            ("paths", "commands"),
            file,
            f"{key}.run.",
            "unknown key; it is ignored",
            "[permissions.run] has paths and commands",
        )
        lists: dict[str, list[str]] = {}
        for sub in ("paths", "commands"):
            entry = raw_run.get(sub)
            if isinstance(entry, bool):
                load.diag.error(
                    f"permissions.run.{sub} must be an array in object form; use permissions.run=true for full run access",
                    file=file,
                    key=f"{key}.run.{sub}",
                )
                continue
            resolved = _permission_list(
                load, entry, f"run.{sub}", file, key, base if sub == "paths" else None
            )
            lists[sub] = resolved if isinstance(resolved, list) else []
        perms.run = lists if (lists.get("paths") or lists.get("commands")) else False
        if perms.run:
            perms.run = {"paths": lists.get("paths", []), "commands": lists.get("commands", [])}
    else:
        load.diag.error(
            "permissions.run must be boolean, array, or object", file=file, key=f"{key}.run"
        )
    for sub in value:
        if sub not in ("read", "write", "net", "env", "run"):
            load.diag.warn("unknown permission kind; it is ignored", file=file, key=f"{key}.{sub}")
    return perms


def _permission_list(
    load: Load, raw: Any, kind: str, file: str, key: str, base: Path | None
) -> bool | list[str] | None:
    if raw is None:
        return False
    if isinstance(raw, bool):
        return raw
    if not isinstance(raw, list):
        load.diag.error(
            f"permissions.{kind} must be boolean or array", file=file, key=f"{key}.{kind}"
        )
        return None
    out: set[str] = set()
    for entry in raw:
        if not isinstance(entry, str):
            load.diag.error(
                f"permissions.{kind} entries must be strings", file=file, key=f"{key}.{kind}"
            )
            return None
        entry = entry.strip()
        if not entry:
            continue
        if base is None:
            out.add(entry)
            continue
        resolved = local(load, entry, str(base / "PROMPT.md"), f"{key}.{kind}")
        if resolved is None:
            return None
        out.add(str(resolved))
    return sorted(out)


def parse_handlers(load: Load, value: Any, file: str) -> dict[str, HandlerDecl]:
    handler_tables = table(load, value, file, "handlers")
    if handler_tables is None:
        return {}
    handlers: dict[str, HandlerDecl] = {}
    for kind, raw in handler_tables.items():
        key = f"handlers.{kind}"
        if kind == "onInterval":
            load.diag.deprecated(
                "handlers.onInterval is deprecated",
                file=file,
                key=key,
                hint="rename it to [handlers.onBusy]",
            )
            if "onBusy" in handler_tables:
                continue
            kind = "onBusy"
        if kind not in ("onBusy", "onIdle", "onError"):
            load.diag.error(
                "unknown handler",
                file=file,
                key=key,
                hint="handlers are onBusy, onIdle and onError",
            )
            continue
        entry = table(load, raw, file, key)
        if entry is None:
            continue
        path = resolve_deck_path(load, entry.get("path"), file, f"{key}.path", allow_python=True)
        label = opt_str(load, entry, "label", file, key + ".")
        handler = HandlerDecl(kind=cast(_HandlerKind, kind), path=path or "", label=label)
        allowed = {"path", "label"}
        if kind in ("onBusy", "onIdle"):
            allowed |= {"delayMs", "repeatMs", "intervalMs"}
            handler.delay_ms = opt_number(
                load, entry, "delayMs", file, key + ".", integer=True, minimum=0
            )
            handler.repeat_ms = opt_number(
                load, entry, "repeatMs", file, key + ".", integer=True, minimum=0
            )
            if "intervalMs" in entry:
                load.diag.deprecated(
                    f"handlers.{kind}.intervalMs is deprecated",
                    file=file,
                    key=f"{key}.intervalMs",
                    hint="rename it to repeatMs",
                )
                if handler.repeat_ms is None:
                    handler.repeat_ms = opt_number(
                        load, entry, "intervalMs", file, key + ".", integer=True, minimum=0
                    )
        for sub in entry:
            if sub not in allowed:
                load.diag.warn(
                    "unknown handler setting; it is ignored", file=file, key=f"{key}.{sub}"
                )
        if path:
            handlers[kind] = handler
    return handlers


def parse_item_extensions(load: Load, value: Any, file: str) -> dict[str, Schema]:
    """`[[responseItemExtensions]]`: `{type = "ns:name", dataSchema = "...", description?}`."""
    key = "responseItemExtensions"
    if not isinstance(value, list):
        load.diag.error(
            f"must be an array of tables, not {type_name(value)}",
            file=file,
            key=key,
            hint='[[responseItemExtensions]]\ntype = "acme:search"\ndataSchema = "./search.json"',
        )
        return {}
    out: dict[str, Schema] = {}
    for index, entry in enumerate(value):
        where = f"{key}[{index}]"
        if not isinstance(entry, dict):
            load.diag.error(f"must be a table, not {type_name(entry)}", file=file, key=where)
            continue
        kind = entry.get("type")
        if not isinstance(kind, str) or not kind.strip():
            load.diag.error(
                "a response item extension must include a type",
                file=file,
                key=f"{where}.type",
                hint='e.g. type = "acme:search"',
            )
            continue
        if ":" not in kind:
            load.diag.error(
                f"response item extension type {kind!r} must be namespaced (namespace:type)",
                file=file,
                key=f"{where}.type",
                hint=f'e.g. type = "myapp:{kind}"',
            )
            continue
        if kind in out:
            load.diag.error(
                f"duplicate response item extension type {kind!r}",
                file=file,
                key=f"{where}.type",
            )
            continue
        flag_unknown_keys(
            load.diag.warn,
            entry,
            ("type", "dataSchema", "description"),
            file,
            f"{where}.",
            "unknown key; it is ignored",
            "keys are type, dataSchema and description",
        )
        if "dataSchema" not in entry:
            load.diag.error(
                f"response item extension {kind!r} must include dataSchema",
                file=file,
                key=f"{where}.dataSchema",
                hint='e.g. dataSchema = "./schemas/search.json"',
            )
            continue
        schema = resolve_schema(load, entry["dataSchema"], file, f"{where}.dataSchema")
        if schema is not None:
            out[kind] = schema
    return out
