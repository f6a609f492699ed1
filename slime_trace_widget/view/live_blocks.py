"""The live view's state: one encoded block per sample, replaced whole when its records move.

A rollout in progress grows one sample at a time, so the kernel keeps, per
sample, the records that arrived for it and its part of the payload (its
sample columns, spans, PD segments and events, encoded by ``payload.encode``
against one fixed ``t0``). When records arrive, only the samples they belong to
are flattened and encoded again (``build_frames`` over those samples' records),
so an update costs in proportion to the samples that moved, not to the rollout.

A *delta* (``docs/live-view.md``) carries the blocks of the samples changed
since a sequence number, each whole: the renderer replaces a sample's block, so
applying a block twice, or a delta that starts before what a view has, is
harmless, and a view that missed deltas asks for everything since its own
number. Inside a block, parent and owner indices count from the block's first
span; sample positions are absolute and never move (new samples are appended).
Names, statuses, sources and rollouts travel as whole tables (they are small)
and every block uses their codes.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..frames.model import TraceFrames
from .contract import (
    CODE_TABLES,
    COLUMN_DTYPES,
    ITEM_KINDS,
    SAMPLE_STRINGS,
    column_bytes,
    column_values,
)
from .payload import OVERFLOW_ENTRIES, encode, largest_code

SAMPLE_COLUMNS = [name for name in COLUMN_DTYPES if name.startswith("smp_")]
_INTEGER = {name for name, dtype in COLUMN_DTYPES.items() if dtype[0] in "ui"}
#: Item columns per kind, and the column that says which sample (or span) owns a row.
ITEM_COLUMNS = {kind: [name for name in COLUMN_DTYPES if name.startswith(item["prefix"])]
                for kind, item in ITEM_KINDS.items()}
#: Index columns that point at spans: block-relative in a delta (-1 stays -1).
SPAN_POINTERS = tuple(name for item in ITEM_KINDS.values() for name in item["pointers"])
_CODE_COLUMNS = {column: table for table, columns in CODE_TABLES.items() for column in columns}
#: The per-sample strings a block takes from its payload: all but its ``row``, which
#: is the block's place in the view.
_SAMPLE_STRINGS = tuple(field for field in SAMPLE_STRINGS if field != "row")


@dataclass
class Block:
    """One sample's part of the payload (item columns block-relative, codes global)."""

    sample: dict[str, float]
    strings: dict[str, Any]
    items: dict[str, np.ndarray]

    def count(self, kind: str) -> int:
        return len(self.items[ITEM_COLUMNS[kind][0]])


@dataclass
class LiveDelta:
    """A delta message: JSON-safe ``meta`` and column bytes (see ``docs/live-view.md``)."""

    meta: dict[str, Any]
    buffers: dict[str, bytes]

    def as_message(self) -> tuple[dict[str, Any], list[bytes]]:
        """Content and binary buffers for a widget's custom message."""
        names = list(self.buffers)
        return ({**self.meta, "buffer_names": names}, [self.buffers[n] for n in names])

    def as_json(self) -> dict[str, Any]:
        """The delta with each buffer as base64 text (the served page's form)."""
        return {**self.meta, "buffers": {name: base64.b64encode(data).decode("ascii")
                                         for name, data in self.buffers.items()}}


class _Table:
    """A table of strings that only grows, so codes already sent stay valid. Codes go
    up to ``last`` (the largest its columns hold): once the values before it are
    taken, every new value shares one ``overflow`` entry, so a code never wraps round
    to name another value."""

    def __init__(self, last: int, overflow: str) -> None:
        self.values: list[str] = []
        self._codes: dict[str, int] = {}
        self.last = last
        self.overflow = overflow

    def code(self, value: str) -> int:
        found = self._codes.get(value)
        if found is not None:
            return found
        if len(self.values) >= self.last:  # only the overflow entry's code is left
            value = self.overflow
            found = self._codes.get(value)
            if found is not None:
                return found
        found = self._codes[value] = len(self.values)
        self.values.append(value)
        return found

    def lookup(self, values: list[str]) -> np.ndarray:
        """Global codes of a batch's table (index = the batch's code)."""
        return np.array([self.code(v) for v in values] + [0], dtype=np.int64)


def code_tables() -> dict[str, _Table]:
    """Empty tables of :data:`CODE_TABLES`, each capped at the largest code its columns'
    type holds, past which values share the payload's overflow entry."""
    tables = {}
    for name, columns in CODE_TABLES.items():
        last = min(largest_code(column) for column in columns)
        tables[name] = _Table(last, OVERFLOW_ENTRIES.get(name, f"<more {name}>"))
    return tables


class LiveBlocks:
    """Per-sample blocks by sample key, and which changed when.

    ``replace`` takes the frames of the samples that moved, built by whoever holds
    their records (a feed's ``frames``: the collector's ``LiveReader``), in
    the order of their keys. ``epoch`` tells one rollout's blocks from the next
    one's (a reader that moves on to another rollout starts over)."""

    def __init__(self, *, t0: float | None = None, title: str = "live rollout") -> None:
        self.t0 = t0
        self.title = title
        self.seq = 0
        self.epoch = uuid.uuid4().hex[:12]
        self._position: dict[str, int] = {}
        self._keys: list[str] = []
        self._blocks: list[Block | None] = []
        self._changed_at = np.zeros(0, dtype=np.int64)
        self._tables = code_tables()

    @property
    def n_samples(self) -> int:
        return len(self._keys)

    def keys(self) -> list[str]:
        """Every sample's key, by position."""
        return list(self._keys)

    def trace_ids(self) -> set[str]:
        """The trace ids of the samples shown (as recorded)."""
        return {str(b.strings["trace_id"]) for b in self._blocks
                if b is not None and b.strings["trace_id"] is not None}

    def block_count(self, position: int, kind: str) -> int:
        """Rows of ``kind`` ("span", "seg", "ev") in the block at ``position``."""
        block = self._blocks[position]
        return 0 if block is None else block.count(kind)

    def replace(self, keys: list[str], frames: TraceFrames) -> list[int]:
        """Encode ``frames`` (sample row i is the sample ``keys[i]``) and put each
        sample's block in place; new keys get the next positions. Returns the
        positions replaced."""
        if len(frames.samples) != len(keys):
            raise ValueError(f"live frames hold {len(frames.samples)} samples "
                             f"for {len(keys)} keys")
        if not keys:
            return []
        if self.t0 is None and frames.t0 == frames.t0:
            self.t0 = float(frames.t0)
        payload = encode(frames, t0=self.t0 or 0.0, title=self.title, summaries=False).payload
        positions = []
        for key in keys:
            position = self._position.get(key)
            if position is None:
                position = self._position[key] = len(self._keys)
                self._keys.append(key)
                self._blocks.append(None)
            positions.append(position)
        self.seq += 1
        for position, block in zip(positions, split_blocks(payload, self._tables), strict=True):
            block.strings["row"] = position
            for column in ("span_sample", "ev_sample"):
                block.items[column] = np.full(len(block.items[column]), position, dtype=np.int64)
            self._blocks[position] = block
        if len(self._changed_at) < len(self._blocks):
            grown = np.zeros(max(len(self._blocks), 2 * len(self._changed_at)), dtype=np.int64)
            grown[:len(self._changed_at)] = self._changed_at
            self._changed_at = grown
        self._changed_at[positions] = self.seq
        return positions

    # ------------------------------------------------------------------ deltas

    def changed_since(self, seq: int) -> np.ndarray:
        """Positions whose block changed after ``seq``, ascending."""
        return np.flatnonzero(self._changed_at[:self.n_samples] > seq)

    def delta_since(self, seq: int, *, now: float, extra: dict[str, Any] | None = None
                    ) -> LiveDelta:
        """The blocks changed after ``seq`` (all of them for 0), ``now`` relative to ``t0``."""
        positions = self.changed_since(seq)
        blocks = [self._blocks[p] for p in positions]
        buffers: dict[str, bytes] = {}
        for name in SAMPLE_COLUMNS:
            values = np.array([b.sample[name] for b in blocks if b is not None])
            buffers[name] = column_bytes(name, values)
        for names in ITEM_COLUMNS.values():
            for name in names:
                parts = [b.items[name] for b in blocks if b is not None]
                buffers[name] = column_bytes(name, np.concatenate(parts) if parts else np.zeros(0))
        t0 = self.t0 or 0.0
        meta = {
            "type": "live_delta",
            "epoch": self.epoch,
            "since": int(seq),
            "seq": int(self.seq),
            "n_samples": self.n_samples,
            "positions": positions.tolist(),
            "counts": {kind: [b.count(kind) for b in blocks if b is not None]
                       for kind in ITEM_COLUMNS},
            "samples": {field: [b.strings[field] for b in blocks if b is not None]
                        for field in SAMPLE_STRINGS},
            **{name: list(self._tables[name].values) for name in CODE_TABLES},
            "t0": t0,
            "now": now - t0,
            "title": self.title,
            **(extra or {}),
        }
        return LiveDelta(meta, buffers)


def split_blocks(payload: dict[str, Any], tables: dict[str, _Table]) -> list[Block]:
    """Cut a payload into per-sample blocks: codes into ``tables``, pointers block-relative."""
    meta = payload["meta"]
    columns = {name: column_values(name, data) for name, data in payload["buffers"].items()}
    lookups = {column: tables[table].lookup(meta[table])
               for column, table in _CODE_COLUMNS.items()}
    n_samples = len(columns["smp_start"])
    span_bounds = np.searchsorted(columns["span_sample"], np.arange(n_samples + 1))
    ev_bounds = np.searchsorted(columns["ev_sample"], np.arange(n_samples + 1))
    seg_bounds = np.searchsorted(columns["seg_span"], span_bounds)
    bounds = {"span": span_bounds, "ev": ev_bounds, "seg": seg_bounds}
    blocks = []
    for i in range(n_samples):
        sample = {}
        for name in SAMPLE_COLUMNS:
            value = columns[name][i]
            sample[name] = float(lookups[name][value] if name in lookups else value)
        items: dict[str, np.ndarray] = {}
        for kind, names in ITEM_COLUMNS.items():
            lo, hi = bounds[kind][i], bounds[kind][i + 1]
            for name in names:
                part = columns[name][lo:hi].astype(np.int64 if name in _INTEGER else np.float64)
                if name in _CODE_COLUMNS:
                    part = lookups[name][part]
                elif name in SPAN_POINTERS:
                    part = np.where(part >= 0, part - span_bounds[i], -1)
                items[name] = part
        strings = {field: meta["samples"][field][i] for field in _SAMPLE_STRINGS}
        blocks.append(Block(sample, strings, items))
    return blocks
