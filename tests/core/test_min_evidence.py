"""The minimum-evidence rule comes from its simulation (docs/simulate_min_evidence.py).

The same simulation with the script's own settings, run for the two sizes either side of the
rule, must still put the smallest adequate size at MIN_PAIRS: if the bootstrap, kappa or the
typical distribution changes, the rule is re-derived rather than left stale.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from gambit.core._calibration import MAX_KAPPA_WIDTH, MIN_PAIRS

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "simulate_min_evidence.py"


def load_simulation():
    spec = importlib.util.spec_from_file_location("simulate_min_evidence", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_min_pairs_is_the_smallest_size_the_simulation_finds_adequate():
    simulation = load_simulation()
    assert 0.55 <= simulation.typical_kappa() <= 0.7  # "moderate": the grader the rule is for
    below = simulation.SIZES[simulation.SIZES.index(MIN_PAIRS) - 1]
    found, widths = simulation.smallest_enough(
        datasets=200, resamples=1000, sizes=(below, MIN_PAIRS)
    )
    assert widths[below] > MAX_KAPPA_WIDTH
    assert found == MIN_PAIRS
