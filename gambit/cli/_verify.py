"""`gambit verify`: N scenario runs x M grader repeats, with metrics, thresholds and exports."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from gambit.cli import HELP_OPTIONS
from gambit.core import save_state
from gambit.core.verify import GraderSummary, VerifyReport, csv_row, grade_rows, run_verify

from ._common import (
    CONTEXT_OPTION,
    SCENARIO_INPUT_OPTION,
    RunFlags,
    TraceSink,
    compaction_settings,
    deck_argument_exists,
    fail,
    load_tree,
    make_router,
    model_options,
    parse_value,
    run_async,
    timestamped_path,
    trace_option,
)
from ._junit import grader_label, junit_xml, score_text
from ._models import GraderWatch, note_role_models, role_model_options, role_run_options
from ._options import count_option, path_option, threshold_option
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
@path_option(
    "--scenario",
    "scenarios",
    "Scenario deck to run (repeatable; default: the deck's [[scenarios]]).",
    multiple=True,
)
@path_option(
    "--grader",
    "graders",
    "Grader deck (repeatable; default: the deck's [[graders]]).",
    multiple=True,
)
@count_option("--runs", 1, 1000, "Runs per scenario.")
@count_option(
    "--repeats",
    1,
    100,
    "Grades of each run by each grader (their agreement is the self-consistency).",
)
@count_option(
    "--concurrency", 4, 256, "Model calls in flight at once (scenario runs and grades share them)."
)
@count_option("--max-turns", 12, 1000, "Most persona messages per run (as for gambit scenario).")
@threshold_option("A grade passes when its score is at least this.")
@click.option("--fail-under", type=float, help="Exit 1 when a grader's mean score is below this.")
@click.option(
    "--min-pass-rate",
    type=str,
    help="Exit 1 when a grader's pass rate is below this (0.8 or 80%).",
)
@path_option(
    "--ratings",
    "ratings_paths",
    "Human ratings of earlier grades (a grades export with humanRating, or plain rating "
    "rows with the grades they rate; docs/calibration.md): report each grader's pass rate "
    "corrected for its errors (repeatable).",
    multiple=True,
)
@CONTEXT_OPTION
@SCENARIO_INPUT_OPTION
@path_option("--junit", "junit_path", "Write JUnit XML: one test case per scenario run and grader.")
@path_option(
    "--json", "json_path", "Write the whole report (runs, grades, metrics) as one JSON object."
)
@path_option("--grades-csv", "grades_csv", "Write one CSV row per graded turn.")
@path_option("--grades-jsonl", "grades_jsonl", "Write one JSON line per graded turn.")
@path_option(
    "--sessions",
    "sessions_dir",
    "Folder for each run's SavedState (default .gambit/verify/<deck>-<time>/).",
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
    scenario_input: str | None,
    junit_path: Path | None,
    json_path: Path | None,
    grades_csv: Path | None,
    grades_jsonl: Path | None,
    sessions_dir: Path | None,
    quiet: bool,
    scenario_model: str | None,
    grader_model: str | None,
    **options: Any,
) -> None:
    """Run every scenario --runs times, grade each run --repeats times, and report the metrics.

    Prints, per grader: pass rate (score >= --threshold; each run counts once, so its 95%
    interval is over the runs, not the repeats), mean, median, min/max, standard deviation,
    self-consistency of the repeats, and the outliers. Exits 1 when a scenario run
    or a grader failed, or when --fail-under / --min-pass-rate is missed.

    Models: --model-force replaces the model of ROOT and the decks it calls, never the
    graders' (--grader-model) nor the personas' (--scenario-model): graders forced onto the
    model under test would grade with it. A grader answered by a model that cannot grade
    (offline/echo), or whose replies are not grades, is warned about.
    """
    rate = _pass_rate(min_pass_rate) if min_pass_rate is not None else None
    for path in (root, *scenarios, *graders):
        deck_argument_exists(path)
    from ._calibrate import load, ratings_for_report

    if ratings_paths:
        load(list(ratings_paths))  # a bad ratings file fails before any model is called
    flags = RunFlags.parse(options)
    folder = sessions_dir or timestamped_path(root, "verify")
    watch = GraderWatch()
    report = _run_batch(
        root,
        list(scenarios),
        list(graders),
        flags,
        watch,
        folder=folder,
        quiet=quiet,
        declared=True,
        scenario_model=scenario_model,
        grader_model=grader_model,
        runs=runs,
        repeats=repeats,
        concurrency=concurrency,
        max_turns=max_turns,
        threshold=threshold,
        scenario_input=parse_value(scenario_input, "--scenario-input"),
    )
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
            writer.writerows(csv_row(row) for row in rows)  # no cell runs as a formula
    problems = _threshold_problems(report, summaries, fail_under, rate)
    for problem in problems:
        click.echo(f"error: {problem}", err=True)
    if problems:
        sys.exit(1)


def _run_batch(
    root: Path,
    scenarios: list[Path],
    graders: list[Path],
    flags: RunFlags,
    watch: GraderWatch,
    *,
    folder: Path,
    declared: bool,
    scenario_model: str | None,
    grader_model: str | None,
    quiet: bool = False,
    **settings: Any,
) -> VerifyReport:
    """`run_verify` for `gambit verify` and `gambit scenario --runs`, with a progress bar,
    each run's conversation saved into `folder` and the models noted (`note_role_models`).

    With `declared` (verify) the root's [[scenarios]] / [[graders]] stand in for those not
    given on the command line; without it only the given ones run (no grader: no grading).
    `settings` go to `run_verify` (runs, repeats, concurrency, max_turns, ...)."""
    persona_options, grader_options = role_run_options(scenario_model, grader_model)

    async def main() -> VerifyReport:
        tree = load_tree(root, strict=flags.strict)
        if declared and not scenarios and not tree.root.scenarios:
            fail(f"{root}: no scenario to run; declare [[scenarios]] or pass --scenario")
        if declared and not graders and not tree.root.graders:
            fail(f"{root}: no grader; declare [[graders]] or pass --grader")
        # decks named on the command line: each inside its own project root
        scenario_trees = [load_tree(s, strict=flags.strict, role="scenario") for s in scenarios]
        grader_trees = [load_tree(g, strict=flags.strict, role="grader") for g in graders]
        note_role_models(
            tree,
            scenario_trees,
            grader_trees,
            flags,
            scenario_model,
            grader_model,
            declared=declared,
        )
        router = make_router(root)
        sink = TraceSink(flags.trace_path, False) if TraceSink.wanted(flags.trace_path) else None
        bar = ProgressDisplay(progress_mode(quiet=quiet))
        writer = _SessionWriter(folder)
        try:
            with bar:
                return await run_verify(
                    tree,
                    provider=router,
                    scenarios=scenario_trees or None,
                    graders=grader_trees if grader_trees or not declared else None,
                    context=flags.context,
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
                    # exec sees what a deck's [permissions] env grants of it, as in `gambit run`
                    host_env=dict(os.environ),
                    **settings,
                )
        finally:
            writer.close()
            if sink is not None:
                sink.close()
            await router.aclose()

    report: VerifyReport = run_async(main(), verbose=flags.verbose)
    return report


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
    # A grade of a run that failed never happened (nothing to grade): not counted as one.
    failed_ids = {r.id for r in failed_runs}
    not_graded = sum(g.run_id in failed_ids for g in report.grades)
    console.print(
        f"{len(report.runs)} scenario runs ({len(failed_runs)} failed), "
        f"{len(report.grades) - not_graded} grades"
        + (f" ({not_graded} not graded: their runs failed)" if not_graded else "")
        + f", {tokens} tokens, {report.duration_ms / 1000:.2f}s"
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
            "-"
            if rate is None
            else f"{rate:.0%}"
            + _interval_text(summary.pass_rate_interval)
            + f" n={summary.pass_rate_runs}",
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
    console.print(
        "pass rate: each scenario run counts once (its repeats' share of passes); "
        "[95% Wilson interval] over the n runs graded, not over grades",
        soft_wrap=True,
        markup=False,
    )
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
                    f"mean {score_text(outlier.mean)}, "
                    f"{outlier.failures} of {outlier.samples} not passed"
                    + (f" ({_kinds(outlier.tally)})" if outlier.failures else ""),
                    soft_wrap=True,
                    markup=False,
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


def _kinds(counts: Any) -> str:
    """A tally's non-passing kinds, as the report names them."""
    kinds = [
        (counts.failed, "below the threshold"),
        (counts.errors, "grader errors"),
        (counts.not_run, "runs failed"),
    ]
    return ", ".join(f"{n} {name}" for n, name in kinds if n)


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
    flags: RunFlags,
    *,
    json_path: Path | None,
    scenario_model: str | None = None,
    grader_model: str | None = None,
    **settings: Any,
) -> None:
    """`gambit scenario --runs N`: the same runner as `gambit verify`, graders optional;
    `settings` go to `run_verify` (runs, concurrency, max_turns, scenario_input)."""
    folder = timestamped_path(root, "verify")
    watch = GraderWatch()
    report = _run_batch(
        root,
        [scenario],
        list(graders),
        flags,
        watch,
        folder=folder,
        declared=False,
        scenario_model=scenario_model,
        grader_model=grader_model,
        **settings,
    )
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
