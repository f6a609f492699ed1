"""A live rollout as the widget and the served page show it (``docs/live-view.md``).

:class:`LiveSession` polls a *feed* (the collector's live store through
``sources.live.LiveReader``: ``live_feed.ReaderFeed``; or any object with the same
``poll`` and ``frames``, :class:`LiveFeed`) for the samples that moved, keeps each as a
block of the payload (``live_blocks``) and answers what a view asks: the deltas
since its last one, and an item's details. The widget and the page server poll
it from a background thread; a lock makes the feed's reads take turns.

What was lost travels with every delta (``live.senders``, one entry per process
sending to the rollout shown: records received, missing from its sequence, dropped at
the sender, silent), so a view never shows a picture with holes as if it were whole;
``live.absent`` names apart the processes of an earlier rollout that went silent
without closing and sent this one nothing (maybe missed, not a loss of this rollout).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..frames.model import TraceFrames
from ..sources.follow import DumpWatcher, Poller
from ..sources.handover import step_dump
from .details import event_detail, span_detail
from .live_blocks import LiveBlocks, LiveDelta
from .payload import empty_payload, encode

#: Seconds an open span may go without a record before its sample is flagged stalled.
STALL_AFTER = 60.0


@dataclass
class LiveBatch:
    """What a feed's poll found: the samples that moved (keys the feed's ``frames``
    knows), the health of the rollout's senders, the silent processes of an earlier
    rollout that sent it nothing (``absent``), and whether the feed started over on
    another rollout (a newer one, or a run resumed from a checkpoint; the view then
    starts over too)."""

    keys: list[str]
    senders: list[dict[str, Any]] = field(default_factory=list)
    absent: list[dict[str, Any]] = field(default_factory=list)
    #: The receiver's downtime, in words (empty: none).
    receiver_gap: str = ""
    restarted: bool = False
    #: The collector folder whose engine traces the step's dump is joined with at the
    #: hand-over, as the feed joins them into the live frames (None: no engine traces).
    engine_traces: Path | None = None


class LiveFeed(Protocol):
    """Where a live view's samples come from: the collector's reader
    (``live_feed.ReaderFeed``), or any source of trace records that groups them by
    sample and builds their frames on demand."""

    def poll(self) -> LiveBatch: ...

    def frames(self, keys: list[str], now: float) -> TraceFrames: ...


class LiveSession:
    """A live rollout's blocks, health and following state, shared by its views."""

    def __init__(self, feed: LiveFeed, *, stall_after: float = STALL_AFTER,
                 title: str = "live rollout", clock: Callable[[], float] = time.time) -> None:
        if not stall_after > 0:
            raise ValueError(f"stall_after must be a positive number of seconds: {stall_after!r}")
        self.feed = feed
        self.stall_after = float(stall_after)
        self.clock = clock
        self.title = title
        self.blocks = LiveBlocks(title=title)
        self.senders: list[dict[str, Any]] = []
        self.absent: list[dict[str, Any]] = []
        self.receiver_gap = ""
        self.engine_traces: Path | None = None
        self.following = True
        self._lock = threading.Lock()

    def poll(self) -> list[int]:
        """Read what arrived; returns the sample positions that changed."""
        with self._lock:
            batch = self.feed.poll()
            if batch.restarted:
                self.blocks = LiveBlocks(title=self.title)
            self.senders = [dict(s) for s in batch.senders]
            self.absent = [dict(s) for s in batch.absent]
            self.receiver_gap = batch.receiver_gap
            self.engine_traces = batch.engine_traces
            if not batch.keys:
                return []
            return self.blocks.replace(batch.keys, self.feed.frames(batch.keys, self.clock()))

    def step_dump(self, watcher: DumpWatcher) -> tuple[str, TraceFrames] | None:
        """The step's dump to hand over to, with the engine traces the live frames
        showed (``sources.handover.step_dump``); None while it has not landed."""
        return step_dump(watcher, self.blocks.trace_ids(), self.engine_traces)

    @property
    def seq(self) -> int:
        return self.blocks.seq

    def live_meta(self) -> dict[str, Any]:
        """The ``live`` part of every delta and of the starting payload."""
        return {"stall_after": self.stall_after, "following": self.following,
                "senders": self.senders, "absent": self.absent,
                "receiver_gap": self.receiver_gap}

    def delta_since(self, seq: int, epoch: str | None = None) -> LiveDelta:
        """Blocks changed after ``seq``; all of them when ``epoch`` names another
        rollout's blocks than these."""
        with self._lock:
            if epoch is not None and epoch != self.blocks.epoch:
                seq = 0
            return self.blocks.delta_since(seq, now=self.clock(),
                                           extra={"live": self.live_meta()})

    def starting_payload(self) -> dict[str, Any]:
        """A payload with no samples whose ``meta.live`` makes the renderer ask for
        the blocks (``live_sync``) and follow the deltas."""
        return empty_payload(self.title, live=self.live_meta())

    def frames(self) -> TraceFrames:
        """Frames of every sample so far (all of them flattened again: for pandas work)."""
        with self._lock:
            return self.feed.frames(self.blocks.keys(), self.clock())

    def detail(self, kind: str, index: int) -> dict[str, Any]:
        """Details of payload span or event ``index`` as the views hold the blocks now:
        its sample is flattened again."""
        with self._lock:
            column = "span" if kind == "span" else "ev"
            counts = np.array([self.blocks.block_count(p, column)
                               for p in range(self.blocks.n_samples)], dtype=np.int64)
            ends = np.cumsum(counts)
            if not 0 <= index < (ends[-1] if len(ends) else 0):
                raise IndexError(f"no {kind} {index} in this live view")
            position = int(np.searchsorted(ends, index, side="right"))
            offset = index - int(ends[position] - counts[position])
            frames = self.feed.frames([self.blocks.keys()[position]], self.clock())
        view = encode(frames, t0=self.blocks.t0 or 0.0, summaries=False)
        table = view.span_index if kind == "span" else view.event_index
        if offset >= len(table):
            raise IndexError(f"{kind} {index} has changed since it was drawn; click again")
        return (span_detail if kind == "span" else event_detail)(frames, int(table[offset]))


class LiveFollower:
    """Polls a session every ``interval`` seconds on a daemon thread and hands each
    view the blocks changed since the last hand-out, at least once a second while
    following (so the views' clocks and the senders' health stay current)."""

    def __init__(self, session: LiveSession, send: Callable[[LiveDelta], None],
                 report: Callable[[BaseException], None], interval: float = 0.5,
                 after: Callable[[], object] | None = None) -> None:
        """``after`` runs after each look (the widget looks for the step's dump)."""
        self.session = session
        self._send = send
        self._after = after
        #: The blocks last handed out: their epoch and how far (``seq``) they went.
        self._sent = 0
        self._sent_epoch: str | None = None
        self._sent_at = 0.0
        self._poller = Poller(self.look, report, interval)

    def look(self) -> None:
        """Poll the session once and hand the views what changed since the last
        hand-out: every block, when the session started over on another rollout."""
        changed = self.session.poll()
        if changed or time.monotonic() - self._sent_at >= 1.0:
            self.send_since(self._sent, self._sent_epoch)
        if self._after is not None:
            self._after()

    def send_since(self, seq: int, epoch: str | None = None) -> None:
        """Hand the views the blocks changed after ``seq`` of ``epoch`` (all of them
        when ``epoch`` is another rollout's; None: the blocks' current epoch)."""
        delta = self.session.delta_since(seq, epoch)
        sent_epoch, sent_seq = delta.meta["epoch"], delta.meta["seq"]
        if sent_epoch != self._sent_epoch:  # new blocks: their numbers start again
            self._sent, self._sent_epoch = sent_seq, sent_epoch
        else:
            self._sent = max(self._sent, sent_seq)
        self._sent_at = time.monotonic()
        self._send(delta)

    def pause(self) -> None:
        """Stop polling until :meth:`resume`, the views not told (none shows the rollout)."""
        self._poller.pause()

    def resume(self) -> None:
        """Poll again after :meth:`pause` (nothing after :meth:`stop`)."""
        self._poller.resume()

    def stop(self) -> None:
        """Stop polling, and tell the views the clock has stopped."""
        self._poller.stop()
        self.session.following = False
        self.send_since(self._sent, self._sent_epoch)
