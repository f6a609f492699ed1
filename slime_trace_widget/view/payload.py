"""Encode frames (or a pandas-filtered part of them) into the renderer's payload.

The format is documented in ``docs/payload.md`` and decoded by
``js/src/data/decode.js``; the notebook widget and the HTML snapshot both send it,
so they draw the same picture. Bulk columns are little-endian typed arrays
(about 21 bytes per span), strings travel once in small tables.

What is left out on purpose: real ``sglang_pd_*`` spans (``pd_detail``) in the
default view, because the virtual ``[P]``/``[D]`` lanes and their segments draw
the same intervals; they are kept when the caller's own span filter asks for
them, and then drawn as ordinary spans.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..answers.engine import PHASES as ENGINE_PHASES
from ..answers.links import LINK_KINDS, group_members, links
from ..answers.query import selection_labels
from ..frames.engine_load import load_tracks
from ..frames.model import TraceFrames
from ..sources.dumps.paths import dump_labels
from ..sources.engine.join import REQUEST_SPAN_NAMES
from ..values import truncate
from ..vocabularies import CLIP_REASONS, EVENT_KINDS, LOAD_TRACKS
from .contract import (
    CLIP_SHIFT,
    CODE_TABLES,
    COLUMN_DTYPES,
    CONTRACT,
    FATE_NONE,
    FLAG_ENGINE,
    FLAG_ERROR,
    FLAG_OPEN,
    FLAG_PD_SEGMENT_SPANS,
    FLAG_VIRTUAL,
    PAYLOAD_VERSION,
    column_bytes,
    column_values,
)
from .fates import fate_codes, ledger_meta

LABEL_CHARS = 200
#: Names, statuses and sources longer than this travel cut (with a marker); the
#: kernel keeps them whole. A label on screen never shows more.
NAME_CHARS = 1000
MAX_NAMES = 65535
#: The entry that statuses (sources) past what ``smp_status`` (``smp_source``) can
#: code share, so that none of them is shown or filtered as another.
OVERFLOW_ENTRIES = {"statuses": "<more statuses>", "sources": "<more sources>"}
#: Seconds from a sample's median item time within which its first item time is its
#: items' origin (``_SampleClock``): float32 keeps 0.5 ms this far from it.
ORIGIN_REACH = 4 * 3600.0
#: How samples share the time axis: one clock, or each dump from its own start.
ALIGNMENTS = ("global", "rollout")


@dataclass
class EncodedView:
    """A payload plus the maps from payload positions back to frame rows."""

    payload: dict[str, Any]
    sample_rows: np.ndarray  # payload sample -> samples.index
    span_index: np.ndarray  # payload span -> spans.index
    event_index: np.ndarray  # payload event -> events.index


def empty_payload(title: str, **meta: Any) -> dict[str, Any]:
    """A payload of no samples (every table empty) titled ``title``, with ``meta``'s
    entries added to its meta (the live view's ``live``)."""
    return {"version": PAYLOAD_VERSION,
            "meta": {"title": title, "t0": 0.0, "t1": 0.0, "n_samples_total": 0,
                     **{table: [] for table in CODE_TABLES}, "samples": {}, "columns": {},
                     "attrs_embedded": False, "align": "global", **meta},
            "buffers": {}}


def encode(
    frames: TraceFrames,
    *,
    samples: pd.DataFrame | pd.Index | None = None,
    spans: pd.DataFrame | pd.Index | None = None,
    events: pd.DataFrame | pd.Index | None = None,
    title: str | None = None,
    align: str = "global",
    t0: float | None = None,
    summaries: bool = True,
) -> EncodedView:
    """Encode ``frames``, limited to the given samples, spans and/or events (pandas
    filters).

    ``samples`` limits the rows; ``spans`` limits the spans and, when no
    ``samples`` are given, the rows to the samples owning one of them.
    ``events`` names the events to send (within the rows); without it, events
    follow the span filter (those whose parent span is sent). ``align="rollout"``
    draws each rollout from its own start (comparison view). ``t0`` sets the
    epoch seconds relative time 0 stands for (default: the frames' earliest
    timestamp); the live view encodes each batch of samples against one ``t0``.
    ``summaries=False`` leaves out the links, the fates and the ledger, which need
    whole rollouts (the live view sends parts of one still running).
    """
    if align not in ALIGNMENTS:  # a typo would otherwise draw "global" without load tracks
        raise ValueError(f"align must be {' or '.join(map(repr, ALIGNMENTS))}, not {align!r}")
    core, segments = frames.span_core, frames.segments
    sample_labels, span_labels, event_labels = (
        None if chosen is None else selection_labels(chosen) for chosen in (samples, spans, events))
    sample_rows = _chosen_rows(frames, sample_labels, span_labels)
    sample_pos = np.full(len(frames.samples), -1, dtype=np.int64)
    sample_pos[sample_rows] = np.arange(len(sample_rows))

    span_mask = sample_pos[core["sample_row"].to_numpy()] >= 0
    if span_labels is not None:
        span_mask &= core.index.isin(span_labels)
    else:
        span_mask &= ~core["pd_detail"].to_numpy()
    span_sel = np.flatnonzero(span_mask)
    event_sel = _chosen_events(frames.event_core, sample_pos, span_mask,
                               span_labels is not None, event_labels)

    if t0 is None:
        t0 = frames.t0 if frames.t0 == frames.t0 else 0.0
    offsets = _alignment(frames, sample_rows, align, t0)
    clock = _SampleClock.of(frames, sample_rows, t0, offsets,
                            _item_times(frames, sample_pos, span_sel, event_sel))
    names = _NameTable()
    buffers: dict[str, bytes] = {}
    sample_cols, sample_tables = _sample_columns(frames, sample_rows, core, span_sel, clock,
                                                 summaries)
    buffers.update(sample_cols)
    span_order, span_cols = _span_columns(core, span_sel, sample_pos, names, clock)
    buffers.update(span_cols)
    span_pos = np.full(len(core), -1, dtype=np.int64)
    span_pos[span_order] = np.arange(len(span_order))
    span_origins = clock.origins[sample_pos[core["sample_row"].to_numpy()[span_order]]]
    buffers.update(_segment_columns(segments, span_pos, span_origins, names))
    event_order, event_cols = _event_columns(frames.event_core, event_sel, sample_pos, span_pos,
                                             names, clock)
    buffers.update(event_cols)
    event_pos = np.full(len(frames.event_core), -1, dtype=np.int64)
    event_pos[event_order] = np.arange(len(event_order))
    if summaries:
        buffers.update(_link_columns(frames, span_pos, event_pos))
    load_cols, load_engines = _load_columns(frames, t0, align)
    buffers.update(load_cols)
    for kind in CONTRACT["sort_keys"]:
        _check_order(buffers, kind)

    meta = {
        "title": truncate(title or _default_title(frames), NAME_CHARS),
        "t0": t0,
        "t1": frames.t1 if frames.t1 == frames.t1 else t0,
        "n_samples_total": len(frames.samples),
        "names": names.values,
        **sample_tables,
        "rollouts": _rollout_labels(frames),
        "samples": _sample_strings(frames.samples, sample_rows),
        "columns": dict(COLUMN_DTYPES),
        "attrs_embedded": False,
        "align": align,
    }
    if _is_engine(core)[span_sel].any():
        meta["engine_phases"] = {phase: list(names) for phase, names in ENGINE_PHASES.items()}
        meta["engine_roles"] = {name: role for role, name in REQUEST_SPAN_NAMES.items() if role}
    if load_engines:
        meta["load_engines"] = load_engines
    warnings = _load_warnings(frames)
    if warnings:
        meta["warnings"] = warnings
    ledger = ledger_meta(frames, sample_rows, offsets) if summaries else None
    if ledger is not None:
        meta["ledger"] = ledger
    payload = {"version": PAYLOAD_VERSION, "meta": meta, "buffers": buffers}
    return EncodedView(payload, sample_rows, core.index.to_numpy()[span_order],
                       frames.event_core.index.to_numpy()[event_order])


# --------------------------------------------------------------------------- selection


def _chosen_rows(frames: TraceFrames, samples: pd.Index | None, spans: pd.Index | None
                 ) -> np.ndarray:
    """The sample rows to draw: those labelled in ``samples``, else those owning a span
    labelled in ``spans``, else all."""
    rows = frames.samples.index.to_numpy()
    if samples is not None:
        rows = rows[frames.samples.index.isin(samples)]
    if spans is not None and samples is None:
        chosen = frames.span_core.loc[frames.span_core.index.intersection(spans)]
        rows = np.intersect1d(rows, chosen["sample_row"].unique())
    return np.sort(rows).astype(np.int64)


def _chosen_events(
    events: pd.DataFrame, sample_pos: np.ndarray, span_mask: np.ndarray, span_filter: bool,
    chosen: pd.Index | None,
) -> np.ndarray:
    keep = sample_pos[events["sample_row"].to_numpy()] >= 0
    if chosen is not None:
        keep &= events.index.isin(chosen)
    elif span_filter:
        parents = events["parent_index"].to_numpy()
        keep &= (parents >= 0) & span_mask[np.maximum(parents, 0)]
    return np.flatnonzero(keep)


def _alignment(frames: TraceFrames, rows: np.ndarray, align: str, t0: float) -> np.ndarray:
    """Seconds to subtract per payload sample: 0, or its rollout's start minus ``t0``."""
    if align != "rollout" or not len(rows):
        return np.zeros(len(rows))
    starts = frames.samples["start"]
    by_dump = starts.groupby(frames.samples["dump"]).min()
    dump_start = frames.samples["dump"].map(by_dump).to_numpy(dtype=np.float64)
    return np.nan_to_num(dump_start[rows] - t0)


def _item_times(frames: TraceFrames, sample_pos: np.ndarray, span_sel: np.ndarray,
                event_sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The epoch times of the items sent (span starts and drawn ends, event times) and
    the payload sample of each."""
    core, events = frames.span_core, frames.event_core
    span_samples = sample_pos[core["sample_row"].to_numpy()[span_sel]]
    event_samples = sample_pos[events["sample_row"].to_numpy()[event_sel]]
    times = np.concatenate([core["start"].to_numpy(dtype=np.float64)[span_sel],
                            core["display_end"].to_numpy(dtype=np.float64)[span_sel],
                            events["ts"].to_numpy(dtype=np.float64)[event_sel]])
    return times, np.concatenate([span_samples, span_samples, event_samples])


@dataclass(frozen=True)
class _SampleClock:
    """Where each payload sample's times count from.

    ``relative(times)`` are seconds after ``t0`` minus the sample's alignment offset
    (float64: ``smp_start``, ``smp_end``). Item times travel as float32 seconds from
    their sample's *origin*, so they keep float32's precision over the sample's own
    span however far the samples lie apart (one stray clock in the dump, dumps days
    apart); ``bases`` (``smp_base``) say where each origin is, relative. The origin
    is the sample's first item time within :data:`ORIGIN_REACH` of its median item
    time: its first timestamp, unless a stray timestamp lies far from the rest, which
    then costs only that item its precision. When no item lies that near the median
    (half the sample's stamps stray, as a stray span's two do), its item nearest the
    whole view's median item time takes the median's place. A sample with no items
    counts from its start (``t0`` plus its offset when untraced).
    """

    t0: float
    offsets: np.ndarray  # per payload sample: seconds subtracted (align="rollout")
    origins: np.ndarray  # per payload sample: epoch seconds its item times count from

    @classmethod
    def of(cls, frames: TraceFrames, rows: np.ndarray, t0: float, offsets: np.ndarray,
           items: tuple[np.ndarray, np.ndarray]) -> _SampleClock:
        """``items``: the epoch times of the items sent and their payload samples."""
        starts = frames.samples["start"].to_numpy(dtype=np.float64)[rows]
        origins = np.where(np.isfinite(starts), starts, t0 + offsets)
        times, samples = items
        finite = np.isfinite(times)
        times, samples = times[finite], samples[finite]
        if len(times):
            references = np.zeros(len(rows))
            median = pd.Series(times).groupby(samples).median()
            references[median.index.to_numpy()] = median.to_numpy()
            near = np.abs(times - references[samples]) <= ORIGIN_REACH
            # A median that falls between two far groups of the sample's items (a stray
            # span is two stray stamps) nears none of them: the group of its item
            # nearest the whole view's median is then the ordinary clock.
            astray = np.ones(len(rows), dtype=bool)
            astray[samples[near]] = False
            if astray[samples].any():
                distance = pd.Series(np.abs(times - np.median(times)))
                nearest = distance[astray[samples]].groupby(samples[astray[samples]]).idxmin()
                references[nearest.index.to_numpy()] = times[nearest.to_numpy()]
                near = np.abs(times - references[samples]) <= ORIGIN_REACH
            first = pd.Series(times[near]).groupby(samples[near]).min()
            origins[first.index.to_numpy()] = first.to_numpy()
        return cls(t0, offsets, origins)

    @property
    def bases(self) -> np.ndarray:
        """Each origin as seconds after ``t0`` minus the offset (0 when untraced)."""
        return self.origins - self.t0 - self.offsets

    def relative(self, times: np.ndarray) -> np.ndarray:
        """Per payload sample, epoch ``times`` as drawn: seconds after ``t0`` minus the offset."""
        return times - self.t0 - self.offsets

    def item_times(self, times: np.ndarray, samples: np.ndarray) -> np.ndarray:
        """Epoch ``times`` of items of payload samples ``samples``, from their origins."""
        return times - self.origins[samples]


# --------------------------------------------------------------------------- columns


class _NameTable:
    """Interns names; codes are u2, so names past 65,535 share one overflow entry."""

    OVERFLOW = "<more names>"

    def __init__(self) -> None:
        self.values: list[str] = []
        self._codes: dict[str, int] = {}

    def codes_for(self, categorical: pd.Series) -> np.ndarray:
        """Table codes for a categorical column; only names in use enter the table."""
        cat = categorical.array.remove_unused_categories()  # type: ignore[union-attr]
        codes = np.asarray(cat.codes, dtype=np.int64)
        table = np.array([self.code(str(c)) for c in cat.categories], dtype=np.int64)
        if (codes < 0).any():
            table = np.append(table, self.code(""))  # code -1 picks the trailing "" entry
        return table[codes] if len(table) else codes

    def code(self, name: str) -> int:
        found = self._codes.get(name)
        if found is not None:
            return found
        if len(self.values) >= MAX_NAMES:
            return self.code_overflow()
        self._codes[name] = len(self.values)
        self.values.append(truncate(name, NAME_CHARS))
        return self._codes[name]

    def code_overflow(self) -> int:
        if self.OVERFLOW not in self._codes:
            self._codes[self.OVERFLOW] = len(self.values)
            self.values.append(self.OVERFLOW)
        return self._codes[self.OVERFLOW]


def _sample_columns(
    frames: TraceFrames, rows: np.ndarray, core: pd.DataFrame, span_sel: np.ndarray,
    clock: _SampleClock, fates: bool,
) -> tuple[dict[str, bytes], dict[str, list[str]]]:
    """The sample columns, and the statuses and sources tables their codes index."""
    samples = frames.samples.iloc[rows] if len(rows) else frames.samples.iloc[:0]
    lanes = np.zeros(len(frames.samples), dtype=np.int64)
    np.maximum.at(lanes, core["sample_row"].to_numpy()[span_sel],
                  core["lane"].to_numpy()[span_sel] + 1)
    statuses, status_codes = _code_table(samples["status"], "smp_status",
                                         OVERFLOW_ENTRIES["statuses"])
    sources, source_codes = _code_table(samples["source"], "smp_source",
                                        OVERFLOW_ENTRIES["sources"])
    dump_codes = samples["dump"].to_numpy()
    return {
        "smp_start": column_bytes("smp_start", clock.relative(samples["start"].to_numpy())),
        "smp_end": column_bytes("smp_end", clock.relative(samples["end"].to_numpy())),
        "smp_base": column_bytes("smp_base", clock.bases),
        "smp_reward": column_bytes("smp_reward", samples["reward"].to_numpy()),
        "smp_status": column_bytes("smp_status", status_codes),
        "smp_source": column_bytes("smp_source", source_codes),
        "smp_rollout": column_bytes("smp_rollout", dump_codes),
        "smp_attempts": column_bytes("smp_attempts",
                                     np.minimum(samples["attempts"].to_numpy(), 65535)),
        # Lanes past the last one an item's packed lane names share it: a row has no lane
        # that nothing is drawn on.
        "smp_lanes": column_bytes("smp_lanes",
                                  np.minimum(lanes[rows], largest_code("span_lane") + 1)),
        "smp_open": column_bytes("smp_open", samples["n_open_spans"].to_numpy()),
        "smp_offset": column_bytes("smp_offset", clock.offsets),
        "smp_fate": column_bytes("smp_fate", fate_codes(frames)[rows] if fates
                                 else np.full(len(rows), FATE_NONE)),
    }, {"statuses": statuses, "sources": sources}


def largest_code(column: str) -> int:
    """The largest code the payload column ``column``'s type holds."""
    return int(np.iinfo(np.dtype("<" + COLUMN_DTYPES[column])).max)


def _code_table(values: pd.Series, column: str, overflow: str) -> tuple[list[str], np.ndarray]:
    """The table of a categorical's values in use (cut like names) and each row's code
    into it, for the payload column ``column``.

    A missing value codes to the table's "" entry. When the values outnumber what the
    column's type can code, those past its last codes share one ``overflow`` entry,
    the last, so no value is ever shown or filtered as another.
    """
    categorical = values.array.remove_unused_categories()  # type: ignore[union-attr]
    table = [truncate(str(c), NAME_CHARS) for c in categorical.categories]
    codes = np.asarray(categorical.codes, dtype=np.int64)
    last = largest_code(column)
    if len(table) > last:  # no room for "" after them: keep last - 1, then "" and overflow
        table = table[:last - 1]
        codes = np.where(codes >= last - 1, last, codes)
        return [*table, "", overflow], np.where(codes < 0, last - 1, codes)
    return [*table, ""], np.where(codes < 0, len(table), codes)


#: The span table's columns ``_span_columns`` reads for the rows it sends.
_DRAWN_SPAN_COLUMNS = ("state", "virtual", "error", "pd_form", "clip_reason", "origin",
                       "parent_index", "sample_row", "start", "display_end", "duration", "name",
                       "lane", "depth", "attempt")


def _span_columns(
    core: pd.DataFrame, selection: np.ndarray, sample_pos: np.ndarray, names: _NameTable,
    clock: _SampleClock,
) -> tuple[np.ndarray, dict[str, bytes]]:
    rows = sample_pos[core["sample_row"].to_numpy()[selection]]
    lanes = np.minimum(core["lane"].to_numpy()[selection], 255)  # as packed: u1
    starts = core["start"].to_numpy()[selection]
    order = selection[np.lexsort((starts, lanes, rows))]
    # Column by column, only those drawn: a take of the whole table would also copy
    # the columns never drawn (the ids' text among them).
    chosen = {name: core[name].iloc[order] for name in _DRAWN_SPAN_COLUMNS
              if name in core.columns}
    flags = (
        (chosen["state"] == "open").to_numpy().astype(np.int64) * FLAG_OPEN
        | chosen["virtual"].to_numpy().astype(np.int64) * FLAG_VIRTUAL
        | chosen["error"].to_numpy().astype(np.int64) * FLAG_ERROR
        | (chosen["pd_form"] == "children").to_numpy().astype(np.int64) * FLAG_PD_SEGMENT_SPANS
        | (_vocabulary_codes(chosen["clip_reason"], CLIP_REASONS, "clip_reasons") + 1) << CLIP_SHIFT
        | _is_engine(chosen).astype(np.int64) * FLAG_ENGINE
    )
    parent_pos = np.full(len(core), -1, dtype=np.int64)
    parent_pos[order] = np.arange(len(order))
    parents = chosen["parent_index"].to_numpy()
    parent_payload = np.where(parents >= 0, parent_pos[np.maximum(parents, 0)], -1)
    samples = sample_pos[chosen["sample_row"].to_numpy()]
    columns = {
        "span_sample": column_bytes("span_sample", samples),
        "span_start": column_bytes("span_start",
                                   clock.item_times(chosen["start"].to_numpy(), samples)),
        "span_end": column_bytes("span_end",
                                 clock.item_times(chosen["display_end"].to_numpy(), samples)),
        # The recorded duration, which filters compare as the kernel's query does: the
        # drawn end never precedes the start, and offsets far into a sample lose digits.
        "span_dur": column_bytes("span_dur", chosen["duration"].to_numpy()),
        "span_name": column_bytes("span_name", names.codes_for(chosen["name"])),
        "span_lane": column_bytes("span_lane", np.minimum(chosen["lane"].to_numpy(), 255)),
        "span_depth": column_bytes("span_depth", np.minimum(chosen["depth"].to_numpy(), 255)),
        "span_flags": column_bytes("span_flags", flags),
        "span_attempt": column_bytes("span_attempt", np.minimum(chosen["attempt"].to_numpy(), 255)),
        "span_parent": column_bytes("span_parent", parent_payload),
    }
    return order, columns


def _segment_columns(
    segments: pd.DataFrame, span_pos: np.ndarray, span_origins: np.ndarray, names: _NameTable,
) -> dict[str, bytes]:
    """PD segments of the virtual spans in the payload, sorted by owner then start; their
    times count from their span's sample's origin (``span_origins``, per payload span)."""
    if len(segments):
        owners = span_pos[segments["span_index"].to_numpy()]
        shown = segments[owners >= 0]
        owners = owners[owners >= 0]
        order = np.lexsort((shown["start"].to_numpy(), owners))
        shown, owners = shown.iloc[order], owners[order]
        name_codes = names.codes_for(shown["name"])
        origin = span_origins[owners]
        start, end = shown["start"].to_numpy() - origin, shown["end"].to_numpy() - origin
    else:
        owners = name_codes = start = end = np.zeros(0)
    return {
        "seg_span": column_bytes("seg_span", owners),
        "seg_start": column_bytes("seg_start", start),
        "seg_end": column_bytes("seg_end", end),
        "seg_name": column_bytes("seg_name", name_codes),
    }


def _event_columns(
    events: pd.DataFrame, selection: np.ndarray, sample_pos: np.ndarray, span_pos: np.ndarray,
    names: _NameTable, clock: _SampleClock,
) -> tuple[np.ndarray, dict[str, bytes]]:
    rows = sample_pos[events["sample_row"].to_numpy()[selection]]
    lanes = np.minimum(events["lane"].to_numpy()[selection], 255)  # as packed: u1
    ts = events["ts"].to_numpy()[selection]
    order = selection[np.lexsort((ts, lanes, rows))]
    chosen = events.iloc[order]
    parents = chosen["parent_index"].to_numpy()
    samples = sample_pos[chosen["sample_row"].to_numpy()]
    columns = {
        "ev_sample": column_bytes("ev_sample", samples),
        "ev_ts": column_bytes("ev_ts", clock.item_times(chosen["ts"].to_numpy(), samples)),
        "ev_name": column_bytes("ev_name", names.codes_for(chosen["name"])),
        "ev_lane": column_bytes("ev_lane", np.minimum(chosen["lane"].to_numpy(), 255)),
        "ev_kind": column_bytes("ev_kind",
                                _vocabulary_codes(chosen["kind"], EVENT_KINDS, "event_kinds")),
        "ev_attempt": column_bytes("ev_attempt", np.minimum(chosen["attempt"].to_numpy(), 255)),
        "ev_parent": column_bytes("ev_parent", _parent_positions(parents, span_pos)),
    }
    return order, columns


def _link_columns(frames: TraceFrames, span_pos: np.ndarray,
                  event_pos: np.ndarray) -> dict[str, bytes]:
    """The links whose both ends are in the payload (``links.links``), sorted.

    An endpoint is a payload span index ``i`` (as is) or event index ``j`` (as
    ``-1 - j``). A group is re-hubbed on its first member in the payload, so a
    filter that hides the hub still links the members it shows."""
    table = links(frames)
    members = group_members(table)
    member = _positions(frames.span_core.index, span_pos, members["span"].to_numpy())
    shown = pd.DataFrame({"pos": member, "hub": members["hub"].to_numpy()})[member >= 0]
    hub = shown.groupby("hub")["pos"].transform("min").to_numpy()
    mine = shown["pos"].to_numpy() != hub
    kinds = [np.full(int(mine.sum()), LINK_KINDS.index("group"))]
    sources, targets = [shown["pos"].to_numpy()[mine]], [hub[mine]]

    others = table[table["kind"] != "group"]
    ends = []
    for side in ("from", "to"):
        is_span = (others[f"{side}_kind"] == "span").to_numpy()
        labels = others[f"{side}_index"].to_numpy()
        position = np.where(is_span, _positions(frames.span_core.index, span_pos, labels),
                            _positions(frames.event_core.index, event_pos, labels))
        ends.append((position, np.where(is_span, position, -1 - position)))
    both = (ends[0][0] >= 0) & (ends[1][0] >= 0)
    kinds.append(np.asarray(others["kind"].array.codes)[both])  # type: ignore[union-attr]
    sources.append(ends[0][1][both])
    targets.append(ends[1][1][both])
    kind, source, target = (np.concatenate(parts).astype(np.int64)
                            for parts in (kinds, sources, targets))
    order = np.lexsort((target, source, kind))
    return {
        "link_kind": column_bytes("link_kind", kind[order]),
        "link_from": column_bytes("link_from", source[order]),
        "link_to": column_bytes("link_to", target[order]),
    }


def engine_load_tracks(frames: TraceFrames) -> pd.DataFrame | None:
    """The engines' load as counter tracks (``frames.engine_load.load_tracks``: ``engine``,
    ``track``, ``ts`` in the dump's clock, ``value``), or None when the frames have none
    (no engine was scraped, or frames made before engine load existed)."""
    load = getattr(frames, "engine_load", None)
    if not isinstance(load, pd.DataFrame) or not len(load):
        return None
    tracks = load_tracks(load)
    return tracks if len(tracks) else None


def _load_columns(frames: TraceFrames, t0: float, align: str
                  ) -> tuple[dict[str, bytes], list[str]]:
    """The engines' load tracks within the frames' time (and each track's last value
    before it, which holds at the start), sorted by (engine, track, time), and the
    engines' names; none in a view that draws each rollout from its own start, where
    no one clock holds for the tracks."""
    tracks = engine_load_tracks(frames) if align == "global" else None
    if tracks is None:
        return {name: column_bytes(name, np.zeros(0)) for name in
                ("load_engine", "load_track", "load_ts", "load_value")}, []
    ts = pd.to_numeric(tracks["ts"], errors="coerce").to_numpy(dtype=np.float64)
    value = pd.to_numeric(tracks["value"], errors="coerce").to_numpy(dtype=np.float64)
    track = pd.Categorical(tracks["track"].astype(str), categories=LOAD_TRACKS).codes
    table = pd.DataFrame({"engine": tracks["engine"].astype(str).to_numpy(), "track": track,
                          "ts": ts, "value": value})
    table = table[(table["track"] >= 0) & np.isfinite(ts) & ~np.isnan(value)]
    end = frames.t1 if frames.t1 == frames.t1 else t0
    table = table.sort_values(["engine", "track", "ts"], kind="stable")
    before = table[table["ts"] < t0].groupby(["engine", "track"]).tail(1)
    table = pd.concat([before, table[(table["ts"] >= t0) & (table["ts"] <= end)]])
    table = table.sort_values(["engine", "track", "ts"], kind="stable")
    codes, engines = pd.factorize(table["engine"], sort=True)
    return {
        "load_engine": column_bytes("load_engine", codes),
        "load_track": column_bytes("load_track", table["track"].to_numpy()),
        "load_ts": column_bytes("load_ts", table["ts"].to_numpy() - t0),
        "load_value": column_bytes("load_value", table["value"].to_numpy()),
    }, [truncate(str(name), NAME_CHARS) for name in engines]


def _positions(index: pd.Index, payload_pos: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Payload positions of the rows ``labels`` of a table (-1: not in the payload)."""
    found = index.get_indexer(labels)
    return np.where(found >= 0, payload_pos[np.maximum(found, 0)], -1)


def _vocabulary_codes(series: pd.Series, names: Sequence[str], table: str) -> np.ndarray:
    """Positions of a categorical's values in ``names``, the vocabulary ``table`` of
    ``vocabularies.json`` (-1 for missing)."""
    categories = [str(c) for c in series.array.categories]  # type: ignore[union-attr]
    unknown = sorted(set(categories) - set(names))
    if unknown:
        raise ValueError(f"payload: {table} {unknown} are not in vocabularies.json")
    lookup = np.array([names.index(c) for c in categories] + [-1], dtype=np.int64)
    return lookup[np.asarray(series.array.codes, dtype=np.int64)]  # type: ignore[union-attr]


def _check_order(buffers: dict[str, bytes], kind: str) -> None:
    """Fail on spans (events) out of (sample, lane, time) order, or load points out of
    (engine, track, time) order, as packed (the contract's ``sort_keys``).

    The renderer binary-searches each lane and track and does not reorder, so a
    payload out of order would draw wrong rather than fail loudly there.
    """
    sample, lane, time = (column_values(name, buffers[name])
                          for name in CONTRACT["sort_keys"][kind])
    d_sample = np.diff(sample.astype(np.int64))
    d_lane = np.diff(lane.astype(np.int64))
    back = (d_sample < 0) | ((d_sample == 0) & ((d_lane < 0) | ((d_lane == 0)
                                                              & (np.diff(time) < 0))))
    if back.any():
        keys = ", ".join(CONTRACT["sort_keys"][kind])
        raise RuntimeError(f"payload: {kind} columns out of ({keys}) order "
                           f"at position {int(np.argmax(back)) + 1}")


def _parent_positions(parents: np.ndarray, span_pos: np.ndarray) -> np.ndarray:
    """Payload position of each parent span (-1 for none, or when no span is shown)."""
    if not len(span_pos):
        return np.full(len(parents), -1, dtype=np.int64)
    return np.where(parents >= 0, span_pos[np.maximum(parents, 0)], -1)


# --------------------------------------------------------------------------- strings


def _load_warnings(frames: TraceFrames) -> dict[str, int]:
    """The records the loader skipped or repaired, counted by kind (``frames.warnings``),
    most first; kinds cut like labels."""
    counts: dict[str, int] = {}
    for kind, count in (getattr(frames, "warnings", None) or {}).items():
        if int(count) > 0:
            name = truncate(str(kind), LABEL_CHARS)
            counts[name] = counts.get(name, 0) + int(count)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _file_name(path: str) -> str:
    """A dump's file name as the page shows it: "" for a source that is not a file
    (``<live>``); a name that is not UTF-8 with replacement characters, cut like names."""
    if not path or path.startswith("<"):
        return ""
    return truncate(os.path.basename(path), NAME_CHARS)


def _rollout_labels(frames: TraceFrames) -> list[str]:
    """Each dump's label in the views (rows, markers, the diff's A and B): ``rollout N``,
    or its file name without a rollout id. Where dumps would share one (the same step of
    two runs), each adds the end of its path that tells it apart (:func:`dump_labels`)."""
    labels = [f"rollout {rollout_id}" if rollout_id is not None else _file_name(path) or "dump"
              for path, rollout_id in zip(frames.paths, frames.rollout_ids, strict=True)]
    shared = {label for label, count in Counter(labels).items() if count > 1}
    if shared:
        apart = dump_labels([str(path) for path in frames.paths])
        for position, path in enumerate(frames.paths):
            if labels[position] in shared:  # frames made in memory have no path: a number
                where = truncate(apart[position], NAME_CHARS) if _file_name(path) \
                    else f"#{position + 1}"
                labels[position] = f"{labels[position]} ({where})"
    return labels or ["dump"]


def _sample_strings(samples: pd.DataFrame, rows: np.ndarray) -> dict[str, list]:
    chosen = samples.iloc[rows]
    return {
        "row": rows.tolist(),
        "sample_index": _nullable_ints(chosen["sample_index"]),
        "group_index": _nullable_ints(chosen["group_index"]),
        "trace_id": [None if t is None else truncate(str(t), NAME_CHARS)
                     for t in chosen["trace_id"]],
        "label": [None if v is None else truncate(str(v), LABEL_CHARS) for v in chosen["label"]],
    }


def _nullable_ints(series: pd.Series) -> list[int | None]:
    return [None if pd.isna(v) else int(v) for v in series]


def _default_title(frames: TraceFrames) -> str:
    names = [name for name in map(_file_name, frames.paths) if name]
    if not names:
        return "slime trace timeline"
    return names[0] if len(names) == 1 else f"{names[0]} + {len(names) - 1} more"


def _is_engine(spans: pd.DataFrame | dict[str, pd.Series]) -> np.ndarray:
    """Which of ``spans`` the engine recorded."""
    return (spans["origin"] == "engine").to_numpy()
