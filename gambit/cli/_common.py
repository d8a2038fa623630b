"""What the run-like commands share: options, mode selection, providers, traces, output."""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
import re
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click

from gambit.cli._options import Decorator, options_in_order, path_option
from gambit.cli._project import allow_path_option
from gambit.core import (
    MISSING,
    DeckError,
    GambitError,
    SavedState,
    TraceWriter,
    deck_warning,
    is_end_signal,
    load_deck_tree,
    load_state,
    save_state,
)
from gambit.env import env_flag
from gambit.otel import configured as otel_configured  # reads the environment, imports no SDK
from gambit.providers import ProviderRouter  # with the command: start-up's freeze covers it


def parse_value(raw: str | None, option: str = "--context") -> Any:
    """`--context` / `--message` values: JSON when they parse as JSON, else the raw string.

    JSON nested past the engine's limit is refused here, naming `option` and the limit."""
    if raw is None:
        return MISSING
    from gambit.core import MAX_VALUE_DEPTH, too_deep

    try:
        value = json.loads(raw)
        deep = too_deep(value)
    except RecursionError:
        deep = True
    except ValueError:
        return raw
    if deep:
        fail(
            f"{option}: the JSON value is nested more than {MAX_VALUE_DEPTH} levels deep "
            "(fix: flatten it)"
        )
    return value


def select_mode(responses_flag: bool, env: Mapping[str, str]) -> str:
    """The mode of the model calls (docs/decisions.md, "Running"): `--responses` wins, then
    GAMBIT_CHAT_FALLBACK=1 (chat); otherwise responses, the default (GAMBIT_RESPONSES_MODE=1
    is accepted and means the default)."""
    if responses_flag:
        return "responses"
    if env_flag(env, "GAMBIT_CHAT_FALLBACK"):
        return "chat"
    return "responses"


def context_option(context: str | None, init: str | None) -> Any:
    if context is not None and init is not None:
        raise click.UsageError(
            "use --context or --init, not both (--init is a deprecated alias of --context)"
        )
    if init is not None:
        click.echo("warning: --init is deprecated; use --context", err=True)
        return parse_value(init, "--init")
    return parse_value(context)


OFFLINE_FALLBACK_MODEL = "offline/demo"


def make_router(deck_path: Path) -> Any:
    """The provider router for a command. A deck whose models have no configured provider is
    answered by the offline demo model, with a note on stderr, so every command works without
    an API key; GAMBIT_REQUIRE_PROVIDER=1 makes that an error instead (for CI).

    The note is printed once per command and cause (a deck that names no model, a provider
    not configured), for the first such deck: a scenario with a grader reaches four decks
    that name the same model, and one missing key is one thing to fix."""
    told: set[bool] = set()  # a note per cause: no model named, or no provider configured

    def note(deck: str | None, tried: str) -> None:
        named = bool(tried)
        if named in told:
            return
        told.add(named)
        where = shown_path(deck) if deck else "this deck"
        if not named:
            click.echo(
                f"note: {where} names no model and no --model was given; the offline demo "
                f'model ({OFFLINE_FALLBACK_MODEL}) answers it. Add model = "..." under '
                "[modelParams] or pass --model MODEL; GAMBIT_REQUIRE_PROVIDER=1 makes this an "
                "error.",
                err=True,
            )
            return
        click.echo(
            f"note: no configured provider for {where} "
            f"(tried {tried}); the offline demo model ({OFFLINE_FALLBACK_MODEL}) answers "
            "instead, for it and any other deck whose provider is not configured. Set the "
            "provider's key or pass --model-force MODEL; GAMBIT_REQUIRE_PROVIDER=1 makes this "
            "an error.",
            err=True,
        )

    require = env_flag(os.environ, "GAMBIT_REQUIRE_PROVIDER")
    from gambit.providers import load_config

    return ProviderRouter(
        config=without_foreign_base_urls(load_config(deck_path.resolve().parent)),
        env=os.environ,
        offline_fallback=None if require else OFFLINE_FALLBACK_MODEL,
        on_offline_fallback=note,
    )


def without_foreign_base_urls(config: Any) -> Any:
    """`config` without the `[providers.*] base_url` of a gambit.toml that lies outside the
    current folder's tree (beside decks from elsewhere), except addresses of this machine.

    The provider's API key comes from your environment, so such a file could send it to any
    host: a Markdown deck is data, and running one must not hand your key to its author
    (docs/decisions.md, "Whose gambit.toml says where keys go"). Warned about, once each."""
    if config.path is None:
        return config
    try:
        Path.cwd().resolve().relative_to(config.path.resolve().parent)
        return config  # the project you are working in
    except (ValueError, OSError):
        pass
    # Imported here: a run from its own project (the usual case) needs none of them.
    import dataclasses
    import ipaddress
    from urllib.parse import urlsplit

    def local(url: str) -> bool:
        host = urlsplit(url).hostname or ""
        try:
            return host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    settings = {}
    for name, table in config.provider_settings.items():
        url = table.get("base_url")
        if isinstance(url, str) and url and not local(url):
            warn_once(
                f"{shown_path(config.path)}: [providers.{name}] base_url = {url!r} is ignored: "
                "that gambit.toml lies outside the current folder, and your API key would go "
                f"there (fix: run gambit from {shown_path(config.path.parent)}, or set the "
                "provider's base URL variable, e.g. OPENAI_BASE_URL)"
            )
            table = {k: v for k, v in table.items() if k != "base_url"}
        settings[name] = table
    return dataclasses.replace(config, provider_settings=settings)


def shown_path(path: str | Path) -> str:
    """`path` as a person reads it here: relative to the current folder when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def compaction_settings(router: Any, no_compact: bool) -> Any:
    """The runtime's compaction settings: gambit.toml's [context], off with --no-compact."""
    config = getattr(router, "config", None)
    if config is None:
        from gambit.core import CompactionSettings

        return CompactionSettings(enabled=not no_compact)
    return config.compaction(enabled=not no_compact)


_WARNED: set[str] = set()


def strict_mode(flag: bool = False) -> bool:
    """`--strict`, or GAMBIT_STRICT=1: deprecations and other deck warnings are errors."""
    return flag or env_flag(os.environ, "GAMBIT_STRICT")


def load_tree(path: Path, *, strict: bool = False, role: str = "root") -> Any:
    """Load a deck tree to run it, inside its project root (`_project`); its warnings go to
    stderr once per deck per process."""
    from gambit.cli._project import project_root_for

    tree = load_deck_tree(
        path,
        strict=strict_mode(strict),
        role=role,  # type: ignore[arg-type]
        project_root=project_root_for(path),
    )
    for problem in tree.warnings:
        warn_once(problem.render())
    return tree


def warn_once(line: str) -> None:
    """A deck warning on stderr, once per process however often the deck is loaded."""
    if line not in _WARNED:
        _WARNED.add(line)
        click.echo(f"warning: {line}", err=True)


def read_state(path: Path | None) -> SavedState | None:
    """The state in `path`, or None when the file does not exist yet (it is created)."""
    if path is None or not path.exists():
        return None
    return load_state(path)


def otel_export() -> Any:
    """The OpenTelemetry span export of this command's runs, when the standard variables ask
    for one (OTEL_EXPORTER_OTLP_ENDPOINT, docs/observability.md); None otherwise, without
    importing the SDK. Without the SDK installed, one warning line and no export."""
    if not otel_configured(os.environ):
        return None
    try:
        from gambit.otel.live import exporter
    except ImportError as exc:
        warn_once(
            f"OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is missing ({exc}); "
            "install it with: pip install 'gambit-py[otel]'"
        )
        return None
    return exporter(lambda line: click.echo(line, err=True))


class TraceSink:
    """Writes `--trace` lines, prints `--verbose` lines and exports spans (OpenTelemetry),
    whichever is asked."""

    def __init__(self, trace_path: Path | None, verbose: bool):
        self.writer = TraceWriter(trace_path) if trace_path is not None else None
        self.verbose = verbose
        self.started = time.monotonic()
        self.otel = otel_export()
        self.spans = self.otel.sink() if self.otel is not None else None

    @staticmethod
    def wanted(trace_path: Path | None) -> bool:
        """Whether a command that traces only on request needs a sink: --trace, or an
        OpenTelemetry export."""
        return trace_path is not None or otel_configured(os.environ)

    def __call__(self, event: dict[str, Any]) -> None:
        if self.writer is not None:
            self.writer.write(event)
        if self.spans is not None:
            self.spans(event)
        warning = deck_warning(event)
        if warning is not None:
            warn_once(warning)  # a deck loaded during the run, too
        if self.verbose:
            if _STDOUT["open_line"] and _stdout_is_stderr():
                # streamed text left a line open on the terminal both share: end it first
                click.echo("", err=True)
                _STDOUT["open_line"] = False
            click.echo(self.describe(event), err=True)

    def describe(self, event: dict[str, Any]) -> str:
        elapsed = int((time.monotonic() - self.started) * 1000)
        kind = event.get("type", "?")
        detail = ""
        if kind in ("run.start", "deck.start", "deck.end"):
            detail = event.get("deckPath", "")
        elif kind in ("model.call", "model.result"):
            detail = f"{event.get('model')} {event.get('finishReason', '')}".strip()
        elif kind in ("tool.call", "tool.result", "action.start", "action.end"):
            tool_kind = event.get("toolKind")
            detail = f"{event.get('name')}" + (f" ({tool_kind})" if tool_kind else "")
        elif kind == "run.end":
            detail = f"{event.get('status')}" + (
                f": {event['error']}" if event.get("error") else ""
            )
        elif kind == "response.output_text.delta":
            detail = json.dumps(event.get("delta"), ensure_ascii=False)
        elif kind == "log":
            text = next(
                (
                    event[k]
                    for k in ("message", "title", "body", "meta")
                    if event.get(k) is not None
                ),
                "",
            )
            text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
            detail = f"[{event.get('level')}] {text}"
        # one line per event, whatever a message or an error holds
        detail = detail.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r")
        return f"[trace +{elapsed}ms] {kind} {detail}".rstrip()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.otel is not None and self.spans is not None:
            from gambit.otel.live import close_sink

            try:
                close_sink(self.spans)
                self.otel.close()
            except Exception as exc:  # the export never fails the command
                warn_once(f"OpenTelemetry export could not be closed: {type(exc).__name__}: {exc}")


def state_saver(path: Path | None) -> Callable[[SavedState], None] | None:
    if path is None:
        return None

    def save(state: SavedState) -> None:
        save_state(path, state)

    return save


def render_output(output: Any) -> str:
    """What `gambit run` prints: strings as they are, an end signal's message, else JSON.

    Strict JSON: NaN and Infinity, which json.dumps would print as no JSON reader parses
    them, raise ValueError (and a value JSON cannot encode, TypeError); see printable_output.
    """
    if is_end_signal(output):
        if isinstance(output.get("message"), str):
            return output["message"]
        return json.dumps(output.get("payload"), ensure_ascii=False, indent=2, allow_nan=False)
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, indent=2, allow_nan=False)


def printable_output(output: Any, deck: Path) -> str:
    """`render_output`, or one error line naming the deck whose output is not JSON."""
    try:
        return render_output(output)
    except (TypeError, ValueError) as exc:
        fail(
            f"{deck}: its output is not valid JSON ({exc}); fix: make the deck return only "
            "dicts, lists, strings, finite numbers, booleans and null"
        )


def run_async(coro: Coroutine[Any, Any, Any], *, verbose: bool = False) -> Any:
    """Run a command's coroutine; every failure becomes one line on stderr and exit code 1
    (with `verbose`, the traceback first)."""
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        fail("run canceled")
    except (GambitError, DeckError) as exc:
        _traceback(exc, verbose)
        fail(str(exc).splitlines()[0] if not isinstance(exc, DeckError) else _deck_error_line(exc))
    except OSError as exc:
        _traceback(exc, verbose)
        fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
    except Exception as exc:  # a bug of ours or of a library: still one line, never lost
        _traceback(exc, verbose)
        hint = "" if verbose else " (run with --verbose for the traceback)"
        fail(f"{type(exc).__name__}: {exc}{hint}")


def _traceback(exc: BaseException, verbose: bool) -> None:
    if verbose:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)


def _deck_error_line(exc: DeckError) -> str:
    problems = exc.problems
    first = problems[0].render() if problems else str(exc)
    if len(problems) > 1:
        return f"{first} (and {len(problems) - 1} more problems; run gambit check for all)"
    return first


def fail(message: str) -> NoReturn:
    if _STDOUT["open_line"] and _stdout_is_stderr():
        click.echo("", err=True)  # not after "assistant> " on the terminal's same line
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def trace_option(help: str = "Append one JSON trace event per line to this file.") -> Decorator:
    return path_option("--trace", "trace_path", help)


CONTEXT_OPTION = click.option(
    "--context", help="Context input for the deck (JSON, or a plain string)."
)
SCENARIO_INPUT_OPTION = click.option(
    "--scenario-input",
    help="Context input for each scenario deck, checked against its contextSchema (JSON, or a "
    "plain string).",
)


VERBOSE_OPTION = click.option(
    "--verbose", is_flag=True, help="Print one line per trace event on stderr."
)


MODEL_HELP = (
    "Model for the decks that name none; a deck's own [modelParams] model wins over it "
    "(--model-force replaces that)."
)
FORCE_HELP = (
    "Model for the deck under test and the decks it calls, replacing their own; never a "
    "scenario persona's or a grader's (see --scenario-model, --grader-model)."
)


def model_options(model_help: str = MODEL_HELP, force_help: str = FORCE_HELP) -> Decorator:
    """--responses, --model, --model-force, --strict and --no-compact: how the decks' models
    are called (every command that runs decks: run, repl, scenario, grade, verify)."""
    return options_in_order(
        click.option(
            "--responses",
            is_flag=True,
            help="Responses mode (the default; overrides GAMBIT_CHAT_FALLBACK=1).",
        ),
        click.option("--model", help=model_help),
        click.option("--model-force", help=force_help),
        click.option(
            "--strict",
            is_flag=True,
            help="Deprecated keys and other deck warnings are errors (also GAMBIT_STRICT=1).",
        ),
        click.option(
            "--no-compact",
            is_flag=True,
            help="Never compact a conversation near its model's context window "
            "(decks' compact setting and gambit.toml [context] notwithstanding).",
        ),
    )


def common_run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by run, repl and scenario."""
    return options_in_order(
        CONTEXT_OPTION,
        click.option("--init", help="Deprecated alias of --context.", hidden=False),
        click.option("--message", help="An initial user message (JSON, or a plain string)."),
        path_option("--state", "state_path", "SavedState JSON file to resume from and save to."),
        trace_option(),
        click.option("--stream", is_flag=True, help="Print text as it arrives."),
        VERBOSE_OPTION,
        model_options(),
        allow_path_option,
    )(func)


@dataclass
class RunFlags:
    """The options of `common_run_options`, parsed once."""

    context: Any
    message: Any
    state_path: Path | None
    trace_path: Path | None
    stream: bool
    verbose: bool
    mode: str
    model: str | None
    model_force: str | None
    strict: bool = False
    no_compact: bool = False

    @classmethod
    def parse(cls, options: dict[str, Any]) -> RunFlags:
        """From a command's options: those of `common_run_options`, or the part of them a
        command declares (an option it lacks is unset: no context, message, state, trace)."""
        return cls(
            context=context_option(options.get("context"), options.get("init")),
            message=parse_value(options.get("message"), "--message"),
            state_path=options.get("state_path"),
            trace_path=options.get("trace_path"),
            stream=options.get("stream", False),
            verbose=options.get("verbose", False),
            mode=select_mode(options["responses"], os.environ),
            model=options["model"],
            model_force=options["model_force"],
            strict=strict_mode(options.get("strict", False)),
            no_compact=options.get("no_compact", False),
        )

    @property
    def message_or_none(self) -> Any:
        return None if self.message is MISSING else self.message

    def run_options(
        self, router: Any, sink: TraceSink, *, stream: bool | None = None
    ) -> dict[str, Any]:
        """Keyword arguments for `run_deck` (and the scenario and grading helpers)."""
        return {
            "mode": self.mode,
            "stream": self.stream if stream is None else stream,
            "default_model": self.model,
            "model_override": self.model_force,
            "model_resolver": router,
            "on_trace": sink,
            # --strict / GAMBIT_STRICT=1 also for decks first loaded while the run goes on
            "strict": self.strict,
            # exec, a built-in tool, sees only the variables a deck's [permissions] env grants
            "host_env": dict(os.environ),
            "compaction": compaction_settings(router, self.no_compact),
        }


# Whether streamed text left stdout in the middle of a line (see TraceSink).
_STDOUT = {"open_line": False}


def _stdout_is_stderr() -> bool:
    """stdout and stderr are the same terminal, pipe or file (so their lines interleave)."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


def stdout_writer() -> Callable[[str], None]:
    def write(text: str) -> None:
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()
            _STDOUT["open_line"] = not text.endswith("\n")

    return write


def timestamped_path(root: Path, folder: str, suffix: str = "") -> Path:
    """`.gambit/<folder>/<deck>-<UTC time><suffix>`: where a command saves what a run of the
    deck at `root` (a PROMPT.md or a module) produced when no path is given."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    name = root.parent.name if root.name == "PROMPT.md" else root.stem
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "deck"
    # Two commands started in the same second get two places: "-2", "-3", ... A folder is
    # made here, so a second process cannot take it too; a file is only looked for.
    for n in range(1, 1000):
        path = Path(".gambit") / folder / f"{slug}-{stamp}{f'-{n}' if n > 1 else ''}{suffix}"
        if suffix:
            if not path.exists():
                return path
            continue
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
        except OSError:
            return path  # the command's own save says why it cannot write there
    return path


def deck_argument_exists(path: Path) -> None:
    if not path.exists():
        fail(f"{path}: deck file not found")
