"""Comparing model instances as the database stores them."""

from __future__ import annotations

from typing import Any


def columns(obj: Any) -> dict[str, Any]:
    """`obj`'s concrete columns by attribute name: two reads of one row, however they were
    made, are the same when these are equal."""
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}
