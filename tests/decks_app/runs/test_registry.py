"""The run-kind registry (docs/simulator.md, "Jobs"): a kind registered the way a third-party
app would register one runs through the real queue (claim_next_run + execute_run); unknown
kinds and origins, and params or results that do not fit a kind's model, are refused with a
clear error."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from decks_app.models import Run, Session, TraceEvent
from decks_app.runs import executor, queue, registry
from decks_app.runs.executor import RunContext
from decks_app.runs.registry import (
    InvalidPayload,
    Outcome,
    Payload,
    Preparation,
    RunFailed,
    RunKind,
    TurnParams,
    UnknownOrigin,
    UnknownRunKind,
)
from decks_app.sessions.actions import create_session
from decks_app.workspaces.served import current_workspace

pytestmark = pytest.mark.django_db(transaction=True)


class ShoutParams(Payload):
    text: str
    times: int = 1


class ShoutResult(Payload):
    reply: str
    prepared: str


def _prepare(prep: Preparation) -> None:
    prep.data = f"prepared for {prep.session.deck_path}"


def _finish(run: Run, session: Session) -> None:
    # In the finishing transaction, after the run row is saved: the kind may record more.
    session.meta = {**(session.meta or {}), "shouted": run.id}


async def _shout(ctx: RunContext[ShoutParams]) -> Outcome:
    ctx.on_trace({"type": "log", "level": "info", "message": "shouting", "ts": 1})
    result = await ctx.one_turn(ctx.params.text.upper() * ctx.params.times, ctx.state)
    return Outcome(ShoutResult(reply=result.output, prepared=ctx.prepared), result.state)


SHOUT = RunKind(
    name="shout",
    params=ShoutParams,
    result=ShoutResult,
    execute=_shout,
    checkpoints=True,
    prepare=_prepare,
    finish=_finish,
)


def _queued(kind: str, params: object) -> Run:
    session = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
    return Run.objects.create(session=session, kind=kind, params=params)


async def _drain(run_id: str) -> str:
    assert await sync_to_async(queue.claim_next_run)("third-party") == run_id
    return await asyncio.wait_for(executor.execute_run(run_id), 20)


async def test_a_third_party_kind_runs_through_the_real_queue():
    with registry.registered(SHOUT):
        assert "shout" in registry.names()
        run = await sync_to_async(_queued)("shout", ShoutParams(text="hi ", times=2))
        assert await _drain(run.id) == "completed"
        run = await Run.objects.select_related("session").aget(pk=run.id)
        result = run.read_result(ShoutResult)
        assert result is not None and result.model_dump() == {
            "reply": "You said: HI HI ",
            "prepared": "prepared for support/PROMPT.md",
        }
        assert run.params == {"text": "hi ", "times": 2}
        session = run.session
        assert session.meta["shouted"] == run.id  # the finish hook ran
        assert session.messages[-1] == {"role": "assistant", "content": "You said: HI HI "}
        types = [t async for t in TraceEvent.objects.filter(run=run).values_list("type", flat=True)]
        assert "log" in types and types[-1] == "run.end"
        assert run.total_tokens > 0 and run.model == "offline/echo"


async def test_a_kind_fails_a_run_with_a_partial_result():
    async def half(ctx: RunContext[ShoutParams]) -> Outcome:
        raise RunFailed("gave up half way", ShoutResult(reply="half", prepared=""))

    with registry.registered(RunKind("half", ShoutParams, ShoutResult, half)):
        run = await sync_to_async(_queued)("half", {"text": "x"})
        assert await _drain(run.id) == "failed"
        run = await Run.objects.aget(pk=run.id)
        assert run.error == "gave up half way"
        assert run.result == {"reply": "half", "prepared": ""}


async def test_a_kind_that_returns_another_models_result_fails_its_run():
    async def wrong(ctx: RunContext[ShoutParams]) -> Outcome:
        return Outcome(TurnParams(message="not a result"))

    with registry.registered(RunKind("wrong", ShoutParams, ShoutResult, wrong)):
        run = await sync_to_async(_queued)("wrong", {"text": "x"})
        assert await _drain(run.id) == "failed"
        run = await Run.objects.aget(pk=run.id)
        assert run.error == "run kind 'wrong' returned TurnParams, not ShoutResult"
        assert run.result is None


async def test_a_queued_run_whose_kind_is_gone_fails_with_the_reason():
    with registry.registered(SHOUT):
        run = await sync_to_async(_queued)("shout", {"text": "x"})
    assert await _drain(run.id) == "failed"  # its app was uninstalled meanwhile
    run = await Run.objects.aget(pk=run.id)
    assert run.error.startswith("unknown run kind 'shout': no installed app registers it")
    assert run.finished_at is not None


async def test_a_queued_run_whose_params_no_longer_fit_fails_with_the_reason():
    run = await sync_to_async(_queued)("manual", {"message": "hi"})
    # written behind the model's back (an old row, a hand edit): the executor refuses it
    await Run.objects.filter(pk=run.id).aupdate(params={"message": 42})
    assert await _drain(run.id) == "failed"
    run = await Run.objects.aget(pk=run.id)
    assert run.error == (
        f"run {run.id}: the params of a 'manual' run are not a valid TurnParams: "
        "message: Input should be a valid string"
    )
    assert run.params == {"message": 42} and run.result is None


def test_an_unknown_kind_or_origin_is_refused_with_a_clear_error(workspace):
    session = create_session(workspace, "support/PROMPT.md", model="offline/echo")
    with pytest.raises(UnknownRunKind) as info:
        Run.objects.create(session=session, kind="nope")
    assert str(info.value).startswith(
        "unknown run kind 'nope': no installed app registers it (registered: api, assistant, "
        "grader, manual, replay, scenario, verify); register it with @run_kind('nope', ...)"
    )
    with pytest.raises(UnknownOrigin) as info:
        Session.objects.create(workspace=workspace, deck_path="support/PROMPT.md", origin="x")
    assert str(info.value).startswith("unknown session origin 'x': no installed app registers")
    session.origin = "grade"
    session.save()  # an origin a kind registered
    assert not Run.objects.filter(kind="nope").exists()


def test_params_and_results_that_do_not_fit_the_kind_are_refused(workspace):
    session = create_session(workspace, "support/PROMPT.md", model="offline/echo")
    with pytest.raises(InvalidPayload) as info:
        Run.objects.create(session=session, kind="grader", params={"grader": 3})
    assert "the params of a 'grader' run are not a valid GraderParams: grader: Input " in str(
        info.value
    )
    with pytest.raises(InvalidPayload, match="manual.*TurnParams: msg: Extra inputs"):
        Run.objects.create(session=session, kind="manual", params={"msg": "hi"})
    with pytest.raises(InvalidPayload, match="a 'manual' run's params is TurnParams, not Shout"):
        Run.objects.create(session=session, kind="manual", params=ShoutParams(text="x"))
    run = Run.objects.create(session=session, kind="manual", params={"message": "hi"})
    run.result = {"output": "fine"}
    run.save()
    run.result = {"turns": 2}
    with pytest.raises(InvalidPayload, match="result of a 'manual' run are not a valid ChatResult"):
        run.save()
    with pytest.raises(TypeError, match="its params are TurnParams, not ShoutParams"):
        run.read_params(ShoutParams)
    assert run.read_params(TurnParams).message == "hi"


def test_a_kind_the_queue_does_not_run_cannot_be_queued(workspace):
    session = create_session(workspace, "support/PROMPT.md", model="offline/echo")
    with pytest.raises(InvalidPayload, match="run kind 'api' is not executed by the queue"):
        Run.objects.create(session=session, kind="api", params={}, result={"id": "resp-x"})
    assert "api" in registry.names(heartbeats=False)


def test_a_name_is_registered_once():
    other = RunKind("manual", ShoutParams, ShoutResult, _shout)
    with pytest.raises(ValueError, match="run kind 'manual' is registered already"):
        registry.register(other)
    with pytest.raises(ValueError, match="use 1-16 letters"):
        registry.register(RunKind("a name too long here", ShoutParams, None, _shout))
