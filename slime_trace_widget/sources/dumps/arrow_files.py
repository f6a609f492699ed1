"""The frames' tables as files: one Arrow IPC file per table and a ``meta.json``.

A worker writes them with this module alone, which imports neither pandas nor
torch; :mod:`.wire` reads them back into frames in the caller. Reading runs no
code from the files: Arrow's full validation must pass, or a ``WireError``
says which file is wrong.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from typing import Any

import pyarrow as pa

from ...tables.core_tables import CORE_TABLES, FrameTables

__all__ = ["ATTR_TABLES", "CORE_TABLES", "WireError", "map_table", "meta_of", "parse_meta",
           "read_meta", "read_table", "table_file", "write_table", "write_tables"]

ATTR_TABLES = ("span_start_attrs", "span_end_attrs", "event_attrs")
META_FILE = "meta.json"
_MAX_META_BYTES = 64 << 20


class WireError(ValueError):
    """A worker's output is not what a worker of this version writes."""


def write_tables(tables: FrameTables, directory: str) -> None:
    """Write flattened ``tables`` into ``directory`` (one ``.arrow`` file per table, and
    meta.json)."""
    for name in CORE_TABLES:
        write_table(getattr(tables, name), table_file(directory, name))
    for name in ATTR_TABLES:
        attrs, path = getattr(tables, name), table_file(directory, name)
        if attrs.file != path:  # else mapped from that very file: written already
            write_table(attrs.table, path)
    with open(os.path.join(directory, META_FILE), "w", encoding="utf-8") as stream:
        json.dump(meta_of(tables), stream)


def meta_of(frames: Any) -> dict[str, Any]:
    """What frames (or flattened tables) hold besides their tables, as JSON-ready data
    (see :func:`parse_meta`)."""
    return {"paths": frames.paths, "rollout_ids": frames.rollout_ids,
            "warnings": dict(frames.warnings), "t0": _number(frames.t0),
            "t1": _number(frames.t1)}


def table_file(directory: str, name: str) -> str:
    """Where the table ``name`` of the frames in ``directory`` is."""
    return os.path.join(directory, f"{name}.arrow")


def write_table(table: pa.Table, path: str) -> None:
    """One Arrow IPC file of ``table`` at ``path`` (:func:`read_table` reads it)."""
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def map_table(path: str) -> pa.Table:
    """The table of the Arrow IPC file at ``path``, mapped and unchecked. On its own, for
    a file this process has just written: the caller that reads the file checks it
    fully (:func:`read_table`, which maps through this), and checking it here too
    would read every page of it."""
    with pa.memory_map(path) as source:
        return pa.ipc.open_file(source).read_all()


def read_table(path: str, mapped: bool = False) -> pa.Table:
    """The table of the Arrow IPC file at ``path``, fully validated; WireError if not."""
    try:
        if mapped:  # the pages stay with the columns once the file is deleted
            table = map_table(path)
        else:
            # Read into memory, not mapped: the file is deleted next, and a mapping
            # would keep its disk cache pages in this process for as long as the
            # columns live. One read of the whole file, the columns pointing into it,
            # rather than Arrow's file reader, which reads buffer by buffer.
            with open(path, "rb") as source:
                buffer = pa.py_buffer(source.read())
            table = pa.ipc.open_file(pa.BufferReader(buffer)).read_all()
        table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise WireError(f"{os.path.basename(path)}: {exc}") from exc
    return table


def read_meta(directory: str) -> dict[str, Any]:
    """The checked meta.json of the frames in ``directory`` (WireError when it is off)."""
    path = os.path.join(directory, META_FILE)
    try:
        if os.path.getsize(path) > _MAX_META_BYTES:
            raise WireError("meta.json is too large")
        with open(path, encoding="utf-8") as stream:
            return parse_meta(json.load(stream))
    except (OSError, ValueError) as exc:
        raise WireError(f"meta.json: {exc}") from exc


def parse_meta(meta: Any) -> dict[str, Any]:
    """TraceFrames keyword arguments from :func:`meta_of`'s data, checked (WireError)."""
    try:
        paths = [str(p) for p in meta["paths"]]
        rollout_ids = [None if r is None else int(r) for r in meta["rollout_ids"]]
        warnings = Counter({str(k): int(v) for k, v in dict(meta["warnings"]).items()})
        t0, t1 = (float("nan") if meta[k] is None else float(meta[k]) for k in ("t0", "t1"))
    except (ValueError, KeyError, TypeError) as exc:
        raise WireError(f"frames meta: {exc}") from exc
    return {"paths": paths, "rollout_ids": rollout_ids, "warnings": warnings,
            "t0": t0, "t1": t1}
