"""``load_live``: what a running rollout has recorded so far, as frames; and
:func:`take_in`, how a read of a rollout's rows is taken in (``LiveReader`` starts
with it too)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ...frames.live_health import HealthTracker
from ...frames.model import TraceFrames
from .carriers import LiveCarriers, NewRecord, read_rows
from .frames_of import live_frames
from .read import Selection, select


@dataclass
class Intake:
    """A rollout's rows taken in: the loss accounting over every row read, the traces
    of its records, and the records taken, in arrival order."""

    health: HealthTracker
    carriers: LiveCarriers
    taken: list[NewRecord]


def take_in(selection: Selection) -> Intake:
    """The rows of ``selection`` taken into a fresh loss accounting of its rollout's
    senders and fresh traces: every row is read and checked before anything is kept
    (``carriers.read_rows``)."""
    read = read_rows(selection.read, selection.chosen)
    health = HealthTracker(None if selection.everything else selection.rollout)
    carriers = LiveCarriers()
    taken = carriers.take(read, health.observe(selection.read))
    return Intake(health, carriers, taken)


def load_live(directory: str | Path, rollout: int | None = None, since: float | None = None,
              until: float | None = None, now: float | None = None, *,
              engine_traces: bool = True) -> TraceFrames:
    """The records a collector (``slime-trace-viewer collect DIR``) has received, as frames.

    ``rollout``: a rollout id (default: the latest; -1: records sent before any rollout
    id was set, or every record when none ever was). ``since``/``until`` (epoch seconds)
    keep the records of that window. Each open span has state ``open`` and is drawn up
    to ``now`` (default: the clock now). The engines' requests the same collector
    received are nested under the spans that made them, as for dumps
    (``engine_traces=False`` leaves them out). ``frames.live`` tells per sending process
    what was received, lost and dropped, and which went silent
    (:class:`~slime_trace_widget.frames.live_health.LiveHealth`).

    Only the files, and in them the row groups, that can hold the rollout and window are
    read (``docs/live-store.md``)."""
    now = time.time() if now is None else float(now)
    selection = select(directory, rollout, None if since is None else int(since * 1e9),
                       None if until is None else int(until * 1e9))
    intake = take_in(selection)
    return live_frames(intake.carriers, selection.rollout, directory, now,
                       intake.health.health(now), engine=engine_traces)
