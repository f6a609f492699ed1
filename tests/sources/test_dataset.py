"""The run dataset: convert (local pool and Ray), reruns, lazy opening, trends."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from slime_trace_widget import TraceTimeline, analysis
from slime_trace_widget.answers.plots import plot_rollout_trends
from slime_trace_widget.answers.trends import rollout_trends
from slime_trace_widget.cli import main as cli_main
from slime_trace_widget.sources.dataset import Manifest, convert, dump_kind, layout, open_dataset
from slime_trace_widget.sources.dumps import DumpError, save_dump
from slime_trace_widget.sources.dumps.files import load_trusted
from slime_trace_widget.sources.loading import load_frames
from tests.sources.runs import FIXTURES, copy_run
from tests.sources.runs import settle as _settle

CORE = ("samples", "span_core", "event_core", "segments")


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    return copy_run(tmp_path)


def _files(root: Path) -> dict[str, int]:
    """Every file of a dataset with its mtime (ns)."""
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns
            for p in root.rglob("*") if p.is_file()}


def _same_frames(got, expected) -> None:
    for name in CORE:
        pd.testing.assert_frame_equal(getattr(got, name), getattr(expected, name))
    for name in ("span_start_attrs", "span_end_attrs", "event_attrs"):
        assert getattr(got, name).dicts() == getattr(expected, name).dicts()
    assert (got.paths, got.rollout_ids, got.t0, got.t1) == \
        (expected.paths, expected.rollout_ids, expected.t0, expected.t1)


def test_dataset_reads_back_the_frames_of_its_dumps(run: Path, tmp_path: Path) -> None:
    report = convert(str(run / "*.pt"), tmp_path / "ds", progress=False)
    assert len(report.converted) == 3 and not report.failed
    expected = load_frames(sorted(str(p) for p in run.iterdir()))
    _same_frames(open_dataset(tmp_path / "ds"), expected)
    _same_frames(load_frames(tmp_path / "ds"), expected)  # the folder opens like a dump


def test_a_dataset_written_before_engine_traces_reads_as_the_dump_s(run: Path,
                                                                     tmp_path: Path) -> None:
    """Spans and events files without ``origin`` (written before engine traces were
    joined) read back as the dump's own, as the frames that wrote them."""
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    stripped = 0
    for table in ("spans", "events"):
        for part in (root / table).rglob("*.parquet"):
            pq.write_table(pq.read_table(part).drop_columns(["origin"]), part)
            stripped += 1
    assert stripped == 6
    expected = load_frames(sorted(str(p) for p in run.iterdir()))
    _same_frames(open_dataset(root), expected)
    assert set(open_dataset(root).span_core["origin"]) == {"dump"}


def test_train_and_eval_of_one_rollout_id_sit_side_by_side(run: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    names = sorted(p.name.split("-")[0] for p in (root / "spans" / "rollout_id=3").iterdir())
    assert names == ["rollout_7", "rollout_eval_3"]
    import duckdb

    kinds = duckdb.sql(f"select dump_file, dump_kind, count(*) from read_parquet("
                       f"'{root.as_posix()}/samples/*/*.parquet', hive_partitioning = true) "
                       "where rollout_id = 3 group by all order by 1").fetchall()
    assert kinds == [("rollout_7.pt", "train", 8), ("rollout_eval_3.pt", "eval", 22)]
    assert open_dataset(root, kinds=["eval"]).paths == [str(run / "rollout_eval_3.pt")]
    assert [dump_kind(n) for n in ("rollout_eval_3.pt", "eval_3.pt", "rollout_3.pt",
                                   "evaluate_3.pt")] == ["eval", "eval", "train", "train"]


def test_rerun_with_nothing_new_rewrites_nothing(run: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    before = _files(root)
    report = convert(str(run / "*.pt"), root, progress=False)
    assert len(report.unchanged) == 3 and not report.converted
    assert {k: v for k, v in _files(root).items() if k != "manifest.json"} == \
        {k: v for k, v in before.items() if k != "manifest.json"}
    os.utime(run / "rollout_0.pt")  # touched, same content: the hash says unchanged
    _settle(run / "rollout_0.pt")
    os.utime(run / "rollout_0.pt", (time.time() - 1800, time.time() - 1800))
    assert len(convert(str(run / "*.pt"), root, progress=False).unchanged) == 3


def test_a_changed_dump_rewrites_only_its_files(run: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    before = _files(root)
    changed = run / "rollout_0.pt"
    old_stem = Manifest.load(root).dumps[str(changed)]["stem"]
    samples = load_trusted(str(changed)).samples[:5]
    save_dump(changed, samples, rollout_id=12)  # fewer samples, another rollout id
    _settle(changed)
    report = convert(str(run / "*.pt"), root, progress=False)
    assert report.converted == [str(changed)] and report.removed_files == 7
    after = _files(root)
    stem = Manifest.load(root).dumps[str(changed)]["stem"]
    assert stem != old_stem  # written beside the earlier files, which then went
    for name, mtime in before.items():
        if old_stem in name:
            assert name not in after  # rollout id 0's files of this dump are gone
        elif name != "manifest.json":
            assert after[name] == mtime
    assert sorted(n for n in after if stem in n) == sorted(
        f"{t}/rollout_id=12/{stem}.parquet" for t in layout.TABLES)
    assert len(open_dataset(root, rollouts=[12]).samples) == 5


def test_a_dump_being_written_waits(run: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    fresh = run / "rollout_9.pt"
    shutil.copy(FIXTURES / "small.pt", fresh)  # mtime: now
    report = convert(str(run / "*.pt"), root, progress=False)
    assert report.in_progress == [str(fresh)] and str(fresh) not in Manifest.load(root).dumps
    report = convert(str(run / "*.pt"), root, progress=False, settle_seconds=0)
    assert report.converted == [str(fresh)]


def test_a_failing_dump_is_recorded_and_retried(run: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    broken = run / "rollout_5.pt"
    broken.write_bytes(b"PK\x03\x04 not a zip at all" * 10)
    _settle(broken)
    with pytest.warns(RuntimeWarning, match="rollout_5") as said:
        report = convert(str(run / "*.pt"), root, progress=False)
    assert str(said[0].message).count("rollout_5.pt") == 1, "the file named once"
    assert [path for path, _ in report.failed] == [str(broken)] and len(report.converted) == 3
    entry = Manifest.load(root).dumps[str(broken)]
    assert entry["status"] == "failed" and "rollout_5.pt" in entry["error"]
    with pytest.warns(RuntimeWarning):
        failed = convert(str(run / "*.pt"), root, progress=False).failed
    assert [p for p, _ in failed] == [str(broken)]
    shutil.copy(FIXTURES / "small.pt", broken)
    _settle(broken)
    assert convert(str(run / "*.pt"), root, progress=False).converted == [str(broken)]


def test_converting_leaves_the_dumps_alone(run: Path, tmp_path: Path) -> None:
    def state() -> dict:
        return {p.name: (hashlib.blake2b(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
                for p in run.iterdir()}

    before = state()
    convert(str(run / "*.pt"), tmp_path / "ds", progress=False)
    convert(str(run / "*.pt"), tmp_path / "ds", progress=False)
    assert state() == before


def test_opening_reads_only_the_rollouts_asked_for(run: Path, tmp_path: Path,
                                                   monkeypatch) -> None:
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    read: list[str] = []
    real = layout.pq.read_table
    monkeypatch.setattr(layout.pq, "read_table",
                        lambda path, *a, **k: read.append(str(path)) or real(path, *a, **k))
    frames = open_dataset(root, rollouts=[0])
    assert read and all("rollout_id=0" in path for path in read)
    assert set(frames.samples["rollout_id"]) == {0}
    timeline = TraceTimeline.from_dataset(root, [3], where="status = 'completed'")
    assert set(timeline.samples["status"]) == {"completed"}
    assert set(timeline.samples["rollout_id"]) == {3}
    with pytest.raises(ValueError, match="where="):
        open_dataset(root, where="no_such_column = 1")
    with pytest.raises(DumpError, match="nothing in the dataset matches"):
        open_dataset(root, rollouts=[99])
    with pytest.raises(DumpError, match=r"\(rollouts=\[\], "):  # not "rollouts=all"
        open_dataset(root, rollouts=[])


def test_damaged_dataset_files_are_skipped_with_a_warning(run: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    stem = Manifest.load(root).dumps[str(run / "rollout_0.pt")]["stem"]
    (root / "spans" / "rollout_id=0" / f"{stem}.parquet").write_bytes(b"PAR1 garbage")
    with pytest.warns(RuntimeWarning, match="rollout_0.pt"):
        frames = open_dataset(root)
    assert [path for path, _ in frames.failures] == [str(run / "rollout_0.pt")]
    assert len(frames.samples) == 30


def test_trends_over_the_dataset_match_the_frames(run: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    trends = rollout_trends(root)
    frames = load_frames(sorted(str(p) for p in run.iterdir()))
    pd.testing.assert_frame_equal(trends, rollout_trends(frames), check_dtype=False)
    assert trends[["rollout_id", "dump_kind", "dump_file"]].values.tolist() == [
        [0, "train", "rollout_0.pt"], [3, "eval", "rollout_eval_3.pt"],
        [3, "train", "rollout_7.pt"]]
    samples = frames.samples
    first = samples[samples["dump"] == 0]
    row = trends.iloc[0]
    assert row["samples"] == len(first)
    assert row["truncated"] == (first["status"] == "truncated").sum()
    assert np.isclose(row["duration_p95"], first["duration"].quantile(0.95))
    assert np.isclose(row["straggler_share"],
                      (first["duration"] > 2 * first["duration"].median()).mean())
    assert {"pd_transfer_mb", "tool_errors", "sglang_generate_p50"} <= set(trends.columns)
    pd.testing.assert_frame_equal(analysis.rollout_trends(root), trends)
    matplotlib.use("Agg")
    ax = plot_rollout_trends(trends, ["duration_p95", "wall_s"])
    assert len(ax.get_lines()) == 4  # two columns, train and eval apart


@pytest.fixture()
def missing_numbers(tmp_path: Path) -> tuple[Path, Path]:
    """Dumps whose untraced samples, dict rewards and open spans leave numbers missing
    (NaN in the frames and in the dataset's Parquet), and their dataset."""
    folder = tmp_path / "debug"
    folder.mkdir()
    for name, fixture in (("rollout_7.pt", "edge_untraced_mixed.pt"),
                          ("rollout_8.pt", "edge_open_span.pt"),
                          ("rollout_9.pt", "edge_weird_values.pt")):
        shutil.copy(FIXTURES / fixture, folder / name)
    _settle(*folder.iterdir())
    root = tmp_path / "ds"
    convert(str(folder / "*.pt"), root, progress=False)
    return folder, root


def test_trends_over_a_dataset_of_missing_numbers_match_the_frames(
        missing_numbers: tuple[Path, Path]) -> None:
    """DuckDB ordered the dataset's NaN above every number, so its wall time, duration
    figures and heaviest span names came out NaN or wrong where the frames' (NULL to
    DuckDB) were right."""
    folder, root = missing_numbers
    trends = rollout_trends(root, heaviest=5)
    frames = load_frames(sorted(str(p) for p in folder.iterdir()))
    pd.testing.assert_frame_equal(trends, rollout_trends(frames, heaviest=5),
                                  check_dtype=False)
    assert trends[["wall_s", "duration_p50", "duration_max"]].notna().all().all()


@pytest.mark.parametrize(("where", "holds"), [
    ("reward > 0", lambda s: s["reward"] > 0),
    ("reward is null", lambda s: s["reward"].isna()),
    ("duration > 5", lambda s: s["duration"] > 5),
    ("duration is null", lambda s: s["duration"].isna()),
])
def test_where_on_a_dataset_reads_a_missing_number_as_null(
        missing_numbers: tuple[Path, Path], where: str, holds) -> None:
    """``reward > 0`` kept samples without a reward, and ``reward is null`` found none."""
    folder, root = missing_numbers
    every = load_frames(sorted(str(p) for p in folder.iterdir())).samples
    expected = every[holds(every).to_numpy()]
    assert len(expected) and len(expected) < len(every)
    got = load_frames(str(root), where=where).samples

    def keys(samples: pd.DataFrame) -> list[tuple[int, int]]:
        return sorted(zip(samples["rollout_id"].fillna(-1).astype(int),
                          samples["sample_index"].astype(int), strict=True))

    assert keys(got) == keys(expected)


def test_a_span_name_with_a_double_quote_gets_its_trend_columns(tmp_path: Path) -> None:
    """The name went into the SQL as a column alias: a quote in it was a parser error."""
    samples = load_trusted(str(FIXTURES / "small.pt")).samples
    for sample in samples:
        for record in sample["trace"]["events"]:
            if record.get("name") == "sglang_generate":
                record["name"] = 'sglang_generate "v2"'
    path = Path(save_dump(tmp_path / "rollout_0.pt", samples, rollout_id=0))
    frames = load_frames([str(path)])
    trends = rollout_trends(frames, heaviest=50)
    quoted = frames.span_core["name"] == 'sglang_generate "v2"'
    assert quoted.any()
    assert np.isclose(trends.loc[0, 'sglang_generate "v2"_p50'],
                      frames.span_core.loc[quoted, "duration"].median())


def test_cli_convert(run: Path, tmp_path: Path, capsys) -> None:
    # the first dump named a second time, spelled otherwise: converted once
    again = os.path.join(str(run), ".", "rollout_0.pt")
    assert cli_main(["convert", str(run / "*.pt"), again, "--out", str(tmp_path / "ds")]) == 0
    assert "3 converted" in capsys.readouterr().out
    assert cli_main(["convert", str(run / "*.pt"), "--out", str(tmp_path / "ds")]) == 0
    assert "3 unchanged" in capsys.readouterr().out


@pytest.fixture(scope="session")
def local_ray():
    ray = pytest.importorskip("ray")
    for attempt in range(3):  # Ray gives its node 30 s to start: a busy machine may need more
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    yield ray
    ray.shutdown()


def test_ray_engine_writes_the_same_dataset(run: Path, tmp_path: Path, local_ray) -> None:
    convert(str(run / "*.pt"), tmp_path / "local", progress=False)
    report = convert(str(run / "*.pt"), tmp_path / "ray", engine="ray")
    assert len(report.converted) == 3 and not report.failed
    local, remote = _files(tmp_path / "local"), _files(tmp_path / "ray")
    assert sorted(local) == sorted(remote)
    _same_frames(open_dataset(tmp_path / "ray"), open_dataset(tmp_path / "local"))
    for name in local:
        if name.endswith(".parquet"):  # same files, value for value (NaN rewards included)
            ours, theirs = (layout.pq.read_table(tmp_path / side / name)
                            for side in ("local", "ray"))
            assert ours.schema.equals(theirs.schema, check_metadata=True), name
            pd.testing.assert_frame_equal(ours.to_pandas(), theirs.to_pandas(), obj=name)
