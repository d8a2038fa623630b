"""The context-window keys of `[modelParams]` and gambit.toml's `[context]` (docs/decks.md,
"Context window and compaction"): known to the loader, validated with file, key and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from gambit.core import DeckLoadError, load_deck_tree
from gambit.providers import ConfigError
from gambit.providers._config import parse_config


def _deck(tmp_path: Path, params: str) -> Path:
    path = tmp_path / "d" / "PROMPT.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'+++\n[modelParams]\nmodel = "gpt-4o"\n{params}\n+++\nHi.\n')
    return path


def test_the_keys_load_without_a_warning_and_are_not_sent_to_the_provider(tmp_path: Path):
    tree = load_deck_tree(
        _deck(tmp_path, "contextWindow = 128000\ncompactRatio = 0.75\ncompact = false")
    )
    params = tree.root.model_params
    assert (params.context_window, params.compact_ratio, params.compact) == (128000, 0.75, False)
    assert tree.warnings == []
    assert params.provider_params() == {}


@pytest.mark.parametrize(
    ("line", "key", "fix"),
    [
        ('contextWindow = "big"', "modelParams.contextWindow", "contextWindow = 128000"),
        ("contextWindow = 10", "modelParams.contextWindow", "contextWindow = 128000"),
        ("compactRatio = 1.5", "modelParams.compactRatio", "compactRatio = 0.8"),
        ("compactRatio = 0", "modelParams.compactRatio", "compactRatio = 0.8"),
        ('compact = "no"', "modelParams.compact", "compact = false"),
    ],
)
def test_a_bad_value_names_the_file_the_key_and_the_fix(
    tmp_path: Path, line: str, key: str, fix: str
):
    path = _deck(tmp_path, line)
    with pytest.raises(DeckLoadError) as failed:
        load_deck_tree(path)
    message = str(failed.value)
    assert str(path) in message and key in message and fix in message


def test_gambit_toml_context_table():
    config = parse_config(
        b'[context]\nwindow = 32000\ncompact_ratio = 0.5\n[context.windows]\n"openai-api/gpt-4.1" = 1047576\n'
    )
    settings = config.compaction()
    assert settings.context_window == 32000 and settings.compact_ratio == 0.5
    assert settings.model_windows == {"openai-api/gpt-4.1": 1047576}
    assert settings.enabled is True
    assert config.compaction(enabled=False).enabled is False
    assert parse_config(b"[context]\ncompact = false\n").compaction().enabled is False


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (b'[context]\nwindow = "x"\n', "context.window"),
        (b"[context]\ncompact_ratio = 2\n", "context.compact_ratio"),
        (b'[context.windows]\n"m" = 5\n', 'context.windows."m"'),
        (b"[simulator]\nsummary_model = 3\n", "simulator.summary_model"),
    ],
)
def test_a_bad_gambit_toml_value_names_the_key(text: bytes, key: str):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_config(text, path=Path("/p/gambit.toml"))
