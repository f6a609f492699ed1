"""Live traces into :class:`TraceFrames`: the dump's builder, open spans drawn to now, the
engines' requests of the same collector folder joined as they are for dumps."""

from __future__ import annotations

from pathlib import Path

from ...frames.flatten import build_frames
from ...frames.live_health import LiveHealth
from ...frames.model import TraceFrames
from ..engine.store import SUBDIR as ENGINE_SUBDIR
from ..engine.store import holds_spans
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
    if engine and holds_engine_traces(directory):
        # Refreshed often: a request beyond the window is counted, not searched for
        # (the step's dump, joined with the same folder at the hand-over, searches).
        frames = with_engine_traces(frames, directory, search_beyond=False)
    frames.live = health
    return frames


def holds_engine_traces(directory: str | Path) -> bool:
    """Whether the collector folder ``directory`` holds an engine span to join: its span
    store exists from the collector's start, but holds a span only once SGLang exported
    one. Without a span there is nothing to join, and no generation span is missing one."""
    return (Path(directory) / ENGINE_SUBDIR).is_dir() and holds_spans(directory)
