"""A convert cut short leaves only the files its manifest lists: one interrupted (a real
SIGINT while the next dump's worker writes) removes the files of the conversions it did
not record, and the next convert removes what one killed outright left, never a file the
manifest lists nor one not of the dataset's own naming.

The dumps are the shared run's fixtures (``tests.sources.runs``), converted by the local
worker pool; the leftovers of a convert killed outright are laid down as its workers
name them.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from slime_trace_widget.sources.dataset import Manifest, conversion, convert, open_dataset
from tests.sources.runs import copy_run

#: Generous bound on any wait of these tests: a guard against a hang, not a timing.
HANG_GUARD_SECONDS = 120


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return copy_run(tmp_path)


def convert_run(run: Path, root: Path):
    return convert(str(run / "*.pt"), root, progress=False, workers=1, warn_failures=False)


def files_on_disk(root: Path) -> set[str]:
    """Every file in the dataset's folders (its Parquet files, and any temporary file)."""
    return {path.relative_to(root).as_posix() for path in root.rglob("*")
            if path.is_file() and path.parent != root}


def files_listed(root: Path) -> set[str]:
    return {name for entry in Manifest.load(root).dumps.values() for name in entry["files"]}


def samples_globbed(root: Path) -> int:
    """The samples a reader outside the package counts by globbing the folders."""
    glob = (root / "samples" / "*" / "*.parquet").as_posix()
    with duckdb.connect() as db:
        return db.execute("select count(*) from read_parquet($glob)",
                          {"glob": glob}).fetchall()[0][0]


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)


def test_a_convert_interrupted_while_a_dump_is_written_removes_its_files(
        run: Path, tmp_path: Path, monkeypatch) -> None:
    """``timeout -s INT 9 ... convert`` of 62 MB demo dumps: the manifest listed 3 dumps
    while the files of a 4th (and a ``.tmp``) stayed, and DuckDB's glob of
    ``samples/*/*.parquet`` counted 1024 samples against the manifest's 768."""
    root = tmp_path / "ds"
    real = conversion.convert_in_workers
    started: list[str] = []

    def interrupted_after_the_first(paths: list[str], out: str, stems: list[str], *,
                                    on_done: Callable[[str, dict], None],
                                    **options: Any) -> None:
        stem_of = dict(zip(paths, stems, strict=True))

        def first_then_ctrl_c(path: str, verdict: dict) -> None:
            on_done(path, verdict)  # the first dump is recorded
            others = set(stems) - {stem_of[path]}

            def next_one_writing() -> bool:
                started[:] = sorted({stem for stem in others for name in files_on_disk(root)
                                     if stem in name})
                return bool(started)

            # the pool sent the next dump before telling of this one: its worker writes
            wait_until(next_one_writing, "the next dump's worker to write a file")
            os.kill(os.getpid(), signal.SIGINT)

        real(paths, out, stems, on_done=first_then_ctrl_c, **options)

    monkeypatch.setattr(conversion, "convert_in_workers", interrupted_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        convert_run(run, root)
    monkeypatch.undo()
    assert started, "the next dump's conversion was under way"
    (entry,) = Manifest.load(root).converted()
    assert files_on_disk(root) == files_listed(root) == set(entry["files"])
    assert samples_globbed(root) == entry["samples"] == len(open_dataset(root).samples)
    report = convert_run(run, root)
    assert len(report.converted) == 2 and len(report.unchanged) == 1 and not report.failed
    assert files_on_disk(root) == files_listed(root)
    assert samples_globbed(root) == len(open_dataset(root).samples)


def test_the_next_convert_removes_what_a_convert_killed_outright_left(
        run: Path, tmp_path: Path) -> None:
    """A worker killed mid-write (SIGKILL: no cleanup runs) leaves its ``.tmp`` file; a
    convert killed after recording a dump again, its earlier files; one killed between
    its dumps, their files: a successful rerun kept them all for good (the ``.tmp`` of
    the repro outlived the rerun). The manifest's files and anything not of the
    dataset's naming stay, and a reader of the manifest reads what it read."""
    root = tmp_path / "ds"
    convert_run(run, root)
    before = open_dataset(root)
    listed = files_listed(root)
    entry = Manifest.load(root).converted()[0]
    stem, rollout = entry["stem"], entry["rollouts"][0]
    folder = root / "samples" / f"rollout_id={rollout}"
    data = (folder / f"{stem}.parquet").read_bytes()
    unlisted_stem = "rollout_9-0123456789abcdef"
    leftovers = [
        folder / f".{stem}.parquet.0f1e2d3c4b5a6978.tmp",  # a worker killed mid-write
        root / "spans" / "rollout_id=9" / f".{unlisted_stem}.parquet.89abcdef01234567.tmp",
        root / "samples" / "rollout_id=9" / f"{unlisted_stem}.parquet",  # never recorded
        root / "engine_skew" / f"{unlisted_stem}.parquet",
        folder / "rollout_0-fedcba9876543210.parquet",  # replaced, not removed yet
        root / ".manifest.json.00112233445566aa.tmp",  # a save killed
    ]
    kept = [
        folder / "notes.parquet",  # a user's files, in the dataset's folders or beside
        folder / "rollout_0-1a2b3c4d.parquet",  # a to_parquet export's name
        folder / ".cache.tmp",
        root / "samples" / "extra" / f"{unlisted_stem}.parquet",  # no rollout folder
        root / f"{unlisted_stem}.parquet",
    ]
    for path in leftovers + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    assert samples_globbed(root) > len(before.samples)
    report = convert_run(run, root)
    assert [path for path in leftovers if path.exists()] == []
    assert all(path.exists() for path in kept)
    assert files_on_disk(root) == listed | {path.relative_to(root).as_posix() for path in kept
                                            if path.parent != root}
    assert len(report.unchanged) == 3 and not report.converted and not report.failed
    assert report.leftovers == len(leftovers)
    assert f"removed {len(leftovers)} file(s) an interrupted convert left" in report.summary()
    after = open_dataset(root)
    assert after.paths == before.paths and len(after.samples) == len(before.samples)
    assert convert_run(run, root).leftovers == 0


def test_without_a_manifest_only_temporary_files_go(run: Path, tmp_path: Path) -> None:
    """Data files in a folder without a manifest may be a dataset whose manifest was lost
    or moved: a convert there removes their temporary files only."""
    root = tmp_path / "ds"
    convert_run(run, root)
    (root / "manifest.json").rename(tmp_path / "manifest.json")
    entry = Manifest.load(tmp_path).converted()[0]
    data_file = root / entry["files"][0]
    temporary = data_file.with_name(f".{data_file.name}.0f1e2d3c4b5a6978.tmp")
    temporary.write_bytes(b"PAR1")
    report = convert([str(run / "rollout_eval_3.pt")], root, progress=False, workers=1)
    assert not temporary.exists()
    assert all((root / name).exists() for name in files_listed(tmp_path))
    assert report.leftovers == 1


def test_a_stop_right_after_the_manifest_is_saved_keeps_what_it_lists(
        run: Path, tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C landing once a dump's save has put the manifest in place, before the
    convert noted the dump recorded: the cleanup of unrecorded conversions removed the
    files that manifest lists, and the dataset read files that were gone."""
    root = tmp_path / "ds"
    real_save = Manifest.save

    def save_then_ctrl_c(manifest: Manifest) -> None:
        real_save(manifest)
        raise KeyboardInterrupt

    monkeypatch.setattr(Manifest, "save", save_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        convert_run(run, root)
    monkeypatch.undo()
    listed = files_listed(root)
    assert listed and all((root / name).is_file() for name in listed)
    assert len(open_dataset(root).samples) == samples_globbed(root)


def test_the_sweep_never_reaches_through_a_linked_folder(run: Path, tmp_path: Path) -> None:
    """A table's rollout folder that is a link into another dataset: that dataset's
    files, unlisted here, are not this one's leftovers."""
    root = tmp_path / "ds"
    convert_run(run, root)
    elsewhere = tmp_path / "other" / "samples" / "rollout_id=9"
    elsewhere.mkdir(parents=True)
    theirs = elsewhere / "rollout_9-0123456789abcdef.parquet"
    theirs.write_bytes(b"PAR1")
    (root / "samples" / "rollout_id=9").symlink_to(elsewhere, target_is_directory=True)
    report = convert_run(run, root)
    assert theirs.exists() and report.leftovers == 0
