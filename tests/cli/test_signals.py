"""Ctrl-C and SIGTERM set a command's stop event without ever waiting in the handler."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from slime_trace_widget.cli.signals import stop_on_signals

HANG_GUARD_SECONDS = 120


class RecordedEvent(threading.Event):
    """An event that notes which thread set it and whether its waiter held its lock then.

    ``threading.Event.wait`` holds the event's lock for a few bytecodes; a signal handler
    that sets the event runs in that same thread and would wait for the lock forever. The
    stand-in lock here is held by the main thread while the signal is raised, as that
    thread's ``wait`` may hold the real one."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.setters: list[threading.Thread] = []

    def set(self) -> None:
        self.setters.append(threading.current_thread())
        if self.lock.acquire(timeout=HANG_GUARD_SECONDS):  # the main thread lets go
            self.lock.release()
        super().set()


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_sets_the_event_from_another_thread(signum: signal.Signals) -> None:
    stop = RecordedEvent()
    with stop_on_signals(stop):
        with stop.lock:  # as inside stop.wait(): a handler setting it here would hang
            signal.raise_signal(signum)
        assert stop.wait(HANG_GUARD_SECONDS)
    assert stop.setters and threading.main_thread() not in stop.setters


def test_the_handlers_before_are_put_back_and_nothing_is_left_open() -> None:
    calls: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    try:
        descriptors, threads = open_descriptors(), threading.active_count()
        stop = threading.Event()
        with pytest.raises(RuntimeError, match="inside"), stop_on_signals(stop):
            raise RuntimeError("inside")
        assert not stop.is_set()  # no signal came: the block's end does not set it
        assert open_descriptors() == descriptors and threading.active_count() == threads
        signal.raise_signal(signal.SIGTERM)
        assert calls == [signal.SIGTERM] and not stop.is_set()
    finally:
        signal.signal(signal.SIGTERM, before)


def test_signals_in_a_burst_set_the_event_once_and_do_not_block() -> None:
    """More signals than the pipe holds bytes: the handler drops the ones it need not
    write, and the block ends."""
    stop = threading.Event()
    with stop_on_signals(stop, (signal.SIGUSR1,)):
        for _ in range(70_000):  # past the 64 KiB a Linux pipe holds
            signal.raise_signal(signal.SIGUSR1)
        assert stop.wait(HANG_GUARD_SECONDS)
