"""rollout_trends' engine columns against engine_breakdown, where the two PD halves of a
request overlap in wall time (what the partition of ``answers/engine.py`` is about):
over frames, and over a run dataset converted with the engine traces (DuckDB reading the
Parquet files).

The trends' ``_engine_figures`` (``answers/trends.py``) runs the partition through
``answers.engine.dump_phase_seconds``, one dump at a time; SQL that added each slice's
own time would make its PD rows disagree with ``engine_breakdown``, and these fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slime_trace_widget.answers.engine import engine_breakdown
from slime_trace_widget.answers.trends import rollout_trends
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.dataset import convert
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.loading import load_frames
from tests.answers.test_engine_partition import pd_engine
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.engine_builder import frames_for
from tests.support.engine_traces import requests_for
from tests.support.sglang_driver import default_rids, write_dump

PHASES = ("queue", "prefill", "decode", "pd", "other")


def assert_trends_follow_the_breakdown(trends_source: str | TraceFrames,
                                       frames: TraceFrames) -> None:
    trends = rollout_trends(trends_source).set_index("rollout_id")
    per_rollout = engine_breakdown(frames, by="rollout")
    assert len(per_rollout) and set(per_rollout.index) <= set(trends.index)
    for rollout, row in per_rollout.iterrows():
        for phase in PHASES:
            assert trends.at[rollout, f"engine_{phase}_s"] == pytest.approx(
                row[f"{phase}_s"], abs=1e-6), phase
        assert trends.at[rollout, "engine_retractions"] == row["retractions"]
        assert trends.at[rollout, "engine_decode_tokens_per_s"] == pytest.approx(
            row["decode_tokens_per_s"], nan_ok=True)


def test_trends_over_frames_follow_the_breakdown_under_pd() -> None:
    frames = frames_for(["decode-rid"])
    joined = join_engine(frames, pd_engine("decode-rid", 0x61, senders=(0, 1)).table())
    assert_trends_follow_the_breakdown(joined, joined)


def test_trends_over_a_dataset_follow_the_breakdown_under_pd(tmp_path: Path) -> None:
    dump = write_dump(tmp_path / "rollout_3.pt", default_rids(8, seed=5), seed=5,
                      rollout_id=3)
    frames = load_frames(str(dump), progress=False)
    engine = store_requests(requests_for(frames, pd=True, seed=5), tmp_path / "engine", SKEWS)
    dataset = tmp_path / "dataset"
    convert([str(dump)], dataset, engine_traces=str(engine), settle_seconds=0, progress=False)
    joined = load_frames(str(dump), progress=False, engine_traces=str(engine))
    assert engine_breakdown(joined)["pd_s"].sum() > 0
    assert_trends_follow_the_breakdown(str(dataset), joined)
