"""Python compute decks: `define_deck(run=...)` is the public way to write one.

A compute module is a Python file with a module-level `deck = define_deck(...)`. It can be a
root deck (`gambit run path/to/deck.py`) or an `[[actions]].execute` target. `run(ctx)` may be
sync or async; `ctx` offers `input`, `log`, `spawn_and_wait`, `get_session_meta`,
`set_session_meta`, `append_message`, `emit_output_item` and `fail` (see the runtime).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SchemaSpec = Any  # a pydantic model class, a JSON Schema dict, or a schema reference string


@dataclass(frozen=True)
class DeckDefinition:
    """What `define_deck` returns. `kind` mirrors the TypeScript tag `gambit.deck`."""

    run: Callable[..., Any]
    context_schema: SchemaSpec | None = None
    response_schema: SchemaSpec | None = None
    label: str | None = None
    description: str | None = None
    kind: str = "gambit.deck"

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.run)


def definition_problems(definition: DeckDefinition) -> list[tuple[str, str]]:
    """(field, what is wrong) for each field of `definition` of the wrong type.

    `define_deck` raises for the first; the loader reports each one for a `DeckDefinition`
    a module built itself (the dataclass does not check its fields). The schemas are
    checked where they are read (a pydantic model, a JSON Schema dict or a reference).
    """
    problems = []
    run: object = definition.run  # typed as callable, but a module may build it with anything
    if not callable(run):
        problems.append(("run", f"must be a function run(ctx), not {_kind(run)}"))
    for name in ("label", "description"):
        value = getattr(definition, name)
        if value is not None and not isinstance(value, str):
            # A label is shown and sent as JSON: a float('nan') or b"x" would break both.
            problems.append((name, f"must be a string, not {_kind(value)}"))
    if definition.kind != "gambit.deck":
        problems.append(("kind", f'must be "gambit.deck", not {definition.kind!r}'))
    return problems


def _kind(value: Any) -> str:
    if isinstance(value, float | int) and not isinstance(value, bool):
        return repr(value)  # `not nan`, `not 5`: the value says more than "a number"
    return type(value).__name__


def define_deck(
    *,
    run: Callable[..., Any],
    context_schema: SchemaSpec | None = None,
    response_schema: SchemaSpec | None = None,
    label: str | None = None,
    description: str | None = None,
) -> DeckDefinition:
    """Define a compute deck.

    `run(ctx)` receives the validated input as `ctx.input` and returns the deck's result
    (a bare value, or an envelope `{payload, status?, message?, code?, meta?}`).
    Schemas may be pydantic model classes, JSON Schema dicts, or references such as
    `"gambit://schemas/scenarios/plain_chat_output.zod.ts"` or `"./schemas/input.json"`
    (relative to the module file).
    """
    definition = DeckDefinition(
        run=run,
        context_schema=context_schema,
        response_schema=response_schema,
        label=label,
        description=description,
    )
    if problems := definition_problems(definition):
        name, problem = problems[0]
        raise TypeError(f"define_deck({name}=...) {problem}")
    return definition


def input_from_text(text: str) -> Any:
    """A compute deck's input from what someone typed to it (a chat message, a scenario
    persona's line): the JSON object or array the text holds, else the text itself. A compute
    deck keeps no conversation, so each message is its input."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        import json

        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text
