"""Builders of click options that several commands declare alike.

Light on purpose (click and pathlib only): `calibrate` and `serve` use them without loading
the engine that `_common` imports.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

__all__ = ["Decorator", "count_option", "options_in_order", "path_option", "threshold_option"]

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def options_in_order(*options: Decorator) -> Decorator:
    """Apply click options in the order given (the order --help lists them in)."""

    def apply(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


def path_option(
    flag: str, dest: str, help: str, *, multiple: bool = False, required: bool = False
) -> Decorator:
    """An option naming a file or folder (a `Path`; repeatable when `multiple`)."""
    return click.option(
        flag,
        dest,
        multiple=multiple,
        required=required,
        type=click.Path(path_type=Path),
        help=help,
    )


def count_option(flag: str, default: int, maximum: int, help: str, minimum: int = 1) -> Decorator:
    """A whole-number option from `minimum` to `maximum`, its default shown in --help."""
    return click.option(
        flag,
        type=click.IntRange(minimum, maximum),
        default=default,
        show_default=True,
        help=help,
    )


SCALE = (-3, 3)  # the graders' score scale (gambit://schemas/graders/grader_output)


def threshold_option(help: str) -> Decorator:
    """`--threshold`: the score at or above which a grade passes (default 0), on the graders'
    -3..+3 scale: a threshold off it would pass everything or nothing without a word."""
    return click.option(
        "--threshold",
        type=click.FloatRange(*SCALE),
        default=0.0,
        show_default=True,
        help=help,
    )
