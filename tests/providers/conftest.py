from __future__ import annotations

from collections.abc import Iterator

import pytest

from gambit.providers.openresponses import forget_chat_only_base_urls


@pytest.fixture(autouse=True)
def _fresh_endpoint_memory() -> Iterator[None]:
    """The chat-only base URL memory is per process: isolate the tests from each other."""
    forget_chat_only_base_urls()
    yield
    forget_chat_only_base_urls()
