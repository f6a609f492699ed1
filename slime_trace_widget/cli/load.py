"""Dumps to frames for the command: the paths it was given, checked, then loaded; each
dump that fails is named on stderr in one line (never as a Python warning: the
command's process ignores the loader's warnings of the failures it names itself, see
:func:`ignore_reported_failures`)."""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ..sources.dumps.paths import expand_paths
from .errors import CliError

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

PROG = "slime-trace-viewer"
#: The loader's warnings of failures the command prints itself, one line each, as
#: (message start, module the warning is attributed to): each dump :func:`load` skipped,
#: each dump ``convert`` did not convert (it lists ``report.failed``).
REPORTED_FAILURES = (("skipped ", r"slime_trace_widget\.cli\.load\Z"),
                     ("not converted ", r"slime_trace_widget\.sources\.dataset\.conversion\Z"))
_filtering = threading.Lock()


def ignore_reported_failures() -> None:
    """Have this process ignore the warnings of :data:`REPORTED_FAILURES`, by filters
    added once, when the command starts, and never taken out.

    Not a ``catch_warnings`` block around each load: that swaps the process's filters in
    and out, so with loads in two threads (``--follow``) one thread restores filters
    while the other still loads, which shows a failure twice or leaves a filter behind.
    These filters are added before any load and never change while loads run; they
    match only warnings raised for the command's own calls (by module).
    """
    with _filtering:
        for message, module in REPORTED_FAILURES:
            entry = ("ignore", re.compile(message, re.I), RuntimeWarning, re.compile(module), 0)
            if entry not in warnings.filters:  # a command run again in one process
                warnings.filterwarnings("ignore", message=message, category=RuntimeWarning,
                                        module=module)


def dump_files(patterns: list[str]) -> list[str]:
    """The dump files the paths and globs in ``patterns`` name, in natural order;
    CliError naming the first that is a folder or no file."""
    paths = expand_paths(patterns)
    for path in paths:
        if os.path.isdir(path):
            raise CliError(f"{path}: a folder, not a dump (give its dumps: '{path}/*.pt')")
        if not os.path.isfile(path):
            raise CliError(f"{path}: no such file")
    return paths


def check_engine_traces(engine_traces: str | None) -> None:
    """CliError unless ``engine_traces`` (when given) names a file or folder."""
    if engine_traces is not None and not Path(engine_traces).exists():
        raise CliError(f"--engine-traces {engine_traces}: no such engine-trace folder or file")


def load(inputs: list[Path], trusted: bool, engine_traces: str | None = None) -> TraceFrames:
    """The frames of ``inputs`` (with the engine traces kept in ``engine_traces``).

    A dump that fails is left out, listed in ``frames.failures`` and printed as one
    ``slime-trace-viewer: skipped PATH: REASON`` line on stderr (the loader's warning
    of it ignored, :func:`ignore_reported_failures`); DumpError when all fail.
    """
    # Imported here: a run that reuses its cache never loads, nor pays for the loader's
    # imports (pandas, torch).
    from ..sources.loading import load_frames

    frames = load_frames([str(p) for p in inputs], trusted=trusted,
                         engine_traces=engine_traces)
    for name, reason in frames.failures:
        print(skipped_line(name, reason), file=sys.stderr, flush=True)
    return frames


def skipped_line(name: str, reason: str) -> str:
    """One line naming a dump that failed and why (its name said once)."""
    return f"{PROG}: skipped {name}: {reason.removeprefix(f'{name}: ')}"
