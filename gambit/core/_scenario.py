"""The scenario loop: a persona deck (a synthetic user) talks to a root deck (docs/decks.md,
"Scenarios").

The root honours its `startMode` (default "assistant": it speaks first). The persona keeps
its own conversation, in which the root's replies are the user messages. The loop stops
when the persona sends an empty message or an end signal, when the root ends the session,
or after `max_turns` persona messages. Before the first turn, required context fields of
the root that are missing are filled by the persona (the init-fill protocol of
`gambit://snippets/init.md`).

A compute root keeps no conversation of its own: each persona message is its input (as in
`gambit run DECK --message` and the simulator's chat), and the loop records the exchange, the
persona's message and the deck's answer, in the root's state, where graders read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ._compute import input_from_text
from ._deck import Deck, DeckTree
from ._errors import GambitError
from ._ids import new_id
from ._loader import as_tree
from ._permissions import entry_permissions
from ._provider import ModelProvider
from ._runtime import _MISSING, RunError, is_end_signal, run_deck
from ._schema import Schema, SchemaValidationError
from ._state import SavedState, new_state, state_messages, with_exchange

FIRST_TURN_PROMPT = (
    "Start the conversation as the user. Do not wait for the assistant to speak first."
)
StopReason = Literal["persona_done", "persona_ended", "root_ended", "max_turns"]


class ScenarioError(GambitError):
    """The scenario could not run (for example the persona could not fill the context)."""


@dataclass
class ScenarioResult:
    """A finished scenario: the conversation, how many turns it took and why it stopped."""

    state: SavedState
    turns: int
    stopped: StopReason
    context: Any = None


def _text(output: Any) -> str:
    if is_end_signal(output):
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and "payload" in output:
        output = output["payload"]
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _last_assistant_text(state: SavedState | None) -> str:
    if state is None:
        return ""
    for message in reversed(state_messages(state)):
        if message.role == "assistant" and message.content:
            return message.content
    return ""


def missing_context_fields(schema: Schema | None, context: Any) -> list[str]:
    """Required top-level fields of an object context schema that have no value."""
    if schema is None:
        return []
    if schema.is_optional and (context is _MISSING or context is None):
        return []  # an optional context given nothing has nothing missing
    if not schema.is_object:
        return ["(root)"] if context is _MISSING or context in (None, "") else []
    current = context if isinstance(context, dict) else {}
    return [name for name in schema.required_fields() if current.get(name) in (None, "", [], {})]


def _schema_hints(schema: Schema, fields: list[str]) -> list[dict[str, Any]]:
    props = schema.to_json_schema().get("properties", {}) if schema.is_object else {}
    hints = []
    for path in fields:
        spec = props.get(path, schema.to_json_schema() if path == "(root)" else {})
        hint: dict[str, Any] = {
            "path": path,
            "kind": "enum" if "enum" in spec else spec.get("type", "any"),
        }
        if spec.get("description"):
            hint["description"] = spec["description"]
        if "enum" in spec:
            hint["enumValues"] = spec["enum"]
        hints.append(hint)
    return hints


async def run_scenario(
    root: str | Path | Deck | DeckTree,
    persona: str | Path | Deck | DeckTree,
    *,
    provider: ModelProvider,
    context: Any = _MISSING,
    scenario_input: Any = _MISSING,
    message: Any = None,
    state: SavedState | None = None,
    max_turns: int = 12,
    on_turn: Callable[[str, str], None] | None = None,
    on_state: Callable[[SavedState], None] | None = None,
    on_stream_text: Callable[[str, str], None] | None = None,
    strict: bool = False,
    persona_options: Mapping[str, Any] | None = None,
    **run_options: Any,
) -> ScenarioResult:
    """Run the persona loop; `on_turn(role, text)` sees each message ("user" is the persona).

    `context` is the root deck's (missing required fields are filled in by the persona);
    `scenario_input` is the persona deck's own context, validated against its contextSchema
    and given to it when its conversation starts.

    `run_options` go to every `run_deck` call (provider routing, mode, tracing, stream);
    their `project_root` also bounds the decks given by path (default: the root tree's).
    `persona_options` replace some of them for the persona's calls only: the persona is not
    the deck under test, so `{"model_override": None}` keeps its own model while the root's is
    forced (`gambit scenario --model-force`; docs/decisions.md, "Which model each deck
    gets").
    """
    root_tree = as_tree(root, strict=strict, project_root=run_options.get("project_root"))
    # A persona given by path lies in the root deck's project unless told otherwise.
    project_root = run_options.get("project_root") or root_tree.project_root
    persona_tree = as_tree(persona, strict=strict, role="scenario", project_root=project_root)
    root_deck = root_tree.root
    # A persona the root declares in [[scenarios]] is narrowed by that entry's permissions.
    persona_entry = entry_permissions(root_deck.scenarios, persona_tree.root.path, root_deck.path)
    scenario_run_id = new_id("scenario")
    persona_state: SavedState | None = None
    root_state = state
    stream_for = (
        (lambda who: lambda text: on_stream_text(who, text))
        if on_stream_text
        else (lambda who: None)
    )

    def publish(new_state: SavedState, *, persona_message: bool = False) -> None:
        nonlocal root_state
        meta = dict(new_state.meta or {})
        meta.setdefault("scenarioRunId", scenario_run_id)
        meta["scenarioPath"] = persona_tree.root.path
        new_state.meta = meta
        if persona_message and new_state.message_refs:
            for ref, msg in zip(new_state.message_refs, state_messages(new_state), strict=False):
                if msg.role == "user" and ref.source is None:
                    ref.source = "scenario"
        root_state = new_state
        if on_state is not None:
            on_state(new_state)

    async def persona_says(prompt: str) -> Any:
        nonlocal persona_state
        result = await run_deck(
            persona_tree,
            provider=provider,
            context=scenario_input if persona_state is None else _MISSING,
            message=prompt,
            state=persona_state,
            on_stream_text=stream_for("user"),
            strict=strict,
            **{"entry_permissions": persona_entry, **run_options, **(persona_options or {})},
        )
        persona_state = result.state
        return result.output

    # Context: fill missing required fields from the persona (init-fill protocol).
    if root_state is None:
        missing = missing_context_fields(root_deck.context_schema, context)
        if missing and root_deck.context_schema is not None:
            current = context if isinstance(context, dict) else {}
            request = {
                "type": "gambit_test_bot_init_fill",
                "missing": missing,
                "current": current,
                "schemaHints": _schema_hints(root_deck.context_schema, missing),
            }
            reply = _text(await persona_says(json.dumps(request, ensure_ascii=False)))
            persona_state = None  # the fill exchange is not part of the scenario conversation
            try:
                filled = json.loads(
                    reply.strip().removeprefix("```json").removesuffix("```").strip()
                )
            except ValueError:
                raise ScenarioError(
                    f"the persona's init fill reply is not JSON: {reply[:200]!r}"
                ) from None
            if missing == ["(root)"]:
                context = filled
            elif isinstance(filled, dict):
                context = {**current, **{k: filled[k] for k in missing if k in filled}}
            try:
                context = root_deck.context_schema.validate(context)
            except SchemaValidationError as exc:
                raise ScenarioError(
                    f"the persona's init fill does not match the context schema: {exc}"
                ) from None

    async def root_says(user_text: str | None, *, first: bool) -> Any:
        if root_deck.kind == "compute":
            return await compute_root_says(user_text, first=first)
        result = await run_deck(
            root_tree,
            provider=provider,
            context=context if first and root_state is None else _MISSING,
            message=user_text,
            state=root_state,
            on_state=lambda s: publish(s, persona_message=user_text is not None),
            on_stream_text=stream_for("assistant"),
            strict=strict,
            **run_options,
        )
        publish(result.state, persona_message=user_text is not None)
        return result.output

    async def compute_root_says(user_text: Any, *, first: bool) -> Any:
        # `message` may be a value (a JSON --message) rather than text: it is the input as is
        if user_text is None:
            given = context if first and root_state is None else _MISSING
        elif isinstance(user_text, str):
            given = input_from_text(user_text)
        else:
            given, user_text = user_text, json.dumps(user_text, ensure_ascii=False)
        result = await run_deck(
            root_tree,
            provider=provider,
            context=given,
            state=root_state or new_state(),
            on_stream_text=stream_for("assistant"),
            strict=strict,
            **run_options,
        )
        exchanged = with_exchange(result.state, user_text, _text(result.output))
        publish(exchanged, persona_message=user_text is not None)
        return result.output

    turns = 0

    def finish(stopped: StopReason) -> ScenarioResult:
        if root_state is None:
            raise RunError("the scenario produced no conversation", code="scenario_empty")
        return ScenarioResult(root_state, turns, stopped, context)

    start_mode = root_deck.start_mode or "assistant"
    first = True
    if message is not None or (start_mode == "assistant" and root_state is None):
        output = await root_says(message, first=True)
        first = False
        if message is not None and on_turn:
            on_turn("user", message if isinstance(message, str) else json.dumps(message))
        if on_turn:
            on_turn("assistant", _text(output))
        if is_end_signal(output):
            return finish("root_ended")
    while turns < max_turns:
        prompt = _last_assistant_text(root_state) or FIRST_TURN_PROMPT
        said = await persona_says(prompt)
        if is_end_signal(said):
            return finish("persona_ended")
        text = _text(said).strip()
        if not text:
            return finish("persona_done")
        turns += 1
        if on_turn:
            on_turn("user", text)
        output = await root_says(text, first=first)
        first = False
        if on_turn:
            on_turn("assistant", _text(output))
        if is_end_signal(output):
            return finish("root_ended")
    return finish("max_turns")
