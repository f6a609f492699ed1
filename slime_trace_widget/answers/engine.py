"""Where a generation's time went inside the engine: queue, prefill, decode, PD, retractions.

Reads the engine spans the join attached (``origin == "engine"``; see
:mod:`slime_trace_widget.sources.engine.join`). Each slice counts its *own* time (its
duration less its engine children's) in the phase its name belongs to, so a slice
nested in another is counted once, in its own phase: after a retraction SGLang nests
the request's second wait and prefill inside its first ``decode_forward``, and they
count as queue and prefill, not decode. ``decode_waiting`` (prefill done, waiting
for a decode batch) is queueing with or without PD. *Retracted* seconds are the work
the slice that held the request had done when the engine put it back (its
``retract`` event), which was done again later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..sources.engine.join import REQUEST_SPAN_NAMES

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
           "decode_prepare", "decode_bootstrap", "decode_transferred", "fake_output"),
}
REQUEST_SPANS = tuple(REQUEST_SPAN_NAMES.values())
RETRACT_EVENT = "retract"
TOKENS_ATTR = "completion_tokens"
PHASE_COLUMNS = [f"{phase}_s" for phase in (*PHASES, "other")]
COLUMNS = [*PHASE_COLUMNS, "retracted_s", "retractions", "requests", "decode_tokens",
           "decode_tokens_per_s"]


def phase_of(name: str) -> str:
    """The phase a slice name counts in (``other`` when unknown)."""
    for phase, names in PHASES.items():
        if name in names:
            return phase
    return "other"


def engine_breakdown(frames: TraceFrames, by: str = "sample") -> pd.DataFrame:
    """Engine time per sample (``by="sample"``, indexed by sample row) or per rollout
    (``by="rollout"``): seconds in queue, prefill, decode, PD phases and other slices,
    retracted seconds and retractions, requests, decode tokens and decode tokens per
    second. Samples without engine spans have zeros (and NaN tokens per second)."""
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
    slices = engine[~engine["name"].isin(REQUEST_SPANS).to_numpy()]
    phases = slices["name"].astype(str).map(phase_of)
    events = frames.event_core
    retracts = events[((events["origin"] == "engine") & (events["name"] == RETRACT_EVENT)
                       ).to_numpy()]
    own = own_seconds(slices)
    requeued = requeue_seconds(slices, retracts)
    own = own.sub(requeued, fill_value=0.0)
    frame = pd.DataFrame({"row": slices["sample_row"], "phase": phases, "seconds": own})
    if len(requeued):
        frame = pd.concat([frame, pd.DataFrame({
            "row": slices["sample_row"].reindex(requeued.index), "phase": "queue",
            "seconds": requeued})])
    seconds = frame.groupby(["row", "phase"])["seconds"].sum().unstack(fill_value=0.0)
    for phase in (*PHASES, "other"):
        if phase in seconds:
            out[f"{phase}_s"] = seconds[phase].reindex(rows).fillna(0.0)
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


def requeue_seconds(slices: pd.DataFrame, retracts: pd.DataFrame) -> pd.Series:
    """Seconds a retracted request waited to run again, by the slice it was put back from:
    SGLang writes no slice for that wait, so it lies inside that slice (the first
    ``decode_forward``) from the ``retract`` event to the next child slice's start."""
    held = retracts[retracts["parent_index"].isin(slices.index).to_numpy()]
    if not len(held):
        return pd.Series(dtype=float)
    children = slices[slices["parent_index"].isin(held["parent_index"]).to_numpy()]
    starts = children.groupby("parent_index")["start"].apply(np.sort)
    waits: dict[int, float] = {}
    for parent, at in zip(held["parent_index"], held["ts"], strict=True):
        later = starts.get(parent)
        if later is None:
            continue
        following = later[np.searchsorted(later, at):]
        if len(following):
            waits[int(parent)] = waits.get(int(parent), 0.0) + float(following[0] - at)
    return pd.Series(waits, dtype=float)


def own_seconds(slices: pd.DataFrame) -> pd.Series:
    """Each slice's duration less its child slices' (never below zero)."""
    children = slices["duration"].groupby(slices["parent_index"].to_numpy()).sum()
    inner = children.reindex(slices.index).fillna(0.0)
    return (slices["duration"] - inner).clip(lower=0.0)


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
