"""Counting a request's input tokens before it is sent (docs/decisions.md, "Token counting").

Two local ways, both cheap enough to run before every model pass:

- **The tokenizer** (`o200k_base`, the encoding of OpenAI's gpt-4o, gpt-4.1, gpt-5 and
  o-series models), for a model whose family is known (`encoding_for_model`). tiktoken
  downloads its encodings on first use; this package ships the one it needs instead
  (`encodings/o200k_base.tiktoken.gz`, checked against the SHA-256 tiktoken publishes for it),
  so counting works with no network. tiktoken and the encoding load on the first precise
  count only (a one-turn run never counts precisely, and never imports it).
- **The estimate**, for every other model: a byte-based figure (`estimate_text`), labelled
  `estimate` wherever it is shown.

Both add the same framing: per item, per tool and per request, what the Responses API counts
around the text (roles, boundaries, the tool schema's wrapping), fitted on recorded responses
(the figures are in docs/decisions.md). A provider that can count exactly (`openai-api/`
asks the API's input-token endpoint) does so through `count_input_tokens`; see
`_runtime/_context.py` for when each is used.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._openresponses import (
    CreateResponseRequest,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ResponseToolDefinition,
    item_text,
)

__all__ = [
    "ESTIMATE",
    "TokenCount",
    "encoding_for_model",
    "estimate_text",
    "request_token_count",
]

ESTIMATE = "estimate"
"""The method label of a count made without a tokenizer."""

# Framing tokens the Responses API adds around the text, fitted on recorded requests and their
# reported `input_tokens` (docs/decisions.md, "Token counting").
PER_REQUEST = 3
PER_MESSAGE = 4
PER_CALL = 8  # a function_call item: its name and arguments, plus this
PER_OUTPUT = 8  # a function_call_output item
TOOLS_BASE = 5  # once, when the request offers tools
# A tool's parameters are rendered more tersely than their JSON: 0.7 of its tokens.
TOOL_SCHEMA_SHARE = 0.7

# UTF-8 bytes per token of the estimate (prose and JSON in o200k_base average 4.0-4.6).
BYTES_PER_TOKEN = 4.0


@dataclass(frozen=True)
class TokenCount:
    """A count of a request's input tokens and how it was made: `api` (the provider counted),
    `o200k_base` (the tokenizer) or `estimate`."""

    tokens: int
    method: str

    @property
    def estimated(self) -> bool:
        return self.method == ESTIMATE


def estimate_text(text: str) -> int:
    """Tokens of `text` estimated from its UTF-8 length (no tokenizer)."""
    if not text:
        return 0
    return math.ceil(len(text.encode("utf-8", "replace")) / BYTES_PER_TOKEN)


# --------------------------------------------------------------------------- the tokenizer

_ENCODINGS_DIR = Path(__file__).parent / "encodings"
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# Model names (the last part of a routed name) whose tokenizer is o200k_base.
_O200K_PREFIXES = (
    "gpt-4o",
    "chatgpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "gpt-oss",
    "o1",
    "o3",
    "o4",
)

_lock = threading.Lock()
_encoders: dict[str, Callable[[str], int]] = {}


def encoding_for_model(model: str | None) -> str | None:
    """The tokenizer of `model` (`o200k_base`), or None when its family is not known."""
    if not model:
        return None
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    return None


class EncodingUnavailable(Exception):
    """The tokenizer cannot be loaded here (tiktoken missing, the shipped file damaged)."""


def _load_o200k() -> Callable[[str], int]:
    try:
        import tiktoken  # only here: a one-turn run never counts precisely (start-up cost)
    except ImportError as exc:
        raise EncodingUnavailable(f"tiktoken is not installed ({exc})") from None
    path = _ENCODINGS_DIR / "o200k_base.tiktoken.gz"
    try:
        raw = gzip.decompress(path.read_bytes())
    except OSError as exc:
        raise EncodingUnavailable(f"cannot read {path}: {exc}") from None
    if hashlib.sha256(raw).hexdigest() != _O200K_SHA256:
        raise EncodingUnavailable(f"{path} does not match the published o200k_base hash")
    import base64

    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    encoding = tiktoken.Encoding(
        name="o200k_base",
        pat_str=_O200K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    )
    encode = encoding.encode_ordinary
    return lambda text: len(encode(text)) if text else 0


def text_counter(encoding: str) -> Callable[[str], int]:
    """A function counting the tokens of a text with `encoding` (loaded once per process).
    Raises `EncodingUnavailable` when it cannot be loaded."""
    with _lock:
        counter = _encoders.get(encoding)
        if counter is None:
            if encoding != "o200k_base":
                raise EncodingUnavailable(f"no shipped encoding {encoding!r}")
            counter = _encoders[encoding] = _load_o200k()
        return counter


# --------------------------------------------------------------------------- a request


def item_tokens(item: Any, count_text: Callable[[str], int]) -> int:
    """One input item's tokens: its text with `count_text`, plus its framing."""
    if isinstance(item, MessageItem):
        return PER_MESSAGE + count_text(item_text(item))
    if isinstance(item, FunctionCallItem):
        return PER_CALL + count_text(item.name) + count_text(item.arguments)
    if isinstance(item, FunctionCallOutputItem):
        return PER_OUTPUT + count_text(item.output)
    # A reasoning or extension item: its JSON (a reasoning item's encrypted content is not
    # sent back by the runtime, so this is its summary at most).
    dump = getattr(item, "to_dict", None)
    data = dump() if callable(dump) else item
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        text = str(data)
    return PER_MESSAGE + count_text(text)


def tools_tokens(tools: Iterable[ResponseToolDefinition], count_text: Callable[[str], int]) -> int:
    total = 0
    for tool in tools:
        fn = tool.function
        schema = json.dumps(fn.parameters, ensure_ascii=False, separators=(",", ":"))
        total += count_text(fn.name) + count_text(fn.description or "")
        total += math.ceil(TOOL_SCHEMA_SHARE * count_text(schema))
    return total + TOOLS_BASE if total else 0


def request_extra_tokens(request: CreateResponseRequest, count_text: Callable[[str], int]) -> int:
    """The tokens of a request outside its input items: instructions, tools, output schema."""
    total = PER_REQUEST
    if request.instructions:
        total += PER_MESSAGE + count_text(request.instructions)
    if request.tools:
        total += tools_tokens(request.tools, count_text)
    fmt = request.text.format if request.text is not None else None
    if fmt is not None and fmt.schema_ is not None:
        total += count_text(json.dumps(fmt.schema_, ensure_ascii=False, separators=(",", ":")))
    return total


def request_token_count(request: CreateResponseRequest, *, precise: bool = True) -> TokenCount:
    """A request's input tokens counted locally: with the tokenizer of its model when known
    (and `precise`), else estimated."""
    encoding = encoding_for_model(request.model) if precise else None
    count_text: Callable[[str], int] = estimate_text
    method = ESTIMATE
    if encoding is not None:
        try:
            count_text = text_counter(encoding)
            method = encoding
        except EncodingUnavailable:
            pass
    total = request_extra_tokens(request, count_text)
    total += sum(item_tokens(item, count_text) for item in request.input)
    return TokenCount(total, method)
