"""`gambit calibrate`: how far each grader can be trusted, from exported grades and ratings.

Reads grade exports (`gambit verify --grades-csv/--grades-jsonl`, the simulator's
grades.csv/grades.jsonl) and ratings in the plain format (docs/calibration.md), pairs each
grader's scores with the human ratings of the same items, and prints every figure with its
95% interval and a verdict. `--json` writes the same figures and the pairs they came from;
`--min-kappa` fails a build on kappa's lower bound.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import click

from gambit.cli import HELP_OPTIONS
from gambit.cli._options import count_option, path_option, threshold_option

# Read by `gambit verify --ratings` too: the rows of these files, with where each came from.


def read_files(paths: tuple[Path, ...] | list[Path]) -> list[tuple[str, dict[str, Any]]]:
    """Every row of every file: CSV when the name ends in .csv, else JSON lines."""
    from gambit.core.verify import csv_cell

    rows: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            _fail(f"{path}: no such file; pass a grades export or a ratings file")
        except (OSError, UnicodeDecodeError) as exc:
            _fail(f"{path}: cannot be read ({exc}); pass a UTF-8 CSV or JSON-lines file")
        if path.suffix.lower() == ".csv":
            reader = csv.DictReader(text.splitlines())
            if not reader.fieldnames:
                _fail(f"{path}: no header row; the first line names the columns (item, score, ...)")
            for number, row in enumerate(reader, start=2):
                # An export's cells as they were before it neutralised formulas.
                cells = {k: csv_cell(v) if isinstance(v, str) else v for k, v in row.items()}
                rows.append((f"{path}:{number}", cells))
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                _fail(
                    f"{path}:{number}: not JSON ({exc.msg}); write one object per line, "
                    "or name the file .csv"
                )
            rows.append((f"{path}:{number}", row))
    return rows


def load(paths: list[Path]) -> Any:
    """The joined rows of these files (gambit.core._calibration_rows.CalibrationRows)."""
    from gambit.core.verify import RowError, read_rows

    try:
        return read_rows(read_files(paths))
    except RowError as exc:
        _fail(str(exc))


def _fail(message: str) -> Any:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


@click.command("calibrate", context_settings=HELP_OPTIONS)
@click.argument("grades", nargs=-1, type=click.Path(path_type=Path))
@path_option(
    "--ratings",
    "ratings",
    "Ratings in the plain format: CSV or JSON lines of {item, conversation, scenario, "
    "rater, score} (repeatable).",
    multiple=True,
)
@threshold_option("A score passes when it is at least this (for sensitivity and specificity).")
@click.option(
    "--min-kappa",
    type=click.FloatRange(-1, 1),
    help="Exit 1 when a grader's kappa is not surely at least this (the lower bound of its "
    "95% interval), or too few ratings to judge.",
)
@path_option(
    "--json",
    "json_path",
    "Write every figure and the pairs it came from as one JSON object ('-': stdout).",
)
@click.option(
    "--alpha-level",
    type=click.Choice(["interval", "ordinal"]),
    default="interval",
    show_default=True,
    help="Level of measurement of Krippendorff's alpha across human raters.",
)
@count_option("--resamples", 2000, 100_000, "Bootstrap resamples per interval.", minimum=100)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap resamples."
)
def calibrate_command(
    grades: tuple[Path, ...],
    ratings: tuple[Path, ...],
    threshold: float,
    min_kappa: float | None,
    json_path: Path | None,
    alpha_level: str,
    resamples: int,
    seed: int,
) -> None:
    """Pair each grader's scores in GRADES with human ratings and say how far to trust it.

    GRADES are grade exports (CSV or JSON lines, from `gambit verify --grades-csv` or the
    simulator); a filled humanRating column counts as a rating. Prints, per grader (its
    newest version): kappa, agreement, Spearman, bias, sensitivity and specificity at
    --threshold, each with a 95% interval (a bootstrap over conversations, seeded), and a
    verdict; then the drift across versions, agreement between graders and between human
    raters. Exits 1 when --min-kappa is set and a grader's kappa lower bound is below it, or
    there are too few ratings to judge it.
    """
    if not grades and not ratings:
        _fail("nothing to calibrate; pass grade exports (and --ratings FILE)")
    data = load([*grades, *ratings])
    report = build_report(
        data, threshold=threshold, alpha_level=alpha_level, resamples=resamples, seed=seed
    )
    if json_path is not None and str(json_path) == "-":
        click.echo(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        _print_report(report)
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(
                json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
            )
    problems = []
    if min_kappa is not None:
        if not report["graders"]:
            problems.append(
                f"--min-kappa {min_kappa:g}: no grader has a score paired with a rating"
            )
        for entry in report["graders"]:
            problem = kappa_problem(entry, min_kappa)
            if problem:
                problems.append(problem)
    for problem in problems:
        click.echo(f"error: {problem}", err=True)
    if problems:
        sys.exit(1)


def kappa_problem(entry: dict[str, Any], min_kappa: float) -> str | None:
    """One line saying why a grader misses --min-kappa, or None when it meets it."""
    figures = entry["calibration"]
    interval = figures["intervals"].get("kappa")
    kappa = figures["kappa"]
    name = entry["grader"]
    where = f"{figures['pairs']} pairs"
    if not figures["enoughEvidence"]:
        where += f"; {figures['message']}"
    if kappa is None:
        return f"{name}: kappa is undefined ({where}), so it cannot be shown to reach {min_kappa:g}"
    if interval is None:
        return f"{name}: kappa {kappa:.2f} has no interval ({where}); rate more items"
    if not figures["enoughEvidence"]:
        # A gate passed on evidence too thin to judge would be a gate in name only.
        return (
            f"{name}: {figures['message']} before --min-kappa {min_kappa:g} can be judged "
            f"(kappa {kappa:.2f} [{interval['low']:.2f}, {interval['high']:.2f}] on "
            f"{figures['pairs']} pairs)"
        )
    if interval["low"] < min_kappa:
        return (
            f"{name}: kappa's lower bound {interval['low']:.2f} is below --min-kappa "
            f"{min_kappa:g} (kappa {kappa:.2f} [{interval['low']:.2f}, {interval['high']:.2f}], "
            f"{where})"
        )
    return None


def build_report(
    data: Any, *, threshold: float, alpha_level: str, resamples: int, seed: int
) -> dict[str, Any]:
    """Every figure, as JSON: per grader (newest version) its calibration with the pairs
    used, drift across versions, self-consistency and verbosity; then graders against each
    other and the human raters' alpha."""
    from gambit.core.verify import (
        calibrate,
        calibration_drift,
        grader_agreement,
        krippendorff_alpha,
        length_bias,
        self_consistency,
    )

    graders = []
    newest_scores: dict[str, dict[str, float]] = {}
    conversations: dict[str, str] = {}
    for grader in data.graders():
        versions = data.versions_of(grader)
        newest = versions[-1]
        pairs = data.pairs(newest)
        newest_scores[grader] = newest.mean_scores()
        conversations.update(newest.conversations)
        if not pairs and not any(data.pairs(v) for v in versions):
            continue
        calibration = calibrate(
            pairs,
            graded=len(newest.scores),
            rated=len(data.human_scores()),
            threshold=threshold,
            resamples=resamples,
            seed=seed,
        )
        entry: dict[str, Any] = {
            "grader": grader,
            "version": newest.version,
            "calibration": calibration.to_json(include_pairs=True),
            "selfConsistency": self_consistency(newest.scores.values()).to_json(),
        }
        if len(versions) > 1:
            entry["drift"] = [
                point.to_json()
                for point in calibration_drift(
                    [(v.version, v.time, data.pairs(v)) for v in versions],
                    resamples=resamples,
                    seed=seed,
                )
            ]
        if newest.lengths:
            items = [item for item in newest.scores if item in newest.lengths]
            means = newest.mean_scores()
            entry["biasProbes"] = {
                "verbosity": length_bias(
                    [means[item] for item in items],
                    [newest.lengths[item] for item in items],
                    conversations=[newest.conversations[item] for item in items],
                    resamples=resamples,
                    seed=seed,
                ).to_json()
            }
        graders.append(entry)
    rater_ratings = [(r.item, r.rater, r.score) for r in data.ratings]
    raters = krippendorff_alpha(
        rater_ratings,
        clusters={r.item: r.conversation for r in data.ratings if r.conversation},
        level="ordinal" if alpha_level == "ordinal" else "interval",
        resamples=resamples,
        seed=seed,
    )
    return {
        "threshold": threshold,
        "seed": seed,
        "resamples": resamples,
        "ratings": {"total": len(data.ratings), "unmatched": data.unmatched_ratings},
        "graders": graders,
        "graderAgreement": [
            a.to_json()
            for a in grader_agreement(
                newest_scores, conversations=conversations, resamples=resamples, seed=seed
            )
        ],
        "raters": raters.to_json(),
    }


def _figure(value: float | None, interval: dict[str, Any] | None, percent: bool = False) -> str:
    if value is None:
        return "undefined"
    spec = ".0%" if percent else "+.2f"
    text = format(value, spec)
    if interval is not None:
        text += f" [{interval['low']:{spec}}, {interval['high']:{spec}}]"
    return text


def _print_report(report: dict[str, Any]) -> None:
    """Rich on a terminal (the verdict coloured), plain lines elsewhere (CI logs)."""
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)

    def say(text: str, style: str | None = None) -> None:
        console.print(text, style=style, markup=False)

    ratings = report["ratings"]
    unmatched = (
        f" ({ratings['unmatched']} of them rate items that no grade row names)"
        if ratings["unmatched"]
        else ""
    )
    say(
        f"{ratings['total']} ratings{unmatched}, "
        f"pass: score >= {report['threshold']:+g}, 95% intervals from {report['resamples']} "
        f"bootstrap resamples of conversations (seed {report['seed']})"
    )
    if not report["graders"]:
        say(
            "no grader has a score paired with a rating: check that the ratings' item names "
            "a messageRefId, <session>#<turn> or a session of the grades"
        )
    for entry in report["graders"]:
        c = entry["calibration"]
        verdict = c["verdict"]
        say("")
        say(
            f"{entry['grader']} (version {entry['version']}): {c['pairs']} pairs in "
            f"{c['conversations']} conversations",
            "bold",
        )
        style = "green" if verdict["canRank"] or verdict["canGate"] else "yellow"
        say(f"  verdict: {verdict['summary']}", style)
        say(f"  next step: {verdict['nextStep']}")
        intervals = c["intervals"]
        if not c["enoughEvidence"]:
            say(f"  figures: {c['message']} (the JSON keeps the provisional figures)")
        else:
            say(
                f"  kappa {_figure(c['kappa'], intervals['kappa'])}, Spearman "
                f"{_figure(c['spearman'], intervals['spearman'])}, exact "
                f"{_figure(c['exact'], intervals['exact'], True)}, within ±1 "
                f"{_figure(c['withinOne'], intervals['withinOne'], True)}, bias "
                f"{_figure(c['bias'], intervals['bias'])}"
            )
            se, sp = c["sensitivity"], c["specificity"]
            say(
                f"  at the threshold: sensitivity {_figure(se['value'], se['interval'], True)} "
                f"({c['humanPasses']} passed by humans), specificity "
                f"{_figure(sp['value'], sp['interval'], True)} ({c['humanFails']} failed)"
            )
        for key, groups in c["disagreementGroups"].items():
            worst = [g for g in groups if g["disagreements"]][:3]
            if worst:
                shown = ", ".join(f"{g['value']} {g['disagreements']}/{g['pairs']}" for g in worst)
                say(f"  disagreements by {key}: {shown}")
        consistency = entry["selfConsistency"]
        if consistency["pairs"]:
            say(
                f"  self-consistency: {consistency['exact']:.0%} exact, "
                f"{consistency['withinOne']:.0%} within ±1 over {consistency['pairs']} repeat pairs"
            )
        for point in entry.get("drift", []):
            kappa = point["kappa"]
            line = (
                f"  version {point['version']}"
                + (f" ({point['time']})" if point["time"] else "")
                + f": kappa {_figure(kappa['value'], kappa['interval'])}, {point['pairs']} pairs"
            )
            say(line, "red" if point["worse"] else None)
            if point["message"]:
                say(f"    {point['message']}", "red")
        probe = entry.get("biasProbes", {}).get("verbosity")
        if probe:
            say(f"  verbosity: {probe['message']}", "yellow" if probe["flagged"] else None)
    if report["graderAgreement"]:
        say("")
        say("graders against each other (items both scored):", "bold")
        for agreement in report["graderAgreement"]:
            kappa = agreement["kappa"]
            say(
                f"  {agreement['first']} vs {agreement['second']}: kappa "
                f"{_figure(kappa['value'], kappa['interval'])} over {agreement['items']} items"
            )
    raters = report["raters"]
    alpha = raters["alpha"]
    if alpha["value"] is not None:
        say("")
        say(
            f"human raters: Krippendorff's alpha ({raters['levelOfMeasurement']}) "
            f"{_figure(alpha['value'], alpha['interval'])} over {raters['items']} items rated by "
            f"two or more of {len(raters['raters'])} raters: the ceiling no grader can be "
            "expected to beat",
            "bold",
        )


def ratings_for_report(report: Any, paths: tuple[Path, ...]) -> list[str]:
    """`gambit verify --ratings`: set `report.ratings` to each grader's calibration pairs from
    these files, matched by the grader's label (or file name) and preferably by its version
    (graderHash). Returns notes to print (a grader with no pairs, a version mismatch)."""
    data = load(list(paths))
    notes = []
    for grade in {g.grader: g for g in report.grades}.values():
        path = Path(grade.grader)
        folder = path.parent.name if path.name == "PROMPT.md" else path.stem
        label = grade.grader_label or folder
        pairs, note = data.pairs_for([grade.grader_label, folder, grade.grader], grade.grader_hash)
        if note is not None:
            notes.append(f"{label}: {note}" + ("" if pairs else " (--ratings)"))
        if pairs:
            report.ratings[grade.grader] = pairs
    return notes
