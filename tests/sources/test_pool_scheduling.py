"""The worker pool over many dumps: which job goes where, and when.

Rows follow the paths given whatever order the helpers finish in, and a bad
dump is listed and skipped; the largest dumps start first; a finished dump's
frames are read while the next job runs, in a thread of their own; the pool
is one helper per core, a job waits while memory is short, and running jobs
are told once when a core becomes spare.
"""

from __future__ import annotations

import os
import queue
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from slime_trace_widget import DumpError
from slime_trace_widget.sources.dumps import pool
from slime_trace_widget.sources.loading import load_frames
from tests.support.hostile_pickles import benign_sample

FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_many_dumps_combine_in_path_order_and_failures_are_listed(tmp_path: Path) -> None:
    """Two workers finish in any order; rows follow the paths, a bad dump is skipped."""
    for rollout in (3, 1, 2):
        samples = [benign_sample() for _ in range(rollout * 40)]  # sizes differ: finish order too
        torch.save({"rollout_id": rollout, "samples": samples}, tmp_path / f"rollout_{rollout}.pt")
    (tmp_path / "rollout_9.pt").write_bytes(b"not a dump at all")
    paths = [tmp_path / f"rollout_{r}.pt" for r in (3, 9, 1, 2)]
    with pytest.warns(RuntimeWarning, match=r"skipped .*rollout_9\.pt: .*not a torch dump") as said:
        frames = load_frames(paths, workers=2)
    assert str(said[0].message).count("rollout_9.pt") == 1, "the file named once"
    assert frames.rollout_ids == [3, 1, 2]
    assert frames.samples.groupby("dump")["rollout_id"].first().tolist() == [3, 1, 2]
    assert [name for name, _ in frames.failures] == [str(tmp_path / "rollout_9.pt")]
    with warnings.catch_warnings():  # a caller that names the failures itself
        warnings.simplefilter("error")
        quiet = load_frames(paths, workers=2, warn_failures=False)
    assert quiet.failures == frames.failures
    one_by_one = [load_frames(p) for p in (paths[0], paths[2], paths[3])]
    assert len(frames.span_core) == sum(len(f.span_core) for f in one_by_one)


def test_the_largest_dumps_start_first_and_the_frames_keep_the_paths_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started in the order given, a large dump last would run alone after the other
    helpers have ended; jobs start largest file first, equal sizes in path order."""
    paths = []
    for rollout, count in ((1, 5), (2, 60), (3, 20), (4, 5)):
        paths.append(tmp_path / f"rollout_{rollout}.pt")
        torch.save({"rollout_id": rollout, "samples": [benign_sample() for _ in range(count)]},
                   paths[-1])
    sizes = [path.stat().st_size for path in paths]
    assert sizes[1] > sizes[2] > sizes[0] == sizes[3]
    sent: list[str] = []
    real_send = pool._Worker.send

    def send(self: pool._Worker, job: pool._Job) -> None:
        sent.append(Path(job.name).stem)
        real_send(self, job)

    monkeypatch.setattr(pool._Worker, "send", send)
    frames = load_frames(paths, workers=1)
    assert sent == ["rollout_2", "rollout_3", "rollout_1", "rollout_4"]
    assert frames.rollout_ids == [1, 2, 3, 4]
    assert frames.samples.groupby("dump")["rollout_id"].first().tolist() == [1, 2, 3, 4]


def test_each_dumps_frames_are_read_once_its_job_ends_while_the_next_one_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With more dumps than helpers, the caller reads a finished dump's frames while the
    helper already loads the next, not all of them after the last job (8 dumps of 62 MB:
    0.3 s of reading moved off the end). Here the third job is only sent once the first
    dump's frames are read: reading at the end would never get there."""
    paths = _small_dumps(tmp_path, 3)
    steps: list[str] = []
    first_read = threading.Event()
    real_send, real_conclude = pool._Worker.send, pool._conclude

    def send(self: pool._Worker, job: pool._Job) -> None:
        if Path(job.name).stem == "rollout_3":
            assert first_read.wait(120), "the first dump was not read before the last job"
        steps.append(f"sent {Path(job.name).stem}")
        real_send(self, job)

    def conclude(worker: pool._Worker, verdict: dict, *args: object, **kwargs: object) -> None:
        assert worker.job is not None
        steps.append(f"ended {Path(worker.job.name).stem}")
        real_conclude(worker, verdict, *args, **kwargs)

    def on_read(out: str) -> None:
        steps.append(f"read {Path(out).name}")
        first_read.set()

    _watch_reads(monkeypatch, on_read)
    monkeypatch.setattr(pool._Worker, "send", send)
    monkeypatch.setattr(pool, "_conclude", conclude)
    frames = load_frames(paths, workers=1)
    assert frames.rollout_ids == [1, 2, 3]
    main_thread = [step for step in steps if not step.startswith("read")]
    assert main_thread == ["sent rollout_1", "ended rollout_1", "sent rollout_2",
                           "ended rollout_2", "sent rollout_3", "ended rollout_3"]
    assert [step for step in steps if step.startswith("read")] == ["read 0", "read 1", "read 2"]
    assert steps.index("read 0") < steps.index("sent rollout_3")


def test_a_helper_that_ends_while_frames_are_read_gets_its_next_job_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frames are read in a thread of their own: were they read where the verdicts are
    handled, a helper ending during a read would wait for it (up to 0.16 s per read on
    8 dumps of 62 MB). The first read here waits until the fourth job is sent, which
    the other helper's verdict can only bring while that read is under way."""
    paths = _small_dumps(tmp_path, 4)
    fourth_sent = threading.Event()
    waited: list[bool] = []
    real_send = pool._Worker.send

    def send(self: pool._Worker, job: pool._Job) -> None:
        real_send(self, job)
        if Path(job.name).stem == "rollout_4":
            fourth_sent.set()

    def on_read(out: str) -> None:
        if not waited:
            waited.append(fourth_sent.wait(60))

    _watch_reads(monkeypatch, on_read)
    monkeypatch.setattr(pool._Worker, "send", send)
    frames = load_frames(paths, workers=2)
    assert frames.rollout_ids == [1, 2, 3, 4]
    assert waited == [True]


def _small_dumps(folder: Path, count: int) -> list[Path]:
    paths = []
    for rollout in range(1, count + 1):
        paths.append(folder / f"rollout_{rollout}.pt")
        torch.save({"rollout_id": rollout, "samples": [benign_sample() for _ in range(20)]},
                   paths[-1])
    return paths


def _watch_reads(monkeypatch: pytest.MonkeyPatch, on_read: Callable[[str], None]) -> None:
    """Call ``on_read(folder)`` before each of the caller's reads of a worker's frames."""
    from slime_trace_widget.sources.dumps import wire

    real_read = wire.read_frames

    def read(out: str, **kwargs: object) -> object:
        on_read(out)
        return real_read(out, **kwargs)

    monkeypatch.setattr(wire, "read_frames", read)


def test_an_empty_or_vanished_dump_fails_alone(tmp_path: Path) -> None:
    """A file the header check refuses (zero bytes, gone since the glob) is one failure
    among the others, in path order, not the whole call's error."""
    for rollout in (1, 2):
        torch.save({"rollout_id": rollout, "samples": [benign_sample()]},
                   tmp_path / f"rollout_{rollout}.pt")
    (tmp_path / "rollout_0.pt").write_bytes(b"")
    paths = [tmp_path / name for name in ("rollout_0.pt", "rollout_1.pt", "gone.pt",
                                          "rollout_2.pt")]
    with pytest.warns(RuntimeWarning) as said:
        frames = load_frames(paths, workers=2)
    assert [str(warning.message).split(": ", 1)[1] for warning in said] == [
        "not a torch dump (zero-byte file)", "no such file"]
    assert frames.rollout_ids == [1, 2]
    assert frames.failures == [(str(paths[0]), f"{paths[0]}: not a torch dump (zero-byte file)"),
                               (str(paths[2]), f"{paths[2]}: no such file")]
    with pytest.raises(DumpError, match=r"zero-byte file\)$"):
        load_frames(paths[0])


def test_every_dump_failing_is_a_dump_error(tmp_path: Path) -> None:
    for name in ("rollout_1.pt", "rollout_2.pt"):
        (tmp_path / name).write_bytes(b"garbage")
    with pytest.raises(DumpError, match="no dump could be loaded"):
        load_frames(str(tmp_path / "*.pt"))


def test_the_default_pool_is_one_worker_per_core_and_never_more_than_dumps() -> None:
    paths = [str(FIXTURES / "small.pt")] * 50
    assert pool.default_workers(paths) == max(1, min(os.cpu_count() or 1, 50))
    assert pool.default_workers(paths[:1]) == 1


def test_a_job_waits_while_memory_is_short(monkeypatch: pytest.MonkeyPatch) -> None:
    job = pool._Job("a.pt", 100 << 20, {})
    monkeypatch.setattr(pool, "available_memory", lambda: 8 << 30)
    assert pool._fits(job, [])  # one job always runs
    assert pool._fits(job, [job])
    monkeypatch.setattr(pool, "available_memory", lambda: 1 << 20)
    assert not pool._fits(job, [job])


def test_the_pool_tells_running_jobs_of_a_spare_core_once(tmp_path: Path) -> None:
    """Only while a helper idles (nothing is left to start when this is asked), only
    jobs that named a file, each once; a job whose folder is gone is skipped."""
    lanes = [pool._Worker(queue.Queue()) for _ in range(2)]
    flags = [tmp_path / f"{lane}.flag" for lane in range(2)]
    lanes[0].job = pool._Job("a.pt", 1, {"spare_flag": str(flags[0])})
    lanes[1].job = pool._Job("b.pt", 1, {"spare_flag": str(flags[1])})
    pool._tell_spare_cores(lanes)
    assert not flags[0].exists() and not flags[1].exists()  # both helpers busy
    lanes[1].job = None
    pool._tell_spare_cores(lanes)
    assert flags[0].exists() and not flags[1].exists()
    flags[0].unlink()
    pool._tell_spare_cores(lanes)
    assert not flags[0].exists()  # told once
    lanes[0].job = pool._Job("c.pt", 1, {"spare_flag": str(tmp_path / "gone" / "c.flag")})
    pool._tell_spare_cores(lanes)
    assert lanes[0].job.told_spare
    lanes[0].job = pool._Job("d.pt", 1, {})
    pool._tell_spare_cores(lanes)
    assert not lanes[0].job.told_spare and not list(tmp_path.glob("*.flag"))


def test_the_last_of_three_dumps_on_two_cores_is_told_of_the_spare_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three dumps on two helpers: no job starts with a spare core; once the third has
    started and one of the running two ends, the other is told (its flag file appears
    in its own folder)."""
    paths = _small_dumps(tmp_path, 3)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    told: list[tuple[str, bool]] = []
    real_tell = pool._tell_spare_cores

    def tell(lanes: list[pool._Worker]) -> None:
        before = {id(lane.job) for lane in lanes if lane.job is not None and lane.job.told_spare}
        real_tell(lanes)
        for lane in lanes:
            job = lane.job
            if job is not None and job.told_spare and id(job) not in before:
                assert not job.request["spare_core"]
                told.append((Path(job.name).stem, os.path.exists(job.request["spare_flag"])))

    monkeypatch.setattr(pool, "_tell_spare_cores", tell)
    frames = load_frames(paths, workers=2)
    assert frames.rollout_ids == [1, 2, 3]
    assert len(told) == 1 and told[0][1], told
