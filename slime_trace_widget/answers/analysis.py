"""Answers in one call: where the time went, the long tail, concurrency, comparisons.

The public face of :mod:`.stats`, :mod:`.critical`, :mod:`.flame`, :mod:`.diff`,
:mod:`.engine` and :mod:`.trends` (``slime_trace_widget.analysis``).

Every function takes :class:`TraceFrames` and returns a DataFrame the user can
keep filtering. Conventions shared by all of them:

* Only measured spans count (:func:`measured_spans`).
* Statistics use closed spans (open spans have no duration); ``open`` counts
  the others.
* A span's *self time* is its duration minus the time covered by its
  children (union of their intervals, clipped to the span).
* Interval unions (idle time, concurrency) use each span's display end, so an
  open span counts up to where the timeline draws it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .critical import critical_path, critical_path_share
from .diff import DIFF_COLUMNS, compare, rollout_diff
from .engine import engine_breakdown
from .flame import flame
from .stats import (
    ALIVE,
    QUANTILES,
    TURN_SPAN,
    concurrency,
    long_tail,
    measured_spans,
    resample_concurrency,
    sample_breakdown,
    self_times,
    span_stats,
)

__all__ = ["ALIVE", "DIFF_COLUMNS", "QUANTILES", "TURN_SPAN", "compare", "concurrency",
           "critical_path", "critical_path_share", "engine_breakdown", "flame", "log_trends",
           "long_tail", "measured_spans", "resample_concurrency", "rollout_diff",
           "rollout_trends", "sample_breakdown", "self_times", "span_stats"]


def rollout_trends(source: Any, heaviest: int = 3) -> pd.DataFrame:
    """Trends across a run, one row per dump of a run dataset folder (or of frames),
    computed in DuckDB: see :func:`.trends.rollout_trends`."""
    from .trends import rollout_trends as trends_of

    return trends_of(source, heaviest)


def log_trends(trends: pd.DataFrame, target: Any, **options: Any) -> Any:
    """Log :func:`rollout_trends` to TensorBoard, MLflow or W&B, one scalar per column per
    rollout with the rollout id as the step: see :func:`..export.trend_log.log_trends`
    for targets and options. Returns what was logged."""
    from ..export.trend_log import log_trends as log

    return log(trends, target, **options)
