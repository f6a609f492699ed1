"""The data model: dumps flattened into three DataFrames, samples, spans and events.

Every other part reads it (widget, snapshot, CLI, analysis, exports); it is
built by :mod:`..tables.build` and :mod:`.core_frames`; exporters are functions
of it (``export/``), never its methods. ``samples.index`` is the sample *row*
(position across the dumps given, as sample indices repeat); ``spans.index`` /
``events.index`` are stable ids. Times are epoch seconds; ``duration`` is NaN for open spans. A span
belongs to the attempt on its start record (``end_attempt`` keeps the end's);
``reward`` is NaN unless scalar (a dict reward stays in ``reward_detail``).
Span geometry (depths, display ends, lanes) lives in ``span_geometry``; the
``attr.<key>`` columns in ``attr_columns``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..tables.attr_columns import AttrTable
from ..tables.core_tables import CODES, CORE_SCHEMA, ORIGINS, VOCABULARY
from .attr_frames import event_attr_frame, span_attr_frame
from .engine_load import combine_engine_load, empty_engine_load

if TYPE_CHECKING:
    from .live_health import LiveHealth

__all__ = ["ORIGINS", "TraceFrames", "combine_frames"]


@dataclass
class TraceFrames:
    """The flattened view of one or more dumps.

    ``span_core`` / ``event_core`` hold every column except attributes, which
    live as typed columns in ``span_start_attrs`` / ``span_end_attrs`` /
    ``event_attrs`` (one row per core row, in order). :attr:`spans` /
    :attr:`events` join them on first access (and keep them): the timeline
    never needs them, so a widget opened on a big dump does not pay for it.
    ``failures`` lists the dumps that could not be read (path, reason).
    """

    samples: pd.DataFrame
    span_core: pd.DataFrame
    event_core: pd.DataFrame
    span_start_attrs: AttrTable
    span_end_attrs: AttrTable
    event_attrs: AttrTable
    segments: pd.DataFrame = field(default_factory=pd.DataFrame)
    paths: list[str] = field(default_factory=list)
    rollout_ids: list[int | None] = field(default_factory=list)
    warnings: Counter[str] = field(default_factory=Counter)
    t0: float = float("nan")
    t1: float = float("nan")
    failures: list[tuple[str, str]] = field(default_factory=list)
    #: Engine hosts' clock skews and requests no span made (when engine traces are joined).
    engine_skew: pd.DataFrame = field(default_factory=pd.DataFrame)
    engine_unmatched: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: The engines' scraped load over the frames' time (see ``frames.engine_load``).
    engine_load: pd.DataFrame = field(default_factory=empty_engine_load)
    #: Frames of a rollout read live (``load_live``): each sender's loss and health.
    live: LiveHealth | None = None
    _spans: pd.DataFrame | None = field(default=None, repr=False)
    _events: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def spans(self) -> pd.DataFrame:
        """One row per span (virtual PD spans last), with ``attr.<key>`` columns."""
        if self._spans is None:
            core = self.span_core
            attrs = span_attr_frame(self.span_start_attrs, self.span_end_attrs, core.index)
            self._spans = pd.concat([core, attrs], axis=1)
        return self._spans

    @property
    def events(self) -> pd.DataFrame:
        """One row per instant event and unmatched end, with ``attr.<key>`` columns."""
        if self._events is None:
            core = self.event_core
            self._events = pd.concat([core, event_attr_frame(self.event_attrs, core.index)],
                                     axis=1)
        return self._events

    def measured_spans(self) -> pd.DataFrame:
        """Span core rows that carry their own time: the one rule analyses, plots and
        exports share. These are the real spans plus the derived ``[P]``/``[D]`` spans
        of the attribute PD form (the only record of those phases); derived spans of
        the child-span form are skipped because the real ``sglang_pd_*`` spans they
        mirror are already counted."""
        core = self.span_core
        return core[~core["virtual"].to_numpy() | (core["pd_form"] == "attrs").to_numpy()]

    def span_attrs(self, indices: Any) -> tuple[list[dict | None], list[dict | None]]:
        """Start and end attribute dicts of the spans ``indices`` (``spans.index`` labels)."""
        positions = self.span_core.index.get_indexer(indices)
        return self.span_start_attrs.rows(positions), self.span_end_attrs.rows(positions)

    def span_attrs_json(self, indices: Any, max_chars: int) -> tuple[list[dict], list[dict]]:
        """Start and end attributes of the spans ``indices``, JSON-safe (strings cut to
        ``max_chars``): what leaves Python for the details panel and the snapshot."""
        positions = self.span_core.index.get_indexer(indices)
        return (self.span_start_attrs.json_rows(positions, max_chars),
                self.span_end_attrs.json_rows(positions, max_chars))

    def event_attrs_json(self, indices: Any, max_chars: int) -> list[dict]:
        """Attributes of the events ``indices``, JSON-safe (strings cut to ``max_chars``)."""
        return self.event_attrs.json_rows(self.event_core.index.get_indexer(indices), max_chars)

    def with_offsets(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Copy of ``frame`` with ``<col>_rel`` (seconds since ``t0``) for its time columns."""
        out = frame.copy()
        for column in ("start", "end", "display_end", "ts"):
            if column in out.columns:
                out[f"{column}_rel"] = out[column] - self.t0
        return out

    def summary(self) -> str:
        """A short human-readable account (what the README's main job prints)."""
        spans = self.span_core[~self.span_core["virtual"]]
        lines = [
            f"{len(self.samples)} samples ({int(self.samples['traced'].sum())} traced) "
            f"from {len(self.paths)} dump(s), rollout ids {self.rollout_ids}",
            f"{len(spans)} spans ({int((spans['state'] == 'open').sum())} open), "
            f"{int(self.span_core['virtual'].sum())} virtual PD spans, "
            f"{int((self.event_core['kind'] == 'instant').sum())} instant events, "
            f"{int((self.event_core['kind'] == 'unmatched_end').sum())} unmatched ends",
        ]
        if self.t1 == self.t1:
            lines.append(f"wall time {self.t1 - self.t0:.1f} s")
        if len(spans):
            by_name = spans.groupby("name", observed=True)["duration"].agg(["count", "sum"])
            by_name = by_name.sort_values("sum", ascending=False).head(8)
            lines.append("time by span name:")
            lines += [f"  {name:<28} {int(r['count']):>7} spans {r['sum']:>12.1f} s"
                      for name, r in by_name.iterrows()]
        if self.warnings:
            lines.append("warnings: " + ", ".join(f"{k}={v}" for k, v in self.warnings.items()))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"TraceFrames(samples={len(self.samples)}, spans={len(self.span_core)}, "
                f"events={len(self.event_core)}, dumps={len(self.paths)})")


def combine_frames(parts: list[TraceFrames]) -> TraceFrames:
    """One set of frames from several (e.g. two rollouts to compare), ids renumbered."""
    if len(parts) == 1:
        return parts[0]
    samples, spans, events, segments = [], [], [], []
    row_offset = span_offset = event_offset = dump_offset = 0
    warnings: Counter[str] = Counter()
    for part in parts:
        samples.append(part.samples.assign(dump=part.samples["dump"] + dump_offset)
                       .set_axis(part.samples.index + row_offset))
        core = part.span_core
        spans.append(core.assign(
            sample_row=core["sample_row"] + row_offset,
            parent_index=np.where(core["parent_index"] >= 0,
                                  core["parent_index"] + span_offset, -1),
        ).set_axis(core.index + span_offset))
        events.append(part.event_core.assign(
            sample_row=part.event_core["sample_row"] + row_offset,
            parent_index=np.where(part.event_core["parent_index"] >= 0,
                                  part.event_core["parent_index"] + span_offset, -1),
        ).set_axis(part.event_core.index + event_offset))
        segments.append(part.segments.assign(span_index=part.segments["span_index"]
                                             + span_offset))
        warnings.update(part.warnings)
        row_offset += len(part.samples)
        span_offset += len(core)
        event_offset += len(part.event_core)
        dump_offset += max(len(part.paths), 1)
    combined_samples = pd.concat(samples)
    combined_samples.index.name = "row"
    t0s = [p.t0 for p in parts if p.t0 == p.t0]
    t1s = [p.t1 for p in parts if p.t1 == p.t1]
    return TraceFrames(
        samples=_recategorize(combined_samples),
        span_core=_recategorize(pd.concat(spans)),
        event_core=_recategorize(pd.concat(events)),
        span_start_attrs=AttrTable.concat([p.span_start_attrs for p in parts]),
        span_end_attrs=AttrTable.concat([p.span_end_attrs for p in parts]),
        event_attrs=AttrTable.concat([p.event_attrs for p in parts]),
        segments=_recategorize(pd.concat(segments, ignore_index=True)),
        paths=[path for p in parts for path in (p.paths or ["<memory>"])],
        rollout_ids=[r for p in parts for r in (p.rollout_ids or [None])],
        warnings=warnings,
        t0=min(t0s) if t0s else float("nan"),
        t1=max(t1s) if t1s else float("nan"),
        failures=[failure for p in parts for failure in p.failures],
        engine_skew=_concat_small([p.engine_skew for p in parts]),
        engine_unmatched=_concat_small([p.engine_unmatched for p in parts]),
        engine_load=combine_engine_load([p.engine_load for p in parts]),
    )


def _concat_small(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows of the non-empty ``tables`` (per-dump reports), in order."""
    kept = [table for table in tables if len(table)]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


def _recategorize(frame: pd.DataFrame) -> pd.DataFrame:
    """Concatenating categoricals with different categories gives objects; restore them
    (the names found as categories, a vocabulary as its schema states it)."""
    for column in frame.columns:
        spec = _CATEGORICAL.get(column)
        if spec is not None and frame[column].dtype != "category":
            frame[column] = frame[column].astype(
                pd.CategoricalDtype(list(spec.vocabulary)) if spec.kind == VOCABULARY
                else "category")
    return frame


#: The categorical columns of the core tables by name (a name has one kind in all of them).
_CATEGORICAL = {column.name: column for table in CORE_SCHEMA.values() for column in table
                if column.kind in (CODES, VOCABULARY)}
