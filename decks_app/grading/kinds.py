"""The Grade tab's and Verify's run kinds: a grade of one session ("grader") and a Verify
batch ("verify"). Registered from decks_app.apps.DecksAppConfig.ready() (docs/simulator.md,
"Jobs")."""

from __future__ import annotations

from decks_app.grading import grades, verify
from decks_app.grading.grades import GraderParams, GradingResult
from decks_app.grading.verify import VerifyParams, VerifyResult
from decks_app.runs.database import db
from decks_app.runs.executor import RunContext
from decks_app.runs.registry import Outcome, Preparation, run_kind
from decks_app.runs.state import session_state_dict


def _load_graded_state(prep: Preparation) -> None:
    """The graded session's conversation (a grade run's session is its own; `source` is the
    graded one)."""
    source = prep.session.source
    prep.data = session_state_dict(source) if source is not None else None


@run_kind(
    "grader",
    params=GraderParams,
    result=GradingResult,
    description="a grader deck's grades of a session's conversation",
    prepare=_load_graded_state,
    finish=grades.record_grading,
    origins=("grade",),
)
async def grade(ctx: RunContext[GraderParams]) -> Outcome:
    result = await grades.grade_session(
        workspace_root=ctx.session.workspace.root,
        grader_path=ctx.params.grader,
        state=ctx.prepared,
        run_options={
            **ctx.model_options(),
            "on_trace": ctx.on_trace,
            "stream": False,
            "run_id": ctx.run.id,
        },
    )
    return Outcome(result)


@run_kind(
    "verify",
    params=VerifyParams,
    result=VerifyResult,
    description="a Verify batch: scenario runs of the deck, each graded several times",
    origins=("verify",),
)
async def verify_batch(ctx: RunContext[VerifyParams]) -> Outcome:
    result = await verify.execute_verify(
        run=ctx.run,
        session=ctx.session,
        settings=ctx.params,
        run_options={**ctx.model_options(), "stream": False},
        db=db,
    )
    return Outcome(result)
