"""Following a live run: the dumps slime adds to a folder, each version of a file
reported once, when it is complete.

slime writes a step's dump when the step ends; a file still being written
(modified within the settle time, or growing) is left for a later look. The
notebook (``TraceTimeline.follow``) and the CLI (``--follow``) load only the
new dumps and add them to what they show (``FollowedFrames``); a dump written
again (a run resumed from a checkpoint repeats its steps) replaces what it showed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from stat import S_ISREG
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
    """New complete dumps matching ``pattern`` in ``folder``, each version of a file
    returned once.

    A dump is returned when it is first complete, and again each time its file is
    replaced or changed after that (another inode, size or mtime): a dump that failed
    half-written is returned once it is whole, and a step's dump that a run resumed
    from a checkpoint writes again is returned as the new dump it is. ``seen`` holds
    the version of each file returned.
    """

    def __init__(self, folder: str | Path, pattern: str = DUMP_PATTERN,
                 settle_seconds: float = SETTLE_SECONDS) -> None:
        self.folder = Path(folder)
        self.pattern = pattern
        self.settle_seconds = settle_seconds
        self.seen: dict[str, FileVersion] = {}

    def new_dumps(self) -> list[str]:
        """Dumps not returned before, or changed since, that are complete now, in name
        order (natural: rollout_2 before rollout_10, as a glob's). A file gone while it
        is looked at (removed, renamed over) is left for a later look."""
        found = []
        for path in self._matching():
            name = str(path)
            try:
                stat = os.stat(name)  # whether it is a file, and which version
                if not S_ISREG(stat.st_mode) or self.seen.get(name) == file_version(stat) \
                        or being_written(name, stat, self.settle_seconds):
                    continue
            except FileNotFoundError:
                continue
            self.seen[name] = file_version(stat)
            found.append(name)
        return found

    def forget(self, name: str) -> None:
        """Offer ``name`` again at the next look, as a dump never returned."""
        self.seen.pop(name, None)

    def skip_present(self) -> None:
        """Take the dumps in the folder now as returned: only later ones, or later
        versions of these, are new."""
        for path in self._matching():
            try:
                self.seen[str(path)] = file_version(os.stat(path))
            except FileNotFoundError:
                continue

    def _matching(self) -> list[Path]:
        return sorted(self.folder.glob(self.pattern), key=lambda p: natural_key(str(p)))


#: What tells one version of a file from another: inode, size, mtime in ns.
FileVersion = tuple[int, int, int]


def file_version(stat: os.stat_result) -> FileVersion:
    """The version of a file whose ``os.stat`` is ``stat`` (see :data:`FileVersion`)."""
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def load_new(names: list[str], load: Callable[[list[str]], TraceFrames],
             report: Callable[[str], None]) -> TraceFrames | None:
    """The frames of the dumps ``names`` (from ``DumpWatcher.new_dumps()``) that ``load``
    reads, or None when none does (then its error goes to ``report``). A dump that
    fails is not returned by the watcher again until its file changes: a dump that was
    only incomplete is added when it is whole."""
    try:
        return load(names)
    except DumpError as exc:  # every one failed
        report(str(exc))
        return None


class FollowedFrames:
    """What a followed folder shows: the frames of each load, kept apart so that a dump
    loaded again (its file rewritten) takes the place of the rows it had.

    ``frames`` is every load's frames, in the order they came; a dump loaded again
    moves to the end. When the dump loaded again came in a load of several, the
    others of that load are loaded again one by one (``load``, which returns None for
    one that fails, having said why), so that a later rewrite of one of them loads
    only it; one whose load fails now is handed to ``retry`` (the watcher offers it
    again at its next look), not lost for good. The loads kept hold no pandas views:
    the frames shown, their combination, have their own.
    """

    def __init__(self, load: Callable[[list[str]], TraceFrames | None],
                 retry: Callable[[str], None]) -> None:
        from ..frames.flatten import build_frames  # the frames' imports (pandas) only here

        self._load, self._retry = load, retry
        self._parts: list[TraceFrames] = []
        self.frames: TraceFrames = build_frames([])

    def add(self, added: TraceFrames) -> list[str]:
        """Show ``added`` after what is shown; the dumps it loads again, whose earlier
        rows it replaces, in its order."""
        from ..frames.model import combine_frames

        shown = {path for part in self._parts for path in part.paths}
        again = [path for path in added.paths if path in shown]
        if not again:
            combined = combine_frames([self.frames, added]) if self._parts else added
            self._parts.append(added)
        else:
            self._parts = [*self._without(set(again)), added]
            combined = combine_frames(self._parts)
        self.frames = combined
        for part in self._parts:
            if part is not combined:
                part.forget_views()
        return again

    def _without(self, again: set[str]) -> list[TraceFrames]:
        """The loads kept, but the rows of the dumps in ``again``: a load holding one of
        them is replaced by a load of each of its other dumps."""
        kept: list[TraceFrames] = []
        for part in self._parts:
            if not again & set(part.paths):
                kept.append(part)
                continue
            for path in part.paths:
                if path in again:
                    continue
                reloaded = self._load([path])
                if reloaded is None:
                    self._retry(path)
                else:
                    kept.append(reloaded)
        return kept


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
