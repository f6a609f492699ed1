"""``rollout_trends``' figures against values read another way, over frames and over a
run dataset converted from the same dumps (DuckDB reading the Parquet files): PD
transfer per request, the per-name quantiles, the straggler share and span names that
are also the names of built-in columns.

The dumps are fixtures slime wrote, or a fixture changed the way rollout code would
change it (an event recorded late, samples saved without a trace, a span's name) and
saved as slime saves it; or samples recorded with the tracing API on a hand-set clock.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slime_trace_widget.answers.stats import span_stats
from slime_trace_widget.answers.trends import rollout_trends
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.dataset import convert
from slime_trace_widget.sources.loading import load_dump, load_frames
from slime_trace_widget.tracing import trace_event, use_clock
from tests.answers.test_ledger import edited
from tests.answers.test_stats_end_before_start import _recorded
from tests.sources.runs import copy_run
from tests.support.dump_samples import events_or_empty


def _both(frames: TraceFrames, dump: Path, tmp_path: Path, **options: int) -> list[pd.DataFrame]:
    """The trends of ``frames`` (read from ``dump``) and of a dataset converted from it."""
    convert([str(dump)], tmp_path / "ds", settle_seconds=0, progress=False)
    return [rollout_trends(frames, **options), rollout_trends(tmp_path / "ds", **options)]


# --------------------------------------------------------------------------- PD transfer


def _raw_transfer(dump: Path) -> tuple[float, float]:
    """Total MB and mean GB/s over the dump's raw records that carry the PD transfer
    figures: one record per request (the summary event, or in the attribute format the
    generation span's end)."""
    figures = [record["attrs"] for sample in load_dump(dump).samples
               for record in events_or_empty(sample)
               if isinstance(record.get("attrs"), dict)
               and "pd_transfer_total_mb" in record["attrs"]]
    assert figures
    return (sum(f["pd_transfer_total_mb"] for f in figures),
            float(np.mean([f["pd_transfer_speed_gb_s"] for f in figures])))


def test_pd_transfer_counts_each_request_once(tmp_path: Path) -> None:
    """Both formats: the summary events (``rollout_0.pt``, ``rollout_eval_3.pt``) and the
    generation spans' attributes (``rollout_7.pt``). Their ``[P]``/``[D]`` spans carry
    copies of the figures, which the sum counted twice more."""
    run = copy_run(tmp_path)
    convert(str(run / "*.pt"), tmp_path / "ds", progress=False)
    frames = load_frames(sorted(str(p) for p in run.iterdir()))
    for trends in (rollout_trends(frames), rollout_trends(tmp_path / "ds")):
        assert len(trends) == 3
        for _, row in trends.iterrows():
            total, speed = _raw_transfer(run / row["dump_file"])
            assert row["pd_transfer_mb"] == pytest.approx(total, rel=1e-12)
            assert row["pd_transfer_gb_s"] == pytest.approx(speed, rel=1e-12)


# --------------------------------------------------------------------------- per name


def test_a_span_ending_before_its_start_leaves_the_name_quantiles(tmp_path: Path) -> None:
    """Its length is unknown (a clock stepped back): out of p50/p95, as in span_stats."""
    dump = tmp_path / "rollout_0.pt"
    frames = _recorded(dump, [("generate", 100, 102), ("generate", 110, 114),
                              ("generate", 120, 119)])
    assert frames.warnings["end_before_start"] == 1
    expected = span_stats(frames).loc["generate"]
    for trends in _both(frames, dump, tmp_path):
        row = trends.iloc[0]
        assert row["generate_p50"] == pytest.approx(expected["p50"]) == pytest.approx(3)
        assert row["generate_p95"] == pytest.approx(2 + 0.95 * (4 - 2))


def test_a_span_named_like_a_built_in_column_leaves_it_intact(tmp_path: Path) -> None:
    """A span named ``duration`` would have ``duration_p50`` and ``duration_p95``: the
    samples' figures keep those columns, the name is passed over with a warning and the
    next heaviest name takes its place."""
    def rename(samples: list[dict]) -> None:
        for sample in samples:
            for record in events_or_empty(sample):
                if record.get("name") == "sglang_generate":
                    record["name"] = "duration"

    frames = edited(tmp_path, "small.pt", "rollout_0.pt", rename, rollout_id=0)
    assert (frames.span_core["name"] == "duration").any()
    baseline = rollout_trends(load_frames(Path(__file__).parents[1] / "fixtures" / "small.pt"))
    named = [c for c in baseline.columns if c.endswith(("_p50", "_p95"))
             and not c.startswith("duration_")]
    assert "sglang_generate_p50" in named  # among the heaviest: "duration" would be too
    durations = frames.samples["duration"]
    with pytest.warns(RuntimeWarning, match=r"1 span name\(s\) passed over.*'duration'"):
        trends = _both(frames, tmp_path / "rollout_0.pt", tmp_path)
    for table in trends:
        assert not [c for c in table.columns if c.endswith(("_x", "_y"))]
        assert table.columns.is_unique
        row = table.iloc[0]
        assert row["duration_p50"] == pytest.approx(durations.median())
        assert row["duration_p95"] == pytest.approx(durations.quantile(0.95))
        own = [c for c in table.columns if c.endswith(("_p50", "_p95"))
               and not c.startswith("duration_")]
        assert len(own) == len(named) and "sglang_generate_p50" not in own
    pd.testing.assert_frame_equal(trends[0], trends[1], check_dtype=False)


# --------------------------------------------------------------------------- stragglers


def test_the_straggler_share_is_of_the_samples_with_a_duration(tmp_path: Path) -> None:
    """Sample 0's reward is recorded 100 s late (a straggler); samples 4-7 are saved
    untraced, with no duration: one straggler of four timed samples."""
    def change(samples: list[dict]) -> None:
        late = max(record["ts"] for record in events_or_empty(samples[0])) + 100.0
        with use_clock(lambda: late):
            trace_event(samples[0], "reward_recorded")
        for sample in samples[4:]:
            del sample["trace"]

    frames = edited(tmp_path, "small.pt", "rollout_5.pt", change)
    durations = frames.samples["duration"]
    assert durations.isna().sum() == 4
    timed = durations.dropna()
    assert (timed > 2 * timed.median()).tolist() == [True, False, False, False]
    for trends in _both(frames, tmp_path / "rollout_5.pt", tmp_path):
        assert trends.iloc[0]["samples"] == 8
        assert trends.iloc[0]["straggler_share"] == pytest.approx(0.25)
