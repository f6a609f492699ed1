"""Dumps to frames for the command: the paths it was given, checked, then loaded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .errors import CliError

if TYPE_CHECKING:
    from ..frames.model import TraceFrames


def load(inputs: list[Path], trusted: bool, engine_traces: str | None = None) -> TraceFrames:
    """The frames of ``inputs`` (with the engine traces kept in ``engine_traces``)."""
    # Imported here: a run that reuses its cache never loads, nor pays for the loader's
    # imports (pandas, torch).
    from ..sources.loading import load_frames

    if engine_traces is not None and not Path(engine_traces).exists():
        raise CliError(f"{engine_traces}: no such engine-trace folder or file")
    return load_frames([str(p) for p in inputs], trusted=trusted, engine_traces=engine_traces)
