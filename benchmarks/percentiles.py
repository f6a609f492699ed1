"""Percentile helpers shared by the browser benchmarks."""

from __future__ import annotations

import math


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (NaN for no values), so p95 of few frames is a real frame."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


def triple(values: list[float]) -> str:
    """p50 / p95 / max, fixed width."""
    top = max(values) if values else math.nan
    return f"{pct(values, 0.5):7.2f} / {pct(values, 0.95):7.2f} / {top:7.2f}"
