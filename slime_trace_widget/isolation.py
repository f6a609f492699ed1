"""Rehearse each safe load in a disposable child process, one step ahead of the real one.

Some hostile pickles need no code execution to hurt. A dict key that is a tuple
sharing its halves takes 2**64 steps to hash; int keys chosen to share one hash
make dict insertion quadratic (200,000 of them take hours); a few bytes can ask
for gigabytes. All of that runs inside the C unpickler, where neither a signal
nor another thread can stop it, so in the user's process it would freeze or kill
the Jupyter kernel. So a child process loads the same bytes first, under a CPU
time limit and a memory cap, and reports how far its unpickler got; the load in
this process is only handed bytes whose opcodes the child has already finished
(:class:`Rehearsal`, a :class:`~slime_trace_widget.dump.ReadWatcher`). When the
child hangs, overflows or crashes, the load here is still waiting at a read,
where it stops with a DumpError. Both run at once, so on two cores the guard
costs little time; the bytes are compared by digest, and the code is the same,
so this process never does more work or takes more memory than the child did.

The children are forked from one helper process per session (started on first
use: about 1.5 s, the cost of importing torch), so each rehearsal costs a fork
rather than an interpreter start. The helper is single-threaded, which makes
forking it safe, unlike forking a Jupyter kernel. It runs with its own session
id, so a stuck rehearsal is ended by killing its process group, and it exits by
itself when this process goes away (its stdin closes).

Protocol: one JSON request per line on the helper's stdin (``path``,
``cpu_seconds``, ``memory_bytes``); JSON lines back on its stdout: the
``digest`` of the bytes the child read, ``reader``/``at`` progress (every
opcode ending at or before ``at`` has run), ``reader``/``done``, and last
``ok`` or ``error``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from .paths import DumpError

try:
    import resource
except ImportError:  # Windows: rehearsals run without CPU or memory limits of their own
    resource = None  # type: ignore[assignment]

__all__ = ["Rehearsal", "default_memory_limit", "default_time_limit", "serve", "start_helper"]

#: CPU seconds a rehearsal may take: a floor plus this much per MB of file. Safe
#: loading runs at about 50 MB/s (benchmarks/bench_load.py), so a genuine dump
#: needs well under a tenth of this.
TIME_FLOOR_SECONDS = 10.0
TIME_SECONDS_PER_MB = 1.0
#: New memory a rehearsal may take: this many times the file's size, at least the
#: floor. Loaded samples take a few times their pickled size (the 212 MB demo dump
#: grows the data segment by 1.2 GB), so only what no such file could need is refused.
MEMORY_FACTOR = 64
MEMORY_FLOOR_BYTES = 4 << 30

# The helper must not have the caller's working directory on sys.path (a dump folder
# could hold a planted ``numpy.py``): ``-c`` puts it there as "", removed before any
# import. It must import this very copy of the package: its folder is put first.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HELPER_COMMAND = ("import sys; sys.path[:] = [sys.argv[1]] + [p for p in sys.path if p and "
                   "p != sys.argv[1]]; from slime_trace_widget.isolation import serve; serve()")


def default_time_limit(size: int) -> float:
    """CPU seconds allowed for rehearsing a file of ``size`` bytes."""
    return TIME_FLOOR_SECONDS + TIME_SECONDS_PER_MB * size / 1e6


def default_memory_limit(size: int) -> int:
    """Bytes of new memory allowed for rehearsing a file of ``size`` bytes."""
    return max(MEMORY_FLOOR_BYTES, MEMORY_FACTOR * size)


class Rehearsal:
    """One rehearsal in a child process, and the gate that keeps this process's load behind it.

    Use as a context manager around the real load, with this object as the
    load's watcher, then call :meth:`finish`. Leaving the block early ends the
    child. ``time_limit`` is in CPU seconds, ``memory_limit`` in bytes of new
    memory; both default to what a genuine file of this size could need.
    """

    def __init__(self, name: str, data: bytes, *, time_limit: float | None = None,
                 memory_limit: int | None = None) -> None:
        self._name = name
        self._digest = hashlib.blake2b(data).hexdigest()
        cpu_seconds = (default_time_limit(len(data)) if time_limit is None
                       else float(time_limit))
        memory_bytes = (default_memory_limit(len(data)) if memory_limit is None
                        else float(memory_limit))
        if not cpu_seconds > 0 or not memory_bytes > 0:
            raise ValueError("time_limit and memory_limit must be positive")
        # The helper has its own working directory: it opens the absolute path and
        # names the file as the caller did.
        self._request = {"path": os.path.abspath(name), "name": name,
                         "cpu_seconds": cpu_seconds, "memory_bytes": memory_bytes}
        # Wall-clock backstop for what the CPU limit cannot see (a child blocked on
        # I/O); generous, since on a busy machine a CPU second takes longer.
        self._wall_seconds = 3 * cpu_seconds + 30
        self._deadline = 0.0
        self._reached: dict[int, float] = {}
        self._verdict: dict | None = None
        self._abandoned = False

    def __enter__(self) -> Rehearsal:
        _HELPER.lock.acquire()
        try:
            self._deadline = time.monotonic() + self._wall_seconds
            _HELPER.send(self._name, self._request)
        except BaseException:
            _HELPER.lock.release()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            if self._verdict is None and kind is not None and issubclass(kind, Exception) \
                    and not self._abandoned:
                # The load here failed on bytes the child got through first: the child,
                # running the same code, fails the same way at once. Take its verdict,
                # which keeps the helper for the next file.
                with contextlib.suppress(DumpError):
                    self.finish()
            if self._verdict is None:  # left early: the child's messages would be stale
                _HELPER.stop()
        finally:
            _HELPER.lock.release()

    def allow(self, reader: int, start: int, end: int, exact: bool) -> int:
        """Wait until the child has finished every opcode in the bytes to be handed out."""
        self._raise_if_refused()
        while self._verdict is None:  # after the child's "ok" everything is allowed
            reached = self._reached.get(reader, -1.0)
            if reached >= end:
                return end
            if not exact and reached > start:
                return int(reached)
            self._next_message()
        return end

    def loaded(self, reader: int) -> None:
        """Nothing to do: the child reports its own readers finishing."""

    def finish(self) -> None:
        """Wait for the child's verdict; raise DumpError unless it loaded the file."""
        while self._verdict is None:
            self._next_message()
        self._raise_if_refused()

    def _raise_if_refused(self) -> None:
        if self._verdict is not None and "error" in self._verdict:
            raise DumpError(str(self._verdict["error"]))

    def _next_message(self) -> None:
        """Take one message from the child; raise DumpError when it failed."""
        message = _HELPER.receive(self._name, self._deadline - time.monotonic())
        if "error" in message:
            self._verdict = message
            raise DumpError(str(message["error"]))
        if "digest" in message and message["digest"] != self._digest:
            self._abandoned = True
            raise DumpError(f"{self._name}: refused: the file changed while it was being loaded")
        if "reader" in message:
            self._reached[int(message["reader"])] = (
                math.inf if message.get("done") else float(message["at"]))
        if message.get("ok"):
            self._verdict = message


class _Helper:
    """The helper process, started on first use and restarted after any failure."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue[bytes] = queue.Queue()

    def forget(self) -> None:
        """In a forked copy of this process: drop the parent's helper without touching it.

        Its pipes and lock belong to the parent (the lock may even be held by a
        thread that does not exist here); this process starts its own helper.
        """
        self.lock = threading.Lock()
        self._process = None
        self._lines = queue.Queue()

    def start_early(self) -> None:
        """Start the helper now, so its torch import overlaps this process's own
        imports; a failure is left for the first load to report."""
        if _IN_HELPER or not self.lock.acquire(blocking=False):
            return
        try:
            self._running("")
        except DumpError:
            pass
        finally:
            self.lock.release()

    def send(self, name: str, request: dict) -> None:
        """Start a rehearsal (the caller holds ``lock``)."""
        process = self._running(name)
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(request).encode("ascii") + b"\n")
            process.stdin.flush()
        except OSError as exc:
            self.stop()
            raise DumpError(f"{name}: the isolated loader stopped unexpectedly ({exc}); "
                            "nothing was loaded") from exc
        except BaseException:  # interrupted mid-line: the helper would misread what follows
            self.stop()
            raise

    def receive(self, name: str, seconds: float) -> dict:
        """The next message of the running rehearsal; any failure stops the helper.

        A KeyboardInterrupt while waiting also stops it, so the stuck child does
        not outlive the interrupted load.
        """
        try:
            line = self._lines.get(timeout=max(seconds, 0.0) if math.isfinite(seconds) else None)
            message = json.loads(line) if line else None
        except queue.Empty:
            self.stop()
            return {"error": f"{name}: refused: loading it did not finish within "
                             "the time limit"}
        except ValueError:  # a garbled line
            message = None
        except BaseException:
            self.stop()
            raise
        if not isinstance(message, dict):
            self.stop()
            return {"error": f"{name}: the isolated loader stopped unexpectedly; "
                             "nothing was loaded"}
        return message

    def _running(self, name: str) -> subprocess.Popen:
        """The live helper process, started if needed."""
        if self._process is not None and self._process.poll() is None:
            return self._process
        self.stop()
        try:
            process = subprocess.Popen(
                [sys.executable, *_interpreter_flags(), "-c", _HELPER_COMMAND, _PACKAGE_PARENT],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True)
        except OSError as exc:
            raise DumpError(f"{name}: could not start the isolated loader ({exc}); "
                            "load_dump(..., isolate=False) loads without it") from exc
        self._process = process
        self._lines = queue.Queue()
        threading.Thread(target=_forward_lines, args=(process.stdout, self._lines),
                         name="slime-trace-isolation", daemon=True).start()
        return process

    def stop(self) -> None:
        """End the helper and any rehearsal it is running."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if hasattr(os, "killpg"):
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
        except OSError:
            pass  # already gone
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def _interpreter_flags() -> list[str]:
    """This interpreter's isolation flags (-I, -E, -s), so the helper finds modules alike."""
    flags = sys.flags
    if flags.isolated:
        return ["-I"]
    return [flag for flag, on in (("-E", flags.ignore_environment),
                                  ("-s", flags.no_user_site)) if on]


def _forward_lines(stream: Any, lines: queue.Queue[bytes]) -> None:
    """Move the helper's output lines to the queue; an empty line means it ended."""
    try:
        for line in iter(stream.readline, b""):
            lines.put(line)
    except (OSError, ValueError):
        pass  # closed by stop()
    lines.put(b"")


#: True in the helper and its children, which load dumps without a helper of their own.
_IN_HELPER = False
_HELPER = _Helper()
atexit.register(_HELPER.stop)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_HELPER.forget)


def start_helper() -> None:
    """Start the rehearsal helper ahead of the first load (see :meth:`_Helper.start_early`)."""
    _HELPER.start_early()


# ---------------------------------------------------------------------------
# The helper process.


def serve() -> None:
    """Helper main loop: rehearse each request line, relaying the child's messages."""
    global _IN_HELPER
    _IN_HELPER = True
    try:
        from .dump import load_dump_bytes  # noqa: F401  (imported once, before any fork)
        broken = None
    except BaseException as exc:  # report it per request rather than dying silently
        broken = f"{type(exc).__name__}: {exc}"
    if len(sys.argv) > 1 and sys.argv[1] != _PACKAGE_PARENT:
        broken = f"it imported slime_trace_widget from {_PACKAGE_PARENT}, not {sys.argv[1]}"
    out = _Messages(_private_stdout())
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if broken is not None:
            out.send({"error": f"{request['name']}: the isolated loader cannot start "
                               f"({broken})"})
        elif hasattr(os, "fork"):
            _rehearse_in_child(request, out)
        else:
            _rehearse(request, out)


def _private_stdout() -> int:
    """A descriptor for the messages, with fd 1 itself sent to /dev/null.

    Anything else printing to stdout in the helper or a child (a library's
    notice) would otherwise land in the middle of the message stream.
    """
    channel = os.dup(sys.stdout.fileno())
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return channel


class _Messages:
    """JSON lines written straight to a file descriptor, one ``write`` each."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: dict) -> None:
        payload = (json.dumps(message) + "\n").encode("ascii")
        while payload:
            payload = payload[os.write(self.fd, payload):]


class _ProgressReporter:
    """The child's watcher: tells the parent how far each reader has got."""

    def __init__(self, out: _Messages) -> None:
        self._out = out

    def allow(self, reader: int, start: int, end: int, exact: bool) -> int:
        # The unpickler asks for bytes at ``start`` only after running every opcode before.
        self._out.send({"reader": reader, "at": start})
        return end

    def loaded(self, reader: int) -> None:
        self._out.send({"reader": reader, "done": True})


def _rehearse_in_child(request: dict, out: _Messages) -> None:
    """Fork, rehearse in the child under its limits, and relay what it says."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read_end)
            os.close(out.fd)  # only the helper answers the parent
            _apply_limits(request)
            _rehearse(request, _Messages(write_end))
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    concluded = False
    with os.fdopen(read_end, "rb") as child:
        for line in child:
            if not line.endswith(b"\n"):
                break  # cut off by the child's death
            message = json.loads(line)
            concluded = "ok" in message or "error" in message
            out.send(message)
    _, status = os.waitpid(pid, 0)
    if not concluded:
        out.send({"error": _death_message(request, os.waitstatus_to_exitcode(status))})


def _death_message(request: dict, code: int) -> str:
    """Why a rehearsal child ended without a verdict, from its exit code."""
    name = request["name"]
    if code < 0 and -code == getattr(signal, "SIGXCPU", None):
        return (f"{name}: refused: loading it took more than {request['cpu_seconds']:g} s of "
                "CPU time (load_dump's time_limit; a dump of this size needs far less)")
    if code < 0 and -code == signal.SIGKILL:
        return (f"{name}: refused: the system killed the isolated child loading it (out of "
                "memory, or far past the CPU time limit); nothing was loaded")
    if code < 0:
        return (f"{name}: the loader crashed on it in the isolated child "
                f"({signal.Signals(-code).name}); nothing was loaded")
    return f"{name}: the isolated loader exited with status {code}; nothing was loaded"


def _apply_limits(request: dict) -> None:
    """CPU seconds and new memory for this child; no core file when a limit ends it."""
    if resource is None:
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if math.isfinite(request["cpu_seconds"]):
        # SIGXCPU at the soft limit ends the child; the hard one (SIGKILL) is a backstop.
        cpu = max(1, math.ceil(request["cpu_seconds"]))
        _lower_limit(resource.RLIMIT_CPU, cpu, cpu + 5)
    used = _data_segment_bytes()
    if used is not None and math.isfinite(request["memory_bytes"]):
        cap = used + int(request["memory_bytes"])
        _lower_limit(resource.RLIMIT_DATA, cap, None)


def _lower_limit(kind: int, soft: int, hard: int | None) -> None:
    """Set a resource limit no higher than the one the process already has."""
    old_soft, old_hard = resource.getrlimit(kind)
    infinite = resource.RLIM_INFINITY
    if old_hard != infinite:
        soft = min(soft, old_hard)
        hard = old_hard if hard is None else min(hard, old_hard)
    elif hard is None:
        hard = infinite
    if old_soft != infinite and old_soft < soft:
        soft = old_soft
    resource.setrlimit(kind, (soft, hard))


def _data_segment_bytes() -> int | None:
    """The process's data segment as RLIMIT_DATA counts it (``VmData``), on Linux."""
    try:
        with open("/proc/self/status", encoding="utf-8", errors="replace") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _rehearse(request: dict, out: _Messages) -> None:
    """Read the file and load it as load_dump would, reporting progress and the verdict."""
    from .dump import load_dump_bytes

    name = request["name"]
    try:
        with open(request["path"], "rb") as handle:
            data = handle.read()
        out.send({"digest": hashlib.blake2b(data).hexdigest()})
        load_dump_bytes(name, data, _ProgressReporter(out))
    except DumpError as exc:
        out.send({"error": str(exc)})
    except MemoryError:
        out.send({"error": f"{name}: refused: loading it needs more memory than a file of "
                           "its size could (load_dump's memory_limit)"})
    except Exception as exc:  # reported in the verdict, never raised in the helper
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:240]
        out.send({"error": f"{name}: could not be loaded ({detail})"})
    else:
        out.send({"ok": True})
