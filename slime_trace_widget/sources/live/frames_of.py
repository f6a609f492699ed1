"""Live traces into :class:`TraceFrames`: the dump's builder, open spans drawn to now, the
engines' requests of the same collector folder joined as they are for dumps."""

from __future__ import annotations

from pathlib import Path

from ...frames.flatten import build_frames
from ...frames.live_health import LiveHealth
from ...frames.model import TraceFrames
from ..engine.traces_source import LAYOUTS
from ..engine.window import with_engine_traces
from .carriers import LiveCarriers
from .store import UNKNOWN_ROLLOUT


def live_frames(carriers: LiveCarriers, rollout: int, directory: str | Path, now: float,
                health: LiveHealth, keys: list[str] | None = None,
                engine: bool = True) -> TraceFrames:
    """Frames of the traces ``keys`` (all when None) as of ``now`` (epoch seconds), with
    the engine requests stored beside them when ``engine`` and ``health`` as ``live``."""
    dump = {"path": f"live:{directory}",
            "rollout_id": None if rollout == UNKNOWN_ROLLOUT else rollout,
            "samples": carriers.samples(keys)}
    frames = build_frames(dump, open_until=now)
    frames.warnings.update(carriers.warnings)
    if engine and has_engine_stores(directory):
        # Refreshed often: a request beyond the window is counted, not searched for
        # (the step's dump, joined with the same folder at the hand-over, searches).
        # A span store that never received a span joins nothing; the load is attached.
        frames = with_engine_traces(frames, directory, search_beyond=False)
    frames.live = health
    return frames


def has_engine_stores(directory: str | Path) -> bool:
    """Whether the collector folder ``directory`` has an engine store for
    :func:`~..engine.window.with_engine_traces` to read: the span store (made at the
    collector's start, holding spans once SGLang exports them) or the load store (made by
    a ``--scrape``, whose load is attached whether or not the engines trace)."""
    return any((Path(directory) / layout.subdir).is_dir() for layout in LAYOUTS)
