"""Offline model providers: scripted replies, built-in demo models, and trace replay.

Nothing here touches the network or reads the environment. Every provider in this package
sets `offline = True`, so callers can label runs that used it. The modules:

- `replies`: the replies as data (`str`, `Stream`, `Call`, `Reply`, `Fail`; `ReplySpec`),
  which the others share and which import nothing of this package.
- `scripted`: `ScriptedProvider`, a first-class fake for tests: queue replies (or a
  callable), run the code under test, assert on `requests` / `records`.
- `demo`: the built-in models `offline/echo` and `offline/demo` (`BUILTIN_MODELS`), which a
  `ScriptedProvider(models=BUILTIN_MODELS)` (or `fallback_models=True`) answers with when
  its queue is empty; the registry hands them to its `offline/` provider.
- `replay`: `ReplayProvider.from_trace(...)` / `.from_state(...)` replays the `model.result`
  events of a recorded trace, per deck path and in order.
- `_base`: what they share (recording, the Open Responses event sequence when streaming,
  aggregation, chat mode, the pause between deltas).

Every name below is importable from `gambit.providers.offline` itself. See
docs/offline-provider.md.
"""

from ._base import RecordedRequest
from .demo import BUILTIN_MODELS, echo_reply
from .replay import RecordedResult, ReplayProvider
from .replies import Call, Fail, Reply, ReplyModel, ReplySpec, Stream, word_chunks
from .scripted import ScriptedProvider

__all__ = [
    "BUILTIN_MODELS",
    "Call",
    "Fail",
    "RecordedRequest",
    "RecordedResult",
    "ReplayProvider",
    "Reply",
    "ReplyModel",
    "ReplySpec",
    "ScriptedProvider",
    "Stream",
    "echo_reply",
    "word_chunks",
]
