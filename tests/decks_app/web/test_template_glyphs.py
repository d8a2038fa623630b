"""Every page's text renders in the fonts people have: no fullwidth forms (U+FF00-U+FFEF) in
a template. The calibration matrix's corner said "human ＼ grader" (U+FF3C), a missing glyph
in common fonts; it says "human ↓ / grader →" (issue 26)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3] / "decks_app"


def test_no_template_uses_a_fullwidth_form():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {ch!r}"
        for path in sorted(ROOT.rglob("templates/**/*.html"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for ch in line
        if "\uff00" <= ch <= "\uffef"
    ]
    assert found == []


def test_the_calibration_matrix_corner_is_plain_text():
    text = (ROOT / "grading/templates/grading/calibration.html").read_text(encoding="utf-8")
    assert "human \u2193 / grader \u2192" in text
