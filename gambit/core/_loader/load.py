"""One load in progress: where its problems go and what it has already imported.

Every parsing function in this package takes it first (`load`), so a rule anywhere can
report a problem and the whole tree's problems end up in one `Diagnostics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._errors import Diagnostics


@dataclass
class Load:
    diag: Diagnostics
    # False: a Python file is never imported; `imports.import_module` raises DeckRunsCode.
    import_modules: bool = True
    # Python files already imported in this load (None: the import failed, already reported).
    modules: dict[str, Any] = field(default_factory=dict)
    # (file, key) of schemas a deck declares but that failed to load (already an error), so
    # the role rules do not report them a second time as missing.
    failed_schemas: set[tuple[str, str]] = field(default_factory=set)
