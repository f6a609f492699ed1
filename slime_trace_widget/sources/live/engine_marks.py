"""Which live samples the engine spans that landed since the last poll belong to, so a live
view flattens them again (their engine slices joined) without waiting for a record.

The decision is the engine join's own (``sources.engine.match.placed_matches``: its
rules, and a reused rid's request placed on the attempt its time overlaps), made against
the frames of the few samples a request can name: those whose W3C trace id is the
request's trace (its client sent ``traceparent``), and those with a generation span
whose ``sglang_request_id`` is the request's rid or shares its part after the last
``_``. A reused rid's request that this placement leaves on no single span marks every
sample its rid names: the skews here come from one poll's requests, the join's from its
whole window, which may place it. The samples are found through an index kept as records
arrive, so a poll costs in proportion to the new spans, not to the rollout. Spans of an
engine trace already placed (a slice exported after its request root) mark that trace's
samples, and a request left unmatched marks the samples its bootstrap room's placed
halves went to (the other PD half, exported in an earlier poll). A mark only makes a
sample flattened again, where the join decides what it gets; one too many costs a
flatten, never a wrong slice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from ...frames.model import TraceFrames
from ...schema import RECORD_ATTRS, w3c_trace_id
from ..engine.match import REQUEST_ID_ATTR, placed_matches
from ..engine.requests import Request, read_requests
from .carriers import NewRecord
from .engine_tail import EngineTail


class EngineMarks:
    """Follows ``directory``'s engine span store for the samples its new spans belong to."""

    def __init__(self, directory: str | Path) -> None:
        self.tail = EngineTail(directory)
        self.tail.skip_present()
        self.forget()

    def forget(self) -> None:
        """Drop the index (the reader moved to another rollout)."""
        self._indexed: set[str] = set()
        self._by_trace: dict[str, str] = {}
        self._by_rid: dict[str, set[str]] = defaultdict(set)
        self._placed: dict[str, set[str]] = defaultdict(set)
        self._rooms: dict[int, set[str]] = defaultdict(set)

    def index(self, taken: list[NewRecord]) -> None:
        """Note what the new records tell of their samples: trace ids and rids."""
        for item in taken:
            trace = item.trace
            if trace.key not in self._indexed:
                self._indexed.add(trace.key)
                if trace.trace_id is not None:
                    self._by_trace.setdefault(w3c_trace_id(trace.trace_id), trace.key)
            attrs = item.record.get(RECORD_ATTRS)
            if not isinstance(attrs, dict):
                continue
            rid = attrs.get(REQUEST_ID_ATTR)
            if isinstance(rid, bool) or not isinstance(rid, (str, int)) or rid == "":
                continue
            for name in _rid_names(str(rid)):
                self._by_rid[name].add(trace.key)

    def marks(self, frames_of: Callable[[list[str]], TraceFrames]) -> dict[str, int]:
        """The samples the spans stored since the last call belong to, with how many of
        those spans each got. ``frames_of(keys)``: the samples' frames, no engine joined,
        sample row i being ``keys[i]``."""
        table = self.tail.read()
        if not len(table):
            return {}
        spans_of = _spans_per_trace(table)
        marked: dict[str, int] = defaultdict(int)
        for trace_id, count in spans_of.items():
            for key in self._placed.get(trace_id, ()):
                marked[key] += count
        requests = read_requests(table)
        owners = self._owners(requests, frames_of)
        for request, owned in zip(requests, owners, strict=True):
            keys = owned or set().union(
                *(self._rooms.get(room, set()) for room in _rooms(request)))
            for found in keys:
                self._placed[request.trace_id].add(found)
                marked[found] = max(marked[found], spans_of.get(request.trace_id, 0))
            if len(owned) == 1:
                for room in _rooms(request):
                    self._rooms[room].update(owned)
        return dict(marked)

    def _owners(self, requests: list[Request], frames_of: Callable[[list[str]], TraceFrames]
                ) -> list[set[str]]:
        """Each request's sample keys: the one the engine join places it in, or every one
        its reused rid names where its time placed it on none (empty: no sample)."""
        candidates: set[str] = set()
        for request in requests:
            if request.trace_id in self._by_trace:
                candidates.add(self._by_trace[request.trace_id])
            if request.whole_rid is not None:
                for name in _rid_names(request.whole_rid):
                    candidates |= self._by_rid.get(name, set())
        if not candidates:
            return [set() for _ in requests]
        keys = sorted(candidates)
        frames = frames_of(keys)
        rows = frames.span_core["sample_row"]
        matches = placed_matches(frames, requests)
        return [{keys[int(rows.at[span])]
                 for span in ([owner] if owner >= 0 else matches.reused.get(number, []))}
                for number, owner in enumerate(matches.owners)]


def _rid_names(rid: str) -> tuple[str, ...]:
    """A rid and its part after the last ``_``: the names the join matches it by."""
    return (rid, rid.rsplit("_", 1)[-1]) if "_" in rid else (rid,)


def _rooms(request: Request) -> list[int]:
    return [room for room in (request.room, request.top_room) if room is not None]


def _spans_per_trace(table: pa.Table) -> dict[str, int]:
    counts = table["trace_id"].value_counts().to_pylist()
    return {str(item["values"]): int(item["counts"]) for item in counts}
