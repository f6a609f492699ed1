"""Handing a live view over to the step's dump: the rule the notebook's
``TraceTimeline.live(dumps=...)`` and the page's ``slime-trace-viewer live --dumps``
share (``docs/live-view.md``).

The dumps already in the folder when the live view starts are earlier steps'; the
step's dump is the first new complete one (``DumpWatcher``) that holds a sample
seen live. Its rows are the live rows of the same samples, now with statuses,
rewards and texts, and with what the live view read from its collector folder (when
that folder has an engine store), joined as for any dump: the engine slices shown live
stay, the engine load is attached (also when the engines export no span) and a request
beyond the window is searched for. A new dump that cannot be loaded (a partial or foreign file) is
reported once, as ``load_frames`` reports a dump it skips (a ``RuntimeWarning`` naming
the file), and the look goes on to the next. Samples seen live that the dump does not
hold are counted in its ``frames.warnings`` (:data:`LEFT_OUT_WARNING`), which the view of
the dump shows with the loader's.
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import replace
from pathlib import Path

from ..frames.model import TraceFrames
from .dumps.errors import DumpError
from .engine.window import with_engine_traces
from .follow import DUMP_PATTERN, SETTLE_SECONDS, DumpWatcher
from .live.frames_of import has_engine_stores
from .loading import load_frames

#: ``frames.warnings`` key of the step's dump: samples seen live that it does not hold.
LEFT_OUT_WARNING = "live_samples_not_in_dump"


def new_dumps_watcher(folder: str | Path, pattern: str = DUMP_PATTERN,
                      settle_seconds: float = SETTLE_SECONDS) -> DumpWatcher:
    """A watcher of ``folder`` that ignores the dumps already there (earlier steps'),
    as they are now: one of them written again is the step's (a run resumed from a
    checkpoint repeats its steps)."""
    watcher = DumpWatcher(folder, pattern, settle_seconds)
    watcher.skip_present()
    return watcher


def step_dump(watcher: DumpWatcher, seen_live: set[str],
              engine_traces: str | Path | None = None) -> tuple[str, TraceFrames] | None:
    """The first new complete dump holding a sample whose trace id is in ``seen_live``,
    with its frames, joined with the engine traces of ``engine_traces`` (the live
    view's collector folder) when it has them; None while there is none. Dumps looked
    at and not taken are not looked at again until their files change; one that cannot
    be loaded is reported once (see the module)."""
    for path in watcher.new_dumps():
        try:
            frames = load_frames([path], progress=False)
        except DumpError as exc:
            warnings.warn(f"skipped {path} while looking for the step's dump: {exc}",
                          RuntimeWarning, stacklevel=2)
            continue
        held = {str(t) for t in frames.samples["trace_id"].dropna()}
        if seen_live & held:
            if engine_traces is not None and has_engine_stores(engine_traces):
                frames = with_engine_traces(frames, engine_traces)
            return path, _count_left_out(frames, len(seen_live - held))
    return None


def _count_left_out(frames: TraceFrames, left_out: int) -> TraceFrames:
    """``frames`` with :data:`LEFT_OUT_WARNING` counting the samples seen live that the
    dump does not hold (slime filtered or dropped them; a hung sample may be one): the
    view that shows the dump says so, instead of losing them without a word."""
    if not left_out:
        return frames
    counts = Counter(frames.warnings)
    counts[LEFT_OUT_WARNING] += left_out
    return replace(frames, warnings=counts)
