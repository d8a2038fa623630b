"""`gambit verify --junit`: the report as JUnit XML, for CI systems that show test results."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from gambit.core.verify import VerifyReport

__all__ = ["grader_label", "junit_xml", "score_text"]


def junit_xml(report: VerifyReport) -> str:
    """JUnit XML: a test suite per grader, a test case per scenario run.

    A case fails when a repeat scored below the threshold and errors when the run or the
    grader failed; the scores and reasons are in the case's system-out.
    """
    by_run = {run.id: run for run in report.runs}
    suites = ET.Element("testsuites", name="gambit verify", time=f"{report.duration_ms / 1000:.3f}")
    graders = list(dict.fromkeys(grade.grader for grade in report.grades))
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for grader in graders:
        grades = [g for g in report.grades if g.grader == grader]
        suite = ET.SubElement(suites, "testsuite", name=grader_label(report, grader))
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
                    + (f" reason {r}" if (r := _reason(g)) else "")
                )
            if run.status == "failed":
                ET.SubElement(case, "error", message=run.error or "the scenario run failed")
                counts["errors"] += 1
            elif any(g.error or g.score is None for g in repeats):
                first = next(g for g in repeats if g.error or g.score is None)
                ET.SubElement(case, "error", message=first.error or "the grader gave no score")
                counts["errors"] += 1
            elif any(g.score is not None and g.score < report.threshold for g in repeats):
                low = min(g.score for g in repeats if g.score is not None)
                ET.SubElement(
                    case,
                    "failure",
                    message=f"score {low:+g} is below the threshold {report.threshold:+g}",
                )
                counts["failures"] += 1
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


def _reason(grade: Any) -> str | None:
    if grade.grading is None:
        return None
    for result in grade.grading.grades:
        if result.reason:
            return result.reason
    return None


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
