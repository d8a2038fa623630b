"""Every file a deck references resolves inside the project root (docs/decks.md, "Trust and
limits" / "What is read"): links followed, `..` resolved, bundled gambit:// files allowed,
/proc, /sys and /dev never read, widened only by a setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gambit.core import (
    DeckLoadError,
    ProjectRoot,
    check_deck_tree,
    default_project_root,
    load_deck_tree,
    project_top,
    run_deck,
)
from gambit.providers.offline import ScriptedProvider
from tests.support.machine import needs_proc  # the tests that plant /proc links

from .conftest import ACTION_SCHEMAS, GRADER_SCHEMAS, MODEL, DeckFolder


@pytest.fixture
def project(tmp_path: Path) -> DeckFolder:
    """A project (tmp/proj, pinned by its gambit.toml) with a folder beside it (tmp/outside)."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "gambit.toml").write_text("")
    outside = DeckFolder(tmp_path / "outside")
    outside.write("secret.md", "the neighbour's secret\n")
    outside.write("schema.json", '{"type": "object"}')
    outside.write("tool.py", "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'x')\n")
    outside.deck("deck/PROMPT.md", MODEL + ACTION_SCHEMAS)
    outside.deck("grader/PROMPT.md", MODEL + GRADER_SCHEMAS)
    return DeckFolder(tmp_path / "proj")


def errors(path: Path, **kwargs) -> list[str]:
    tree, diag = check_deck_tree(path, **kwargs)
    return [p.render() for p in diag.errors]


def only_error(path: Path, **kwargs) -> str:
    found = errors(path, **kwargs)
    assert len(found) == 1, found
    return found[0]


# ---- the reproducers of the issue --------------------------------------------------------------


@needs_proc
def test_an_embed_linked_to_proc_self_environ_is_an_error_naming_the_path_and_the_root(
    project: DeckFolder,
):
    deck = project.deck("bot/PROMPT.md", MODEL, "Hello ![](./env.md)")
    (deck.parent / "env.md").symlink_to("/proc/self/environ")
    message = only_error(deck)
    assert f"{deck}: ![](./env.md): './env.md' resolves to /proc/" in message
    assert f"outside the project root {project.root.resolve()}" in message
    assert "under /proc, which Gambit never reads" in message
    with pytest.raises(DeckLoadError):
        load_deck_tree(deck)


def test_an_embed_or_a_schema_in_a_state_folder_is_an_error(project: DeckFolder):
    # The simulator's secret key and database live in <workspace>/.gambit: a Markdown deck
    # must not pull them into its prompt, directly or through a link.
    state = project.root / "bot" / ".gambit"
    state.mkdir(parents=True)
    (state / "secret_key.md").write_text("sk-django-secret")
    deck = project.deck("bot/PROMPT.md", MODEL, "Notes: ![](./notes.md)")
    (deck.parent / "notes.md").symlink_to(state / "secret_key.md")
    message = only_error(deck)
    assert "inside a .gambit folder, where the simulator and the CLI keep their state" in message
    direct = project.deck("bot2/PROMPT.md", MODEL, "Notes: ![](../bot/.gambit/secret_key.md)")
    assert "inside a .gambit folder" in only_error(direct)
    (state / "s.json").write_text('{"type": "object"}')
    schema = project.deck(
        "bot3/PROMPT.md", MODEL + 'contextSchema = "../bot/.gambit/s.json"\n', "Hi"
    )
    assert "inside a .gambit folder" in only_error(schema)


async def test_nothing_from_the_environment_reaches_the_model(
    project: DeckFolder, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("GAMBIT_TEST_SECRET", "sk-do-not-send-4242")
    deck = project.deck("bot/PROMPT.md", MODEL, "Hello ![](./env.md)")
    (deck.parent / "env.md").symlink_to("/proc/self/environ")
    provider = ScriptedProvider()
    provider.enqueue("hi")
    with pytest.raises(DeckLoadError, match="never reads"):
        await run_deck(deck, provider=provider)
    assert provider.requests == []


def test_an_embed_linked_to_etc_passwd_is_an_error(project: DeckFolder):
    deck = project.deck("bot/PROMPT.md", MODEL, "![](./passwd.md)")
    (deck.parent / "passwd.md").symlink_to("/etc/passwd")
    message = only_error(deck)
    assert "'./passwd.md' resolves to /etc/passwd, outside the project root" in message
    assert "[project] allow_paths in gambit.toml" in message


# ---- every kind of reference -----------------------------------------------------------------

REFERENCES = {
    "an embed": ("", "![](../../outside/secret.md)"),
    "an action path": (
        '[[actions]]\nname = "a"\ndescription = "d"\npath = "../../outside/deck/PROMPT.md"',
        "",
    ),
    "an execute module": (
        '[[actions]]\nname = "a"\ndescription = "d"\nexecute = "../../outside/tool.py"\n'
        + 'contextSchema = "./in.json"\nresponseSchema = "./in.json"',
        "",
    ),
    "a scenario": ('[[scenarios]]\npath = "../../outside/deck/PROMPT.md"', ""),
    "a grader": ('[[graders]]\npath = "../../outside/grader/PROMPT.md"', ""),
    "an error handler": ('[handlers.onError]\npath = "../../outside/deck/PROMPT.md"', ""),
    "a busy handler": (
        '[handlers.onBusy]\npath = "../../outside/deck/PROMPT.md"\ndelayMs = 5',
        "",
    ),
    "an idle handler": (
        '[handlers.onIdle]\npath = "../../outside/deck/PROMPT.md"\ndelayMs = 5',
        "",
    ),
    "a schema file": ('contextSchema = "../../outside/schema.json"', ""),
    "a Python schema": ('contextSchema = "../../outside/tool.py"', ""),
    "a tool's input schema": (
        '[[tools]]\nname = "t"\ndescription = "d"\ninputSchema = "../../outside/schema.json"',
        "",
    ),
}


@pytest.mark.parametrize("kind", REFERENCES)
def test_a_reference_outside_the_root_is_an_error(project: DeckFolder, kind: str):
    front, body = REFERENCES[kind]
    project.write("bot/in.json", '{"type": "object"}')
    deck = project.deck("bot/PROMPT.md", MODEL + front, body or "Hi.")
    message = only_error(deck)
    assert "resolves to " + str(project.root.parent / "outside") in message
    assert f"outside the project root {project.root}" in message


def test_a_card_outside_the_root_is_an_error_and_so_is_what_a_card_references(
    project: DeckFolder,
):
    deck = project.deck("bot/PROMPT.md", MODEL, "![](../../outside/card.md)")
    project.write(
        "../outside/card.md", "+++\n[[actions]]\nname='a'\npath='./deck/PROMPT.md'\n+++\n"
    )
    assert "'../../outside/card.md' resolves to" in only_error(deck)
    # A card inside the project that names a deck outside it.
    project.write("bot/card.md", '+++\ncontextFragment = "../../outside/schema.json"\n+++\nCard')
    deck = project.deck("bot/PROMPT.md", MODEL, "![](./card.md)")
    message = only_error(deck)
    assert message.startswith(str(project.root / "bot/card.md"))
    assert "'../../outside/schema.json' resolves to" in message


def test_a_linked_folder_that_leads_out_is_an_error_and_one_that_stays_in_is_fine(
    project: DeckFolder,
):
    (project.root / "bot").mkdir()
    (project.root / "bot" / "shared").symlink_to(project.root.parent / "outside")
    deck = project.deck("bot/PROMPT.md", MODEL, "![](./shared/secret.md)")
    assert "'./shared/secret.md' resolves to" in only_error(deck)
    project.write("common/tone.md", "Be brief.")
    (project.root / "bot" / "shared").unlink()
    (project.root / "bot" / "shared").symlink_to(project.root / "common")
    deck = project.deck("bot/PROMPT.md", MODEL, "![](./shared/tone.md)")
    tree = load_deck_tree(deck)
    assert tree.root.body == "Be brief."


def test_dot_dot_inside_the_root_is_fine(project: DeckFolder):
    project.write("snippets/tone.md", "Be brief.")
    project.deck("a/PROMPT.md", MODEL + ACTION_SCHEMAS)
    deck = project.deck(
        "bot/PROMPT.md",
        MODEL + '[[actions]]\nname = "a"\ndescription = "d"\npath = "../a/PROMPT.md"',
        "![](../snippets/tone.md)",
    )
    assert errors(deck) == []


def test_bundled_gambit_files_are_allowed(project: DeckFolder):
    deck = project.deck(
        "bot/PROMPT.md",
        MODEL
        + ACTION_SCHEMAS
        + '[[actions]]\nname = "codex"\ndescription = "d"\n'
        + 'path = "gambit://decks/openai/codex-sdk/PROMPT.md"',
        "![](gambit://snippets/respond.md)",
    )
    tree = load_deck_tree(deck)
    assert len(tree.decks) == 2


def test_the_root_deck_itself_must_lie_in_the_given_root(project: DeckFolder):
    deck = project.deck("bot/PROMPT.md", MODEL)
    message = only_error(deck, project_root=project.root.parent / "outside")
    assert f"resolves to {deck}, outside the project root" in message


# ---- the project root when none is given ----------------------------------------------------


def test_the_default_root_is_the_gambit_toml_folder_then_a_repository_then_the_decks_parent(
    tmp_path: Path,
):
    deck = DeckFolder(tmp_path).deck("repo/decks/bot/PROMPT.md", MODEL)
    assert project_top(deck) is None
    assert default_project_root(deck) == tmp_path / "repo/decks"
    (tmp_path / "repo/.git").mkdir()
    assert default_project_root(deck) == tmp_path / "repo"
    (tmp_path / "repo/decks/gambit.toml").write_text("")
    assert default_project_root(deck) == tmp_path / "repo/decks"
    assert default_project_root(deck.parent) == tmp_path / "repo/decks"  # a deck folder


def test_a_snippets_folder_beside_the_decks_loads_under_one_gambit_toml(tmp_path: Path):
    decks = DeckFolder(tmp_path / "repo")
    decks.write("gambit.toml", "")
    decks.write("snippets/tone.md", "Be brief.")
    deck = decks.deck("decks/bot/PROMPT.md", MODEL, "![](../../snippets/tone.md)")
    assert load_deck_tree(deck).root.body == "Be brief."
    (tmp_path / "repo/gambit.toml").unlink()  # no project: only the folder holding decks/bot
    assert "outside the project root" in only_error(deck)


# ---- widening -------------------------------------------------------------------------------


def test_allow_paths_in_gambit_toml_widens_the_root(project: DeckFolder):
    deck = project.deck("bot/PROMPT.md", MODEL, "![](../../outside/secret.md)")
    assert errors(deck)
    project.write("gambit.toml", '[project]\nallow_paths = ["../outside"]\n')
    assert load_deck_tree(deck).root.body == "the neighbour's secret"


def test_a_project_root_with_allowed_folders_widens_it(project: DeckFolder):
    deck = project.deck("bot/PROMPT.md", MODEL, "![](../../outside/secret.md)")
    root = ProjectRoot(project.root, allow=["../outside"])
    assert load_deck_tree(deck, project_root=root).root.body == "the neighbour's secret"


@needs_proc
def test_proc_sys_and_dev_stay_refused_when_everything_is_allowed(project: DeckFolder):
    project.write("gambit.toml", '[project]\nallow_paths = ["/"]\n')
    deck = project.deck("bot/PROMPT.md", MODEL, "![](./env.md) ![](./null.md) ![](./sys.md)")
    (deck.parent / "env.md").symlink_to("/proc/self/environ")
    (deck.parent / "null.md").symlink_to("/dev/null")
    (deck.parent / "sys.md").symlink_to("/sys/kernel")
    found = errors(deck)
    assert len(found) == 3
    for under in ("/proc", "/dev", "/sys"):
        assert any(f"under {under}, which Gambit never reads" in e for e in found), found
    found = errors(deck, project_root=ProjectRoot("/", allow=["/proc"]))
    assert any("inside the project root / but under /proc" in e for e in found), found


def test_a_wrong_allow_paths_is_an_error_naming_gambit_toml(project: DeckFolder):
    project.write("gambit.toml", '[project]\nallow_paths = "../outside"\n')
    deck = project.deck("bot/PROMPT.md", MODEL)
    message = only_error(deck)
    assert message.startswith(f"{project.root / 'gambit.toml'}: project.allow_paths: must be")
    project.write("gambit.toml", "[project\n")
    message = only_error(deck)
    assert message.startswith(f"{project.root / 'gambit.toml'}: cannot read the project settings")


# ---- decks loaded while a run goes on --------------------------------------------------------


async def test_a_deck_spawned_at_run_time_is_held_to_the_trees_root(project: DeckFolder):
    deck = project.write(
        "bot/deck.py",
        "import gambit\n"
        "def run(ctx):\n    return ctx.spawn_and_wait('../../outside/deck/PROMPT.md', '')\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    with pytest.raises(DeckLoadError, match="outside the project root"):
        await run_deck(deck, provider=ScriptedProvider())
    # Allowed, it runs (the spawned deck answers from the scripted model).
    provider = ScriptedProvider()
    provider.enqueue("from outside")
    root = ProjectRoot(project.root, allow=[project.root.parent / "outside"])
    result = await run_deck(deck, provider=provider, project_root=root)
    assert result.output == "from outside"


def test_the_loaded_tree_keeps_its_root(project: DeckFolder):
    deck = project.deck("bot/PROMPT.md", MODEL)
    tree = load_deck_tree(deck)
    assert tree.project_root is not None
    assert tree.project_root.path == Path(os.path.realpath(project.root))
