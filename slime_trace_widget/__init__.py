"""slime-trace-widget: record, load, explore and share slime rollout traces in Jupyter.

The notebook entry point is :class:`TraceTimeline` (``TraceTimeline.from_dump(path)``);
the data model is :class:`TraceFrames` (``load_frames(path)``); the recording API
lives in :mod:`slime_trace_widget.tracing`.
"""

from .dump import DumpError, load_dump, load_dumps, save_dump
from .frames import TraceFrames, build_frames, load_frames
from .widget import TraceTimeline

__version__ = "0.1.0"

__all__ = [
    "DumpError",
    "TraceFrames",
    "TraceTimeline",
    "build_frames",
    "load_dump",
    "load_dumps",
    "load_frames",
    "save_dump",
]
