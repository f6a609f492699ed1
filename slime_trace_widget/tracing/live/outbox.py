"""The bounded queue between recording threads and the thread that sends.

The recording side (:meth:`Outbox.offer`) stamps a sequence number and appends
to a bounded deque under a lock: no I/O, no encoding, no waiting on the sender.
A full queue drops the new record and counts it.

A signal handler may record (a hook noting an abort on SIGTERM): Python runs it in the
thread it interrupts, perhaps inside :meth:`Outbox.offer` with the lock held. The lock
is re-entrant, and a record offered from inside an offer is only set aside, untouched
numbers and all, then numbered after the record it interrupted; no lock is waited for
and no number is given twice.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

#: One record as the recording thread queued it: (seq, observed ns, rollout id, record),
#: the record being a :class:`ResentEnd` when it is an end sent again. A tuple, because
#: building it is on the recording thread's clock.
Queued = tuple[int, int, "int | None", Any]


class ResentEnd:
    """An end record queued again because end attributes were added to it after it was
    written: it goes on the wire as ``span_end_resent`` (docs/live.md), its body the
    record as it is when sent."""

    __slots__ = ("record",)

    def __init__(self, record: Any) -> None:
        self.record = record


@dataclass(frozen=True)
class LiveStats:
    """Counts of one stream. ``seq`` is the last sequence number given out; every record
    numbered so far is sent, dropped or queued, so ``seq == sent + dropped + queued``
    whenever no record is being taken or posted at that very moment."""

    sent: int = 0
    dropped: int = 0
    queued: int = 0
    retries: int = 0
    batches: int = 0
    seq: int = 0
    spans_sent: int = 0
    spans_dropped: int = 0


class Outbox:
    """Records waiting to be sent: at most ``capacity``; sequence numbers and drop counts."""

    __slots__ = ("_capacity", "_interrupting", "_lock", "_offering", "_queue", "_refused",
                 "dropped", "last_seq")

    def __init__(self, capacity: int) -> None:
        self._queue: deque[Queued] = deque()
        self._capacity = capacity
        self._lock = threading.RLock()
        self.last_seq = 0
        self.dropped = 0
        #: The numbers a full queue refused, as ranges [first, last], past the last
        #: number :meth:`dropped_through` was asked about.
        self._refused: deque[list[int]] = deque()
        #: True while an offer numbers and queues; records offered meanwhile (by a
        #: signal handler in the same thread) wait in ``_interrupting``, unnumbered.
        self._offering = False
        self._interrupting: deque[tuple[int, int | None, Any]] = deque()

    def offer(self, record: Any, rollout_id: int | None) -> None:
        """Number ``record`` and queue it, or count it dropped when the queue is full."""
        observed = time.time_ns()
        with self._lock:
            if self._offering:  # a signal handler, inside this thread's offer
                self._interrupting.append((observed, rollout_id, record))
                return
            self._offering = True
            try:
                self._number(observed, rollout_id, record)
                self._number_set_aside()
            finally:
                self._offering = False

    def _catch_up(self) -> None:
        """Number the records set aside after the offer they interrupted last looked
        (the lock held; nothing to do inside an offer, which numbers them itself)."""
        if self._interrupting and not self._offering:
            self._offering = True
            try:
                self._number_set_aside()
            finally:
                self._offering = False

    def _number_set_aside(self) -> None:
        while self._interrupting:
            self._number(*self._interrupting.popleft())

    def _number(self, observed: int, rollout_id: int | None, record: Any) -> None:
        """Number ``record`` and queue it, or count it dropped (the lock held, in an
        offer: a handler's record meanwhile is set aside, so no number is given twice)."""
        seq = self.last_seq = self.last_seq + 1
        if len(self._queue) < self._capacity:
            self._queue.append((seq, observed, rollout_id, record))
        else:
            self.dropped += 1
            refused = self._refused
            if refused and refused[-1][1] == seq - 1:
                refused[-1][1] = seq
            else:
                refused.append([seq, seq])

    def dropped_through(self, seq: int) -> int:
        """The records dropped so far among those numbered up to ``seq``: what a record of
        number ``seq`` says of drops (docs/live.md). A full queue refuses the newest
        records, so the count so far can hold numbers past ``seq``, which a reader would
        take for numbers dropped before it and, once they do not arrive, for records
        lost on the way. Numbers asked about only grow: ranges before are forgotten."""
        with self._lock:
            refused = self._refused
            while refused and refused[0][1] <= seq:
                refused.popleft()
            later = sum(last - max(first, seq + 1) + 1 for first, last in refused)
            return self.dropped - later

    def take(self, limit: int) -> list[Queued]:
        """Up to ``limit`` records, oldest first."""
        taken: list[Queued] = []
        queue = self._queue
        with self._lock:
            self._catch_up()
            while queue and len(taken) < limit:
                taken.append(queue.popleft())
        return taken

    def drop(self, count: int) -> None:
        """Count ``count`` records taken from here as dropped (refused, or out of time)."""
        with self._lock:
            self.dropped += count

    def discard(self) -> None:
        """Count every record still queued as dropped (the stream is closing, out of time)."""
        with self._lock:
            self._catch_up()
            self.dropped += len(self._queue)
            self._queue.clear()

    def stop(self) -> None:
        """Take no more records: those queued and every one offered from now on are
        counted dropped (the thread that sends has stopped)."""
        with self._lock:
            self._catch_up()
            self._capacity = 0
            self.dropped += len(self._queue)
            self._queue.clear()

    def forget_lock(self) -> None:
        """In a forked child: a lock the parent's threads may have held at the fork is
        replaced, so the child can still read the counts."""
        self._lock = threading.RLock()
        self._offering = False

    def counts(self) -> tuple[int, int, int]:
        """(last seq, dropped, queued), read together."""
        with self._lock:
            self._catch_up()
            return self.last_seq, self.dropped, len(self._queue)


