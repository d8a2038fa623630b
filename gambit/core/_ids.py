"""Identifiers: `<prefix>-<24 hex>`, the form ids take in states, traces and the API."""

from __future__ import annotations

import os
import re

_ID_RE = re.compile(r"^[a-z][a-z0-9_]*-[0-9a-f]{24}$")


def new_id(prefix: str) -> str:
    """A fresh identifier such as `run-0123456789abcdef01234567`."""
    # os.urandom, as secrets.token_hex uses, without its layers of calls (a run makes a
    # dozen ids per model call).
    return f"{prefix}-{os.urandom(12).hex()}"


def is_valid_id(value: object, prefix: str | None = None) -> bool:
    """True when `value` has the `<prefix>-<24 hex>` form (and the given prefix, if any)."""
    if not isinstance(value, str) or not _ID_RE.match(value):
        return False
    return prefix is None or value.startswith(prefix + "-")
