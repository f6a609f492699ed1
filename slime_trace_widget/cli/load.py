"""Dumps to frames for the command: the paths it was given, checked, then loaded; each
dump that fails is named on stderr in one line (and not warned of as well: the command
loads with ``warn_failures=False``, which touches no process-wide warning state, so
loads in two threads under ``--follow`` each report their own failures once)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..sources.dumps.errors import failure_line
from ..sources.dumps.paths import expand_paths
from .errors import CliError
from .terminal import complain

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

def dump_files(patterns: list[str], *, links_to_nothing: bool = False) -> list[str]:
    """The dump files the paths and globs in ``patterns`` name, in natural order;
    CliError naming the first that is a folder or no file. ``links_to_nothing``: a
    symbolic link whose file is gone passes (``convert`` lists it as a failed dump and
    converts the others, rather than refusing a whole run's glob for it)."""
    paths = expand_paths(patterns)
    for path in paths:
        if os.path.isdir(path):
            raise CliError(f"{path}: a folder, not a dump (give its dumps: '{path}/*.pt')")
        if not os.path.isfile(path) and not (links_to_nothing and os.path.islink(path)):
            raise CliError(f"{path}: no such file")
    return paths


def check_engine_traces(engine_traces: str | None) -> None:
    """CliError unless ``engine_traces`` (when given) names what ``load_frames`` joins: a
    collector folder, a folder of one of its stores, or one of their files."""
    if engine_traces is None:
        return
    if not Path(engine_traces).exists():
        raise CliError(f"--engine-traces {engine_traces}: no such engine-trace folder or file")
    # Imported here: the check reads a file's header with pyarrow.
    from ..sources.engine.traces_source import EngineTracesError, checked_source

    try:
        checked_source(engine_traces)
    except EngineTracesError as exc:
        raise CliError(f"--engine-traces {exc.path}: {exc.problem}") from None


def load(inputs: list[Path], trusted: bool, engine_traces: str | None = None) -> TraceFrames:
    """The frames of ``inputs`` (with the engine traces kept in ``engine_traces``).

    A dump that fails is left out, listed in ``frames.failures`` and printed as one
    ``slime-trace-viewer: skipped PATH: REASON`` line on stderr, not warned of
    (``warn_failures=False``); DumpError when all fail. So is each engine-store file the
    join could not read (``frames.engine_unreadable``, counted in the load warnings), as
    ``skipped engine traces PATH: REASON``.
    """
    # Imported here: a run that reuses its cache never loads, nor pays for the loader's
    # imports (pandas, torch).
    from ..sources.loading import load_frames

    frames = load_frames([str(p) for p in inputs], trusted=trusted,
                         engine_traces=engine_traces, warn_failures=False)
    for name, reason in frames.failures:
        complain(f"skipped {failure_line(name, reason)}")
    for path, reason in frames.engine_unreadable.items():
        complain(f"skipped engine traces {path}: {reason}")
    return frames

