"""The matplotlib views draw names from the data as written: a ``$`` in a span name
or a trend column is a dollar, never mathtext, and a name mathtext cannot parse
still saves."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from slime_trace_widget.answers.plots import (
    plot_concurrency,
    plot_durations,
    plot_rollout_trends,
)
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from tests.frames.test_frames import rec, sample

BROKEN_MATH = r"tool $\undefined$ call"  # mathtext raises ValueError on it when drawn
PRICES = "price $5 vs $6"  # mathtext would draw "5 vs " in italics, no dollars


@pytest.fixture
def frames() -> TraceFrames:
    return build_frames([
        sample(rec("span_start", BROKEN_MATH, 0, "a"), rec("span_end", BROKEN_MATH, 2, "a"),
               index=0),
        sample(rec("span_start", PRICES, 0, "b"), rec("span_end", PRICES, 3, "b"), index=1),
    ])


def _axes() -> Axes:
    """Axes of a figure of its own, outside pyplot: saving draws with Agg."""
    return Figure().subplots()


def _saved(ax: Axes) -> bytes:
    """The figure of ``ax`` saved as PNG (Agg, in memory): mathtext is parsed here."""
    out = io.BytesIO()
    ax.figure.savefig(out, format="png")
    return out.getvalue()


def _legend_texts(ax: Axes) -> list[str]:
    return [text.get_text() for text in ax.get_legend().get_texts()]


def test_durations_legend_shows_span_names_as_written(frames: TraceFrames) -> None:
    ax = plot_durations(frames, names=[BROKEN_MATH, PRICES], ax=_axes())
    assert _saved(ax).startswith(b"\x89PNG")
    assert _legend_texts(ax) == [f"{BROKEN_MATH} (1)", f"{PRICES} (1)"]


def test_concurrency_legend_shows_span_names_as_written(frames: TraceFrames) -> None:
    ax = plot_concurrency(frames, names=[BROKEN_MATH, PRICES], ax=_axes())
    assert _saved(ax).startswith(b"\x89PNG")
    assert {BROKEN_MATH, PRICES} <= set(_legend_texts(ax))


def test_trend_columns_are_shown_as_written() -> None:
    trends = pd.DataFrame({"rollout_id": [0, 1], "dump_kind": ["train", "train"],
                           BROKEN_MATH: [1.0, 2.0], PRICES: [3.0, 4.0]})
    ax = plot_rollout_trends(trends, [BROKEN_MATH, PRICES], ax=_axes())
    assert _saved(ax).startswith(b"\x89PNG")
    assert _legend_texts(ax) == [BROKEN_MATH, PRICES]
    assert ax.get_ylabel() == f"{BROKEN_MATH}, {PRICES}"
