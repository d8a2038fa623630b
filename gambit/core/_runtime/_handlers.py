"""The deck's handlers (docs/decks.md, "Handlers"): onIdle, onBusy (alias onInterval), onError.

Each handler is a deck run as a child with a payload describing what happened; its text
answer is streamed to the user and kept in the conversation. A handler's failure never
affects the run.

- onIdle: while the model is called, a watcher task fires the handler once the run has had
  no activity (stream events, tool results) for `delayMs`, then every `repeatMs` if set.
- onBusy: while an action runs, a `_Busy` timer fires the handler after `delayMs`, then every
  `repeatMs` if set. An action that outlasted `delayMs` before the timer got to fire still
  gets one (late) firing when it ends.
- onError: when an action fails, the handler's answer becomes the action's result (status
  500) instead of failing the run.

Mixed into `_LlmExecution` (see `_llm`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from .._deck import ActionDecl, Deck, HandlerDecl
from .._openresponses import message_item
from .._permissions import EffectivePermissions, PermissionSet
from . import _execute
from ._common import DeckCodeError, _json
from ._limits import _Limits
from ._run import _Run
from ._validation import _envelope_fields

if TYPE_CHECKING:
    from ._tool_calls import _ToolCall

DEFAULT_HANDLER_DELAY_MS = 800


class _Handlers:
    """The handler side of `_LlmExecution`."""

    run: _Run
    deck: Deck
    depth: int
    parent: str | None
    action_call_id: str
    limits: _Limits
    items: list[Any]
    last_activity: float
    permissions: EffectivePermissions | None

    @property
    def _handler_parent_permissions(self) -> PermissionSet | None:
        """A handler is a child of the deck that declares it: it starts from this deck's
        effective permissions, never from the host's."""
        return self.permissions.permissions if self.permissions is not None else None

    def _idle_watcher(self) -> asyncio.Task[None] | None:
        handler = self.deck.handlers.get("onIdle")
        if handler is None:
            return None
        return asyncio.create_task(self._watch_idle(handler))

    async def _watch_idle(self, handler: HandlerDecl) -> None:
        delay = (
            handler.delay_ms if handler.delay_ms is not None else DEFAULT_HANDLER_DELAY_MS
        ) / 1000
        clock = self.limits.clock
        fired = False
        while True:
            wait = self.last_activity + delay - clock.monotonic()
            if wait > 0:
                await clock.sleep(wait)
                continue
            if fired and not handler.repeat_ms:
                return
            idle_ms = int((clock.monotonic() - self.last_activity) * 1000)
            payload = {
                "kind": "idle",
                "label": self.deck.label,
                "source": {"deckPath": self.deck.path},
                "trigger": {"reason": "idle_timeout", "elapsedMs": idle_ms},
            }
            text = await self._run_handler(handler, payload, self.parent)
            if text:
                self.run.stream_text(text + "\n")
                self.items.append(message_item("assistant", f"{text} (idle for {idle_ms}ms)"))
            fired = True
            self.last_activity = clock.monotonic()
            if handler.repeat_ms:
                delay = handler.repeat_ms / 1000

    async def _execute_handler(
        self, handler: HandlerDecl, payload: dict[str, Any], parent_action_call_id: str
    ) -> Any:
        """Run a handler deck (a child of this deck) on `payload`; its output."""
        return await _execute.execute_deck(
            self.run,
            self.run.deck(handler.path),
            payload,
            depth=self.depth + 1,
            parent_action_call_id=parent_action_call_id,
            limits=self.limits,
            parent_permissions=self._handler_parent_permissions,
        )

    async def _run_handler(
        self, handler: HandlerDecl, payload: dict[str, Any], parent: str | None
    ) -> str:
        """Run a busy or idle handler; its failures never affect the run."""
        try:
            output = await self._execute_handler(handler, payload, parent or self.action_call_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            return ""
        if isinstance(output, str):
            return output.strip()
        if isinstance(output, dict) and isinstance(output.get("message"), str):
            return output["message"].strip()
        return _json(output) if output is not None else ""

    async def _handle_error(
        self, handler: HandlerDecl, action: ActionDecl, call: _ToolCall, exc: Exception
    ) -> dict[str, Any]:
        message = (
            str(exc.__cause__) if isinstance(exc, DeckCodeError) and exc.__cause__ else str(exc)
        )
        payload = {
            "kind": "error",
            "label": action.label or self.deck.label,
            "source": {"deckPath": self.deck.path, "actionName": action.name},
            "error": {"message": message},
            "childInput": call.args,
        }
        try:
            out = await self._execute_handler(handler, payload, call.call_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            return {
                "status": 500,
                "message": f"Handled error: {message}",
                "code": "HANDLER_FALLBACK",
                "payload": payload,
                "meta": {"handlerFailed": True},
            }
        out_dict = out if isinstance(out, dict) else {}
        body: dict[str, Any] = {"status": 500, "message": message, **_envelope_fields(out_dict)}
        body["payload"] = out_dict.get("payload", out)
        return body

    def _busy_watcher(self, action: ActionDecl, call: _ToolCall) -> _Busy | None:
        handler = self.deck.handlers.get("onBusy")
        if handler is None:
            return None
        busy = _Busy(self, handler, action, call)
        busy.task = asyncio.create_task(busy.loop())
        return busy


class _Busy:
    """The onBusy timer for one action call."""

    def __init__(
        self, execution: _Handlers, handler: HandlerDecl, action: ActionDecl, call: _ToolCall
    ):
        self.execution = execution
        self.handler = handler
        self.action = action
        self.call = call
        self.clock = execution.limits.clock
        self.started = self.clock.monotonic()
        self.fired = False
        self.items: list[Any] = []
        self.task: asyncio.Task[None] | None = None
        self.delay = (
            handler.delay_ms if handler.delay_ms is not None else DEFAULT_HANDLER_DELAY_MS
        ) / 1000

    async def loop(self) -> None:
        await self.clock.sleep(self.delay)
        while True:
            await self.fire()
            if not self.handler.repeat_ms:
                return
            await self.clock.sleep(self.handler.repeat_ms / 1000)

    async def fire(self) -> None:
        elapsed = int((self.clock.monotonic() - self.started) * 1000)
        ex = self.execution
        payload = {
            "kind": "busy",
            "label": self.action.label or ex.deck.label,
            "source": {"deckPath": ex.deck.path, "actionName": self.action.name},
            "trigger": {"reason": "timeout", "elapsedMs": elapsed},
            "childInput": self.call.args,
        }
        self.fired = True
        text = await ex._run_handler(self.handler, payload, self.call.call_id)
        if text:
            ex.run.stream_text(text + "\n")
            self.items.append(message_item("assistant", f"{text} (elapsed {elapsed}ms)"))


async def _stop_busy(busy: _Busy | None, *, fire_late: bool, elapsed: float = 0.0) -> list[Any]:
    if busy is None:
        return []
    assert busy.task is not None
    busy.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await busy.task
    if fire_late and not busy.fired and elapsed >= busy.delay:
        await busy.fire()
    return busy.items
