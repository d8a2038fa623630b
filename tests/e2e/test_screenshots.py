"""docs/screenshots.py, which makes the README's pictures, still runs against today's pages:
it serves a fresh copy of the examples offline, walks Test, Grade and Build, and writes one
PNG per tab at the size asked for."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest

from tests.e2e.conftest import CHROMIUM, ROOT


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_the_readme_screenshots_can_be_regenerated(tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing")
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "screenshots.py"), "--out", str(tmp_path),
         "--width", "900", "--height", "600"],
        capture_output=True, text=True, cwd=ROOT, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for name in ("test", "grade", "build"):
        data = (tmp_path / f"{name}.png").read_bytes()
        assert _png_size(data) == (900, 600)
        assert len(data) > 10_000  # a page, not a blank picture
    for name in ("test", "grade", "build"):  # the README shows the committed ones
        assert f"docs/images/{name}.png" in (ROOT / "README.md").read_text(encoding="utf-8")
        assert (ROOT / "docs" / "images" / f"{name}.png").is_file()
