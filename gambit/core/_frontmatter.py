"""Front matter: `+++` TOML (canonical), legacy `---` YAML, and `---toml` / `---yaml` / `---json`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import tomli  # TOML 1.1 (newlines and trailing commas in inline tables); tomllib is 1.0 until 3.15

from ._depth import too_deep

FrontMatterFormat = Literal["toml", "yaml", "json", "none"]

_OPENERS: dict[str, FrontMatterFormat] = {
    "+++": "toml",
    "= toml =": "toml",
    "---toml": "toml",
    "---": "yaml",
    "= yaml =": "yaml",
    "---yaml": "yaml",
    "---json": "json",
}
_CLOSERS: dict[str, str] = {
    "+++": "+++",
    "= toml =": "= toml =",
    "---toml": "---",
    "---": "---",
    "= yaml =": "= yaml =",
    "---yaml": "---",
    "---json": "---",
}
TOML_NESTING_LIMIT = 400  # tomli's own limit
_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")


class FrontMatterError(ValueError):
    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


@dataclass
class ParsedMarkdown:
    """A Markdown deck or card split into its front matter and its body."""

    attrs: dict[str, Any]
    body: str
    format: FrontMatterFormat
    body_line: int  # 1-based line number where the body starts


def parse_front_matter(text: str) -> ParsedMarkdown:
    """Split a Markdown file into its front matter table and body.

    A file that does not start with a known delimiter has no front matter: the whole text is
    the body. A delimiter without its closing line, or content that does not parse, raises
    `FrontMatterError` (with the file line where known).
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    # Leading blank lines before the opener are tolerated, as the TypeScript loader does.
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    if start >= len(lines):
        return ParsedMarkdown({}, text, "none", 1)
    opener = lines[start].strip()
    fmt = _OPENERS.get(opener)
    if fmt is None:
        return ParsedMarkdown({}, text, "none", 1)
    closer = _CLOSERS[opener]
    end = None
    for index in range(start + 1, len(lines)):
        if lines[index].strip() == closer:
            end = index
            break
    if end is None:
        raise FrontMatterError(
            f"front matter opened with {opener!r} on line {start + 1} is never closed; "
            f"add a line containing only {closer!r} after the front matter",
            line=start + 1,
        )
    raw = "".join(lines[start + 1 : end])
    body = "".join(lines[end + 1 :])
    first_content_line = start + 2
    attrs = _parse(raw, fmt, first_content_line)
    return ParsedMarkdown(attrs, body, fmt, end + 2)


def _parse(raw: str, fmt: FrontMatterFormat, first_line: int) -> dict[str, Any]:
    if fmt == "toml":
        try:
            data: Any = tomli.loads(raw)
        except tomli.TOMLDecodeError as exc:
            match = _TOML_LINE.search(str(exc))
            line = first_line + int(match.group(1)) - 1 if match else None
            message = _TOML_LINE.sub("", str(exc)).strip()
            raise FrontMatterError(f"invalid TOML front matter: {message}", line=line) from None
        except RecursionError:
            raise FrontMatterError(
                f"invalid TOML front matter: arrays or inline tables nested more than "
                f"{TOML_NESTING_LIMIT} levels deep"
            ) from None
    elif fmt == "yaml":
        import yaml  # legacy front matter only: not worth 15 ms on every start-up

        try:
            data = yaml.safe_load(raw) if raw.strip() else {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = first_line + mark.line if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc)
            raise FrontMatterError(f"invalid YAML front matter: {problem}", line=line) from None
        except RecursionError:
            raise FrontMatterError(_too_deep("YAML")) from None
    else:
        try:
            data = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise FrontMatterError(
                f"invalid JSON front matter: {exc.msg}", line=first_line + exc.lineno - 1
            ) from None
        except RecursionError:
            raise FrontMatterError(_too_deep("JSON")) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontMatterError(
            f"front matter must be a table of keys, not a {type(data).__name__}", line=first_line
        )
    if fmt != "toml" and too_deep(data, TOML_NESTING_LIMIT):  # tomli stops at its own limit
        raise FrontMatterError(_too_deep(fmt.upper()))
    return data


def _too_deep(fmt: str) -> str:
    """The same limit for every front matter format, whichever parser gave up first."""
    return (
        f"invalid {fmt} front matter: arrays or tables nested more than "
        f"{TOML_NESTING_LIMIT} levels deep"
    )
