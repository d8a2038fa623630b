"""`ScriptedProvider`: a first-class fake model that answers from a queue of replies.

Like inspect_ai's mockllm or llm's MockModel: queue replies with `enqueue(...)`, run the
code under test, then assert on `requests` / `records`.

```python
provider = ScriptedProvider().enqueue(
    Call("lookup", {"id": 7}),                       # a function call
    Stream("Order 7 shipped."),                     # text streamed word by word
    Fail("rate limited", status=429),               # a failed call (ProviderError)
)
```

A reply is one of (`ReplySpec`):

- a `str`: the assistant's text, streamed as one delta;
- `Stream(chunks, delay=None)`: text streamed as several deltas;
- `Call(name, args, call_id=None)`: a function call;
- `Reply(text, calls, usage, reasoning, extra_items, finish_reason)`: mixed output;
- `Fail(message, status, code, after_deltas, retryable)`: the call raises `ProviderError`,
  optionally after streaming some text;
- a callable `(request) -> any of the above` (or an awaitable of one).

Each reply is used by exactly one call. An empty queue raises `ProviderError`, so that a test
fails loudly, unless the provider was built with `fallback_models=True`; then the built-in
demo models (`offline/echo`, `offline/demo`, see `demo.py`) answer instead. That is how the
registry's `offline/` prefix is served.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from gambit.core.provider import (
    CreateResponseRequest,
    FunctionCallItem,
    ProviderError,
    ResponseUsage,
    SavedState,
    item_from_dict,
    message_item,
    new_id,
)

from ._base import OfflineBase, Plan, Sleep, deck_label, word_chunks

__all__ = ["Call", "Fail", "Reply", "ReplySpec", "ScriptedProvider", "Stream", "word_chunks"]


@dataclass
class Stream:
    """Assistant text delivered as several `response.output_text.delta` events.

    `chunks` is a list of deltas, or a string that is split into word-sized chunks.
    `delay` is the pause (seconds) before each delta when streaming; None uses the
    provider's `chunk_delay`.
    """

    chunks: Sequence[str] | str
    delay: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.chunks, str):
            self.chunks = word_chunks(self.chunks)
        else:
            self.chunks = [str(chunk) for chunk in self.chunks]

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass
class Call:
    """A function call. `args` is a dict (serialised as JSON) or a raw JSON string (kept
    byte for byte, even when it is not valid JSON). `call_id` defaults to a fresh `call-` id.
    """

    name: str
    args: Mapping[str, Any] | str | None = None
    call_id: str | None = None

    @property
    def arguments(self) -> str:
        if self.args is None:
            return "{}"
        if isinstance(self.args, str):
            return self.args
        return json.dumps(dict(self.args), ensure_ascii=False)

    def to_item(self) -> FunctionCallItem:
        return FunctionCallItem(
            call_id=self.call_id or new_id("call"), name=self.name, arguments=self.arguments
        )


@dataclass
class Reply:
    """A reply with mixed output. Output order: reasoning item, text message, calls, extras.

    - `text`: assistant text (a `Stream` to deliver it as several deltas); None for no message.
    - `calls`: `Call`s (or `FunctionCallItem`s / item dicts).
    - `usage`: reported as is; when None, usage is estimated (words, `len(text.split())`).
    - `reasoning`: adds a `{"type": "reasoning", "summary": [{"type": "summary_text", ...}]}`
      item before the message.
    - `extra_items`: any further items (models or dicts, e.g. `ns:type` extension items).
    - `finish_reason`: "length" marks the response `incomplete` (chat mode: finish reason
      "length"); otherwise chat mode derives "tool_calls" or "stop" from the output.
    """

    text: str | Stream | None = None
    calls: Sequence[Call | FunctionCallItem | Mapping[str, Any]] = field(default_factory=list)
    usage: ResponseUsage | None = None
    reasoning: str | None = None
    extra_items: Sequence[Any] = field(default_factory=list)
    finish_reason: Literal["stop", "tool_calls", "length"] | None = None


@dataclass
class Fail:
    """Make the call raise `ProviderError(provider=<provider name>, ...)`.

    With `after_deltas` (a list of text chunks, possibly empty), the provider first streams
    `response.created`, an in-progress message item and those deltas, then emits
    `response.failed` and raises; the error's `partial_text` is the joined deltas. Without
    it, the call fails before any event (like an HTTP error). `retryable` defaults to True
    for status 408, 409, 429 and 5xx.
    """

    message: str
    status: int | None = None
    code: str | None = None
    after_deltas: Sequence[str] | None = None
    retryable: bool | None = None

    def error(self, provider: str) -> ProviderError:
        retryable = self.retryable
        if retryable is None:
            retryable = self.status is not None and (
                self.status in (408, 409, 429) or self.status >= 500
            )
        return ProviderError(
            self.message,
            provider=provider,
            status=self.status,
            code=self.code,
            retryable=retryable,
            partial_text="".join(self.after_deltas or []),
        )


ReplySpec = str | Stream | Call | Reply | Fail | Callable[[CreateResponseRequest], Any]
"""What `ScriptedProvider.enqueue` accepts. A callable receives the request and returns any
of the other forms (or an awaitable of one)."""


def _as_item(value: Any) -> Any:
    if isinstance(value, Call):
        return value.to_item()
    if isinstance(value, BaseModel):
        return value
    return item_from_dict(value)


class ScriptedProvider(OfflineBase):
    """A provider that answers from a queue of scripted replies.

    ```python
    provider = ScriptedProvider()
    provider.enqueue(Call("lookup", {"id": 7}), "Order 7 shipped.")
    ...  # run the deck with this provider
    assert provider.requests[1].input[-1].output == '{"status": "shipped"}'
    ```

    Each reply is consumed by exactly one call (`responses` or `chat`). When the queue is
    empty the call raises `ProviderError`, or, with `fallback_models=True`, is answered by
    the built-in model named by the request (`offline/echo`, see `BUILTIN_MODELS`).
    """

    def __init__(
        self,
        name: str = "offline",
        *,
        chunk_delay: float = 0.0,
        fallback_models: bool = False,
        replies: Iterable[ReplySpec] = (),
        sleep: Sleep | None = None,
    ):
        super().__init__(name, chunk_delay=chunk_delay, sleep=sleep)
        self.fallback_models = fallback_models
        self._queue: list[ReplySpec] = []
        self.enqueue(*replies)

    def enqueue(self, *replies: ReplySpec) -> ScriptedProvider:
        """Queue replies (in order); returns the provider, so calls can be chained."""
        for reply in replies:
            if not (isinstance(reply, str | Stream | Call | Reply | Fail) or callable(reply)):
                raise TypeError(
                    "a scripted reply is a str, Stream, Call, Reply, Fail or a callable "
                    f"(request) -> reply; got {type(reply).__name__}"
                )
            self._queue.append(reply)
        return self

    @property
    def pending(self) -> int:
        """How many queued replies have not been used yet."""
        return len(self._queue)

    def clear(self) -> None:
        """Drop the queued replies and the recorded requests."""
        self._queue.clear()
        self.records.clear()

    async def _resolve(
        self, request: CreateResponseRequest, *, state: SavedState | None, deck_path: str | None
    ) -> Plan | Fail:
        spec: Any
        if self._queue:
            spec = self._queue.pop(0)
        elif (builtin := self._builtin(request.model)) is not None:
            spec = builtin
        else:
            hint = ""
            if self.fallback_models:
                from .demo import BUILTIN_MODELS

                names = ", ".join(f"offline/{name}" for name in BUILTIN_MODELS)
                hint = f" or use a built-in offline model ({names})"
            raise ProviderError(
                f"no scripted reply left for model {request.model} "
                f"(deck {deck_label(deck_path)}); enqueue more replies{hint}",
                provider=self.name,
                code="no_scripted_reply",
            )
        if callable(spec) and not isinstance(spec, str | Stream | Call | Reply | Fail):
            spec = spec(request)
            if inspect.isawaitable(spec):
                spec = await spec
        return self._plan(spec)

    def _builtin(self, model: str) -> Callable[[CreateResponseRequest], Any] | None:
        """The built-in demo model a request names, when `fallback_models` allows one."""
        if not self.fallback_models:
            return None
        from .demo import BUILTIN_MODELS  # the demo models use this module's reply types

        return BUILTIN_MODELS.get(model.removeprefix("offline/"))

    def _plan(self, spec: Any) -> Plan | Fail:
        if isinstance(spec, Fail):
            return spec
        if isinstance(spec, str | Stream | Call):
            spec = Reply(calls=[spec]) if isinstance(spec, Call) else Reply(text=spec)
        if not isinstance(spec, Reply):
            raise TypeError(
                "a scripted reply callable must return a str, Stream, Call, Reply or Fail; "
                f"got {type(spec).__name__}"
            )
        plan = Plan(output=[], delay=self.chunk_delay, usage=spec.usage)
        plan.incomplete = spec.finish_reason == "length"
        if spec.reasoning is not None:
            plan.output.append(
                item_from_dict(
                    {
                        "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": spec.reasoning}],
                    }
                )
            )
        if spec.text is not None:
            if isinstance(spec.text, Stream):
                text = spec.text.text
                plan.chunks[(len(plan.output), 0)] = list(spec.text.chunks)
                if spec.text.delay is not None:
                    plan.delay = spec.text.delay
            else:
                text = spec.text
            plan.output.append(message_item("assistant", text))
        plan.output.extend(_as_item(call) for call in spec.calls)
        plan.output.extend(_as_item(item) for item in spec.extra_items)
        return plan
