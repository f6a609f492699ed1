"""The skim (:mod:`.skim`) in a forked process, its output unpickled as it comes.

Walking a dump's pickle and unpickling what it keeps are two passes one after
the other; on a machine with a core to spare they overlap. The job forks: the
fork maps the file, walks it and writes the kept bytes into a pipe as it goes,
then one JSON line saying what it cut (and whether the member's CRC held); the
job unpickles from the pipe meanwhile. If the fork gives up or dies, the pipe
ends before the pickle does, the unpickling fails, and the caller reads the
file the plain way.

What the fork needs: the job has no other thread when it forks (a fork copies
only the forking thread; the skim is the job's first work, in a child the helper
forked, and the CRC's thread runs in the fork itself); the fork only reads the
file through its own mapping and writes the pipe, so the job's state is never
touched; and it ends by ``os._exit``, never returning into the job's stack. The
result is the plain read's or nothing: the job keeps it only when the trailer
says every cut was made and the member's CRC held.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import zipfile
from collections.abc import Callable
from typing import Any, BinaryIO

from .skim import Skimmed, skim_stored_file

try:
    from fcntl import F_SETPIPE_SZ, fcntl
except ImportError:  # not Linux: the pipe keeps the system's size
    F_SETPIPE_SZ = None

__all__ = ["unpickle_skimmed"]

_PIPE_BUFFER = 1 << 20


def unpickle_skimmed(path: str, info: zipfile.ZipInfo,
                     unpickle: Callable[[BinaryIO], Any]) -> tuple[Any, Skimmed] | None:
    """``unpickle`` run on the skimmed bytes of the stored member ``info`` of the zip at
    ``path`` while a forked process skims them; what it returned and what was cut, or
    None when either failed or the member's CRC did not hold."""
    read_end, write_end = os.pipe()
    _widen(write_end)
    try:
        pid = os.fork()
    except OSError:  # no process to spare: the caller reads the file the plain way
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:
        _skim_into(path, info, read_end, write_end)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb", buffering=_PIPE_BUFFER) as reader:
            try:
                obj = unpickle(reader)
            except Exception:  # the skim gave up mid-way, or the file is bad: the plain
                return None    # read decides which, and says what is wrong
            trailer = _trailer(reader)
    finally:
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if trailer is None or not trailer["crc_ok"]:
        return None
    return obj, Skimmed(trailer["marker"], trailer["cuts"], trailer["fetched"])


def _widen(pipe: int) -> None:
    """Give the pipe :data:`_PIPE_BUFFER` bytes of room where the system allows it, so
    the skim may run that far ahead of the unpickler: with Linux's 64 KiB the two
    processes would take turns at every 64 KiB instead of running side by side."""
    if F_SETPIPE_SZ is not None:
        # OSError: above the system's pipe-max-size, or past the user's pipe quota
        with contextlib.suppress(OSError):
            fcntl(pipe, F_SETPIPE_SZ, _PIPE_BUFFER)


def _skim_into(path: str, info: zipfile.ZipInfo, read_end: int, write_end: int) -> None:
    """The forked side: skim into the pipe, then the trailer; never returns."""
    code = 1
    try:
        os.close(read_end)
        with os.fdopen(write_end, "wb", buffering=_PIPE_BUFFER) as pipe:
            checked = skim_stored_file(path, info, emit=pipe.write)
            if checked is not None:
                skimmed, crc_ok = checked
                pipe.write(json.dumps({"marker": skimmed.marker, "cuts": skimmed.cuts,
                                       "fetched": skimmed.fetched, "crc_ok": crc_ok},
                                      ).encode() + b"\n")
        code = 0
    except BrokenPipeError:  # the job stopped reading: it failed, and says so itself
        pass
    finally:
        os._exit(code)


def _trailer(reader: BinaryIO) -> dict | None:
    """The skim's closing line, after the pickle's STOP; None if it never came."""
    try:
        line = reader.read()
        report = json.loads(line)
    except (OSError, ValueError):
        return None
    valid = (isinstance(report, dict) and isinstance(report.get("marker"), str)
             and type(report.get("cuts")) is int and isinstance(report.get("fetched"), bool)
             and isinstance(report.get("crc_ok"), bool))
    return report if valid else None
