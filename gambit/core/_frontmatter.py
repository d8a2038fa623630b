"""Front matter: `+++` TOML (canonical), legacy `---` YAML, and `---toml` / `---yaml` / `---json`."""

from __future__ import annotations

import json
import re
import sys
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
# The longest front matter read (docs/decks.md, "Bounds"): a deck's settings are a few
# hundred characters; PyYAML reads about 300,000 characters a second, so this is a third of
# a second at most.
MAX_FRONT_MATTER_CHARS = 100_000
_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")


class FrontMatterError(ValueError):
    """Front matter that cannot be read: the message, and where known the file line, the
    key path (`modelParams`, `actions[1]`) and a hint saying how to fix it."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        *,
        key: str | None = None,
        hint: str | None = None,
    ):
        super().__init__(message)
        self.line = line
        self.key = key
        self.hint = hint


class FrontMatterKeyError(FrontMatterError):
    """Front matter that parsed, but with a key that is not a string (`1:`, `null:`)."""


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
    if len(raw) > MAX_FRONT_MATTER_CHARS:
        raise FrontMatterError(
            f"the front matter is longer than {MAX_FRONT_MATTER_CHARS:,} characters (the limit)",
            line=first_content_line,
            hint="keep the deck's settings in the front matter; put long text in the body, "
            "a snippet or a schema file",
        )
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
        except ValueError as exc:  # int("1" * 5000): Python's limit on digits in an integer
            raise FrontMatterError(_invalid_value("TOML", exc)) from None
    elif fmt == "yaml":
        data = _parse_yaml(raw, first_line) if raw.strip() else {}
    else:
        try:
            data = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise FrontMatterError(
                f"invalid JSON front matter: {exc.msg}", line=first_line + exc.lineno - 1
            ) from None
        except RecursionError:
            raise FrontMatterError(_too_deep("JSON")) from None
        except ValueError as exc:
            raise FrontMatterError(_invalid_value("JSON", exc)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontMatterError(
            f"front matter must be a table of keys, not a {type(data).__name__}", line=first_line
        )
    if fmt != "toml" and too_deep(data, TOML_NESTING_LIMIT):  # tomli stops at its own limit
        raise FrontMatterError(_too_deep(fmt.upper()))
    return data


def _parse_yaml(raw: str, first_line: int) -> Any:
    """Legacy YAML front matter, read without aliases and with string keys only.

    An alias (`*name`) is refused rather than expanded: front matter is a few keys, and an
    alias is the only way a few lines of YAML grow into a graph whose walk never ends
    (nested aliases, "billion laughs") or that contains itself (docs/decisions.md, "YAML
    aliases"). A key YAML reads as something else (`1:`, `null:`, `true:`, a date) is
    refused with its key path, as every key the loader looks up is a string.
    """
    import yaml  # legacy front matter only: not worth 15 ms on every start-up

    loader = None
    try:
        loader = _yaml_loader(raw, first_line)  # its reader refuses NUL and other controls
        node = loader.get_single_node()
        if node is None:
            return {}
        _check_yaml_keys(node, first_line)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + mark.line if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise FrontMatterError(f"invalid YAML front matter: {problem}", line=line) from None
    except RecursionError:
        raise FrontMatterError(_too_deep("YAML")) from None
    except FrontMatterError:
        raise
    except ValueError as exc:  # a value the constructor refuses: `2020-13-45`, a 5000-digit int
        raise FrontMatterError(_invalid_value("YAML", exc)) from None
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_loader(raw: str, first_line: int) -> Any:
    """A PyYAML SafeLoader over `raw` that raises FrontMatterError at the first alias."""
    import yaml

    class FrontMatterLoader(yaml.SafeLoader):
        def __init__(self, stream: str):
            super().__init__(stream)
            self.open_anchors: set[str] = set()  # anchors whose value is being read

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark
                line = first_line + mark.line if mark is not None else None
                if event.anchor in self.open_anchors:
                    raise FrontMatterError(
                        f"invalid YAML front matter: recursive alias *{event.anchor} (the "
                        f"value &{event.anchor} contains itself); YAML aliases are not "
                        "allowed in front matter",
                        line=line,
                        hint="write the value out in full, or move to TOML front matter "
                        "between +++ lines",
                    )
                raise FrontMatterError(
                    f"invalid YAML front matter: alias *{event.anchor}: YAML aliases are "
                    "not allowed in front matter",
                    line=line,
                    hint=f"write the value of &{event.anchor} out in full where "
                    f"*{event.anchor} is, or move to TOML front matter between +++ lines",
                )
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                self.open_anchors.add(anchor)
            try:
                return super().compose_node(parent, index)
            finally:
                if anchor is not None:
                    self.open_anchors.discard(anchor)

    return FrontMatterLoader(raw)


_YAML_KINDS = {
    "tag:yaml.org,2002:int": "a number",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "a boolean",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:timestamp": "a date/time",
}


def _check_yaml_keys(root: Any, first_line: int) -> None:
    """Raise FrontMatterError at the first mapping key that is not a string, naming its path."""
    import yaml

    pending: list[tuple[Any, str]] = [(root, "")]
    while pending:
        node, path = pending.pop()
        if isinstance(node, yaml.SequenceNode):
            pending.extend(
                (item, f"{path}[{index + 1}]")
                for index, item in reversed(list(enumerate(node.value)))
            )
            continue
        if not isinstance(node, yaml.MappingNode):
            continue
        children = []
        for key_node, value_node in node.value:
            is_scalar = isinstance(key_node, yaml.ScalarNode)
            if is_scalar and key_node.tag in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"):
                children.append(
                    (value_node, f"{path}.{key_node.value}" if path else key_node.value)
                )
                continue
            if is_scalar:
                shown = key_node.value or "(empty)"
                kind = _YAML_KINDS.get(key_node.tag, f"a {key_node.tag.rsplit(':', 1)[-1]}")
            else:
                shown = "[...]" if isinstance(key_node, yaml.SequenceNode) else "{...}"
                kind = "a list" if isinstance(key_node, yaml.SequenceNode) else "a table"
            raise FrontMatterKeyError(
                f"key {shown} must be a string, not {kind}",
                line=first_line + key_node.start_mark.line,
                key=path or None,
                hint=f'quote the key: "{shown}": ...'
                if is_scalar and key_node.value
                else "front matter keys are names; write the key as a quoted string",
            )
        pending.extend(reversed(children))


def _invalid_value(fmt: str, exc: ValueError) -> str:
    """A value the parser read but Python would not build: an integer past Python's limit on
    digits (its own message advises a setting the author cannot reach), an impossible date."""
    if "integer string conversion" in str(exc):
        return (
            f"invalid {fmt} front matter: a number has more than "
            f"{sys.get_int_max_str_digits()} digits"
        )
    return f"invalid {fmt} front matter: {exc}"


def _too_deep(fmt: str) -> str:
    """The same limit for every front matter format, whichever parser gave up first."""
    return (
        f"invalid {fmt} front matter: arrays or tables nested more than "
        f"{TOML_NESTING_LIMIT} levels deep"
    )
