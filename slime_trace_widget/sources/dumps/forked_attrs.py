"""One attribute table built in a forked process while the worker flattens the rest.

Turning attribute dicts into typed columns is half of flattening a trace-heavy
dump, and the span ends' table is the largest of the three. A worker job that
has read its dump forks as soon as the carrier pass has paired the real spans'
ends: the fork groups and transposes those dicts (shared copy-on-write, nothing
is sent for them) while the job makes the span columns and the PD spans. The job
then sends the PD spans' end attributes (a few percent of the rows) over a pipe;
the fork adds them, builds the table exactly as one process would over the whole
list (``AttrTableBuilder``), writes it as an Arrow file and sends its warnings
over a second pipe, which tells the job the file is complete. The job builds the
other two tables meanwhile, then maps the file. If the fork fails or dies, the
job builds the table itself.

When the job's frames go to a folder of their own, the fork writes its table
there under the table's final name, so the job does not write those bytes again
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
from typing import NamedTuple

from ...frames.attr_columns import AttrTable, AttrTableBuilder
from ...frames.build import AttrTablesHere
from .wire import ATTR_TABLES, read_table, table_file, write_table

__all__ = ["ForkedAttrTables"]

#: Which of the three lists (span starts, span ends, events: the order of
#: ``wire.ATTR_TABLES``) the fork takes, and so the name of its table.
_FORKED = 1
_FORKED_NAME = ATTR_TABLES[_FORKED]
#: Lists of fewer rows are built in the job itself: forking would cost more. So are
#: lists of more rows than the maximum: after the fork, every object the job touches
#: (a reference count is a write) copies its page, and on a heap of gigabytes that
#: costs more than the fork saves (1.9M span ends: 15.1 s to flatten with the fork,
#: 13.6 s without; 500k: 3.45 s with it, 4.06 s without).
MIN_FORKED_ROWS = 50_000
MAX_FORKED_ROWS = 1_000_000


class _Fork(NamedTuple):
    pid: int
    done: int  # the read end of the fork's warnings line
    rest: int  # the write end for the PD spans' end attributes


class ForkedAttrTables(AttrTablesHere):
    """Builds the span ends' table in a fork that writes it into ``folder``.

    ``final``: ``folder`` is where the job writes its frames (``wire.write_frames``);
    the fork's file is then the table's own and stays, else it is deleted once mapped.
    One instance serves one ``build_frames`` call.
    """

    def __init__(self, folder: str, final: bool = False) -> None:
        super().__init__()
        self._table_path = table_file(folder, _FORKED_NAME)
        self._final = final
        self._fork: _Fork | None = None
        self._sending = False  # a thread owns (and closes) the fork's ``rest`` end
        self._real_rows = 0

    def span_ends_begin(self, real_end_attrs: list[dict | None]) -> None:
        self._real_rows = len(real_end_attrs)
        if hasattr(os, "fork") and MIN_FORKED_ROWS <= len(real_end_attrs) <= MAX_FORKED_ROWS:
            self._fork = _start_fork(real_end_attrs, self._table_path)

    def lists_complete(self, lists: list[list], warnings: Counter[str]) -> None:
        super().lists_complete(lists, warnings)
        if self._fork is None:
            return
        try:  # the PD spans' dicts: values read from the dump by the restricted unpickler
            rest = pickle.dumps(lists[_FORKED][self._real_rows:], protocol=5)
        except Exception:  # an object pickle cannot write: the job builds the table
            self.cancel()
            return
        # The fork reads these bytes only once its own rows are grouped; a thread
        # writes them so the job goes on meanwhile (a pipe holds 64 KiB).
        threading.Thread(target=_send, args=(self._fork.rest, rest), daemon=True).start()
        self._sending = True

    def tables(self) -> list[AttrTable]:
        try:
            tables = [None if position == _FORKED and self._fork is not None
                      else AttrTable.from_dicts(dicts, self._warnings)
                      for position, dicts in enumerate(self._lists)]
        except BaseException:
            self.cancel()
            raise
        if self._fork is not None:
            tables[_FORKED] = _collect(self._fork, self._table_path, self._final,
                                       self._warnings)
        if tables[_FORKED] is None:
            tables[_FORKED] = AttrTable.from_dicts(self._lists[_FORKED], self._warnings)
        return tables  # type: ignore[return-value]

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
        with contextlib.suppress(OSError):
            os.remove(self._table_path)


def _start_fork(real: list, table_path: str) -> _Fork | None:
    """Fork a process that builds the table of ``real`` and the rows sent after them,
    writes it at ``table_path``, then sends its warnings as one JSON line."""
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
        builder = AttrTableBuilder()
        builder.add(real)
        with os.fdopen(rest_read, "rb") as stream:
            # Bytes the job pickled from its own dicts, over a pipe only the two hold.
            builder.add(pickle.load(stream))
        warnings: Counter[str] = Counter()
        write_table(builder.table(warnings).table, table_path)
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


def _collect(fork: _Fork, table_path: str, final: bool,
             warnings: Counter[str]) -> AttrTable | None:
    """The forked process's table, its warnings added to ``warnings``; None if it failed."""
    table = None
    try:
        with os.fdopen(fork.done, "rb") as stream:
            line = stream.readline()
        if line.endswith(b"\n"):  # else the fork died before its table was complete
            # Mapped, not read into memory: 4x quicker on a 200 MB table, and this
            # short-lived job ends before the mapping's pages could weigh on anything.
            mapped = read_table(table_path, mapped=True)
            warnings.update(json.loads(line))
            table = AttrTable(mapped, file=table_path if final else None)
    except (OSError, ValueError):  # WireError among them
        table = None
    finally:
        _reap(fork.pid)
        if table is None or not final:
            with contextlib.suppress(OSError):
                os.remove(table_path)
    return table


def _reap(pid: int) -> None:
    """Collect the fork's exit without waiting on it: a process that shared a heap of
    gigabytes takes 0.03 s to end after its last message, so a thread waits for it
    when it has not ended yet."""
    ended, _ = os.waitpid(pid, os.WNOHANG)
    if not ended:
        threading.Thread(target=_wait_for, args=(pid,), daemon=True).start()


def _wait_for(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # reaped elsewhere already
        os.waitpid(pid, 0)
