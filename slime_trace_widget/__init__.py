"""slime-trace-widget: record, load, explore and share slime rollout traces in Jupyter.

The notebook entry point is :class:`TraceTimeline` (``TraceTimeline.from_dump(path)``);
the data model is :class:`TraceFrames` (``load_frames(path)``); the recording API
lives in :mod:`slime_trace_widget.tracing`.

Names are imported on first use: ``import slime_trace_widget.tracing`` in a
rollout worker, or the CLI's cached path, should not pay for torch, pandas and
the widget stack.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

_EXPORTS = {
    "DumpError": ".paths",
    "TraceFrames": ".frames",
    "TraceTimeline": ".widget",
    "analysis": None,
    "build_frames": ".frames",
    "load_dump": ".dump",
    "load_dumps": ".dump",
    "load_frames": ".frames",
    "save_dump": ".dump",
}

__all__ = [*_EXPORTS, "__version__"]

#: Names whose use means a dump is about to be loaded: the safe loader's helper
#: process is started before their modules are imported, so its torch import runs
#: alongside this one (see :mod:`slime_trace_widget.isolation`).
_LOADING_NAMES = frozenset({"TraceTimeline", "load_dump", "load_dumps", "load_frames"})


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _EXPORTS[name]
    if name in _LOADING_NAMES:
        from .isolation import start_helper

        start_helper()
    if module is None:
        return importlib.import_module(f".{name}", __name__)
    return getattr(importlib.import_module(module, __name__), name)
