"""Flatten dumps into :class:`TraceFrames`: records walked once, then whole columns.

Records are walked once (``carrier.read_carrier``); the rest is numpy/pandas over
whole columns: the span table (with the virtual PD spans of ``pd_lanes`` and the
geometry of ``span_geometry``), the event table, the sample table, and the
attributes as typed columns (``attr_columns``).
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..values import clean_text
from .attr_columns import AttrTable
from .carrier import RecordColumns, read_carrier
from .model import ORIGINS, TraceFrames
from .pd_lanes import (
    LANE_SUFFIX,
    SUMMARY_EVENT,
    VirtualSpans,
    build_virtual_spans,
    find_pd_detail,
)
from .samples import SampleFields, sample_fields
from .span_geometry import CLIP_REASONS, display_ends, span_depths, span_lanes

#: What pandas makes of a column of Python strings and None (Arrow-backed text in pandas 3).
INFERRED_TEXT = pd.Series(["text"]).dtype
_ARROW_TEXT = isinstance(INFERRED_TEXT, pd.StringDtype) and INFERRED_TEXT.storage == "pyarrow"

STATES = ["closed", "open"]
EVENT_KINDS = ["instant", "unmatched_end"]
PD_FORMS = ["children", "attrs"]


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


def build_frames(source: Any, attr_tables: AttrTablesHere | None = None) -> TraceFrames:
    """Flatten dumps: a ``LoadedDump``, a list of them, a dump dict or a list of samples.

    ``attr_tables`` builds the attribute tables, each call a fresh one.
    """
    attr_tables = attr_tables or AttrTablesHere()
    with cyclic_gc_paused():
        try:
            return _build_frames(source, attr_tables)
        except BaseException:
            attr_tables.cancel()
            raise


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while flattening (or unpickling).

    Both allocate millions of small containers and create no reference cycles,
    yet each allocation burst triggers collections that re-scan every raw event
    dict of the dump (hundreds of MB): pausing it saves 10-20 % of flattening
    and half of unpickling a trace-heavy dump.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _build_frames(source: Any, attr_tables: AttrTablesHere) -> TraceFrames:
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
                read_carrier(len(fields), info.events, records)
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
    spans, segments = _span_table(span_cols, virtual, pd_detail, end_attrs, last, warnings)
    events = _event_table(event_cols, spans)
    samples = _sample_table(fields, first, last, top_attempt, spans, events)
    start_table, end_table, event_table = attr_tables.tables()
    finite = np.isfinite(first)
    return TraceFrames(
        samples=samples,
        span_core=spans,
        event_core=events,
        span_start_attrs=start_table,
        span_end_attrs=end_table,
        event_attrs=event_table,
        segments=segments,
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


def _categorical(values: list[str]) -> pd.Categorical:
    """Categorical in first-seen order; ``pd.factorize`` hashes in C, several times
    faster than ``pd.Categorical`` on a list of Python strings."""
    codes, uniques = pd.factorize(np.array(values, dtype=object))
    cleaned = [clean_text(u) for u in uniques]
    if any(c is not u for c, u in zip(cleaned, uniques, strict=True)):
        remap, uniques = pd.factorize(np.array(cleaned, dtype=object))
        codes = np.where(codes >= 0, remap[np.maximum(codes, 0)], -1)
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object))


def _clean_ids(values: list) -> list:
    """Ids and labels as encodable text (see ``values.clean_text``); all-ASCII lists pass."""
    if all(map(str.isascii, filter(None, values))):  # C-level scan; None is skipped
        return values
    return [v if v is None else clean_text(v) for v in values]


def inferred_text(values: np.ndarray | pa.Array) -> Any:
    """``values`` (an object array of str and None, or Arrow text) as the column pandas
    would infer from them, built by Arrow in C: pandas' inference visits each string
    (0.8 s for the ids of 1.9M spans). The values as they are where pandas keeps
    objects: no Arrow text, no string at all, or something other than text."""
    if not _ARROW_TEXT:
        return values
    try:
        text = values if isinstance(values, pa.Array) else pa.array(values, pa.large_string())
    except (pa.ArrowException, TypeError, ValueError):
        return values
    if text.null_count == len(text):
        return values
    return pd.array(text.cast(pa.large_string()), dtype=INFERRED_TEXT)


def _object_array(values: list) -> np.ndarray:
    """1-d object array of ``values`` (``np.asarray`` would turn dicts or None oddly).

    ``fromiter`` takes each item as it is, 4 times faster than assigning a list of
    dicts to a slice (numpy inspects each item there).
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


def _span_table(
    cols: dict[str, Any], virtual: VirtualSpans, pd_detail: np.ndarray, end_attrs: list,
    row_last: np.ndarray, warnings: Counter[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The spans table (real spans, then the ``virtual`` PD spans) and the PD segments
    table. ``end_attrs`` are every span's end attribute dicts, virtual ones included."""
    names: pd.Categorical = cols["names"]
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
    is_virtual = np.arange(len(rows)) >= n_real
    phase_kind = np.zeros(len(rows), dtype=np.int64)
    phase_kind[n_real:] = [1 if p == "prefill" else 2 for p in virtual.phase]

    depth = span_depths(parents)
    open_mask = np.isnan(ends)
    display_end, clip = display_ends(rows, starts, ends, parents, open_mask, row_last)
    backwards = ~open_mask & (ends < starts)
    if backwards.any():
        warnings["end_before_start"] += int(backwards.sum())
    lanes = span_lanes(rows, depth, parents, names, pd_detail, phase_kind)
    codes = np.asarray(names.codes)
    frame = pd.DataFrame({
        "sample_row": rows,
        "span_id": inferred_text(ids),
        "parent_span_id": inferred_text(parent_ids),
        "parent_index": parents,
        "parent_name": pd.Categorical.from_codes(
            np.where(parents >= 0, codes[np.maximum(parents, 0)], -1), dtype=names.dtype),
        "name": names,
        "start": starts,
        "end": ends,
        "display_end": display_end,
        "duration": ends - starts,
        "state": pd.Categorical.from_codes(open_mask.astype(np.int8), categories=STATES),
        "clip_reason": pd.Categorical.from_codes(clip, categories=CLIP_REASONS),
        "depth": depth.astype(np.int32),
        "lane": lanes.astype(np.int32),
        "attempt": attempts.astype(np.int32),
        "end_attempt": end_attempts.astype(np.int32),
        "virtual": is_virtual,
        "pd_detail": pd_detail,
        "pd_form": pd.Categorical.from_codes(
            np.concatenate([np.full(n_real, -1), [PD_FORMS.index(f) for f in virtual.form]])
            .astype(np.int8), categories=PD_FORMS),
        "error": _has_key(end_attrs, "error_type"),
        "origin": pd.Categorical.from_codes(np.zeros(len(rows), dtype=np.int8),
                                            categories=ORIGINS),
    }, copy=False)  # every column is a fresh array: pandas need not copy it again
    segments = pd.DataFrame({
        "span_index": np.asarray(virtual.seg_owner, dtype=np.int64) + n_real,
        "name": _categorical(virtual.seg_name),
        "start": np.asarray(virtual.seg_start, dtype=np.float64),
        "end": np.asarray(virtual.seg_end, dtype=np.float64),
        "duration": np.asarray(virtual.seg_duration, dtype=np.float64),
    })
    return frame, segments


def _append_virtual_names(
    names: pd.Categorical, generation: np.ndarray, suffix: np.ndarray
) -> pd.Categorical:
    """Names for the virtual spans (``"<generation name> [P]"``), built on the codes."""
    categories = [str(c) for c in names.categories]
    codes = np.asarray(names.codes)
    new_codes = np.empty(len(generation), dtype=codes.dtype if len(categories) < 30000
                         else np.int32)
    lookup = {name: i for i, name in enumerate(categories)}
    for position, (code, tail) in enumerate(zip(codes[generation].tolist(), suffix.tolist(),
                                                strict=True)):
        label = categories[code] + tail
        new_codes[position] = lookup.setdefault(label, len(lookup))
    all_categories = list(lookup)
    return pd.Categorical.from_codes(np.concatenate([codes.astype(new_codes.dtype), new_codes]),
                                     categories=pd.Index(all_categories, dtype=object))


def _pd_summaries(events: dict[str, Any]) -> dict[int, dict]:
    """``sglang_pd_summary`` attrs keyed by the index of their generation span."""
    names: pd.Categorical = events["names"]
    if SUMMARY_EVENT not in names.categories:
        return {}
    code = names.categories.get_loc(SUMMARY_EVENT)
    parents, attrs = events["parents"], events["attrs"]
    return {int(parents[i]): attrs[i]
            for i in np.flatnonzero(np.asarray(names.codes) == code).tolist()
            if parents[i] >= 0 and isinstance(attrs[i], dict)}


def _has_key(dicts: list[dict | None], key: str) -> np.ndarray:
    return np.array([d is not None and key in d for d in dicts], dtype=bool)


# --------------------------------------------------------------------------- events


def _event_table(cols: dict[str, Any], spans: pd.DataFrame) -> pd.DataFrame:
    parents = cols["parents"]
    parent_name, depth, lane = event_placement(parents, spans)
    unmatched = np.fromiter((sid is not None for sid in cols["span_ids"]), dtype=bool,
                            count=len(parents))
    frame = pd.DataFrame({
        "sample_row": cols["rows"],
        "name": cols["names"],
        "ts": cols["ts"],
        "attempt": cols["attempts"].astype(np.int32),
        "parent_span_id": inferred_text(cols["parent_ids"]),
        "parent_index": parents,
        "parent_name": parent_name,
        "kind": pd.Categorical.from_codes(unmatched.astype(np.int8), categories=EVENT_KINDS),
        "span_id": inferred_text(cols["span_ids"]),
        "depth": depth,
        "lane": lane,
        "origin": pd.Categorical.from_codes(np.zeros(len(parents), dtype=np.int8),
                                            categories=ORIGINS),
    }, copy=False)
    return frame


def event_placement(parents: np.ndarray, spans: pd.DataFrame
                    ) -> tuple[pd.Categorical, np.ndarray, np.ndarray]:
    """Where events sit, from their parent spans (index ``parents``, -1 none): the
    parent's name, one level below its depth, and its lane."""
    has_parent = parents >= 0
    safe = np.maximum(parents, 0)
    span_names: pd.Categorical = spans["name"].array  # type: ignore[assignment]
    if len(spans):
        parent_codes = np.where(has_parent, np.asarray(span_names.codes)[safe], -1)
        lane = np.where(has_parent, spans["lane"].to_numpy()[safe], 0)
        depth = np.where(has_parent, spans["depth"].to_numpy()[safe] + 1, 0)
    else:
        parent_codes = np.full(len(parents), -1)
        lane = depth = np.zeros(len(parents), dtype=np.int64)
    return (pd.Categorical.from_codes(parent_codes, dtype=span_names.dtype),
            depth.astype(np.int32), lane.astype(np.int32))


# --------------------------------------------------------------------------- samples


def _sample_table(
    fields: list[SampleFields],
    first: np.ndarray,
    last: np.ndarray,
    top_attempt: np.ndarray,
    spans: pd.DataFrame,
    events: pd.DataFrame,
) -> pd.DataFrame:
    n = len(fields)
    traced = np.array([bool(f.events) for f in fields], dtype=bool)  # has records
    carrier_attempt = np.array([f.carrier_attempt for f in fields], dtype=np.int64)
    attempts = np.where(traced, np.maximum(top_attempt, carrier_attempt) + 1, 0)
    frame = pd.DataFrame({
        "rollout_id": pd.array([f.rollout_id for f in fields], dtype="Int64"),
        "dump": np.array([f.dump for f in fields], dtype=np.int32),
        "sample_index": pd.array([f.index for f in fields], dtype="Int64"),
        "group_index": pd.array([f.group_index for f in fields], dtype="Int64"),
        "source": _categorical([f.source for f in fields]),
        "status": _categorical([f.status for f in fields]),
        "label": pd.Series(_clean_ids([f.label for f in fields]), dtype=object),
        "reward": np.array([f.reward for f in fields], dtype=np.float64),
        "reward_detail": pd.Series([f.reward_detail for f in fields], dtype=object),
        "response_length": pd.array([f.response_length for f in fields], dtype="Int64"),
        "trace_id": pd.Series(_clean_ids([f.trace_id for f in fields]), dtype=object),
        "prompt": pd.Series(_clean_ids([f.prompt for f in fields]), dtype=object),
        "response": pd.Series(_clean_ids([f.response for f in fields]), dtype=object),
        "metadata": pd.Series(_clean_ids([f.metadata for f in fields]), dtype=object),
        "traced": traced,
        "attempts": attempts.astype(np.int32),
        "start": first,
        "end": last,
        "duration": last - first,
        **row_counts(n, spans, events),
    })
    frame.index.name = "row"
    return frame


def row_counts(n: int, spans: pd.DataFrame, events: pd.DataFrame) -> dict[str, np.ndarray]:
    """The per-sample counts of ``n`` rows that spans and events decide: closed and open
    real spans, events and unmatched ends, and lanes."""
    real = ~spans["virtual"].to_numpy()
    span_rows = spans["sample_row"].to_numpy()[real]
    is_open = np.asarray(spans["state"].array.codes)[real] == STATES.index("open")
    event_rows = events["sample_row"].to_numpy()
    unmatched = (events["kind"] == "unmatched_end").to_numpy()
    lanes = np.zeros(n, dtype=np.int64)
    if len(spans):
        np.maximum.at(lanes, spans["sample_row"].to_numpy(), spans["lane"].to_numpy() + 1)
    return {"n_spans": np.bincount(span_rows[~is_open], minlength=n)[:n],
            "n_open_spans": np.bincount(span_rows[is_open], minlength=n)[:n],
            "n_events": np.bincount(event_rows[~unmatched], minlength=n)[:n],
            "n_unmatched_ends": np.bincount(event_rows[unmatched], minlength=n)[:n],
            "n_lanes": lanes}
