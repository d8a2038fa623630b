"""`gambit verify --junit`: the report as JUnit XML, for CI systems that show test results."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from gambit.core.verify import GraderSummary, VerifyReport, grade_reason, tally

__all__ = ["grader_label", "junit_xml", "score_text"]


def junit_xml(report: VerifyReport) -> str:
    """JUnit XML: a test suite per grader, a test case per scenario run.

    A case's verdict is the core's (`gambit.core.verify.tally` of the run's repeats, the one
    definition the report and the simulator use): it fails when a repeat scored below the
    threshold, errors when the run or the grader failed; the scores and reasons are in its
    system-out. Each suite's <properties> carry the grader's pass rate with its 95% Wilson
    interval over scenario runs (`passRateRuns`: each run counts once, however many repeats),
    the threshold and, with --ratings, the pass rate corrected for its errors (marked
    `correctedPassRateProvisional` below the minimum evidence, as the report says).
    """
    by_run = {run.id: run for run in report.runs}
    samples: dict[tuple[str, str], list[Any]] = {}
    for sample in report.samples():
        samples.setdefault((sample.grader, sample.conversation), []).append(sample)
    summaries = report.summaries()
    suites = ET.Element("testsuites", name="gambit verify", time=f"{report.duration_ms / 1000:.3f}")
    graders = list(dict.fromkeys(grade.grader for grade in report.grades))
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for grader in graders:
        grades = [g for g in report.grades if g.grader == grader]
        suite = ET.SubElement(suites, "testsuite", name=grader_label(report, grader))
        _properties(suite, summaries.get(grader), report.threshold)
        counts = {"tests": 0, "failures": 0, "errors": 0}
        seconds = 0.0
        for run_id in dict.fromkeys(g.run_id for g in grades):
            run = by_run[run_id]
            repeats = [g for g in grades if g.run_id == run_id]
            duration = ((run.duration_ms or 0) + sum(g.duration_ms or 0 for g in repeats)) / 1000
            seconds += duration
            case = ET.SubElement(
                suite,
                "testcase",
                classname=run.scenario_label or Path(run.scenario).parent.name,
                name=f"run {run.index} ({run.id})",
                time=f"{duration:.3f}",
            )
            counts["tests"] += 1
            lines = []
            for g in repeats:
                lines.append(
                    f"repeat {g.repeat}: score {score_text(g.score, '+g')}"
                    + (f" error {g.error}" if g.error else "")
                    + (f" reason {r}" if (r := grade_reason(g.grading)) else "")
                )
            group = samples.get((grader, run_id), [])
            verdict = tally(group, report.threshold).verdict
            if verdict == "fail":
                low = min(s.score for s in group if s.verdict(report.threshold) == "fail")
                ET.SubElement(
                    case,
                    "failure",
                    message=f"score {low:+.3g} is below the threshold {report.threshold:+g}",
                )
                counts["failures"] += 1
            elif verdict in ("error", "not_run"):
                first = next(s for s in group if s.verdict(report.threshold) != "pass")
                ET.SubElement(case, "error", message=first.explanation() or "failed")
                counts["errors"] += 1
            ET.SubElement(case, "system-out").text = "\n".join(lines)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{seconds:.3f}")
    for key, value in totals.items():
        suites.set(key, str(value))
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


def _properties(suite: ET.Element, summary: GraderSummary | None, threshold: float) -> None:
    if summary is None:
        return
    properties = ET.SubElement(suite, "properties")

    def add(name: str, value: Any) -> None:
        if value is not None:
            ET.SubElement(properties, "property", name=name, value=str(value))

    add("threshold", f"{threshold:g}")
    add("graded", summary.scored)
    add("passed", summary.passed)
    rate, interval = summary.pass_rate, summary.pass_rate_interval
    add("passRate", None if rate is None else f"{rate:.4f}")
    add("passRateLow", None if interval is None else f"{interval.low:.4f}")
    add("passRateHigh", None if interval is None else f"{interval.high:.4f}")
    add(
        "passRateInterval",
        None if interval is None else f"wilson {interval.level:g} over scenario runs",
    )
    add("passRateRuns", summary.pass_rate_runs)
    corrected = summary.corrected
    if corrected is not None:
        figure = corrected.corrected
        add("correctedPassRate", None if figure.value is None else f"{figure.value:.4f}")
        if figure.interval is not None:
            add("correctedPassRateLow", f"{figure.interval.low:.4f}")
            add("correctedPassRateHigh", f"{figure.interval.high:.4f}")
        add("correctedPassRateUndefined", corrected.reason)
        evidence = summary.calibration.evidence if summary.calibration is not None else None
        if evidence is not None and not evidence.enough:
            # the report's "provisional" (docs/calibration.md, "How much is enough")
            add("correctedPassRateProvisional", "true")
            add("correctedPassRateRateMore", evidence.rate_more)


def grader_label(report: VerifyReport, grader: str) -> str:
    """A grader as the report names it: its label, else its folder (or file) name."""
    for grade in report.grades:
        if grade.grader == grader and grade.grader_label:
            return grade.grader_label
    path = Path(grader)
    return path.parent.name if path.name == "PROMPT.md" else path.stem


def score_text(value: float | None, spec: str = "+.2f") -> str:
    """A score as the report prints it (`-` for none)."""
    return "-" if value is None else format(value, spec)
