"""The data model: dumps flattened into the core Arrow tables, and their pandas views.

Every other part reads it (widget, snapshot, CLI, analysis, exports); it is
built from the tables of :mod:`..tables.build` (or a worker's files, or a run
dataset's), which :data:`..tables.core_tables.CORE_SCHEMA` defines, the only
statement of the frames' columns. Exporters are functions of it (``export/``),
never its methods. ``samples.index`` is the sample *row* (position across the
dumps given, as sample indices repeat); ``spans.index`` / ``events.index`` are
stable ids. Times are epoch seconds; ``duration`` is NaN for open spans. A span
belongs to the attempt on its start record (``end_attempt`` keeps the end's);
``reward`` is NaN unless scalar (a dict reward stays in ``reward_detail``).
Span geometry (depths, display ends, lanes) lives in ``span_geometry``; the
``attr.<key>`` columns in ``attr_columns``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..tables.attr_columns import AttrTable
from ..tables.build import cyclic_gc_paused
from ..tables.core_concat import combined_tables
from ..tables.core_tables import CORE_TABLES, ORIGINS, CoreTables, FrameTables
from ..values import plain_line
from ..vocabularies import INSTANT_EVENT, UNMATCHED_END
from .attr_frames import event_attr_frame, span_attr_frame
from .core_frames import decode_checked
from .engine_load import combine_engine_load, empty_engine_load
from .frame_encoding import encode_table
from .view_memory import Estimate, attr_view_bytes, check_room, table_view_bytes

if TYPE_CHECKING:
    from .live_health import LiveHealth

__all__ = ["ORIGINS", "PEER_COLUMNS", "TraceFrames", "combine_frames", "frames_from_tables",
           "no_peers"]


#: The columns of ``TraceFrames.group_peers``, one row per sample of a dump read in part
#: that the read left out: its ``dump`` (position in ``paths``), ``group_index`` (Int64),
#: ``status`` (text, None when it has
#: none), ``reward`` (NaN unless scalar) and ``reward_text`` (a dict reward's JSON text
#: where ``reward`` is NaN, else None).
PEER_COLUMNS = ("dump", "group_index", "status", "reward", "reward_text")


def no_peers() -> pd.DataFrame:
    """``group_peers`` of frames that hold every sample of their dumps."""
    return pd.DataFrame({"dump": np.zeros(0, dtype=np.int64),
                         "group_index": pd.array([], dtype="Int64"),
                         "status": np.zeros(0, dtype=object),
                         "reward": np.zeros(0), "reward_text": np.zeros(0, dtype=object)})


class _Views:
    """The pandas views of frames, each made on first use and kept with the very objects
    it was made of, so that it is made again when one of them is replaced."""

    def __init__(self, made: dict[str, tuple[tuple[Any, ...], pd.DataFrame]] | None = None
                 ) -> None:
        self._lock = threading.RLock()  # a view is made once, whichever thread asks
        self._made = made or {}

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return (_Views, ())  # frames pickled or copied make their views again

    def kept(self, sources: dict[str, tuple[Any, ...]]) -> _Views:
        """The views made of exactly ``sources`` (view name: what it is made of), for
        frames that ``dataclasses.replace`` made: they keep what they share."""
        with self._lock:
            return _Views({name: (made, view) for name, (made, view) in self._made.items()
                           if _same(made, sources[name])})

    def get(self, name: str, sources: tuple[Any, ...], make: Callable[[], pd.DataFrame],
            estimate: Estimate) -> pd.DataFrame:
        """The view ``name``, made by ``make`` unless kept; MemoryError, before it is
        made, when its ``estimate`` does not fit in the memory available."""
        with self._lock:
            kept = self._made.get(name)
            if kept is not None and _same(kept[0], sources):
                return kept[1]
            check_room(f"frames.{name}", estimate)
            with cyclic_gc_paused():  # a view's rows hold no reference cycles
                view = make()
            self._made[name] = (sources, view)
            return view


def _same(made: tuple[Any, ...], sources: tuple[Any, ...]) -> bool:
    return all(a is b for a, b in zip(made, sources, strict=True))


@dataclass
class TraceFrames:
    """The flattened view of one or more dumps.

    Its data are the core Arrow tables, ``tables`` (:class:`CoreTables`: ``samples``,
    ``span_core``, ``event_core``, ``segments``, each with exactly its
    ``CORE_SCHEMA`` columns, checked when made), and the attribute tables
    ``span_start_attrs`` / ``span_end_attrs`` / ``event_attrs`` (typed columns, one
    row per core row, in order). What users read are pandas views of them, each
    made on first access from the Arrow columns (numbers in place, every other column
    made once) and kept: :attr:`samples`, :attr:`span_core`, :attr:`event_core`,
    :attr:`segments`, and :attr:`spans` / :attr:`events`, the core with the
    ``attr.<key>`` columns, which the timeline never needs, so a widget opened on
    a big dump does not pay for them. Code that wants Arrow (the run dataset
    writer, the wire) reads ``tables``. ``failures`` lists the dumps that could not
    be read (path, reason). ``group_peers`` holds the rewards of the samples a partial
    read of a dataset left out, where their groups have a member here (see
    :data:`PEER_COLUMNS`): a group's rewards are those of all its members in the dump.
    """

    tables: CoreTables
    span_start_attrs: AttrTable
    span_end_attrs: AttrTable
    event_attrs: AttrTable
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
    #: Engine-store files the join skipped as unreadable: path to why (counted in
    #: ``warnings["engine_file_unreadable"]``).
    engine_unreadable: dict[str, str] = field(default_factory=dict)
    #: Frames of a rollout read live (``load_live``): each sender's loss and health.
    live: LiveHealth | None = None
    #: Rewards of the samples left out of these frames' groups (``PEER_COLUMNS``).
    group_peers: pd.DataFrame = field(default_factory=no_peers)
    _views: _Views = field(default_factory=_Views, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._views = self._views.kept(self._sources())

    def _sources(self) -> dict[str, tuple[Any, ...]]:
        """What each view is made of."""
        tables = self.tables
        return {"samples": (tables.samples,), "span_core": (tables.span_core,),
                "event_core": (tables.event_core,), "segments": (tables.segments,),
                "spans": (tables.span_core, self.span_start_attrs, self.span_end_attrs),
                "events": (tables.event_core, self.event_attrs)}

    def _core(self, name: str) -> pd.DataFrame:
        table = getattr(self.tables, name)
        return self._views.get(name, (table,), lambda: decode_checked(table, name),
                               lambda text: table_view_bytes(table, name, text))

    @property
    def samples(self) -> pd.DataFrame:
        """One row per sample, index ``row``."""
        return self._core("samples")

    @property
    def span_core(self) -> pd.DataFrame:
        """One row per span (virtual PD spans last), without attributes."""
        return self._core("span_core")

    @property
    def event_core(self) -> pd.DataFrame:
        """One row per instant event and unmatched end, without attributes."""
        return self._core("event_core")

    @property
    def segments(self) -> pd.DataFrame:
        """The phases of virtual PD spans (``span_index`` their span)."""
        return self._core("segments")

    @property
    def spans(self) -> pd.DataFrame:
        """One row per span (virtual PD spans last), with ``attr.<key>`` columns."""
        core = self.span_core  # made, or refused, first: the estimate below is the rest

        def make() -> pd.DataFrame:
            attrs = span_attr_frame(self.span_start_attrs, self.span_end_attrs, core.index)
            return pd.concat([core, attrs], axis=1)

        def estimate(look_at_text: bool) -> int:
            return (attr_view_bytes(self.span_start_attrs, look_at_text)
                    + attr_view_bytes(self.span_end_attrs, look_at_text))
        return self._views.get("spans", self._sources()["spans"], make, estimate)

    @property
    def events(self) -> pd.DataFrame:
        """One row per instant event and unmatched end, with ``attr.<key>`` columns."""
        core = self.event_core  # made, or refused, first: the estimate below is the rest

        def make() -> pd.DataFrame:
            return pd.concat([core, event_attr_frame(self.event_attrs, core.index)], axis=1)
        return self._views.get("events", self._sources()["events"], make,
                               lambda text: attr_view_bytes(self.event_attrs, text))

    def forget_views(self) -> None:
        """Drop the pandas views made so far (each is made again when next read): for
        frames kept only to be combined again, such as a followed folder's loads, while
        the frames shown, their combination, hold views of their own."""
        self._views = _Views()

    def with_views(self, **views: pd.DataFrame) -> TraceFrames:
        """These frames with some core views replaced by changed copies (``samples``,
        ``span_core``, ``event_core``, ``segments``), e.g. rewards scored another way:
        ``frames.with_views(samples=frames.samples.assign(reward=...))``. Each must have
        the rows of the view it replaces, in order, and its columns of their kinds; it
        is encoded to Arrow and checked as every table of frames is (ValueError naming
        the table and column otherwise). Views of what did not change are kept."""
        unknown = sorted(set(views) - set(CORE_TABLES))
        if unknown:
            raise ValueError(f"with_views takes {', '.join(CORE_TABLES)}, not {', '.join(unknown)}")
        tables = {}
        for name, view in views.items():
            if not view.index.equals(getattr(self, name).index):
                raise ValueError(f"{name}: a changed view must keep the rows of the one it "
                                 "replaces, in order (the other tables refer to them)")
            tables[name] = encode_table(view, name)
        core = self.tables
        return replace(self, tables=CoreTables(**{name: tables.get(name, getattr(core, name))
                                                  for name in CORE_TABLES}))

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
        """A short human-readable account (what the README's main job prints): one line
        per fact, the dump's span names among them written as :func:`plain_line` text."""
        spans = self.span_core[~self.span_core["virtual"]]
        lines = [
            f"{len(self.samples)} samples ({int(self.samples['traced'].sum())} traced) "
            f"from {len(self.paths)} dump(s), rollout ids {self.rollout_ids}",
            f"{len(spans)} spans ({int((spans['state'] == 'open').sum())} open), "
            f"{int(self.span_core['virtual'].sum())} virtual PD spans, "
            f"{int((self.event_core['kind'] == INSTANT_EVENT).sum())} instant events, "
            f"{int((self.event_core['kind'] == UNMATCHED_END).sum())} unmatched ends",
        ]
        if self.t1 == self.t1:
            lines.append(f"wall time {self.t1 - self.t0:.1f} s")
        if len(spans):
            by_name = spans.groupby("name", observed=True)["duration"].agg(["count", "sum"])
            by_name = by_name.sort_values("sum", ascending=False).head(8)
            lines.append("time by span name:")
            lines += [f"  {plain_line(str(name)):<28} {int(row['count']):>7} spans "
                      f"{row['sum']:>12.1f} s" for name, row in by_name.iterrows()]
        if self.warnings:
            lines.append("warnings: " + ", ".join(f"{k}={v}" for k, v in self.warnings.items()))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"TraceFrames(samples={self.tables.samples.num_rows}, "
                f"spans={self.tables.span_core.num_rows}, "
                f"events={self.tables.event_core.num_rows}, dumps={len(self.paths)})")


def frames_from_tables(tables: FrameTables) -> TraceFrames:
    """The frames of flattened ``tables`` (their core tables checked, none decoded)."""
    return TraceFrames(
        tables=CoreTables.of(tables),
        span_start_attrs=tables.span_start_attrs,
        span_end_attrs=tables.span_end_attrs,
        event_attrs=tables.event_attrs,
        paths=tables.paths,
        rollout_ids=tables.rollout_ids,
        warnings=tables.warnings,
        t0=tables.t0,
        t1=tables.t1,
    )


def combine_frames(parts: list[TraceFrames]) -> TraceFrames:
    """One set of frames from several (e.g. two rollouts to compare), ids renumbered,
    put together in Arrow (``core_concat.combined_tables``); no view is made."""
    if len(parts) == 1:
        return parts[0]
    warnings: Counter[str] = Counter()
    for part in parts:
        warnings.update(part.warnings)
    t0s = [p.t0 for p in parts if p.t0 == p.t0]
    t1s = [p.t1 for p in parts if p.t1 == p.t1]
    return TraceFrames(
        tables=combined_tables([p.tables for p in parts], [max(len(p.paths), 1) for p in parts]),
        span_start_attrs=AttrTable.concat([p.span_start_attrs for p in parts], warnings),
        span_end_attrs=AttrTable.concat([p.span_end_attrs for p in parts], warnings),
        event_attrs=AttrTable.concat([p.event_attrs for p in parts], warnings),
        paths=[path for p in parts for path in (p.paths or ["<memory>"])],
        rollout_ids=[r for p in parts for r in (p.rollout_ids or [None])],
        warnings=warnings,
        t0=min(t0s) if t0s else float("nan"),
        t1=max(t1s) if t1s else float("nan"),
        failures=[failure for p in parts for failure in p.failures],
        engine_skew=_concat_small([p.engine_skew for p in parts]),
        engine_unmatched=_concat_small([p.engine_unmatched for p in parts]),
        engine_load=combine_engine_load([p.engine_load for p in parts]),
        engine_unreadable={path: why for p in parts for path, why in p.engine_unreadable.items()},
        group_peers=_combined_peers(parts),
    )


def _combined_peers(parts: list[TraceFrames]) -> pd.DataFrame:
    """The parts' ``group_peers``, each dump position moved past the dumps before it."""
    peers, first = [], 0
    for part in parts:
        if len(part.group_peers):
            peers.append(part.group_peers.assign(dump=part.group_peers["dump"] + first))
        first += max(len(part.paths), 1)
    return pd.concat(peers, ignore_index=True) if peers else no_peers()


def _concat_small(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows of the non-empty ``tables`` (per-dump reports), in order."""
    kept = [table for table in tables if len(table)]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()
