"""Compute decks: Python modules whose `run(ctx)` produces the deck's output (docs/decks.md,
"What runs").

`_run_compute` builds the `ComputeContext`, calls `run(ctx)` under the run's deadline in a
daemon thread (`_deck_thread`: an async `run` on an event loop of that thread), so deck code
can neither block the run's loop nor outlive its deadline, then validates the result against
the responseSchema. A child whose result is an action
result envelope has only its `payload` validated; the rest goes to the parent.

Through `ctx` a deck logs (`log` trace events), reads and writes session meta, appends
messages to the session's conversation, runs other decks as children (`spawn_and_wait`)
and emits intermediate output items, which are traced as a `response.*` stream of their
own (`<actionCallId>:intermediate`) and reach the parent in the action's envelope.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

from .._compute import DeckDefinition
from .._deck import Deck
from .._depth import MAX_VALUE_DEPTH
from .._errors import GambitError
from .._ids import new_id
from .._openresponses import message_item
from .._permissions import PermissionSet
from .._schema import Schema
from .._state import new_state, state_items
from .._trace import LogEvent
from . import _execute
from ._common import _MISSING, DeckCodeError, DeckFailure, RunError, _json
from ._deck_thread import call_deck_code, current_deck_call
from ._limits import _Limits
from ._run import _RootState, _Run
from ._validation import _is_envelope, _validate_output, check_extension_item


class ComputeContext:
    """The `ctx` a compute deck's `run(ctx)` receives."""

    def __init__(
        self,
        run: _Run,
        deck: Deck,
        input: Any,
        depth: int,
        action_call_id: str,
        parent_action_call_id: str | None,
        limits: _Limits,
        message: Any,
        root_state: _RootState | None,
        loop: asyncio.AbstractEventLoop,
        *,
        permissions: PermissionSet,
    ):
        self._run = run
        self._permissions = permissions  # what the decks it spawns start from
        self._deck = deck
        self.input = None if input is _MISSING else input
        self.depth = depth
        self.run_id = run.run_id
        self.action_call_id = action_call_id
        self.parent_action_call_id = parent_action_call_id
        self.label = deck.label
        self.initial_user_message = message
        self._limits = limits
        self._given_state = root_state
        self._loop = loop
        self.emitted_items: list[dict[str, Any]] = []
        self._sequence = 0
        self._spawned: list[Any] = []  # futures of children spawned from a sync run

    def log(self, entry: Any = None, **fields: Any) -> None:
        """Trace a `log` event: `ctx.log("text")` or `ctx.log({"message", "level", "title", "body", "meta"})`."""
        data = dict(entry) if isinstance(entry, dict) else {"message": entry}
        data.update(fields)
        message = data.get("message")
        text = message if isinstance(message, str) or message is None else _json(message)
        level = (
            data.get("level") if data.get("level") in ("debug", "info", "warn", "error") else "info"
        )
        self._run.trace(
            LogEvent,
            deck_path=self._deck.path,
            action_call_id=self.action_call_id,
            parent_action_call_id=self.parent_action_call_id,
            level=level,
            title=data.get("title") or (text or None),
            message=text,
            body=data.get("body", text),
            meta=data.get("meta"),
        )

    @property
    def _root_state(self) -> _RootState:
        """The session state: the root's, or for a child compute deck called as an action a
        state of its own, made when first used (most actions never use it)."""
        state = self._given_state
        if state is None:
            run = self._run
            state = self._given_state = _RootState(
                new_state(run.mode, run_id=run.run_id), None, run.mode
            )
        return state

    def _on_run_loop(self, step: Callable[[], Any]) -> Any:
        """`step()` on the run's loop, waited for. The session state belongs to the run's
        loop: children spawned by an async `run` change it there while the deck's code goes
        on in its own thread, so the deck's changes are made there too, one at a time."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return step()
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def on_loop() -> None:
            try:
                done.set_result(step())
            except BaseException as exc:
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(on_loop)
        return done.result()

    def get_session_meta(self, key: str) -> Any:
        if not key:
            return None
        return self._on_run_loop(lambda: (self._root_state.state.meta or {}).get(key))

    def set_session_meta(self, key: str, value: Any) -> None:
        if not key:
            return

        def change() -> None:
            state = self._root_state.state
            meta = dict(state.meta or {})
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value
            state.meta = meta or None
            self._root_state.publish()

        self._on_run_loop(change)

    def append_message(self, role: str, content: Any) -> None:
        """Add a user or assistant message to the session's conversation."""
        if role not in ("user", "assistant"):
            raise ValueError("append_message role must be 'user' or 'assistant'")
        text = content if isinstance(content, str) else _json(content)
        if not text.strip():
            return

        def change() -> None:
            items = list(state_items(self._root_state.state))
            items.append(message_item(cast(Literal["user", "assistant"], role), text.strip()))
            self._root_state.publish(items)

        self._on_run_loop(change)

    def emit_output_item(self, item: dict[str, Any]) -> None:
        """Emit a supplemental output item to the parent before this action completes."""
        if not isinstance(item, dict) or not isinstance(item.get("type"), str) or not item["type"]:
            raise ValueError("emit_output_item needs an item object with a non-empty type")
        check_extension_item(self._deck, item, "ctx.emit_output_item")
        index = len(self.emitted_items)
        if index == 0:
            self._emit_response_event(
                "response.created",
                response={
                    "id": self._response_id,
                    "object": "response",
                    "status": "in_progress",
                    "output": [],
                },
            )
        for kind in ("response.output_item.added", "response.output_item.done"):
            self._emit_response_event(
                kind, response_id=self._response_id, output_index=index, item=item
            )
        self.emitted_items.append(
            {
                "responseId": self._response_id,
                "actionCallId": self.action_call_id,
                "parentActionCallId": self.parent_action_call_id,
                "deckPath": self._deck.path,
                "outputIndex": index,
                "item": item,
            }
        )

    @property
    def _response_id(self) -> str:
        return f"{self.action_call_id}:intermediate"

    def _emit_response_event(self, type_: str, **fields: Any) -> None:
        meta = {
            "run_id": self.run_id,
            "action_call_id": self.action_call_id,
            "deck_path": self._deck.path,
        }
        if self.parent_action_call_id:
            meta["parent_action_call_id"] = self.parent_action_call_id
        self._sequence += 1
        self._run.trace_response(type_, {"sequence_number": self._sequence, "gambit": meta}, fields)

    def _complete_emitter(self, ok: bool, error: str | None = None) -> None:
        if not self.emitted_items:
            return
        if ok:
            output = [entry["item"] for entry in self.emitted_items]
            self._emit_response_event(
                "response.completed",
                response={
                    "id": self._response_id,
                    "object": "response",
                    "status": "completed",
                    "output": output,
                },
            )
        else:
            self._emit_response_event(
                "response.failed", response_id=self._response_id, error={"message": error}
            )

    def fail(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        """Fail this deck with a message (and an optional machine-readable code)."""
        raise DeckFailure(
            message, code=code or "deck_failed", deck_path=self._deck.path, details=details
        )

    def spawn_and_wait(self, path: str, input: Any = None, *, message: Any = _MISSING) -> Any:
        """Run another deck as a child and return its validated output.

        In an async `run`, await the result; in a sync `run` it blocks until the child
        finishes. Either way the child runs on the run's loop: deck code runs in a thread of
        its own (an async `run` on that thread's loop), so the call crosses over.
        """
        coro = self._spawn(path, input, message)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return coro
        call = current_deck_call()
        if call is None:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
            self._spawned.append(future)
        else:
            # A stop of the deck's code must not land between scheduling the child and
            # recording it (an unrecorded child outlives its cancelled parent).
            with call.lock:
                call.hold_off_stop()
                future = asyncio.run_coroutine_threadsafe(coro, self._loop)
                self._spawned.append(future)
        if running is not None:  # an async run on its thread's own loop awaits it there
            return asyncio.wrap_future(future, loop=running)
        return future.result()

    def _cancel_spawned(self) -> None:
        for future in self._spawned:
            future.cancel()

    async def _spawn(self, path: str, input: Any, message: Any) -> Any:
        self._limits.check(self._deck.path)
        target = str((Path(self._deck.path).parent / path).resolve())
        child = self._run.deck(target)
        child_message = self.initial_user_message if message is _MISSING else message
        state = self._root_state
        return await _execute.execute_deck(
            self._run,
            child,
            input,
            depth=self.depth + 1,
            parent_action_call_id=self.action_call_id,
            limits=self._limits,
            message=child_message,
            root_state=state,  # the session state, shared with the child (its meta, its messages)
            resumed=bool(state is not None and state_items(state.state)),
            parent_permissions=self._permissions,
        )


async def _run_compute(
    run: _Run,
    deck: Deck,
    definition: DeckDefinition,
    context: Any,
    depth: int,
    parent_action_call_id: str | None,
    limits: _Limits,
    message: Any,
    root_state: _RootState | None,
    emitted: list[dict[str, Any]] | None,
    response_schema: Schema | None = None,
    *,
    permissions: PermissionSet,
) -> Any:
    action_call_id = new_id("action")
    loop = asyncio.get_running_loop()
    ctx = ComputeContext(
        run,
        deck,
        context,
        depth,
        action_call_id,
        parent_action_call_id,
        limits,
        message,
        root_state,
        loop,
        permissions=permissions,
    )
    limits.check(deck.path)
    try:
        # The deck's code runs in a daemon thread (_deck_thread): a busy loop
        # cannot block this loop, the deadline stops it, and whatever it raises comes back
        # here as a value; SystemExit or KeyboardInterrupt included, it is the deck's error.
        result, raised = await call_deck_code(
            definition.run,
            ctx,
            limits=limits,
            deck_path=deck.path,
            on_abandon=ctx._cancel_spawned,
        )
        if raised is not None:
            if isinstance(raised, GambitError):  # ctx.fail, a child's failure: as it is
                raise raised
            raise DeckCodeError(deck.path, raised) from raised
        limits.check(deck.path)
        schema = response_schema if response_schema is not None else deck.response_schema
        if schema is None:  # checked before: a root's output without a schema becomes JSON text
            _check_json_output(result, deck.path)
        if depth > 0 and _is_envelope(result):
            # The payload is validated; status, message, code and meta go to the parent.
            output = {
                **result,
                "payload": _validate_output(
                    schema, result["payload"], deck_path=deck.path, is_root=False
                ),
            }
        else:
            output = _validate_output(schema, result, deck_path=deck.path, is_root=depth == 0)
        if schema is not None:  # checked after: validation may have coerced the value
            _check_json_output(output, deck.path)
    except BaseException as exc:
        ctx._cancel_spawned()
        ctx._complete_emitter(False, str(exc))
        raise
    ctx._complete_emitter(True)
    if emitted is not None:
        emitted.extend(ctx.emitted_items)
    return output


def _check_json_output(value: Any, deck_path: str) -> None:
    """A deck's output is JSON: it is printed, traced, saved and sent to models as JSON. A
    value JSON cannot represent (a set, bytes, an object; NaN or Infinity, which strict JSON
    has no words for) fails the deck here, naming it and where the value was."""
    try:
        json.dumps(value, allow_nan=False)
        return
    except (TypeError, ValueError, RecursionError) as exc:
        problem = _non_json(value, "output") or ("output", str(exc))
    where, what = problem
    raise RunError(
        f"{deck_path} returned {what} at {where}, which JSON cannot represent "
        "(fix: return only dicts with string keys, lists, strings, finite numbers, "
        "booleans and None)",
        code="invalid_output",
        deck_path=deck_path,
    )


def _non_json(value: Any, path: str, ancestors: tuple[int, ...] = ()) -> tuple[str, str] | None:
    """Where in `value` the first thing JSON cannot represent is, and what it is."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return (path, "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity")
    if id(value) in ancestors:
        return (path, "a circular reference")
    if len(ancestors) >= MAX_VALUE_DEPTH:
        return (path, f"a value nested more than {MAX_VALUE_DEPTH} levels deep")
    inside = (*ancestors, id(value))
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str | int | float | bool) and key is not None:
                return (path, f"a key of type {type(key).__name__} ({key!r:.40})")
            found = _non_json(item, f"{path}.{key}", inside)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _non_json(item, f"{path}[{index}]", inside)
            if found is not None:
                return found
        return None
    return (path, f"a value of type {type(value).__name__} ({value!r:.40})")
