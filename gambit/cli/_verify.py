"""`gambit verify`: N scenario runs x M grader repeats, with metrics, thresholds and exports."""

from __future__ import annotations

import csv
import datetime as _dt
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from gambit.cli import HELP_OPTIONS
from gambit.core import MISSING, DeckTree, save_state
from gambit.core.verify import GraderSummary, VerifyReport, grade_rows, run_verify

from ._common import (
    TraceSink,
    compaction_settings,
    deck_argument_exists,
    fail,
    load_tree,
    make_router,
    model_options,
    run_async,
    select_mode,
    strict_mode,
    trace_option,
)
from ._junit import grader_label, junit_xml, score_text
from ._models import (
    ROLE_FIX,
    UNDER_TEST,
    GraderWatch,
    decks_of,
    note_default_model,
    role_model_options,
    role_run_options,
)
from ._progress import ProgressDisplay, progress_mode
from ._project import allow_path_option


def _pass_rate(value: str) -> float:
    """`0.8`, `80%` or `80` (a percentage when above 1)."""
    text = value.strip()
    try:
        number = float(text.removesuffix("%"))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a rate (write 0.8 or 80%)") from None
    rate = number / 100 if text.endswith("%") or number > 1 else number
    if not 0 <= rate <= 1:
        raise click.BadParameter(f"{value!r} is not between 0 and 100%")
    return rate


@click.command("verify", context_settings=HELP_OPTIONS)
@click.argument("root", type=click.Path(path_type=Path))
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Scenario deck to run (repeatable; default: the deck's [[scenarios]]).",
)
@click.option(
    "--grader",
    "graders",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Grader deck (repeatable; default: the deck's [[graders]]).",
)
@click.option(
    "--runs", type=click.IntRange(1, 1000), default=1, show_default=True, help="Runs per scenario."
)
@click.option(
    "--repeats",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Grades of each run by each grader (their agreement is the self-consistency).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="Scenario runs and grades in flight at once.",
)
@click.option(
    "--max-turns",
    type=click.IntRange(1, 200),
    default=12,
    show_default=True,
    help="Most persona messages per run.",
)
@click.option(
    "--threshold",
    type=float,
    default=0.0,
    show_default=True,
    help="A grade passes when its score is at least this.",
)
@click.option("--fail-under", type=float, help="Exit 1 when a grader's mean score is below this.")
@click.option(
    "--min-pass-rate",
    type=str,
    help="Exit 1 when a grader's pass rate is below this (0.8 or 80%).",
)
@click.option(
    "--ratings",
    "ratings_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Human ratings of earlier grades (a grades export with humanRating, or plain rating "
    "rows with the grades they rate; docs/calibration.md): report each grader's pass rate "
    "corrected for its errors (repeatable).",
)
@click.option("--context", help="Context input for the root deck (JSON, or a plain string).")
@click.option(
    "--scenario-input",
    help="Context input for each scenario deck, checked against its contextSchema (JSON, or a plain string).",
)
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(path_type=Path),
    help="Write JUnit XML: one test case per scenario run and grader.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    help="Write the whole report (runs, grades, metrics) as one JSON object.",
)
@click.option(
    "--grades-csv",
    type=click.Path(path_type=Path),
    help="Write one CSV row per graded turn.",
)
@click.option(
    "--grades-jsonl",
    type=click.Path(path_type=Path),
    help="Write one JSON line per graded turn.",
)
@click.option(
    "--sessions",
    "sessions_dir",
    type=click.Path(path_type=Path),
    help="Folder for each run's SavedState (default .gambit/verify/<deck>-<time>/).",
)
@trace_option("Append every trace event to this file.")
@click.option(
    "--quiet",
    is_flag=True,
    help="No progress (otherwise: a bar on a terminal, plain lines in CI or a pipe).",
)
@model_options()
@role_model_options()
@allow_path_option
def verify_command(
    root: Path,
    scenarios: tuple[Path, ...],
    graders: tuple[Path, ...],
    runs: int,
    repeats: int,
    concurrency: int,
    max_turns: int,
    threshold: float,
    fail_under: float | None,
    min_pass_rate: str | None,
    ratings_paths: tuple[Path, ...],
    context: str | None,
    scenario_input: str | None,
    junit_path: Path | None,
    json_path: Path | None,
    grades_csv: Path | None,
    grades_jsonl: Path | None,
    sessions_dir: Path | None,
    trace_path: Path | None,
    quiet: bool,
    responses: bool,
    model: str | None,
    model_force: str | None,
    strict: bool,
    scenario_model: str | None,
    grader_model: str | None,
    no_compact: bool,
) -> None:
    """Run every scenario --runs times, grade each run --repeats times, and report the metrics.

    Prints, per grader: pass rate (score >= --threshold), mean, median, min/max, standard
    deviation, self-consistency of the repeats, and the outliers. Exits 1 when a scenario run
    or a grader failed, or when --fail-under / --min-pass-rate is missed.

    Models: --model-force replaces the model of ROOT and the decks it calls, never the
    graders' (--grader-model) nor the personas' (--scenario-model): graders forced onto the
    model under test would grade with it. A grader answered by a model that cannot grade
    (offline/echo), or whose replies are not grades, is warned about.
    """
    from gambit.cli._common import parse_value

    rate = _pass_rate(min_pass_rate) if min_pass_rate is not None else None
    for path in (root, *scenarios, *graders):
        deck_argument_exists(path)
    from ._calibrate import load, ratings_for_report

    if ratings_paths:
        load(list(ratings_paths))  # a bad ratings file fails before any model is called
    strict = strict_mode(strict)
    folder = sessions_dir or _default_sessions_dir(root)

    async def main() -> VerifyReport:
        tree = load_tree(root, strict=strict)
        if not scenarios and not tree.root.scenarios:
            fail(f"{root}: no scenario to run; declare [[scenarios]] or pass --scenario")
        if not graders and not tree.root.graders:
            fail(f"{root}: no grader; declare [[graders]] or pass --grader")
        # decks named on the command line: each inside its own project root
        scenario_trees = [load_tree(s, strict=strict, role="scenario") for s in scenarios]
        grader_trees = [load_tree(g, strict=strict, role="grader") for g in graders]
        _note_models(
            tree, scenario_trees, grader_trees, model, model_force, scenario_model, grader_model
        )
        router = make_router(root)
        sink = TraceSink(trace_path, False) if TraceSink.wanted(trace_path) else None
        bar = ProgressDisplay(progress_mode(quiet=quiet))
        writer = _SessionWriter(folder)
        try:
            with bar:
                return await run_verify(
                    tree,
                    provider=router,
                    scenarios=scenario_trees or None,
                    graders=grader_trees or None,
                    runs=runs,
                    repeats=repeats,
                    concurrency=concurrency,
                    max_turns=max_turns,
                    threshold=threshold,
                    context=parse_value(context),
                    scenario_input=parse_value(scenario_input, "--scenario-input"),
                    on_progress=bar.update,
                    on_run=writer.save,
                    strict=strict,
                    mode=select_mode(responses, os.environ),
                    stream=False,
                    default_model=model,
                    model_override=model_force,
                    persona_options=persona_options,
                    grader_options=grader_options,
                    model_resolver=router,
                    on_trace=watch.chain(sink),
                    compaction=compaction_settings(router, no_compact),
                )
        finally:
            writer.close()
            if sink is not None:
                sink.close()
            await router.aclose()

    persona_options, grader_options = role_run_options(scenario_model, grader_model)
    watch = GraderWatch()
    report: VerifyReport = run_async(main())
    notes = ratings_for_report(report, ratings_paths) if ratings_paths else []
    summaries = report.summaries()
    _print_summary(report, summaries)
    for note in notes:
        click.echo(f"note: {note}", err=True)
    _warn_graders(watch, report)
    click.echo(f"sessions saved to {folder}/")
    if json_path is not None:
        _write(json_path, json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n")
    if junit_path is not None:
        _write(junit_path, junit_xml(report))
    rows = list(grade_rows(report))
    if grades_jsonl is not None:
        _write(grades_jsonl, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    if grades_csv is not None:
        grades_csv.parent.mkdir(parents=True, exist_ok=True)
        with grades_csv.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(CSV_FIELDS))
            writer.writeheader()
            writer.writerows(rows)
    problems = _threshold_problems(report, summaries, fail_under, rate)
    for problem in problems:
        click.echo(f"error: {problem}", err=True)
    if problems:
        sys.exit(1)


def _note_models(
    tree: DeckTree,
    scenario_trees: list[DeckTree],
    grader_trees: list[DeckTree],
    model: str | None,
    model_force: str | None,
    scenario_model: str | None,
    grader_model: str | None,
    *,
    declared: bool = True,
) -> None:
    """Say which decks keep their own model despite --model (see `note_default_model`):
    the scenarios and graders named on the command line, else (`declared`) the root's."""
    personas = [d for t in scenario_trees for d in decks_of(t, ("scenario", "action"))]
    judges = [d for t in grader_trees for d in decks_of(t, ("grader", "action"))]
    if declared and not scenario_trees:
        personas = decks_of(tree, ("scenario",))
    if declared and not grader_trees:
        judges = decks_of(tree, ("grader",))
    note_default_model(
        model,
        [
            *([] if model_force else decks_of(tree, UNDER_TEST)),
            *([] if scenario_model else personas),
            *([] if grader_model else judges),
        ],
        ROLE_FIX,
    )


def _warn_graders(watch: GraderWatch, report: VerifyReport) -> None:
    """Warn about each grader that a model unable to grade answered (see `GraderWatch`):
    one entry per reply (a graded turn, or the error that stopped a grading)."""
    graded = {r.id for r in report.runs if r.status != "failed"}
    replies: dict[str, list[str | None]] = {}
    for record in report.grades:
        if record.run_id not in graded:
            continue  # never graded: the scenario run failed
        entries = replies.setdefault(record.grader, [])
        if record.grading is None:
            entries.append(record.error)
            continue
        entries += [g.error for g in record.grading.grades]
        if record.grading.error is not None:
            entries.append(record.grading.error)
    for grader, errors in replies.items():
        watch.warn(grader_label(report, grader), grader, errors, len(errors))


CSV_FIELDS = (
    "session",
    "run",
    "scenario",
    "grader",
    "graderHash",
    "repeat",
    "turn",
    "score",
    "reason",
    "flag",
    "humanRating",
)


def _default_sessions_dir(root: Path) -> Path:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    name = root.parent.name if root.name == "PROMPT.md" else root.stem
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "deck"
    return Path(".gambit") / "verify" / f"{slug}-{stamp}"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _print_summary(report: VerifyReport, summaries: dict[str, GraderSummary]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 160  # a CI log is wide; rich's default of 80 would wrap every cell
    failed_runs = [r for r in report.runs if r.status == "failed"]
    tokens = sum(r.tokens for r in report.runs) + sum(g.tokens for g in report.grades)
    console.print(
        f"{len(report.runs)} scenario runs ({len(failed_runs)} failed), "
        f"{len(report.grades)} grades, {tokens} tokens, {report.duration_ms / 1000:.2f}s"
    )
    table = Table(title=f"Verify (pass: score >= {report.threshold:+g})")
    for column in (
        "grader",
        "samples",
        "pass rate",
        "mean",
        "median",
        "min / max",
        "stdev",
        "agree exact / ±1",
        "failures",
    ):
        table.add_column(column, justify="left" if column == "grader" else "right")
    for grader, summary in summaries.items():
        scores, consistency = summary.scores, summary.consistency
        rate = summary.pass_rate
        table.add_row(
            grader_label(report, grader),
            f"{summary.scored}/{summary.samples}",
            "-" if rate is None else f"{rate:.0%}" + _interval_text(summary.pass_rate_interval),
            score_text(scores.mean),
            score_text(scores.median),
            f"{score_text(scores.minimum)} / {score_text(scores.maximum)}",
            score_text(scores.stdev, ".2f"),
            "-"
            if consistency.exact is None
            else f"{consistency.exact:.0%} / {consistency.within_one:.0%}",
            ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in summary.failure_counts.items())
            or "0",
        )
    console.print(table)
    for grader, summary in summaries.items():
        corrected = summary.corrected
        if corrected is None:
            continue
        figure = corrected.corrected
        evidence = summary.calibration.evidence if summary.calibration is not None else None
        shown = (
            f"{figure.value:.0%}{_interval_text(figure.interval)}"
            if figure.value is not None
            else f"- ({corrected.reason})"
        )
        if evidence is not None and not evidence.enough:
            # not a figure presented as if it meant something (docs/calibration.md)
            shown = f"{evidence.message} (provisional: {shown})"
        console.print(
            f"{grader_label(report, grader)}: pass rate corrected for the grader's errors: "
            + shown
            + f" (raw {_proportion_text(corrected.raw)}; sensitivity "
            + _proportion_text(corrected.sensitivity)
            + ", specificity "
            + _proportion_text(corrected.specificity)
            + f" from {corrected.pairs} rated pairs)",
            soft_wrap=True,
            markup=False,
        )
    for grader, summary in summaries.items():
        if summary.outliers:
            console.print(
                f"outliers for {grader_label(report, grader)} (failed first, then lowest):"
            )
            for outlier in summary.outliers[:5]:
                console.print(
                    f"  {outlier.conversation} ({outlier.scenario}): "
                    f"mean {score_text(outlier.mean)}, {outlier.failures} failed"
                )
    for run in failed_runs[:5]:  # whole lines, as written (an error is no rich markup)
        console.print(
            f"failed run {run.id} ({run.scenario_label or run.scenario}): {run.error}",
            soft_wrap=True,
            markup=False,
        )
    # A grader that raised or gave no score, on a run that did not fail: say why, as for runs.
    ran = {r.id for r in report.runs if r.status != "failed"}
    failed_grades = [g for g in report.grades if g.status == "failed" and g.run_id in ran]
    for grade in failed_grades[:5]:
        console.print(
            f"failed grade {grade.id} ({grader_label(report, grade.grader)} on {grade.run_id}): "
            f"{grade.error}",
            soft_wrap=True,
            markup=False,
        )


def _interval_text(interval: Any) -> str:
    return "" if interval is None else f" [{interval.low:.0%}-{interval.high:.0%}]"


def _proportion_text(estimate: Any) -> str:
    return (
        "-"
        if estimate.value is None
        else f"{estimate.value:.0%}{_interval_text(estimate.interval)}"
    )


def _threshold_problems(
    report: VerifyReport,
    summaries: dict[str, GraderSummary],
    fail_under: float | None,
    min_pass_rate: float | None,
) -> list[str]:
    problems = []
    failed_runs = sum(r.status == "failed" for r in report.runs)
    if failed_runs:
        problems.append(f"{failed_runs} of {len(report.runs)} scenario runs failed")
    for grader, summary in summaries.items():
        label = grader_label(report, grader)
        errors = summary.failure_counts.get("grader_error", 0)
        if errors:
            problems.append(f"{label}: {errors} grades failed")
        mean = summary.scores.mean
        if fail_under is not None and (mean is None or mean < fail_under):
            problems.append(
                f"{label}: mean score {score_text(mean)} is below --fail-under {fail_under:+g}"
            )
        rate = summary.pass_rate
        if min_pass_rate is not None and (rate is None or rate < min_pass_rate):
            shown = "-" if rate is None else f"{rate:.0%}"
            problems.append(
                f"{label}: pass rate {shown} is below --min-pass-rate {min_pass_rate:.0%}"
            )
    return problems


class _SessionWriter:
    """Saves each finished run's conversation on a thread of its own: an atomic save (a
    temporary file, fsync, rename) takes about 2 ms, which the run loop would otherwise
    spend between model calls. `close()` waits for every save."""

    def __init__(self, folder: Path):
        from concurrent.futures import ThreadPoolExecutor

        self.folder = folder
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gambit-save")
        self.pending: list[Any] = []

    def save(self, record: Any) -> None:
        if record.state is not None:
            path = self.folder / f"{record.id}.json"
            self.pending.append(self.pool.submit(save_state, path, record.state))

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        for future in self.pending:
            future.result()  # a save that failed says so here


def run_batch(
    root: Path,
    scenario: Path,
    graders: tuple[Path, ...],
    runs: int,
    concurrency: int,
    max_turns: int,
    json_path: Path | None,
    flags: Any,
    scenario_input: Any = MISSING,
    *,
    scenario_model: str | None = None,
    grader_model: str | None = None,
) -> None:
    """`gambit scenario --runs N`: the same runner as `gambit verify`, graders optional."""
    folder = _default_sessions_dir(root)
    persona_options, grader_options = role_run_options(scenario_model, grader_model)
    watch = GraderWatch()

    async def main() -> VerifyReport:
        tree = load_tree(root, strict=flags.strict)
        scenario_trees = [load_tree(scenario, strict=flags.strict, role="scenario")]
        grader_trees = [load_tree(g, strict=flags.strict, role="grader") for g in graders]
        _note_models(
            tree,
            scenario_trees,
            grader_trees,
            flags.model,
            flags.model_force,
            scenario_model,
            grader_model,
            declared=False,
        )
        router = make_router(root)
        sink = TraceSink(flags.trace_path, False) if TraceSink.wanted(flags.trace_path) else None
        bar = ProgressDisplay(progress_mode())
        writer = _SessionWriter(folder)
        try:
            with bar:
                return await run_verify(
                    tree,
                    provider=router,
                    scenarios=scenario_trees,
                    graders=grader_trees,
                    runs=runs,
                    repeats=1,
                    concurrency=concurrency,
                    max_turns=max_turns,
                    context=flags.context,
                    scenario_input=scenario_input,
                    on_progress=bar.update,
                    on_run=writer.save,
                    strict=flags.strict,
                    mode=flags.mode,
                    stream=False,
                    default_model=flags.model,
                    model_override=flags.model_force,
                    persona_options=persona_options,
                    grader_options=grader_options,
                    model_resolver=router,
                    on_trace=watch.chain(sink),
                    compaction=compaction_settings(router, flags.no_compact),
                )
        finally:
            writer.close()
            if sink is not None:
                sink.close()
            await router.aclose()

    report: VerifyReport = run_async(main(), verbose=flags.verbose)
    _print_runs(report)
    if graders:
        _print_summary(report, report.summaries())
        _warn_graders(watch, report)
    click.echo(f"sessions saved to {folder}/")
    if json_path is not None:
        lines = []
        for run in report.runs:
            grades = [g.to_json() for g in report.grades if g.run_id == run.id]
            for grade in grades:
                grade.pop("grading", None)
            lines.append(json.dumps({**run.to_json(), "grades": grades}, ensure_ascii=False))
        _write(json_path, "".join(line + "\n" for line in lines))
    failed = [r for r in report.runs if r.status == "failed"]
    bad_grades = [g for g in report.grades if g.status == "failed"]
    if failed or bad_grades:
        click.echo(
            f"error: {len(failed)} of {len(report.runs)} runs failed"
            + (f", {len(bad_grades)} grades failed" if bad_grades else ""),
            err=True,
        )
        sys.exit(1)


def _print_runs(report: VerifyReport) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 160
    table = Table(title=f"{len(report.runs)} scenario runs ({report.duration_ms / 1000:.2f}s)")
    for column in ("run", "status", "turns", "stopped", "tokens", "cost", "latency", "error"):
        table.add_column(column)
    for run in report.runs:
        table.add_row(
            f"{run.scenario_label or Path(run.scenario).parent.name} #{run.index}",
            run.status,
            str(run.turns),
            run.stopped or "-",
            str(run.tokens),
            "-" if run.cost is None else f"${run.cost:.4f}",
            f"{run.duration_ms} ms",
            (run.error or "")[:80],
        )
    console.print(table)
