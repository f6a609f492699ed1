"""Worker processes: files that hurt without running code stop in a child process.

A tuple key that shares its halves (2**64 leaves to hash) and int keys that all
hash to 0 (quadratic dict insertion) freeze the C unpickler, where no signal
reaches it. Loads of such files run in a subprocess here, with a timeout, so a
broken guard fails the test instead of hanging the suite.
"""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import weakref
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from slime_trace_widget import DumpError
from slime_trace_widget.sources import loading
from slime_trace_widget.sources.dumps import pool, worker
from slime_trace_widget.sources.loading import load_dump, load_frames
from tests.sources.test_hostile_pickles import (
    APPENDS,
    BENIGN_SPANS,
    EMPTY_DICT,
    EMPTY_LIST,
    MARK,
    NONE,
    PROTO2,
    SETITEM,
    SETITEMS,
    STOP,
    benign_sample,
    benign_spans,
    op_text,
    op_value,
    write_zip,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"


def tuple_key_bomb() -> bytes:
    """A dict keyed by ``()`` paired with itself 64 times (DUP, TUPLE2): 2**64 leaves."""
    return EMPTY_DICT + b")" + b"2\x86" * 64 + op_value(1) + SETITEM


def colliding_int_keys(count: int = 200_000) -> bytes:
    """A dict of int keys that all hash to 0 (multiples of 2**61 - 1): about 4 minutes of
    probing for 200,000 keys, in a 2.4 MB file."""
    keys = b"".join(op_value(i * (2**61 - 1)) + NONE for i in range(1, count + 1))
    return EMPTY_DICT + MARK + keys + SETITEMS


BOMBS = {"tuple key of 2**64 leaves": tuple_key_bomb, "200,000 colliding int keys":
         colliding_int_keys}


def write_bomb_after_samples(path: Path, bomb: bytes, benign_count: int = 3000) -> None:
    """A dump whose samples list holds ``benign_count`` traced samples, then the bomb.

    The benign part (about 2 MB) keeps this process's load busy while the child
    reaches the bomb, so a gate that let the load run ahead would hang it.
    """
    samples = op_value(benign_sample()) * benign_count + bomb
    write_zip(path, PROTO2 + EMPTY_DICT + op_text("samples") + EMPTY_LIST + MARK + samples
              + APPENDS + SETITEM + STOP)


LOAD_IN_SUBPROCESS = """
import sys, time
from slime_trace_widget import DumpError
from slime_trace_widget.sources import loading as load
started = time.perf_counter()
try:
    getattr(load, sys.argv[3])(sys.argv[1], time_limit=float(sys.argv[2]))
except DumpError as exc:
    print(f"{time.perf_counter() - started:.1f} s DumpError: {exc}")
else:
    print("loaded")
"""


def load_in_subprocess(path: Path, time_limit: float, timeout: float = 90,
                       loader: str = "load_dump") -> str:
    """Load ``path`` in a fresh interpreter; what it printed. A hang fails the test."""
    result = subprocess.run([sys.executable, "-c", LOAD_IN_SUBPROCESS, str(path),
                             str(time_limit), loader], capture_output=True, text=True,
                            timeout=timeout, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout


def running_processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every process that still runs (zombies
    awaiting a reaper left out), read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue  # self, thread-self, and what is not a process
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        state, parent, group = stat.rsplit(")", 1)[1].split()[:3]
        if state not in ("Z", "X"):
            found.append((int(entry.name), int(parent), int(group)))
    return found


def live_processes_in_group(group: int) -> list[int]:
    return [pid for pid, _, pgrp in running_processes() if pgrp == group]


@pytest.mark.parametrize("loader", ["load_dump", "load_frames"])
@pytest.mark.parametrize("bomb", list(BOMBS), ids=list(BOMBS))
def test_cpu_bombs_are_refused_instead_of_freezing_the_process(tmp_path: Path, bomb: str,
                                                                loader: str) -> None:
    path = tmp_path / "rollout_1.pt"
    write_bomb_after_samples(path, BOMBS[bomb]())
    out = load_in_subprocess(path, time_limit=3, loader=loader)
    assert "DumpError" in out and str(path) in out and "CPU time" in out, out


def test_default_time_limit_stops_a_bomb_opened_as_a_widget(tmp_path: Path) -> None:
    """No limit given: the default (10 s plus 1 s per MB) applies to the widget's load."""
    path = tmp_path / "rollout_1.pt"
    write_bomb_after_samples(path, tuple_key_bomb(), benign_count=10)
    script = ("import sys\nfrom slime_trace_widget import DumpError, TraceTimeline\n"
              "try:\n    TraceTimeline.from_dump(sys.argv[1])\n"
              "except DumpError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert "refused: loading it took more than 10" in result.stdout, result.stdout + result.stderr
    assert "s of CPU time" in result.stdout


def test_interrupting_a_stuck_load_ends_the_child_and_the_next_load_works(
        tmp_path: Path) -> None:
    bomb = tmp_path / "rollout_1.pt"
    write_bomb_after_samples(bomb, tuple_key_bomb(), benign_count=10)
    benign = tmp_path / "rollout_2.pt"
    torch.save({"rollout_id": 2, "samples": [benign_sample()]}, benign)
    load_dump(benign)  # the helper is running
    helper = pool._IDLE.workers[0]._process
    assert helper is not None
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        load_dump(bomb, time_limit=120)
    timer.join()
    assert time.monotonic() - started < 60
    deadline = time.monotonic() + 10  # SIGKILL reaches the stuck child a moment later
    while live_processes_in_group(helper.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_processes_in_group(helper.pid) == []  # the helper and the stuck child
    assert benign_spans(load_frames(benign)) == BENIGN_SPANS


def test_a_file_that_changes_during_the_load_is_refused(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker reads the file itself; bytes that differ from what is loaded here fail."""
    path = tmp_path / "rollout_1.pt"
    torch.save({"rollout_id": 1, "samples": [benign_sample()]}, path)
    run_jobs = loading.run_jobs

    def run_then_replace(*args: object) -> None:
        run_jobs(*args)
        path.write_bytes((FIXTURES / "small.pt").read_bytes())

    monkeypatch.setattr(loading, "run_jobs", run_then_replace)
    with pytest.raises(DumpError, match="changed while it was being loaded"):
        load_dump(path)


def test_the_helper_does_not_import_modules_planted_in_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "planted_ran"
    for module in ("numpy", "torch", "slime_trace_widget"):
        (tmp_path / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    subprocess.run([sys.executable, "-c", "import numpy"], cwd=tmp_path, check=False,
                   capture_output=True)
    assert marker.exists(), "a plain `python -c` here imports the planted module"
    marker.unlink()
    monkeypatch.chdir(tmp_path)
    pool._IDLE.stop_all()  # the next load starts a helper from this directory
    assert load_dump(FIXTURES / "small.pt").samples
    assert len(load_frames(FIXTURES / "small.pt").samples) == 8
    assert not marker.exists()


def test_a_helper_that_cannot_start_gives_a_dump_error(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rollout_1.pt"
    torch.save({"rollout_id": 1, "samples": [benign_sample()]}, path)
    pool._IDLE.stop_all()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with pytest.raises(DumpError, match=r"could not start the loader's worker"):
        load_dump(path)
    with pytest.raises(DumpError, match=r"could not start the loader's worker"):
        load_frames(path)
    assert load_dump(path, isolate=False).samples[0]["index"] == 0
    monkeypatch.undo()
    assert load_dump(path).samples[0]["index"] == 0


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.pt")
                                           if "corrupt" not in p.name))
def test_isolated_and_in_process_loads_agree(fixture: str) -> None:
    """Every fixture layout (zip, legacy, objects, eval) loads the same either way."""
    isolated = load_dump(FIXTURES / fixture)
    in_process = load_dump(FIXTURES / fixture, isolate=False)
    assert repr(isolated.samples) == repr(in_process.samples)
    assert isolated.warnings == in_process.warnings
    assert isolated.blocked_globals == in_process.blocked_globals


@pytest.mark.parametrize("fixture", ["edge_corrupt_empty_file.pt", "edge_corrupt_garbage.pt",
                                     "edge_corrupt_truncated.pt"])
def test_corrupt_files_give_the_same_message_either_way(fixture: str) -> None:
    messages = []
    for isolate in (True, False):
        with pytest.raises(DumpError) as caught:
            load_dump(FIXTURES / fixture, isolate=isolate)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_child_deaths_are_explained() -> None:
    request = {"path": "/data/rollout_1.pt", "name": "rollout_1.pt", "cpu_seconds": 5.0}
    cpu = worker._death_message(request, -signal.SIGXCPU)
    killed = worker._death_message(request, -signal.SIGKILL)
    crash = worker._death_message(request, -signal.SIGSEGV)
    assert cpu.startswith("rollout_1.pt: refused") and "more than 5 s of CPU time" in cpu
    assert killed.startswith("rollout_1.pt: refused") and "out of memory" in killed
    assert crash.startswith("rollout_1.pt:") and "crashed" in crash and "SIGSEGV" in crash


def children_of(pid: int) -> list[int]:
    return [child for child, parent, _ in running_processes() if parent == pid]


def test_the_helper_starts_no_helper_of_its_own() -> None:
    """The helper imports the loader module, which starts a helper in any other process."""
    load_dump(FIXTURES / "small.pt")
    helper = pool._IDLE.workers[0]._process
    assert helper is not None
    deadline = time.monotonic() + 10
    while children_of(helper.pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # the last rehearsal child may still be exiting
    assert children_of(helper.pid) == []



def test_the_helper_holds_openblas_to_one_thread_unless_the_user_chose(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenBLAS's threads spin while numpy is imported: 0.1 s of CPU per helper start,
    taken from the jobs of a call that starts a second helper. A user's own choice
    stands."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert pool._worker_environment()["OPENBLAS_NUM_THREADS"] == "1"
    pool._IDLE.stop_all()
    load_dump(FIXTURES / "small.pt")
    helper = pool._IDLE.workers[0]._process
    assert helper is not None
    if sys.platform.startswith("linux"):
        environment = Path(f"/proc/{helper.pid}/environ").read_bytes().split(b"\0")
        assert b"OPENBLAS_NUM_THREADS=1" in environment
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    assert pool._worker_environment()["OPENBLAS_NUM_THREADS"] == "3"

def test_a_forked_process_loads_with_its_own_helper() -> None:
    """A fork (a DataLoader worker, say) must not talk to its parent's helper over the
    pipes it inherited: both sides would read each other's answers."""
    load_dump(FIXTURES / "small.pt")
    helper = pool._IDLE.workers[0]._process
    assert helper is not None
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            ok = len(load_dump(FIXTURES / "small.pt").samples) == 8
            mine = pool._IDLE.workers[0]._process
            code = 0 if ok and mine is not None and mine.pid != helper.pid else 2
            pool._IDLE.stop_all()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert pool._IDLE.workers[0]._process is helper and helper.poll() is None
    assert len(load_dump(FIXTURES / "small.pt").samples) == 8


def test_a_relative_path_is_the_callers_after_a_chdir(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper keeps the directory it started in; it must open the caller's file."""
    load_dump(FIXTURES / "small.pt")  # the helper runs, started from elsewhere
    folder = tmp_path / "run"
    folder.mkdir()
    torch.save({"rollout_id": 4, "samples": [benign_sample()]}, folder / "rollout_4.pt")
    monkeypatch.chdir(folder)
    dump = load_dump("rollout_4.pt")
    assert dump.path == "rollout_4.pt" and dump.rollout_id == 4


INFLATE_AND_MEASURE = """
import resource, sys
from slime_trace_widget import DumpError
from slime_trace_widget.sources import loading as load
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    getattr(load, sys.argv[2])(sys.argv[1], memory_limit=256 << 20)
    print("loaded")
except DumpError as exc:
    print(f"DumpError: {exc}")
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024, "MB more")
"""


@pytest.mark.parametrize("loader", ["load_dump", "load_frames"])
def test_a_compressed_data_record_is_inflated_in_the_child_only(tmp_path: Path,
                                                                 loader: str) -> None:
    """A 1.5 MB file whose deflated record holds 1.5 GB: torch inflates it whole, in the
    worker only (refused at the memory limit); the frames worker streams the record
    and stops at the pickle's end, never inflating the padding."""
    buffer = io.BytesIO()
    torch.save({"samples": []}, buffer)
    path = tmp_path / "rollout_1.pt"
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source, \
            zipfile.ZipFile(path, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.endswith("/data.pkl"):
                target.writestr(info.filename, data + bytes(1500 << 20), zipfile.ZIP_DEFLATED)
            else:
                target.writestr(info, data)
    result = subprocess.run([sys.executable, "-c", INFLATE_AND_MEASURE, str(path), loader],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = result.stdout.splitlines()
    if loader == "load_dump":
        assert lines and lines[0].startswith("DumpError") and str(path) in lines[0], result
    else:
        assert lines and lines[0] == "loaded", result
    assert int(lines[-1].split()[0]) < 500, lines  # the kernel never held the 1.5 GB


# --------------------------------------------------------------------------- many dumps


def test_many_dumps_combine_in_path_order_and_failures_are_listed(tmp_path: Path) -> None:
    """Two workers finish in any order; rows follow the paths, a bad dump is skipped."""
    for rollout in (3, 1, 2):
        samples = [benign_sample() for _ in range(rollout * 40)]  # sizes differ: finish order too
        torch.save({"rollout_id": rollout, "samples": samples}, tmp_path / f"rollout_{rollout}.pt")
    (tmp_path / "rollout_9.pt").write_bytes(b"not a dump at all")
    paths = [tmp_path / f"rollout_{r}.pt" for r in (3, 9, 1, 2)]
    with pytest.warns(RuntimeWarning, match=r"skipped .*rollout_9\.pt: .*not a torch dump"):
        frames = load_frames(paths, workers=2)
    assert frames.rollout_ids == [3, 1, 2]
    assert frames.samples.groupby("dump")["rollout_id"].first().tolist() == [3, 1, 2]
    assert [name for name, _ in frames.failures] == [str(tmp_path / "rollout_9.pt")]
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


def test_output_that_is_not_a_workers_is_refused(tmp_path: Path) -> None:
    """The caller checks what a worker wrote: a row reference outside its table fails."""
    from slime_trace_widget.frames import build_frames
    from slime_trace_widget.sources.dumps.wire import (
        WireError,
        read_frames,
        table_file,
        write_frames,
        write_table,
    )

    frames = build_frames([benign_sample()])
    write_frames(frames, str(tmp_path))
    spans = frames.tables.span_core
    outside = pa.array(np.full(spans.num_rows, 10**6, dtype=np.int64))
    write_table(spans.set_column(spans.schema.get_field_index("sample_row"), "sample_row",
                                 outside), table_file(str(tmp_path), "span_core"))
    with pytest.raises(WireError, match=r"sample_row points outside"):
        read_frames(str(tmp_path))
    (tmp_path / "segments.arrow").write_bytes(b"ARROW1 but not really")
    with pytest.raises(WireError, match=r"segments\.arrow"):
        read_frames(str(tmp_path))


@pytest.mark.parametrize("job", ["frames", "dataset"])
def test_frames_and_dataset_workers_never_import_torch(job: str) -> None:
    """torch costs a worker 2 s and 300 MB; reading dumps for frames needs none of it."""
    script = ("import sys; from slime_trace_widget.sources.dumps import worker; "
              f"worker._prepare({job!r}); print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_a_frames_jobs_child_never_imports_pandas(tmp_path: Path) -> None:
    """A frames job builds Arrow tables and never a DataFrame: its child, forked from a
    helper that has not imported pandas, ends its job with no pandas in sys.modules,
    though pyarrow imports pandas where it can on its first conversion."""
    dump = FIXTURES / "rollout_eval_3.pt"
    job = pool.new_job(str(dump), "frames", str(tmp_path), None, None, spare_core=True)
    script = (
        "import sys\n"
        "from slime_trace_widget.sources.dumps import worker\n"
        "run_job = worker._run_job\n"
        "class Held(list):\n"
        "    send = list.append\n"
        "def run_and_tell(request, out):\n"
        "    verdict = Held()\n"
        "    run_job(request, verdict)\n"
        "    out.send({'pandas': 'pandas' in sys.modules})\n"
        "    for message in verdict:\n"
        "        out.send(message)\n"
        "worker._run_job = run_and_tell\n"
        "worker.serve()\n")
    result = subprocess.run([sys.executable, "-c", script], input=json.dumps(job.request) + "\n",
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"pandas": False}, {"ok": True}]
    from slime_trace_widget.sources.dumps.wire import read_frames

    assert len(read_frames(str(tmp_path)).span_core) > 0


@pytest.mark.parametrize("in_child", [True, False])
def test_a_jobs_child_freezes_what_it_keeps_so_collections_skip_it(
        monkeypatch: pytest.MonkeyPatch, in_child: bool) -> None:
    """Once the cyclic collector runs again after flattening, its first pass would scan
    every object of the dump (0.23 s on a million records): a child, which keeps them
    until it exits, moves them out of the collector's sight. The helper, which frees
    them, must not: frozen objects would never be collected there."""
    import gc

    monkeypatch.setattr(worker, "_kept_until_exit", [] if in_child else None)
    job = pool.new_job(str(FIXTURES / "small.pt"), "frames", None, None, None)
    before = gc.get_freeze_count()
    try:
        tables = worker._flattened(job.request)
        frozen = gc.get_freeze_count() - before
    finally:
        gc.unfreeze()
    assert tables.span_core.num_rows > 0
    if in_child:
        assert frozen > 1000
    else:
        assert frozen == 0


@pytest.mark.parametrize("in_child", [True, False])
def test_a_jobs_child_ends_holding_what_it_read_but_the_helper_frees_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_child: bool) -> None:
    """Freeing a million records took 0.6 s after the verdict was ready: a job's forked
    child keeps the dump it read and the tables it wrote until ``os._exit`` ends it. A
    job run in the helper itself (no fork) must free them, or the helper would grow."""
    from slime_trace_widget.sources.dumps import files
    from slime_trace_widget.sources.dumps.wire import read_frames

    read: list[weakref.ref] = []

    def load_and_watch(*args: object, **kwargs: object) -> files.LoadedDump:
        loaded = real_load(*args, **kwargs)
        read.append(weakref.ref(loaded))
        return loaded

    real_load = files.load_dump_file
    monkeypatch.setattr(files, "load_dump_file", load_and_watch)
    kept: list | None = [] if in_child else None
    monkeypatch.setattr(worker, "_kept_until_exit", kept)
    out = tmp_path / "out"
    out.mkdir()
    job = pool.new_job(str(FIXTURES / "small.pt"), "frames", str(out), None, None)
    worker._frames_job(job.request)
    assert len(read_frames(str(out)).spans) > 0
    if in_child:
        assert [type(value).__name__ for value in kept] == ["LoadedDump", "FrameTables"]
        assert read[0]() is kept[0]
    else:
        assert read[0]() is None


def test_a_frames_jobs_fork_writes_its_tables_into_the_frames_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a spare core, the fork's files are the frames' own: the job writes every other
    table and the caller reads frames equal to those of a job without the fork."""
    from slime_trace_widget.sources.dumps import forked_attrs, wire
    from tests.sources.test_forked_attrs import (
        FORKED_FILES,
        _assert_same_attrs,
        watch_table_writes,
    )
    from tests.sources.test_wire import assert_same_frames

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    written = watch_table_writes(monkeypatch)
    outs = {}
    for spare_core in (True, False):
        outs[spare_core] = tmp_path / str(spare_core)
        outs[spare_core].mkdir()
        job = pool.new_job(str(FIXTURES / "small.pt"), "frames", str(outs[spare_core]), None,
                           None, spare_core=spare_core)
        worker._frames_job(job.request)
        if spare_core:
            assert not set(FORKED_FILES) & set(written)
            assert all((outs[spare_core] / name).exists() for name in FORKED_FILES)
    assert all(written.count(name) == 1 for name in FORKED_FILES)  # the job without it
    forked, plain = (wire.read_frames(str(outs[spare_core])) for spare_core in (True, False))
    assert_same_frames(forked, plain)
    _assert_same_attrs(forked, plain)



@pytest.mark.parametrize("told", [True, False])
def test_a_job_started_without_a_spare_core_forks_if_one_is_free_by_then(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, told: bool) -> None:
    """A job started while every core was busy names a file that the pool creates once
    a helper idles with nothing left to start. If the file is there when the job would
    fork, the fork writes the span ends' and events' tables; else the job writes every
    table itself. The frames are the same either way."""
    from slime_trace_widget.sources.dumps import forked_attrs, wire
    from tests.sources.test_forked_attrs import (
        FORKED_FILES,
        _assert_same_attrs,
        watch_table_writes,
    )
    from tests.sources.test_wire import assert_same_frames

    monkeypatch.setattr(forked_attrs, "MIN_FORKED_ROWS", 0)
    written = watch_table_writes(monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    flag = out / pool.SPARE_FLAG
    if told:
        flag.touch()
    job = pool.new_job(str(FIXTURES / "small.pt"), "frames", str(out), None, None,
                       spare_core=False, spare_flag=str(flag))
    worker._frames_job(job.request)
    by_the_job = [name for name in FORKED_FILES if name in written]
    assert by_the_job == ([] if told else FORKED_FILES)
    frames, loaded = wire.read_frames(str(out)), load_frames(str(FIXTURES / "small.pt"))
    assert len(frames.spans) > 0
    assert_same_frames(frames, loaded)
    _assert_same_attrs(frames, loaded)


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

def test_the_helpers_jobs_take_arrow_buffers_from_malloc() -> None:
    """mimalloc's first buffers in a fresh fork cost 0.45 s of system time on a dump of a
    million records; every job runs in a fresh fork, so the helper uses malloc."""
    script = (
        "import sys, pyarrow as pa\n"
        "from slime_trace_widget.sources.dumps import worker\n"
        "worker._run_in_child = lambda request, out: print(pa.default_memory_pool()"
        ".backend_name, file=sys.stderr)\n"
        "worker.serve()\n")
    request = '{"job": "frames", "name": "x.pt"}\n'
    result = subprocess.run([sys.executable, "-c", script], input=request, capture_output=True,
                            text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "system"
