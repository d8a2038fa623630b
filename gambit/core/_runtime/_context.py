"""Keeping a conversation within its model's context window (docs/decks.md, "Context window
and compaction").

When the deck's model has a known context window (`[modelParams] contextWindow`, or the
caller's `CompactionSettings`: gambit.toml's `[context]`), every model pass is counted before
it is sent (`_ContextKeeper.fit`):

1. an estimate first (`_tokens.estimate_text`, per item, cached): cheap, no tokenizer;
2. from half the compaction limit on, a precise count: the provider's own
   (`count_input_tokens`, the `openai-api/` input-token endpoint), else the tokenizer of
   the model's family, else the estimate stays (labelled `estimate` in the trace);
3. past the limit (`contextWindow * compactRatio`), and unless compaction is off
   (`--no-compact`, `compact = false`), the conversation is compacted: the model writes a
   detailed summary on a separate request without tools, and what is *sent* from then on is
   the head (system prompt and injected context), that summary as a user message, and the
   items after what it covers (the current exchange is kept verbatim when it is small). The
   conversation *kept* (`execution.items`, the saved state, the trace) is never changed.
   A `context.compacted` event records the counts before and after.

The root conversation's compaction is stored in `state.meta["gambitCompaction"]`, so the
next turn (a new run resuming the state) sends the same compacted view instead of
summarising again. A changed view also starts a fresh `previous_response_id` chain: the
`openai-api/` adapter chains only when the sent items extend the ones it recorded.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._messages import items_to_messages
from .._openresponses import (
    CreateResponseRequest,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    construct,
    item_to_dict,
    message_item,
    output_text,
)
from .._provider import ChatProvider, ResolvedModel
from .._tokens import (
    ESTIMATE,
    EncodingUnavailable,
    TokenCount,
    encoding_for_model,
    estimate_text,
    item_tokens,
    request_extra_tokens,
    text_counter,
)
from .._trace import ContextCompactedEvent, LogEvent
from ._common import CONTEXT_TOOL, LEGACY_CONTEXT_TOOL
from ._limits import _with_deadline

if TYPE_CHECKING:
    from ._llm import _LlmExecution

__all__ = ["COMPACTION_META_KEY", "DEFAULT_COMPACT_RATIO", "CompactionSettings"]

COMPACTION_META_KEY = "gambitCompaction"
DEFAULT_COMPACT_RATIO = 0.8
# From this share of the compaction limit on, a pass is counted precisely (provider or
# tokenizer); below it the estimate decides, and no tokenizer is loaded.
PRECISE_FROM = 0.5
# The current exchange is kept verbatim when it takes at most this share of the limit.
TAIL_SHARE = 0.5

COMPACT_PROMPT = (
    "The conversation above is getting too long for the context window. Write a detailed "
    "summary of it that lets you carry on without it: the goals and instructions given, "
    "what the user said and asked for, the decisions made and why, the facts, names, "
    "numbers and identifiers established, the tool calls made and what they returned, "
    "anything promised or still open, and the state of the current task. Write only the "
    "summary."
)
SUMMARY_PREFIX = "Summary of the earlier conversation (compacted to fit the context window):\n\n"


@dataclass(frozen=True)
class CompactionSettings:
    """How a run keeps conversations within their model's context window (the caller's
    defaults; a deck's `[modelParams]` `contextWindow`, `compactRatio` and `compact` win,
    except that `enabled=False` (`--no-compact`) turns compaction off for every deck).

    `context_window` applies to every model, `model_windows` to the models it names (as a
    deck or the resolver names them). With no window known nothing is counted."""

    context_window: int | None = None
    compact_ratio: float | None = None
    enabled: bool = True
    model_windows: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Budget:
    """A pass's window, compaction ratio and whether it may compact."""

    window: int
    ratio: float
    compact: bool

    @property
    def limit(self) -> int:
        return max(1, int(self.window * self.ratio))

    def to_json(self, count: TokenCount) -> dict[str, Any]:
        return {
            "counted": count.tokens,
            "method": count.method,
            "window": self.window,
            "limit": self.limit,
        }


def _budget(execution: _LlmExecution, model: str) -> _Budget | None:
    settings = execution.run.compaction
    params = execution.deck.model_params
    window = params.context_window
    if window is None and settings is not None:
        window = settings.model_windows.get(model)
        if window is None and execution.deck.model_params.models:
            window = settings.model_windows.get(execution.deck.model_params.models[0])
        if window is None:
            window = settings.context_window
    if window is None:
        return None
    ratio = params.compact_ratio
    if ratio is None and settings is not None:
        ratio = settings.compact_ratio
    enabled = (settings is None or settings.enabled) and params.compact is not False
    return _Budget(window, ratio or DEFAULT_COMPACT_RATIO, enabled)


def _digest(item: Any) -> str:
    raw = json.dumps(item_to_dict(item), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _head_length(items: list[Any]) -> int:
    """How many leading items are kept verbatim: the system prompt and the injected context."""
    index = 0
    while index < len(items):
        item = items[index]
        if isinstance(item, MessageItem) and item.role == "system":
            index += 1
        elif (
            isinstance(item, FunctionCallItem)
            and item.name in (CONTEXT_TOOL, LEGACY_CONTEXT_TOOL)
            and index + 1 < len(items)
            and isinstance(items[index + 1], FunctionCallOutputItem)
            and items[index + 1].call_id == item.call_id
        ):
            index += 2
        else:
            break
    return index


class _ContextKeeper:
    """One execution's compaction: what it sends (`view`) and when it compacts (`fit`)."""

    def __init__(self, execution: _LlmExecution):
        self.execution = execution
        self.summary: str | None = None
        self.head = 0
        self.through = 0
        self.count: TokenCount | None = None  # the last pass's, for its model.result
        self.budget: _Budget | None = None
        self._counts: dict[str, dict[int, tuple[Any, int]]] = {}
        self._summary_item: Any = None
        self._restored = False

    # ----------------------------------------------------------------- the view

    def view(self, items: list[Any]) -> list[Any]:
        """The items sent: all of them, or the head, the summary and what follows it."""
        if self.summary is None or self.through > len(items):
            return list(items)
        if self._summary_item is None:
            self._summary_item = message_item("user", SUMMARY_PREFIX + self.summary)
        return [*items[: self.head], self._summary_item, *items[self.through :]]

    def _restore(self, record: Any, items: list[Any]) -> None:
        if not isinstance(record, Mapping):
            return
        summary, head, through = record.get("summary"), record.get("head"), record.get("through")
        if (
            record.get("deckPath") != self.execution.deck.path
            or not isinstance(summary, str)
            or not isinstance(head, int)
            or not isinstance(through, int)
            or not 0 <= head < through <= len(items)
            or record.get("lastItem") != _digest(items[through - 1])
        ):
            return  # another deck's, or a conversation that no longer matches: send it all
        self.summary, self.head, self.through = summary, head, through
        self._summary_item = None

    def _store(self) -> None:
        root = self.execution.root_state
        if root is None or self.summary is None:
            return
        record = {
            "deckPath": self.execution.deck.path,
            "summary": self.summary,
            "head": self.head,
            "through": self.through,
            "lastItem": _digest(self.execution.items[self.through - 1]),
        }
        # A new dict: the state's meta may be shared with the caller's copy.
        root.state.meta = {**(root.state.meta or {}), COMPACTION_META_KEY: record}

    # ----------------------------------------------------------------- counting

    def _local(self, request: CreateResponseRequest, method: str) -> TokenCount:
        """Count with the estimate or a tokenizer, each item's count cached."""
        count_text = estimate_text if method == ESTIMATE else text_counter(method)
        cache = self._counts.setdefault(method, {})
        total = request_extra_tokens(request, count_text)
        for item in request.input:
            hit = cache.get(id(item))
            if hit is None or hit[0] is not item:
                hit = cache[id(item)] = (item, item_tokens(item, count_text))
            total += hit[1]
        return TokenCount(total, method)

    async def _precise(self, request: CreateResponseRequest, provider: Any) -> TokenCount | None:
        counter = getattr(provider, "count_input_tokens", None)
        if counter is not None:
            try:
                tokens = await counter(request)
            except Exception as exc:  # counting is advisory: fall back to the tokenizer
                self.execution.run.trace(
                    LogEvent,
                    deck_path=self.execution.deck.path,
                    action_call_id=self.execution.action_call_id,
                    level="warn",
                    title="token count failed",
                    message=f"{type(exc).__name__}: {exc}",
                )
                tokens = None
            if isinstance(tokens, int):
                return TokenCount(tokens, "api")
        encoding = encoding_for_model(request.model)
        if encoding is not None:
            try:
                return self._local(request, encoding)
            except EncodingUnavailable:
                return None
        return None

    async def measure(self, request: CreateResponseRequest, provider: Any) -> TokenCount:
        assert self.budget is not None
        count = self._local(request, ESTIMATE)
        if count.tokens >= PRECISE_FROM * self.budget.limit:
            count = await self._precise(request, provider) or count
        return count

    def reported(self, usage: Any) -> dict[str, Any] | None:
        """This pass's count beside the input tokens the provider reported (model.result)."""
        if self.count is None or self.budget is None:
            return None
        data = self.budget.to_json(self.count)
        reported = getattr(usage, "prompt_tokens", None)
        if isinstance(reported, int):
            data["reported"] = reported
        return data

    # ----------------------------------------------------------------- fitting

    async def fit(
        self, request: CreateResponseRequest, resolved: ResolvedModel, provider: Any
    ) -> CreateResponseRequest:
        """The request to send: as built, or compacted when it would pass the limit.
        Sets `count` (None when the model's window is not known)."""
        self.budget = _budget(self.execution, resolved.model)
        self.count = None
        if self.budget is None:
            return request
        if not self._restored and self.budget.compact:
            # A compaction stored by an earlier turn; with compaction off, all is sent.
            self._restored = True
            root = self.execution.root_state
            if root is not None and root.state.meta and self.summary is None:
                self._restore(root.state.meta.get(COMPACTION_META_KEY), self.execution.items)
                request = request.model_copy(update={"input": self.view(self.execution.items)})
        count = await self.measure(request, provider)
        if self.budget.compact and count.tokens > self.budget.limit:
            compacted = await self._compact(request, count, resolved, provider)
            if compacted is not None:
                request, count = compacted
        self.count = count
        return request

    def _cut(self, items: list[Any], start: int) -> int:
        """Where the verbatim tail starts: the last user message after `start`, when the
        exchange it opens is small enough; else the end (everything is summarised)."""
        assert self.budget is not None
        for index in range(len(items) - 1, start, -1):
            item = items[index]
            if isinstance(item, MessageItem) and item.role == "user":
                tail = sum(item_tokens(i, estimate_text) for i in items[index:])
                return index if tail <= TAIL_SHARE * self.budget.limit else len(items)
        return len(items)

    async def _compact(
        self,
        request: CreateResponseRequest,
        before: TokenCount,
        resolved: ResolvedModel,
        provider: Any,
    ) -> tuple[CreateResponseRequest, TokenCount] | None:
        execution, run = self.execution, self.execution.run
        assert self.budget is not None
        items = execution.items
        head = _head_length(items)
        start = self.through if self.summary is not None else head
        cut = self._cut(items, start)
        if cut <= start:
            return None  # nothing new to summarise: send as it is
        prior = [message_item("user", SUMMARY_PREFIX + self.summary)] if self.summary else []
        body = list(items[start:cut])
        # The summary request must fit the window itself: drop the oldest exchanges if not.
        dropped = 0
        while True:
            summary_input = [
                *items[:head],
                *prior,
                *body,
                message_item("user", COMPACT_PROMPT),
            ]
            size = sum(item_tokens(i, estimate_text) for i in summary_input)
            if size <= 0.9 * self.budget.window:
                break
            nxt = next(
                (
                    i
                    for i in range(1, len(body))
                    if isinstance(body[i], MessageItem) and body[i].role == "user"
                ),
                None,
            )
            if nxt is None:
                break
            dropped += nxt
            body = body[nxt:]
        started = time.monotonic()
        summary_request = construct(
            CreateResponseRequest,
            model=resolved.model,
            input=summary_input,
            params=resolved.params,
        )
        text, usage = await self._summarise(summary_request, provider)
        run.usage.add(usage)
        if not text.strip():
            run.trace(
                LogEvent,
                deck_path=execution.deck.path,
                action_call_id=execution.action_call_id,
                level="warn",
                title="compaction skipped",
                message="the model returned an empty summary; the conversation is sent whole",
            )
            return None
        self.summary, self.head, self.through = text.strip(), head, cut
        self._summary_item = None
        self._store()
        compacted = request.model_copy(update={"input": self.view(items)})
        after = await self.measure(compacted, provider)
        run.trace(
            ContextCompactedEvent,
            action_call_id=execution.action_call_id,
            deck_path=execution.deck.path,
            parent_action_call_id=execution.parent,
            model=resolved.model,
            tokens_before=before.tokens,
            tokens_after=after.tokens,
            method=before.method,
            context_window=self.budget.window,
            limit=self.budget.limit,
            summarized_items=cut - start,
            kept_items=len(items) - cut,
            dropped_items=dropped or None,
            summary=self.summary,
            usage=usage.to_dict() if usage is not None else None,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        return compacted, after

    async def _summarise(self, request: CreateResponseRequest, provider: Any) -> tuple[str, Any]:
        """Ask for the summary: no tools, no stream, no state (so no chain)."""
        execution = self.execution
        deck_path = execution.deck.path
        if execution.run.mode == "chat" and isinstance(provider, ChatProvider):
            result = await _with_deadline(
                provider.chat(
                    model=request.model,
                    messages=items_to_messages(request.input, fold_into_text=True),
                    tools=None,
                    stream=False,
                    state=None,
                    deck_path=deck_path,
                    params=request.params,
                ),
                execution.limits,
                deck_path,
            )
            return result.message.content or "", result.usage
        answer = await _with_deadline(
            provider.responses(request, state=None, deck_path=deck_path),
            execution.limits,
            deck_path,
        )
        return output_text(answer.response), answer.response.usage
