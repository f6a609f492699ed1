"""A whole training run as one Parquet dataset: convert its dumps (local worker
pool or Ray), and open it by rollout.

``convert`` writes and updates the dataset (see ``layout`` for the files,
``manifest`` for what a rerun skips) and ``open_dataset`` reads back the rollouts
asked for as :class:`TraceFrames`; trends across the run are an answer
(:mod:`slime_trace_widget.answers.trends`). Names load on first use, so that the
loader, which opens datasets too, can import ``reading`` alone.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Where ``convert`` runs its per-dump jobs: the local worker pool or Ray tasks.
ENGINES = ("local", "ray")

_EXPORTS = {"ConvertBusy": ".lock", "ConvertReport": ".conversion", "convert": ".conversion",
            "dump_kind": ".layout", "Manifest": ".manifest", "open_dataset": ".reading"}

__all__ = sorted([*_EXPORTS, "ENGINES"])


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
