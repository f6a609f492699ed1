"""The worker pool: helper processes that load one dump each under CPU and memory limits.

A job names a dump and what to do with it (flatten to frames, check it, write it
into a run dataset); :func:`run_jobs` runs jobs on idle helpers, as many at once
as cores and memory allow, and gives each its verdict. Helpers outlive a call
and are reused; a helper that misbehaves is stopped and replaced. The callers'
side (what to load, what comes back) is :mod:`..loading`. Every helper still running
when the process exits is ended then, busy or idle (:mod:`.exit_cleanup`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...machine_memory import available_memory
from .errors import DumpError
from .exit_cleanup import end_helper, helper_ended, raise_if_exiting, started_helper

__all__ = ["SPARE_FLAG", "default_memory_limit", "default_time_limit", "default_workers",
           "expected_peak", "new_job", "run_jobs", "start_worker"]

#: CPU seconds a worker may take: a floor plus this much per MB of file. A genuine
#: dump needs a small part of it (benchmarks/bench_pipeline.py prints what loads
#: take); the limit is for a file whose keys hash or whose opcodes loop for ever.
TIME_FLOOR_SECONDS = 10.0
TIME_SECONDS_PER_MB = 1.0
#: New memory a worker may take: this many times the file's size, at least the floor.
MEMORY_FACTOR = 64
MEMORY_FLOOR_BYTES = 4 << 30
#: The file a job may name as its ``spare_flag`` is called this in its own folder: the
#: pool creates it when a core is free for the job (:func:`_tell_spare_cores`).
SPARE_FLAG = "spare_core.flag"
#: What a worker is expected to need at its peak, to decide how many run at once:
#: loaded samples take several times their pickled size, plus the interpreter.
PEAK_FACTOR = 8
PEAK_BASE_BYTES = 400 << 20

_PACKAGE_PARENT = str(Path(os.path.abspath(__file__)).parents[3])
# The worker must not have the caller's working directory on sys.path (a dump folder
# could hold a planted ``numpy.py``): ``-c`` puts it there as "", removed before any
# import. It must import this very copy of the package: its folder is put first.
_WORKER_COMMAND = ("import sys; sys.path[:] = [sys.argv[1]] + [p for p in sys.path if p and "
                   "p != sys.argv[1]]; "
                   "from slime_trace_widget.sources.dumps.worker import serve; serve()")


def default_time_limit(size: int) -> float:
    """CPU seconds allowed for a file of ``size`` bytes."""
    return TIME_FLOOR_SECONDS + TIME_SECONDS_PER_MB * size / 1e6


def default_memory_limit(size: int) -> int:
    """Bytes of new memory allowed for a file of ``size`` bytes."""
    return max(MEMORY_FLOOR_BYTES, MEMORY_FACTOR * size)


def default_workers(paths: list[str]) -> int:
    """Workers to run at once: one per core, no more than dumps, at least one."""
    return max(1, min(os.cpu_count() or 1, len(paths)))


# --------------------------------------------------------------------------- worker processes


class _Worker:
    """One helper process and the job it runs; restarted after any failure."""

    def __init__(self, inbox: queue.Queue) -> None:
        self.inbox = inbox
        self._process: subprocess.Popen | None = None
        self.job: _Job | None = None

    def start(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        self.stop()
        try:
            process = started_helper(lambda: subprocess.Popen(
                [sys.executable, *_interpreter_flags(), "-c", _WORKER_COMMAND, _PACKAGE_PARENT],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True, env=_worker_environment()))
        except OSError as exc:
            raise DumpError(f"could not start the loader's worker process ({exc})") from exc
        self._process = process
        threading.Thread(target=_forward_lines, args=(process.stdout, self),
                         name="slime-trace-worker", daemon=True).start()

    def send(self, job: _Job) -> None:
        self.start()
        process = self._process
        assert process is not None and process.stdin is not None
        self.job = job
        try:
            process.stdin.write(json.dumps(job.request).encode("ascii") + b"\n")
            process.stdin.flush()
        except OSError as exc:
            self.stop()
            raise_if_exiting()  # the exit hook ended it, not the job
            raise DumpError(f"{job.name}: the loader's worker stopped unexpectedly ({exc})") \
                from exc
        except BaseException:  # interrupted mid-line: the helper would misread what follows
            self.stop()
            raise

    @property
    def started(self) -> bool:
        """It has a process (not yet stopped), which may be kept for the next load."""
        return self._process is not None

    def owns(self, stream: Any) -> bool:
        return self._process is not None and self._process.stdout is stream

    def kill(self) -> None:
        """Send the helper and any job it is running (its whole process group) SIGKILL,
        without waiting: :meth:`stop` waits."""
        if self._process is not None:
            end_helper(self._process)

    def stop(self) -> None:
        """End the helper and any job it is running, and wait for it."""
        process, self._process = self._process, None
        if process is None:
            return
        end_helper(process)
        process.wait()
        helper_ended(process)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a request line the dead helper never took
                    stream.close()


def _worker_environment() -> dict[str, str]:
    """This process's environment, numpy's OpenBLAS held to one thread unless the user
    chose a number: a worker never multiplies matrices, and OpenBLAS's threads spin
    while numpy is imported, CPU taken from the jobs when a call of several dumps
    starts a second helper. It also keeps the helper, which forks every job, free of
    threads a fork would copy in an unknown state."""
    environment = dict(os.environ)
    environment.setdefault("OPENBLAS_NUM_THREADS", "1")
    return environment


def _interpreter_flags() -> list[str]:
    """This interpreter's isolation flags (-I, -E, -s), so the worker finds modules alike."""
    flags = sys.flags
    if flags.isolated:
        return ["-I"]
    return [flag for flag, on in (("-E", flags.ignore_environment),
                                  ("-s", flags.no_user_site)) if on]


def _forward_lines(stream: Any, worker: _Worker) -> None:
    """Move the helper's output lines to the inbox of the pool using it; None: it ended."""
    try:
        for line in iter(stream.readline, b""):
            worker.inbox.put((worker, stream, line))
    except (OSError, ValueError):
        pass  # closed by stop()
    worker.inbox.put((worker, stream, None))


class _Idle:
    """Helpers kept between loads, so a second load starts warm."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.workers: list[_Worker] = []

    def take(self, count: int, inbox: queue.Queue) -> list[_Worker]:
        with self.lock:
            taken, self.workers = self.workers[:count], self.workers[count:]
        for worker in taken:
            worker.inbox = inbox
        return taken + [_Worker(inbox) for _ in range(count - len(taken))]

    def give_back(self, workers: list[_Worker]) -> None:
        with self.lock:
            self.workers.extend(w for w in workers if w.started)

    def stop_all(self) -> None:
        with self.lock:
            workers, self.workers = self.workers, []
        for worker in workers:
            worker.stop()

    def forget(self) -> None:
        """In a forked copy of this process: the parent's helpers are not ours to use."""
        self.lock = threading.Lock()
        self.workers = []


_IDLE = _Idle()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_IDLE.forget)


def start_worker() -> None:
    """Start one helper now, so its imports overlap the caller's own (a failure waits
    for the first load to report it)."""
    if _IDLE.workers:
        return
    worker = _Worker(queue.Queue())
    try:
        worker.start()
    except DumpError:
        return
    _IDLE.give_back([worker])


# --------------------------------------------------------------------------- jobs


@dataclass
class _Job:
    name: str
    size: int
    request: dict
    deadline: float = math.inf
    verdict: dict | None = None
    digest: str | None = None
    told_spare: bool = False  # its ``spare_flag`` file was created


def new_job(path: str, kind: str, out: str | None, time_limit: float | None,
         memory_limit: int | None, **fields: Any) -> _Job:
    size = os.path.getsize(path)
    cpu_seconds = default_time_limit(size) if time_limit is None else float(time_limit)
    memory_bytes = default_memory_limit(size) if memory_limit is None else float(memory_limit)
    if not cpu_seconds > 0 or not memory_bytes > 0:
        raise ValueError("time_limit and memory_limit must be positive")
    request = {"job": kind, "path": os.path.abspath(path), "name": path, "out": out,
               "cpu_seconds": cpu_seconds, "memory_bytes": memory_bytes, **fields}
    return _Job(path, size, request)


def run_jobs(jobs: list[_Job], workers: int, progress: Any,
              on_done: Callable[[_Job], None] | None = None) -> None:
    """Run ``jobs`` on up to ``workers`` helpers at once; each gets its ``verdict``,
    and ``on_done`` (if given) sees it as soon as it has one.

    Jobs start largest file first, so the last to start are the shortest and the
    helpers end close together: started in the order given, a large dump last could
    keep one helper busy long after the others have ended. Once none is left to
    start, jobs still running hear of the cores that idle (:func:`_tell_spare_cores`).
    A job starts only while the expected peaks of running jobs fit in available
    memory (one always runs). Ctrl-C stops every helper before it propagates; once the
    process is exiting (a load on a daemon thread), SystemExit does (:mod:`.exit_cleanup`).
    """
    inbox: queue.Queue = queue.Queue()
    pool: list[_Worker] = []
    pending = sorted(jobs, key=lambda job: -job.size)  # stable: equal sizes keep order
    try:
        pool = _IDLE.take(workers, inbox)
        _start_pending(pending, pool)
        while any(w.job is not None for w in pool):
            running = [w.job for w in pool if w.job is not None]
            _take_message(inbox, [w for w in pool if w.job is not None], progress)
            _start_pending(pending, pool)  # a freed helper goes on before on_done runs
            if not pending:
                _tell_spare_cores(pool)
            if on_done is not None:
                for job in running:
                    if job.verdict is not None:
                        on_done(job)
    except BaseException:
        # Every helper is signalled before any is waited for: a second Ctrl-C during a
        # wait then leaves no helper running its job until the caller's process ends.
        for worker in pool:
            worker.kill()
        for worker in pool:
            worker.stop()
        raise
    _IDLE.give_back(pool)


def _start_pending(pending: list[_Job], pool: list[_Worker]) -> None:
    """Send the next jobs of ``pending`` to idle helpers, while memory allows."""
    free = [w for w in pool if w.job is None]
    while pending and free and _fits(pending[0], [w.job for w in pool if w.job]):
        job, worker = pending.pop(0), free.pop(0)
        # Wall-clock backstop for what the CPU limit cannot see; generous, since on
        # a busy machine a CPU second takes longer.
        job.deadline = time.monotonic() + 3 * job.request["cpu_seconds"] + 30
        worker.send(job)


def _tell_spare_cores(pool: list[_Worker]) -> None:
    """With no job left to start and a helper idle, create the ``spare_flag`` file of
    each running job that named one: a frames job that has not split its work yet
    then builds its span ends' table in a fork, on the idle core, as a single load
    does, so the last dumps of a call do not leave a core idle while they end."""
    running = [worker.job for worker in pool if worker.job is not None]
    if len(running) == len(pool):
        return
    for job in running:
        flag = job.request.get("spare_flag")
        if flag and not job.told_spare:
            job.told_spare = True
            try:
                with open(flag, "x"):
                    pass
            except OSError:
                pass  # the job's folder is gone (it ended meanwhile): nothing to tell


def _fits(job: _Job, running: list[_Job]) -> bool:
    if not running:
        return True
    need = sum(expected_peak(j.size) for j in running) + expected_peak(job.size)
    available = available_memory()
    return available is None or need <= available


def expected_peak(size: int) -> int:
    """Memory a worker is expected to peak at for a dump of ``size`` bytes."""
    return PEAK_BASE_BYTES + PEAK_FACTOR * size


def _take_message(inbox: queue.Queue, busy: list[_Worker], progress: Any) -> None:
    """Wait for one message from a busy worker (or the first deadline) and act on it."""
    deadline = min(w.job.deadline for w in busy if w.job is not None)
    wait = min(max(0.0, deadline - time.monotonic()), threading.TIMEOUT_MAX)  # inf: no limit
    try:
        worker, stream, line = inbox.get(timeout=wait)
    except queue.Empty:
        raise_if_exiting()
        for worker in busy:
            job = worker.job
            if job is not None and time.monotonic() >= job.deadline:
                _conclude(worker, {"error": f"{job.name}: refused: loading it did not "
                                            "finish within the time limit"}, progress, stuck=True)
        return
    raise_if_exiting()  # the exit hook ends the helpers: what they say now is not the job's
    if not worker.owns(stream) or worker.job is None:
        return  # a line from a helper already stopped, or from an idle one
    message = _parse(line)
    if message is None:
        _conclude(worker, {"error": f"{worker.job.name}: the loader's worker stopped "
                                    "unexpectedly; nothing was loaded"}, progress, stuck=True)
    elif "digest" in message:
        worker.job.digest = str(message["digest"])
    elif "ok" in message or "error" in message:
        _conclude(worker, message, progress)


def _parse(line: bytes | None) -> dict | None:
    if not line:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _conclude(worker: _Worker, verdict: dict, progress: Any, stuck: bool = False) -> None:
    """Give the worker's job its verdict and free the worker; ``stuck``: the job may
    still run, so the helper is ended and the next job gets a fresh one."""
    job = worker.job
    assert job is not None
    job.verdict = verdict
    worker.job = None
    if stuck:
        worker.stop()
    if progress is not None:
        progress.update(job.size)
