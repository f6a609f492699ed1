"""The data model: :class:`TraceFrames`, the core Arrow tables and their pandas views.

``tables/`` (below) flattens records into the core tables; ``model`` holds them
(``frames.tables``) and makes each pandas view when first read, ``core_frames``
giving a core table its pandas form, ``attr_frames`` the ``attr.*`` columns;
``flatten`` goes from records to frames in one call.
``engine_load`` holds the engines' scraped load as named tracks (``load_tracks``).
Where frames come from (dumps, the run dataset, the engines, joined under the
spans that made their requests) is ``sources/``, above this package.

The names below are imported on first use, so importing the package costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["TraceFrames", "build_frames", "combine_frames", "load_tracks"]

_HOMES = {"TraceFrames": ".model", "build_frames": ".flatten", "combine_frames": ".model",
          "load_tracks": ".engine_load"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
