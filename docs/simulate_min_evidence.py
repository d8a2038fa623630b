"""The simulation behind the minimum-evidence rule (docs/calibration.md, "How much is enough").

For a typical calibration (human ratings spread over the -3..+3 scale as people use it, a
grader that agrees moderately: quadratic kappa about 0.6), it draws `--datasets` calibrations
of each size, computes the 95% BCa interval of kappa on each exactly as `gambit calibrate`
does, and prints the median width per size; the smallest size whose median width is at most
`MAX_KAPPA_WIDTH` is `MIN_PAIRS`. tests/core/test_min_evidence.py runs a smaller version and
checks that it still gives the constants in gambit/core/_calibration.py.

    .venv/bin/python docs/simulate_min_evidence.py [--datasets 200] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gambit.core._calibration import MAX_KAPPA_WIDTH, MIN_PAIRS
from gambit.core._statistics import ClusterBootstrap, quadratic_kappa

# How often people use each rating -3..+3: most ratings near the middle and slightly positive
# (assistants mostly do fine), a few at the extremes.
HUMAN_SHARES = (0.06, 0.10, 0.14, 0.20, 0.22, 0.16, 0.12)
# The grader: the human rating plus normal noise of this spread, rounded onto the scale.
GRADER_NOISE = 2.0
SIZES = (10, 15, 20, 25, 30, 35, 40, 45, 50, 60, 70, 80, 100, 120, 150)


def median_width(size: int, *, datasets: int, resamples: int, seed: int = 0) -> float:
    """Median width of the 95% kappa interval over `datasets` simulated calibrations."""
    import numpy as np

    rng = np.random.default_rng(seed + size)
    widths = []
    for d in range(datasets):
        human = rng.choice(np.arange(-3, 4), size=size, p=HUMAN_SHARES)
        grader = np.clip(np.rint(human + rng.normal(0, GRADER_NOISE, size)), -3, 3)
        boot = ClusterBootstrap(range(size), resamples=resamples, seed=d)
        estimate = boot.estimate(quadratic_kappa(human, grader))
        widths.append(estimate.interval.width if estimate.interval else 2.0)
    return statistics.median(widths)


def typical_kappa(seed: int = 0) -> float:
    import numpy as np

    rng = np.random.default_rng(seed)
    human = rng.choice(np.arange(-3, 4), size=100_000, p=HUMAN_SHARES)
    grader = np.clip(np.rint(human + rng.normal(0, GRADER_NOISE, len(human))), -3, 3)
    return float(quadratic_kappa(human, grader)(np.ones((1, len(human))))[0])


def smallest_enough(
    *, datasets: int, resamples: int, sizes: tuple[int, ...] = SIZES
) -> tuple[int | None, dict[int, float]]:
    widths = {}
    for size in sizes:
        widths[size] = median_width(size, datasets=datasets, resamples=resamples)
        if widths[size] <= MAX_KAPPA_WIDTH:
            return size, widths
    return None, widths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    print(f"typical grader: quadratic kappa {typical_kappa():.2f}")
    print(f"{'pairs':>6}  median width of the 95% kappa interval")
    for size in SIZES:
        width = median_width(size, datasets=args.datasets, resamples=args.resamples)
        mark = f"  <= {MAX_KAPPA_WIDTH:.2f}" if width <= MAX_KAPPA_WIDTH else ""
        print(f"{size:>6}  {width:.3f}{mark}")
    found, _ = smallest_enough(datasets=args.datasets, resamples=args.resamples)
    print(
        f"smallest size with median width <= {MAX_KAPPA_WIDTH}: {found} (MIN_PAIRS = {MIN_PAIRS})"
    )


if __name__ == "__main__":
    main()
