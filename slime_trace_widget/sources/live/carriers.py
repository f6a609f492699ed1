"""Live records back into trace carriers, the form a dump holds, so that live frames are
built by the very code that builds a dump's (``frames.build``).

A record's body is the record as its carrier holds it (JSON). Records are grouped by
trace id; within a trace a sender's records keep its numbering (the order they were
recorded in, whatever order they arrived in), and the records of several senders (a
trace continued in another process) are merged by time. A body that is not a JSON
object is skipped and counted (``live_unreadable_record``).
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ...schema import (
    CARRIER_ATTEMPT,
    CARRIER_EVENTS,
    CARRIER_GROUP_ID,
    CARRIER_SAMPLE_ID,
    CARRIER_TRACE_ID,
    CARRIER_VERSION,
    RECORD_ATTEMPT,
    RECORD_GROUP_ID,
    RECORD_SAMPLE_ID,
    RECORD_TRACE_ID,
    SAMPLE_TRACE_KEY,
    TRACE_VERSION,
)

UNREADABLE = "live_unreadable_record"


@dataclass
class LiveTrace:
    """One trace's records so far: per sender, (seq, record) in arrival order."""

    key: str
    rollout_id: int
    #: Identity as the first record taken tells it.
    trace_id: object = None
    sample_id: object = None
    group_id: object = None
    by_sender: dict[str, list[tuple[int, dict]]] = field(default_factory=dict)
    first_ts: float = float("inf")
    last_ts: float = float("-inf")
    last_received: float = 0.0
    count: int = 0

    def records(self) -> list[dict]:
        """The records in recording order (see the module)."""
        lists = [sorted(items, key=lambda item: item[0]) for items in self.by_sender.values()]
        if len(lists) == 1:
            return [record for _, record in lists[0]]
        merged = heapq.merge(*lists, key=lambda item: _ts(item[1]))
        return [record for _, record in merged]

    def carrier(self) -> dict[str, Any]:
        """The trace as a carrier: identity from its first record, the highest attempt."""
        records = self.records()
        head = records[0] if records else {}
        attempts = [r.get(RECORD_ATTEMPT) for r in records
                    if type(r.get(RECORD_ATTEMPT)) is int]
        return {CARRIER_VERSION: TRACE_VERSION,
                CARRIER_TRACE_ID: head.get(RECORD_TRACE_ID, self.key),
                CARRIER_EVENTS: records,
                CARRIER_SAMPLE_ID: head.get(RECORD_SAMPLE_ID),
                CARRIER_GROUP_ID: head.get(RECORD_GROUP_ID),
                CARRIER_ATTEMPT: max(attempts, default=0)}

    def sample(self) -> dict[str, Any]:
        """A sample record holding the carrier, as a dump's samples do."""
        carrier = self.carrier()
        return {SAMPLE_TRACE_KEY: carrier, "index": carrier[CARRIER_SAMPLE_ID],
                "group_index": carrier[CARRIER_GROUP_ID],
                "rollout_id": None if self.rollout_id < 0 else self.rollout_id}


def _ts(record: dict) -> float:
    ts = record.get("ts")
    return float(ts) if type(ts) in (int, float) else float("inf")


@dataclass
class NewRecord:
    """A record just taken in: its trace and the record dict."""

    trace: LiveTrace
    record: dict


class LiveCarriers:
    """Traces by trace id (the wire's hex id), in the order they were first seen."""

    def __init__(self) -> None:
        self.traces: dict[str, LiveTrace] = {}
        self.warnings: Counter[str] = Counter()

    def add(self, table: pa.Table, fresh: np.ndarray) -> list[NewRecord]:
        """Take the rows of ``table`` where ``fresh`` (records seen for the first time);
        the records taken, in arrival order."""
        rows = table.filter(pa.array(fresh)) if not fresh.all() else table
        if not len(rows):
            return []
        taken = []
        traces, warnings = self.traces, self.warnings
        keys = rows["trace_id"].to_pylist()
        columns = [rows[name].to_pylist() for name in ("sender", "seq", "rollout_id", "body")]
        for key, sender, seq, rollout, body in zip(keys, *columns, strict=True):
            record = _parse(body)
            if record is None:
                warnings[UNREADABLE] += 1
                continue
            trace = traces.get(key)
            if trace is None:
                get = record.get
                trace = traces[key] = LiveTrace(key, rollout, get(RECORD_TRACE_ID),
                                                get(RECORD_SAMPLE_ID), get(RECORD_GROUP_ID))
            items = trace.by_sender.get(sender)
            if items is None:
                items = trace.by_sender[sender] = []
            items.append((seq, record))
            taken.append(NewRecord(trace, record))
        self._times(rows)
        return taken

    def _times(self, rows: pa.Table) -> None:
        """Each trace's first and last record time, the collector's time of its last, and
        its record count, over whole columns (a body that did not parse still counts its
        time: the wire carries it)."""
        keys = rows["trace_id"].to_numpy(zero_copy_only=False)
        unique, inverse = np.unique(keys, return_inverse=True)
        ts = rows["ts_ns"].to_numpy()
        received = rows["received_ns"].to_numpy()
        first = np.full(len(unique), np.iinfo(np.int64).max)
        last = np.full(len(unique), np.iinfo(np.int64).min)
        heard = np.zeros(len(unique), dtype=np.int64)
        np.minimum.at(first, inverse, ts)
        np.maximum.at(last, inverse, ts)
        np.maximum.at(heard, inverse, received)
        counts = np.bincount(inverse, minlength=len(unique))
        for key, low, high, at, count in zip(unique.tolist(), first.tolist(), last.tolist(),
                                             heard.tolist(), counts.tolist(), strict=True):
            trace = self.traces.get(key)
            if trace is None:
                continue
            trace.first_ts = min(trace.first_ts, low / 1e9)
            trace.last_ts = max(trace.last_ts, high / 1e9)
            trace.last_received = max(trace.last_received, at / 1e9)
            trace.count += count

    def samples(self, keys: list[str] | None = None) -> list[dict[str, Any]]:
        """Sample records of the traces ``keys`` (all when None), in first-seen order."""
        chosen = self.traces.values() if keys is None else (self.traces[k] for k in keys)
        return [trace.sample() for trace in chosen]


_DECODER = json.JSONDecoder()


def _parse(body: str) -> dict | None:
    """The record of a body: a JSON object and nothing after it (the receiver sends a
    body without whitespace around it, as the sender writes it)."""
    try:
        record, end = _DECODER.raw_decode(body)
    except (ValueError, RecursionError, TypeError):
        return None
    return record if type(record) is dict and end == len(body) else None
