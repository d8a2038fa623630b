"""`openai-api/`: the OpenAI Responses API
(https://platform.openai.com/docs/api-reference/responses).

- **Chaining.** Within a run the adapter sends only the items that are new since its last
  response, with `previous_response_id`. The runtime always passes the full conversation
  (`request.input`), which stays the local full history; the adapter records in
  `state.meta["openaiResponses"][<deck path>]` the last response id, the model and one
  digest per conversation item the server already holds (input + output), and returns that
  state as `updated_state`. The next call chains when the recorded id was issued to *this
  process*, the model is the same, `store` is not false and the new input extends the
  recorded history. A resumed session (a new process, an old state file) therefore never
  reuses an old id: it sends the full context and starts a new chain.
- **Rejected ids.** When the server answers that the previous response is not found
  (`previous_response_not_found`, or any 400/404 about `previous_response_id`), the call is
  repeated once with the full history and no id.
- **Prompt cache.** `prompt_cache_key` / `prompt_cache_retention` come from the request
  params (a deck's `additionalParams`) or, as defaults, from the constructor
  (`[providers.openai-api]` in gambit.toml).
- **Reasoning.** `params.reasoning` (`{effort, summary}`) is sent as `reasoning`; reasoning
  items and summary events are passed through; `usage.reasoningTokens` and
  `usage.cachedTokens` come from the usage details.
- **Cost.** `usage.costUsd` from the pricing table (defaults in `_pricing.py`, overridden by
  `[pricing."<model>"]`).
- **Token counting.** `count_input_tokens(request)` asks the API's input-token endpoint
  (`POST /responses/input_tokens`) how many tokens the request's input, instructions, tools
  and output format make; the runtime calls it before a pass once a conversation nears its
  compaction limit (docs/decks.md, "Context window and compaction").
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from gambit.core.provider import (
    CreateResponseRequest,
    CreateResponseResponse,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ProviderCall,
    ProviderError,
    ProviderResponse,
    SavedState,
    UnknownItem,
    item_text,
)

from ._base import HttpProvider
from ._pricing import DEFAULT_OPENAI_PRICING, ModelPricing
from ._responses_wire import WireOptions

__all__ = [
    "CHAIN_META_KEY",
    "OPENAI_DEFAULT_BASE_URL",
    "OpenAIResponsesProvider",
    "item_digest",
]

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
CHAIN_META_KEY = "openaiResponses"
_ROOT_KEY = "(root)"
# What `POST /responses/input_tokens` accepts of a Responses body.
_COUNT_FIELDS = (
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "text",
    "reasoning",
    "truncation",
)

# Response ids issued to this process, most recent last (bounded).
_LIVE_IDS: OrderedDict[str, None] = OrderedDict()
_LIVE_LIMIT = 10_000


def _remember(response_id: str) -> None:
    _LIVE_IDS[response_id] = None
    _LIVE_IDS.move_to_end(response_id)
    while len(_LIVE_IDS) > _LIVE_LIMIT:
        _LIVE_IDS.popitem(last=False)


def item_digest(item: Any) -> str | None:
    """A short digest of a conversation item (None for reasoning and extension items).

    Only the content that matters to the conversation counts (role and text, call id, name
    and arguments, call output), so a runtime that re-creates items without their ids or
    statuses still matches.
    """
    if isinstance(item, MessageItem):
        key: list[Any] = ["message", item.role, item_text(item)]
    elif isinstance(item, FunctionCallItem):
        key = ["call", item.call_id, item.name, item.arguments]
    elif isinstance(item, FunctionCallOutputItem):
        key = ["output", item.call_id, item.output]
    else:
        return None
    raw = json.dumps(key, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def _digests(items: Sequence[Any]) -> list[str]:
    return [d for d in (item_digest(item) for item in items) if d is not None]


def _is_rejected_id(exc: ProviderError) -> bool:
    if exc.status not in (400, 404):
        return False
    if exc.code == "previous_response_not_found" or exc.param == "previous_response_id":
        return True
    return "previous response" in str(exc).lower() or "previous_response_id" in str(exc)


class OpenAIResponsesProvider(HttpProvider):
    """`OpenAIResponsesProvider(api_key=..., base_url="https://api.openai.com/v1",
    prompt_cache_key=None, prompt_cache_retention=None, chaining=True, pricing=None
    (defaults: DEFAULT_OPENAI_PRICING), client=None, transport=None, timeout=None,
    retry=None, headers=None)`."""

    name = "openai-api"
    prefix = "openai-api"
    default_base_url = OPENAI_DEFAULT_BASE_URL
    env_api_key = "OPENAI_API_KEY"
    env_base_url = "OPENAI_BASE_URL"
    api_key_required = True
    wire_options = WireOptions(
        drop_extension_items=True, provider_ids_only=True, verbosity_in_text=True
    )

    def __init__(
        self,
        *,
        prompt_cache_key: str | None = None,
        prompt_cache_retention: str | None = None,
        chaining: bool = True,
        pricing: Mapping[str, ModelPricing] | None = None,
        **kwargs: Any,
    ):
        table = {**DEFAULT_OPENAI_PRICING, **(pricing or {})}
        super().__init__(pricing=table, **kwargs)
        self.prompt_cache_key = prompt_cache_key
        self.prompt_cache_retention = prompt_cache_retention
        self.chaining = chaining

    @classmethod
    def settings_options(
        cls, env: Mapping[str, str], settings: Mapping[str, Any]
    ) -> dict[str, Any]:
        options: dict[str, Any] = {}
        for name in ("prompt_cache_key", "prompt_cache_retention"):
            if settings.get(name):
                options[name] = str(settings[name])
        if "chaining" in settings:
            options["chaining"] = bool(settings["chaining"])
        return options

    # ------------------------------------------------------------------ protocol

    def responses_body(self, request: CreateResponseRequest, model: str) -> dict[str, Any]:
        body = super().responses_body(request, model)
        if self.prompt_cache_key and "prompt_cache_key" not in body:
            body["prompt_cache_key"] = self.prompt_cache_key
        if self.prompt_cache_retention and "prompt_cache_retention" not in body:
            body["prompt_cache_retention"] = self.prompt_cache_retention
        return body

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        self._check_configured()
        request, state, on_stream_event = call.request, call.state, call.on_event
        model = self.provider_model(request.model)
        full_body = self.responses_body(request, model)
        chain_key = call.deck_path or _ROOT_KEY
        previous_id, new_items = self._plan(request, full_body, model, state, chain_key)

        if previous_id is not None:
            body = self.responses_body(request.model_copy(update={"input": new_items}), model)
            body["previous_response_id"] = previous_id
            try:
                response = await self._call_responses(body, on_event=on_stream_event)
            except ProviderError as exc:
                if not _is_rejected_id(exc):
                    raise
                _LIVE_IDS.pop(previous_id, None)
                response = await self._call_responses(full_body, on_event=on_stream_event)
        else:
            response = await self._call_responses(full_body, on_event=on_stream_event)

        self._apply_cost(response, request.model, model)
        updated = self._record(request, response, model, state, chain_key, full_body)
        return ProviderResponse(response=response, updated_state=updated)

    async def count_input_tokens(self, request: CreateResponseRequest) -> int:
        """The input tokens of `request`, as the API counts them (the whole input, never
        chained: the count is of what the model will see)."""
        self._check_configured()
        body = self.responses_body(request, self.provider_model(request.model))
        count_body = {key: body[key] for key in _COUNT_FIELDS if key in body}
        data = await self.http.request_json("POST", "responses/input_tokens", count_body)
        tokens = data.get("input_tokens") if isinstance(data, Mapping) else None
        if type(tokens) is not int:
            raise self._error(f"the input-token count answered without input_tokens: {data!r}")
        return tokens

    # ------------------------------------------------------------------ chaining

    def _plan(
        self,
        request: CreateResponseRequest,
        body: Mapping[str, Any],
        model: str,
        state: SavedState | None,
        chain_key: str,
    ) -> tuple[str | None, list[Any]]:
        """(previous_response_id, items to send), or (None, full input)."""
        full = list(request.input)
        if (
            not self.chaining
            or request.previous_response_id is not None
            or body.get("store") is False
            or state is None
        ):
            return None, full
        record = ((state.meta or {}).get(CHAIN_META_KEY) or {}).get(chain_key)
        if not isinstance(record, Mapping):
            return None, full
        last_id = record.get("lastResponseId")
        history = record.get("history")
        if (
            not isinstance(last_id, str)
            or last_id not in _LIVE_IDS
            or record.get("model") != model
            or not isinstance(history, list)
            or not history
        ):
            return None, full
        positions = [(i, d) for i, item in enumerate(full) if (d := item_digest(item)) is not None]
        if len(positions) <= len(history):
            return None, full
        if [d for _, d in positions[: len(history)]] != history:
            return None, full
        boundary = positions[len(history) - 1][0] + 1
        # The server holds the reasoning items of its own output: do not send them back.
        suffix = [
            item
            for item in full[boundary:]
            if not (isinstance(item, UnknownItem) and item.type == "reasoning")
        ]
        return last_id, suffix

    def _record(
        self,
        request: CreateResponseRequest,
        response: CreateResponseResponse,
        model: str,
        state: SavedState | None,
        chain_key: str,
        full_body: Mapping[str, Any],
    ) -> SavedState | None:
        if state is None or not self.chaining or full_body.get("store") is False:
            return None
        meta = dict(state.meta or {})
        chains = dict(meta.get(CHAIN_META_KEY) or {})
        if response.status in ("completed", None) and response.id:
            _remember(response.id)
            chains[chain_key] = {
                "lastResponseId": response.id,
                "model": model,
                "history": _digests(request.input) + _digests(response.output),
            }
        else:
            chains.pop(chain_key, None)
        meta[CHAIN_META_KEY] = chains
        return state.model_copy(update={"meta": meta})
