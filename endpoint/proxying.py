"""A `/v1/responses` call to a provider model (`openrouter/...`, `openresponses/...`): the
request forwarded through the router with the client's tools and sampling, its stream
relayed event by event, every item type in the upstream's order, and recorded in the
session's trace as one model call (docs/endpoint.md, "Provider models")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from endpoint.schemas import CreateResponseBody
from gambit.core import (
    CreateResponseRequest,
    FunctionCallItem,
    MessageItem,
    ResponseToolDefinition,
    SavedState,
    item_to_dict,
    items_to_messages,
    new_state,
)


@dataclass
class Proxied:
    """What the upstream answered: its text, its output items as received, its incomplete
    details, and the conversation to save (what was sent and what came back)."""

    text: str
    output: list[dict[str, Any]]
    incomplete: dict[str, Any] | None
    state: SavedState


async def proxy_call(
    body: CreateResponseBody,
    items: list[Any],
    router: Any,
    on_trace: Callable[[dict[str, Any]], None],
    *,
    on_event: Callable[[dict[str, Any]], None],
) -> Proxied:
    """Send `items` (the conversation so far and this request's input) to `body.model`;
    each upstream stream event goes to `on_event` as it comes."""
    extras = {
        key: value
        for key, value in (
            ("parallel_tool_calls", body.parallel_tool_calls),
            ("max_tool_calls", body.max_tool_calls),
        )
        if value is not None
    }
    request = CreateResponseRequest(
        model=body.model,
        input=items,
        instructions=body.instructions,
        tools=[
            ResponseToolDefinition.model_validate(
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters or {"type": "object"},
                    },
                }
            )
            for t in body.tools or []
        ]
        or None,
        tool_choice=body.tool_choice,
        max_output_tokens=body.max_output_tokens,
        params={
            key: value
            for key, value in (("temperature", body.temperature), ("top_p", body.top_p))
            if value is not None
        }
        or None,
        stream=True,
    )
    if extras:  # top-level fields of the wire body (request_extras)
        request = request.model_copy(update=extras)
    resolved = router.resolve_model(body.model, params=None, deck_path=None)
    provider = resolved.provider or router
    on_trace(
        {
            "type": "model.call",
            "model": resolved.model,
            "items": [item_to_dict(i) for i in items],
        }
    )

    def relay(event: dict[str, Any]) -> None:
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            on_event(event)

    result = await provider.responses(
        request.model_copy(update={"model": resolved.model}), on_stream_event=relay
    )
    response = result.response
    output = [item_to_dict(i) for i in response.output]
    incomplete = response.incomplete_details_or_none()
    usage = response.usage.to_dict() if response.usage is not None else None
    calls = [i for i in response.output if isinstance(i, FunctionCallItem)]
    finish = "tool_calls" if calls else "stop"
    if incomplete is not None:
        reason = incomplete["reason"]
        finish = "length" if reason == "max_output_tokens" else reason
    on_trace(
        {
            "type": "model.result",
            "model": resolved.model,
            "output": output,
            "usage": usage,
            "finishReason": finish,
            "incompleteDetails": incomplete,
        }
    )
    status = "incomplete" if incomplete is not None else "completed"
    if calls:
        status = "paused"  # the client answers the calls (as a deck's run.end says)
    on_trace({"type": "run.end", "status": status, "usage": usage})
    conversation = [*items, *response.output]
    # Its chat messages too: the Test tab shows the conversation from them.
    state = new_state("responses").model_copy(
        update={"items": conversation, "messages": items_to_messages(conversation)}
    )
    texts = [
        part.text
        for output_item in response.output
        if isinstance(output_item, MessageItem)
        for part in output_item.content
        if part.text  # every content part has a text (optional on UnknownContent)
    ]
    return Proxied("".join(texts), output, incomplete, state)
