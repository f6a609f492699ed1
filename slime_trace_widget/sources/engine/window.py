"""What frames need from a collector folder: the engine requests and the engine load of
their time window, read from the stores and attached.

Shared by the caller's loading API and the workers that write a run dataset, so a
dump opened directly and a dump converted read their engine traces the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from ...frames.engine_load import aligned
from ...frames.model import TraceFrames
from .beyond import BEYOND_WARNING, MISSING_WARNING, SEARCH_SECONDS
from .join import join_engine
from .load_store import load_engine_load
from .store import REPEATED_COLUMNS, holds_spans, read_spans
from .traces_source import checked_source

#: Engine spans and load are read this far around the frames' time: engine clocks may be
#: off, and the load just before and after a rollout is its context.
MARGIN_SECONDS = 60.0
#: The warning that counts the store files a join skipped, unreadable (named, with
#: why, in ``frames.engine_unreadable``).
UNREADABLE_WARNING = "engine_file_unreadable"


def with_engine_traces(frames: TraceFrames, source: str | Path | Iterable[str | Path],
                       search_beyond: bool = True) -> TraceFrames:
    """``frames`` with the requests of ``source`` (a collector folder, or its files) that
    fall in their time attached (see :func:`slime_trace_widget.sources.engine.join.join_engine`),
    and the load scraped over that time (``[t0, t1]`` widened by :data:`MARGIN_SECONDS`)
    in ``engine_load``, shifted into the dump's clock where an engine's name names a host of
    the join's ``engine_skew`` (see :mod:`slime_trace_widget.frames.engine_load`).
    The spans go to the join as the store's table, so only those it draws are parsed;
    histogram buckets stay in the store (``load_engine_load`` reads them). The spans
    :data:`~.beyond.SEARCH_SECONDS` beyond each side of that time are read only when a
    span waits for a request the window lacks (a host whose clock is further off than the
    margin): they are listed, never attached (:mod:`.beyond`). Without ``search_beyond``
    (the live view, which joins on every refresh) such spans are only counted as missing
    (``warnings["engine_request_missing"]``): a request missing for good would otherwise
    have each refresh read the traces of twenty minutes more.

    A span store that never received a span (the engines exported none: SGLang run
    without tracing) joins nothing and counts nothing missing; one with spans, none of
    them these frames', counts each waiting span missing. A store file that cannot be
    read (damaged, cut short) is skipped, once however many reads met it: counted in
    ``warnings["engine_file_unreadable"]`` and named, with why, in
    ``engine_unreadable``, for the caller to report (the CLI names each on stderr and
    keeps no cache of such a page). A ``source`` that is neither a collector folder nor
    its stores' files raises :class:`~.traces_source.EngineTracesError` naming it
    (FileNotFoundError when it is not there)."""
    source = checked_source(source)
    unreadable: dict[str, str] = {}
    if not holds_spans(source):
        # The engines never exported a span here: no request is missing, none is joined.
        start, end = (0.0, 0.0) if frames.t0 != frames.t0 else spans_read(frames.t0, frames.t1)
        load = load_engine_load(source, start, end, buckets=False, unreadable=unreadable)
        return _skipped(replace(frames, engine_load=load), unreadable)
    if frames.t0 != frames.t0:  # no timed record at all: nothing to attach to or to read
        joined = join_engine(frames, read_spans(source, 0, 0, dictionaries=REPEATED_COLUMNS,
                                                folded=True, unreadable=unreadable))
        load = load_engine_load(source, 0.0, 0.0, buckets=False, unreadable=unreadable)
        return _skipped(replace(joined, engine_load=load), unreadable)
    start, end = spans_read(frames.t0, frames.t1)

    def beyond() -> pa.Table:
        sides = [read_spans(source, int(low * 1e9), int(high * 1e9),
                            dictionaries=REPEATED_COLUMNS, folded=True, unreadable=unreadable)
                 for low, high in ((start - SEARCH_SECONDS, start), (end, end + SEARCH_SECONDS))]
        return pa.concat_tables(sides)

    joined = join_engine(frames, read_spans(source, int(start * 1e9), int(end * 1e9),
                                            dictionaries=REPEATED_COLUMNS, folded=True,
                                            unreadable=unreadable),
                         beyond if search_beyond else None)
    load = aligned(load_engine_load(source, start, end, buckets=False, unreadable=unreadable),
                   joined.engine_skew)
    return _skipped(replace(joined, engine_load=load), unreadable)


def _skipped(frames: TraceFrames, unreadable: dict[str, str]) -> TraceFrames:
    """``frames`` with the store files in ``unreadable`` (path, why) counted and named."""
    if not unreadable:
        return frames
    warnings = Counter(frames.warnings)
    warnings[UNREADABLE_WARNING] += len(unreadable)
    return replace(frames, warnings=warnings,
                   engine_unreadable={**frames.engine_unreadable, **unreadable})


def spans_read(t0: float, t1: float, warnings: Mapping[str, int] | None = None
               ) -> tuple[float, float]:
    """The time (epoch seconds) whose engine spans :func:`with_engine_traces` reads for
    frames of ``[t0, t1]``: their time widened by :data:`MARGIN_SECONDS`, and by
    :data:`~.beyond.SEARCH_SECONDS` more each side when ``warnings`` (those of the frames
    it joined, searching) count spans that waited for a request the window lacked:
    listed beyond it or still missing, they were searched for there. What a dataset
    compares to tell whether a dump's join would read other files now."""
    searched = any((warnings or {}).get(key) for key in (BEYOND_WARNING, MISSING_WARNING))
    reach = MARGIN_SECONDS + (SEARCH_SECONDS if searched else 0.0)
    return t0 - reach, t1 + reach
