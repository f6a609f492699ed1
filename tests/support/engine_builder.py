"""Request traces laid out as SGLang 0.5.23 writes them (``../shared/engine-traces.md``),
built by hand as the store keeps them, and dumps whose generations carry chosen rids:
the smallest traces that show each of the join's rules. Traces from SGLang's own code
come from ``sglang_driver``."""

from __future__ import annotations

import itertools
import json
from typing import Any

from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.store import LAYOUT
from slime_trace_widget.tracing import bind_trace, trace_span, use_clock

T0 = 1_700_000_000.0
_ids = itertools.count(1)


def next_id() -> int:
    """A number no other span or trace of these tests has."""
    return next(_ids)


def frames_for(rids: list[str], length: float = 10.0) -> TraceFrames:
    """One sample per rid, each a ``sglang_generate`` span of ``length`` seconds from T0."""
    return generations([(rid, 0.0, length) for rid in rids])


def generations(spans: list[tuple[str, float, float]]) -> TraceFrames:
    """One sample per (rid, start, end), each a ``sglang_generate`` span naming the rid,
    its times seconds from T0."""
    samples = []
    for number, (rid, start, end) in enumerate(spans):
        sample: dict[str, Any] = {"index": number, "group_index": number, "status": "completed"}
        now = [T0 + start]
        bind_trace(sample)
        with use_clock(lambda now=now: now[0]), trace_span(sample, "sglang_generate") as span:
            now[0] = T0 + end
            span.update({"sglang_request_id": rid})
        samples.append(sample)
    return build_frames(samples)


class Engine:
    """Spans as SGLang 0.5.23 exports them, kept as the store keeps them."""

    def __init__(self) -> None:
        self.rows: dict[str, list] = {name: [] for name in (
            "trace_id", "span_id", "parent_id", "name", "start_ns", "end_ns", "service",
            "status", "attributes", "resource", "events", "links")}

    def span(self, trace: str, parent: str | None, name: str, start: float, end: float,
             attrs: dict | None = None, events: list | None = None, status: int = 0) -> str:
        span_id = f"{next_id():016x}"
        for key, value in (("trace_id", trace), ("span_id", span_id), ("parent_id", parent),
                           ("name", name), ("start_ns", round(start * 1e9)),
                           ("end_ns", round(end * 1e9)), ("service", "sglang"),
                           ("status", status), ("attributes", json.dumps(attrs or {})),
                           ("resource", json.dumps({"service.name": "sglang"})),
                           ("events", json.dumps([{"name": n, "time_ns": round(t * 1e9),
                                                   "attributes": a}
                                                  for n, t, a in events or []])),
                           ("links", "[]")):
            self.rows[key].append(value)
        return span_id

    def request(self, rid: str, start: float, end: float, *, role: str = "unified",
                room: int | None = None, tp: int = 1, host: str = "hostaaaa",
                slices: list[tuple] = (), thread_events: list | None = None,
                parent: str | None = None, trace: str | None = None) -> str:
        """A request root, a tokenizer thread, ``tp`` scheduler threads with ``slices``
        (name, start, end, attrs, events, children) each; returns the trace id."""
        trace = trace or f"{0:016x}{next_id():016x}"
        short = rid.split("_")[-1]
        label = "" if role == "unified" else role
        attrs: dict[str, Any] = {"rid": short, "module": "sglang::request",
                                 "gen_ai.request.id": rid,
                                 "gen_ai.latency.time_to_first_token": 0.5}
        if room is not None:
            attrs["bootstrap_room"] = hex(room)
        root = self.span(trace, parent, f"{label} Req {short[:8]}", start, end, attrs)
        tokenizer = self.span(trace, root, f"Tokenizer(host:{host[:8]} | pid:11)", start,
                              start + 0.02, {"host_id": host, "pid": 11,
                                             "thread_label": "Tokenizer"})
        self.span(trace, tokenizer, "tokenize", start, start + 0.01)
        self.span(trace, tokenizer, "api_server_dispatch", start + 0.01, start + 0.02)
        for rank in range(tp):
            thread = self.span(
                trace, root, f"Scheduler [TP {rank}]  [PP 0] (host:{host[:8]} | pid:{20 + rank})",
                start + 0.02, end, {"tp_rank": rank, "pp_rank": 0, "host_id": host,
                                    "pid": 20 + rank, "thread_label": "Scheduler"},
                events=thread_events)
            self._slices(trace, thread, slices)
        return trace

    def _slices(self, trace: str, parent: str, slices: Any) -> None:
        for name, start, end, attrs, events, children in slices:
            span_id = self.span(trace, parent, name, start, end, attrs, events)
            self._slices(trace, span_id, children)

    def table(self) -> Any:
        return LAYOUT.rows(self.rows)


def plain_slices(start: float, end: float, loops: int = 0) -> list[tuple]:
    """prefill_waiting, prefill_forward, decode_waiting, decode_forward (with ``loops``
    decode_loop iterations, each with a schedule event), over [start, end]."""
    step = (end - start) / 10
    decode_start = start + 3 * step
    children = []
    if loops:
        width = (end - decode_start) / loops
        children = [("decode_loop", decode_start + k * width, decode_start + (k + 1) * width,
                     {"decode_ct": k}, [("schedule", decode_start + k * width,
                                         {"bid": k, "batch_size": 8})], [])
                    for k in range(loops)]
    return [("prefill_waiting", start, start + step, {}, [], []),
            ("prefill_forward", start + step, start + 2 * step, {}, [], []),
            ("decode_waiting", start + 2 * step, decode_start, {}, [], []),
            ("decode_forward", decode_start, end, {}, [], children)]
