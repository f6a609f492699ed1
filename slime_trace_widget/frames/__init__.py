"""Flatten: raw trace records into :class:`TraceFrames`, the data model every answer reads.

``carrier`` walks each sample's records once, ``samples`` reads the per-sample
fields, ``pd_lanes`` derives the PD phase spans, ``span_geometry`` the depths,
display ends and lanes, ``attr_columns`` the attributes as typed columns;
``build`` puts them together as Arrow tables (``core_tables``), ``core_frames``
gives them their pandas form and ``model`` is the result. ``engine`` joins the
engines' requests under the spans that made them; ``engine_load`` reads the
engines' scraped load into named tracks (``load_tracks``).

The names below are imported on first use: a worker imports ``build`` without
pandas, which ``model`` needs.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["TraceFrames", "build_frames", "combine_frames", "load_tracks"]

_HOMES = {"TraceFrames": ".model", "build_frames": ".build", "combine_frames": ".model",
          "load_tracks": ".engine_load"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
