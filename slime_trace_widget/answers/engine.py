"""Where a generation's time went inside the engine: queue, prefill, decode, PD, retractions.

Reads the engine spans the join attached (``origin == "engine"``; see
:mod:`slime_trace_widget.frames.engine`). A request's own slices (the children
of its request span) are sorted into phases by name; nested slices are parts of
their parent and are not counted again. *Retracted* seconds are the work a slice
had done when the engine put the request back (its ``retract`` event), which was
done again later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..frames.engine import REQUEST_SPAN_NAMES

if TYPE_CHECKING:
    from ..frames.model import TraceFrames

#: Slice names by phase (SGLang's names change between versions: several per phase).
PHASES: dict[str, tuple[str, ...]] = {
    "queue": ("prefill_waiting", "dispatch", "api_server_dispatch", "request_process"),
    "prefill": ("prefill_forward", "chunked_prefill", "prefill"),
    "decode": ("decode_loop", "decode_forward", "decode"),
    "pd": ("prefill_bootstrap", "prefill_transfer_kv_cache", "decode_bootstrap",
           "decode_waiting", "decode_transferred"),
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
    if "origin" not in core.columns:
        out["decode_tokens_per_s"] = np.nan
        return out
    engine = core[(core["origin"] == "engine").to_numpy()]
    slices = engine[engine["parent_name"].isin(REQUEST_SPANS).to_numpy()]
    phases = slices["name"].astype(str).map(phase_of)
    seconds = slices["duration"].groupby([slices["sample_row"], phases]).sum().unstack(
        fill_value=0.0)
    for phase in (*PHASES, "other"):
        if phase in seconds:
            out[f"{phase}_s"] = seconds[phase].reindex(rows).fillna(0.0)
    requests = engine[engine["name"].isin(REQUEST_SPANS).to_numpy()]
    generations = requests["parent_index"].unique()
    out["requests"] = requests.groupby("sample_row").size().reindex(rows).fillna(0)
    events = frames.event_core
    retracts = events[((events["origin"] == "engine") & (events["name"] == RETRACT_EVENT)
                       ).to_numpy()] if "origin" in events.columns else events.iloc[:0]
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
