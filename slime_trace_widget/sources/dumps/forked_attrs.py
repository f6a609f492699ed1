"""The span ends' and events' attribute tables built in a forked process while the
worker flattens the rest.

Turning attribute dicts into typed columns is half of flattening a trace-heavy
dump, and the span ends' table is the largest of the three. A worker job that
has read its dump forks as soon as the carrier pass has paired the real spans'
ends: the fork groups and transposes those dicts and the events' (shared
copy-on-write, nothing is sent for them) while the job makes the span columns
and the PD spans. The job then sends the PD spans' end attributes (a few percent
of the rows) over a pipe; the fork adds them, builds both tables exactly as one
process would over the whole lists (``AttrTableBuilder``), writes them as Arrow
files and sends its warnings over a second pipe, which tells the job the files
are complete. The job builds the span starts' table meanwhile, then maps the
files. If the fork fails or dies, the job builds the tables itself.

When the job's frames go to a folder of their own, the fork writes its tables
there under their final names, so the job does not write those bytes again
(198 MB for a dump of a million records).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import threading
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

from ...machine_memory import available_memory
from ...tables.attr_columns import AttrTable, AttrTableBuilder
from ...tables.build import AttrTablesHere
from .arrow_files import ATTR_TABLES, map_table, read_table, table_file, write_table

__all__ = ["ForkedAttrTables"]

#: Which of the three lists (span starts, span ends, events: the order of
#: ``arrow_files.ATTR_TABLES``) the fork takes, and so the names of its tables. The span
#: starts' stay in the job: its share of the work then about equals the fork's.
_FORKED = (1, 2)
#: The list whose length decides whether to fork: the span ends'.
_SIZED = 1
#: Lists of fewer rows are built in the job itself. After the fork, every page either
#: process writes is copied (a reference count is a write), which costs time and
#: memory on a big heap: below ``MIN_FORKED_ROWS`` span ends a process is not worth
#: starting, and lists longer than ``MAX_FORKED_ROWS`` (past the largest measured,
#: where the copied pages could exhaust memory) stay in the job. The figures behind
#: both bounds are in the commits that set them and in ``benchmarks/bench_split_headroom.py``.
MIN_FORKED_ROWS = 2_000
MAX_FORKED_ROWS = 2_000_000
#: What the fork may add to the machine's memory per span ends' row (the pages its
#: reads copy, and its tables): it starts only while that much memory is available.
FORK_BYTES_PER_ROW = 1024


class _Fork(NamedTuple):
    pid: int
    done: int  # the read end of the fork's warnings line
    rest: int  # the write end for the rows that complete its lists


class ForkedAttrTables(AttrTablesHere):
    """Builds the span ends' and events' tables in a fork that writes them into ``folder``.

    ``final``: ``folder`` is where the job writes its frames (``arrow_files.write_tables``);
    the fork's files are then the tables' own and stay, and each table built in the job
    goes there as soon as it is built. Else the fork's files are deleted once mapped,
    and the job's tables stay in its memory. ``spare``: asked when the fork would start,
    whether a core is free for it (None: one is). One instance serves one
    ``build_frames`` call.
    """

    def __init__(self, folder: str, final: bool = False,
                 spare: Callable[[], bool] | None = None) -> None:
        super().__init__()
        self._folder = folder
        self._table_paths = [table_file(folder, ATTR_TABLES[position]) for position in _FORKED]
        self._final = final
        self._spare = spare
        self._fork: _Fork | None = None
        self._sending = False  # a thread owns (and closes) the fork's ``rest`` end
        self._first_rows = [0] * len(_FORKED)

    def lists_begin(self, lists: list[list]) -> None:
        firsts = [lists[position] for position in _FORKED]
        self._first_rows = [len(first) for first in firsts]
        if _worth_forking(len(lists[_SIZED])) and (self._spare is None or self._spare()):
            self._fork = _start_fork(firsts, self._table_paths)

    def lists_complete(self, lists: list[list], warnings: Counter[str]) -> None:
        super().lists_complete(lists, warnings)
        if self._fork is None:
            return
        rests = [lists[position][first:]
                 for position, first in zip(_FORKED, self._first_rows, strict=True)]
        try:  # the PD spans' dicts: values read from the dump by the restricted unpickler
            rest = pickle.dumps(rests, protocol=5)
        except Exception:  # an object pickle cannot write: the job builds the tables
            self.cancel()
            return
        # The fork reads these bytes only once its first rows are grouped; a thread
        # writes them so the job goes on meanwhile (a pipe holds 64 KiB).
        threading.Thread(target=_send, args=(self._fork.rest, rest), daemon=True).start()
        self._sending = True

    def tables(self) -> list[AttrTable]:
        forked = _FORKED if self._fork is not None else ()
        try:
            tables = [None if position in forked else self._built_here(position, dicts)
                      for position, dicts in enumerate(self._lists)]
        except BaseException:
            self.cancel()
            raise
        # The fork is reaped and its pipe closed by _collect: taken out first, so that a
        # failure of the job's own build below finds no fork left to cancel.
        fork, self._fork = self._fork, None
        if fork is not None:
            collected = _collect(fork, self._table_paths, self._final, self._warnings)
            if collected is not None:
                for position, table in zip(_FORKED, collected, strict=True):
                    tables[position] = table
        return [table if table is not None else self._built_here(position, dicts)
                for position, (table, dicts) in enumerate(zip(tables, self._lists, strict=True))]

    def _built_here(self, position: int, dicts: list) -> AttrTable:
        """The table of list ``position``, built in this process. With ``final``, written
        at once to its file, which then holds it (mapped), and its memory freed: the next
        table's build takes that memory back rather than pages the process never had."""
        table = AttrTable.from_dicts(dicts, self._warnings)
        if not self._final:
            return table
        path = table_file(self._folder, ATTR_TABLES[position])
        write_table(table.table, path)
        return AttrTable(map_table(path), file=path)

    def cancel(self) -> None:
        """Stop the fork, if any: it is not left running (or waiting) on its own."""
        fork, self._fork = self._fork, None
        if fork is None:
            return
        os.kill(fork.pid, signal.SIGKILL)
        os.close(fork.done)
        if not self._sending:  # else the thread closes it, on the broken pipe
            os.close(fork.rest)
        os.waitpid(fork.pid, 0)
        _remove(self._table_paths)


def _worth_forking(rows: int) -> bool:
    if not (hasattr(os, "fork") and MIN_FORKED_ROWS <= rows <= MAX_FORKED_ROWS):
        return False
    available = available_memory()
    return available is None or available >= FORK_BYTES_PER_ROW * rows


def _start_fork(firsts: list[list], table_paths: list[str]) -> _Fork | None:
    """Fork a process that builds a table of each list of ``firsts`` and the rows sent
    after them, writes them at ``table_paths``, then sends its warnings as one JSON line."""
    try:
        done, done_write = os.pipe()
    except OSError:
        return None
    try:
        rest_read, rest = os.pipe()
    except OSError:
        os.close(done)
        os.close(done_write)
        return None
    try:
        pid = os.fork()
    except OSError:
        for end in (done, done_write, rest_read, rest):
            os.close(end)
        return None
    if pid:
        os.close(done_write)
        os.close(rest_read)
        return _Fork(pid, done, rest)
    code = 1
    try:
        os.close(done)
        os.close(rest)
        builders = [AttrTableBuilder() for _ in firsts]
        for builder, first in zip(builders, firsts, strict=True):
            builder.add(first)
        with os.fdopen(rest_read, "rb") as stream:
            # Bytes the job pickled from its own dicts, over a pipe only the two hold.
            rests = pickle.load(stream)
        warnings: Counter[str] = Counter()
        for builder, rest_rows, path in zip(builders, rests, table_paths, strict=True):
            builder.add(rest_rows)
            write_table(builder.table(warnings).table, path)
        message = (json.dumps(dict(warnings)) + "\n").encode("ascii")
        while message:
            message = message[os.write(done_write, message):]
        code = 0
    finally:
        os._exit(code)


def _send(end: int, data: bytes) -> None:
    """Write ``data`` to the pipe's ``end`` and close it; a fork that died ends it early."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(end, view):]
    except OSError:  # BrokenPipeError among them: the table is the job's to build
        pass
    finally:
        with contextlib.suppress(OSError):
            os.close(end)


def _collect(fork: _Fork, table_paths: list[str], final: bool,
             warnings: Counter[str]) -> list[AttrTable] | None:
    """The forked process's tables, its warnings added to ``warnings``; None if it failed."""
    tables = None
    try:
        with os.fdopen(fork.done, "rb") as stream:
            line = stream.readline()
        if line.endswith(b"\n"):  # else the fork died before its tables were complete
            # Mapped, not read into memory: the job checks the tables and passes them
            # on, which needs no copy of their bytes, and this short-lived job ends
            # before the mapping's pages could weigh on anything.
            tables = [AttrTable(read_table(path, mapped=True), file=path if final else None)
                      for path in table_paths]
            warnings.update(json.loads(line))
    except (OSError, ValueError):  # WireError among them
        tables = None
    finally:
        _reap(fork.pid)
        if tables is None or not final:
            _remove(table_paths)
    return tables


def _remove(paths: list[str]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.remove(path)


def _reap(pid: int) -> None:
    """Collect the fork's exit without waiting on it: a process that shared a heap of
    gigabytes takes a while to end after its last message, so a thread waits for it
    when it has not ended yet."""
    ended, _ = os.waitpid(pid, os.WNOHANG)
    if not ended:
        threading.Thread(target=_wait_for, args=(pid,), daemon=True).start()


def _wait_for(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # reaped elsewhere already
        os.waitpid(pid, 0)
