"""Parquet export of several dumps into one folder: each dump keeps its own files, rows
say which dump they came from, and every file is written whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from slime_trace_widget.export.parquet import to_parquet
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.whole_files import TEMPORARY_SUFFIX

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: A train and an eval dump of the same rollout id (3), named as slime names them.
RUN = {"rollout_7.pt": "legacy_v1_pd.pt", "rollout_eval_3.pt": "rollout_eval_3.pt"}
TABLES = ("samples", "spans", "events", "segments")


@pytest.fixture
def dumps(tmp_path: Path) -> list[Path]:
    paths = []
    for name, fixture in RUN.items():
        paths.append(tmp_path / "debug" / name)
        paths[-1].parent.mkdir(exist_ok=True)
        shutil.copyfile(FIXTURES / fixture, paths[-1])
    return paths


def read_back(root: Path, table: str) -> list[tuple]:
    """(rollout_id, dump_kind, dump_file, rows) of ``table`` as DuckDB reads the folder."""
    return duckdb.sql(
        f"select rollout_id, dump_kind, dump_file, count(*) from read_parquet("
        f"'{root}/{table}/*/*.parquet', hive_partitioning=true) group by all order by all"
    ).fetchall()


def row_counts(frames: TraceFrames) -> dict[str, int]:
    return {"samples": len(frames.samples), "spans": len(frames.spans),
            "events": len(frames.events), "segments": len(frames.segments)}


def test_a_train_and_an_eval_dump_of_one_rollout_keep_every_row(dumps, tmp_path) -> None:
    root = tmp_path / "pq"
    train, evaluation = (load_frames([path]) for path in dumps)
    assert train.rollout_ids == evaluation.rollout_ids == [3]
    to_parquet(train, root)
    to_parquet(evaluation, root)
    for table in TABLES:
        expected = [(3, kind, name, row_counts(frames)[table])
                    for kind, name, frames in (("eval", "rollout_eval_3.pt", evaluation),
                                               ("train", "rollout_7.pt", train))
                    if row_counts(frames)[table]]
        assert read_back(root, table) == expected, table
    files = sorted(path.name for path in (root / "spans" / "rollout_id=3").iterdir())
    assert len(files) == 2 and files[0].startswith("rollout_7-")
    assert files[1].startswith("rollout_eval_3-")


def test_dumps_loaded_together_get_a_file_each(dumps, tmp_path) -> None:
    frames = load_frames(dumps)
    root = to_parquet(frames, tmp_path / "pq")
    assert sum(rows for *_, rows in read_back(root, "spans")) == len(frames.spans)
    assert {kind for _, kind, _, _ in read_back(root, "samples")} == {"train", "eval"}
    assert len(list((root / "samples" / "rollout_id=3").iterdir())) == 2


def test_exporting_a_dump_again_replaces_its_own_files_whole(dumps, tmp_path) -> None:
    frames = load_frames([dumps[0]])
    root = tmp_path / "pq"
    to_parquet(frames, root)
    first = sorted(root.rglob("*"))
    to_parquet(frames, root)
    assert sorted(root.rglob("*")) == first  # the same files, none left half-written
    assert not [path for path in first if path.name.endswith(TEMPORARY_SUFFIX)]
    assert read_back(root, "spans") == [(3, "train", "rollout_7.pt", len(frames.spans))]


def test_two_runs_dumps_of_one_name_do_not_collide(tmp_path) -> None:
    paths = []
    for run in ("runA", "runB"):
        paths.append(tmp_path / run / "rollout_7.pt")
        paths[-1].parent.mkdir()
        shutil.copyfile(FIXTURES / "legacy_v1_pd.pt", paths[-1])
    root = tmp_path / "pq"
    for path in paths:
        to_parquet(load_frames([path]), root)
    frames = load_frames([paths[0]])
    assert read_back(root, "spans") == [(3, "train", "rollout_7.pt", 2 * len(frames.spans))]


def test_every_dump_gets_every_table_and_the_folder_reads_as_one(tmp_path) -> None:
    """An empty dump wrote no file at all (the command said it wrote a folder it never
    made) and a dump without segments no segments/ file; and two exports whose
    attributes differ (a column one dump lacks, an int in one and a float in the other)
    read as one table only by column name, as the docstring now says."""
    from tests.frames.test_frames import frames_of, rec, sample

    empty = load_frames([FIXTURES / "edge_empty.pt"])
    to_parquet(empty, tmp_path / "empty")
    for table in TABLES:
        (file,) = (tmp_path / "empty" / table).glob("*/*.parquet")
        assert duckdb.sql(f"select count(*) from '{file}'").fetchall() == [(0,)]

    def one(rollout: int, value: float | int, extra: dict) -> TraceFrames:
        frames = frames_of(sample(rec("span_start", "tool", 0, "a", attrs={"x": value, **extra}),
                                  rec("span_end", "tool", 1, "a")))
        frames.rollout_ids = [rollout]
        frames.samples["rollout_id"] = rollout
        return frames

    folder = tmp_path / "run"
    to_parquet(one(1, 1, {}), folder)
    to_parquet(one(2, 1.5, {"tool": "search"}), folder)
    rows = duckdb.sql(
        f"select rollout_id, \"attr.x\", \"attr.tool\" from read_parquet("
        f"'{folder}/spans/*/*.parquet', hive_partitioning = true, union_by_name = true) "
        "order by rollout_id").fetchall()
    assert rows == [(1, 1.0, None), (2, 1.5, "search")]
    joined = duckdb.sql(
        f"select count(*) from read_parquet('{folder}/samples/*/*.parquet', "
        "hive_partitioning = true, union_by_name = true) s join read_parquet("
        f"'{folder}/spans/*/*.parquet', hive_partitioning = true, union_by_name = true) p "
        "on s.rollout_id = p.rollout_id and s.dump_file = p.dump_file "
        "and s.row = p.sample_row").fetchall()
    assert joined == [(2,)]


def test_an_eval_dump_in_a_folder_of_its_own_exports_as_eval(tmp_path) -> None:
    """slime's template ``{rollout_id}/data.pt`` saves evaluation at ``eval_3/data.pt``:
    its rows say eval, the training dump's ``3/data.pt`` train."""
    for folder in ("eval_3", "3"):
        (tmp_path / "debug" / folder).mkdir(parents=True)
        shutil.copyfile(FIXTURES / "rollout_eval_3.pt", tmp_path / "debug" / folder / "data.pt")
    frames = load_frames([tmp_path / "debug" / folder / "data.pt" for folder in ("eval_3", "3")])
    root = to_parquet(frames, tmp_path / "pq")
    assert read_back(root, "samples") == [(3, "eval", "data.pt", 22), (3, "train", "data.pt", 22)]
