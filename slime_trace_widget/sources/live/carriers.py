"""Live records back into trace carriers, the form a dump holds, so that live frames are
built by the very code that builds a dump's (``frames.build``).

A record's body is the record as its carrier holds it (JSON). Records are grouped by
trace id; within a trace a sender's records keep its numbering (the order they were
recorded in, whatever order they arrived in), and the records of several senders (a
trace continued in another process) are merged by time. A record that cannot be read
(a body that is not a JSON object, or a time that is not a number the frames keep) is
skipped and counted (``live_unreadable_record``). An end sent again (``span_end_resent``:
attributes were added to it after it was sent) takes the place of the end it updates, the
latest sending winning, so a trace never holds a span's end twice; each trace indexes its
ends by sender and span id, so finding that end does not scan the trace. An end sent
again whose end was not taken (dropped at the sender, so counted by the loss accounting,
or still in transit) is the span's end itself, as the sender's carrier holds it: it
stands among its sender's records at its time (where the lost end was), and an end that
arrives after its sending again takes the stand-in's place in the numbering, keeping the
later attributes. One of a trace not taken under this rollout (sent again under the next
rollout's id) is left out and counted (``live_resent_end_without_end``).

Taking rows in has two steps: :func:`read_rows` reads and checks them, changing nothing,
and :meth:`LiveCarriers.take` adds what was read, which cannot fail; so a reader that
reads everything first never keeps half of a poll.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...schema import (
    CARRIER_ATTEMPT,
    CARRIER_EVENTS,
    CARRIER_GROUP_ID,
    CARRIER_SAMPLE_ID,
    CARRIER_TRACE_ID,
    CARRIER_VERSION,
    LIVE_END_RESENT,
    RECORD_ATTEMPT,
    RECORD_GROUP_ID,
    RECORD_SAMPLE_ID,
    RECORD_SPAN_ID,
    RECORD_TRACE_ID,
    RECORD_TS,
    RECORD_TYPE,
    SAMPLE_TRACE_KEY,
    SPAN_END,
    TRACE_VERSION,
)
from ...tables.carrier import TS_LIMIT
from ...values import short_text

UNREADABLE = "live_unreadable_record"
RESENT_WITHOUT_END = "live_resent_end_without_end"


@dataclass
class LiveTrace:
    """One trace's records so far: per sender, (number, time, record) in arrival order;
    the number is the sender's sequence number, but for an end sent again standing in
    for its end, whose number is half a step after the record it follows
    (:meth:`stand_in`)."""

    key: str
    rollout_id: int
    #: Identity as the first record taken tells it.
    trace_id: object = None
    sample_id: object = None
    group_id: object = None
    by_sender: dict[str, list[tuple[float, float, dict]]] = field(default_factory=dict)
    first_ts: float = float("inf")
    last_ts: float = float("-inf")
    last_received: float = 0.0
    count: int = 0
    #: Per (sender, span id as :func:`_span_key` makes it): the positions of that
    #: sender's ends of the span in ``by_sender``, in arrival order.
    ends: dict[tuple[str, Hashable], list[int]] = field(default_factory=dict)
    #: Per (sender, position of an end): the number of the sending that took its place.
    resent: dict[tuple[str, int], int] = field(default_factory=dict)
    #: (sender, position) of the ends that are a sending again standing in for an end
    #: not taken (:meth:`stand_in`).
    standing_in: set[tuple[str, int]] = field(default_factory=set)

    def records(self) -> list[dict]:
        """The records in recording order (see the module)."""
        lists = [sorted(items, key=lambda item: item[0]) for items in self.by_sender.values()]
        if len(lists) == 1:
            return [record for _, _, record in lists[0]]
        merged = heapq.merge(*lists, key=lambda item: item[1])
        return [record for _, _, record in merged]

    def add(self, sender: str, seq: int, ts: float, record: dict, span_id: object) -> bool:
        """Take ``record``, number ``seq`` of ``sender``, the end of span ``span_id`` (None:
        not an end with a span id, :func:`_ended_span`); False when it is an end whose
        sending again already stands in for it: it then only gives the stand-in its
        place in the numbering (the stand-in's attributes are the later ones)."""
        items = self.by_sender.get(sender)
        if items is None:
            items = self.by_sender[sender] = []
        if span_id is None:
            items.append((seq, ts, record))
            return True
        positions = self.ends.setdefault((sender, _span_key(span_id)), [])
        for position in reversed(positions):
            if ((sender, position) in self.standing_in
                    and self.resent[(sender, position)] > seq):
                self.standing_in.discard((sender, position))
                _, _, latest = items[position]
                items[position] = (seq, ts, latest)
                return False
        positions.append(len(items))
        items.append((seq, ts, record))
        return True

    def replace_end(self, sender: str, seq: int, record: dict, span_id: object) -> bool:
        """Put ``record``, an end of span ``span_id`` sent again as number ``seq`` by
        ``sender``, in place of the end it updates (that sender's latest end of the same
        span id numbered before it), unless a later sending already took that place.
        False when there is no such end."""
        positions = self.ends.get((sender, _span_key(span_id)))
        if not positions:
            return False
        items = self.by_sender[sender]
        for position in reversed(positions):
            number, ts, end = items[position]
            if number < seq and end.get(RECORD_SPAN_ID) == span_id:  # not only the key
                if self.resent.get((sender, position), 0) < seq:
                    items[position] = (number, ts, record)
                    self.resent[(sender, position)] = seq
                return True
        return False

    def stand_in(self, sender: str, seq: int, ts: float, record: dict,
                 span_id: object) -> None:
        """Take ``record``, an end of span ``span_id`` sent again as number ``seq`` by
        ``sender`` whose end was not taken (:meth:`replace_end` found none), as that end:
        among the sender's records after the latest one recorded at or before its time
        ``ts``, where the lost end stood."""
        items = self.by_sender.get(sender)
        if items is None:
            items = self.by_sender[sender] = []
        # only for a lost end: the scan goes back over the records recorded after it
        before = next((int(number) for number, at, _ in reversed(items)
                       if at <= ts and number < seq), 0)
        position = len(items)
        self.ends.setdefault((sender, _span_key(span_id)), []).append(position)
        items.append((before + 0.5, ts, record))
        self.resent[(sender, position)] = seq
        self.standing_in.add((sender, position))

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


def record_time(record: dict) -> float | None:
    """A record's time in epoch seconds: its ``ts`` when that is a number (int or float)
    strictly inside the frames' ``±TS_LIMIT``; None when it is not one (no number, NaN,
    infinite, or too large for a float): the record is then unreadable."""
    ts = record.get(RECORD_TS)
    if type(ts) is int and -TS_LIMIT < ts < TS_LIMIT:
        return float(ts)
    return ts if type(ts) is float and -TS_LIMIT < ts < TS_LIMIT else None


@dataclass(frozen=True)
class RowRecord:
    """One store row's record, read and checked: the row's position in its table, its
    trace key, sender, number and rollout, the record's time and the record, and whether
    it is an end sent again."""

    row: int
    key: str
    sender: str
    seq: int
    rollout: int
    ts: float
    record: dict
    resent: bool = False


@dataclass(frozen=True)
class RowsRead:
    """Rows of a store table read as records (:func:`read_rows`), not taken in yet:
    those that could be read, and the positions of those that could not."""

    table: pa.Table
    records: list[RowRecord]
    unreadable: np.ndarray


def read_rows(table: pa.Table, chosen: np.ndarray) -> RowsRead:
    """The records of the rows of ``table`` where ``chosen``, read and checked (see the
    module); nothing is changed, and no record's content makes it raise."""
    positions = np.flatnonzero(chosen)
    rows = table.take(pa.array(positions)) if len(positions) < len(table) else table
    records: list[RowRecord] = []
    unreadable: list[int] = []
    columns = [rows[name].to_pylist() for name in ("trace_id", "sender", "seq", "rollout_id",
                                                   "body")]
    resent = pc.fill_null(pc.equal(rows["record"], LIVE_END_RESENT), False).to_pylist()
    for row, key, sender, seq, rollout, body, again in zip(positions.tolist(), *columns,
                                                           resent, strict=True):
        record = _parse(body)
        ts = None if record is None else record_time(record)
        if record is None or ts is None:
            unreadable.append(row)
        else:
            records.append(RowRecord(row, key, sender, seq, rollout, ts, record, again))
    return RowsRead(table, records, np.array(unreadable, dtype=np.int64))


@dataclass
class NewRecord:
    """A record just taken in: its trace, the record dict and its time (epoch seconds);
    ``resent``: an end that changes no span, being sent again (it took the place of the
    end it updates) or arriving after its sending again stood in for it."""

    trace: LiveTrace
    record: dict
    ts: float
    resent: bool = False


class LiveCarriers:
    """Traces by trace id (the wire's hex id), in the order they were first seen."""

    def __init__(self) -> None:
        self.traces: dict[str, LiveTrace] = {}
        self.warnings: Counter[str] = Counter()

    def take(self, read: RowsRead, fresh: np.ndarray) -> list[NewRecord]:
        """Add the records ``read`` holds whose rows are ``fresh`` (seen for the first
        time: a repeat is neither taken nor counted again), and count the unreadable
        ones; the records taken, in arrival order. An end sent again replaces the end it
        updates, or stands in for it when it was not taken (see the module)."""
        taken: list[NewRecord] = []
        rows: list[int] = []
        traces = self.traces
        for item in read.records:
            if not fresh[item.row]:
                continue
            span_id = _ended_span(item.record)
            if item.resent:
                trace = traces.get(item.key)
                if trace is None or span_id is None:
                    self.warnings[RESENT_WITHOUT_END] += 1
                    continue
                if trace.replace_end(item.sender, item.seq, item.record, span_id):
                    taken.append(NewRecord(trace, item.record, item.ts, resent=True))
                else:
                    trace.stand_in(item.sender, item.seq, item.ts, item.record, span_id)
                    taken.append(NewRecord(trace, item.record, item.ts))  # closes the span
                rows.append(item.row)
                continue
            trace = traces.get(item.key)
            if trace is None:
                get = item.record.get
                trace = traces[item.key] = LiveTrace(item.key, item.rollout, get(RECORD_TRACE_ID),
                                                     get(RECORD_SAMPLE_ID), get(RECORD_GROUP_ID))
            new = trace.add(item.sender, item.seq, item.ts, item.record, span_id)
            taken.append(NewRecord(trace, item.record, item.ts, resent=not new))
            rows.append(item.row)
        unreadable = int(fresh[read.unreadable].sum())
        if unreadable:
            self.warnings[UNREADABLE] += unreadable
        if rows:
            self._times(read.table.take(pa.array(rows, pa.int64())))
        return taken

    def _times(self, rows: pa.Table) -> None:
        """Each trace's first and last record time (as the store has it), the collector's
        time of its last, and its record count, over whole columns of the rows taken."""
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
            trace = self.traces[key]
            trace.first_ts = min(trace.first_ts, low / 1e9)
            trace.last_ts = max(trace.last_ts, high / 1e9)
            trace.last_received = max(trace.last_received, at / 1e9)
            trace.count += count

    def samples(self, keys: list[str] | None = None) -> list[dict[str, Any]]:
        """Sample records of the traces ``keys`` (all when None), in first-seen order."""
        chosen = self.traces.values() if keys is None else (self.traces[k] for k in keys)
        return [trace.sample() for trace in chosen]


def _ended_span(record: dict) -> object:
    """The span id a record ends: its ``span_id`` when it is a ``span_end`` that has one;
    None for any other record (which ends no span the index could find)."""
    return record.get(RECORD_SPAN_ID) if record.get(RECORD_TYPE) == SPAN_END else None


def _span_key(span_id: object) -> Hashable:
    """A span id as an index key: itself when it is text or a number (keys then match as
    ``==`` does), else its bounded text (a body's list or object), which never raises."""
    if isinstance(span_id, (str, int, float)):
        return span_id
    return ("text", short_text(span_id))


_DECODER = json.JSONDecoder()


def _parse(body: str) -> dict | None:
    """The record of a body: a JSON object and nothing after it (the receiver sends a
    body without whitespace around it, as the sender writes it)."""
    try:
        record, end = _DECODER.raw_decode(body)
    except (ValueError, RecursionError, TypeError):
        return None
    return record if type(record) is dict and end == len(body) else None
