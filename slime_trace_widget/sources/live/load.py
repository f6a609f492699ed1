"""``load_live``: what a running rollout has recorded so far, as frames; and
:func:`take_in`, how a read of a rollout's rows is taken in (``LiveReader`` starts
with it too)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ...frames.live_health import HealthTracker, LiveHealth
from ...frames.model import TraceFrames
from .carriers import LiveCarriers, NewRecord, read_rows
from .frames_of import live_frames
from .read import Selection, UnreadableStore, select

#: ``frames.warnings`` kind: a store file skipped because it could not be read (damaged).
UNREADABLE_FILE = "live_unreadable_file"


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
    health.skipped(selection.unreadable)
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
    read (``docs/live-store.md``). A damaged store file is skipped, counted in
    ``frames.warnings`` (``live_unreadable_file``) and named in ``frames.live``; when no
    record of the rollout could be read and a file was damaged, :class:`UnreadableStore`
    (a ``ValueError``) names it instead."""
    now = time.time() if now is None else float(now)
    selection = select(directory, rollout, None if since is None else int(since * 1e9),
                       None if until is None else int(until * 1e9))
    if selection.unreadable and not selection.chosen.any():
        raise UnreadableStore.of(selection.unreadable)
    intake = take_in(selection)
    return frames_of(intake.carriers, selection.rollout, directory, now,
                     intake.health.health(now), engine=engine_traces)


def frames_of(carriers: LiveCarriers, rollout: int, directory: str | Path, now: float,
              health: LiveHealth, keys: list[str] | None = None,
              engine: bool = True) -> TraceFrames:
    """:func:`~.frames_of.live_frames`, each store file skipped as damaged counted in
    ``frames.warnings`` (``live_unreadable_file``)."""
    frames = live_frames(carriers, rollout, directory, now, health, keys, engine)
    if health.unreadable:
        frames.warnings[UNREADABLE_FILE] += len(health.unreadable)
    return frames
