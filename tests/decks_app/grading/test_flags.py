"""Grading flags, kept in the graded session's `meta.gradingFlags` (decks_app/grading/flags.py)."""

import pytest

from decks_app.grading.flags import (
    find_flag,
    flag_ref_id,
    set_grading_flag_reason,
    toggle_grading_flag,
)


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


def test_a_flag_belongs_to_its_grade_run_not_to_every_run_of_the_message():
    # Two grade runs of one message share its ref; flagging one leaves the other unflagged.
    meta, flag = toggle_grading_flag({}, ref_id="msg-9", run_id="run-a", turn_index=2)
    flags = meta["gradingFlags"]
    assert find_flag(flags, "msg-9", "run-a") == flag
    assert find_flag(flags, "msg-9", "run-b") is None
    meta, other = toggle_grading_flag(meta, ref_id="msg-9", run_id="run-b", turn_index=2)
    assert other is not None and len(meta["gradingFlags"]) == 2  # flagging b adds, not removes
    meta = set_grading_flag_reason(meta, ref_id="msg-9", run_id="run-b", reason="only b")
    assert find_flag(meta["gradingFlags"], "msg-9", "run-a")["reason"] == ""
    with pytest.raises(KeyError):
        set_grading_flag_reason(meta, ref_id="msg-9", run_id="run-c", reason="x")
    # a flag written without a run (another tool) shows on every run of its message
    legacy = [{"refId": "msg-1", "reason": "old"}]
    assert find_flag(legacy, "msg-1", "run-a") == legacy[0]
