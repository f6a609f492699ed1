"""The run dataset's converts: one at a time per folder, renamed and deleted dumps,
and the memory a Ray task asks for."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from slime_trace_widget.sources.dataset import Manifest, conversion, convert, open_dataset
from slime_trace_widget.sources.dumps import DumpError
from slime_trace_widget.sources.dumps.pool import expected_peak
from slime_trace_widget.sources.loading import load_frames
from tests.sources.runs import FIXTURES, copy_run, settle

#: Generous bound on any wait of these tests: a guard against a hang, not a timing.
HANG_GUARD_SECONDS = 300


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    return copy_run(tmp_path)


def test_a_second_convert_into_a_busy_folder_is_refused_and_nothing_is_lost(
        run: Path, tmp_path: Path, monkeypatch) -> None:
    """While one convert runs, another into the same folder fails at once naming the
    folder; run afterwards, it adds its dumps, and the manifest holds every dump."""
    root = (tmp_path / "ds").resolve()
    first = [str(run / "rollout_0.pt"), str(run / "rollout_7.pt")]
    second = [str(run / "rollout_eval_3.pt")]
    entered, release = threading.Event(), threading.Event()
    real = conversion.convert_in_workers
    holder: list[threading.Thread] = []

    def held_open(*args, **kwargs):  # the first convert waits mid-way for the second
        if threading.current_thread() in holder:
            entered.set()
            assert release.wait(HANG_GUARD_SECONDS)
        return real(*args, **kwargs)

    monkeypatch.setattr(conversion, "convert_in_workers", held_open)
    reports: list = []
    thread = threading.Thread(target=lambda: reports.append(
        convert(first, root, progress=False)))
    holder.append(thread)
    thread.start()
    try:
        assert entered.wait(HANG_GUARD_SECONDS)
        with pytest.raises(DumpError, match="another convert") as refused:
            convert(second, root, progress=False)
        assert str(root) in str(refused.value)
        assert type(refused.value).__name__ == "ConvertBusy"  # dataset.ConvertBusy
    finally:
        release.set()
        thread.join(HANG_GUARD_SECONDS)
    assert not thread.is_alive() and len(reports[0].converted) == 2
    assert convert(second, root, progress=False).converted == second
    assert sorted(Manifest.load(root).dumps) == sorted(first + second)
    assert sorted(open_dataset(root).paths) == sorted(first + second)


def test_a_renamed_dump_is_read_back_once_under_its_new_path(run: Path,
                                                             tmp_path: Path) -> None:
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    old, new = run / "rollout_0.pt", run / "rollout_0_moved.pt"
    old_files = Manifest.load(root).dumps[str(old)]["files"]
    os.rename(old, new)
    report = convert(str(run / "*.pt"), root, progress=False)
    frames = open_dataset(root)
    assert sorted(frames.paths) == sorted(str(p) for p in run.iterdir())
    assert len(frames.samples) == len(load_frames(sorted(str(p) for p in run.iterdir())).samples)
    assert report.converted == [str(new)] and report.renamed == [(str(old), str(new))]
    assert not report.missing and report.removed_files == len(old_files)
    assert not any((root / name).exists() for name in old_files)
    assert str(old) not in Manifest.load(root).dumps
    again = convert(str(run / "*.pt"), root, progress=False)
    assert len(again.unchanged) == 3 and not again.renamed and not again.missing


def test_a_deleted_dump_keeps_its_data_and_is_listed_as_missing(run: Path,
                                                                tmp_path: Path) -> None:
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False)
    before = open_dataset(root)
    gone = run / "rollout_0.pt"
    gone.unlink()
    report = convert(str(run / "*.pt"), root, progress=False)
    assert report.missing == [str(gone)] and not report.renamed and not report.converted
    assert "1 gone from disk" in report.summary()
    after = open_dataset(root)
    assert sorted(after.paths) == sorted(before.paths) and \
        len(after.samples) == len(before.samples)


def test_a_dump_converted_under_another_kind_is_converted_again(tmp_path: Path) -> None:
    """slime saves evaluation at ``eval_3/data.pt`` for the template
    ``{rollout_id}/data.pt``: it converts as eval, and a dump whose manifest entry holds
    another kind than its path tells (converted while only file names told the kind)
    is converted again, once."""
    dump = tmp_path / "run" / "eval_3" / "data.pt"
    dump.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "rollout_eval_3.pt", dump)
    settle(dump)
    root = tmp_path / "ds"
    convert(str(dump), root, progress=False)
    manifest = Manifest.load(root)
    assert [entry["kind"] for entry in manifest.converted()] == ["eval"]
    manifest.dumps[str(dump)]["kind"] = "train"
    manifest.save()
    assert convert(str(dump), root, progress=False).converted == [str(dump)]
    assert [entry["kind"] for entry in Manifest.load(root).converted()] == ["eval"]
    assert convert(str(dump), root, progress=False).unchanged == [str(dump)]
    assert open_dataset(root, kinds=["eval"]).paths == [str(dump)]


def test_a_ray_task_never_asks_for_more_memory_than_the_largest_node_has() -> None:
    """Ray never schedules a task no node can hold (the convert would wait for ever):
    the request is capped at the largest live node's memory."""
    from slime_trace_widget.sources.dataset.conversion import (
        largest_node_memory,
        memory_request,
    )

    nodes = [{"Alive": True, "Resources": {"CPU": 1.0, "memory": 600 << 20}},
             {"Alive": True, "Resources": {"CPU": 1.0, "memory": 900 << 20}},
             {"Alive": False, "Resources": {"CPU": 8.0, "memory": 64 << 30}},
             {"Alive": True, "Resources": {"CPU": 1.0}}]
    largest = largest_node_memory(nodes)
    assert largest == 900 << 20
    assert memory_request(1 << 30, largest) == largest  # 400 MB + 8 GB wanted
    assert memory_request(1 << 20, largest) == expected_peak(1 << 20)
    assert largest_node_memory([]) == 0 and memory_request(1 << 20, 0) == 0
