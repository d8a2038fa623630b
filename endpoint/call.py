"""One `POST /v1/responses` (docs/endpoint.md): the four parts of a call, put together.

- `routing`: which deck or provider model the call names and which session it continues;
- `recording`: the session and run it is recorded as, and the stored response;
- `running`: running the deck, or proxying the provider model;
- `encoding`: the response resource and its stream events.

`ResponseCall.events()` is the whole stream: the first events go out before anything is
recorded, the run's text streams as it is produced, and the final resource is stored before
the terminal event is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from decks_app.models import Workspace
from endpoint import routing
from endpoint.encoding import ResponseEncoder
from endpoint.models import ApiKey
from endpoint.recording import Recording
from endpoint.running import Delta, Outcome, Runner, UpstreamEvent
from endpoint.schemas import ApiError, CreateResponseBody, Item
from gambit.core import new_id

Event = dict[str, Any]


class ResponseCall:
    """One `POST /v1/responses`: resolves the model, runs it, yields the stream events."""

    def __init__(
        self,
        workspace: Workspace,
        body: CreateResponseBody,
        items: list[Item],
        *,
        key: ApiKey | None = None,
        owner: str | None = None,
        route: tuple[str, str] | None = None,
    ):
        # An unsaved `Workspace` (its root only, `routing.served_workspace`) is resolved to
        # its row when the call is recorded.
        self.workspace = workspace
        self.body = body
        self.items = items
        # Who the call belongs to (`api_keys.owner`), and the conversation it is routed into
        # (`store.route_of`: the value and the parameter it came from), if any.
        self.owner = owner
        self.route = route
        response_id = new_id("resp")
        self.target = routing.Target()
        self.encoder = ResponseEncoder(body, response_id)
        self.recording = Recording(response_id, body, items, key=key, owner=owner, route=route)

    @property
    def response_id(self) -> str:
        return self.encoder.response_id

    @property
    def session_id(self) -> str:
        """The session the call is recorded in, known before the first byte (the
        `Gambit-Session-Id` response header): a new one, the previous response's, or the
        routed one."""
        return self.target.session_id

    def prepare_reads_tables(self) -> bool:
        """Whether `prepare` touches the database or deck files (then it runs in the request's
        sync thread)."""
        return routing.reads_tables(self.body, self.items, self.route)

    def prepare(self) -> None:
        """Find the deck (or provider model), the previous response's run, the routed
        session and the referenced items, if any; raises the API's error when there is
        none. A deck's own sampling parameters are known from here on, so the first event
        reports the values the run uses."""
        self.target = routing.resolve(
            self.workspace, self.body, owner=self.owner, route=self.route, items=self.items
        )
        if self.target.deck is not None:
            self.encoder.report_deck_sampling(self.target.deck.sampling)

    def record(self) -> None:
        """Create this call's session and run (synchronous, in a thread)."""
        self.workspace = self.recording.record(self.workspace, self.target, self.encoder.resource)

    async def events(self) -> AsyncIterator[Event]:
        """The whole stream; cancelling the iteration cancels the run and records it."""
        encoder = self.encoder
        for event in encoder.opening():
            yield event
        # Recording starts after the first bytes, and is never abandoned half-way: a client
        # that leaves meanwhile still gets its call recorded (as canceled).
        recording = asyncio.ensure_future(asyncio.to_thread(self.record))
        try:
            await asyncio.shield(recording)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await recording
                await self.recording.cancel(encoder.resource("incomplete"))
            raise
        except ApiError as exc:  # lost a race for the conversation: fail this response
            error = {"code": exc.code or "conversation_busy", "message": exc.message}
            yield encoder.error(exc.type, error, exc.param)
            yield encoder.terminal(encoder.resource("failed", error))
            return
        queue: asyncio.Queue[Delta] = asyncio.Queue()
        runner = asyncio.create_task(self._execute(queue))
        try:
            while (got := await queue.get()) is not None:
                if isinstance(got, UpstreamEvent):  # a proxied model's stream, relayed
                    events = encoder.relay(got.event)
                elif isinstance(got, dict):  # an extension or reasoning item, complete
                    events = encoder.extension(got)
                else:
                    events = encoder.text_delta(got)
                for event in events:
                    yield event
            outcome = await runner
        except BaseException:
            runner.cancel()
            with contextlib.suppress(BaseException):
                await runner
            raise
        failed = outcome.status == "failed"
        encoder.incomplete = None if failed else outcome.incomplete
        if outcome.proxied_output is not None or encoder.relayed:
            closing = encoder.relay_rest(outcome.proxied_output or [])
        else:
            closing = encoder.answer(outcome.final_text, paused=bool(outcome.pending))
            for call in outcome.pending:
                closing += encoder.function_call(call.call_id, call.name, call.arguments)
        for event in closing:
            yield event
        if failed:
            assert outcome.error is not None
            error = dict(outcome.error)
            yield encoder.error(error.pop("type", "server_error"), error, None)
            final = encoder.resource("failed", error)
        else:
            final = encoder.resource("incomplete" if encoder.incomplete else "completed")
        # Stored before it is sent: a client that leaves on the terminal event, or asks for
        # the response the moment it has it, finds it as it was answered.
        await asyncio.to_thread(self.recording.store_resource, final)
        yield encoder.terminal(final)

    async def _execute(self, deltas: asyncio.Queue[Delta]) -> Outcome:
        """Run the deck (or proxy the model) and record how it ended; `deltas` receives the
        text and extension items as the run produces them, then None."""
        recording = self.recording
        assert recording.run is not None and recording.session is not None
        writer = recording.trace_writer()
        started = time.monotonic()
        runner = Runner(
            self.workspace,
            self.body,
            self.items,
            deck=self.target.deck,
            session=recording.session,
            run_id=recording.run.id,
            sampling=self.encoder.sampling,
            references=self.target.references,
        )
        try:
            outcome = await runner.execute(deltas, writer.add)
        except asyncio.CancelledError:
            await writer.close()
            outcome = runner.outcome
            await recording.finish(
                "canceled",
                outcome.error_text,
                self.encoder.resource("incomplete"),
                outcome.latest,
                started,
            )
            await deltas.put(None)
            raise
        await writer.close()
        self.encoder.set_usage(outcome.latest.usage or {})
        await recording.finish(
            "failed" if outcome.status == "failed" else "completed",
            outcome.error_text,
            self.encoder.resource("in_progress"),
            outcome.latest,
            started,
        )
        await deltas.put(None)
        return outcome


def start_call(data: dict[str, Any], *, owner: str | None = None) -> ResponseCall:
    """Parse an Open Responses body, prepare its call (synchronous; run it with `events()`)."""
    from decks_app.workspaces.served import current_workspace
    from endpoint.schemas import parse_body

    body, items = parse_body(data)
    call = ResponseCall(current_workspace(), body, items, owner=owner)
    call.prepare()
    return call
