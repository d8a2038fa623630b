"""How long `gambit check` takes to load a deck tree (the bundled examples by default).

.venv/bin/python bench/bench_check.py [DECK ...] [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gambit.core import check_deck_tree, find_workspace_decks

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("decks", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    decks = args.decks or find_workspace_decks(ROOT / "examples")
    for deck in decks:
        samples = []
        for _ in range(args.runs):
            started = time.perf_counter()
            tree, diag = check_deck_tree(deck)
            samples.append(time.perf_counter() - started)
        count = len(tree.entries) if tree else 0
        print(
            f"load {deck.relative_to(ROOT) if deck.is_relative_to(ROOT) else deck}: {count} decks, "
            f"median {statistics.median(samples) * 1000:.1f} ms, max {max(samples) * 1000:.1f} ms (in process)"
        )
    gambit = Path(sys.executable).parent / "gambit"
    started = time.perf_counter()
    subprocess.run([str(gambit), "check", str(ROOT / "examples")], capture_output=True, check=True)
    print(
        f"gambit check examples (whole command, incl. interpreter start): {(time.perf_counter() - started) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
