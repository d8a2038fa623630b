"""`ReplayProvider`: re-runs a recorded session from its trace, without a network or a key.

It collects the `model.result` events of a trace (a JSONL file written with `--trace`, a
list of events, or the `traces` of a SavedState) and answers each call made by deck `D` with
the next result recorded for `D`, so interleaved nested action decks replay in order. The
simulator uses it to replay a session (`decks_app.sessions.kinds`, the replay run kind).

```python
provider = ReplayProvider.from_trace("run.jsonl", strict=True)
```

With `strict=True` a call whose last user message differs from the recorded one fails with
`ProviderError(code="replay_diverged")`; a deck that makes more calls than were recorded
fails with `code="replay_exhausted"`. Text is streamed word by word, like the recorded model
would have.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gambit.core.provider import (
    CreateResponseRequest,
    FunctionCallItem,
    MessageItem,
    ModelCallEvent,
    ModelResultEvent,
    OutputTextContent,
    ProviderError,
    ResolvedModel,
    ResponseUsage,
    SavedState,
    items_from_json,
    message_item,
    messages_to_items,
    read_trace,
    state_from_dict,
    trace_event_from_dict,
)

from ._base import OfflineBase, Plan, Sleep, deck_label, last_user_text
from .replies import word_chunks

__all__ = ["RecordedResult", "ReplayProvider"]


@dataclass
class RecordedResult:
    """One recorded model result: the deck that made the call, its output items and usage,
    and the request input recorded on the matching `model.call` (for strict mode)."""

    deck_path: str | None
    output: list[Any]
    usage: ResponseUsage | None = None
    model: str | None = None
    call_input: list[Any] | None = None


def _result_output(event: ModelResultEvent) -> list[Any]:
    items = event.output_items
    if items is None:
        extra = (event.model_extra or {}).get("items")
        if isinstance(extra, list):
            items = items_from_json(extra)
    if items is not None:
        return list(items)
    # Old chat traces: rebuild from the assistant message and the parsed tool calls.
    output: list[Any] = []
    message = event.message
    if message is not None:
        if message.tool_calls:
            output.extend(messages_to_items([message]))
        elif message.content:
            output.append(message_item("assistant", message.content))
    if not (message is not None and message.tool_calls):
        for call in event.tool_calls or []:
            arguments = call.args if isinstance(call.args, str) else json.dumps(call.args or {})
            output.append(FunctionCallItem(call_id=call.id, name=call.name, arguments=arguments))
    return output


def _call_input(event: ModelCallEvent) -> list[Any] | None:
    if event.input_items is not None:
        return list(event.input_items)
    if event.messages is not None:
        return messages_to_items(event.messages)
    return None


class ReplayProvider(OfflineBase):
    """Replays recorded model results, in order, per deck path.

    Build it with `from_trace` (a JSONL trace file or a list of events) or `from_state` (a
    SavedState with `traces`). Each call made by deck `D` gets the next result recorded for
    `D`, so interleaved nested action decks replay correctly. When a deck makes more calls
    than were recorded, the call raises `ProviderError`.

    `strict=True` also compares the request's last user message with the one in the
    recorded `model.call` input and raises `ProviderError(code="replay_diverged")` when they
    differ (results without a recorded call are not checked).

    Deck paths are matched exactly; failing that, a recorded deck path with the same
    normalised path, or the only recorded deck path with the same file name, or (for a
    request without a deck path, or a trace with a single deck) the only recorded deck.
    """

    def __init__(
        self,
        results: Iterable[RecordedResult],
        *,
        strict: bool = False,
        chunk_delay: float = 0.0,
        name: str = "offline-replay",
        sleep: Sleep | None = None,
    ):
        super().__init__(name, chunk_delay=chunk_delay, sleep=sleep)
        self.strict = strict
        self.recorded: dict[str | None, list[RecordedResult]] = {}
        for result in results:
            self.recorded.setdefault(result.deck_path, []).append(result)
        self._used: dict[str | None, int] = dict.fromkeys(self.recorded, 0)

    @classmethod
    def from_trace(
        cls,
        source: str | os.PathLike[str] | Iterable[Any],
        *,
        strict: bool = False,
        chunk_delay: float = 0.0,
        sleep: Sleep | None = None,
    ) -> ReplayProvider:
        """Collect every `model.result` of a trace file (JSON lines) or list of events."""
        if isinstance(source, str | os.PathLike):
            events = read_trace(source)
        else:
            events = [
                trace_event_from_dict(event) if isinstance(event, Mapping) else event
                for event in source
            ]
        results: list[RecordedResult] = []
        open_calls: dict[tuple[str | None, str | None], ModelCallEvent] = {}
        for event in events:
            if isinstance(event, ModelCallEvent):
                open_calls[(event.deck_path, event.action_call_id)] = event
            elif isinstance(event, ModelResultEvent):
                call = open_calls.pop((event.deck_path, event.action_call_id), None)
                results.append(
                    RecordedResult(
                        deck_path=event.deck_path,
                        output=_result_output(event),
                        usage=event.usage,
                        model=event.model,
                        call_input=_call_input(call) if call is not None else None,
                    )
                )
        return cls(results, strict=strict, chunk_delay=chunk_delay, sleep=sleep)

    @classmethod
    def from_state(
        cls,
        state: SavedState | Mapping[str, Any],
        *,
        strict: bool = False,
        chunk_delay: float = 0.0,
        sleep: Sleep | None = None,
    ) -> ReplayProvider:
        """Replay the traces stored in a SavedState (`traces`)."""
        if not isinstance(state, SavedState):
            state = state_from_dict(state)
        if not state.traces:
            raise ProviderError(
                f"saved state {state.run_id} has no traces to replay",
                provider="offline-replay",
                code="no_traces",
            )
        return cls.from_trace(state.traces, strict=strict, chunk_delay=chunk_delay, sleep=sleep)

    def resolve_model(
        self, model: str | list[str], *, params: dict[str, Any] | None, deck_path: str | None
    ) -> ResolvedModel:
        """The model a replay's calls are made with: the recording, whatever model a deck
        names (`ModelResolver`). A run that passes the replay as its resolver traces its
        calls as answered by `offline-replay`, never by the recorded deck's model."""
        return ResolvedModel(model=self.name, params=params)

    def remaining(self, deck_path: str | None = None) -> int:
        """How many recorded results are left for a deck (all decks when None)."""
        if deck_path is None:
            return sum(len(v) - self._used[k] for k, v in self.recorded.items())
        key = self._match(deck_path)
        return 0 if key is _NO_MATCH else len(self.recorded[key]) - self._used[key]

    def _match(self, deck_path: str | None) -> Any:
        if deck_path in self.recorded:
            return deck_path
        keys = list(self.recorded)
        if deck_path is not None:
            norm = os.path.normpath(deck_path)
            same = [k for k in keys if k is not None and os.path.normpath(k) == norm]
            if len(same) == 1:
                return same[0]
            base = os.path.basename(norm)
            same = [k for k in keys if k is not None and os.path.basename(k) == base]
            if len(same) == 1:
                return same[0]
        if len(keys) == 1 and (deck_path is None or keys[0] is None):
            return keys[0]
        return _NO_MATCH

    async def _resolve(
        self, request: CreateResponseRequest, *, state: SavedState | None, deck_path: str | None
    ) -> Plan:
        key = self._match(deck_path)
        if key is _NO_MATCH:
            decks = ", ".join(deck_label(k) for k in self.recorded) or "none"
            raise ProviderError(
                f"no model results were recorded for deck {deck_label(deck_path)} "
                f"(recorded decks: {decks})",
                provider=self.name,
                code="replay_exhausted",
            )
        results = self.recorded[key]
        index = self._used[key]
        if index >= len(results):
            raise ProviderError(
                f"deck {deck_label(key)} made call {index + 1}, but the trace recorded only "
                f"{len(results)} model call{'s' if len(results) != 1 else ''} for it",
                provider=self.name,
                code="replay_exhausted",
            )
        self._used[key] = index + 1
        result = results[index]
        if self.strict and result.call_input is not None:
            expected = last_user_text(result.call_input)
            got = last_user_text(request.input)
            if expected != got:
                raise ProviderError(
                    f"replay diverged for deck {deck_label(key)} at call {index + 1}: "
                    f"recorded last user message {expected!r}, got {got!r}",
                    provider=self.name,
                    code="replay_diverged",
                )
        plan = Plan(output=list(result.output), delay=self.chunk_delay, usage=result.usage)
        for item_index, item in enumerate(plan.output):
            if isinstance(item, MessageItem):
                for part_index, part in enumerate(item.content):
                    if isinstance(part, OutputTextContent):
                        plan.chunks[(item_index, part_index)] = word_chunks(part.text)
        return plan


_NO_MATCH = object()
