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
fails loudly, unless the provider was given `models` to answer with (`fallback_models=True`:
the built-in demo models `offline/echo`, `offline/demo`, see `demo.py`). The registry's
`offline/` prefix is served by a provider it hands the demo models.

The reply types live in `replies.py` (re-exported here and by the package).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from gambit.core.provider import (
    CreateResponseRequest,
    ProviderError,
    SavedState,
    item_from_dict,
    message_item,
)

from ._base import OfflineBase, Plan, Sleep, deck_label
from .replies import Call, Fail, Reply, ReplyModel, ReplySpec, Stream, word_chunks

__all__ = ["Call", "Fail", "Reply", "ReplySpec", "ScriptedProvider", "Stream", "word_chunks"]


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
        models: Mapping[str, ReplyModel] | None = None,
        replies: Iterable[ReplySpec] = (),
        sleep: Sleep | None = None,
    ):
        """`models` answer, by name (the `offline/` prefix is optional), when the queue is
        empty; `fallback_models=True` without `models` means the built-in demo models
        (`demo.BUILTIN_MODELS`). The registry's `offline/` provider is handed those."""
        super().__init__(name, chunk_delay=chunk_delay, sleep=sleep)
        if models is None and fallback_models:
            from .demo import BUILTIN_MODELS  # loaded only by those who want it

            models = BUILTIN_MODELS
        self.models: dict[str, ReplyModel] = dict(models or {})
        self.fallback_models = bool(self.models)
        self._queue: list[ReplySpec] = []
        self._scripted = False  # whether any reply was ever queued
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
            self._scripted = True
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
            if self.models:
                names = ", ".join(f"offline/{name}" for name in self.models)
                hint = f" or use a built-in offline model ({names})"
                if not self._scripted:
                    # Nothing was ever scripted: the model name is what is wrong.
                    raise ProviderError(
                        f"unknown offline model {request.model} (deck {deck_label(deck_path)});"
                        f" the offline models are {names}",
                        provider=self.name,
                        code="unknown_model",
                    )
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

    def _builtin(self, model: str) -> ReplyModel | None:
        """The model (of `models`) a request names, if any."""
        return self.models.get(model.removeprefix("offline/"))

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
