"""Decode loops folded into stretches on the stored columns, before anything else reads them.

At trace level 3 SGLang writes one ``decode_loop`` slice per scheduler iteration:
hundreds per request, nearly every stored span of a busy engine. Consecutive
``decode_loop`` siblings (same trace and parent, no other sibling starting between
them) become one *stretch*: the first loop's row, ending where the run's last loop
ends, with ``engine.decode_loops`` (iterations), ``engine.decode_steps`` (from SGLang's
``decode_ct`` of the first and last loop, else the iterations). The loops' ``schedule``
events (one per iteration: the batch it ran in) are left out; any other event of a loop
moves onto its stretch. This is one sort, one scan of the event texts and a few
``reduceat`` over whole columns; only the first and last loop of each run have their
attributes parsed. The loops' own children (SGLang writes none) are not kept.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DECODE_LOOP = "decode_loop"
SCHEDULE_EVENT = "schedule"
#: An event not named ``schedule``, as the store's JSON begins one (``sources.engine.otlp``
#: writes ``{"name": ...`` first); a JSON string escapes its quotes, so this cannot match
#: inside a text value. A match elsewhere (a nested attribute named "name") only costs a
#: parse: the events of a run it flags are read and filtered exactly.
_OTHER_EVENT = (r'\{"name": "([^s]|s[^c]|sc[^h]|sch[^e]|sche[^d]|sched[^u]|schedu[^l]'
                r'|schedul[^e]|schedule[^"])')


def fold_decode_loops(table: pa.Table) -> tuple[pa.Table, dict[int, dict[str, Any]]]:
    """``table`` with each run of loops reduced to its stretch, and each stretch's row (in
    the returned table) with its ``end_ns``, ``attrs`` and ``events``."""
    loop = equals(table["name"], DECODE_LOOP)
    if not loop.any():
        return table, {}
    n = len(table)
    trace_code, parent_code = _codes(table["trace_id"]), _codes(table["parent_id"])
    start = table["start_ns"].to_numpy().astype(np.int64)
    end = table["end_ns"].to_numpy().astype(np.int64)
    order = np.lexsort((np.arange(n), start, parent_code, trace_code))
    sorted_loop = loop[order]
    sorted_parent = parent_code[order] * (int(trace_code.max()) + 1) + trace_code[order]
    repeated = _repeated_loops(table, order, sorted_loop, sorted_parent, start[order])
    if len(repeated):  # an export retried after a lost answer: its loops stored twice
        keep = np.ones(n, dtype=bool)
        keep[repeated] = False
        return fold_decode_loops(table.filter(pa.array(keep)))
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = ((sorted_parent[1:] != sorted_parent[:-1]) | ~sorted_loop[1:]
                   | ~sorted_loop[:-1])
    loop_at = np.flatnonzero(sorted_loop)
    rows = order[loop_at]                                   # loops, runs contiguous
    firsts = np.flatnonzero(new_run[loop_at])               # where each run begins in rows
    lasts = np.append(firsts[1:], len(rows)) - 1
    heads = rows[firsts]
    run_end = np.maximum.reduceat(end[rows], firsts)
    loops = np.diff(np.append(firsts, len(rows)))
    other_events = pc.fill_null(pc.match_substring_regex(table["events"], _OTHER_EVENT),
                                False).to_numpy(zero_copy_only=False)
    others = np.add.reduceat(other_events[rows].astype(np.int64), firsts)
    keep = ~loop
    keep[heads] = True
    new_row = np.cumsum(keep) - 1
    ends = end.copy()
    ends[heads] = run_end
    folded = table.filter(pa.array(keep)).set_column(
        table.schema.get_field_index("end_ns"), "end_ns", pa.array(ends[keep], pa.int64()))
    ends_of_runs = rows[lasts]
    texts = table["attributes"].take(pa.array(np.concatenate([heads, ends_of_runs]))).to_pylist()
    stretches: dict[int, dict[str, Any]] = {}
    for run, head in enumerate(heads):
        steps = int(loops[run])
        first_ct = _loads(texts[run]).get("decode_ct")
        last_ct = _loads(texts[len(heads) + run]).get("decode_ct")
        if _is_int(first_ct) and _is_int(last_ct) and last_ct >= first_ct:
            steps = last_ct - first_ct + 1
        kept_events: list[dict] = []
        if others[run] > 0:
            for row in rows[firsts[run]:lasts[run] + 1]:
                kept_events += [e for e in _events(table["events"][int(row)].as_py())
                                if e.get("name") != SCHEDULE_EVENT]
        stretches[int(new_row[head])] = {"end": int(run_end[run]), "events": kept_events,
                                         "attrs": {"engine.decode_loops": int(loops[run]),
                                                   "engine.decode_steps": steps}}
    return folded, stretches


def equals(column: pa.ChunkedArray, text: str) -> np.ndarray:
    """Which rows of a text column (plain or dictionary-encoded) hold ``text``."""
    parts = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            hits = pc.fill_null(pc.equal(chunk.dictionary, text), False).to_numpy(
                zero_copy_only=False)
            indices = chunk.indices.fill_null(0).to_numpy(zero_copy_only=False)
            parts.append(hits[indices] & chunk.is_valid().to_numpy(zero_copy_only=False)
                         if len(hits) else np.zeros(len(chunk), dtype=bool))
        else:
            parts.append(pc.fill_null(pc.equal(chunk, text), False).to_numpy(
                zero_copy_only=False))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _codes(column: pa.ChunkedArray) -> np.ndarray:
    """A number per distinct text of ``column`` (null is one more)."""
    return np.asarray(pc.fill_null(column, "").combine_chunks().dictionary_encode().indices,
                      dtype=np.int64)


def _repeated_loops(table: pa.Table, order: np.ndarray, sorted_loop: np.ndarray,
                    sorted_parent: np.ndarray, sorted_start: np.ndarray) -> np.ndarray:
    """Rows of loops stored again with the same span id (adjacent once sorted)."""
    alike = np.flatnonzero(sorted_loop[1:] & sorted_loop[:-1]
                           & (sorted_parent[1:] == sorted_parent[:-1])
                           & (sorted_start[1:] == sorted_start[:-1])) + 1
    if not len(alike):
        return alike
    ids = table["span_id"]
    same = pc.equal(ids.take(pa.array(order[alike])), ids.take(pa.array(order[alike - 1])))
    return order[alike[pc.fill_null(same, False).to_numpy(zero_copy_only=False)]]


def _loads(text: Any) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {}


def _events(text: Any) -> list[dict]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    return [e for e in value if isinstance(e, dict) and isinstance(e.get("time_ns"), int)] \
        if isinstance(value, list) else []


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
