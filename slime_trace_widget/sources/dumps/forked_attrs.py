"""One attribute table built in a forked process while the worker flattens the rest.

Turning attribute dicts into typed columns is half of flattening a trace-heavy
dump, and the span ends' table is the largest of the three. A worker job that
has already read its dump forks once when flattening reaches the attributes:
the fork builds the span ends' table from the same dicts (shared copy-on-write,
nothing is sent to it), writes it as an Arrow file and then sends its warnings
over a pipe, which tells the job the file is complete; the job builds the other
two meanwhile, then maps the file. The tables are what one process would build,
since the same function runs on the same dicts. If the fork fails or dies, the
job builds the table itself.

When the job's frames go to a folder of their own, the fork writes its table
there under the table's final name, so the job does not write those bytes again
(198 MB for a dump of a million records).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Callable

from ...frames.attr_columns import AttrTable
from .wire import ATTR_TABLES, read_table, table_file, write_table

__all__ = ["attr_tables_forked"]

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


def attr_tables_forked(folder: str, final: bool = False
                       ) -> Callable[[list[list], Counter[str]], Callable[[], list[AttrTable]]]:
    """An ``AttrTablesJob`` (see ``frames.build``) whose fork writes into ``folder``.

    ``final``: ``folder`` is where the job writes its frames (``wire.write_frames``);
    the fork's file is then the table's own and stays, else it is deleted once mapped.
    """

    def start(lists: list[list], warnings: Counter[str]) -> Callable[[], list[AttrTable]]:
        table_path = table_file(folder, _FORKED_NAME)
        fork = _fork(lists[_FORKED], table_path) \
            if hasattr(os, "fork") and MIN_FORKED_ROWS <= len(lists[_FORKED]) <= MAX_FORKED_ROWS \
            else None

        def finish() -> list[AttrTable]:
            try:
                tables = [None if position == _FORKED and fork is not None
                          else AttrTable.from_dicts(dicts, warnings)
                          for position, dicts in enumerate(lists)]
            except BaseException:
                if fork is not None:  # not left running on its own
                    os.kill(fork[0], signal.SIGKILL)
                    os.close(fork[1])
                    os.waitpid(fork[0], 0)
                raise
            if fork is not None:
                tables[_FORKED] = _collect(*fork, table_path, final, warnings) \
                    or AttrTable.from_dicts(lists[_FORKED], warnings)
            return tables  # type: ignore[return-value]

        return finish

    return start


def _fork(dicts: list, table_path: str) -> tuple[int, int] | None:
    """Fork a process that writes the table of ``dicts`` at ``table_path``, then sends
    its warnings as one JSON line; its pid and the pipe's end to read that line from."""
    try:
        ready, write_end = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(ready)
        os.close(write_end)
        return None
    if pid:
        os.close(write_end)
        return pid, ready
    code = 1
    try:
        os.close(ready)
        warnings: Counter[str] = Counter()
        write_table(AttrTable.from_dicts(dicts, warnings).table, table_path)
        message = (json.dumps(dict(warnings)) + "\n").encode("ascii")
        while message:
            message = message[os.write(write_end, message):]
        code = 0
    finally:
        os._exit(code)


def _collect(pid: int, ready: int, table_path: str, final: bool,
             warnings: Counter[str]) -> AttrTable | None:
    """The forked process's table, its warnings added to ``warnings``; None if it failed."""
    table = None
    try:
        with os.fdopen(ready, "rb") as stream:
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
        _reap(pid)
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
