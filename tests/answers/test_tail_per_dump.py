"""The tail's price of frames holding two dumps of one rollout id: two runs'
``rollout_0.pt`` (demo rollouts recorded with the tracing API and saved as slime saves
them), or a step's eval dump beside another dump of its id (fixtures slime wrote).
Each dump is its own rollout: its row, and its units in ``finish_order``, are what
the dump read alone gives."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from slime_trace_widget.answers.tail import TAIL_COLUMNS, finish_order, tail_price
from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.sources.loading import load_frames

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """``runA/rollout_0.pt`` and ``runB/rollout_0.pt``: rollout id 0 twice, with
    different samples."""
    folder = tmp_path_factory.mktemp("runs")
    paths = []
    for seed, run in enumerate(("runA", "runB"), start=1):
        (folder / run).mkdir()
        paths.append(write_demo_dump(folder / run / "rollout_0.pt", n_samples=16, seed=seed))
    return paths


def test_two_runs_of_one_rollout_id_are_a_row_each(two_runs: list[Path]) -> None:
    both = tail_price(load_frames(two_runs))
    assert both.index.name == "rollout_id" and both.index.tolist() == [0, 0]
    assert both["dump"].tolist() == [0, 1]
    for dump, path in enumerate(two_runs):
        alone = tail_price(load_frames(path))
        assert alone["dump"].tolist() == [0]
        row = both[both["dump"] == dump]
        pd.testing.assert_frame_equal(row[list(TAIL_COLUMNS)], alone[list(TAIL_COLUMNS)])


def test_finish_order_restarts_in_each_dump(two_runs: list[Path]) -> None:
    order = finish_order(load_frames(two_runs))
    for dump, path in enumerate(two_runs):
        alone = finish_order(load_frames(path))
        mine = order[order["dump"] == dump]
        pd.testing.assert_frame_equal(mine.drop(columns="dump"), alone.drop(columns="dump"))


def test_an_eval_dump_and_another_of_its_id_keep_their_own_figures() -> None:
    paths = [FIXTURES / "rollout_eval_3.pt", FIXTURES / "legacy_v1_pd.pt"]
    frames = load_frames(paths)
    assert frames.rollout_ids == [3, 3]
    both = tail_price(frames)
    assert both.index.tolist() == [3, 3] and both["dump"].tolist() == [0, 1]
    assert both["samples"].tolist() == [(frames.samples["dump"] == dump).sum()
                                        for dump in (0, 1)]
    for dump, path in enumerate(paths):
        alone = tail_price(load_frames(path)).iloc[0]
        assert both.iloc[dump][list(TAIL_COLUMNS)].equals(alone[list(TAIL_COLUMNS)])
