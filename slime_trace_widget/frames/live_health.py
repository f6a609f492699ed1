"""What was lost, per sending process: the loss accounting of the live stream.

Every sender numbers its records 1, 2, 3... as they are recorded, dropped ones
included, and says in its heartbeats (and on the last record of each batch) how many
it dropped so far. So per sender (``host:pid``, told apart by its start time):

* ``missing``: sequence numbers never received, between the first one read and the
  highest one the sender announced (a record's, or a heartbeat's last assigned
  number): records dropped at the sender, lost in transit, or refused while the
  receiver was down;
* ``dropped``: records the sender says it dropped since the first number read: what it
  last said, less what it had said before that number (its first word read, less the
  numbers missing between the first read and that word: those are drops within the
  request the first number came in, which reaches the receiver whole);
* ``silent``: nothing heard for :data:`SILENT_SECONDS` (a heartbeat comes at least
  every 2 s while it is alive) and no ``close`` record: the process may be dead;
* records received more than once (a batch sent again after an answer was lost) count
  once: :meth:`HealthTracker.observe` tells which rows are new.

Health is a rollout's: the senders of rollout N are the processes with a row of it (a
record, heartbeat or close naming N; every row counts in their numbers, whatever rollout
it names, because a sender numbers its records across rollouts). A process that sent
nothing to N is none of N's business, however it ended, with one exception worth a
notice (``absent``): one last heard in an earlier rollout that never closed and is silent
now, a process the rollout may still expect, dead.

Receiver restarts come from the collector's own rows: each ``receiver_start`` after
earlier rows is a gap from the last row received before it (or the ``receiver_stop``
of a clean stop) to the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd
import pyarrow as pa

from ..schema import (
    LIVE_CLOSE,
    LIVE_HEARTBEAT,
    LIVE_RECEIVER_START,
    LIVE_RECEIVER_STOP,
    RECEIVER_PREFIX,
)

# Besides trace records, this accounting reads a sender's heartbeat and close (its
# counts) and the collector's own start and stop rows (``schema.LIVE_*``), whose
# sender names begin with ``schema.RECEIVER_PREFIX``. The live store writes them.

#: A sender not heard from for this long (and not closed) is flagged silent.
SILENT_SECONDS = 10.0
#: A sender whose records all reach the collector this much later than their times say,
#: or one whose times run ahead of the collector's by this much, is named with it: the
#: live view judges running times and stalls by the collector's clock.
CLOCK_OFF_SECONDS = 5.0


@dataclass
class SenderHealth:
    """One sending process as the receiver saw it (times in epoch seconds)."""

    sender: str            # "<host>:<pid>:<start ns>": unique per process
    process: str           # "host:pid", as the live view names it
    service: str
    records: int           # distinct records received
    missing: int           # sequence numbers never received (see the module)
    dropped: int           # dropped at the sender since the first number read
    queued: int            # waiting in the sender, as it last said
    highest_seq: int
    last_heard: float      # the collector's clock
    silent: bool
    closed: bool
    last_rollout: int      # the rollout its last row named (-1: none did)
    #: The least time, in seconds, from a row's time (the sender's clock) to its arrival
    #: (the collector's): the most its clock can be behind the collector's (a queue that
    #: waited delays every row too); negative, how far at least it runs ahead. NaN
    #: before a row.
    clock_behind: float = float("nan")

    @property
    def clock_off(self) -> bool:
        """Whether its clock is off the collector's by :data:`CLOCK_OFF_SECONDS` or more."""
        return abs(self.clock_behind) >= CLOCK_OFF_SECONDS


@dataclass
class RestartGap:
    """The receiver was down (or stopping) between ``down_after`` and ``up_at`` (epoch
    seconds): records sent meanwhile were refused or retried; ``clean`` when it stopped
    cleanly (``down_after`` is then its stop)."""

    down_after: float
    up_at: float
    clean: bool


@dataclass
class LiveHealth:
    """Per-sender loss and health of a live read of one rollout (``senders``: those with
    a row of it), the receiver's restarts, and the senders that sent it nothing but may
    be missed (``absent``: last heard in an earlier rollout, never closed, silent)."""

    senders: list[SenderHealth] = field(default_factory=list)
    restarts: list[RestartGap] = field(default_factory=list)
    now: float = float("nan")
    absent: list[SenderHealth] = field(default_factory=list)
    #: Store files skipped because they could not be read, ``path: why``: their records
    #: are missing from this read, and no sender's count says so.
    unreadable: list[str] = field(default_factory=list)

    @property
    def missing(self) -> int:
        return sum(sender.missing for sender in self.senders)

    @property
    def dropped(self) -> int:
        return sum(sender.dropped for sender in self.senders)

    @property
    def silent(self) -> list[str]:
        """The processes (``host:pid``) not heard from lately."""
        return [sender.process for sender in self.senders if sender.silent]

    def frame(self) -> pd.DataFrame:
        """One row per sender, the fields of :class:`SenderHealth`."""
        columns = [column.name for column in fields(SenderHealth)]
        return pd.DataFrame([[getattr(s, c) for c in columns] for s in self.senders],
                            columns=columns)

    def summary(self) -> str:
        """One line a live view can show: what was lost and from where."""
        parts = [f"{len(self.senders)} sender(s)"]
        lossy = [s for s in self.senders if s.missing or s.dropped]
        parts += [f"{s.process}: {s.missing} record(s) missing ({s.dropped} dropped at the "
                  "sender)" for s in lossy]
        parts += [f"{process}: silent" for process in self.silent]
        parts += [f"{s.process}: clock {clock_words(s.clock_behind)} the collector's"
                  for s in self.senders if s.clock_off]
        parts += [f"{s.process}: silent since rollout {s.last_rollout}, nothing sent to "
                  "this one" for s in self.absent]
        parts += [f"receiver down {gap.up_at - gap.down_after:.1f} s"
                  for gap in self.restarts]
        parts += [f"unreadable store file skipped: {line}" for line in self.unreadable]
        return "; ".join(parts)


class SeqRanges:
    """A set of sequence numbers as sorted, disjoint ``[lo, hi]`` ranges: a sender's
    numbers arrive nearly in order, so a few ranges hold millions of them."""

    def __init__(self) -> None:
        self.lo = np.empty(0, dtype=np.int64)
        self.hi = np.empty(0, dtype=np.int64)

    def contains(self, seqs: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.lo, seqs, "right") - 1
        return (at >= 0) & (seqs <= self.hi[np.maximum(at, 0)]) if len(self.lo) else \
            np.zeros(len(seqs), dtype=bool)

    def add(self, seqs: np.ndarray) -> None:
        """Add numbers (repeats and numbers already held are fine)."""
        if not len(seqs):
            return
        unique = np.unique(seqs)
        breaks = np.flatnonzero(np.diff(unique) != 1) + 1
        run_lo = unique[np.concatenate([[0], breaks])]
        run_hi = unique[np.concatenate([breaks - 1, [len(unique) - 1]])]
        lo, hi = np.concatenate([self.lo, run_lo]), np.concatenate([self.hi, run_hi])
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], hi[order]
        reach = np.maximum.accumulate(hi)
        heads = np.flatnonzero(np.concatenate([[True], lo[1:] > reach[:-1] + 1]))
        self.lo, self.hi = lo[heads], np.maximum.reduceat(hi, heads)

    @property
    def count(self) -> int:
        return int((self.hi - self.lo + 1).sum())

    @property
    def first(self) -> int:
        return int(self.lo[0]) if len(self.lo) else 0

    def count_to(self, last: int) -> int:
        """How many numbers held are at most ``last``."""
        return int((np.minimum(self.hi, last) - self.lo + 1).clip(min=0).sum())


@dataclass
class _Sender:
    seen: SeqRanges = field(default_factory=SeqRanges)
    service: str = ""
    highest: int = 0
    dropped: int = 0
    #: What the sender had dropped before the first number read (None: not said yet).
    dropped_before: int | None = None
    queued: int = 0
    last_heard_ns: int = 0
    #: The least ``received_ns - ts_ns`` of its rows (None: none yet).
    least_delay_ns: int | None = None
    closed: bool = False
    rollouts: set[int] = field(default_factory=set)
    last_rollout: int = -1


class HealthTracker:
    """Loss accounting kept up to date as rows arrive, in arrival order, for the senders
    of ``rollout`` (None: of every row, as when no rollout id is known at all)."""

    def __init__(self, rollout: int | None = None) -> None:
        self.rollout = rollout
        self._senders: dict[str, _Sender] = {}
        self._restarts: list[RestartGap] = []
        self._last_received_ns = 0
        self._stopped_ns = 0
        self._unreadable: dict[str, str] = {}

    def skipped(self, unreadable: dict[str, str]) -> None:
        """Note store files that could not be read (path: why), whose rows are not here."""
        self._unreadable.update(unreadable)

    def observe(self, table: pa.Table) -> np.ndarray:
        """Take rows in; a mask of the rows that are records seen for the first time (a
        duplicate's row, a heartbeat and the collector's rows are False)."""
        n = len(table)
        fresh = np.zeros(n, dtype=bool)
        if not n:
            return fresh
        senders = table["sender"].to_numpy(zero_copy_only=False)
        kinds = table["record"].to_numpy(zero_copy_only=False)
        seqs = table["seq"].to_numpy()
        received = table["received_ns"].to_numpy()
        dropped = table["dropped"].fill_null(-1).to_numpy()
        queued = table["queued"].fill_null(-1).to_numpy()
        rollouts = table["rollout_id"].to_numpy()
        ours = ~np.char.startswith(senders.astype(str), RECEIVER_PREFIX)
        stamped = table["ts_ns"].to_numpy()
        self._restarts_in(kinds, ours, received, stamped)
        services = table["service"].to_numpy(zero_copy_only=False)
        names, inverse = np.unique(senders, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(names) + 1))
        for number, name in enumerate(names.tolist()):
            rows = order[bounds[number]:bounds[number + 1]]
            if name.startswith(RECEIVER_PREFIX):
                continue
            state = self._senders.setdefault(name, _Sender(service=str(services[rows[0]])))
            kind = kinds[rows]
            marks = (kind == LIVE_HEARTBEAT) | (kind == LIVE_CLOSE)
            # a heartbeat's number is the last one given out, its queued ones included:
            # only those before them are due (sent or counted dropped) by now
            due = np.where(marks, seqs[rows] - np.maximum(queued[rows], 0), seqs[rows])
            state.highest = max(state.highest, int(due.max()))
            state.last_heard_ns = max(state.last_heard_ns, int(received[rows].max()))
            delay = int((received[rows] - stamped[rows]).min())
            state.least_delay_ns = delay if state.least_delay_ns is None else min(
                state.least_delay_ns, delay)
            state.closed = state.closed or bool((kind == LIVE_CLOSE).any())
            named = rollouts[rows]
            state.rollouts.update(np.unique(named).tolist())
            named = named[named >= 0]
            if len(named):
                state.last_rollout = int(named[-1])
            state.dropped = max(state.dropped, int(dropped[rows].max()))
            said = queued[rows][queued[rows] >= 0]
            if len(said):
                state.queued = int(said[-1])
            records = rows[~marks]
            numbers = seqs[records]
            _, first = np.unique(numbers, return_index=True)
            new = np.zeros(len(records), dtype=bool)
            new[first] = True
            new &= ~state.seen.contains(numbers)
            state.seen.add(numbers[new])
            fresh[records[new]] = True
            if state.dropped_before is None:
                state.dropped_before = _dropped_before(state.seen, dropped[rows], due)
        return fresh

    def _restarts_in(self, kinds: np.ndarray, ours: np.ndarray, received: np.ndarray,
                     ts: np.ndarray) -> None:
        markers = np.flatnonzero(~ours)
        if not len(markers):
            self._last_received_ns = max(self._last_received_ns, int(received.max()))
            self._stopped_ns = 0
            return
        heard = np.maximum.accumulate(np.where(ours, received, 0))
        for position in markers.tolist():
            before = int(heard[position - 1]) if position else 0
            if before > self._last_received_ns:
                self._last_received_ns, self._stopped_ns = before, 0
            if kinds[position] == LIVE_RECEIVER_STOP:
                self._stopped_ns = int(ts[position])
            elif kinds[position] == LIVE_RECEIVER_START:
                if self._last_received_ns or self._stopped_ns:
                    down = self._stopped_ns or self._last_received_ns
                    self._restarts.append(RestartGap(down / 1e9, int(ts[position]) / 1e9,
                                                     bool(self._stopped_ns)))
                self._stopped_ns = 0
                self._last_received_ns = int(ts[position])
        tail = ours[markers[-1] + 1:]
        if tail.any():
            self._last_received_ns = max(self._last_received_ns,
                                         int(received[markers[-1] + 1:][tail].max()))
            self._stopped_ns = 0

    def health(self, now: float) -> LiveHealth:
        """The state so far, silence judged at ``now`` (epoch seconds)."""
        senders, absent = [], []
        for name, state in sorted(self._senders.items()):
            # counted from the first number read: none read, none missing
            expected = state.highest - state.seen.first + 1 if state.seen.count else 0
            health = SenderHealth(
                sender=name, process=process_name(name), service=state.service,
                records=state.seen.count, missing=max(expected - state.seen.count, 0),
                dropped=max(state.dropped - (state.dropped_before or 0), 0),
                queued=state.queued, highest_seq=state.highest,
                last_heard=state.last_heard_ns / 1e9,
                silent=not state.closed and now - state.last_heard_ns / 1e9 > SILENT_SECONDS,
                closed=state.closed, last_rollout=state.last_rollout,
                clock_behind=(float("nan") if state.least_delay_ns is None
                              else state.least_delay_ns / 1e9))
            if self.rollout is None or self.rollout in state.rollouts:
                senders.append(health)
            elif health.silent and 0 <= state.last_rollout < self.rollout:
                absent.append(health)
        return LiveHealth(senders, list(self._restarts), now, absent,
                          [f"{path}: {why}" for path, why in self._unreadable.items()])


def _dropped_before(seen: SeqRanges, said: np.ndarray, due: np.ndarray) -> int | None:
    """What a sender had dropped before the first number read, from its first word on
    drops (``said`` >= 0; None: no word yet) at the number ``due``: the word, less the
    numbers missing from the first read up to it (dropped within the request the first
    number came in: a request reaches the receiver whole)."""
    words = np.flatnonzero(said >= 0)
    if not len(words):
        return None
    upto = int(due[words[0]])
    holes = (upto - seen.first + 1) - seen.count_to(upto) if seen.count else 0
    return max(int(said[words[0]]) - max(holes, 0), 0)


def clock_words(behind: float) -> str:
    """How far a clock is off, as the summary and the banner say it: ``up to 2.0 min
    behind`` (the least delay: a queue adds to it) or ``1.5 min ahead of``."""
    seconds = abs(behind)
    amount = f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.1f} s"
    return f"up to {amount} behind" if behind > 0 else f"{amount} ahead of"


def process_name(sender: str) -> str:
    """``host:pid`` of a sender id ``host:pid:start`` (the id itself when it is not one)."""
    head, _, start = sender.rpartition(":")
    return head if head and start.isdigit() else sender
