"""Recording in a child forked while another thread was binding a sample.

Binding a fresh sample and bumping an attempt hold the carriers' lock; a child
forked while another thread held it gets a lock of its own, so it records
instead of waiting forever for a thread that does not exist in it.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from slime_trace_widget.tracing import bind_trace, trace_event, trace_next_attempt, trace_span

pytestmark = pytest.mark.usefixtures("isolated_context")

#: How long the parent waits for the child before calling it stuck (a guard, not a measure).
CHILD_GUARD_SECONDS = 120.0


class BlockingSample:
    """A sample whose ``index`` blocks: binding it holds the carriers' lock until released."""

    def __init__(self, reading: threading.Event, release: threading.Event) -> None:
        self._reading = reading
        self._release = release
        self.group_index = 0

    @property
    def index(self) -> int:
        self._reading.set()
        self._release.wait()
        return 0


def _record_in_child() -> int:
    """What the child does: bind, span, event and retry on fresh samples; its exit code."""
    sample = {"index": 1, "group_index": 0}
    with trace_span(sample, "in_child"):
        trace_event({"index": 2, "group_index": 0}, "fresh_sample")
        trace_next_attempt(sample)
    names = [record["name"] for record in sample["trace"]["events"]]
    return 0 if names == ["in_child", "attempt_start", "in_child"] else 1


def _wait_for_child(pid: int) -> int | None:
    """The child's exit code, or None when it has not exited within the guard (then killed)."""
    deadline = time.monotonic() + CHILD_GUARD_SECONDS
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_the_carrier_lock_is_held_can_record():
    reading, release = threading.Event(), threading.Event()
    blocked = BlockingSample(reading, release)
    binder = threading.Thread(target=bind_trace, args=(blocked,), daemon=True)
    binder.start()
    try:
        assert reading.wait(CHILD_GUARD_SECONDS)  # the binder is inside the carriers' lock
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _record_in_child()
            finally:
                os._exit(code)
        exit_code = _wait_for_child(pid)
    finally:
        release.set()
        binder.join(CHILD_GUARD_SECONDS)
    assert exit_code == 0, "the child could not record (stuck on the carriers' lock)"
    assert isinstance(blocked.trace, dict)
