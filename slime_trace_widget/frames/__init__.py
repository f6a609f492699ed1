"""Flatten: raw trace records into :class:`TraceFrames`, the data model every answer reads.

``carrier`` walks each sample's records once, ``samples`` reads the per-sample
fields, ``pd_lanes`` derives the PD phase spans, ``span_geometry`` the depths,
display ends and lanes, ``attr_columns`` the attributes as typed columns;
``build`` puts them together and ``model`` is the result.
"""

from __future__ import annotations

from .build import build_frames
from .model import TraceFrames, combine_frames

__all__ = ["TraceFrames", "build_frames", "combine_frames"]
