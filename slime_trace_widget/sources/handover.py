"""Handing a live view over to the step's dump: the rule the notebook's
``TraceTimeline.live(dumps=...)`` and the page's ``slime-trace-viewer live --dumps``
share (``docs/live-view.md``).

The dumps already in the folder when the live view starts are earlier steps'; the
step's dump is the first new complete one (``DumpWatcher``) that holds a sample
seen live. Its rows are the live rows of the same samples, now with statuses,
rewards and texts. A new dump that cannot be loaded (a partial or foreign file) is
reported once, as ``load_frames`` reports a dump it skips (a ``RuntimeWarning`` naming
the file), and the look goes on to the next.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from ..frames.model import TraceFrames
from .dumps.errors import DumpError
from .follow import SETTLE_SECONDS, DumpWatcher
from .loading import load_frames


def new_dumps_watcher(folder: str | Path, pattern: str = "*.pt",
                      settle_seconds: float = SETTLE_SECONDS) -> DumpWatcher:
    """A watcher of ``folder`` that ignores the dumps already there (earlier steps')."""
    watcher = DumpWatcher(folder, pattern, settle_seconds)
    watcher.seen.update(str(path) for path in Path(folder).glob(pattern))
    return watcher


def step_dump(watcher: DumpWatcher, seen_live: set[str]) -> tuple[str, TraceFrames] | None:
    """The first new complete dump holding a sample whose trace id is in ``seen_live``,
    with its frames; None while there is none. Dumps looked at and not taken are not
    looked at again; one that cannot be loaded is reported once (see the module)."""
    for path in watcher.new_dumps():
        try:
            frames = load_frames([path], progress=False)
        except DumpError as exc:
            warnings.warn(f"skipped {path} while looking for the step's dump: {exc}",
                          RuntimeWarning, stacklevel=2)
            continue
        if seen_live & {str(t) for t in frames.samples["trace_id"].dropna()}:
            return path, frames
    return None
