"""One load in progress: where its problems go and what it has already imported.

Every parsing function in this package takes it first (`load`), so a rule anywhere can
report a problem and the whole tree's problems end up in one `Diagnostics`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import Diagnostics

if TYPE_CHECKING:
    from .paths import Jail


class Load:
    __slots__ = ("diag", "failed_schemas", "import_modules", "jail", "modules")

    def __init__(self, diag: Diagnostics, *, import_modules: bool = True):
        self.diag = diag
        # False: a Python file is never imported; `imports.import_module` raises DeckRunsCode.
        self.import_modules = import_modules
        # Python files already imported in this load (None: the import failed, reported).
        self.modules: dict[str, Any] = {}
        # (file, key) of schemas a deck declares but that failed to load (already an error),
        # so the role rules do not report them a second time as missing.
        self.failed_schemas: set[tuple[str, str]] = set()
        # Where the files of this load may lie (set by the tree walk once the root deck is
        # known); None: nothing is checked (a load that reads no referenced file).
        self.jail: Jail | None = None
