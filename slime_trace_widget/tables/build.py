"""Flatten dumps into :class:`FrameTables`: records walked once, then whole columns.

Records are walked once (``carrier.read_carrier``); the rest is numpy and Arrow
over whole columns: the span table (with the virtual PD spans of ``pd_lanes``
and the geometry of ``span_geometry``), the event table, the sample table, and
the attributes as typed columns (``attr_columns``). No pandas: a worker
flattens and writes the tables as they are; ``frames.flatten.build_frames``
gives them their pandas form (``frames.core_frames``) where frames are wanted.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa

from ..values import clean_text
from .attr_columns import AttrTable
from .carrier import RecordColumns, read_carrier
from .core_tables import (
    PD_FORMS,
    FrameTables,
    core_table,
)
from .names import Names
from .pd_lanes import (
    LANE_SUFFIX,
    SUMMARY_EVENT,
    VirtualSpans,
    build_virtual_spans,
    find_pd_detail,
)
from .samples import SampleFields, sample_fields
from .span_geometry import display_ends, span_depths, span_lanes


class AttrTablesHere:
    """Turns the attribute dicts of span starts, span ends and events into tables, in
    this process, once flattening has made every list.

    Flattening tells it twice: first the lists as far as the carrier pass made them
    (each complete list begins with that part: the real spans' starts and ends, and
    every event), then every list once the PD spans' are known. A subclass may start
    on the first parts at once and elsewhere (the worker's ``ForkedAttrTables``
    builds the span ends' and the events' tables in a forked process).
    """

    def __init__(self) -> None:
        self._lists: list[list] = []
        self._warnings: Counter[str] = Counter()

    def lists_begin(self, lists: list[list]) -> None:
        """The first part of each list; here, nothing to do yet."""

    def lists_complete(self, lists: list[list], warnings: Counter[str]) -> None:
        """Span starts, span ends (real, then virtual) and events are all known."""
        self._lists, self._warnings = lists, warnings

    def tables(self) -> list[AttrTable]:
        """The three tables, in the order of the lists."""
        return [AttrTable.from_dicts(dicts, self._warnings) for dicts in self._lists]

    def cancel(self) -> None:
        """Flattening failed before ``tables``: drop whatever was started."""


def build_tables(source: Any, attr_tables: AttrTablesHere | None = None, *,
                 open_until: float | None = None) -> FrameTables:
    """Flatten dumps: a ``LoadedDump``, a list of them, a dump dict or a list of samples.

    ``attr_tables`` builds the attribute tables, each call a fresh one. ``open_until``
    (epoch seconds) is for records of a rollout still running: open spans are drawn to
    it (see ``span_geometry.display_ends``) rather than guessed closed.
    """
    attr_tables = attr_tables or AttrTablesHere()
    with cyclic_gc_paused():
        try:
            return _build_tables(source, attr_tables, open_until)
        except BaseException:
            attr_tables.cancel()
            raise


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while flattening, unpickling or making the
    frames' pandas views.

    Each allocates millions of small containers and creates no reference cycles,
    yet each allocation burst would trigger collections that re-scan every object
    made so far (the dump's raw event dicts, a view's attribute dicts). Pausing
    relies on that: what they allocate is freed by reference counting, and the
    collector runs as before once the pause ends. The pause is the process's: a
    thread that allocates meanwhile is not collected either until the pause ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _build_tables(source: Any, attr_tables: AttrTablesHere, open_until: float | None
                  ) -> FrameTables:
    dumps = _as_dump_list(source)
    records = RecordColumns()
    fields: list[SampleFields] = []
    warnings: Counter[str] = Counter()
    for dump_number, dump in enumerate(dumps):
        warnings.update(dump["warnings"])
        for sample in dump["samples"]:
            info = sample_fields(sample, dump["rollout_id"], dump_number)
            if info.carrier_problem:
                warnings[info.carrier_problem] += 1
            if info.events is not None:
                read_carrier(len(fields), info.events, records, info.carrier_attempt)
            fields.append(info)
    warnings.update(records.warnings)
    end_index = np.asarray(records.end_span, dtype=np.int64)  # the span each end closes
    real_end_attrs = _span_end_attrs(records, end_index)
    attr_tables.lists_begin([records.span_attrs, real_end_attrs, records.event_attrs])
    span_cols = _span_columns(records, end_index, real_end_attrs)
    event_cols = _event_columns(records)
    first, last, top_attempt = _row_extents(len(fields), span_cols, event_cols)
    pd_detail = find_pd_detail(span_cols["names"], span_cols["parents"])
    virtual = build_virtual_spans(span_cols["names"], span_cols["starts"], span_cols["ends"],
                                  span_cols["parents"], span_cols["end_attrs"],
                                  _pd_summaries(event_cols), pd_detail)
    start_attrs = span_cols["start_attrs"] + [None] * len(virtual.generation)
    end_attrs = span_cols["end_attrs"] + virtual.attrs
    # Every attribute list is complete: their tables may be built (elsewhere) while
    # the span table is built here.
    attr_tables.lists_complete([start_attrs, end_attrs, event_cols["attrs"]], warnings)
    spans = _span_arrays(span_cols, virtual, pd_detail, end_attrs, last, warnings, open_until)
    events = _event_arrays(event_cols, spans)
    samples = _sample_table(fields, first, last, top_attempt, spans, events)
    span_table, event_table = _span_table(spans), _event_table(events)
    segments = _segment_table(virtual, len(span_cols["rows"]))
    start_attrs_table, end_attrs_table, event_attrs_table = attr_tables.tables()
    finite = np.isfinite(first)
    return FrameTables(
        samples=samples,
        span_core=span_table,
        event_core=event_table,
        segments=segments,
        span_start_attrs=start_attrs_table,
        span_end_attrs=end_attrs_table,
        event_attrs=event_attrs_table,
        paths=[dump["path"] for dump in dumps],
        rollout_ids=[dump["rollout_id"] for dump in dumps],
        warnings=+warnings,
        t0=float(first[finite].min()) if finite.any() else float("nan"),
        t1=float(last[finite].max()) if finite.any() else float("nan"),
    )


# --------------------------------------------------------------------------- inputs


def _as_dump_list(source: Any) -> list[dict[str, Any]]:
    """Normalise the accepted inputs to dicts with path, rollout_id, samples, warnings."""
    if hasattr(source, "samples") and not isinstance(source, (list, tuple, dict)):
        return [_dump_dict(source)]
    if isinstance(source, dict):
        samples = source.get("samples")
        if not isinstance(samples, list):
            raise ValueError("a dump dict needs a 'samples' list")
        return [{"path": source.get("path", "<memory>"), "rollout_id": source.get("rollout_id"),
                 "samples": samples, "warnings": Counter()}]
    if isinstance(source, (list, tuple)):
        if source and all(hasattr(d, "samples") and not isinstance(d, dict) for d in source):
            return [_dump_dict(d) for d in source]
        return [{"path": "<memory>", "rollout_id": None, "samples": list(source),
                 "warnings": Counter()}]
    raise TypeError(f"cannot build frames from {type(source).__name__}")


def _dump_dict(dump: Any) -> dict[str, Any]:
    return {"path": str(getattr(dump, "path", "<memory>")),
            "rollout_id": getattr(dump, "rollout_id", None),
            "samples": list(dump.samples),
            "warnings": Counter(getattr(dump, "warnings", None) or {})}


# --------------------------------------------------------------------------- columns


def _span_end_attrs(records: RecordColumns, end_index: np.ndarray) -> list[dict | None]:
    """Each span's end attribute dict, in span order (None where it has no end)."""
    end_attrs = np.full(len(records.span_row), None, dtype=object)
    end_attrs[end_index] = _object_array(records.end_attrs)
    return end_attrs.tolist()


def _span_columns(records: RecordColumns, end_index: np.ndarray,
                  end_attrs: list[dict | None]) -> dict[str, Any]:
    """Span columns as numpy arrays, with the paired ends scattered into place
    (``end_index``: the span each end closes)."""
    n = len(records.span_row)
    ends = np.full(n, np.nan)
    end_attempts = np.full(n, -1, dtype=np.int64)
    ends[end_index] = records.end_ts
    end_attempts[end_index] = records.end_attempt
    return {
        "rows": np.asarray(records.span_row, dtype=np.int64),
        "names": _categorical(records.span_name),
        "starts": np.asarray(records.span_start, dtype=np.float64),
        "ends": ends,
        "parents": np.asarray(records.span_parent, dtype=np.int64),
        "ids": _object_array(_clean_ids(records.span_id)),
        "parent_ids": _object_array(_clean_ids(records.span_parent_id)),
        "attempts": np.asarray(records.span_attempt, dtype=np.int64),
        "end_attempts": end_attempts,
        "start_attrs": records.span_attrs,
        "end_attrs": end_attrs,
    }


def _event_columns(records: RecordColumns) -> dict[str, Any]:
    return {
        "rows": np.asarray(records.event_row, dtype=np.int64),
        "names": _categorical(records.event_name),
        "ts": np.asarray(records.event_ts, dtype=np.float64),
        "attempts": np.asarray(records.event_attempt, dtype=np.int64),
        "parent_ids": _object_array(_clean_ids(records.event_parent_id)),
        "span_ids": _object_array(_clean_ids(records.event_span_id)),
        "parents": np.asarray(records.event_parent, dtype=np.int64),
        "attrs": records.event_attrs,
    }


def _categorical(values: list[str | None]) -> Names:
    """Names in first-seen order (None missing), hashed by Arrow in C. Text Arrow
    cannot encode (lone surrogates: ``values.clean_text``) is cleaned first, in Python."""
    try:
        encoded = pa.array(values, type=pa.string()).dictionary_encode()
    except (pa.ArrowException, TypeError, ValueError, UnicodeError):
        index: dict[Any, int] = {}
        codes = np.fromiter((-1 if value is None else
                             index.setdefault(clean_text(value) if type(value) is str else value,
                                              len(index)) for value in values),
                            dtype=np.int32, count=len(values))
        return Names(codes, list(index))
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
    return Names(codes, encoded.dictionary.to_pylist())


def _clean_ids(values: list) -> list:
    """Ids and labels as encodable text (see ``values.clean_text``); all-ASCII lists pass."""
    if all(map(str.isascii, filter(None, values))):  # C-level scan; None is skipped
        return values
    return [v if v is None else clean_text(v) for v in values]


def _object_array(values: list) -> np.ndarray:
    """1-d object array of ``values`` (``np.asarray`` would turn dicts or None oddly).

    ``fromiter`` takes each item as it is, in one pass; assigning a list of dicts to
    a slice would have numpy inspect each item as a possible sequence first.
    """
    return np.fromiter(values, dtype=object, count=len(values))


def _row_extents(
    n: int, spans: dict[str, Any], events: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First and last readable timestamp and highest attempt of every sample row."""
    first = np.full(n, np.inf)
    last = np.full(n, -np.inf)
    top = np.zeros(n, dtype=np.int64)
    for rows, times, attempts in (
        (spans["rows"], spans["starts"], spans["attempts"]),
        (spans["rows"], spans["ends"], spans["end_attempts"]),
        (events["rows"], events["ts"], events["attempts"]),
    ):
        known = np.isfinite(times)
        np.minimum.at(first, rows[known], times[known])
        np.maximum.at(last, rows[known], times[known])
        np.maximum.at(top, rows, attempts)
    first[~np.isfinite(first)] = np.nan
    last[~np.isfinite(last)] = np.nan
    return first, last, top


# --------------------------------------------------------------------------- spans


def _span_arrays(
    cols: dict[str, Any], virtual: VirtualSpans, pd_detail: np.ndarray, end_attrs: list,
    row_last: np.ndarray, warnings: Counter[str], open_until: float | None = None,
) -> dict[str, Any]:
    """Every column of the spans table (real spans, then the ``virtual`` PD spans) as
    numpy arrays and :class:`Names`. ``end_attrs`` are every span's end attribute
    dicts, virtual ones included."""
    names: Names = cols["names"]
    rows, starts, ends, parents = cols["rows"], cols["starts"], cols["ends"], cols["parents"]
    n_real, n_virtual = len(rows), len(virtual.generation)
    gen = np.asarray(virtual.generation, dtype=np.int64)
    suffix = np.array([LANE_SUFFIX[p] for p in virtual.phase], dtype=object)
    ids = cols["ids"]

    rows = np.concatenate([rows, rows[gen]])
    names = _append_virtual_names(names, gen, suffix)
    starts = np.concatenate([starts, np.asarray(virtual.start, dtype=np.float64)])
    ends = np.concatenate([ends, np.asarray(virtual.end, dtype=np.float64)])
    parents = np.concatenate([parents, gen])
    parent_ids = np.concatenate([cols["parent_ids"], ids[gen]])
    ids = np.concatenate([ids, ids[gen] + suffix])
    attempts = np.concatenate([cols["attempts"], cols["attempts"][gen]])
    end_attempts = np.concatenate([cols["end_attempts"], cols["end_attempts"][gen]])
    pd_detail = np.concatenate([pd_detail, np.zeros(n_virtual, dtype=bool)])
    phase_kind = np.zeros(len(rows), dtype=np.int64)
    phase_kind[n_real:] = [1 if p == "prefill" else 2 for p in virtual.phase]

    depth = span_depths(parents)
    open_mask = np.isnan(ends)
    display_end, clip = display_ends(rows, starts, ends, parents, open_mask, row_last,
                                     open_until)
    backwards = ~open_mask & (ends < starts)
    if backwards.any():
        warnings["end_before_start"] += int(backwards.sum())
    lanes = span_lanes(rows, depth, parents, names, pd_detail, phase_kind)
    return {
        "sample_row": rows,
        "span_id": ids,
        "parent_span_id": parent_ids,
        "parent_index": parents,
        "name": names,
        "start": starts,
        "end": ends,
        "display_end": display_end,
        "open": open_mask,
        "clip_reason": clip,
        "depth": depth.astype(np.int32),
        "lane": lanes.astype(np.int32),
        "attempt": attempts.astype(np.int32),
        "end_attempt": end_attempts.astype(np.int32),
        "virtual": np.arange(len(rows)) >= n_real,
        "pd_detail": pd_detail,
        "pd_form": np.concatenate([np.full(n_real, -1, dtype=np.int32),
                                   np.array([PD_FORMS.index(f) for f in virtual.form],
                                            dtype=np.int32)]),
        "error": _has_key(end_attrs, "error_type"),
    }


def _span_table(spans: dict[str, Any]) -> pa.Table:
    names: Names = spans["name"]
    parents = spans["parent_index"]
    starts, ends = spans["start"], spans["end"]
    parent_codes = np.where(parents >= 0, names.codes[np.maximum(parents, 0)], -1)
    return core_table("span_core", {
        "sample_row": spans["sample_row"],
        "span_id": spans["span_id"],
        "parent_span_id": spans["parent_span_id"],
        "parent_index": parents,
        "parent_name": Names(parent_codes, names.categories),
        "name": names,
        "start": starts,
        "end": ends,
        "display_end": spans["display_end"],
        "duration": ends - starts,
        "state": spans["open"],  # codes into the vocabulary: closed, open
        "clip_reason": spans["clip_reason"],
        "depth": spans["depth"],
        "lane": spans["lane"],
        "attempt": spans["attempt"],
        "end_attempt": spans["end_attempt"],
        "virtual": spans["virtual"],
        "pd_detail": spans["pd_detail"],
        "pd_form": spans["pd_form"],
        "error": spans["error"],
        "origin": np.zeros(len(parents), dtype=np.int32),  # all from the dump
    })


def _segment_table(virtual: VirtualSpans, n_real: int) -> pa.Table:
    """The PD segments: the parts of each virtual span (``span_index`` into spans)."""
    return core_table("segments", {
        "span_index": np.asarray(virtual.seg_owner, dtype=np.int64) + n_real,
        "name": _categorical(virtual.seg_name),
        "start": virtual.seg_start,
        "end": virtual.seg_end,
        "duration": virtual.seg_duration,
    })


def _append_virtual_names(names: Names, generation: np.ndarray, suffix: np.ndarray) -> Names:
    """Names for the virtual spans (``"<generation name> [P]"``), built on the codes."""
    categories = [str(c) for c in names.categories]
    new_codes = np.empty(len(generation), dtype=np.int32)
    lookup = {name: i for i, name in enumerate(categories)}
    for position, (code, tail) in enumerate(zip(names.codes[generation].tolist(),
                                                suffix.tolist(), strict=True)):
        label = categories[code] + tail
        new_codes[position] = lookup.setdefault(label, len(lookup))
    return Names(np.concatenate([names.codes, new_codes]), list(lookup))


def _pd_summaries(events: dict[str, Any]) -> dict[int, dict]:
    """``sglang_pd_summary`` attrs keyed by the index of their generation span."""
    names: Names = events["names"]
    code = names.code_of(SUMMARY_EVENT)
    if code is None:
        return {}
    parents, attrs = events["parents"], events["attrs"]
    return {int(parents[i]): attrs[i]
            for i in np.flatnonzero(names.codes == code).tolist()
            if parents[i] >= 0 and isinstance(attrs[i], dict)}


def _has_key(dicts: list[dict | None], key: str) -> np.ndarray:
    return np.array([d is not None and key in d for d in dicts], dtype=bool)


# --------------------------------------------------------------------------- events


def _event_arrays(cols: dict[str, Any], spans: dict[str, Any]) -> dict[str, Any]:
    """The event table's columns that placement and counts need, with the rest."""
    parents = cols["parents"]
    parent_codes, depth, lane = event_placement(parents, spans["name"].codes, spans["depth"],
                                                spans["lane"])
    unmatched = np.fromiter((sid is not None for sid in cols["span_ids"]), dtype=bool,
                            count=len(parents))
    return {**cols, "parent_name": Names(parent_codes, spans["name"].categories),
            "depth": depth, "lane": lane, "unmatched": unmatched}


def _event_table(events: dict[str, Any]) -> pa.Table:
    parents = events["parents"]
    return core_table("event_core", {
        "sample_row": events["rows"],
        "name": events["names"],
        "ts": events["ts"],
        "attempt": events["attempts"],
        "parent_span_id": events["parent_ids"],
        "parent_index": parents,
        "parent_name": events["parent_name"],
        "kind": events["unmatched"],  # codes into the vocabulary: instant, unmatched end
        "span_id": events["span_ids"],
        "depth": events["depth"],
        "lane": events["lane"],
        "origin": np.zeros(len(parents), dtype=np.int32),  # all from the dump
    })


def event_placement(parents: np.ndarray, span_codes: np.ndarray, span_depth: np.ndarray,
                    span_lane: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where events sit, from their parent spans (index ``parents``, -1 none): the
    parent's name code (into the spans' names), one level below its depth, its lane."""
    has_parent = parents >= 0
    safe = np.maximum(parents, 0)
    if len(span_codes):
        parent_codes = np.where(has_parent, np.asarray(span_codes)[safe], -1)
        lane = np.where(has_parent, np.asarray(span_lane)[safe], 0)
        depth = np.where(has_parent, np.asarray(span_depth)[safe] + 1, 0)
    else:
        parent_codes = np.full(len(parents), -1)
        lane = depth = np.zeros(len(parents), dtype=np.int64)
    return parent_codes, depth.astype(np.int32), lane.astype(np.int32)


# --------------------------------------------------------------------------- samples


def _sample_table(
    fields: list[SampleFields],
    first: np.ndarray,
    last: np.ndarray,
    top_attempt: np.ndarray,
    spans: dict[str, Any],
    events: dict[str, Any],
) -> pa.Table:
    n = len(fields)
    traced = np.array([bool(f.events) for f in fields], dtype=bool)  # has records
    carrier_attempt = np.array([f.carrier_attempt for f in fields], dtype=np.int64)
    attempts = np.where(traced, np.maximum(top_attempt, carrier_attempt) + 1, 0)
    counts = row_counts(n, spans["sample_row"], spans["virtual"], spans["open"], spans["lane"],
                        events["rows"], events["unmatched"])

    def each(name: str) -> list:
        return [getattr(field, name) for field in fields]

    return core_table("samples", {
        "rollout_id": each("rollout_id"),
        "dump": each("dump"),
        "sample_index": each("index"),
        "group_index": each("group_index"),
        "source": _categorical(each("source")),
        "status": _categorical(each("status")),
        "label": _clean_ids(each("label")),
        "reward": each("reward"),
        "reward_detail": each("reward_detail"),
        "response_length": each("response_length"),
        **{name: _clean_ids(each(name)) for name in ("trace_id", "prompt", "response", "metadata")},
        "traced": traced,
        "attempts": attempts,
        "start": first,
        "end": last,
        "duration": last - first,
        **counts,
        "remove_sample": each("remove_sample"),
    })


def row_counts(n: int, span_rows: np.ndarray, span_virtual: np.ndarray, span_open: np.ndarray,
               span_lanes: np.ndarray, event_rows: np.ndarray, event_unmatched: np.ndarray
               ) -> dict[str, np.ndarray]:
    """The per-sample counts of ``n`` rows that spans and events decide: closed and open
    real spans, events and unmatched ends, and lanes."""
    real = ~np.asarray(span_virtual, dtype=bool)
    real_rows, is_open = np.asarray(span_rows)[real], np.asarray(span_open, dtype=bool)[real]
    event_rows = np.asarray(event_rows)
    unmatched = np.asarray(event_unmatched, dtype=bool)
    lanes = np.zeros(n, dtype=np.int64)
    if len(span_rows):
        np.maximum.at(lanes, span_rows, np.asarray(span_lanes) + 1)
    return {"n_spans": np.bincount(real_rows[~is_open], minlength=n)[:n],
            "n_open_spans": np.bincount(real_rows[is_open], minlength=n)[:n],
            "n_events": np.bincount(event_rows[~unmatched], minlength=n)[:n],
            "n_unmatched_ends": np.bincount(event_rows[unmatched], minlength=n)[:n],
            "n_lanes": lanes}
