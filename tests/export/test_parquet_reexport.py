"""Exporting a dump to Parquet again leaves the folder holding it once: after its rollout
id changed, the files of its old rollout id partition go (the folder held the dump
twice, under both ids). Other dumps' files in the folder stay.

The dumps are demo dumps, saved as slime saves them (``slime-trace-viewer demo``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.export.parquet import to_parquet
from slime_trace_widget.sources.loading import load_frames

TABLES = ("samples", "spans", "events", "segments")


def rows(root: Path, table: str) -> list[tuple]:
    return duckdb.sql(
        f"select rollout_id, dump_file, count(*) from read_parquet('{root}/{table}/*/*.parquet',"
        " hive_partitioning = true, union_by_name = true) group by all order by all").fetchall()


def test_a_dump_exported_again_under_another_rollout_id_is_in_the_folder_once(
        tmp_path: Path) -> None:
    dump = write_demo_dump(tmp_path / "rollout_x.pt", n_samples=8, seed=6, rollout_id=0)
    other = write_demo_dump(tmp_path / "rollout_y.pt", n_samples=4, seed=2, rollout_id=0)
    root = tmp_path / "pq"
    to_parquet(load_frames([other]), root)
    to_parquet(load_frames([dump]), root)
    write_demo_dump(dump, n_samples=8, seed=6, rollout_id=6)
    to_parquet(load_frames([dump]), root)
    assert rows(root, "samples") == [(0, "rollout_y.pt", 4), (6, "rollout_x.pt", 8)]
    for table in TABLES:
        found = sorted((p.parent.name, p.name.split("-")[0])
                       for p in (root / table).glob("*/*.parquet"))
        assert found == [("rollout_id=0", "rollout_y"), ("rollout_id=6", "rollout_x")], table
