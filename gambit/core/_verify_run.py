"""Running Verify: N scenario runs x M repeats of each grader, at a bounded concurrency.

`run_verify` is the one implementation behind `gambit verify` (and the figures the simulator
shows come from the same `summarize` over the same samples). It runs every scenario `runs`
times against the root deck, grades every finished conversation `repeats` times with every
grader, and reports each run and each grade with its duration, tokens and cost, so a failure
is never a bare count: a failed run keeps its error and whatever conversation it produced.

Scenario runs and grade samples share one concurrency limit on model calls (a call holds a
slot only while the provider answers: `_call_slots`), and a run's grades start as soon as that
run finishes. Half as many runs and grades again are under way at once (none more at
concurrency 1, which runs one thing at a time), so that the next call has its request ready
when a slot frees, without building every run's request at the start.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._call_slots import CallSlots, on_first_slot
from ._deck import Deck, DeckTree
from ._grading import GradingRun, grade_state
from ._ids import new_id
from ._loader import as_tree
from ._permissions import EntryPermissions, entry_permissions
from ._provider import ModelProvider
from ._runtime import _MISSING
from ._scenario import run_scenario
from ._state import SavedState
from ._verify import GraderSummary, GradeSample, summarize

if TYPE_CHECKING:
    from ._calibration import BiasProbe, CalibrationPair

Phase = Literal["run", "grade"]
Status = Literal["queued", "running", "completed", "failed"]


@dataclass
class _Meter:
    """Tokens, cost and model calls seen on `model.result` trace events."""

    calls: int = 0
    tokens: int = 0
    cost: float | None = None

    def observe(self, event: dict[str, Any]) -> None:
        if event.get("type") != "model.result":
            return
        self.calls += 1
        usage = event.get("usage")
        if not isinstance(usage, dict):
            return
        total = usage.get("totalTokens", usage.get("total_tokens"))
        if isinstance(total, int):
            self.tokens += total
        cost = usage.get("costUsd")
        if isinstance(cost, int | float):
            self.cost = (self.cost or 0.0) + float(cost)


@dataclass(kw_only=True)
class _Spent:
    """What a scenario run or a grade cost, and the error that ended it (if one did)."""

    error: str | None = None
    duration_ms: int | None = None
    calls: int = 0
    tokens: int = 0
    cost: float | None = None

    def note_spent(self, began: float, meter: _Meter) -> None:
        """The time since `began` (a `time.perf_counter()`) and what `meter` counted."""
        self.duration_ms = round((time.perf_counter() - began) * 1000)
        self.calls, self.tokens, self.cost = meter.calls, meter.tokens, meter.cost

    def spent_json(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "durationMs": self.duration_ms,
            "calls": self.calls,
            "tokens": self.tokens,
            "cost": self.cost,
        }


@dataclass
class ScenarioRunRecord(_Spent):
    """One scenario run: its conversation (even a partial one when it failed) and its cost."""

    id: str
    scenario: str
    scenario_label: str | None
    index: int  # 1-based within its scenario
    status: Status = "queued"
    turns: int = 0
    stopped: str | None = None
    state: SavedState | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scenario": self.scenario,
            "scenarioLabel": self.scenario_label,
            "index": self.index,
            "status": self.status,
            "turns": self.turns,
            "stopped": self.stopped,
            **self.spent_json(),
        }


@dataclass
class GradeRecord(_Spent):
    """One repeat of one grader over one scenario run."""

    id: str
    run_id: str
    grader: str
    grader_label: str | None
    grader_hash: str
    repeat: int  # 1-based
    status: Status = "queued"
    grading: GradingRun | None = None

    @property
    def score(self) -> float | None:
        return self.grading.score if self.grading is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "runId": self.run_id,
            "grader": self.grader,
            "graderLabel": self.grader_label,
            "graderHash": self.grader_hash,
            "repeat": self.repeat,
            "status": self.status,
            "score": self.score,
            "reason": grade_reason(self.grading),
            **self.spent_json(),
            "grading": self.grading.to_json() if self.grading is not None else None,
        }


@dataclass
class VerifyProgress:
    """Live counts per phase ("run", "grade") and status, for progress bars and pages."""

    totals: dict[Phase, int] = field(default_factory=lambda: {"run": 0, "grade": 0})
    counts: dict[Phase, dict[Status, int]] = field(
        default_factory=lambda: {
            phase: {"queued": 0, "running": 0, "completed": 0, "failed": 0}
            for phase in ("run", "grade")
        }
    )

    def move(self, phase: Phase, before: Status | None, after: Status) -> None:
        if before is not None:
            self.counts[phase][before] -= 1
        self.counts[phase][after] += 1

    def to_json(self) -> dict[str, Any]:
        return {phase: {"total": self.totals[phase], **self.counts[phase]} for phase in self.totals}


@dataclass
class VerifyReport:
    """A whole `gambit verify` run: its scenario runs, their grades and the pass threshold."""

    root: str
    runs: list[ScenarioRunRecord]
    grades: list[GradeRecord]
    threshold: float
    duration_ms: int
    # grader path -> its scores paired with human ratings (`gambit verify --ratings`): the
    # summaries then carry each grader's calibration and corrected pass rate.
    ratings: dict[str, list[CalibrationPair]] = field(default_factory=dict)
    _summaries: dict[float, dict[str, GraderSummary]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def samples(self) -> list[GradeSample]:
        """One sample per (run, grader, repeat); a failed run gives execution failures."""
        by_id = {run.id: run for run in self.runs}
        samples = []
        for grade in self.grades:
            run = by_id[grade.run_id]
            links = {"run": run.id, "grade": grade.id}
            if run.status == "failed":
                samples.append(
                    GradeSample(
                        grade.grader,
                        run.id,
                        run.scenario_label or run.scenario,
                        execution_error=run.error or "the scenario run failed",
                        links=links,
                    )
                )
                continue
            error = grade.error
            if error is None and grade.score is None:
                error = "the grader returned no score"
            samples.append(
                GradeSample(
                    grade.grader,
                    run.id,
                    run.scenario_label or run.scenario,
                    score=grade.score,
                    reason=grade_reason(grade.grading),
                    grader_error=error,
                    links=links,
                )
            )
        return samples

    def summaries(self, *, threshold: float | None = None) -> dict[str, GraderSummary]:
        """Per-grader figures; computed once per threshold (the intervals of a calibration
        are a bootstrap, worth not repeating for the table, the JSON and the checks). Set
        `ratings` before the first call."""
        chosen = self.threshold if threshold is None else threshold
        cache: dict[float, dict[str, GraderSummary]] = self.__dict__.setdefault("_summaries", {})
        if chosen not in cache:
            cache[chosen] = summarize(self.samples(), threshold=chosen, ratings=self.ratings)
        return cache[chosen]

    def bias_probes(self) -> dict[str, BiasProbe]:
        """Per grader, the verbosity probe: its scores against the graded replies' lengths
        (the graded message, or every assistant message for a conversation grade)."""
        from ._calibration import length_bias

        by_id = {run.id: run for run in self.runs}
        found: dict[str, tuple[list[float], list[float], list[str]]] = {}
        for grade in self.grades:
            run = by_id[grade.run_id]
            if grade.grading is None or run.state is None:
                continue
            replies = _assistant_lengths(run.state)
            for result in grade.grading.grades:
                if result.score is None:
                    continue
                if result.message_index is not None:
                    length = replies.get(result.message_index)
                else:
                    length = sum(replies.values())
                if length is None:
                    continue
                scores, lengths, conversations = found.setdefault(grade.grader, ([], [], []))
                scores.append(result.score)
                lengths.append(float(length))
                conversations.append(run.id)
        return {
            grader: length_bias(scores, lengths, conversations=conversations)
            for grader, (scores, lengths, conversations) in found.items()
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "threshold": self.threshold,
            "durationMs": self.duration_ms,
            "runs": [run.to_json() for run in self.runs],
            "grades": [grade.to_json() for grade in self.grades],
            "summaries": {name: summary.to_json() for name, summary in self.summaries().items()},
            "biasProbes": {
                name: {"verbosity": probe.to_json()} for name, probe in self.bias_probes().items()
            },
        }


def _assistant_lengths(state: SavedState) -> dict[int, int]:
    """Characters of each assistant message's text, by its index in the conversation."""
    from ._state import state_messages

    return {
        index: len(message.content or "")
        for index, message in enumerate(state_messages(state))
        if message.role == "assistant" and message.content
    }


def grade_reason(grading: GradingRun | None) -> str | None:
    """Why a grading scored what it did: its error, else the reason of its lowest-scored
    result (a conversation graded +1, -1, -1 fails on a -1's reason, never the +1's)."""
    if grading is None:
        return None
    if grading.error:
        return grading.error
    scored = [g for g in grading.grades if g.score is not None]
    for grade in sorted(scored, key=lambda g: g.score if g.score is not None else 0):
        if grade.reason:
            return grade.reason
    return next((g.reason for g in grading.grades if g.reason), None)


def deck_files_hash(tree: DeckTree) -> str:
    """A short hash of the files that make up a deck tree (its rubric, for a grader).

    Every deck file the loader reached, plus every file in the folder of a `PROMPT.md` deck
    (schemas, snippets, policy): a changed rubric gives a new hash.
    """
    files: set[Path] = set()
    for path in tree.decks:
        deck_file = Path(path)
        files.add(deck_file)
        if deck_file.name == "PROMPT.md" and deck_file.parent.is_dir():
            files.update(
                p
                for p in deck_file.parent.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.parts[-3:])
            )
    digest = hashlib.sha256()
    for file in sorted(files):
        try:
            data = file.read_bytes()
        except OSError:
            continue
        digest.update(str(file.name).encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()[:16]


def _bounded(options: Mapping[str, Any] | None, calls: CallSlots) -> dict[str, Any]:
    """`options` (a copy) with its model resolver handing out providers bounded by `calls`."""
    bounded = dict(options or {})
    if bounded.get("model_resolver") is not None:
        bounded["model_resolver"] = calls.resolver(bounded["model_resolver"])
    return bounded


def declared_refs(tree: DeckTree, role: Literal["scenarios", "graders"]) -> list[str]:
    """The root deck's `[[scenarios]]` or `[[graders]]` paths, in declaration order."""
    return [ref.path for ref in getattr(tree.root, role)]


async def run_verify(
    root: str | Path | Deck | DeckTree,
    *,
    provider: ModelProvider,
    scenarios: Sequence[str | Path | DeckTree] | None = None,
    graders: Sequence[str | Path | DeckTree] | None = None,
    runs: int = 1,
    repeats: int = 1,
    concurrency: int = 4,
    max_turns: int = 12,
    threshold: float = 0.0,
    context: Any = _MISSING,
    scenario_input: Any = _MISSING,
    on_progress: Callable[[VerifyProgress], None] | None = None,
    on_run: Callable[[ScenarioRunRecord], None] | None = None,
    on_grade: Callable[[GradeRecord], None] | None = None,
    trace_for: Callable[[ScenarioRunRecord | GradeRecord], Callable[[dict[str, Any]], None]]
    | None = None,
    strict: bool = False,
    persona_options: Mapping[str, Any] | None = None,
    grader_options: Mapping[str, Any] | None = None,
    **run_options: Any,
) -> VerifyReport:
    """Run every scenario `runs` times and grade each run `repeats` times with every grader.

    `context` goes to the root deck and `scenario_input` to every scenario deck (see
    `run_scenario`). `scenarios` / `graders` default (None) to the root deck's `[[scenarios]]` / `[[graders]]`;
    an empty `graders` list runs the scenarios without grading them.
    `run_options` go to every `run_deck` call (model routing, mode, tracing); their
    `project_root` also bounds the decks given by path (default: the root tree's). `trace_for`
    gives each scenario run and grade its own trace callback (beside `on_trace`, which sees
    everything). `persona_options` and `grader_options` replace some run options for the
    scenario personas' and the graders' calls (their own `model_override`: forcing the model
    of the deck under test must not make the graders grade with it; docs/decisions.md,
    "Which model each deck gets"). Failures are recorded on their records, never raised;
    cancelling the call cancels everything in flight.
    """
    if runs < 1 or repeats < 1 or concurrency < 1:
        raise ValueError("runs, repeats and concurrency must be at least 1")
    started = time.perf_counter()
    root_tree = as_tree(root, strict=strict, project_root=run_options.get("project_root"))
    # Scenarios and graders given by path lie in the root deck's project unless told otherwise.
    project_root = run_options.get("project_root") or root_tree.project_root
    scenario_trees = [
        as_tree(s, strict=strict, role="scenario", project_root=project_root)
        for s in (scenarios if scenarios is not None else declared_refs(root_tree, "scenarios"))
    ]
    grader_trees = [
        as_tree(g, strict=strict, role="grader", project_root=project_root)
        for g in (graders if graders is not None else declared_refs(root_tree, "graders"))
    ]
    if not scenario_trees:
        raise ValueError(
            f"{root_tree.root.path}: no scenario to run; declare [[scenarios]] or pass one"
        )
    hashes = [deck_files_hash(tree) for tree in grader_trees]
    # The label people see is the [[scenarios]] / [[graders]] entry's, else the deck's own.
    ref_labels = {
        str(Path(ref.path).resolve()): ref.label
        for ref in [*root_tree.root.scenarios, *root_tree.root.graders]
        if ref.label
    }

    labels: dict[int, str | None] = {}  # per tree: resolving its path is a few syscalls
    permissions: dict[int, EntryPermissions | None] = {}

    def label(tree: DeckTree) -> str | None:
        if id(tree) not in labels:
            labels[id(tree)] = (
                ref_labels.get(str(Path(tree.root.path).resolve())) or tree.root.label
            )
        return labels[id(tree)]

    def grader_permissions(tree: DeckTree) -> EntryPermissions | None:
        """The grader's entry permissions (the same for each of its grades)."""
        if id(tree) not in permissions:
            permissions[id(tree)] = entry_permissions(
                root_tree.root.graders, tree.root.path, root_tree.root.path
            )
        return permissions[id(tree)]

    progress = VerifyProgress()
    calls = CallSlots(concurrency)
    under_way = asyncio.Semaphore(concurrency + concurrency // 2)
    provider = calls.provider(provider)
    run_options, persona_options, grader_options = (
        _bounded(options, calls) for options in (run_options, persona_options, grader_options)
    )
    user_trace = run_options.pop("on_trace", None)

    run_records = [
        ScenarioRunRecord(
            id=new_id("vrun"),
            scenario=tree.root.path,
            scenario_label=label(tree),
            index=index + 1,
        )
        for tree in scenario_trees
        for index in range(runs)
    ]
    trees_by_record = [tree for tree in scenario_trees for _ in range(runs)]
    grade_records: list[GradeRecord] = []
    progress.totals["run"] = len(run_records)
    progress.totals["grade"] = len(run_records) * len(grader_trees) * repeats
    progress.counts["run"]["queued"] = len(run_records)
    progress.counts["grade"]["queued"] = progress.totals["grade"]

    def report() -> None:
        if on_progress is not None:
            on_progress(progress)

    def tracer(
        meter: _Meter, record: ScenarioRunRecord | GradeRecord
    ) -> Callable[[dict[str, Any]], None]:
        own = trace_for(record) if trace_for is not None else None

        def on_trace(event: dict[str, Any]) -> None:
            meter.observe(event)
            if own is not None:
                own(event)
            if user_trace is not None:
                user_trace(event)

        return on_trace

    def start(record: ScenarioRunRecord | GradeRecord, phase: Phase) -> None:
        """The record is running from its first model call (or its end, if it makes none)."""
        if record.status == "queued":
            record.status = "running"
            progress.move(phase, "queued", "running")
            report()

    async def grade_one(record: GradeRecord, tree: DeckTree, state: SavedState) -> None:
        meter = _Meter()
        async with under_way:
            on_first_slot.set(lambda: start(record, "grade"))
            began = time.perf_counter()
            try:
                grading, _ = await grade_state(
                    tree,
                    state,
                    provider=provider,
                    on_trace=tracer(meter, record),
                    strict=strict,
                    threshold=threshold,
                    **{
                        "entry_permissions": grader_permissions(tree),
                        **run_options,
                        **(grader_options or {}),
                        "stream": False,
                    },
                )
                record.grading = grading
                if grading.status == "error":
                    record.error = grading.error
            except Exception as exc:  # recorded on the sample, never lost
                record.error = f"{type(exc).__name__}: {exc}"
            record.note_spent(began, meter)
        start(record, "grade")
        failed = record.error is not None or record.score is None
        record.status = "failed" if failed else "completed"
        progress.move("grade", "running", record.status)
        report()
        if on_grade is not None:
            on_grade(record)

    async def run_one(record: ScenarioRunRecord, tree: DeckTree) -> None:
        meter = _Meter()
        partial: list[SavedState] = []
        async with under_way:
            on_first_slot.set(lambda: start(record, "run"))
            began = time.perf_counter()
            try:
                result = await run_scenario(
                    root_tree,
                    tree,
                    provider=provider,
                    context=context,
                    scenario_input=scenario_input,
                    max_turns=max_turns,
                    on_state=partial.append,
                    on_trace=tracer(meter, record),
                    strict=strict,
                    persona_options=persona_options,
                    **run_options,
                )
                record.state, record.turns, record.stopped = (
                    result.state,
                    result.turns,
                    (result.stopped),
                )
                outcome: Status = "completed"
            except Exception as exc:  # the run fails; what it said so far is kept
                record.error = f"{type(exc).__name__}: {exc}"
                record.state = partial[-1] if partial else None
                outcome = "failed"
            record.note_spent(began, meter)
        start(record, "run")
        record.status = outcome
        progress.move("run", "running", record.status)
        report()
        if on_run is not None:
            on_run(record)
        children = []
        for grader_tree, grader_hash in zip(grader_trees, hashes, strict=True):
            for repeat in range(1, repeats + 1):
                grade = GradeRecord(
                    id=new_id("vgrade"),
                    run_id=record.id,
                    grader=grader_tree.root.path,
                    grader_label=label(grader_tree),
                    grader_hash=grader_hash,
                    repeat=repeat,
                )
                grade_records.append(grade)
                if record.status == "failed" or record.state is None:
                    grade.status = "failed"
                    grade.error = "not graded: the scenario run failed"
                    progress.move("grade", "queued", "failed")
                    continue
                children.append(grade_one(grade, grader_tree, record.state))
        report()
        await asyncio.gather(*children)

    await asyncio.gather(
        *(run_one(record, tree) for record, tree in zip(run_records, trees_by_record, strict=True))
    )
    order = {record.id: i for i, record in enumerate(run_records)}
    grade_records.sort(key=lambda g: (order[g.run_id], g.grader, g.repeat))
    return VerifyReport(
        root=root_tree.root.path,
        runs=run_records,
        grades=grade_records,
        threshold=threshold,
        duration_ms=round((time.perf_counter() - started) * 1000),
    )


def grade_rows(
    report: VerifyReport, *, ratings: dict[str, int] | None = None
) -> Iterable[dict[str, Any]]:
    """One row per graded turn (or per conversation grade): the CSV / JSONL export.

    `ratings` maps a message ref id to the human rating given to that message, when known.
    """
    by_id = {run.id: run for run in report.runs}
    for grade in report.grades:
        run = by_id[grade.run_id]
        base = {
            "session": run.state.run_id if run.state is not None else None,
            "run": run.id,
            "scenario": run.scenario_label or run.scenario,
            "grader": grade.grader_label or grade.grader,
            "graderHash": grade.grader_hash,
            "repeat": grade.repeat,
            "flag": None,
        }
        results = grade.grading.grades if grade.grading is not None else []
        if not results:
            yield {
                **base,
                "turn": None,
                "score": None,
                "reason": grade.error,
                "humanRating": None,
            }
            continue
        for result in results:
            ref = result.message_ref_id
            yield {
                **base,
                "turn": result.message_index,
                "score": result.score,
                "reason": result.reason or result.error,
                "humanRating": (ratings or {}).get(ref) if ref else None,
            }
