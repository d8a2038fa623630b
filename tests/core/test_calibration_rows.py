"""CSV export cells: formulas neutralised on export, read back unchanged (`csv_row`, `csv_cell`)."""

from __future__ import annotations

import pytest

from gambit.core._calibration_rows import csv_cell, csv_row


@pytest.mark.parametrize(
    "text",
    [
        "=1+1", "+1", "-1+1", "@SUM(A1)", "\tx", "\rx",
        " =1+1", "\n=1+1", "\u00a0=1", "\u3000=1", "\u200b=1", "\ufeff=1", "\x00=1", "\x0b=1",
        "\uff1d1+1", "'=1+1", "''+1",
    ],
)  # fmt: skip
def test_a_text_a_spreadsheet_could_read_as_a_formula_is_quoted_and_read_back(text):
    # docs/calibration.md, "Exports in spreadsheets": blanks, control and zero-width
    # characters before the =, or a fullwidth =, are formulas to some spreadsheets too.
    written = csv_row({"reason": text})["reason"]
    assert written == "'" + text
    assert csv_cell(written) == text


@pytest.mark.parametrize("text", ["ok", "a=b", "", " plain", "x-1"])
def test_plain_text_is_written_as_it_is(text):
    assert csv_row({"reason": text, "score": -2}) == {"reason": text, "score": -2}
    assert csv_cell(text) == text
