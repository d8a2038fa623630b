"""The replies an offline provider gives, as data: text (`str`, `Stream`), a function call
(`Call`), mixed output (`Reply`) and a failure (`Fail`).

`ScriptedProvider.enqueue` takes them (`ReplySpec`), the built-in demo models (`demo.py`)
return them, and the providers' shared machinery (`_base.py`) renders them. They depend on
nothing else of this package, so those three modules do not import each other in a circle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gambit.core.provider import (
    CreateResponseRequest,
    FunctionCallItem,
    ProviderError,
    ResponseUsage,
    new_id,
)

__all__ = ["Call", "Fail", "Reply", "ReplyModel", "ReplySpec", "Stream", "word_chunks"]


def word_chunks(text: str) -> list[str]:
    """Split text into word-sized chunks (each word with the whitespace after it).

    `"".join(word_chunks(text)) == text` always holds; empty text gives `[]`.
    """
    if not text:
        return []
    chunks = re.findall(r"\S+\s*", text)
    leading = text[: len(text) - len(text.lstrip())]
    if not chunks:
        return [text]
    if leading:
        chunks[0] = leading + chunks[0]
    return chunks


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


ReplyModel = Callable[[CreateResponseRequest], Any]
"""A model that answers a request with a reply (any `ReplySpec` but a callable, or an
awaitable of one): the built-in demo models are such functions."""
