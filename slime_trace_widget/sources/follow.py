"""Following a live run: the dumps slime adds to a folder, each reported once,
when it is complete.

slime writes a step's dump when the step ends; a file still being written
(modified within the settle time, or growing) is left for a later look. The
notebook (``TraceTimeline.follow``) and the CLI (``--follow``) load only the
new dumps and add them to what they show.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .dumps.errors import DumpError
from .dumps.paths import natural_key

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

#: A dump modified this recently may still be being written (slime saves a step's
#: dump at its end, in one go): it waits for a later look.
SETTLE_SECONDS = 10.0
#: Seconds between looks at the folder.
POLL_SECONDS = 5.0
#: The files of a folder taken for dumps unless a pattern is given.
DUMP_PATTERN = "*.pt"


def being_written(path: str, stat: os.stat_result, settle_seconds: float) -> bool:
    """Whether a dump may still be being written: modified within ``settle_seconds``,
    or growing while we look."""
    if time.time() - stat.st_mtime < settle_seconds:
        return True
    return os.stat(path).st_size != stat.st_size


class DumpWatcher:
    """New complete dumps matching ``pattern`` in ``folder``, each returned once.

    A dump returned is not looked at again, unless its caller says it failed to load
    (:meth:`retry_when_changed`): then it is returned once more when its size or mtime
    has changed since (a dump that was only incomplete and is now whole).
    """

    def __init__(self, folder: str | Path, pattern: str = DUMP_PATTERN,
                 settle_seconds: float = SETTLE_SECONDS) -> None:
        self.folder = Path(folder)
        self.pattern = pattern
        self.settle_seconds = settle_seconds
        self.seen: set[str] = set()
        self._failed_at: dict[str, tuple[int, int]] = {}

    def new_dumps(self) -> list[str]:
        """Dumps not returned before, or changed since they failed, that are complete
        now, in name order (natural: rollout_2 before rollout_10, as a glob's). A file
        gone while it is looked at (removed, renamed over) is left for a later look."""
        found = []
        for path in sorted(self.folder.glob(self.pattern), key=lambda p: natural_key(str(p))):
            name = str(path)
            try:
                if not path.is_file() or not self._due(name):
                    continue
                complete = not being_written(name, os.stat(name), self.settle_seconds)
            except FileNotFoundError:
                continue
            if complete:
                self.seen.add(name)
                self._failed_at.pop(name, None)
                found.append(name)
        return found

    def retry_when_changed(self, name: str) -> None:
        """``name``, returned by :meth:`new_dumps`, failed to load: return it again once
        its size or mtime differ from now (never while they stay the same)."""
        try:
            self._failed_at[name] = _size_and_mtime(name)
        except OSError:  # gone: a file of that name is new again when it appears
            self._failed_at[name] = (-1, -1)

    def _due(self, name: str) -> bool:
        """Whether ``name`` is to be looked at: never returned, or changed since it failed."""
        if name not in self.seen:
            return True
        failed_at = self._failed_at.get(name)
        return failed_at is not None and _size_and_mtime(name) != failed_at


def load_new(watcher: DumpWatcher, names: list[str],
             load: Callable[[list[str]], TraceFrames],
             report: Callable[[str], None]) -> TraceFrames | None:
    """The frames of the dumps ``names`` (from ``watcher.new_dumps()``) that ``load``
    reads, or None when none does (then its error goes to ``report``). Each dump that
    fails is handed back to ``watcher``, which offers it again once it changes: a dump
    that was only incomplete is added when it is whole."""
    try:
        added = load(names)
    except DumpError as exc:  # every one failed
        report(str(exc))
        failed, added = list(names), None
    else:
        failed = [name for name, _ in added.failures]
    for name in failed:
        watcher.retry_when_changed(name)
    return added


def _size_and_mtime(name: str) -> tuple[int, int]:
    stat = os.stat(name)
    return stat.st_size, stat.st_mtime_ns


class Poller:
    """Calls ``look`` every ``interval`` seconds on a daemon thread until stopped.

    An exception in ``look`` is handed to ``report`` and the polling goes on: a
    dump that cannot be read must not end the following. ``pause`` ends the thread
    without ending the following, ``resume`` starts a new one (a widget no view
    shows any more stops reading); two looks never run at once, so a thread started
    while the last one finishes its look waits for it.
    """

    def __init__(self, look: Callable[[], None], report: Callable[[BaseException], None],
                 interval: float = POLL_SECONDS) -> None:
        self._look, self._report, self.interval = look, report, interval
        self._looking = threading.Lock()
        #: Held while the following is stopped, paused or resumed, so that a resume
        #: (from a look, say) can never start a thread after a stop.
        self._switching = threading.Lock()
        self._stopped = False
        self._halt = threading.Event()
        self._thread = self._started(self._halt)

    def _started(self, halt: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self._run, args=(halt,), name="slime-trace-follow",
                                  daemon=True)
        thread.start()
        return thread

    def _run(self, halt: threading.Event) -> None:
        while not halt.wait(self.interval):
            with self._looking:
                if halt.is_set():  # paused or stopped while waiting for the last look
                    return
                try:
                    self._look()
                except Exception as exc:  # reported, and the next look tries again
                    self._report(exc)

    def stop(self, wait: bool = True) -> None:
        """Stop polling for good; ``wait`` for a look in progress (a dump being loaded) to
        end."""
        with self._switching:
            self._stopped = True
        self.pause(wait)

    def pause(self, wait: bool = False) -> None:
        """Stop polling until :meth:`resume`; ``wait`` as for :meth:`stop`."""
        with self._switching:
            self._halt.set()
            thread = self._thread
        # joined outside the lock: the thread may be resuming (waiting for it) itself
        if wait and threading.current_thread() is not thread:
            thread.join(timeout=30)

    def resume(self) -> None:
        """Poll again after :meth:`pause`; nothing once stopped, or while polling."""
        with self._switching:
            if self._stopped or not self._halt.is_set():
                return
            self._halt = threading.Event()
            self._thread = self._started(self._halt)

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._halt.is_set()
