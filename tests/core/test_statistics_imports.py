"""What loads numpy: computing intervals does, Verify's plain summaries do not
(docs/decisions.md, "Statistics")."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def loaded_after(code: str) -> set[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(code) + "\nimport sys; print(' '.join(sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(done.stdout.split())


def test_verify_summaries_without_ratings_compute_wilson_intervals_without_numpy():
    loaded = loaded_after(
        """
        from gambit.core._verify import GradeSample, summarize
        summary = summarize([GradeSample("g", f"r{i}", score=i % 3 - 1) for i in range(30)])
        assert summary["g"].to_json()["passRateInterval"]["method"] == "wilson"
        """
    )
    assert "gambit.core._statistics" in loaded
    assert "numpy" not in loaded


def test_a_calibration_imports_numpy_when_it_computes_intervals():
    loaded = loaded_after(
        """
        from gambit.core._calibration import CalibrationPair, calibrate
        calibrate([CalibrationPair(i % 7 - 3, i % 7 - 3) for i in range(20)])
        """
    )
    assert "numpy" in loaded
