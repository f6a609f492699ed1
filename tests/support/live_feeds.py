"""Live feeds of records handed over in-process, for the live view's tests and benchmarks.

The product's feed is the collector's reader (``view.live_feed.ReaderFeed``); these
stand in for it where a test or benchmark makes the records itself: :class:`RecordQueue`
is a ``view.live.LiveFeed`` of the records ``put`` into it, :class:`RecordTraces` the
frames of records grouped by sample.
"""

from __future__ import annotations

import threading
from typing import Any

from slime_trace_widget.frames.flatten import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.view.live import LiveBatch


def sample_key(record: dict[str, Any]) -> str:
    """The sample a record belongs to: its trace id, else its sample and group ids."""
    trace_id = record.get("trace_id")
    if isinstance(trace_id, str) and trace_id:
        return trace_id
    return f"sample {record.get('sample_id')} group {record.get('group_id')}"


class RecordTraces:
    """Records grouped by sample, in arrival order, flattened on demand, as the
    collector's reader keeps them: the frames of a feed of records handed over
    directly."""

    def __init__(self, rollout_id: int | None = None) -> None:
        self.rollout_id = rollout_id
        self._records: dict[str, list[dict[str, Any]]] = {}

    def add(self, records: list[dict[str, Any]]) -> list[str]:
        """Take records; the keys of the samples they touched, first-touched first."""
        touched: dict[str, None] = {}
        for record in records:
            if isinstance(record, dict):
                key = sample_key(record)
                self._records.setdefault(key, []).append(record)
                touched[key] = None
        return list(touched)

    def frames(self, keys: list[str], now: float | None = None) -> TraceFrames:
        """Frames of the samples ``keys`` (in that order), open spans drawn to ``now``."""
        samples = [self._sample_dict(key) for key in keys]
        return build_frames({"samples": samples, "rollout_id": self.rollout_id,
                             "path": "live"}, open_until=now)

    def _sample_dict(self, key: str) -> dict[str, Any]:
        records = self._records[key]
        first = records[0]
        attempts = [r.get("attempt") for r in records if type(r.get("attempt")) is int]
        carrier = {"version": 1, "trace_id": first.get("trace_id"),
                   "sample_id": first.get("sample_id"), "group_id": first.get("group_id"),
                   "attempt": max(attempts, default=0), "events": records}
        return {"index": first.get("sample_id"), "group_index": first.get("group_id"),
                "rollout_id": self.rollout_id, "trace": carrier}


class RecordQueue:
    """A feed of records handed over in-process (``put``), in arrival order."""

    def __init__(self) -> None:
        self.traces = RecordTraces()
        self.senders: list[dict[str, Any]] = []
        self._waiting: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def put(self, records: list[dict[str, Any]]) -> None:
        with self._lock:
            self._waiting.extend(records)

    def poll(self) -> LiveBatch:
        with self._lock:
            records, self._waiting = self._waiting, []
        return LiveBatch(self.traces.add(records), list(self.senders))

    def frames(self, keys: list[str], now: float) -> TraceFrames:
        return self.traces.frames(keys, now)
