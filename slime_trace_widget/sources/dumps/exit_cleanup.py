"""What a load must not leave behind when its process exits: the helper processes of
the pool (:mod:`.pool`), busy ones included, and the scratch folders the loads read
the workers' tables from.

A load that runs on a daemon thread (a followed folder's poller, a live view's
hand-over) may still be running when the process exits; Python stops such a thread
where it stands, so no ``finally`` of the load runs. The hook here runs at exit
instead: it ends every helper still running with the job it runs (the helper's
process group: the job's own forks too), waits for them, then removes every scratch
folder still there. From then on no helper starts and no scratch folder is made, and
a load that goes on in another thread raises SystemExit rather than act on what its
ending helpers said: only a daemon thread can still run then (the others were joined
before the hook), and SystemExit ends a thread without a word, as nothing of it is an
error the load could report.

A helper also ends by itself when this process dies without the hook (SIGKILL): in
the middle of a job, it notices that nothing reads the pipe its messages go back on
any more; idle, that its stdin ended (:mod:`.worker`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

__all__ = ["end_helper", "helper_ended", "raise_if_exiting", "scratch_folder",
           "started_helper"]

#: The longest the exit hook waits for the helpers it killed to end: a process killed
#: with SIGKILL ends at once unless stuck in the kernel (a hung network disk), and an
#: exit must not wait on that.
EXIT_WAIT_SECONDS = 10.0
#: The start of a scratch folder's name, in the system's temporary folder.
SCRATCH_PREFIX = "slime-trace-"


class _Leftovers:
    """The helpers and scratch folders of this process, and whether it is exiting."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.helpers: set[subprocess.Popen] = set()
        self.folders: set[str] = set()
        self.exiting = False

    def forget(self) -> None:
        """In a forked copy of this process: the parent's helpers and folders are not
        ours to end or remove when the copy exits."""
        self.lock = threading.Lock()
        self.helpers, self.folders, self.exiting = set(), set(), False


_LEFTOVERS = _Leftovers()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_LEFTOVERS.forget)


def raise_if_exiting() -> None:
    """SystemExit once the exit hook has started (see the module)."""
    if _LEFTOVERS.exiting:
        raise SystemExit("the process is exiting: the load was abandoned")


def started_helper(start: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """The helper process ``start`` starts, recorded so the exit hook ends it;
    SystemExit instead once the hook has started (a helper started then would outlive
    the process)."""
    with _LEFTOVERS.lock:
        raise_if_exiting()
        process = start()
        _LEFTOVERS.helpers.add(process)
    return process


def helper_ended(process: subprocess.Popen) -> None:
    """``process`` was ended and waited for: nothing for the exit hook to do."""
    with _LEFTOVERS.lock:
        _LEFTOVERS.helpers.discard(process)


def end_helper(process: subprocess.Popen) -> None:
    """Send the helper and any job it runs (its whole process group, which the pool
    makes it lead) SIGKILL, without waiting."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except OSError:
        pass  # already gone


@contextmanager
def scratch_folder() -> Iterator[str]:
    """A new folder in the system's temporary folder, removed with what it holds when
    the block ends, or by the exit hook when the process exits first."""
    with _LEFTOVERS.lock:
        raise_if_exiting()
        folder = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
        _LEFTOVERS.folders.add(folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with _LEFTOVERS.lock:
            _LEFTOVERS.folders.discard(folder)


def _clean_up_at_exit() -> None:
    """End every helper still running, busy or idle, then remove the scratch folders
    still there: once the helpers are gone, no job writes into them any more."""
    with _LEFTOVERS.lock:
        _LEFTOVERS.exiting = True
        helpers, folders = list(_LEFTOVERS.helpers), list(_LEFTOVERS.folders)
    for process in helpers:  # each signalled before any is waited for
        end_helper(process)
    deadline = time.monotonic() + EXIT_WAIT_SECONDS
    for process in helpers:
        with suppress(subprocess.TimeoutExpired):  # stuck in the kernel: exit regardless
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


atexit.register(_clean_up_at_exit)
