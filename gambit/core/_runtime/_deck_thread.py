"""Where a compute deck's `run(ctx)` executes: a daemon thread, so deck code can neither block
the run's event loop nor keep the process alive (docs/decks.md, "Trust and limits").

`call_deck_code` hands the call to a thread of this module's pool (a daemon thread, started
when none is idle, reused after) and awaits an asyncio future the thread completes. A sync
`run` is called in the thread; an async `run` (or a sync one returning an awaitable) runs on
a new event loop of that thread, so a busy loop in it blocks that thread, not the run's loop.

When the run stops waiting (its deadline passed, the run was cancelled), the call is stopped:
`PyThreadState_SetAsyncExc` raises `_DeckStopped` in the thread at its next bytecode, which
ends a pure-Python loop (the thread then goes back to the pool). A thread stuck in one C call
(a `time.sleep`, a blocking read) cannot be interrupted until that call returns; it is
abandoned, and being a daemon it does not keep the process from exiting. Code that holds the
interpreter lock for the whole of one C call (a huge integer power, a catastrophic regular
expression) stops every thread, the run's included: nothing short of a separate process
bounds it.

Whatever the deck's code raises is handed back as a value, never raised in the thread's
caller as such: `SystemExit`, `KeyboardInterrupt` or any other `BaseException` of the deck is
an error of the deck (`DeckCodeError`), not an exit or an interrupt of the process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import os
import threading
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from ._common import RunError
from ._limits import _Limits, _with_deadline

# How long an idle pool thread waits for another call before it ends.
IDLE_SECONDS = 60.0


class _DeckStopped(BaseException):
    """Raised inside a deck's thread to stop its code; never seen outside that thread."""


# What the thread hands back: the value returned, or the exception raised (then value is None).
_Outcome = tuple[Any, BaseException | None]

# The _DeckCall this thread is running (see `current_deck_call`).
_current = threading.local()


class _DeckCall:
    """One call of deck code, run by a pool thread, its outcome delivered to `future`.

    `_DeckStopped` is raised in the thread only while deck code runs (`running`): landing in
    this module's own steps, or in the making of an event loop, it would leave them half
    done. A stop asked for outside deck code is noted (`stop_asked`) and honoured when deck
    code would start; one sent as deck code ends is withdrawn before it lands, so it never
    reaches the pool's own code.
    """

    def __init__(
        self,
        function: Callable[[Any], Any],
        argument: Any,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[_Outcome],
        name: str,
    ):
        self.function = function
        self.argument = argument
        self.loop = loop
        self.future = future
        self.name = name
        self.context = contextvars.copy_context()  # as asyncio.to_thread does
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None  # the pool thread, once handed over
        self.running = False  # deck code is running: `stop` may interrupt it
        self.stop_asked = False
        self.stop_sent = False

    def run(self) -> None:
        """In the pool thread: call the deck code and deliver the outcome. Never raises."""
        _current.call = self
        try:
            outcome = self.context.run(self._call)
        except BaseException as exc:  # this module's own step failed (closing the deck's loop)
            outcome = None, exc
        finally:
            _current.call = None
        try:
            self.loop.call_soon_threadsafe(self._deliver, outcome)
        except RuntimeError:
            pass  # the run's loop is closed: the run is over, nobody wants the outcome

    def _call(self) -> _Outcome:
        value: Any = None
        own_loop: asyncio.AbstractEventLoop | None = None
        try:
            value = self._deck_code(self.function, self.argument)
            if inspect.isawaitable(value):
                # An async run (or a sync one returning an awaitable): on a loop of this
                # thread's own, so that its busy loop blocks this thread only.
                own_loop = asyncio.new_event_loop()
                own_loop.set_default_executor(_DAEMON_EXECUTOR)
                value = self._deck_code(_run_on, (own_loop, value))
            return value, None
        except BaseException as exc:  # the deck's, whatever it is: the caller decides
            _close_unstarted(value)
            if isinstance(exc, MemoryError):
                # The deck's frames hold what filled the memory; the run goes on to record
                # the failure (a trace, a state, a handler's thread), which needs some.
                traceback.clear_frames(exc.__traceback__)
            return None, exc
        finally:
            if own_loop is not None:
                # Not interruptible (a stop landing in it would leave the loop half closed):
                # the deck's tasks are cancelled and their handlers run to the end.
                _close_loop(own_loop)

    def _deck_code(self, function: Callable[[Any], Any], argument: Any) -> Any:
        """`function(argument)`, which runs deck code: the only place `stop` interrupts."""
        with self.lock:
            if self.stop_asked:
                raise _DeckStopped
            self.running = True
        try:
            return function(argument)
        finally:
            with self.lock:
                self.running = False
                if self.stop_sent:  # sent but perhaps not landed yet: withdraw it
                    self.stop_sent = False
                    _set_async_exc(self.thread, None)

    def hold_off_stop(self) -> None:
        """Called with `lock` held, before an engine step deck code asked for that must not
        be cut in two (scheduling a child and recording it): a stop asked for is raised now,
        before the step, and one sent but not landed yet is withdrawn."""
        if self.stop_asked:
            if self.stop_sent:
                self.stop_sent = False
                _set_async_exc(self.thread, None)
            raise _DeckStopped

    def _deliver(self, outcome: _Outcome) -> None:
        if not self.future.done():
            self.future.set_result(outcome)

    def stop(self) -> None:
        """Stop the deck code: at its next bytecode if it runs, else before it starts."""
        with self.lock:
            self.stop_asked = True
            if self.running and not self.stop_sent:
                self.stop_sent = True
                _set_async_exc(self.thread, _DeckStopped)


def _set_async_exc(thread: threading.Thread | None, exc: type[BaseException] | None) -> None:
    """Raise `exc` in `thread` at its next bytecode (None withdraws one not yet raised)."""
    import ctypes  # only here: most runs never stop a thread (start-up cost)

    if thread is not None and thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(exc) if exc is not None else None
        )


def _run_on(loop_and_awaitable: tuple[asyncio.AbstractEventLoop, Awaitable[Any]]) -> Any:
    loop, awaitable = loop_and_awaitable
    coroutine = _as_coroutine(awaitable)
    try:
        return loop.run_until_complete(coroutine)
    finally:
        _close_unstarted(coroutine)


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _close_unstarted(value: Any) -> None:
    """Close a coroutine stopped before it started (else: "never awaited" at collection)."""
    if inspect.iscoroutine(value) and inspect.getcoroutinestate(value) == "CORO_CREATED":
        value.close()


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the deck left running on its loop, let it finish, close the loop."""
    try:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


class _DaemonExecutor(concurrent.futures.ThreadPoolExecutor):
    """The default executor of a deck's own event loop: each call in a daemon thread of its
    own, so that a blocking call the deck hands to `asyncio.to_thread` (or `run_in_executor`)
    does not keep the process from exiting once the deck is stopped; the standard executor's
    threads are joined at exit. (asyncio takes only a ThreadPoolExecutor; none of its pool is
    used.)"""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=work, name="gambit-deck executor", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass  # shared by every deck loop, and nothing to wait for: the threads are daemons


_DAEMON_EXECUTOR = _DaemonExecutor()


class _PoolThread:
    """A daemon thread that runs deck calls one after the other until idle for a while.

    A call is handed over in `call`, and `wakeup` (a lock used as a signal: held while
    there is nothing to do) is released to start it."""

    def __init__(self, pool: _Pool):
        self.pool = pool
        self.call: _DeckCall | None = None
        self.wakeup = threading.Lock()
        self.wakeup.acquire()
        self.thread = threading.Thread(target=self._main, name="gambit-deck (idle)", daemon=True)

    def hand(self, call: _DeckCall) -> None:
        call.thread = self.thread
        self.call = call
        self.wakeup.release()

    def _main(self) -> None:
        while True:
            if not self.wakeup.acquire(timeout=IDLE_SECONDS):
                if self.pool.retire(self):
                    return
                continue  # handed a call just now: `wakeup` is about to be released
            call, self.call = self.call, None
            assert call is not None
            self.thread.name = f"gambit-deck {call.name}"
            call.run()
            self.thread.name = "gambit-deck (idle)"
            self.pool.park(self)


class _Pool:
    """The daemon threads deck code runs in: an idle one takes a call, else a new one starts.
    A thread stuck in deck code is simply not idle; nothing waits for it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_PoolThread] = []

    def submit(self, call: _DeckCall) -> None:
        with self.lock:
            worker = self.idle.pop() if self.idle else None
        if worker is None:
            worker = _PoolThread(self)
            worker.thread.start()  # RuntimeError when no thread can start (memory)
        worker.hand(call)

    def park(self, worker: _PoolThread) -> None:
        with self.lock:
            self.idle.append(worker)

    def retire(self, worker: _PoolThread) -> bool:
        """Take an idle thread out of the pool; False if it was handed a call meanwhile."""
        with self.lock:
            if worker in self.idle:
                self.idle.remove(worker)
                return True
            return False

    def forget(self) -> None:
        """After a fork: the parent's threads do not exist in the child."""
        self.lock = threading.Lock()
        self.idle = []


_pool = _Pool()
os.register_at_fork(after_in_child=_pool.forget)


def current_deck_call() -> _DeckCall | None:
    """The deck call this thread is running, if any (deck code calling the engine back)."""
    call: _DeckCall | None = getattr(_current, "call", None)
    return call


async def call_deck_code(
    function: Callable[[Any], Any],
    argument: Any,
    *,
    limits: _Limits,
    deck_path: str,
    on_abandon: Callable[[], None],
) -> _Outcome:
    """Call `function(argument)` in a pool thread under the run's deadline and return its
    outcome. When the wait ends early (deadline, cancellation), the call is stopped, then
    `on_abandon` cancels what the deck's code waits for on the run's loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_Outcome] = loop.create_future()
    call = _DeckCall(function, argument, loop, future, deck_path)
    try:
        _pool.submit(call)
    except RuntimeError as exc:  # no memory or no thread left for the deck to run in
        raise RunError(
            f"{deck_path}: could not start a thread to run it in: {exc}",
            code="deck_failed",
            deck_path=deck_path,
        ) from None
    try:
        return await _with_deadline(future, limits, deck_path)
    except BaseException:
        call.stop()  # first: from here the deck code spawns nothing more (hold_off_stop)
        on_abandon()
        raise
