"""The Build tab: decks as files, edited in the browser with the loader watching.

Every path comes from a request and is relative to the workspace root: it is jailed (no
absolute path, no `..`, no symlink leading out; `workspaces.jailed_path`), and nothing inside
a `.gambit` folder (the simulator's state: its secret key, its database) is read, written or
deleted, as the built-in tools never touch one (docs/simulator.md, "Build tab"). Files are read up
to `MAX_FILE_BYTES`; binary files are reported as such and never edited. A save is atomic
(a temporary file renamed over the old one) and refuses to overwrite a file that changed on
disk since it was opened (`StaleWrite` carries the disk version). A broken deck is always
saved: validation reports, it never blocks.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decks_app.models import Workspace
from decks_app.workspaces.served import PathOutsideWorkspace, jailed_path, project_root
from gambit.core import STATE_FOLDER, check_deck_tree

MAX_FILE_BYTES = 1_000_000
HIDDEN = (STATE_FOLDER, ".git", "__pycache__", "node_modules", ".venv")
DECK_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


class BuildError(ValueError):
    pass


@dataclass
class StaleWrite(Exception):
    """The file changed on disk since the editor opened it."""

    path: str
    disk_text: str
    disk_version: str


def version_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _root(workspace: Workspace) -> Path:
    return Path(workspace.root).resolve()


def _jailed(workspace: Workspace, rel: str) -> Path:
    try:
        path = jailed_path(workspace, rel)
    except PathOutsideWorkspace:
        raise BuildError(f"{rel!r} is not a path inside the workspace") from None
    # As named, and where it leads (a link to the state folder counts).
    if STATE_FOLDER in Path(rel).parts or STATE_FOLDER in path.relative_to(_root(workspace)).parts:
        raise BuildError(
            f"{rel!r} is inside a {STATE_FOLDER} folder, where the simulator keeps its state "
            "(its secret key, its database); the Build tab neither shows nor edits it"
        )
    return path


def file_tree(workspace: Workspace, folder: str = "") -> list[dict[str, Any]]:
    """Files and folders under `folder` (depth first, sorted), skipping hidden folders and
    symlinks that lead out of the workspace."""
    root = _root(workspace)
    start = _jailed(workspace, folder) if folder else root
    out: list[dict[str, Any]] = []
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in HIDDEN and not d.startswith("."))
        here = Path(dirpath)
        for name in sorted(filenames):
            path = here / name
            if name.startswith(".") or not path.resolve().is_relative_to(root):
                continue
            out.append(
                {
                    "path": str(path.relative_to(root)),
                    "depth": len(path.relative_to(start).parts) - 1,
                }
            )
    return out


def deck_view(workspace: Workspace, deck_rel: str) -> dict[str, Any]:
    """The deck as the loader sees it: each deck file with its role, and the problems."""
    root = _root(workspace)
    tree, diag = check_deck_tree(_jailed(workspace, deck_rel), project_root=project_root(workspace))
    entries = []
    for entry in tree.entries if tree is not None else []:
        try:
            rel = str(Path(entry.path).resolve().relative_to(root))
        except ValueError:
            rel = entry.path  # a stdlib deck (gambit://decks/...) outside the workspace
        entries.append({"path": rel, "role": entry.role, "label": entry.label})
    return {"deck": deck_rel, "entries": entries, "problems": problems(workspace, diag)}


def problems(
    workspace: Workspace, diag: Any, *, remap: tuple[Path, Path] | None = None
) -> list[dict]:
    """The loader's problems with workspace-relative files and, where the loader gave only a
    key, the line of that key in the file (so the editor can show it inline)."""
    root = _root(workspace)
    texts: dict[str, list[str]] = {}
    out = []
    for severity, items in (("error", diag.errors), ("warning", diag.warnings)):
        for p in items:
            source = p.file
            file = source
            message, hint = p.message, p.hint
            if remap is not None:
                if file and Path(file).is_relative_to(remap[0]):
                    file = str(remap[1] / Path(file).relative_to(remap[0]))
                # paths in the words too (a schema file "does not exist (<path>)")
                cut = str(remap[0]) + os.sep
                message = message.replace(cut, str(remap[1]))
                hint = hint.replace(cut, str(remap[1])) if hint else hint
            if file:
                try:
                    file = str(Path(file).resolve().relative_to(root))
                except ValueError:
                    pass
            line = p.line
            if line is None and p.key and source and Path(source).is_file():
                if source not in texts:
                    raw = Path(source).read_text(encoding="utf-8", errors="replace")
                    texts[source] = raw.splitlines()
                line = line_of_key(texts[source], p.key)
            where = f"{file}:{line}" if file and line else file or ""
            text = f"{where}: " if where else ""
            text += f"{p.key}: " if p.key else ""
            text += message + (f" (fix: {hint})" if hint else "")
            out.append(
                {
                    "severity": severity,
                    "file": file,
                    "line": line,
                    "key": p.key,
                    "message": message,
                    "hint": hint,
                    "text": text,
                }
            )
    return out


_SEGMENT = re.compile(r"([A-Za-z0-9_]+)(?:\[([^\]]*)\])?")


def line_of_key(lines: list[str], key: str) -> int | None:
    """The 1-based line where a front matter key like `startMode`, `modelParams.model` or
    `actions[lookup].path` is written, or None when it cannot be found."""
    segments = _SEGMENT.findall(key)
    if not segments:
        return None
    start = 0
    for depth, (name, index) in enumerate(segments):
        found = None
        for number in range(start, len(lines)):
            stripped = lines[number].strip()
            header = re.match(rf"^\[\[?\s*{re.escape(name)}\s*\]\]?$", stripped)
            if header or re.match(rf"^{re.escape(name)}\s*[=.]", stripped):
                found = number
                if index and not index.isdigit():  # actions[name]: the entry with that name
                    for entry in range(number, len(lines)):
                        if re.match(
                            rf"^name\s*=\s*[\"']{re.escape(index)}[\"']", lines[entry].strip()
                        ):
                            found = entry
                            break
                break
        if found is None:
            return start + 1 if depth else None
        start = found
    return start + 1


def read_file(workspace: Workspace, rel: str) -> dict[str, Any]:
    path = _jailed(workspace, rel)
    if not path.is_file():
        raise FileNotFoundError(rel)
    data = path.read_bytes()[: MAX_FILE_BYTES + 1]
    too_big = len(data) > MAX_FILE_BYTES
    try:
        text = None if too_big or b"\x00" in data else data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "path": rel,
        "text": text,
        "binary": text is None and not too_big,
        "tooLarge": too_big,
        "size": path.stat().st_size,
        "version": version_of(path.read_bytes()) if not too_big else None,
    }


def save_file(
    workspace: Workspace, rel: str, text: str, base_version: str | None
) -> dict[str, Any]:
    """Write `text` atomically; `base_version` is the version the editor opened (None for a
    new file). A file changed on disk since then is not overwritten."""
    path = _jailed(workspace, rel)
    data = text.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise BuildError(f"the file is larger than {MAX_FILE_BYTES} bytes")
    if path.exists():
        if not path.is_file():
            raise BuildError(f"{rel} is not a file")
        current = path.read_bytes()
        if base_version != version_of(current):
            raise StaleWrite(rel, current.decode("utf-8", errors="replace"), version_of(current))
    elif base_version is not None:
        raise BuildError(f"{rel} was deleted on disk since it was opened")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return {"path": rel, "version": version_of(data)}


# ---------------------------------------------------------------- new decks

PROMPT = """+++
label = "{label}"
startMode = "assistant"

[modelParams]
model = "openrouter/openai/gpt-4o-mini"
temperature = 0.2

[[scenarios]]
path = "./scenarios/first_visit/PROMPT.md"
label = "A first-time visitor"

[[graders]]
path = "./graders/helpful/PROMPT.md"
label = "Helpful"
+++

You are {label}. Read INTENT.md and the policy/ folder to learn what you are for.

- Greet the user and ask how you can help.
- Keep answers short and concrete.
"""
INTENT = """# Intent

## Purpose
What this deck is for, in one or two sentences.

## Users
Who talks to it, and what they want.

## Success
What a good conversation achieves.

## Boundaries
What it must never do.
"""
POLICY = "# Policy\n\nRules the deck follows; the Build assistant reads them.\n"
SCENARIO = """+++
label = "A first-time visitor"
contextSchema = "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"
responseSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"

[modelParams]
model = "openrouter/openai/gpt-4o-mini"
+++

You are visiting for the first time and have one question. Ask it, follow up once, then stop.

![](gambit://snippets/scenario-participant.md)
"""
GRADER = """+++
label = "Helpful"
contextSchema = "gambit://schemas/graders/contexts/conversation.zod.ts"
responseSchema = "gambit://schemas/graders/grader_output.zod.ts"

[modelParams]
model = "openrouter/openai/gpt-4o-mini"
temperature = 0
+++

Grade the whole conversation from -3 (unhelpful or wrong) to +3 (helpful, short and
concrete). Give the reason and quote the words that justify it.

![](gambit://snippets/respond.md)
"""


def create_deck(workspace: Workspace, name: str) -> str:
    """A new deck folder from the template; returns its PROMPT.md path (relative)."""
    name = name.strip().lower().replace(" ", "_")
    if not name or not set(name) <= DECK_NAME_CHARS or len(name) > 60:
        raise BuildError("a deck name uses letters, digits, - and _ (at most 60)")
    folder = _jailed(workspace, name)
    if folder.exists():
        raise BuildError(f"a folder named {name} already exists")
    label = name.replace("_", " ").replace("-", " ").capitalize()
    files = {
        "PROMPT.md": PROMPT.format(label=label),
        "INTENT.md": INTENT,
        "policy/README.md": POLICY,
        "scenarios/first_visit/PROMPT.md": SCENARIO,
        "graders/helpful/PROMPT.md": GRADER,
    }
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return f"{name}/PROMPT.md"


def delete_deck(workspace: Workspace, deck_rel: str, confirm: str) -> None:
    """Delete a deck's folder; `confirm` must repeat the folder's name."""
    path = _jailed(workspace, deck_rel)
    folder = path.parent if path.is_file() else path
    if folder == _root(workspace):
        raise BuildError("the workspace itself cannot be deleted")
    if confirm.strip() != folder.name:
        raise BuildError(f"type the deck's folder name ({folder.name}) to confirm")
    if folder.is_symlink():
        raise BuildError("a symlinked folder is not deleted")
    shutil.rmtree(folder)


# ---------------------------------------------------------------- scaffolding

SCAFFOLDS = (
    "action",
    "compute_action",
    "scenario",
    "grader_turns",
    "grader_conversation",
    "snippet",
)
ACTION_IN = (
    '{"type": "object", "properties": {"request": {"type": "string"}}, "required": ["request"]}\n'
)
ACTION_OUT = (
    '{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}\n'
)
LLM_ACTION = """+++
label = "{label}"
contextSchema = "./input.json"
responseSchema = "./output.json"

[modelParams]
model = "openrouter/openai/gpt-4o-mini"
+++

Do what the request in the `gambit_context` result asks, then answer.

![](gambit://snippets/respond.md)
"""
COMPUTE_ACTION = '''"""{label}: a compute action (no model)."""

import gambit


def run(ctx):
    return {{"answer": f"done: {{ctx.input['request']}}"}}


deck = gambit.define_deck(
    run=run,
    context_schema={{"type": "object", "properties": {{"request": {{"type": "string"}}}}, "required": ["request"]}},
    response_schema={{"type": "object", "properties": {{"answer": {{"type": "string"}}}}, "required": ["answer"]}},
)
'''
TURN_GRADER = GRADER.replace("contexts/conversation.zod.ts", "contexts/turn.zod.ts").replace(
    "Grade the whole conversation", "Grade one assistant message"
)


def _front_matter(path: Path) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("+++"):
        raise BuildError(
            "scaffolding edits TOML front matter (between +++ lines); this deck has none"
        )
    end = text.find("\n+++", 3)
    if end < 0:
        raise BuildError("the front matter is not closed with a +++ line")
    return text[4 : end + 1], text[end + 4 :]


def scaffold(workspace: Workspace, deck_rel: str, kind: str, name: str) -> list[str]:
    """Add an action, scenario, grader or snippet to a deck: its files, and the matching
    front matter entry (comments and layout kept, through tomlkit). Returns created files."""
    import tomlkit  # only the Build tab needs it

    if kind not in SCAFFOLDS:
        raise BuildError(f"kind must be one of {', '.join(SCAFFOLDS)}")
    slug = name.strip().lower().replace(" ", "_").replace("-", "_")
    if (
        not slug
        or not set(slug) <= DECK_NAME_CHARS - {"-"}
        or not slug[0].isalpha()
        or len(slug) > 60
    ):
        raise BuildError("a name uses letters, digits and _, starting with a letter (at most 60)")
    deck = _jailed(workspace, deck_rel)
    if deck.name != "PROMPT.md" and not deck.name.endswith(".md"):
        raise BuildError("scaffolding works on Markdown decks")
    folder = deck.parent
    front, body = _front_matter(deck)
    doc = tomlkit.parse(front)
    label = slug.replace("_", " ").capitalize()
    files: dict[str, str] = {}
    entry: dict[str, str] | None = None
    array = None
    if kind == "action":
        files = {
            f"actions/{slug}/PROMPT.md": LLM_ACTION.format(label=label),
            f"actions/{slug}/input.json": ACTION_IN,
            f"actions/{slug}/output.json": ACTION_OUT,
        }
        array, entry = (
            "actions",
            {
                "name": slug,
                "description": f"{label}: describe when and why the model should call it.",
                "path": f"./actions/{slug}/PROMPT.md",
            },
        )
    elif kind == "compute_action":
        files = {f"actions/{slug}.py": COMPUTE_ACTION.format(label=label)}
        array, entry = (
            "actions",
            {
                "name": slug,
                "description": f"{label}: describe when and why the model should call it.",
                "execute": f"./actions/{slug}.py",
            },
        )
    elif kind == "scenario":
        files = {f"scenarios/{slug}/PROMPT.md": SCENARIO.replace("A first-time visitor", label)}
        array, entry = "scenarios", {"path": f"./scenarios/{slug}/PROMPT.md", "label": label}
    elif kind in ("grader_turns", "grader_conversation"):
        template = TURN_GRADER if kind == "grader_turns" else GRADER
        files = {
            f"graders/{slug}/PROMPT.md": template.replace('label = "Helpful"', f'label = "{label}"')
        }
        array, entry = "graders", {"path": f"./graders/{slug}/PROMPT.md", "label": label}
    else:
        files = {f"snippets/{slug}.md": f"{label}: write the shared guidance here.\n"}
    for rel in files:
        if (folder / rel).exists():
            raise BuildError(f"{(folder / rel).relative_to(_root(workspace))} already exists")
    if array is not None and entry is not None:
        existing = doc.get(array)
        if (
            existing is not None
            and array == "actions"
            and any(isinstance(e, dict) and e.get("name") == slug for e in existing)
        ):
            raise BuildError(f"the deck already has an action named {slug}")
        table = tomlkit.table()
        for key, value in entry.items():
            table.add(key, value)
        if existing is None:
            aot = tomlkit.aot()
            aot.append(table)
            doc.add(tomlkit.nl())
            doc.add(array, aot)
        else:
            existing.append(table)
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    if kind == "snippet":
        body = body.rstrip("\n") + f"\n\n![](./snippets/{slug}.md)\n"
    new_text = "+++\n" + tomlkit.dumps(doc).rstrip("\n") + "\n+++" + body
    deck.write_text(new_text, encoding="utf-8")
    root = _root(workspace)
    return [str((folder / rel).relative_to(root)) for rel in files]
