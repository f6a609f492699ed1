"""Answers in one call: where the time went, the long tail, concurrency, comparisons.

The public face of ``answers/`` (:mod:`.answers.stats`, ``critical``, ``flame``,
``diff``, ``engine``, ``ledger``, ``tail`` and ``trends``) and of the trend loggers of
``export/`` (``log_trends``): it sits on top of both, beside the command line, so that
no answer imports an exporter.

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

from .answers.critical import critical_path, critical_path_share
from .answers.diff import DIFF_COLUMNS, compare, ledger_diff, rollout_diff
from .answers.engine import engine_breakdown
from .answers.flame import flame
from .answers.ledger import FATES, ledger_kinds, sample_fates, signal_ledger
from .answers.stats import (
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
from .answers.tail import finish_order, tail_price

__all__ = ["ALIVE", "DIFF_COLUMNS", "FATES", "QUANTILES", "TURN_SPAN", "compare",
           "concurrency", "critical_path", "critical_path_share", "engine_breakdown",
           "finish_order", "flame", "ledger_diff", "ledger_kinds", "ledger_trends",
           "log_trends", "long_tail", "measured_spans", "resample_concurrency",
           "rollout_diff", "rollout_trends", "sample_breakdown", "sample_fates", "self_times",
           "signal_ledger", "span_stats", "tail_price"]


def rollout_trends(source: Any, heaviest: int = 3, oversample: float = 1.25) -> pd.DataFrame:
    """Trends across a run, one row per dump of a run dataset folder (or of frames),
    computed in DuckDB, with each dump's ledger shares and tail figures: see
    :func:`.answers.trends.rollout_trends`."""
    from .answers.trends import rollout_trends as trends_of

    return trends_of(source, heaviest, oversample)


def ledger_trends(source: Any, oversample: float = 1.25) -> pd.DataFrame:
    """Only the ledger shares and tail figures of :func:`rollout_trends`, one row per
    dump: see :func:`.answers.trends.ledger_trends`."""
    from .answers.trends import ledger_trends as ledger_of_run

    return ledger_of_run(source, oversample)


def log_trends(trends: pd.DataFrame, target: Any, **options: Any) -> Any:
    """Log :func:`rollout_trends` to TensorBoard, MLflow or W&B, one scalar per column per
    rollout with the rollout id as the step: see :func:`.export.trend_log.log_trends`
    for targets and options. Returns what was logged."""
    from .export.trend_log import log_trends as log

    return log(trends, target, **options)
