"""slime-trace-widget: record, load, explore and share slime rollout traces in Jupyter.

The notebook entry point is :class:`TraceTimeline` (``TraceTimeline.from_dump(path)``);
the data model is :class:`TraceFrames` (``load_frames(path)``); the recording API
lives in :mod:`slime_trace_widget.tracing`.

Names are imported on first use: ``import slime_trace_widget.tracing`` in a
rollout worker, or the CLI's cached path, should not pay for pandas and the
widget stack; loading never imports torch unless raw samples are asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

_EXPORTS = {
    "DumpError": ".load",
    "RunView": ".run_view",
    "TraceFrames": ".frames",
    "TraceTimeline": ".widget",
    "analysis": None,
    "build_frames": ".frames",
    "load_dump": ".load",
    "load_dumps": ".load",
    "load_frames": ".load",
    "save_dump": ".load",
}

__all__ = [*_EXPORTS, "__version__"]

#: Names whose use means a dump is about to be loaded: a worker process is started
#: before their modules are imported, so its imports run alongside these
#: (see :mod:`slime_trace_widget.load.pool`).
_LOADING_NAMES = frozenset({"TraceTimeline", "load_dump", "load_dumps", "load_frames"})


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _EXPORTS[name]
    if name in _LOADING_NAMES:
        from .load import start_worker

        start_worker()
    if module is None:
        return importlib.import_module(f".{name}", __name__)
    return getattr(importlib.import_module(module, __name__), name)
