"""Flatten dumps straight into :class:`TraceFrames`: the Arrow tables of
:func:`..tables.build.build_tables`, whose pandas views are made when first read.

It lives here, not beside ``build_tables``, because ``tables/`` never imports pandas
(a worker flattens with it alone) and sits below the model it would have to return.
"""

from __future__ import annotations

from typing import Any

from ..tables.build import AttrTablesHere, build_tables
from .model import TraceFrames, frames_from_tables


def build_frames(source: Any, attr_tables: AttrTablesHere | None = None, *,
                 open_until: float | None = None) -> TraceFrames:
    """Flatten dumps (a ``LoadedDump``, a list of them, a dump dict or a list of samples;
    see :func:`build_tables`) into frames, with pandas. ``open_until``: see
    :func:`build_tables`."""
    return frames_from_tables(build_tables(source, attr_tables, open_until=open_until))
