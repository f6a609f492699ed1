"""Where a generation's time went inside the engine: queue, prefill, decode, PD, retractions.

Reads the engine spans the join attached (``origin == "engine"``; see
:mod:`slime_trace_widget.sources.engine.join`). The phases of a sample are a partition
of wall time: every instant in which some engine slice of the sample runs (in the
dump's clock, after each host's skew, and within the span its request hangs under)
counts once, in one phase. The rules, in order:

1. **Nesting.** A slice's own time is its interval less its child slices': a child's
   time is the child's, whatever its phase. After a retraction SGLang nests the
   request's second wait and prefill inside its first ``decode_forward``: they count as
   queue and prefill, not decode; and the wait after the ``retract`` event, which has
   no slice (from the event to the next child slice), counts as queue.
2. **Priority.** Where own times of several slices overlap (the two halves of a PD
   request, the tokenizer beside the scheduler), the instant counts in the first phase
   of :data:`PRIORITY` (``vocabularies.json``'s ``engine_phase_priority``, which the
   widget's panel and engine band read too: prefill first, then decode, queue and pd,
   other last). So the work is counted where it is done, a wait where its cause is:
   while the prefill server queues or prefills, the decode server's waiting for the KV
   cache (``decode_transferred``) adds nothing; PD counts what only the PD handshake
   and the KV transfer take.
3. **Request spans** and KV sender spans (``sglang kv sender``, drawn under a prefill
   half) hold slices and count no time of their own; a sender's slices (Mooncake's
   ``mooncake_send``...) are PD, inside the prefill half's transfer. An instant of a
   request that none of its slices covers is in no phase (the widget's engine band,
   which draws this partition, leaves it empty).

So a sample's phases add up to at most the wall time its generation spans cover.
``decode_waiting`` (prefill done, waiting for a decode batch) is queueing with or
without PD. *Retracted* seconds are the work the slice that held the request had done
when the engine put it back (its ``retract`` event), which was done again later: they
are no phase, and are not part of the partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..sources.engine.join import KV_SENDER_SPAN, REQUEST_SPAN_NAMES
from ..vocabularies import ENGINE_PHASE_PRIORITY

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

#: Slice names by phase (SGLang's names change between versions: several per phase).
PHASES: dict[str, tuple[str, ...]] = {
    "queue": ("prefill_waiting", "decode_waiting", "dispatch", "api_server_dispatch",
              "dpc_dispatch", "request_process"),
    "prefill": ("prefill_forward", "chunked_prefill", "prefill", "mm_encode"),
    "decode": ("decode_loop", "decode_forward", "decode", "spec_draft", "spec_verify",
               "quick_finish"),
    "pd": ("prefill_prepare", "prefill_bootstrap", "prefill_transfer_kv_cache",
           "decode_prepare", "decode_bootstrap", "decode_transferred", "fake_output",
           "mooncake_send", "mooncake_worker_send", "mooncake_worker_send_session",
           "mooncake_recv", "mooncake_worker_recv"),
}
#: The phase an instant covered by slices of several phases counts in: the first.
PRIORITY: tuple[str, ...] = ENGINE_PHASE_PRIORITY
REQUEST_SPANS = tuple(REQUEST_SPAN_NAMES.values())
#: Engine spans that hold slices and count no time of their own.
HOLDER_SPANS = (*REQUEST_SPANS, KV_SENDER_SPAN)
RETRACT_EVENT = "retract"
TOKENS_ATTR = "completion_tokens"
PHASE_COLUMNS = [f"{phase}_s" for phase in (*PHASES, "other")]
COLUMNS = [*PHASE_COLUMNS, "retracted_s", "retractions", "requests", "decode_tokens",
           "decode_tokens_per_s"]
#: The columns :func:`phase_seconds` reads of its spans and retract events, as the frames'
#: span and event tables and a run dataset's ``spans`` and ``events`` name them.
SPAN_INPUT = ("sample_row", "span_index", "parent_index", "name", "start", "duration",
              "engine")
RETRACT_INPUT = ("parent_index", "ts")
_MAX_DEPTH = 256


def phase_of(name: str) -> str:
    """The phase a slice name counts in (``other`` when unknown)."""
    for phase, names in PHASES.items():
        if name in names:
            return phase
    return "other"


def engine_breakdown(frames: TraceFrames, by: str = "sample") -> pd.DataFrame:
    """Engine time per sample (``by="sample"``, indexed by sample row) or per rollout
    (``by="rollout"``, the sum of its samples): seconds in queue, prefill, decode, PD
    phases and other slices, retracted seconds and retractions, requests, decode tokens
    and decode tokens per second. Samples without engine spans have zeros (and NaN
    tokens per second).

    A sample's phase seconds partition the wall time its engine slices cover (the
    module's rules: nesting, then :data:`PRIORITY`), so they never add up to more than
    the wall time of the spans its requests hang under, however many servers and TP
    ranks worked at once. ``requests`` counts request spans: both halves of a PD
    request, never a KV sender."""
    if by not in ("sample", "rollout"):
        raise ValueError(f"by must be 'sample' or 'rollout', not {by!r}")
    per_sample = _per_sample(frames)
    if by == "sample":
        return per_sample
    rollout = frames.samples["rollout_id"].reindex(per_sample.index)
    totals = per_sample.drop(columns="decode_tokens_per_s").groupby(
        rollout.fillna(-1).astype(np.int64).to_numpy()).sum()
    totals.index.name = "rollout_id"
    totals["decode_tokens_per_s"] = _rate(totals["decode_tokens"], totals["decode_s"])
    return totals[COLUMNS]


def _per_sample(frames: TraceFrames) -> pd.DataFrame:
    core = frames.span_core
    rows = frames.samples.index
    out = pd.DataFrame(0.0, index=rows, columns=COLUMNS)
    engine = core[(core["origin"] == "engine").to_numpy()]
    events = frames.event_core
    retracts = events[((events["origin"] == "engine") & (events["name"] == RETRACT_EVENT)
                       ).to_numpy()]
    seconds = phase_seconds(_span_input(core, engine), pd.DataFrame({
        "parent_index": retracts["parent_index"].to_numpy(), "ts": retracts["ts"].to_numpy()}))
    out[PHASE_COLUMNS] = seconds.reindex(rows).fillna(0.0)[PHASE_COLUMNS]
    requests = engine[engine["name"].isin(REQUEST_SPANS).to_numpy()]
    generations = requests["parent_index"].unique()
    out["requests"] = requests.groupby("sample_row").size().reindex(rows).fillna(0)
    if len(retracts):
        started = core["start"].reindex(retracts["parent_index"]).to_numpy()
        lost = pd.Series(np.maximum(retracts["ts"].to_numpy() - started, 0.0),
                         index=retracts.index)
        out["retracted_s"] = lost.groupby(retracts["sample_row"].to_numpy()).sum().reindex(
            rows).fillna(0.0)
        out["retractions"] = retracts.groupby("sample_row").size().reindex(rows).fillna(0)
    tokens = _tokens(frames, generations)
    out["decode_tokens"] = tokens.reindex(rows).fillna(0.0)
    out["decode_tokens_per_s"] = _rate(out["decode_tokens"], out["decode_s"])
    out[["requests", "retractions"]] = out[["requests", "retractions"]].astype(np.int64)
    return out


def _span_input(core: pd.DataFrame, engine: pd.DataFrame) -> pd.DataFrame:
    """:func:`phase_seconds`' spans from the frames: the engine spans of each sample and
    the spans their requests hang under (the windows their time is clipped to), with
    the frames' own columns (those of :data:`SPAN_INPUT` have their names already) and
    the two it lacks, ``span_index`` and ``engine``."""
    holders = engine[engine["name"].isin(REQUEST_SPANS).to_numpy()]["parent_index"]
    owners = core.reindex(pd.Index(holders.unique()).intersection(core.index))
    owners = owners[(owners["origin"] != "engine").to_numpy()]
    picked = pd.concat([engine, owners])
    return picked.assign(span_index=picked.index.to_numpy(),
                         engine=(picked["origin"] == "engine").to_numpy())


def phase_seconds(spans: pd.DataFrame, retracts: pd.DataFrame) -> pd.DataFrame:
    """Seconds per phase of each sample, by the module's rules: one row per sample row
    with a slice, columns :data:`PHASE_COLUMNS`; each row adds up to at most the wall time
    its slices cover, clipped to the spans their requests hang under.

    ``spans`` has the columns of :data:`SPAN_INPUT`: ``sample_row`` (an integer: what is
    partitioned), ``span_index`` (unique), ``parent_index`` (a span index, -1 none),
    ``name``, ``start``, ``duration`` and ``engine``; its rows are the engine spans and
    the spans their request spans hang under (``engine`` false: the windows their time
    is clipped to; a span with no such window is not clipped, a window whose end is
    unknown clips nothing after its start). ``retracts`` has :data:`RETRACT_INPUT`: the
    span index of the span holding each ``retract`` event and its time. Indexes need not
    be positions: a run dataset's dump numbers its own."""
    slices = _slices(spans, retracts)
    if not len(slices):
        return pd.DataFrame(columns=PHASE_COLUMNS, dtype=np.float64)
    unit, start, end, phase = _own_intervals(slices)
    return _partition(unit, start, end, phase)


def dump_phase_seconds(spans: pd.DataFrame, retracts: pd.DataFrame) -> pd.Series | None:
    """:func:`phase_seconds` of a dump's samples, summed: what a run dataset's trends give
    per dump (they read one dump at a time), indexed by :data:`PHASE_COLUMNS`; None when
    none of its samples has a slice. ``spans`` and ``retracts`` are one dump's, as
    :func:`phase_seconds` reads them."""
    seconds = phase_seconds(spans, retracts)
    return seconds.sum() if len(seconds) else None


def _slices(spans: pd.DataFrame, retracts: pd.DataFrame) -> pd.DataFrame:
    """The slices (engine spans but request and sender spans) with their phase code in
    :data:`PRIORITY`, their window, and the unsliced waits after retractions as queue
    slices under the slice they interrupted."""
    spans = spans.reset_index(drop=True)
    ids = pd.Index(spans["span_index"].to_numpy())
    parent_at = ids.get_indexer(spans["parent_index"].to_numpy())
    engine = spans["engine"].to_numpy(dtype=bool)
    start = spans["start"].to_numpy(dtype=np.float64)
    end = start + spans["duration"].to_numpy(dtype=np.float64)
    low, high = _windows(parent_at, engine, start, end)
    names = spans["name"].astype(str)
    picked = engine & ~names.isin(HOLDER_SPANS).to_numpy()
    codes = {phase: code for code, phase in enumerate(PRIORITY)}
    code_of = {name: codes[phase_of(name)] for name in names.unique()}
    slices = pd.DataFrame({
        "unit": spans["sample_row"].to_numpy(dtype=np.int64),
        "id": spans["span_index"].to_numpy(), "parent": spans["parent_index"].to_numpy(),
        "start": start, "end": end, "phase": names.map(code_of).to_numpy(dtype=np.int64),
        "low": low, "high": high})[picked]
    first_free = int(spans["span_index"].max()) + 1 if len(spans) else 0
    waits = _requeue_waits(slices, retracts, codes["queue"], first_free)
    slices = pd.concat([slices, waits], ignore_index=True)
    finite = np.isfinite(slices["start"].to_numpy()) & np.isfinite(slices["end"].to_numpy())
    return slices[finite].reset_index(drop=True)


def _windows(parent_at: np.ndarray, engine: np.ndarray, start: np.ndarray, end: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Each span's window: the span outside the engine its chain of engine parents ends
    under ((-inf, inf) when there is none, or its end is unknown)."""
    cursor = parent_at.copy()
    for _ in range(_MAX_DEPTH):  # deeper than any engine trace; a cycle ends here too
        walking = (cursor >= 0) & engine[np.maximum(cursor, 0)]
        if not walking.any():
            break
        cursor[walking] = parent_at[cursor[walking]]
    found = (cursor >= 0) & ~engine[np.maximum(cursor, 0)]
    at = np.maximum(cursor, 0)
    low = np.where(found, start[at], -np.inf)
    high = np.where(found & np.isfinite(end[at]), end[at], np.inf)
    return np.where(np.isnan(low), -np.inf, low), high


def _requeue_waits(slices: pd.DataFrame, retracts: pd.DataFrame, queue: int,
                   first: int) -> pd.DataFrame:
    """SGLang writes no slice for the wait of a retracted request until it runs again: it
    lies inside the slice it was put back from (the first ``decode_forward``), from the
    ``retract`` event to that slice's next child. Each such wait, as a queue slice under
    it (ids from ``first``, above every id given)."""
    held = retracts[pd.Index(retracts["parent_index"]).isin(slices["id"])]
    children = slices[pd.Index(slices["parent"]).isin(held["parent_index"])]
    if not len(held) or not len(children):
        return slices.iloc[:0]
    nearest = pd.merge_asof(
        pd.DataFrame({"parent": held["parent_index"].to_numpy(), "ts": held["ts"].to_numpy(
            dtype=np.float64)}).sort_values("ts"),
        pd.DataFrame({"parent": children["parent"].to_numpy(),
                      "next": children["start"].to_numpy(dtype=np.float64)}
                     ).sort_values("next"),
        left_on="ts", right_on="next", by="parent", direction="forward").dropna()
    holder = slices.set_index("id").loc[nearest["parent"].to_numpy()]
    return pd.DataFrame({
        "unit": holder["unit"].to_numpy(), "id": np.arange(first, first + len(nearest)),
        "parent": nearest["parent"].to_numpy(), "start": nearest["ts"].to_numpy(),
        "end": nearest["next"].to_numpy(), "phase": queue, "low": holder["low"].to_numpy(),
        "high": holder["high"].to_numpy()})


def _own_intervals(slices: pd.DataFrame
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each slice's own time as intervals (unit, start, end, phase code): its interval less
    the union of its child slices' (rule 1), clipped to its window."""
    start = slices["start"].to_numpy()
    end = slices["end"].to_numpy()
    holder = pd.Index(slices["id"].to_numpy()).get_indexer(slices["parent"].to_numpy())
    child = np.flatnonzero(holder >= 0)
    top = holder[child]
    c_start = np.maximum(start[child], start[top])
    c_end = np.minimum(end[child], end[top])
    keep = c_end > c_start
    child, top, c_start, c_end = child[keep], top[keep], c_start[keep], c_end[keep]
    order = np.lexsort((c_start, top))
    top, c_start, c_end = top[order], c_start[order], c_end[order]
    reach = pd.Series(c_end).groupby(top).cummax().to_numpy()
    first = np.r_[True, top[1:] != top[:-1]] if len(top) else np.zeros(0, dtype=bool)
    before = np.where(first, start[top], np.r_[0.0, reach[:-1]])
    last = np.r_[top[1:] != top[:-1], True] if len(top) else np.zeros(0, dtype=bool)
    alone = np.setdiff1d(np.arange(len(slices)), top)
    owner = np.concatenate([top, top[last], alone])
    piece_start = np.concatenate([before, reach[last], start[alone]])
    piece_end = np.concatenate([c_start, end[top[last]], end[alone]])
    piece_start = np.maximum(piece_start, slices["low"].to_numpy()[owner])
    piece_end = np.minimum(piece_end, slices["high"].to_numpy()[owner])
    kept = piece_end > piece_start
    owner = owner[kept]
    return (slices["unit"].to_numpy()[owner], piece_start[kept], piece_end[kept],
            slices["phase"].to_numpy()[owner])


def _partition(unit: np.ndarray, start: np.ndarray, end: np.ndarray, phase: np.ndarray
               ) -> pd.DataFrame:
    """Seconds per phase and unit of the union of the intervals: each instant of a unit
    counted once, in the phase first in :data:`PRIORITY` among the intervals holding it
    (rule 2). One sweep over every unit's interval ends, sorted by unit and time."""
    units, code = np.unique(unit, return_inverse=True)
    at = np.concatenate([start, end])
    step = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    of_unit = np.concatenate([code, code])
    of_phase = np.concatenate([phase, phase])
    order = np.lexsort((at, of_unit))
    at, step, of_unit, of_phase = at[order], step[order], of_unit[order], of_phase[order]
    same = np.r_[of_unit[1:] == of_unit[:-1], False]
    length = np.where(same, np.r_[at[1:], 0.0] - at, 0.0)
    out = pd.DataFrame(0.0, index=pd.Index(units, name="unit"), columns=PHASE_COLUMNS)
    claimed = np.zeros(len(at), dtype=bool)
    for number, name in enumerate(PRIORITY):
        running = np.cumsum(np.where(of_phase == number, step, 0)) > 0
        counted = running & ~claimed
        out[f"{name}_s"] = np.bincount(of_unit, weights=np.where(counted, length, 0.0),
                                       minlength=len(units))
        claimed |= running
    return out


def _tokens(frames: TraceFrames, generations: np.ndarray) -> pd.Series:
    """``completion_tokens`` of the generation spans with engine requests, by sample row."""
    if TOKENS_ATTR not in frames.span_end_attrs.keys or not len(generations):
        return pd.Series(dtype=float)
    values = pd.to_numeric(pd.Series(frames.span_end_attrs.column(TOKENS_ATTR).to_pylist(),
                                     index=frames.span_core.index), errors="coerce")
    picked = values.reindex(generations)
    rows = frames.span_core["sample_row"].reindex(generations)
    return picked.groupby(rows.to_numpy()).sum()


def _rate(tokens: pd.Series, seconds: pd.Series) -> pd.Series:
    return (tokens / seconds.where(seconds > 0)).where(tokens > 0)
