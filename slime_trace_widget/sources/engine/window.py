"""The engine requests that frames need: read their time window from the store, join them.

Shared by the caller's loading API and the workers that write a run dataset, so a
dump opened directly and a dump converted join its engine traces the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ...frames.engine import join_engine
from ...frames.model import TraceFrames
from .store import load_engine_traces

#: Engine spans are read this far around the frames' time: engine clocks may be off.
MARGIN_SECONDS = 60.0


def with_engine_traces(frames: TraceFrames, source: str | Path | Iterable[str | Path]
                       ) -> TraceFrames:
    """``frames`` with the requests of ``source`` (a collector folder, or its files) that
    fall in their time attached (see :func:`slime_trace_widget.frames.engine.join_engine`)."""
    if frames.t0 != frames.t0:  # no timed record at all: nothing to attach to or to read
        return join_engine(frames, load_engine_traces(source, 0.0, 0.0))
    engine = load_engine_traces(source, frames.t0 - MARGIN_SECONDS, frames.t1 + MARGIN_SECONDS)
    return join_engine(frames, engine)
