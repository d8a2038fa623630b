"""Grading flags, kept in the graded session's `meta.gradingFlags` (decks_app/grading/flags.py)."""

import pytest

from decks_app.grading.flags import flag_ref_id, set_grading_flag_reason, toggle_grading_flag


def test_grading_flags_toggle_and_their_reason_needs_a_flag():
    ref = flag_ref_id("grade-1", 2)
    assert ref == "gradingRun:grade-1#turn:2"
    assert flag_ref_id("grade-1", 2, "msg-9") == "msg-9"
    meta, flag = toggle_grading_flag({"x": 1}, ref_id=ref, run_id="grade-1", turn_index=2)
    assert flag is not None and flag["id"].startswith("gflag-") and meta["x"] == 1
    meta = set_grading_flag_reason(meta, ref_id=ref, reason="the quote is not in the reply")
    assert meta["gradingFlags"][0]["reason"] == "the quote is not in the reply"
    meta, flag = toggle_grading_flag(meta, ref_id=ref, run_id="grade-1", turn_index=2)
    assert flag is None and meta["gradingFlags"] == []
    with pytest.raises(KeyError, match="Flag not found for refId: gradingRun:grade-1#turn:2"):
        set_grading_flag_reason(meta, ref_id=ref, reason="again")
