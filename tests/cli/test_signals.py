"""Ctrl-C, SIGTERM and SIGHUP set a command's stop event without ever waiting in the
handler; SIGTERM and SIGHUP raise as Ctrl-C does where the command stops by it; a signal
ignored, or handled by the process running the command, is left as it was."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from slime_trace_widget.cli.signals import (
    NOT_CTRL_C,
    Stopped,
    signals_as_ctrl_c,
    stop_on_signals,
)
from tests.support.receiver import start_receiver

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


def test_sigterm_and_sighup_raise_as_ctrl_c_and_the_handlers_are_put_back() -> None:
    before = {signum: signal.getsignal(signum) for signum in NOT_CTRL_C}
    for signum in NOT_CTRL_C:
        with pytest.raises(KeyboardInterrupt) as caught, signals_as_ctrl_c():
            signal.raise_signal(signum)
        assert isinstance(caught.value, Stopped) and caught.value.signum == signum
    assert {signum: signal.getsignal(signum) for signum in NOT_CTRL_C} == before


def test_an_ignored_or_embedders_signal_is_left_as_it_was() -> None:
    """``nohup`` ignores SIGHUP; a process running the command may handle SIGTERM itself."""
    calls: list[int] = []
    before = (signal.signal(signal.SIGHUP, signal.SIG_IGN),
              signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum)))
    try:
        with signals_as_ctrl_c():
            signal.raise_signal(signal.SIGHUP)  # ignored: nothing happens
            signal.raise_signal(signal.SIGTERM)
        assert calls == [signal.SIGTERM]
        with stop_on_signals(threading.Event(), (signal.SIGHUP,)):
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_collect_stops_on_sighup_as_on_sigterm(tmp_path: Path) -> None:
    """The terminal a receiver runs in closing: it writes what is waiting and exits."""
    receiver = start_receiver(tmp_path / "collected")
    try:
        receiver.process.send_signal(signal.SIGHUP)
        out, err = receiver.process.communicate(timeout=HANG_GUARD_SECONDS)
        assert receiver.process.returncode == 0, err
        assert out.startswith("stopped: 0 span(s)")
    finally:
        receiver.kill()
