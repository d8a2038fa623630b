"""`BaseProvider` / `BaseChatProvider` (gambit.core.provider): a provider implements one method,
`execute(call)`, and gets the `responses(...)` and `chat(...)` surface; its streamed events
reach a chat-mode caller as text. A plugin that implements the protocol directly keeps
working (tests/providers/test_plugins.py)."""

from __future__ import annotations

from typing import Any

from gambit.core.provider import (
    BaseChatProvider,
    BaseProvider,
    ChatMessage,
    ChatProvider,
    CreateResponseResponse,
    ModelProvider,
    ProviderCall,
    ProviderResponse,
    ResponseEventEncoder,
    item_text,
    message_item,
    new_id,
)
from gambit.providers import ProviderRouter
from tests.providers.helpers import request


class Shout(BaseChatProvider):
    """Answers the last user message in capitals, streamed a word at a time."""

    name = "shout"
    offline = True

    def __init__(self) -> None:
        self.calls: list[ProviderCall] = []

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        self.calls.append(call)
        said = [item_text(i) for i in call.request.input if getattr(i, "role", None) == "user"]
        text = said[-1].upper() if said else ""
        response = CreateResponseResponse(
            id=new_id("resp"),
            model=call.request.model,
            status="completed",
            output=[message_item("assistant", text)],
        )
        if call.on_event is not None:
            encoder = ResponseEventEncoder(full=False)
            events = encoder.created({"id": response.id, "status": "in_progress"})
            index, opened = encoder.open_message()
            events += opened
            for word in text.split(" "):
                events += encoder.text_delta(index, word + " ")
            events += encoder.close(index)
            events.append(encoder.terminal({"id": response.id, "status": "completed"}))
            for event in events:
                call.on_event(event)
        return ProviderResponse(response=response)


class Quiet(BaseProvider):
    name = "quiet"

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        response = CreateResponseResponse(
            id="r", status="completed", output=[message_item("assistant", "...")]
        )
        return ProviderResponse(response=response)


async def test_one_method_serves_both_surfaces():
    provider = Shout()
    assert isinstance(provider, ModelProvider) and isinstance(provider, ChatProvider)
    events: list[dict[str, Any]] = []
    result = await provider.responses(
        request("shout/m", "make noise"), on_stream_event=events.append
    )
    assert item_text(result.response.output[0]) == "MAKE NOISE"
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert provider.calls[0].mode == "responses"

    chunks: list[str] = []
    chat = await provider.chat(
        model="shout/x",
        messages=[ChatMessage(role="user", content="hi there")],
        stream=True,
        on_stream_text=chunks.append,
    )
    assert chat.message.content == "HI THERE" and chat.finish_reason == "stop"
    assert chunks == ["HI ", "THERE "]
    call = provider.calls[1]
    assert call.mode == "chat" and call.request.model == "shout/x"
    assert call.messages == [ChatMessage(role="user", content="hi there")]
    # Not streamed: no text goes out, whatever callback was given.
    await provider.chat(
        model="shout/x",
        messages=[ChatMessage(role="user", content="a")],
        on_stream_text=chunks.append,
    )
    assert chunks == ["HI ", "THERE "]


async def test_a_responses_only_provider_is_no_chat_provider():
    quiet = Quiet()
    assert isinstance(quiet, ModelProvider) and not isinstance(quiet, ChatProvider)
    assert item_text((await quiet.responses(request("quiet/m", "x"))).response.output[0]) == "..."


async def test_the_router_hands_chat_calls_to_the_providers_own_chat():
    shout = Shout()
    # Injected under two built-in prefixes (the router routes known prefixes only).
    router = ProviderRouter(providers={"offline": shout, "codex-cli": Quiet()})
    chunks: list[str] = []
    chat = await router.chat(
        model="offline/m",
        messages=[ChatMessage(role="user", content="go")],
        stream=True,
        on_stream_text=chunks.append,
    )
    assert chat.message.content == "GO" and chunks == ["GO "]
    assert shout.calls[-1].mode == "chat"
    quiet = await router.chat(
        model="codex-cli/m", messages=[ChatMessage(role="user", content="go")]
    )
    assert quiet.message.content == "..."
