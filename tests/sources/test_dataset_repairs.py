"""A convert rerun repairs what it would otherwise keep for good: an unchanged dump whose
dataset files are gone, emptied or cut short is converted again. One file is one dump,
however it is reached: through a link to it, or through a linked folder, also when the
dataset was first converted under the linked spelling.

The dumps are the fixtures of the shared run (``tests.sources.runs``); the damage and the
links are done to real files.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from slime_trace_widget.sources.dataset import Manifest, convert, open_dataset
from slime_trace_widget.sources.dataset.layout import part_path
from slime_trace_widget.sources.loading import load_frames
from tests.sources.runs import copy_run, settle


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return copy_run(tmp_path)


def again(paths: list[Path] | Path, root: Path):
    return convert([str(p) for p in paths] if isinstance(paths, list) else str(paths / "*.pt"),
                   root, progress=False, workers=1)


def entries_by_name(root: Path) -> dict[str, dict]:
    return {Path(entry["path"]).name: entry for entry in Manifest.load(root).converted()}


def test_a_dump_whose_dataset_files_are_gone_or_damaged_is_converted_again(
        run: Path, tmp_path: Path) -> None:
    """rollout_0's samples file deleted, rollout_7's spans file cut short and its events
    file emptied: the rerun said "0 converted, 3 unchanged" and open_dataset skipped both
    dumps for good."""
    root = tmp_path / "ds"
    again(run, root)
    before = open_dataset(root)
    entries = entries_by_name(root)
    zero, seven = entries["rollout_0.pt"], entries["rollout_7.pt"]
    part_path(root, "samples", zero["rollouts"][0], zero["stem"]).unlink()
    spans = part_path(root, "spans", seven["rollouts"][0], seven["stem"])
    spans.write_bytes(spans.read_bytes()[:300])
    part_path(root, "events", seven["rollouts"][0], seven["stem"]).write_bytes(b"")
    with pytest.warns(RuntimeWarning, match="damaged dataset files"):
        assert len(open_dataset(root).failures) == 2
    report = again(run, root)
    assert sorted(Path(path).name for path in report.converted) == [
        "rollout_0.pt", "rollout_7.pt"]
    assert [Path(path).name for path in report.unchanged] == ["rollout_eval_3.pt"]
    assert report.repaired == report.converted
    assert "2 with damaged dataset files converted again" in report.summary()
    after = open_dataset(root)
    assert after.failures == []
    assert after.paths == before.paths
    assert len(after.samples) == len(before.samples)
    assert len(after.spans) == len(before.spans) and len(after.events) == len(before.events)
    assert sorted(Path(p).name for p in again(run, root).unchanged) == sorted(
        p.name for p in run.iterdir())


def test_a_link_to_a_dump_is_the_same_dump(run: Path, tmp_path: Path) -> None:
    """``convert run/rollout_0.pt link.pt`` (link.pt -> rollout_0.pt) gave two dumps: the
    dataset read back every sample twice. So did a linked folder leading to the run."""
    root = tmp_path / "ds"
    link = tmp_path / "link.pt"
    link.symlink_to(run / "rollout_0.pt")
    folder = tmp_path / "linked_run"
    folder.symlink_to(run, target_is_directory=True)
    report = again([run / "rollout_0.pt", link], root)
    assert report.converted == [str(run / "rollout_0.pt")]
    report = again([link, folder / "rollout_0.pt"], root)
    assert report.converted == [] and report.unchanged == [str(run / "rollout_0.pt")]
    assert list(Manifest.load(root).dumps) == [str(run / "rollout_0.pt")]
    frames = open_dataset(root)
    assert len(frames.samples) == len(load_frames(run / "rollout_0.pt").samples)


def test_a_dataset_keyed_through_a_linked_folder_is_not_doubled(run: Path,
                                                                tmp_path: Path) -> None:
    """A dataset converted through a linked folder keys its dumps by that spelling (as
    converts did before links were resolved): converting the real folder, or the linked
    one, keeps one dump per file, their data not converted again."""
    folder = tmp_path / "linked_run"
    folder.symlink_to(run, target_is_directory=True)
    root = tmp_path / "ds"
    again(run, root)
    manifest = root / "manifest.json"
    data = json.loads(manifest.read_text())
    data["dumps"] = {str(folder / Path(path).name): entry
                     for path, entry in data["dumps"].items()}
    manifest.write_text(json.dumps(data))
    for through in (run, folder):
        report = again(through, root)
        assert report.converted == [] and len(report.unchanged) == 3
        assert sorted(Manifest.load(root).dumps) == sorted(
            os.path.join(run, name) for name in os.listdir(run))
        assert len(open_dataset(root).paths) == 3


def test_an_entry_whose_link_now_leads_elsewhere_keeps_its_data(run: Path,
                                                                 tmp_path: Path) -> None:
    """A dataset an earlier convert keyed through ``current/`` (then a link to one run's
    folder) keeps that dump's data when the link moves on to another run's folder: the
    entry is not moved onto the other file, nor dropped with its data."""
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(run / "rollout_7.pt", other / "rollout_0.pt")  # the same name, other bytes
    settle(other / "rollout_0.pt")
    current = tmp_path / "current"
    current.symlink_to(run, target_is_directory=True)
    root = tmp_path / "ds"
    again([run / "rollout_0.pt"], root)
    manifest = root / "manifest.json"
    data = json.loads(manifest.read_text())
    data["dumps"] = {str(current / Path(path).name): entry
                     for path, entry in data["dumps"].items()}  # as keyed before links
    manifest.write_text(json.dumps(data))
    samples = len(open_dataset(root).samples)
    current.unlink()
    current.symlink_to(other, target_is_directory=True)  # the link moves on
    report = again([other / "rollout_0.pt"], root)
    assert report.converted == [str(other / "rollout_0.pt")] and report.removed_files == 0
    assert sorted(Manifest.load(root).dumps) == [str(current / "rollout_0.pt"),
                                                 str(other / "rollout_0.pt")]
    frames = open_dataset(root)
    assert len(frames.paths) == 2
    assert len(frames.samples) == samples + len(load_frames(other / "rollout_0.pt").samples)
