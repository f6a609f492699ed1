"""The flame table over a window that holds a child but not the parent it outlived:
the child keeps the path it has without a window (``js/test/data/flame.test.js``
checks the front end's table on the same spans). Dumps are recorded with
:mod:`slime_trace_widget.tracing`, saved with ``save_dump`` and read by the loader, or
written by slime (the fixtures)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget import analysis
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from tests.support.outliving import outliving_child_dump

FIXTURES = Path(__file__).parents[1] / "fixtures"
@pytest.fixture
def frames(tmp_path: Path) -> TraceFrames:
    return load_frames(outliving_child_dump(tmp_path / "rollout_0.pt"))


def _windowed(frames: TraceFrames, start: float, end: float):
    return analysis.flame(frames, window=(frames.t0 + start, frames.t0 + end)).set_index("path")


def test_a_window_past_the_parents_keeps_the_child_under_them(frames: TraceFrames) -> None:
    assert "rollout;generate;reward" in set(analysis.flame(frames)["path"])
    table = _windowed(frames, 6, 9)
    assert list(table.index) == ["rollout", "rollout;generate", "rollout;generate;reward"]
    assert table["depth"].tolist() == [0, 1, 2]
    reward = table.loc["rollout;generate;reward"]
    assert reward["count"] == 1 and reward["total"] == pytest.approx(3)
    assert reward["self"] == pytest.approx(3) and reward["p50"] == pytest.approx(3)
    above = table.loc[["rollout", "rollout;generate"]]
    assert above["count"].tolist() == [0, 0] and above["total"].tolist() == [0, 0]
    assert above["self"].tolist() == [0, 0] and above[["p50", "p95"]].isna().all().all()


def test_the_child_is_no_root_beside_a_grandparent_the_window_holds(frames: TraceFrames
                                                                    ) -> None:
    table = _windowed(frames, 4.5, 9)
    assert list(table.index) == ["rollout", "rollout;generate", "rollout;generate;reward"]
    assert table.loc["rollout", "count"] == 1
    assert table.loc["rollout", "total"] == pytest.approx(0.5)
    assert table.loc["rollout;generate", "count"] == 0
    assert table.loc["rollout;generate;reward", "total"] == pytest.approx(4.5)


def test_windows_that_split_the_time_add_up_path_by_path(frames: TraceFrames) -> None:
    whole = analysis.flame(frames).set_index("path")["total"]
    split = _windowed(frames, 0, 6)["total"].add(_windowed(frames, 6, 9)["total"],
                                                   fill_value=0)
    assert split.reindex(whole.index).to_numpy() == pytest.approx(whole.to_numpy())
    assert set(split.index) == set(whole.index)


@pytest.mark.parametrize("fixture", ["edge_open_span.pt", "legacy_v1_pd.pt"])
def test_a_windowed_path_is_a_path_of_the_whole_table(fixture: str) -> None:
    """slime's own dumps hold such children (a PD phase past its cancelled generation,
    a legacy ``[D]`` span past its generation's end): in a window they stay where the
    whole table has them."""
    frames = load_frames(FIXTURES / fixture)
    whole = analysis.flame(frames).set_index("path")
    length = frames.t1 - frames.t0
    for start, end in ((0.1, 0.5), (0.3, 0.9), (0.5, 1.0)):
        table = _windowed(frames, start * length, end * length)
        assert set(table.index) <= set(whole.index), (start, end)
        assert np.all(table["count"].to_numpy() <= whole.loc[table.index, "count"].to_numpy())
