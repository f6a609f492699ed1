"""The collector's live store as a live view's feed: ``sources.live.LiveReader`` polled
for the samples that moved, their frames built by the reader (the dump's builder,
open spans drawn to now, the engine's requests from the same folder joined), and its
loss accounting told per sending process of the rollout shown (and, apart, the silent
ones of an earlier rollout that sent it nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..frames.live_health import LiveHealth, clock_words
from ..frames.model import TraceFrames
from ..sources.live.reader import LiveReader
from .live import LiveBatch


class ReaderFeed:
    """Follows ``directory``'s live store (a ``slime-trace-viewer collect`` folder): the
    latest rollout, or ``rollout``."""

    def __init__(self, directory: str | Path, rollout: int | None = None) -> None:
        self.reader = LiveReader(directory, rollout)

    def poll(self) -> LiveBatch:
        delta = self.reader.poll()
        return LiveBatch(keys=[str(k) for k in delta.samples["key"]],
                         senders=sender_rows(delta.health),
                         absent=absent_rows(delta.health),
                         receiver_gap=store_notes(delta.health),
                         restarted=bool(delta.rollout_changed),
                         engine_traces=(self.reader.directory if self.reader.engine_traces
                                        else None))

    def frames(self, keys: list[str], now: float) -> TraceFrames:
        return self.reader.frames(now, keys)


def sender_rows(health: LiveHealth) -> list[dict[str, Any]]:
    """Each sending process as the banner reads it: ``missing`` counts every sequence
    number never received, those the sender says it dropped among them, so ``lost``
    (in transit, or refused while the receiver was down) is the rest; ``clock`` says how
    far its clock is off the collector's, when that is far enough to matter."""
    rows = []
    for sender in health.senders:
        rows.append({"sender": sender.process, "service": sender.service,
                     "received": sender.records, "dropped": sender.dropped,
                     "lost": max(sender.missing - sender.dropped, 0),
                     "silent": bool(sender.silent), "closed": bool(sender.closed),
                     "quiet_s": max(0.0, health.now - sender.last_heard),
                     **({"clock": clock_words(sender.clock_behind)} if sender.clock_off
                        else {})})
    return rows


def absent_rows(health: LiveHealth) -> list[dict[str, Any]]:
    """The processes last heard in an earlier rollout that never closed and are silent:
    not this rollout's senders (no loss of its), but maybe missed by it."""
    return [{"sender": sender.process, "service": sender.service,
             "last_rollout": sender.last_rollout,
             "quiet_s": max(0.0, health.now - sender.last_heard)} for sender in health.absent]


def store_notes(health: LiveHealth) -> str:
    """The banner's line on the store itself: the receiver's downtime and the store files
    that could not be read ("" when neither)."""
    notes = [receiver_gap(health)] if health.restarts else []
    if health.unreadable:
        notes.append(f"{len(health.unreadable)} store file(s) could not be read and were "
                     f"skipped (their records are missing): {'; '.join(health.unreadable)}")
    return " ".join(notes)


def receiver_gap(health: LiveHealth) -> str:
    """The receiver's downtime in words ("" when it never was down)."""
    if not health.restarts:
        return ""
    down = sum(gap.up_at - gap.down_after for gap in health.restarts)
    return (f"the receiver was down {len(health.restarts)} time(s), {down:.1f} s in all: "
            "records sent meanwhile were retried or lost (counted per sender)")
