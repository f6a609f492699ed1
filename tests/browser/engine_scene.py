"""A dump with its engines' side, for the engine browser tests and the screenshot.

The engine traces are SGLang-shaped (``tests/support/engine_traces.py``: PD halves on two
skewed hosts) and reach the frames through the store and the join, as a collector's
would; each request root carries the ``gen_ai.*`` figures SGLang writes at its end
(the first request's are known: :data:`FIRST_FIGURES`). The engines' load is a
scrape table in ``frames.engine_load``'s form with known steps (:func:`load_table`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.frames.engine_load import engine_load_frame
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.store import load_engine_traces
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.engine_traces import requests_for

#: The ``gen_ai.*`` figures of the first request's halves, by role.
FIRST_FIGURES = {
    "prefill": {"gen_ai.latency.time_to_first_token": 0.0425,
                "gen_ai.latency.time_in_queue": 0.0125, "gen_ai.usage.prompt_tokens": 1234},
    "decode": {"gen_ai.latency.time_to_first_token": 0.0875,
               "gen_ai.latency.time_in_queue": 0.0375, "gen_ai.latency.e2e": 0.75,
               "gen_ai.usage.prompt_tokens": 1234, "gen_ai.usage.completion_tokens": 321,
               "gen_ai.usage.cached_tokens": 64,
               "gen_ai.response.finish_reasons": ["stop"]},
}
#: Seconds after the dump's start where the scraped load steps up (see load_table).
LOAD_STEP = 2.0


@dataclass
class Scene:
    """The joined frames, where they came from, and payload positions to look at."""

    frames: TraceFrames
    dump: Path
    engine: Path
    generation: int  # payload index of a generation span with engine requests
    row: int  # its sample row
    decode_slice: int  # payload index of its decode request's decode_loop
    sample: int  # payload sample index of its row


def scene(folder: Path, *, load: bool = True) -> Scene:
    """Six demo samples, a PD request per generation span (prefill on engine-a, decode on
    engine-b), the figures on each request root, and (``load``) the engines' load."""
    dump = write_demo_dump(folder / "engine_rollout.pt", n_samples=6, seed=8)
    frames = load_frames(str(dump), progress=False)
    requests = requests_for(frames, pd=True, hosts=tuple(SKEWS))
    engine = store_requests(requests, folder / "engine_traces", SKEWS)
    spans = load_engine_traces(engine)
    first = requests[0].rid
    for attrs, name in zip(spans["attributes"], spans["name"], strict=True):
        if " Req " not in f" {name} ":
            continue
        role = "decode" if name.startswith("decode") else "prefill"
        attrs.update(FIRST_FIGURES[role] if attrs.get("rid") == first else _figures(role))
        attrs["gen_ai.request.id"] = attrs.get("rid")
    joined = join_engine(frames, spans)
    if load:
        joined = replace(joined, engine_load=load_table(joined))
    generation = requests[0].span
    order = list(encode(joined).span_index)
    core = joined.span_core
    halves = core.index[(core["parent_index"] == generation) & (core["origin"] == "engine")]
    decode = core.index[core["parent_index"].isin(halves) & (core["name"] == "decode_loop")][0]
    row = int(core.at[generation, "sample_row"])
    return Scene(joined, dump, engine, order.index(generation), row, order.index(decode),
                 int(np.flatnonzero(joined.samples.index.to_numpy() == row)[0]))


def _figures(role: str) -> dict[str, Any]:
    figures = {"gen_ai.latency.time_to_first_token": 0.05,
               "gen_ai.latency.time_in_queue": 0.01, "gen_ai.usage.prompt_tokens": 900}
    if role == "decode":
        figures.update({"gen_ai.latency.e2e": 0.5, "gen_ai.usage.completion_tokens": 200,
                        "gen_ai.response.finish_reasons": ["length"]})
    return figures


def load_table(frames: TraceFrames, scrape: float = 0.25) -> Any:
    """Scrapes of both engines every ``scrape`` seconds over the frames' time: running
    3 on engine-a and 4 on engine-b before ``t0 + LOAD_STEP``, 5 and 4 from then on;
    queued 1 and 0; KV token usage 0.5 and 0.75; throughput 1000 and 1500 tokens/s;
    the retraction counter of engine-a one higher at every scrape."""
    times = np.arange(frames.t0 - scrape, frames.t1 + scrape, scrape)
    step = times >= frames.t0 + LOAD_STEP
    columns: dict[str, list] = {"engine": [], "metric": [], "labels": [], "ts": [], "value": []}

    def add(engine: str, metric: str, values: Any) -> None:
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), times.shape)
        columns["engine"] += [engine] * len(times)
        columns["metric"] += [metric] * len(times)
        columns["labels"] += [""] * len(times)
        columns["ts"] += times.tolist()
        columns["value"] += values.tolist()

    add("engine-a", "sglang:num_running_reqs", np.where(step, 5.0, 3.0))
    add("engine-b", "sglang:num_running_reqs", 4.0)
    add("engine-a", "sglang:num_queue_reqs", 1.0)
    add("engine-b", "sglang:num_queue_reqs", 0.0)
    add("engine-a", "sglang:token_usage", 0.5)
    add("engine-b", "sglang:token_usage", 0.75)
    add("engine-a", "sglang:gen_throughput", 1000.0)
    add("engine-b", "sglang:gen_throughput", 1500.0)
    add("engine-a", "sglang:num_retracted_requests_total", np.arange(len(times), dtype=float))
    return engine_load_frame(columns["engine"], columns["metric"], columns["labels"],
                             columns["ts"], columns["value"])
