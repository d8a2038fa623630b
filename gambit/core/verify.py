"""Verify and calibration: how far a deck's graders can be trusted, in one public module.

`gambit verify` and the simulator's Verify and Calibration pages build on these names, so the
command line and the browser report the same figures for the same grades (docs/cli.md
"gambit verify", docs/simulator.md "Verify"):

- **Running a batch.** `run_verify` runs every scenario N times against the root deck and
  grades each finished conversation M times with every grader; it returns a `VerifyReport`
  of `ScenarioRunRecord`s and `GradeRecord`s and reports `VerifyProgress` as it goes.
  `grade_rows` flattens a report into the rows of the CSV / JSONL export; `csv_row` makes
  a row safe to open in a spreadsheet and `csv_cell` reads a cell of it back.
- **Metrics.** A `GradeSample` is one grade of one conversation by one grader; `summarize`
  gives each grader's `GraderSummary` (scores, pass rate, self-consistency across repeats,
  outliers, failures by reason) and `compare` sets two batches side by side
  (`GraderComparison`: whether a difference exceeds the repeat noise).
- **Calibration.** `calibrate` measures a grader against human ratings of the same messages
  or conversations (`CalibrationPair`s): agreement, weighted kappa, rank correlation, bias
  and the largest disagreements (`Calibration`).

A module of its own, imported only by what verifies: `from gambit.core import run_deck` loads
none of it (docs/decisions.md, "Start-up"). The private `gambit.core._*` modules behind it may
change shape; these names stay.
"""

from __future__ import annotations

from ._calibration import (
    Calibration,
    CalibrationPair,
    calibrate,
    calibration_drift,
    grader_agreement,
    length_bias,
    position_bias,
)
from ._calibration_rows import RowError, csv_cell, csv_row, read_rows
from ._statistics import krippendorff_alpha
from ._verify import (
    GraderSummary,
    GradeSample,
    self_consistency,
    summarize,
)
from ._verify_compare import GraderComparison, compare
from ._verify_run import (
    GradeRecord,
    ScenarioRunRecord,
    VerifyProgress,
    VerifyReport,
    grade_reason,
    grade_rows,
    run_verify,
)
from ._verify_table import Matrix, Tally, histogram, matrix, tally

__all__ = [
    # running a batch
    "GradeRecord",
    "ScenarioRunRecord",
    "VerifyProgress",
    "VerifyReport",
    "grade_reason",
    "grade_rows",
    "run_verify",
    # metrics
    "GradeSample",
    "GraderComparison",
    "GraderSummary",
    "compare",
    "self_consistency",
    "summarize",
    # one definition of pass and fail, as a table
    "Matrix",
    "Tally",
    "histogram",
    "matrix",
    "tally",
    # calibration
    "Calibration",
    "CalibrationPair",
    "calibrate",
    "calibration_drift",
    "grader_agreement",
    "krippendorff_alpha",
    "length_bias",
    "position_bias",
    # exported grades and ratings (gambit calibrate)
    "RowError",
    "csv_cell",
    "csv_row",
    "read_rows",
]
