"""A convert that fails for a dump loses nothing the dataset held, and stops for none:
a dump converted again from the same content (an engine-trace join, its kind, damaged
files) keeps its earlier data, readable, until a conversion of it succeeds; a dump that
cannot be looked at (a link to nothing, a dump deleted meanwhile) fails alone; each
failure is reported and retried. The dumps are the shared run's fixtures, converted by
the local worker pool; the failures are a worker's real memory limit, real links and
deletions, and, where the failure must come after the worker wrote its files (a Ray
task lost after its work), a verdict turned into one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.sources.dataset import Manifest, conversion, convert, open_dataset
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.dumps.files import load_trusted
from tests.sources.runs import copy_run, settle

#: A worker memory limit no dump loads under: the worker's load fails (MemoryError).
NO_MEMORY = 1


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return copy_run(tmp_path)


def convert_run(run: Path, root: Path, **options: Any):
    return convert(str(run / "*.pt"), root, progress=False, workers=1, warn_failures=False,
                   **options)


def files_on_disk(root: Path) -> set[str]:
    """Every file of the dataset's tables (its Parquet files, and any temporary file)."""
    return {path.relative_to(root).as_posix() for path in root.rglob("*")
            if path.is_file() and path.parent != root}


def files_listed(root: Path) -> set[str]:
    return {name for entry in Manifest.load(root).converted() for name in entry["files"]}


def readable(root: Path) -> tuple[list[str], int, int]:
    """The dataset's dumps as read back: paths, samples and spans (no warning allowed)."""
    frames = open_dataset(root, warn_failures=False)
    assert frames.failures == []
    return sorted(frames.paths), len(frames.samples), len(frames.spans)


def test_a_failed_conversion_again_keeps_the_earlier_data_and_is_retried(
        run: Path, tmp_path: Path) -> None:
    """Converted again for an engine-trace join, under a worker memory limit it cannot
    meet: the convert deleted every dump's files ("3 failed", removed_files 21) and the
    dataset said "nothing in the dataset matches" where it read 38 samples."""
    root = tmp_path / "ds"
    convert_run(run, root)
    before, stems = readable(root), {e["path"]: e["stem"] for e in Manifest.load(root).converted()}
    traces = tmp_path / "engine_traces"
    traces.mkdir()
    report = convert_run(run, root, engine_traces=traces, memory_limit=NO_MEMORY)
    dumps = sorted(str(path) for path in run.iterdir())
    assert sorted(path for path, _ in report.failed) == dumps and report.removed_files == 0
    assert sorted(report.kept) == dumps and not report.converted
    assert "3 failed (the earlier data of 3 kept)" in report.summary()
    assert readable(root) == before
    assert files_on_disk(root) == files_listed(root)  # nothing half-written left
    entries = Manifest.load(root).converted()
    assert all("memory" in entry["last_error"] for entry in entries)
    assert {entry["path"]: entry["stem"] for entry in entries} == stems
    retried = convert_run(run, root, engine_traces=traces)
    assert sorted(retried.converted) == dumps and not retried.failed and not retried.kept
    assert readable(root) == before
    entries = Manifest.load(root).converted()
    assert not any("last_error" in entry for entry in entries)
    assert not set(stems.values()) & {entry["stem"] for entry in entries}
    assert files_on_disk(root) == files_listed(root)  # the earlier files went after
    assert len(convert_run(run, root, engine_traces=traces).unchanged) == 3


def test_a_conversion_lost_after_its_worker_wrote_leaves_the_earlier_files(
        run: Path, tmp_path: Path, monkeypatch) -> None:
    """The worker writes each file whole, but a task lost after writing (or killed half
    way) had written over the dump's files already: what it wrote is never the dump's
    until its conversion is recorded."""
    root = tmp_path / "ds"
    convert_run(run, root)
    before = readable(root)
    dump = str(run / "rollout_eval_3.pt")
    data = json.loads((root / "manifest.json").read_text())
    data["dumps"][dump]["kind"] = "train"  # converted while only file names told kinds
    (root / "manifest.json").write_text(json.dumps(data))
    listed = files_listed(root)
    real = conversion.convert_in_workers

    def lost_after_writing(paths, out, stems, *, on_done, **options):
        def lost(path: str, verdict: dict) -> None:
            assert "ok" in verdict, verdict
            # and a file it was still writing when killed, as the worker names it
            (Path(out) / "spans" / "rollout_id=3" / f".{stems[0]}.parquet.0f1e2d3c4b5a6978"
             ".tmp").write_bytes(b"PAR1")
            on_done(path, {"error": f"{path}: the Ray task failed (ObjectLostError: ...)"})
        real(paths, out, stems, on_done=lost, **options)

    monkeypatch.setattr(conversion, "convert_in_workers", lost_after_writing)
    report = convert_run(run, root)
    assert readable(root) == before
    assert files_on_disk(root) == files_listed(root) == listed
    assert [path for path, _ in report.failed] == [dump] and report.kept == [dump]
    monkeypatch.undo()
    assert convert_run(run, root).converted == [dump]
    assert readable(root) == before
    assert [e["kind"] for e in Manifest.load(root).converted() if e["path"] == dump] == ["eval"]


def test_a_changed_dump_that_fails_drops_its_earlier_data(run: Path, tmp_path: Path) -> None:
    """The earlier rows hold samples the file no longer holds: they go, and the dump is
    listed as failed (not kept) and retried."""
    root = tmp_path / "ds"
    convert_run(run, root)
    changed = run / "rollout_0.pt"
    save_dump(changed, load_trusted(str(changed)).samples[:5], rollout_id=12)
    settle(changed)
    report = convert_run(run, root, memory_limit=NO_MEMORY)
    assert [path for path, _ in report.failed] == [str(changed)] and report.kept == []
    assert report.removed_files == 7
    assert Manifest.load(root).dumps[str(changed)]["status"] == "failed"
    assert readable(root)[0] == sorted(str(p) for p in run.iterdir() if p != changed)
    assert files_on_disk(root) == files_listed(root)
    assert convert_run(run, root).converted == [str(changed)]
    assert len(open_dataset(root, rollouts=[12]).samples) == 5


def test_a_link_to_nothing_or_a_dump_gone_fails_alone(run: Path, tmp_path: Path) -> None:
    """A link to a dump gone (/tmp/review_ds/t17.py), or a dump deleted between the glob
    and its stat, aborted the whole convert with a bare FileNotFoundError naming only
    the link's target: no dump was converted."""
    root = tmp_path / "ds"
    link, target = run / "rollout_9.pt", tmp_path / "nowhere" / "rollout_9.pt"
    link.symlink_to(target)
    gone = run / "rollout_11.pt"  # named, but not there: as if deleted after the glob
    report = convert([str(run / "*.pt"), str(gone)], root, progress=False, workers=1,
                     warn_failures=False)
    assert sorted(report.converted) == sorted(str(p) for p in run.iterdir() if p != link)
    assert report.failed == [(str(link), f"{link}: no such file (it leads to {target})"),
                             (str(gone), f"{gone}: no such file")]
    assert "3 converted, 0 unchanged, 0 still being written, 2 failed" in report.summary()
    assert len(readable(root)[0]) == 3
    with pytest.warns(RuntimeWarning, match=f"not converted {link}: no such file"):
        again = convert(str(run / "*.pt"), root, progress=False, workers=1)
    assert len(again.unchanged) == 3 and [path for path, _ in again.failed] == [str(link)]


def test_a_dump_deleted_before_its_job_starts_fails_alone(run: Path, tmp_path: Path,
                                                          monkeypatch) -> None:
    """Deleted after the convert looked at it, before its job was made: the job's own
    stat of it aborted the convert."""
    root = tmp_path / "ds"
    late = run / "rollout_9.pt"
    late.write_bytes((run / "rollout_0.pt").read_bytes())
    settle(late)
    real = conversion.convert_in_workers

    def deleted_first(paths, *args, **options):
        late.unlink()
        real(paths, *args, **options)

    monkeypatch.setattr(conversion, "convert_in_workers", deleted_first)
    report = convert_run(run, root)
    assert report.failed == [(str(late), f"{late}: no such file")]
    assert len(report.converted) == 3 and len(readable(root)[0]) == 3


def test_the_command_lists_a_link_to_nothing_as_failed(run: Path, tmp_path: Path,
                                                       capsys) -> None:
    """``convert 'debug/*.pt'`` with a link to nothing among them refused the whole run
    ("no such file"); now the others are converted and the link is listed as failed."""
    from slime_trace_widget.cli import main

    link, target = run / "rollout_9.pt", tmp_path / "nowhere" / "rollout_9.pt"
    link.symlink_to(target)
    assert main(["convert", str(run / "*.pt"), "--out", str(tmp_path / "ds"),
                 "--workers", "1"]) == 1
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        f"slime-trace-viewer: failed {link}: no such file (it leads to {target})"]
    assert "3 converted, 0 unchanged, 0 still being written, 1 failed" in out


def test_an_entry_under_a_link_unreadable_now_stops_no_convert(run: Path, tmp_path: Path,
                                                               monkeypatch) -> None:
    """Settling the entries an earlier version made under links (keyed by the link's
    path) read each linked file; one that could not be read then (a permission taken
    away, a race) aborted the convert with its OSError."""
    linked = tmp_path / "linked"
    linked.symlink_to(run)
    root = tmp_path / "ds"
    convert_run(run, root)
    manifest = root / "manifest.json"
    held = json.loads(manifest.read_text())
    held["dumps"] = {path.replace(str(run), str(linked)): entry
                     for path, entry in held["dumps"].items()}
    manifest.write_text(json.dumps(held))
    real_holds = Manifest.holds

    def unreadable(manifest: Manifest, path: str, stat: Any) -> bool:
        if path.startswith(str(linked)):
            raise PermissionError(13, "Permission denied", path)
        return real_holds(manifest, path, stat)

    monkeypatch.setattr(Manifest, "holds", unreadable)
    report = convert_run(run, root)
    assert report.failed == [] and len(report.converted) == 3
