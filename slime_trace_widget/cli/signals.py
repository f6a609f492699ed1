"""Ctrl-C and SIGTERM as a :class:`threading.Event`, for a command that stops on either.

Python runs a signal handler in the main thread between two bytecodes, possibly while
that thread is inside ``stop.wait()`` holding the event's own lock: a handler that calls
``stop.set()`` then waits for a lock its own thread holds, and the process hangs. The
handler here takes no lock: it writes a byte to a pipe, and a thread of its own reads the
byte and sets the event."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(stop: threading.Event,
                    signals: tuple[signal.Signals, ...] = STOPPING_SIGNALS) -> Iterator[None]:
    """Set ``stop`` when one of ``signals`` arrives while the block runs (from the main
    thread, as :func:`signal.signal` requires). The handlers before are put back after,
    so a caller running the command in its own process (a test, a notebook) keeps its
    own, and the pipe and its thread are gone."""
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
    before: dict[signal.Signals, signal.Handlers | int | None] = {}
    try:
        for signum in signals:
            before[signum] = signal.signal(signum, on_signal)
        yield
    finally:
        for signum, handler in before.items():
            if handler is not None:  # None: not installed from Python, nothing to put back
                signal.signal(signum, handler)
        os.close(write_end)
        relay_thread.join()
        os.close(read_end)
