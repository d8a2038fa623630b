"""The specs of the four entry arrays: the keys each entry may have are derived from its spec,
so they are pinned here against the deck format (docs/decks.md, "The canonical form")."""

from __future__ import annotations

import pytest

from gambit.core._loader.entries import ACTIONS, GRADERS, SCENARIOS, TOOLS

REF_KEYS = {"path", "label", "description", "id", "permissions"}


@pytest.mark.parametrize(
    ("spec", "keys"),
    [
        (
            ACTIONS,
            {"name", "description", "path", "execute", "contextSchema", "responseSchema"}
            | REF_KEYS,
        ),
        (SCENARIOS, REF_KEYS),
        (GRADERS, REF_KEYS),
        (TOOLS, {"name", "description", "inputSchema", "label", "id"}),
    ],
    ids=["actions", "scenarios", "graders", "tools"],
)
def test_each_entry_array_accepts_the_keys_of_seed_002(spec, keys):
    assert spec.known_keys == keys


def test_the_deprecated_aliases_name_their_arrays():
    assert [(s.key, s.legacy) for s in (ACTIONS, SCENARIOS, GRADERS, TOOLS)] == [
        ("actions", "actionDecks"),
        ("scenarios", "testDecks"),
        ("graders", "graderDecks"),
        ("tools", None),
    ]
