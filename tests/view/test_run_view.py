"""The run overview: a table of a run dataset's dumps; a click opens one rollout."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

from slime_trace_widget import RunView
from slime_trace_widget.sources.dataset import convert
from slime_trace_widget.view.run_view import COLUMNS
from tests.sources.runs import copy_run


def make_run_dataset(folder: Path) -> Path:
    """Three dumps (rollout 0; rollout 3 train and eval) converted into ``folder/ds``."""
    convert(str(copy_run(folder) / "*.pt"), folder / "ds", progress=False)
    return folder / "ds"


def test_table_rows_are_the_trends(tmp_path: Path) -> None:
    view = RunView(make_run_dataset(tmp_path))
    rows = view.table.rows
    assert [(r["rollout_id"], r["dump_kind"]) for r in rows] == [(0, "train"), (3, "eval"),
                                                                  (3, "train")]
    assert [c["key"] for c in view.table.columns] == [key for _, key, _ in COLUMNS]
    assert rows[1]["samples"] == 22 and isinstance(rows[1]["samples"], int)
    assert [r["dump_file"] for r in rows] == ["rollout_0.pt", "rollout_eval_3.pt",
                                              "rollout_7.pt"]
    assert "dump_file" in [c["key"] for c in view.table.columns]
    assert view.table.title == "ds: 3 dumps"
    json.dumps(rows, allow_nan=False)  # what crosses to the browser
    assert view.children == (view.table,)


def test_a_click_opens_that_rollout_only(tmp_path: Path) -> None:
    view = RunView(make_run_dataset(tmp_path))
    view.table.chosen = {"rollout_id": 3, "dump_kind": "eval", "n": 1}
    assert view.timeline is not None and view.children == (view.table, view.timeline)
    assert len(view.timeline.samples) == 22
    assert view.timeline.frames.paths[0].endswith("rollout_eval_3.pt")
    view.table.chosen = {"rollout_id": "3; drop", "dump_kind": "eval"}  # ignored, not raised
    assert len(view.timeline.samples) == 22
    assert len(view.show_rollout(3).samples) == 8  # the train dump of rollout 3


def test_a_click_on_a_rollout_that_cannot_open_says_so_in_its_place(tmp_path: Path) -> None:
    """With where=, a rollout of no such sample raised inside the click's observer: the
    kernel only logged it, and the rollout shown before stayed as if it were clicked."""
    view = RunView(make_run_dataset(tmp_path), where="status = 'truncated'")
    view.table.chosen = {"rollout_id": 0, "dump_kind": "train", "n": 1}
    assert view.timeline is not None
    view.table.chosen = {"rollout_id": 3, "dump_kind": "eval", "n": 2}  # none truncated
    assert view.timeline is None and len(view.children) == 2
    message = view.children[1].value
    assert "rollout 3 (eval)" in message and "nothing in the dataset matches" in message
    assert "&#x27;truncated&#x27;" in message  # the condition's quotes, escaped


def test_a_click_opens_the_dump_of_its_row_only(tmp_path: Path) -> None:
    """Two runs' rollout_0.pt are two rows; a click on one opened both (16 samples
    under a row that says 8), as it opened every dump of that rollout id and kind."""
    import shutil

    import pytest

    from tests.sources.runs import FIXTURES, settle

    for run in ("runA", "runB"):
        (tmp_path / run).mkdir()
        shutil.copy(FIXTURES / "small.pt", tmp_path / run / "rollout_0.pt")
        settle(tmp_path / run / "rollout_0.pt")
    convert([str(tmp_path / run / "rollout_0.pt") for run in ("runA", "runB")],
            tmp_path / "ds", progress=False)
    view = RunView(tmp_path / "ds")
    rows = view.table.rows
    assert [row["dump_file"] for row in rows] == ["runA/rollout_0.pt", "runB/rollout_0.pt"]
    view.table.chosen = {key: rows[1][key] for key in ("rollout_id", "dump_kind", "dump_file")}
    assert len(view.timeline.samples) == rows[1]["samples"] == 8
    assert [Path(path).parent.name for path in view.timeline.frames.paths] == ["runB"]
    with pytest.raises(ValueError, match="RunView chooses kinds by the row clicked"):
        RunView(tmp_path / "ds", kinds=["eval"])


def test_rows_carry_the_ledger_and_the_tail(tmp_path: Path) -> None:
    view = RunView(make_run_dataset(tmp_path))
    keys = [key for _, key, _ in COLUMNS]
    for key in ("share_signal", "share_no_signal", "share_filtered", "finished_90",
                "saved_share"):
        assert key in keys
    for row, (_, trend) in zip(view.table.rows, view.trends.iterrows(), strict=True):
        assert row["share_signal"] == trend["share_signal"]
        assert row["finished_90"] == trend["finished_90"]
    eval_row = next(r for r in view.table.rows if r["dump_kind"] == "eval")
    assert eval_row["share_signal"] == 0.0 and eval_row["share_no_signal"] == 1.0


def test_a_rollout_replaced_by_a_click_is_closed_and_freed(tmp_path: Path) -> None:
    """Each click kept the timeline it replaced open, with its frames, for the life of
    the kernel; a click that cannot open a rollout closes the one shown too."""
    view = RunView(make_run_dataset(tmp_path), where="status = 'truncated'")
    view.table.chosen = {"rollout_id": 0, "dump_kind": "train", "n": 1}
    first = view.timeline
    assert first is not None and first.comm is not None
    gone = weakref.ref(first)
    view.table.chosen = {"rollout_id": 3, "dump_kind": "eval", "n": 2}  # none truncated
    assert first.comm is None  # closed
    del first
    gc.collect()
    assert gone() is None


def test_the_title_counts_dumps_not_rows() -> None:
    """A row is one rollout id of one dump: a dump of ids 5 and 6 is one dump in two rows."""
    import pandas as pd

    from slime_trace_widget.view.run_view import _title

    trends = pd.DataFrame({"dump_file": ["mixed.pt", "mixed.pt", "rollout_7.pt"]})
    assert _title("ds", trends) == "ds: 2 dumps in 3 rows"
    assert _title("ds", trends.iloc[:0]) == "ds: 0 dumps"
