"""Decode loops folded into stretches on the stored columns, before anything else reads them.

At trace level 3 SGLang writes one ``decode_loop`` slice per scheduler iteration:
hundreds per request, nearly every stored span of a busy engine. Consecutive
``decode_loop`` siblings (same trace and parent, no other sibling starting between
them) become one *stretch*: the first loop's row, ending where the run's last loop
ends, with three columns added to the store's: ``loops`` (the iterations it stands
for; 0 on every other row), ``first_ct`` and ``last_ct`` (SGLang's ``decode_ct`` of its
first and last iteration, when written). The loops' ``schedule`` events (one per
iteration: the batch it ran in) are left out; any other event of a loop moves onto its
stretch. A loop stored twice (an export retried after a lost answer) counts once. The
loops' own children (SGLang writes none) are not kept.

Folding a folded table merges stretches the same way (a run cut by a file boundary
becomes one), so the store folds each finished file once when it rolls it and a read
merges what it reads. :attr:`Folded.overlapping` says a run held stretches that overlap
in time, which consecutive iterations never do: the same loops stored in two files,
whose counts a merge cannot separate, so the reader goes back to the stored spans.

This is one sort, one scan of the event texts and a few ``reduceat`` over whole
columns; only the first and last loop of each run have their attributes parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DECODE_LOOP = "decode_loop"
SCHEDULE_EVENT = "schedule"
#: The columns a folded table has beyond the store's.
FOLD_COLUMNS = (("loops", pa.int32()), ("first_ct", pa.int64()), ("last_ct", pa.int64()))
#: An event not named ``schedule``, as the store's JSON begins one (``otlp`` writes
#: ``{"name": ...`` first); a JSON string escapes its quotes, so this cannot match inside
#: a text value. A match elsewhere (a nested attribute named "name") only costs a parse:
#: the events of a run it flags are read and filtered exactly.
_OTHER_EVENT = (r'\{"name": "([^s]|s[^c]|sc[^h]|sch[^e]|sche[^d]|sched[^u]|schedu[^l]'
                r'|schedul[^e]|schedule[^"])')


@dataclass
class Folded:
    """A folded table (the store's columns and :data:`FOLD_COLUMNS`), and whether one of
    its runs held overlapping stretches (see the module's docstring)."""

    table: pa.Table
    overlapping: bool = False


def fold_decode_loops(table: pa.Table) -> Folded:
    """``table`` (stored spans, folded or not) with each run of loops as one stretch."""
    table = _with_fold_columns(table)
    loop = equals(table["name"], DECODE_LOOP)
    if not loop.any():
        return Folded(table)
    n = len(table)
    trace_code, parent_code = _codes(table["trace_id"]), _codes(table["parent_id"])
    start = table["start_ns"].to_numpy()
    end = table["end_ns"].to_numpy()
    order = np.lexsort((np.arange(n), start, parent_code, trace_code))
    sorted_loop = loop[order]
    sorted_parent = parent_code[order] * (int(trace_code.max()) + 1) + trace_code[order]
    repeated, partners = _repeated_loops(table, order, sorted_loop, sorted_parent,
                                         start[order])
    if len(repeated):
        weights = table["loops"].to_numpy(zero_copy_only=False)
        # the same stretch head folded from different loops (a retry in another file)
        differ = bool(((weights[repeated] != weights[partners])
                       | (end[repeated] != end[partners])).any())
        keep = np.ones(n, dtype=bool)
        keep[repeated] = False
        folded = fold_decode_loops(table.filter(pa.array(keep)))
        folded.overlapping |= differ
        return folded
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = ((sorted_parent[1:] != sorted_parent[:-1]) | ~sorted_loop[1:]
                   | ~sorted_loop[:-1])
    loop_at = np.flatnonzero(sorted_loop)
    rows = order[loop_at]                                   # loops, runs contiguous
    firsts = np.flatnonzero(new_run[loop_at])               # where each run begins in rows
    lasts = np.append(firsts[1:], len(rows)) - 1
    later = np.ones(len(rows), dtype=bool)
    later[firsts] = False
    overlapping = bool((start[rows][later] < end[rows][np.flatnonzero(later) - 1]).any())
    heads, tails = rows[firsts], rows[lasts]
    weights = table["loops"].to_numpy(zero_copy_only=False)
    iterations = np.add.reduceat(np.maximum(weights[rows], 1), firsts)
    run_end = np.maximum.reduceat(end[rows], firsts)
    other_events = pc.fill_null(pc.match_substring_regex(table["events"], _OTHER_EVENT),
                                False).to_numpy(zero_copy_only=False)
    flagged = np.add.reduceat(other_events[rows].astype(np.int64), firsts) > 0
    first_ct = _decode_counts(table, heads, "first_ct")
    last_ct = _decode_counts(table, tails, "last_ct")
    keep = ~loop
    keep[heads] = True
    folded = table.filter(pa.array(keep))
    at = (np.cumsum(keep) - 1)[heads]                       # the heads' rows once folded
    m = len(folded)
    ends = folded["end_ns"].to_numpy().copy()
    ends[at] = run_end
    loops = np.zeros(m, dtype=np.int32)
    loops[at] = iterations
    columns = {"end_ns": pa.array(ends, pa.int64()), "loops": pa.array(loops),
               "first_ct": _at_rows(m, at, first_ct), "last_ct": _at_rows(m, at, last_ct)}
    # only the heads' events change: each becomes its run's kept events ("[]" for most)
    head_events = ["[]"] * len(heads)
    for run in np.flatnonzero(flagged):
        texts = table["events"].take(pa.array(rows[firsts[run]:lasts[run] + 1])).to_pylist()
        kept = [e for text in texts for e in timed_events(json_value(text, list))
                if e.get("name") != SCHEDULE_EVENT]
        head_events[run] = json.dumps(kept, ensure_ascii=False)
    mask = np.zeros(m, dtype=bool)
    mask[at] = True
    order_of_heads = np.argsort(at, kind="stable")  # replace_with_mask fills in row order
    columns["events"] = pc.replace_with_mask(
        folded["events"].combine_chunks(), pa.array(mask),
        pa.array([head_events[k] for k in order_of_heads], folded.schema.field("events").type))
    for name, values in columns.items():
        folded = folded.set_column(folded.schema.get_field_index(name), name, values)
    return Folded(folded, overlapping)


def _at_rows(length: int, rows: np.ndarray, values: list[int | None]) -> pa.Array:
    """An int64 column of ``length`` nulls with ``values`` at ``rows``."""
    data = np.zeros(length, dtype=np.int64)
    valid = np.zeros(length, dtype=bool)
    known = np.array([value is not None for value in values], dtype=bool)
    data[rows[known]] = [value for value in values if value is not None]
    valid[rows[known]] = True
    return pa.array(data, pa.int64(), mask=~valid)


def mostly_decode_loops(table: pa.Table) -> bool:
    """Whether folding ``table`` leaves a small part of it: loops are most of its rows."""
    return bool(len(table)) and 2 * int(equals(table["name"], DECODE_LOOP).sum()) >= len(table)


def stretch_figures(table: pa.Table) -> dict[int, dict[str, int]]:
    """Row -> the ``engine.*`` attributes of each stretch of a folded table."""
    loops = table["loops"].to_numpy(zero_copy_only=False)
    rows = np.flatnonzero((loops > 0) & equals(table["name"], DECODE_LOOP))
    if not len(rows):
        return {}
    first = table["first_ct"].take(pa.array(rows)).to_pylist()
    last = table["last_ct"].take(pa.array(rows)).to_pylist()
    figures = {}
    for row, count, low, high in zip(rows.tolist(), loops[rows].tolist(), first, last,
                                     strict=True):
        steps = high - low + 1 if low is not None and high is not None and high >= low \
            else count
        figures[row] = {"engine.decode_loops": count, "engine.decode_steps": steps}
    return figures


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


def _with_fold_columns(table: pa.Table) -> pa.Table:
    for name, kind in FOLD_COLUMNS:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(len(table), kind) if name != "loops"
                                        else pa.array(np.zeros(len(table), np.int32)))
    return table


def _decode_counts(table: pa.Table, rows: np.ndarray, column: str) -> list[int | None]:
    """SGLang's ``decode_ct`` at ``rows``: the folded column, else (a loop not yet folded)
    the loop's attribute."""
    known = table[column].take(pa.array(rows)).to_pylist()
    folded = table["loops"].take(pa.array(rows)).to_numpy(zero_copy_only=False) > 0
    # a folded stretch's attributes are its first loop's: they say nothing of its last
    missing = [k for k, value in enumerate(known) if value is None and not folded[k]]
    if missing:
        texts = table["attributes"].take(pa.array(rows[missing])).to_pylist()
        for k, text in zip(missing, texts, strict=True):
            value = json_value(text, dict).get("decode_ct")
            known[k] = value if isinstance(value, int) and not isinstance(value, bool) \
                else None
    return known


def _codes(column: pa.ChunkedArray) -> np.ndarray:
    """A number per distinct text of ``column`` (null is one more)."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    return np.asarray(pc.fill_null(column, "").combine_chunks().dictionary_encode().indices,
                      dtype=np.int64)


def _repeated_loops(table: pa.Table, order: np.ndarray, sorted_loop: np.ndarray,
                    sorted_parent: np.ndarray, sorted_start: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Rows of loops stored again with the same span id (adjacent once sorted), and the
    rows they repeat."""
    alike = np.flatnonzero(sorted_loop[1:] & sorted_loop[:-1]
                           & (sorted_parent[1:] == sorted_parent[:-1])
                           & (sorted_start[1:] == sorted_start[:-1])) + 1
    if not len(alike):
        return alike, alike
    ids = table["span_id"]
    same = pc.equal(ids.take(pa.array(order[alike])), ids.take(pa.array(order[alike - 1])))
    hit = alike[pc.fill_null(same, False).to_numpy(zero_copy_only=False)]
    return order[hit], order[hit - 1]


def json_value(text: Any, kind: type) -> Any:
    """A stored JSON text as ``kind`` (``dict`` or ``list``): an empty one where the text
    is not JSON of that kind."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        value = None
    return value if isinstance(value, kind) else kind()


def timed_events(events: list) -> list[dict]:
    """The stored events that have a time (``time_ns`` an integer)."""
    return [e for e in events if isinstance(e, dict) and isinstance(e.get("time_ns"), int)]
