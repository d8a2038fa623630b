"""One warning line when a dependency (the database, the channel layer) stops answering and
one when it is back, instead of a traceback on every attempt: a 5 s Redis outage used to
write about 40,000 log lines."""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("decks_app.outage")

_lock = threading.Lock()
_down: dict[str, tuple[float, int, str]] = {}  # what -> (since, failures, first error)


def failed(what: str, exc: BaseException) -> bool:
    """Record a failure of `what`; True (and one warning) only for the first of an outage."""
    with _lock:
        current = _down.get(what)
        if current is not None:
            _down[what] = (current[0], current[1] + 1, current[2])
            return False
        reason = (
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        )
        _down[what] = (time.monotonic(), 1, reason)
    log.warning("%s unavailable (%s); retrying quietly until it is back", what, reason.rstrip(": "))
    return True


def recovered(what: str) -> None:
    """`what` answered again: one line with how long it was out, if it was."""
    if what not in _down:  # the common case, without taking the lock
        return
    with _lock:
        current = _down.pop(what, None)
    if current is not None:
        since, failures, _ = current
        log.warning(
            "%s is back after %.1f s (%d failed attempt%s)",
            what,
            time.monotonic() - since,
            failures,
            "" if failures == 1 else "s",
        )


def is_down(what: str) -> bool:
    return what in _down
