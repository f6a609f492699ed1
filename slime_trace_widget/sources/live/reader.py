"""``LiveReader``: follows a collector folder, each poll reading only what arrived since
the last one and saying what changed (:class:`LiveDelta`), so a live view sends only that.

The first poll reads the rollout as :func:`~.load.load_live` does; later polls read on
from where the last one stopped in each store file (``sources.live.read.Tail``), and
in the engine span store beside it: a sample whose engine requests landed since the
last poll is in the delta too (``engine``), to be flattened again with them, even when
it has no new record (``sources.live.engine_marks``). A
reader following the latest rollout (``rollout=None``) moves on when another rollout
becomes the latest (``read.LatestRollout``: a newer one, or a lower id sent by new
processes after training resumed from a checkpoint): it reads that rollout again as
the first poll does, so the delta has ``rollout_changed`` and holds the new rollout's
records from its first, and the view starts over from it.

A poll reads and checks every new row before it changes what the reader keeps, and
taking them in cannot fail: a record it cannot read is counted
(``live_unreadable_record``) and never costs the rest of the poll. A damaged store file
is skipped and named in ``health.unreadable`` (a reader never raises for one: the files
still to come may be whole).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...frames.live_health import HealthTracker, LiveHealth
from ...frames.model import TraceFrames
from ...values import clean_text, short_text
from .carriers import LiveCarriers, NewRecord, read_rows
from .engine_marks import EngineMarks
from .frames_of import live_frames
from .load import frames_of, take_in
from .read import LatestRollout, Tail, select, store_folder
from .spans import SpanChanges, SpanTracker
from .store import UNKNOWN_ROLLOUT, trace_records

SAMPLE_COLUMNS = ["key", "trace_id", "sample_id", "group_id", "rollout_id", "first_ts",
                  "last_ts", "last_received", "n_records", "n_open", "new"]
OPENED_COLUMNS = ["key", "span_id", "parent_span_id", "name", "start", "attempt"]
CLOSED_COLUMNS = ["key", "span_id", "name", "start", "end"]
EVENT_COLUMNS = ["key", "name", "ts", "parent_span_id", "attempt"]
OPEN_COLUMNS = ["key", "span_id", "name", "start", "parent_span_id", "last_record"]
ENGINE_COLUMNS = ["key", "spans"]


@dataclass
class LiveDelta:
    """What one poll found. ``key`` is a trace's wire id (32 hex digits), the same in every
    table and across polls; ``trace_id`` is the trace id as recorded. Times are epoch
    seconds.

    * ``samples``: the traces that are new, got records (``new`` for the former) or got
      engine spans, with their first and last record times, the collector's time of
      their last record, their record count and how many of their spans are open;
    * ``engine``: the traces engine spans stored since the last poll belong to (as the
      engine join matches them), with how many of those spans;
    * ``opened`` / ``closed``: spans started / ended by this poll's records (a span may
      be in both); ``events``: instant events recorded;
    * ``open_spans``: every span open now, with its sample's last record time (a sample
      whose open span has had no record for long is stalled);
    * ``health``: loss and silence per sender, receiver restarts.
    """

    rollout: int
    rollout_changed: bool
    records: int
    samples: pd.DataFrame
    opened: pd.DataFrame
    closed: pd.DataFrame
    events: pd.DataFrame
    open_spans: pd.DataFrame
    health: LiveHealth
    now: float
    engine: pd.DataFrame

    @property
    def empty(self) -> bool:
        return not self.records and not self.rollout_changed and self.engine.empty


class LiveReader:
    """Follows the live store of ``directory`` (a ``slime-trace-viewer collect`` folder):
    the latest rollout, or ``rollout`` when given."""

    def __init__(self, directory: str | Path, rollout: int | None = None, *,
                 engine_traces: bool = True) -> None:
        self.directory = Path(directory)
        self.follow_latest = rollout is None
        self.rollout = UNKNOWN_ROLLOUT if rollout is None else int(rollout)
        self.engine_traces = engine_traces
        self._tail: Tail | None = None
        self._health = HealthTracker()
        self._carriers = LiveCarriers()
        self._spans = SpanTracker()
        self._engine: EngineMarks | None = None
        self._latest = LatestRollout()  # what "the latest rollout" is, as rows arrive

    def poll(self, now: float | None = None) -> LiveDelta:
        """Read what arrived since the last poll (the rollout so far, the first time and
        when the reader moves on to another rollout).

        A poll that fails once it has taken rows in leaves the reader to read the
        rollout so far again on the next one: going on from where it stopped would
        leave out, for good, what the failed poll took in and never showed."""
        try:
            return self._poll(time.time() if now is None else float(now))
        except Exception:
            self._tail = None
            raise

    def _poll(self, now: float) -> LiveDelta:
        if self._tail is None:
            try:
                store_folder(self.directory)
            except FileNotFoundError:
                return self._delta([], SpanChanges(), False, now, {})  # no collector yet
            return self._start(now)
        table, ends = self._tail.read_ahead()
        if self.follow_latest and self._latest.see(table) not in (None, self.rollout):
            return self._start(now, self._latest.rollout)
        read = read_rows(table, self._chosen(table))
        self._health.skipped(self._tail.unreadable)
        fresh = self._health.observe(table)  # taking the rows in cannot fail from here
        self._tail.go_on(ends)
        taken = self._carriers.take(read, fresh)
        changes = self._spans.take(taken)
        return self._delta(taken, changes, False, now, self._engine_marks(taken, now))

    def _start(self, now: float, rollout: int | None = None) -> LiveDelta:
        """Read the rollout so far (``rollout``, else the latest or the one asked for) as
        :func:`~.load.load_live` does, and follow it from there on."""
        if rollout is None and not self.follow_latest:
            rollout = self.rollout
        selection = select(self.directory, rollout, latest=self._latest)
        engine = self._engine
        if engine is None and self.engine_traces:  # what is stored now joins as samples build
            engine = EngineMarks(self.directory)
        intake = take_in(selection)
        spans = SpanTracker()
        changes = spans.take(intake.taken)
        tail = Tail(self.directory)
        tail.start_after(selection.extent)
        if engine is not None:
            engine.forget()
        self._tail, self._spans = tail, spans
        self._health, self._carriers = intake.health, intake.carriers
        self._engine, self.rollout = engine, selection.rollout
        return self._delta(intake.taken, changes, True, now,
                           self._engine_marks(intake.taken, now))

    def frames(self, now: float | None = None, keys: list[str] | None = None) -> TraceFrames:
        """Frames of everything read so far (or of the traces ``keys``), as
        :func:`~.load.load_live` gives them, open spans drawn to ``now``."""
        now = time.time() if now is None else float(now)
        return frames_of(self._carriers, self.rollout, self.directory, now,
                         self._health.health(now), keys, self.engine_traces)

    def _engine_marks(self, taken: list[NewRecord], now: float) -> dict[str, int]:
        """The samples engine spans stored since the last poll belong to."""
        if self._engine is None:
            return {}
        self._engine.index(taken)
        health = self._health.health(now)
        return self._engine.marks(lambda keys: live_frames(
            self._carriers, self.rollout, self.directory, now, health, keys, engine=False))

    def _chosen(self, table: pa.Table) -> np.ndarray:
        records = trace_records(table)
        if not (self.follow_latest and self.rollout == UNKNOWN_ROLLOUT):
            records = pc.and_(records, pc.equal(table["rollout_id"], self.rollout))
        return records.to_numpy(zero_copy_only=False)

    def _delta(self, taken: list[NewRecord], changes: SpanChanges, changed: bool,
               now: float, engine: dict[str, int]) -> LiveDelta:
        traces = {item.trace.key: item.trace for item in taken}
        for key in engine:
            traces.setdefault(key, self._carriers.traces[key])
        taken_per_trace = Counter(item.trace.key for item in taken)
        open_now = self._spans.open_spans()
        open_count: dict[str, int] = {}
        for span in open_now:
            open_count[span.key] = open_count.get(span.key, 0) + 1
        samples = [(key, _text(trace.trace_id), _text(trace.sample_id),
                    _text(trace.group_id), None if trace.rollout_id < 0 else trace.rollout_id,
                    trace.first_ts, trace.last_ts, trace.last_received, trace.count,
                    open_count.get(key, 0), trace.count == taken_per_trace[key])
                   for key, trace in traces.items()]
        last = {key: trace.last_ts for key, trace in self._carriers.traces.items()}
        return LiveDelta(
            rollout=self.rollout, rollout_changed=changed, records=len(taken),
            samples=pd.DataFrame(samples, columns=SAMPLE_COLUMNS),
            opened=pd.DataFrame(changes.opened, columns=OPENED_COLUMNS),
            closed=pd.DataFrame(changes.closed, columns=CLOSED_COLUMNS),
            events=pd.DataFrame(changes.events, columns=EVENT_COLUMNS),
            open_spans=pd.DataFrame([(s.key, s.span_id, s.name, s.start, s.parent_span_id,
                                      last.get(s.key)) for s in open_now],
                                    columns=OPEN_COLUMNS),
            health=self._health.health(now), now=now,
            engine=pd.DataFrame(list(engine.items()), columns=ENGINE_COLUMNS))


def _text(value: object) -> str | None:
    return None if value is None else clean_text(short_text(value))
