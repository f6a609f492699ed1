"""One attribute table built in a forked process while the worker flattens the rest.

Turning attribute dicts into typed columns is half of flattening a trace-heavy
dump, and the span ends' table is the largest of the three. A worker job that
has already read its dump forks once when flattening reaches the attributes:
the fork builds the span ends' table from the same dicts (shared copy-on-write,
nothing is sent to it) and writes it as an Arrow file; the job builds the other
two meanwhile, then reads the file back. The tables are what one process would
build, since the same function runs on the same dicts. If the fork fails or
dies, the job builds the table itself.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Callable

from ...frames.attr_columns import AttrTable
from .wire import read_table, write_table

__all__ = ["attr_tables_forked"]

#: Which of the three lists (span starts, span ends, events) the fork takes.
_FORKED = 1
#: Lists of fewer rows are built in the job itself: forking would cost more. So are
#: lists of more rows than the maximum: after the fork, every object the job touches
#: (a reference count is a write) copies its page, and on a heap of gigabytes that
#: costs more than the fork saves (1.9M span ends: 15.1 s to flatten with the fork,
#: 13.6 s without; 500k: 3.45 s with it, 4.06 s without).
MIN_FORKED_ROWS = 50_000
MAX_FORKED_ROWS = 1_000_000


def attr_tables_forked(scratch: str) -> Callable[[list[list], Counter[str]],
                                                 Callable[[], list[AttrTable]]]:
    """An ``AttrTablesJob`` (see ``frames.build``) whose fork writes into ``scratch``."""

    def start(lists: list[list], warnings: Counter[str]) -> Callable[[], list[AttrTable]]:
        table_path = os.path.join(scratch, "forked_attrs.arrow")
        warnings_path = os.path.join(scratch, "forked_attrs.json")
        pid = _fork(lists[_FORKED], table_path, warnings_path) \
            if hasattr(os, "fork") and MIN_FORKED_ROWS <= len(lists[_FORKED]) <= MAX_FORKED_ROWS \
            else None

        def finish() -> list[AttrTable]:
            try:
                tables = [None if position == _FORKED and pid is not None
                          else AttrTable.from_dicts(dicts, warnings)
                          for position, dicts in enumerate(lists)]
            except BaseException:
                if pid is not None:  # not left running on its own
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                raise
            if pid is not None:
                tables[_FORKED] = _collect(pid, table_path, warnings_path, warnings) \
                    or AttrTable.from_dicts(lists[_FORKED], warnings)
            return tables  # type: ignore[return-value]

        return finish

    return start


def _fork(dicts: list, table_path: str, warnings_path: str) -> int | None:
    """Fork a process that writes the table of ``dicts`` and its warnings; its pid."""
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid:
        return pid
    code = 1
    try:
        warnings: Counter[str] = Counter()
        write_table(AttrTable.from_dicts(dicts, warnings).table, table_path)
        with open(warnings_path, "w", encoding="utf-8") as stream:
            json.dump(dict(warnings), stream)
        code = 0
    finally:
        os._exit(code)


def _collect(pid: int, table_path: str, warnings_path: str,
             warnings: Counter[str]) -> AttrTable | None:
    """The forked process's table, its warnings added to ``warnings``; None if it failed."""
    _, status = os.waitpid(pid, 0)
    try:
        if os.waitstatus_to_exitcode(status) != 0:
            return None
        # Mapped, not read into memory: 4x quicker on a 200 MB table, and this
        # short-lived job ends before the mapping's pages could weigh on anything.
        table = read_table(table_path, mapped=True)
        with open(warnings_path, encoding="utf-8") as stream:
            warnings.update(json.load(stream))
        return AttrTable(table)
    except (OSError, ValueError):  # WireError among them
        return None
    finally:
        for path in (table_path, warnings_path):
            if os.path.exists(path):
                os.remove(path)
