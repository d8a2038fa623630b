"""docs/cli.md is generated from --help and must stay in sync."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_is_up_to_date():
    spec = importlib.util.spec_from_file_location(
        "generate_cli_reference", ROOT / "docs" / "generate_cli_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.render()
    actual = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert actual == expected, (
        "docs/cli.md is stale: run .venv/bin/python docs/generate_cli_reference.py > docs/cli.md"
    )
