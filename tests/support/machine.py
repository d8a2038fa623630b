"""What this machine offers the tests: a local service answering on a port, Linux's /proc."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest


def reachable(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port` (PostgreSQL, Redis)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# The tests that plant links to Linux's /proc (an environment file, say) need it to exist.
needs_proc = pytest.mark.skipif(
    not Path("/proc/self/environ").exists(), reason="needs Linux's /proc"
)
