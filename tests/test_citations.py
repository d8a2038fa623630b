"""Code, tests and docs cite our own docs (docs/*.md) or public URLs, never documents that are
not in the repository (a design note, the seed specifications, a behaviour reference)."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = {".py", ".html", ".js", ".toml", ".md", ".css", ".txt"}
SKIPPED = {".venv", "node_modules", "vendor", ".git", "__pycache__", "build", "dist"}
# A design note and its sections, the seed specifications by number, a behaviour reference's
# sections and numbered items: each names a document a reader of this repository cannot open.
# (Written with character classes so that this file does not match itself.)
CITATION = re.compile(
    "|".join(
        [
            r"DESIGN ?[§]",
            r"DESIGN[.]md",
            r"\bseeds? 0\d\d",
            r"\bseed-0\d\d",
            r"\bref(?:erence)? [§]",
            r"shared/(?:reference|seeds)",
            r"\bitems? \d+\b",
        ]
    ),
    re.IGNORECASE,
)


def _sources() -> list[Path]:
    found = []
    for folder, folders, files in os.walk(ROOT):
        folders[:] = [name for name in folders if name not in SKIPPED]
        found.extend(Path(folder) / name for name in files if Path(name).suffix in SUFFIXES)
    return found


def test_nothing_cites_a_document_outside_the_repository():
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if CITATION.search(line)
    ]
    assert not hits, "cite docs/*.md or a public URL instead:\n" + "\n".join(hits)
