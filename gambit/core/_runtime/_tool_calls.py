"""The model's tool calls, dispatched in order (docs/decks.md, "Actions and their results").

For each call the conversation gets the `function_call` item, then:

- `gambit_respond` (when the deck has `respond`) validates its payload against the
  responseSchema and finishes the deck with the envelope; an invalid payload is answered
  with a 400 error the model may correct;
- `gambit_end` (when `allowEnd`) ends the whole session with the end signal;
- anything else is traced (`action.start`, `tool.call`) and dispatched: an action runs its
  deck as a child (`_run_action`), a built-in tool runs within the deck's permissions, an
  external tool goes to the host's `on_tool`, an unknown name is a 404. The result is
  wrapped in an envelope, traced (`tool.result`, `action.end`) and appended as the
  `function_call_output`; after an action's result a `gambit_complete` call/output pair
  carrying the same envelope follows.

An external call the host defers (`on_tool` returns `TOOL_CALL_DEFERRED`) gets no output:
the batch goes on with the other calls, then the root deck's execution stops with every
deferred call of the pass (`_Paused`), and the host answers them all at once.

Mixed into `_LlmExecution` (see `_llm`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._builtin_tools import call_builtin_tool
from .._deck import ActionDecl
from .._depth import too_deep
from .._ids import new_id
from .._openresponses import FunctionCallItem, FunctionCallOutputItem
from .._permissions import EffectivePermissions
from .._schema import SchemaValidationError
from .._trace import ActionEndEvent, ActionStartEvent, ToolCallEvent, ToolResultEvent
from . import _execute
from ._common import (
    _MISSING,
    COMPLETE_TOOL,
    END_SIGNAL_KEY,
    END_TOOL,
    RESPOND_TOOL,
    TOOL_CALL_DEFERRED,
    RunError,
    _json,
    _Paused,
    is_end_signal,
)
from ._handlers import _Handlers, _stop_busy
from ._limits import _DeadlineExceeded, _with_deadline
from ._validation import _ENVELOPE_KEYS, _envelope_fields, _normalise_result, _validate_output


@dataclass
class _ToolCall:
    """One tool call of a model pass: the raw JSON arguments and their parsed form."""

    call_id: str
    name: str
    arguments: str
    args: dict[str, Any]


class _ToolCalls(_Handlers):
    """The tool-call side of `_LlmExecution`."""

    permissions: EffectivePermissions | None
    last_child_result: Any
    # Provided by `_RequestParts`.
    _builtin_tools: Callable[[], list[str]]

    async def _tool_batch(self, calls: list[_ToolCall]) -> Any:
        """Dispatch the model's tool calls in order; return a finishing value, `_Paused` (the
        host answers some of them later) or _MISSING."""
        finished: Any = _MISSING
        end_signal: Any = _MISSING
        deferred: list[FunctionCallItem] = []
        for call in calls:
            self.limits.check(self.deck.path)
            item = FunctionCallItem(call_id=call.call_id, name=call.name, arguments=call.arguments)
            self.items.append(item)
            if call.name == RESPOND_TOOL and self.deck.respond:
                envelope, ok = self._respond(call)
                if ok:
                    finished = envelope
                continue
            if call.name == END_TOOL and self.deck.allow_end:
                end_signal = self._end(call)
                continue
            if await self._dispatch(call):
                deferred.append(item)
                continue
            # Tool results count as activity (the onIdle timer starts over).
            self.last_activity = self.limits.clock.monotonic()
            if is_end_signal(self.last_child_result):
                end_signal = self.last_child_result
        if deferred:  # the conversation cannot go on before the host's answers
            return _Paused(deferred)
        if end_signal is not _MISSING:
            return end_signal
        return finished

    def _internal_call(self, call: _ToolCall) -> None:
        """The trace of a call to an internal tool (gambit_respond, gambit_end)."""
        self.run.trace(
            ToolCallEvent,
            action_call_id=call.call_id,
            name=call.name,
            args=call.args,
            tool_kind="internal",
            parent_action_call_id=self.action_call_id,
        )

    def _internal_result(self, call: _ToolCall, result: dict[str, Any]) -> dict[str, Any]:
        """An internal tool's answer: the tool output the model sees, and its trace."""
        self.items.append(FunctionCallOutputItem(call_id=call.call_id, output=_json(result)))
        self.run.trace(
            ToolResultEvent,
            action_call_id=call.call_id,
            name=call.name,
            result=result,
            tool_kind="internal",
            parent_action_call_id=self.action_call_id,
        )
        return result

    def _respond(self, call: _ToolCall) -> tuple[dict[str, Any], bool]:
        args = call.args
        self._internal_call(call)
        payload = args.get("payload", args) if "payload" in args else args
        try:
            payload = _validate_output(
                self.deck.response_schema, payload, deck_path=self.deck.path, is_root=False
            )
        except RunError as exc:
            # Improvement over the legacy runtime: the model is told and may try again.
            error = {"status": 400, "code": "invalid_payload", "message": str(exc)}
            return self._internal_result(call, error), False
        envelope: dict[str, Any] = {"payload": payload, **_envelope_fields(args)}
        return self._internal_result(call, envelope), True

    def _end(self, call: _ToolCall) -> dict[str, Any]:
        args = call.args
        self._internal_call(call)
        signal: dict[str, Any] = {END_SIGNAL_KEY: True}
        for key in (*_ENVELOPE_KEYS, "payload"):
            if key in args:
                signal[key] = args[key]
        return self._internal_result(call, signal)

    def _envelope(self, call: _ToolCall, body: dict[str, Any]) -> dict[str, Any]:
        envelope = {
            "runId": self.run.run_id,
            "actionCallId": call.call_id,
            "parentActionCallId": self.action_call_id,
            "source": {"deckPath": self.deck.path, "actionName": call.name},
        }
        for key in ("status", "payload", "message", "code", "meta", "intermediateOutput"):
            if key in body:
                envelope[key] = body[key]
        return envelope

    async def _dispatch(self, call: _ToolCall) -> bool:
        """Run one call and append its output; True when the host deferred it (no output)."""
        self.last_child_result = None
        action = self.deck.action(call.name)
        tool = next((t for t in self.deck.effective_tools if t.name == call.name), None)
        builtin = action is None and tool is None and call.name in self._builtin_tools()
        kind = "action" if action is not None else "builtin" if builtin else "external"
        common = {
            "action_call_id": call.call_id,
            "name": call.name,
            "parent_action_call_id": self.action_call_id,
        }
        self.run.trace(ActionStartEvent, path=call.name, **common)
        self.run.trace(ToolCallEvent, args=call.args, tool_kind=kind, **common)
        extra_items: list[Any] = []
        complete = False
        if action is not None:
            body, extra_items, complete = await self._run_action(action, call)
        elif builtin and self.permissions is not None:
            body = await call_builtin_tool(
                call.name,
                call.args,
                self.permissions.permissions,
                host_env=self.run.host_env,
                remaining_seconds=self.limits.remaining(),
            )
        elif tool is not None:
            body = await self._run_external(tool, call)
            if body is TOOL_CALL_DEFERRED:
                if self.depth == 0:
                    return True
                body = {
                    "status": 500,
                    "code": "deferred_below_root",
                    "message": f"External tool {tool.name} is answered by the host later, "
                    "which only the root deck can wait for",
                }
        else:
            body = {"status": 404, "message": "unknown action"}
        envelope = self._envelope(call, body)
        content = _json(envelope)
        self.run.trace(ToolResultEvent, result=content, tool_kind=kind, **common)
        self.items.append(FunctionCallOutputItem(call_id=call.call_id, output=content))
        self.items.extend(extra_items)
        if complete:
            complete_id = new_id("event")
            self.items.append(
                FunctionCallItem(call_id=complete_id, name=COMPLETE_TOOL, arguments=content)
            )
            self.items.append(FunctionCallOutputItem(call_id=complete_id, output=content))
        self.run.trace(ActionEndEvent, path=call.name, **common)
        return False

    async def _run_action(
        self, action: ActionDecl, call: _ToolCall
    ) -> tuple[dict[str, Any], list[Any], bool]:
        """Run an action deck or compute module; returns (envelope body, extra items, completed)."""
        args: Any = call.args
        schema = action.context_schema
        if schema is not None:
            args = schema.unwrap_tool_arguments(args)
            try:
                args = schema.validate(args)
            except SchemaValidationError as exc:
                return {"status": 400, "code": "invalid_input", "message": str(exc)}, [], False
        child = self.run.deck(action.target)
        busy = self._busy_watcher(action, call)
        clock = self.limits.clock
        started = clock.monotonic()
        emitted: list[dict[str, Any]] = []
        try:
            result = await _execute.execute_deck(
                self.run,
                child,
                args,
                depth=self.depth + 1,
                parent_action_call_id=call.call_id,
                limits=self.limits,
                emitted=emitted,
                context_validated=schema is not None,
                action=action,
                parent_permissions=self.permissions.permissions
                if self.permissions is not None
                else None,
            )
        except asyncio.CancelledError:
            if busy is not None and busy.task is not None:
                busy.task.cancel()  # no late fire: the run is being cancelled
            raise
        except Exception as exc:
            busy_items = await _stop_busy(busy, fire_late=False)
            handler = self.deck.handlers.get("onError")
            if handler is None:
                raise
            body = await self._handle_error(handler, action, call, exc)
            return body, busy_items, True
        busy_items = await _stop_busy(busy, fire_late=True, elapsed=clock.monotonic() - started)
        self.last_child_result = result
        if is_end_signal(result):
            return {"status": 200, "payload": result}, busy_items, False
        body = _normalise_result(result)
        if emitted:
            body["intermediateOutput"] = {"policy": "allow", "items": emitted}
        if action.response_schema is not None and action.execute:
            body["payload"] = _validate_output(
                action.response_schema, body["payload"], deck_path=action.target, is_root=False
            )
        return body, busy_items, True

    async def _run_external(self, tool: Any, call: _ToolCall) -> Any:
        """The tool's result body, or `TOOL_CALL_DEFERRED` when the host answers it later."""
        args: Any = call.args
        if tool.input_schema is not None:
            args = tool.input_schema.unwrap_tool_arguments(args)
            try:
                args = tool.input_schema.validate(args)
            except SchemaValidationError as exc:
                return {"status": 400, "code": "invalid_input", "message": str(exc)}
        if self.run.on_tool is None:
            return {
                "status": 500,
                "code": "missing_on_tool",
                "message": f"External tool {tool.name} requires runtime onTool handler",
            }
        request = {
            "name": tool.name,
            "args": args,
            "runId": self.run.run_id,
            "actionCallId": call.call_id,
            "parentActionCallId": self.action_call_id,
            "deckPath": self.deck.path,
        }
        try:
            result = self.run.on_tool(request)
            if inspect.isawaitable(result):
                result = await _with_deadline(result, self.limits, self.deck.path)
        except _DeadlineExceeded:
            raise
        except Exception as exc:  # a throwing on_tool gives an error envelope, not a failed run
            return {
                "status": 500,
                "code": "tool_handler_error",
                "message": str(exc) or type(exc).__name__,
            }
        if result is TOOL_CALL_DEFERRED:
            return result
        return _normalise_result(result)


def _parse_args(arguments: str) -> dict[str, Any]:
    """The model's arguments; unparsable ones, and ones nested past MAX_VALUE_DEPTH, are none
    (the call then fails its schema, and the model is told why)."""
    try:
        value = json.loads(arguments) if arguments else {}
        if too_deep(value):
            return {}
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
