"""The import-linter contracts in pyproject.toml hold today (`./dev test` runs `lint-imports`)
and each one fails on a violation: a copy of the packages with one forbidden import planted
per contract is checked with the same configuration, and every contract must be reported
broken. A contract that cannot fail would keep nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")

# One planted import per contract: (file in the copy, line appended, contract's name).
VIOLATIONS = [
    (
        "gambit/core/_planted.py",
        "import django",
        "gambit.core stays free of Django, HTTP clients and environment reads",
    ),
    ("gambit/cli/_planted.py", "import opentelemetry", "only gambit.otel imports OpenTelemetry"),
    (
        "gambit/otel/_planted.py",
        "import gambit.cli",
        "the OpenTelemetry bridge depends on the engine, never the reverse nor on the apps",
    ),
    ("gambit/_planted.py", "import decks_app", "the engine is importable without Django"),
    (
        "decks_app/runs/_planted.py",
        "import decks_app.grading",
        "decks_app.runs knows no feature (run kinds register themselves)",
    ),
    (
        "gambit/cli/_planted.py",
        "import gambit.core._trace",
        "gambit.core's private modules are imported only inside gambit.core",
    ),
    (
        "endpoint/_planted.py",
        "import decks_app.building",
        "endpoint imports from decks_app only its models, runs, sessions and the served workspace",
    ),
    (
        "decks_app/grading/_planted.py",
        "import decks_app.building.views",
        "the web app's packages in layers: building and grading on sessions, on runs, on the"
        " workspace",
    ),
    ("decks_app/_planted.py", "import endpoint", "decks_app never imports endpoint"),
    (
        "gambit/providers/offline/replies.py",
        "from gambit.providers.offline import demo  # noqa",
        "the offline providers import each other in layers, never in a circle",
    ),
]


def _contract_names() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [c["name"] for c in config["tool"]["importlinter"]["contracts"]]


def test_every_contract_has_a_planted_violation():
    assert sorted(_contract_names()) == sorted(name for _, _, name in VIOLATIONS)


def test_every_contract_fails_on_its_violation(tmp_path):
    for package in ("gambit", "decks_app", "endpoint", "simulator"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for rel, line, _ in VIOLATIONS:
        path = tmp_path / rel
        before = path.read_text() if path.exists() else ""
        path.write_text(before + "\n" + line + "\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0, done.stdout
    report = " ".join(done.stdout.split())  # contract names wrap in the report
    for _, _, name in VIOLATIONS:
        assert f"{name} BROKEN" in report, (name, done.stdout[-3000:])
    assert f"Contracts: 0 kept, {len(VIOLATIONS)} broken." in report
