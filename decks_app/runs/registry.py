"""The run-kind registry: what each kind of run is asked to do, what it produces, and how.

A `Run` row is generic: the queue (decks_app.runs.queue) claims it, the executor
(decks_app.runs.executor) loads its deck, streams its trace, watches for Stop, sends heartbeats
and records how it ended. What the run *does* belongs to its kind, registered here by the
feature that owns it, the way a third-party package would register one:

    from decks_app.runs.registry import Outcome, Payload, run_kind

    class EchoParams(Payload):
        text: str

    class EchoResult(Payload):
        echoed: str

    @run_kind("echo", params=EchoParams, result=EchoResult)
    async def echo(ctx: RunContext[EchoParams]) -> Outcome:
        return Outcome(EchoResult(echoed=ctx.params.text))

imported from an `AppConfig.ready()` (the simulator's own kinds: decks_app.sessions.kinds,
decks_app.grading.kinds, decks_app.building.kinds, endpoint.kinds). See docs/simulator.md,
"Jobs".

Every kind names a pydantic model for its `params` (what the run was asked to do) and one for
its `result` (what it produced): `Run.save()` validates both against them (and refuses an
unknown kind), and `Run.read_params` / `Run.read_result` give them back typed. Session origins
are registered the same way (`register_origin`), so neither column carries a list of every
feature.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

if TYPE_CHECKING:
    from decks_app.models import Run, Session
    from decks_app.runs.executor import RunContext

# A JSON object as stored in a JSONField or sent to a page ("a dict of JSON values").
type JSONObject = dict[str, Any]


class Payload(BaseModel):
    """A run's params or result: camelCase keys in the database and in JSON, unknown keys
    refused. `to_json()` leaves out the fields never set, so an optional input that was not
    given stays absent (None is a value a deck's schema may accept)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def to_json(self) -> JSONObject:
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class NoParams(Payload):
    """The params of a kind whose run needs nothing beyond its session."""


class TurnParams(Payload):
    """The params of a chat-like kind: the user's message that starts the turn (None: the
    deck speaks first)."""

    message: str | None = None


@dataclass
class Outcome:
    """What a kind's `execute` returns: its result, and the conversation's final state when
    it is not the one last published through `ctx.on_state` (None: keep that one)."""

    result: Payload | None = None
    state: Any = None


class RunFailed(Exception):
    """Raised by a kind's `execute` to fail the run with `error`, keeping a partial `result`
    (a grade that failed keeps the turns it graded)."""

    def __init__(self, error: str, result: Payload | None = None):
        super().__init__(error)
        self.result = result


@dataclass
class Preparation:
    """What a kind's `prepare` hook may change before the run starts (in the database
    thread): the deck file to run (`deck_file`), and data of its own (`data`, handed to
    `execute` as `ctx.prepared`)."""

    run: Run
    session: Session
    deck_file: Path
    data: Any = None


type Execute = Callable[["RunContext[Any]"], Coroutine[Any, Any, Outcome]]


@dataclass(frozen=True)
class RunKind:
    """One kind of run. `execute` is None for a kind that another process runs itself (the
    /v1 endpoint answers its calls in the web process): such runs are never queued."""

    name: str
    params: type[Payload]
    result: type[Payload] | None
    execute: Execute | None
    description: str = ""
    # The conversation is saved after every pass of the deck (a checkpoint written with the
    # trace events), so a crash loses no finished turn; the others save theirs at the end.
    checkpoints: bool = False
    # The run proves it is alive while it runs; a run whose heartbeat stops is taken for dead
    # (marked interrupted) by any worker. A kind that sends none is only ended at start-up.
    heartbeats: bool = True
    # A user's message starts the run (params are `TurnParams`): an interrupted run that had
    # not saved it yet puts it in the conversation.
    user_turn: bool = False
    # The root deck's reply streams into the conversation: an interrupted run keeps what
    # streamed, marked interrupted, with Retry.
    partial_reply: bool = False
    # The run's usage is billed (a replay reports the recorded tokens but costs nothing).
    billed: bool = True
    # Before the run starts, in a thread that may use the database (`Preparation`): the
    # slot's, in a worker.
    prepare: Callable[[Preparation], None] | None = None
    # The provider to run with instead of the workspace's router (a replay answers from its
    # recording); given the prepared job. No model override or resolver applies then.
    provider: Callable[[Preparation], Any] | None = None
    # In the transaction that records the run's end, after the run row is saved.
    finish: Callable[[Run, Session], None] | None = None
    # The session origins this kind's feature creates (registered with the kind).
    origins: tuple[str, ...] = ()

    @property
    def queued(self) -> bool:
        return self.execute is not None


class UnknownRunKind(ValueError):
    pass


class UnknownOrigin(ValueError):
    pass


class InvalidPayload(ValueError):
    pass


_lock = threading.Lock()
_kinds: dict[str, RunKind] = {}
_origins: dict[str, str] = {}


def register(kind: RunKind, *, replace: bool = False) -> RunKind:
    """Register a kind (and its origins). Registering the same name twice is an error unless
    `replace` (a module imported again registers an equal kind: that is allowed)."""
    if not kind.name or len(kind.name) > 16 or not kind.name.replace("-", "_").isidentifier():
        raise ValueError(
            f"run kind name {kind.name!r}: use 1-16 letters, digits, - or _ (Run.kind holds 16)"
        )
    if kind.user_turn and not issubclass(kind.params, TurnParams):
        raise ValueError(f"run kind {kind.name!r}: a user_turn kind's params extend TurnParams")
    with _lock:
        old = _kinds.get(kind.name)
        if old is not None and not replace and not _same(old, kind):
            raise ValueError(
                f"run kind {kind.name!r} is registered already (by {_where(old)}); "
                "pick another name or pass replace=True"
            )
        _kinds[kind.name] = kind
        for origin in kind.origins:
            _origins.setdefault(origin, f"sessions of {kind.name} runs")
    return kind


def _same(a: RunKind, b: RunKind) -> bool:
    # The same function object, or the same function of a module imported twice.
    def key(k: RunKind) -> Any:
        fn = k.execute
        return (k.params.__qualname__, fn and (fn.__module__, fn.__qualname__))

    return key(a) == key(b)


def _where(kind: RunKind) -> str:
    fn = kind.execute
    return f"{fn.__module__}.{fn.__qualname__}" if fn is not None else kind.params.__module__


def unregister(name: str) -> None:
    with _lock:
        _kinds.pop(name, None)


def run_kind(
    name: str,
    *,
    params: type[Payload] = NoParams,
    result: type[Payload] | None = None,
    **flags: Any,
) -> Callable[[Execute], Execute]:
    """Decorator: register the decorated `async def execute(ctx) -> Outcome` as kind `name`
    (flags: see `RunKind`)."""

    def decorate(execute: Execute) -> Execute:
        register(RunKind(name=name, params=params, result=result, execute=execute, **flags))
        return execute

    return decorate


@contextmanager
def registered(kind: RunKind) -> Iterator[RunKind]:
    """Register `kind` for the duration of a block (tests, scripts)."""
    register(kind, replace=True)
    try:
        yield kind
    finally:
        unregister(kind.name)


def get(name: str) -> RunKind:
    kind = _kinds.get(name)
    if kind is None:
        raise UnknownRunKind(
            f"unknown run kind {name!r}: no installed app registers it (registered: "
            f"{', '.join(names()) or 'none'}); register it with @run_kind({name!r}, ...) in a "
            "module your app's AppConfig.ready() imports (docs/simulator.md, Jobs)"
        )
    return kind


def names(**flags: Any) -> list[str]:
    """Registered kind names, optionally only those whose flags match (`heartbeats=False`)."""
    return sorted(
        k.name for k in _kinds.values() if all(getattr(k, f) == v for f, v in flags.items())
    )


def register_origin(name: str, description: str = "") -> None:
    """A session origin of a feature that creates sessions without a kind of its own (an
    imported session)."""
    if not name or len(name) > 16:
        raise ValueError(f"session origin {name!r}: use 1-16 characters (Session.origin holds 16)")
    with _lock:
        _origins[name] = description or _origins.get(name, "")


def origins() -> list[str]:
    return sorted(_origins)


def check_origin(origin: str) -> None:
    if origin not in _origins:
        raise UnknownOrigin(
            f"unknown session origin {origin!r}: no installed app registers it (registered: "
            f"{', '.join(origins()) or 'none'}); register it with register_origin({origin!r}) "
            "or a run kind's origins="
        )


# ---------------------------------------------------------------- payloads


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc") or ()) or "(the whole object)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first.get('msg')}{more}"


def _validated(
    kind: RunKind, what: str, model: type[Payload] | None, value: Any, run_id: str
) -> JSONObject | None:
    if isinstance(value, Payload):
        if model is None or not isinstance(value, model):
            expected = model.__name__ if model else "no result"
            raise InvalidPayload(
                f"run {run_id}: a {kind.name!r} run's {what} is {expected}, "
                f"not {type(value).__name__}"
            )
        return value.to_json()
    if value is None and what == "result":
        return None
    if model is None:
        raise InvalidPayload(f"run {run_id}: a {kind.name!r} run has no {what}")
    try:
        model.model_validate(value if value is not None else {})
    except ValidationError as exc:
        raise InvalidPayload(
            f"run {run_id}: the {what} of a {kind.name!r} run are not a valid "
            f"{model.__name__}: {_problem(exc)}"
        ) from None
    return value if value is not None else {}


def check_run(run: Run) -> None:
    """Validate a run about to be saved: a registered kind, params and result of its models
    (a `Payload` given instead of a dict is stored as its JSON)."""
    kind = get(run.kind)
    if not kind.queued and run.status == "queued":
        raise InvalidPayload(
            f"run kind {kind.name!r} is not executed by the queue; create its runs running "
            "in the process that executes them"
        )
    run.params = _validated(kind, "params", kind.params, run.params, run.id) or {}
    run.result = _validated(kind, "result", kind.result, run.result, run.id)


def parse_params(run: Run) -> Payload:
    """The run's params as its kind's model (`InvalidPayload` naming the field when they do
    not fit: a row written behind the model's back)."""
    kind = get(run.kind)
    try:
        return kind.params.model_validate(run.params or {})
    except ValidationError as exc:
        raise InvalidPayload(
            f"run {run.id}: the params of a {kind.name!r} run are not a valid "
            f"{kind.params.__name__}: {_problem(exc)}"
        ) from None


def read_params[P: Payload](run: Run, model: type[P]) -> P:
    """The run's params as `model` (its kind's params model)."""
    kind = get(run.kind)
    if not issubclass(kind.params, model):
        raise TypeError(
            f"run {run.id} is a {kind.name!r} run: its params are {kind.params.__name__}, "
            f"not {model.__name__}"
        )
    value = kind.params.model_validate(run.params or {})
    assert isinstance(value, model)
    return value


def read_result[P: Payload](run: Run, model: type[P]) -> P | None:
    """The run's result as `model` (its kind's result model), or None when it has none yet."""
    kind = get(run.kind)
    if kind.result is None or not issubclass(kind.result, model):
        raise TypeError(
            f"run {run.id} is a {kind.name!r} run: its result is "
            f"{kind.result.__name__ if kind.result else 'none'}, not {model.__name__}"
        )
    if run.result is None:
        return None
    value = kind.result.model_validate(run.result)
    assert isinstance(value, model)
    return value
