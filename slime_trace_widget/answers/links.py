"""Links between rows: which spans and events of a trace point at each other.

Three kinds (docs/trace-format.md says how each is recorded):

* ``group``: copies of one group span (same name and times) in different samples
  of one dump and group; each member points at one *hub* (the lowest span
  label), :func:`group_members` expands them.
* ``attempt``: an ``attempt_start`` event points at the sample's previous one, or
  for the first at the earliest span of the attempt it follows.
* ``remote``: a span exported to another process points at the ``trace_import``
  event the importing side recorded under it (merged back with ``merge_trace``).

Endpoints are ``span_core`` / ``event_core`` labels (``from_kind``/``to_kind``
say which table). Everything is whole-column pandas work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..schema import ATTEMPT_START_EVENT, TRACE_IMPORT_EVENT
from ..vocabularies import INSTANT_EVENT, LINK_KINDS

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

ENDPOINT_KINDS = ["span", "event"]
COLUMNS = ["kind", "from_kind", "from_index", "to_kind", "to_index"]


def links(frames: TraceFrames) -> pd.DataFrame:
    """All links of ``frames``: columns ``kind``, ``from_kind``, ``from_index``,
    ``to_kind``, ``to_index`` (kinds categorical; indices int64 labels)."""
    parts = [
        _frame("group", "span", *_group_pairs(frames), "span"),
        _frame("attempt", "event", *_attempt_pairs(frames, "event"), "event"),
        _frame("attempt", "event", *_attempt_pairs(frames, "span"), "span"),
        _frame("remote", "span", *_remote_pairs(frames), "event"),
    ]
    return pd.concat(parts, ignore_index=True)


def group_members(table: pd.DataFrame) -> pd.DataFrame:
    """The group links of ``table`` expanded: one row per (member span, hub span),
    the hub included as its own member, so members of one group share ``hub``."""
    group = table[table["kind"] == "group"]
    hubs = group["to_index"].unique()
    members = np.concatenate([group["from_index"].to_numpy(), hubs])
    return pd.DataFrame({"span": members, "hub": np.concatenate(
        [group["to_index"].to_numpy(), hubs])}).sort_values(["hub", "span"], ignore_index=True)


def _frame(kind: str, from_kind: str, sources: np.ndarray, targets: np.ndarray,
           to_kind: str) -> pd.DataFrame:
    n = len(sources)
    return pd.DataFrame({
        "kind": pd.Categorical.from_codes(np.full(n, LINK_KINDS.index(kind)), LINK_KINDS),
        "from_kind": pd.Categorical.from_codes(np.full(n, ENDPOINT_KINDS.index(from_kind)),
                                               ENDPOINT_KINDS),
        "from_index": np.asarray(sources, dtype=np.int64),
        "to_kind": pd.Categorical.from_codes(np.full(n, ENDPOINT_KINDS.index(to_kind)),
                                             ENDPOINT_KINDS),
        "to_index": np.asarray(targets, dtype=np.int64),
    })


def _group_pairs(frames: TraceFrames) -> tuple[np.ndarray, np.ndarray]:
    """(member, hub) span labels of spans copied across a group's samples.

    Only closed real spans: an open span has no end to match on, and derived
    ``[P]``/``[D]`` or ``sglang_pd_*`` spans belong to one request. A sample
    holding several equal copies counts once (its first)."""
    core = frames.span_core
    samples = frames.samples
    rows = core["sample_row"].to_numpy()
    group = samples["group_index"].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
    keep = (~core["virtual"].to_numpy() & ~core["pd_detail"].to_numpy()
            & (core["state"] == "closed").to_numpy() & ~np.isnan(group))
    if not keep.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    table = pd.DataFrame({
        "dump": samples["dump"].to_numpy()[rows][keep],
        "group": group[keep],
        "name": np.asarray(core["name"].array.codes)[keep],  # type: ignore[union-attr]
        "start": core["start"].to_numpy()[keep],
        "end": core["end"].to_numpy()[keep],
        "row": rows[keep],
        "label": core.index.to_numpy()[keep],
    })
    # One numbering of the copies (a hash of the five keys, done once), then numpy:
    # the keys are hashed once, not once per drop of duplicates and per transform.
    copy = table.groupby(["dump", "group", "name", "start", "end"], sort=False).ngroup()
    copy = copy.to_numpy(dtype=np.float64, na_value=np.nan)
    rows, labels = table["row"].to_numpy(), table["label"].to_numpy()
    known = ~np.isnan(copy)  # a key pandas groups as missing: no copy of anything
    copy, rows, labels = copy[known].astype(np.int64), rows[known], labels[known]
    if not len(copy):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    first = ~pd.Series(copy * (int(rows.max()) + 1) + rows).duplicated().to_numpy()
    copy, labels = copy[first], labels[first]  # a sample's first copy only
    size = np.bincount(copy)
    hub = np.full(len(size), np.iinfo(np.int64).max)
    np.minimum.at(hub, copy, labels)
    member = (size[copy] > 1) & (labels != hub[copy])
    return labels[member], hub[copy][member]


def _attempt_pairs(frames: TraceFrames, target: str) -> tuple[np.ndarray, np.ndarray]:
    """``attempt_start`` events and what came before them: the sample's previous
    ``attempt_start`` (``target="event"``), or for a sample's first one the earliest
    real span of the attempt it follows (``target="span"``)."""
    events = frames.event_core
    mask = ((events["name"] == ATTEMPT_START_EVENT) & (events["kind"] == INSTANT_EVENT)).to_numpy()
    starts = pd.DataFrame({
        "row": events["sample_row"].to_numpy()[mask],
        "ts": events["ts"].to_numpy()[mask],
        "attempt": events["attempt"].to_numpy()[mask].astype(np.int64),
        "label": events.index.to_numpy()[mask],
    }).sort_values(["row", "ts", "label"], kind="stable")
    first = ~starts["row"].duplicated().to_numpy()
    if target == "event":
        previous = starts["label"].shift(1).to_numpy()
        return (starts["label"].to_numpy()[~first],
                previous[~first].astype(np.int64))
    heads = starts[first].assign(attempt=lambda f: f["attempt"] - 1)
    core = frames.span_core
    span_rows = core["sample_row"].to_numpy()
    # Only samples that retried have a head to match, so only their spans are
    # sorted, not every span of the run.
    real = ~core["virtual"].to_numpy() & np.isin(span_rows, heads["row"].to_numpy())
    earliest = (pd.DataFrame({"row": span_rows[real],
                              "attempt": core["attempt"].to_numpy()[real].astype(np.int64),
                              "start": core["start"].to_numpy()[real],
                              "span": core.index.to_numpy()[real]})
                .sort_values(["start", "span"], kind="stable")
                .drop_duplicates(["row", "attempt"]))
    found = heads.merge(earliest, on=["row", "attempt"], how="inner")
    return found["label"].to_numpy(), found["span"].to_numpy()


def _remote_pairs(frames: TraceFrames) -> tuple[np.ndarray, np.ndarray]:
    """(exported span, ``trace_import`` event) pairs: the event's parent is the span."""
    events = frames.event_core
    mask = ((events["name"] == TRACE_IMPORT_EVENT).to_numpy()
            & (events["parent_index"].to_numpy() >= 0))
    return (frames.span_core.index.to_numpy()[events["parent_index"].to_numpy()[mask]],
            events.index.to_numpy()[mask])
