"""Reading the run dataset back: damaged files skipped, dumps of several rollout ids
in their own order, samples without a rollout id in ``where``."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from slime_trace_widget.sources.dataset import Manifest, convert, open_dataset
from slime_trace_widget.sources.dumps import DumpError, save_dump
from slime_trace_widget.sources.dumps.files import load_trusted
from slime_trace_widget.sources.loading import load_frames
from tests.sources.runs import FIXTURES, copy_run, settle

CORE = ("samples", "span_core", "event_core", "segments")
#: Rollout ids given to a mixed dump's samples in turn (None: the sample has none).
MIXED_ROLLOUTS = (5, 6, None)


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    return copy_run(tmp_path)


@pytest.fixture()
def mixed(tmp_path: Path) -> Path:
    """A dump whose samples hold rollout ids 5, 6 and none, in turn."""
    samples = load_trusted(str(FIXTURES / "legacy_v1_pd.pt")).samples
    for i, sample in enumerate(samples):
        sample["rollout_id"] = MIXED_ROLLOUTS[i % len(MIXED_ROLLOUTS)]
    path = tmp_path / "mixed" / "rollout_mixed.pt"
    path.parent.mkdir()
    save_dump(path, samples, rollout_id=None)
    settle(path)
    return path


def _part(root: Path, table: str, dump: Path) -> Path:
    stem = Manifest.load(root).dumps[str(dump)]["stem"]
    return root / table / "rollout_id=0" / f"{stem}.parquet"


def test_a_samples_file_with_other_columns_is_skipped(run: Path, tmp_path: Path) -> None:
    """A valid Parquet file with the wrong columns is damage like any other."""
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    dump = run / "rollout_0.pt"
    shutil.copy(_part(root, "events", dump), _part(root, "samples", dump))
    with pytest.warns(RuntimeWarning, match="rollout_0.pt"):
        frames = open_dataset(root)
    assert [path for path, _ in frames.failures] == [str(dump)]
    assert len(frames.samples) == 30


def test_a_damaged_samples_file_under_where_is_skipped_not_blamed_on_the_condition(
        run: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    dump = run / "rollout_0.pt"
    samples = _part(root, "samples", dump)
    samples.write_bytes(samples.read_bytes()[: samples.stat().st_size // 2])
    with pytest.warns(RuntimeWarning, match="rollout_0.pt"):
        frames = open_dataset(root, where="reward > -1e9 or reward is null")
    assert [path for path, _ in frames.failures] == [str(dump)]
    assert str(samples) in frames.failures[0][1]
    assert len(frames.samples) == 30
    with pytest.raises(ValueError, match="where="):  # the condition's own error still is
        open_dataset(root, where="no_such_column = 1")


def test_a_dump_of_several_rollout_ids_reads_back_in_its_own_order(mixed: Path,
                                                                   tmp_path: Path) -> None:
    root = tmp_path / "ds"
    assert convert(str(mixed), root, progress=False).converted == [str(mixed)]
    got, expected = open_dataset(root), load_frames([str(mixed)])
    assert len(expected.segments) and expected.samples["rollout_id"].isna().any()
    for name in CORE:
        pd.testing.assert_frame_equal(getattr(got, name), getattr(expected, name))
    for name in ("span_start_attrs", "span_end_attrs", "event_attrs"):
        assert getattr(got, name).dicts() == getattr(expected, name).dicts()


def test_where_sees_samples_without_a_rollout_id_as_null(mixed: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    convert(str(mixed), root, progress=False)
    expected = load_frames([str(mixed)]).samples
    none = open_dataset(root, where="rollout_id is null").samples
    assert len(none) == expected["rollout_id"].isna().sum() > 0
    assert none["rollout_id"].isna().all()
    assert len(open_dataset(root, where="rollout_id = 5").samples) == \
        (expected["rollout_id"] == 5).sum()
    with pytest.raises(DumpError, match="nothing in the dataset matches"):
        open_dataset(root, where="rollout_id = -1")


def test_a_caller_that_reports_failures_itself_gets_no_warning(run: Path,
                                                                tmp_path: Path) -> None:
    """``warn_failures=False`` lists the damaged dump in ``frames.failures`` and warns
    of nothing, whether the folder is read through ``load_frames`` or directly."""
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    dump = run / "rollout_0.pt"
    shutil.copy(_part(root, "events", dump), _part(root, "samples", dump))
    for read in (lambda: load_frames(root, warn_failures=False),
                 lambda: open_dataset(root, warn_failures=False)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            frames = read()
        assert [path for path, _ in frames.failures] == [str(dump)]


def test_a_dump_without_samples_keeps_its_rollout_and_reads_back(run: Path,
                                                                 tmp_path: Path) -> None:
    """Filed under the rollout id the dump names (as ``to_parquet`` files it), not -1,
    and read back as the empty frames it was written from, not left out."""
    empty = run / "rollout_7.pt"
    save_dump(empty, [], rollout_id=7)
    settle(empty)
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    entry = next(entry for name, entry in Manifest.load(root).dumps.items()
                 if name.endswith("rollout_7.pt"))
    assert entry["rollouts"] == [7]
    alone = open_dataset(root, dumps=[empty.name])
    assert (len(alone.samples), alone.rollout_ids) == (0, [7])
    everything = open_dataset(root)
    expected = load_frames(sorted(str(p) for p in run.iterdir()))
    assert (everything.paths, everything.rollout_ids) == (expected.paths, expected.rollout_ids)
    assert len(everything.samples) == len(expected.samples)


def test_a_parent_folder_named_like_a_column_changes_nothing(run: Path, tmp_path: Path) -> None:
    """DuckDB's hive partitioning made each ``key=value`` folder of the path a column:
    under ``status=old/reward=dapo/`` every sample read as status ``old`` (trends counted
    no truncated sample), and ``reward > 0.5`` failed on the text ``dapo``."""
    from slime_trace_widget.answers.trends import rollout_trends

    plain, named = tmp_path / "plain", tmp_path / "status=old" / "reward=dapo" / "ds"
    for root in (plain, named):
        convert(str(run / "*.pt"), root, progress=False, workers=1)
    columns = ["rollout_id", "samples", "truncated", "share_signal"]
    assert rollout_trends(named)[columns].equals(rollout_trends(plain)[columns])
    assert int(rollout_trends(named)["truncated"].sum()) > 0
    for where in ("status = 'truncated'", "reward > 0.5", "rollout_id = 3"):
        expected = open_dataset(plain, where=where).samples
        found = open_dataset(named, where=where).samples
        assert found[["status", "reward"]].equals(expected[["status", "reward"]]), where


def test_a_condition_reads_the_dataset_and_no_other_file(run: Path, tmp_path: Path) -> None:
    """``where`` filters the dataset's samples: it read any file DuckDB can (a secret
    echoed back in a failed cast's message), listed folders and could install
    extensions."""
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False, workers=1)
    secret = tmp_path / "secret.csv"
    secret.write_text("name,value\ntoken,hunter2\n")
    for where in (f"cast((select value from read_csv('{secret}')) as int) > 0",
                  f"(select count(*) from glob('{tmp_path}/*')) > 0",
                  f"(select count(*) from read_parquet('{root}/samples/*/*.parquet')) > 0"):
        with pytest.raises(ValueError, match="Permission Error") as refused:
            open_dataset(root, where=where)
        assert "hunter2" not in str(refused.value)
    assert len(open_dataset(root, where="status = 'truncated'").samples) > 0


def test_one_kind_dump_or_rollout_is_a_selection_of_one(run: Path, tmp_path: Path) -> None:
    """``kinds="eval"`` was the set of its letters and matched nothing, ``rollouts=3``
    raised a TypeError, and the message named neither ``kinds`` nor ``dumps``."""
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False, workers=1)
    assert [Path(path).name for path in open_dataset(root, kinds="eval").paths] == [
        "rollout_eval_3.pt"]
    assert len(open_dataset(root, rollouts=3).samples) == len(
        open_dataset(root, rollouts=[3]).samples) > 0
    assert len(open_dataset(root, dumps="rollout_0.pt").paths) == 1
    with pytest.raises(ValueError, match=r"kinds=\['evaluation'\]: a dump's kind is one of"):
        open_dataset(root, kinds=["evaluation"])
    with pytest.raises(DumpError, match=r"dumps=\['rollout_9.pt'\] of \["):
        open_dataset(root, dumps=["rollout_9.pt"])


def test_a_dump_named_with_a_backslash_keeps_its_rollout_id(run: Path, tmp_path: Path) -> None:
    """The rollout id is read from the file's rollout_id=N folder; a backslash in a dump's
    name (a character like any other on POSIX) made the read fail for the whole dataset."""
    from slime_trace_widget.answers.trends import rollout_trends

    odd = run / "rollout\\9.pt"
    shutil.copy(run / "rollout_0.pt", odd)
    settle(odd)
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False, workers=1)
    assert len(open_dataset(root, where="rollout_id >= 0").samples) == len(
        open_dataset(root).samples)
    assert len(rollout_trends(root)) == 4
