"""`gambit scenario` and `gambit grade`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gambit.cli import HELP_OPTIONS
from gambit.core import GradingRun, grade_state, run_scenario, save_state

from ._common import (
    SCENARIO_INPUT_OPTION,
    VERBOSE_OPTION,
    RunFlags,
    TraceSink,
    common_run_options,
    deck_argument_exists,
    fail,
    load_tree,
    make_router,
    model_options,
    parse_value,
    read_state,
    run_async,
    shown_path,
    stdout_writer,
    timestamped_path,
    trace_option,
)
from ._models import (
    GraderWatch,
    decks_of,
    note_default_model,
    note_role_models,
    role_model_options,
    role_run_options,
)
from ._options import count_option, path_option
from ._project import allow_path_option


def _print_grading(run: GradingRun) -> None:
    score = "n/a" if run.score is None else f"{run.score:+.2f}"
    label = run.grader_label or Path(run.grader_path).parent.name
    click.echo(
        f"grade {label} ({run.mode}): {score} [{run.status}]"
        + (f" {run.error}" if run.error else "")
    )
    for grade in run.grades:
        where = f"message {grade.message_index}: " if grade.message_index is not None else ""
        value = "n/a" if grade.score is None else f"{grade.score:+g}"
        click.echo(f"  {where}{value} {grade.reason or grade.error or ''}".rstrip())


def _warn_grader(watch: GraderWatch, run: GradingRun) -> None:
    errors = [g.error for g in run.grades] + [run.error]
    total = len(run.grades) + (1 if run.error else 0)
    watch.warn(run.grader_label or shown_path(run.grader_path), run.grader_path, errors, total)


@click.command("scenario", context_settings=HELP_OPTIONS)
@click.argument("root", type=click.Path(path_type=Path))
@path_option("--scenario", "scenario_path", "The persona (scenario) deck.", required=True)
@path_option("--grade", "graders", "Grader deck to run on the result (repeatable).", multiple=True)
@count_option("--max-turns", 12, 1000, "Most persona messages.")
@count_option(
    "--runs", 1, 1000, "Run the scenario this many times (a batch: progress bar, summary table)."
)
@count_option("--concurrency", 4, 256, "Model calls in flight at once (with --runs).")
@SCENARIO_INPUT_OPTION
@path_option(
    "--json",
    "json_path",
    "Write one JSON result per run to this file; the scenario then runs as a batch (a summary "
    "table, no transcript), as with --runs, even for one run.",
)
@common_run_options
@role_model_options()
def scenario_command(
    root: Path,
    scenario_path: Path,
    graders: tuple[Path, ...],
    max_turns: int,
    runs: int,
    concurrency: int,
    json_path: Path | None,
    scenario_input: str | None,
    scenario_model: str | None,
    grader_model: str | None,
    **options: Any,
) -> None:
    """Let a synthetic user (a scenario deck) talk to ROOT, then grade the conversation.

    The conversation is saved to --state (default .gambit/sessions/<deck>-<time>.json). With
    --runs N the scenario runs N times at --concurrency (each conversation saved under
    .gambit/verify/), with a progress bar and a summary table; exit 1 on any failed run or
    grader.

    Models: --model-force replaces the model of ROOT and the decks it calls; the persona and
    the graders keep their own unless --scenario-model / --grader-model replace it. --model is
    for decks that name no model.
    """
    for path in (root, scenario_path, *graders):
        deck_argument_exists(path)
    flags = RunFlags.parse(options)
    if runs > 1 or json_path is not None:
        if flags.state_path is not None:
            raise click.UsageError(
                "--state resumes and saves one conversation; a batch (--runs, --json) saves "
                "each run's under .gambit/verify/ (drop --state, or run once without --runs)"
            )
        from ._verify import run_batch

        run_batch(
            root,
            scenario_path,
            graders,
            flags,
            json_path=json_path,
            scenario_model=scenario_model,
            grader_model=grader_model,
            runs=runs,
            concurrency=concurrency,
            max_turns=max_turns,
            scenario_input=parse_value(scenario_input, "--scenario-input"),
        )
        return
    persona_options, grader_options = role_run_options(scenario_model, grader_model)
    state_file = flags.state_path or timestamped_path(root, "sessions", ".json")
    write = stdout_writer()

    async def main() -> None:
        strict = flags.strict
        root_tree = load_tree(root, strict=strict)
        persona_tree = load_tree(scenario_path, strict=strict, role="scenario")
        grader_trees = [load_tree(g, strict=strict, role="grader") for g in graders]
        note_role_models(
            root_tree,
            [persona_tree],
            grader_trees,
            flags,
            scenario_model,
            grader_model,
            declared=False,
        )
        sink = TraceSink(flags.trace_path, flags.verbose)
        router = make_router(root)
        watch = GraderWatch()
        options = {**flags.run_options(router, sink), "on_trace": watch.chain(sink)}
        speaking: list[str] = []

        def on_stream(who: str, text: str) -> None:
            if not speaking or speaking[-1] != who:
                write(("\n" if speaking else "") + f"{who}> ")
                speaking.append(who)
            write(text)

        def on_turn(role: str, text: str) -> None:
            if not flags.stream:
                click.echo(f"{role}> {text}")

        try:
            result = await run_scenario(
                root_tree,
                persona_tree,
                provider=router,
                context=flags.context,
                scenario_input=parse_value(scenario_input, "--scenario-input"),
                message=flags.message_or_none,
                state=read_state(flags.state_path),
                max_turns=max_turns,
                on_turn=on_turn,
                on_state=lambda s: save_state(state_file, s),
                on_stream_text=on_stream if flags.stream else None,
                persona_options=persona_options,
                **options,
            )
            if flags.stream:
                write("\n")
            save_state(state_file, result.state)
            click.echo(
                f"Scenario stopped ({result.stopped.replace('_', ' ')}) after {result.turns} persona turns; session saved to {state_file}"
            )
            state = result.state
            failed = []
            for tree in grader_trees:
                run, state = await grade_state(
                    tree, state, provider=router, **{**options, **grader_options, "stream": False}
                )
                save_state(state_file, state)
                _print_grading(run)
                _warn_grader(watch, run)
                if run.status == "error":
                    failed.append(f"{run.grader_label or run.grader_path}: {run.error}")
            if failed:  # like gambit grade: a grader that fails fails the command
                fail("grader failed: " + "; ".join(failed))
        finally:
            sink.close()
            await router.aclose()

    run_async(main(), verbose=flags.verbose)


@click.command("grade", context_settings=HELP_OPTIONS)
@click.argument("grader", type=click.Path(path_type=Path))
@path_option(
    "--state",
    "state_path",
    "The SavedState JSON file to grade; the result is saved into it.",
    required=True,
)
@click.option(
    "--fail-under", type=float, help="Exit 1 when the mean score is below this (CI gate)."
)
@trace_option("Append trace events to this file.")
@VERBOSE_OPTION
@model_options(
    "Model for the grader if it names none (its own [modelParams] model wins over it).",
    "Model for the grader (and the decks it calls), replacing its own.",
)
@allow_path_option
def grade_command(grader: Path, fail_under: float | None, **options: Any) -> None:
    """Grade the conversation in --state with GRADER and record the result in the state.

    A grader whose context has messageToGrade grades each assistant message; otherwise it
    grades the whole conversation. Every grade carries its score, reason and evidence.
    """
    deck_argument_exists(grader)
    flags = RunFlags.parse(options)
    state_path = flags.state_path
    assert state_path is not None  # a required option
    if not state_path.exists():
        fail(f"{state_path}: state file not found")

    async def main() -> None:
        tree = load_tree(grader, strict=flags.strict, role="grader")
        state = read_state(state_path)
        assert state is not None
        sink = TraceSink(flags.trace_path, flags.verbose)
        router = make_router(grader)
        if not flags.model_force:
            note_default_model(
                flags.model, decks_of(tree, ("grader", "action")), "--model-force replaces it"
            )
        watch = GraderWatch(fix="--model-force MODEL")
        try:
            run, updated = await grade_state(
                tree,
                state,
                provider=router,
                **{**flags.run_options(router, sink), "on_trace": watch.chain(sink)},
            )
        finally:
            sink.close()
            await router.aclose()
        save_state(state_path, updated)
        _print_grading(run)
        _warn_grader(watch, run)
        if run.status == "error":
            fail(f"grader failed: {run.error}")
        if fail_under is not None and (run.score is None or run.score < fail_under):
            score = "no score" if run.score is None else f"{run.score:+.2f}"
            fail(f"mean score {score} is below --fail-under {fail_under:+g}")

    run_async(main(), verbose=flags.verbose)
