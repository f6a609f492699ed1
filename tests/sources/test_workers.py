"""The loader's helper process: it loads as an in-process load does, and stays safe.

Isolated and in-process loads of every fixture agree (corrupt files give the
same message either way); the helper reads the file itself and refuses one that
changed meanwhile, imports nothing planted in the working directory, starts no
helper of its own, holds OpenBLAS to one thread, opens a relative path as the
caller's; a helper that cannot start, a child that died and a forked caller
each get a clear answer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from slime_trace_widget import DumpError
from slime_trace_widget.sources import loading
from slime_trace_widget.sources.dumps import pool, worker
from slime_trace_widget.sources.loading import load_dump, load_frames
from tests.support.hostile_pickles import benign_sample
from tests.support.processes import running_processes

FIXTURES = Path(__file__).parents[1] / "fixtures"


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
