"""`run_verify`: N scenario runs x M grader repeats, failures kept, concurrency bounded."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from gambit.core import load_deck_tree
from gambit.core._verify_run import deck_files_hash, grade_rows, run_verify
from gambit.core.provider import ResolvedModel
from gambit.providers.offline import Call, Fail, ScriptedProvider

from .conftest import GRADER_SCHEMAS, MODEL


def _tree(decks, grader_front: str = GRADER_SCHEMAS):
    decks.deck("scenario/PROMPT.md", MODEL, "You are a customer. Say one thing, then stop.")
    decks.deck(
        "grader/PROMPT.md",
        grader_front + MODEL,
        "Grade the conversation.\n\n![](gambit://snippets/respond.md)",
    )
    return decks.deck(
        "root/PROMPT.md",
        MODEL
        + """
        [[scenarios]]
        path = "../scenario/PROMPT.md"
        label = "One question"

        [[graders]]
        path = "../grader/PROMPT.md"
        label = "Helpful"
        """,
        "You are a helpful assistant.",
    )


def _deck(provider: ScriptedProvider) -> str:
    """Which deck made the call: the provider records it just before calling the reply."""
    path = provider.records[-1].deck_path or ""
    return path.split("/")[-2]


def _respond(score: float, reason: str) -> Call:
    return Call("gambit_respond", {"payload": {"score": score, "reason": reason}})


class Model:
    """Answers by deck: the root replies, the persona asks once then stops, the grader scores
    from a queue (one per grade call); a run whose persona message contains 'boom' fails."""

    def __init__(self, scores, *, fail_root_on=(), delay: float = 0.0):
        self.provider = ScriptedProvider()
        self.provider.enqueue(*([self] * 500))
        self.scores = iter(scores)
        self.fail_root_on = set(fail_root_on)
        self.delay = delay
        self.persona_calls = 0
        self.root_calls = itertools.count(1)
        self.in_flight = 0
        self.peak = 0

    async def __call__(self, request):
        deck = _deck(self.provider)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if deck == "scenario":
                said_before = any(getattr(i, "role", None) == "assistant" for i in request.input)
                return "" if said_before else "Where is my order?"
            if deck == "grader":
                score = next(self.scores)
                return _respond(score, f"scored {score}") if score is not None else "no idea"
            n = next(self.root_calls)
            if n in self.fail_root_on:
                return Fail("upstream reset", status=502, after_deltas=["It is on "])
            return "It is on its way."
        finally:
            self.in_flight -= 1


def _provider(model: Model) -> ScriptedProvider:
    return model.provider


async def test_runs_and_repeats_give_one_sample_each_with_hand_computed_metrics(decks):
    root = _tree(decks)
    # 3 runs x 2 repeats: runs score (3, 3), (1, 2), (-1, -1)
    model = Model([3, 3, 1, 2, -1, -1])
    report = await run_verify(root, provider=_provider(model), runs=3, repeats=2, concurrency=1)
    assert [r.status for r in report.runs] == ["completed"] * 3
    assert [r.turns for r in report.runs] == [1, 1, 1]
    assert len(report.grades) == 6
    assert sorted(g.score for g in report.grades) == [-1, -1, 1, 2, 3, 3]
    (summary,) = report.summaries().values()
    assert summary.samples == 6 and summary.scored == 6
    assert summary.passed == 4  # scores >= 0
    assert summary.scores.mean == pytest.approx(7 / 6, abs=1e-3)
    assert summary.consistency.pairs == 3
    assert summary.consistency.exact == pytest.approx(2 / 3, abs=1e-3)
    assert summary.consistency.within_one == 1.0
    assert summary.outliers[0].mean == -1
    assert all(r.calls == 4 and r.tokens > 0 for r in report.runs)  # root, persona x2


async def test_a_failed_run_keeps_its_partial_conversation_and_is_not_graded(decks):
    root = _tree(decks)
    model = Model([2, 2], fail_root_on={2})  # the root's second reply fails mid-stream
    report = await run_verify(root, provider=_provider(model), runs=2, concurrency=1)
    failed = [r for r in report.runs if r.status == "failed"]
    assert len(failed) == 1
    assert "upstream reset" in failed[0].error
    assert failed[0].state is not None  # the conversation so far is kept
    texts = [m.content for m in failed[0].state.messages]
    assert "It is on its way." in texts
    not_graded = [g for g in report.grades if g.run_id == failed[0].id]
    assert not_graded[0].status == "failed" and "scenario run failed" in not_graded[0].error
    (summary,) = report.summaries().values()
    assert summary.failure_counts.get("execution") == 1
    assert summary.scored == 1


async def test_a_grader_without_a_score_is_a_grading_failure_with_its_reason(decks):
    root = _tree(decks)
    model = Model([None, None, None])
    report = await run_verify(root, provider=_provider(model), runs=1, concurrency=1)
    (grade,) = report.grades
    assert grade.status == "failed"
    (summary,) = report.summaries().values()
    assert summary.failure_counts.get("grader_error") == 1
    assert summary.failures["grading"]


async def test_concurrency_bounds_the_model_calls_in_flight(decks):
    root = _tree(decks)
    model = Model([1] * 40, delay=0.02)
    report = await run_verify(root, provider=_provider(model), runs=8, repeats=2, concurrency=3)
    assert len(report.grades) == 16
    assert model.peak <= 3
    assert model.peak >= 2  # it did run things at once


class _ResolvesTo:
    """A model resolver (as the provider router is) that hands every deck `provider`."""

    def __init__(self, provider):
        self.provider = provider

    def resolve_model(self, model, *, params=None, deck_path=None):
        return ResolvedModel(
            model=model if isinstance(model, str) else model[0], provider=self.provider
        )


async def test_calls_to_a_provider_a_resolver_hands_out_are_bounded_too(decks):
    # The router resolves each deck's model to a provider of its own; those calls must take
    # the same slots as calls to the run's provider (docs/cli.md, verify --concurrency).
    root = _tree(decks)
    model = Model([1] * 40, delay=0.02)
    unused = ScriptedProvider()
    report = await run_verify(
        root,
        provider=unused,
        model_resolver=_ResolvesTo(model.provider),
        runs=8,
        repeats=2,
        concurrency=2,
    )
    assert len(report.grades) == 16 and not unused.records
    assert model.peak == 2


async def test_concurrency_one_runs_one_thing_at_a_time(decks):
    root = _tree(decks)
    model = Model([1] * 10, delay=0.01)
    seen = []
    await run_verify(
        root,
        provider=_provider(model),
        runs=3,
        concurrency=1,
        on_progress=lambda p: seen.append(p.to_json()),
    )
    assert model.peak == 1
    assert max(s["run"]["running"] + s["grade"]["running"] for s in seen) == 1


async def test_progress_counts_reach_the_totals(decks):
    root = _tree(decks)
    seen = []
    report = await run_verify(
        root,
        provider=_provider(Model([0] * 10)),
        runs=2,
        repeats=2,
        concurrency=2,
        on_progress=lambda p: seen.append(p.to_json()),
    )
    assert seen[-1]["run"] == {"total": 2, "queued": 0, "running": 0, "completed": 2, "failed": 0}
    assert seen[-1]["grade"]["completed"] == 4 and seen[-1]["grade"]["total"] == 4
    assert any(s["run"]["running"] for s in seen)
    assert len(report.runs) == 2


async def test_export_rows_carry_the_grader_hash_and_the_human_rating(decks):
    front = GRADER_SCHEMAS.replace("conversation.zod.ts", "turn.zod.ts")
    root = _tree(decks, front)
    report = await run_verify(root, provider=_provider(Model([2, 1])), runs=1, concurrency=1)
    (grade,) = report.grades
    first, second = grade.grading.grades  # per turn: the two assistant messages
    rows = list(grade_rows(report, ratings={second.message_ref_id: -1}))
    base = {
        "session": report.runs[0].state.run_id,
        "run": report.runs[0].id,
        "scenario": "One question",
        "grader": "Helpful",
        "graderHash": grade.grader_hash,
        "repeat": 1,
        "flag": None,
    }
    assert rows == [
        {
            **base,
            "turn": first.message_index,
            "score": 2,
            "reason": "scored 2",
            "humanRating": None,
        },
        {
            **base,
            "turn": second.message_index,
            "score": 1,
            "reason": "scored 1",
            "humanRating": -1,
        },
    ]


def test_the_grader_hash_changes_with_its_rubric(decks):
    root = _tree(decks)
    grader = root.parent.parent / "grader" / "PROMPT.md"
    before = deck_files_hash(load_deck_tree(grader))
    assert before == deck_files_hash(load_deck_tree(grader))
    grader.write_text(grader.read_text().replace("Grade the", "Grade strictly the"))
    assert deck_files_hash(load_deck_tree(grader)) != before


async def test_no_scenario_is_a_clear_error(decks):
    root = decks.deck("lonely/PROMPT.md", MODEL, "Hi.")
    with pytest.raises(ValueError, match="no scenario to run"):
        await run_verify(root, provider=ScriptedProvider())
