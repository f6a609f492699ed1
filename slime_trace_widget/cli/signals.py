"""How the command stops on a signal: SIGTERM and SIGHUP as Ctrl-C
(:func:`signals_as_ctrl_c`), and, for a command that stops by an event, Ctrl-C, SIGTERM
and SIGHUP as a :class:`threading.Event` (:func:`stop_on_signals`).

A signal the process ignores when the block starts stays ignored (``nohup`` ignores
SIGHUP, a shell's background job SIGINT): the one who started the command chose that.

Python runs a signal handler in the main thread between two bytecodes, possibly while
that thread is inside ``stop.wait()`` holding the event's own lock: a handler that calls
``stop.set()`` then waits for a lock its own thread holds, and the process hangs. The
event's handler takes no lock: it writes a byte to a pipe, and a thread of its own reads
the byte and sets the event."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType

#: SIGTERM (a supervisor, ``kill``, ``timeout``) and SIGHUP (the terminal closing):
#: stops that Ctrl-C's handling serves as well; SIGHUP where the system has it.
NOT_CTRL_C: tuple[signal.Signals, ...] = \
    (signal.SIGTERM, signal.SIGHUP) if hasattr(signal, "SIGHUP") else (signal.SIGTERM,)
STOPPING_SIGNALS = (signal.SIGINT, *NOT_CTRL_C)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread as Ctrl-C raises KeyboardInterrupt;
    ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signum)


@contextmanager
def signals_as_ctrl_c() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`Stopped`, a
    KeyboardInterrupt, so each ``finally`` and ``except KeyboardInterrupt`` that makes
    Ctrl-C a clean stop runs for them too: a load ends its helpers and removes its
    scratch folder, a server says "stopped". Without this their default action ends the
    process where it stands. Only a signal left to its default is taken (another
    handler is the embedding process's own, an ignored one stays ignored), and only
    from the main thread (where :func:`signal.signal` works); the handlers before are
    put back after, before the process's exit hooks run."""
    before: dict[signal.Signals, signal.Handlers | int | None] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in NOT_CTRL_C:
            if signal.getsignal(signum) == signal.SIG_DFL:
                before[signum] = signal.signal(signum, _raise_stopped)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


@contextmanager
def stop_on_signals(stop: threading.Event,
                    signals: tuple[signal.Signals, ...] = STOPPING_SIGNALS) -> Iterator[None]:
    """Set ``stop`` when one of ``signals`` arrives while the block runs (from the main
    thread, as :func:`signal.signal` requires); a signal the process ignores, or whose
    handler was set outside Python, is left as it is. The handlers before are put back
    after, so a caller running the command in its own process (a test, a notebook)
    keeps its own, and the pipe and its thread are gone."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        with suppress(BlockingIOError):  # bytes already waiting: the event is about to be set
            os.write(write_end, b"\0")

    def relay() -> None:
        if os.read(read_end, 1):  # b"": the block is over and the pipe closed
            stop.set()

    relay_thread = threading.Thread(target=relay, name="signal-relay", daemon=True)
    relay_thread.start()
    before: dict[signal.Signals, signal.Handlers | int] = {}
    try:
        for signum in signals:
            # Not over an ignored signal, nor over a handler set outside Python (None),
            # which could not be put back: this handler would outlive its pipe.
            if signal.getsignal(signum) not in (signal.SIG_IGN, None):
                before[signum] = signal.signal(signum, on_signal)
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        os.close(write_end)
        relay_thread.join()
        os.close(read_end)
