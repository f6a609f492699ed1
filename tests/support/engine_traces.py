"""SGLang-shaped request traces for the generation spans of a dump, sent by the real SDK.

For tests and benchmarks: each generation span with a ``sglang_request_id`` gets
the request its engine would have traced (``../shared/engine-traces.md``): a
bootstrap-room root, a request root per role with ``rid``, one span per server
thread (``tp_rank``, ``host_id``, ``pid``) and the slices with ``schedule`` and
``retract`` events, inside the generation span less a little network time. Each
host's clock is off by its skew. :func:`replay` sends them through
OpenTelemetry's SDK to any span exporter (OTLP/HTTP, OTLP/gRPC, in memory), one
tracer provider per host, so what arrives is what a real SGLang would send.
Needs the ``otel`` extra and ``opentelemetry-sdk``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import REQUEST_ID_ATTR, attr_values

#: Seconds of network between the client's span and the engine's work, each side.
NETWORK_SECONDS = 0.002


@dataclass
class Slice:
    """One piece of an engine's work, in the dump's clock (the truth the join must find)."""

    name: str
    start: float
    end: float
    attrs: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)


@dataclass
class Half:
    """One server's share of a request: its role, host and slices."""

    role: str
    host: str
    pid: int
    slices: list[Slice]

    @property
    def start(self) -> float:
        return min(piece.start for piece in self.slices)

    @property
    def end(self) -> float:
        return max(piece.end for piece in self.slices)


@dataclass
class Request:
    """What the engine traced of one request; ``span`` is the generation span's index
    (None for a request no sample made)."""

    rid: str
    span: int | None
    halves: list[Half]
    traceparent: str | None = None


def requests_for(frames: TraceFrames, *, pd: bool = False, rid_prefix: str = "",
                 hosts: tuple[str, ...] = ("engine-a", "engine-b"), seed: int = 0
                 ) -> list[Request]:
    """A request per generation span of ``frames`` (``pd``: prefill and decode halves on
    ``hosts[0]`` and ``hosts[1]``; otherwise requests alternate between the hosts).
    ``rid_prefix`` is put before each rid, as a router naming its workers does."""
    rng = random.Random(seed)
    core = frames.span_core
    requests = []
    for number, (index, rid) in enumerate(sorted(attr_values(frames, REQUEST_ID_ATTR).items())):
        start, end = float(core.at[index, "start"]), float(core.at[index, "end"])
        if not end > start + 4 * NETWORK_SECONDS:
            continue
        inner = (start + NETWORK_SECONDS, end - NETWORK_SECONDS)
        halves = (_pd_halves(inner, hosts, rng) if pd else
                  [_plain_half(inner, hosts[number % len(hosts)], rng)])
        requests.append(Request(f"{rid_prefix}{rid}", int(index), halves))
    return requests


def stray_requests(count: int, start: float, end: float, host: str = "engine-a",
                   seed: int = 1) -> list[Request]:
    """Requests nobody in the dump made (another client, a health check)."""
    rng = random.Random(seed)
    out = []
    for number in range(count):
        begin = rng.uniform(start, end - 0.1)
        out.append(Request(f"stray{number:04d}{rng.getrandbits(32):08x}", None,
                           [_plain_half((begin, begin + 0.05), host, rng)]))
    return out


def _plain_half(window: tuple[float, float], host: str, rng: random.Random) -> Half:
    start, end = window
    length = end - start
    wait_end = start + length * rng.uniform(0.05, 0.3)
    prefill_end = wait_end + length * rng.uniform(0.05, 0.2)
    decode = Slice("decode_loop", prefill_end, end, {"decode_count": rng.randint(1, 500)},
                   [("schedule", prefill_end, {"bid": rng.randint(0, 99), "batch_size": 8})])
    if rng.random() < 0.3:
        decode.events.append(("retract", (prefill_end + end) / 2, {"reason": "kv cache full"}))
    return Half("", host, rng.randint(1000, 9999), [
        Slice("prefill_waiting", start, wait_end),
        Slice("prefill_forward", wait_end, prefill_end, {"batch_size": rng.randint(1, 16)},
              [("schedule", wait_end, {"bid": rng.randint(0, 99), "batch_size": 4})]),
        decode,
    ])


def _pd_halves(window: tuple[float, float], hosts: tuple[str, ...], rng: random.Random
               ) -> list[Half]:
    start, end = window
    length = end - start
    boot = start + length * 0.05
    forward = boot + length * rng.uniform(0.05, 0.15)
    transfer = forward + length * rng.uniform(0.05, 0.15)
    sent = transfer + length * 0.05
    prefill = Half("prefill", hosts[0], rng.randint(1000, 9999), [
        Slice("prefill_bootstrap", start, boot),
        Slice("prefill_forward", boot, forward, {"batch_size": rng.randint(1, 16)}),
        Slice("prefill_transfer_kv_cache", forward, sent),
    ])
    decode = Half("decode", hosts[1], rng.randint(1000, 9999), [
        Slice("decode_bootstrap", start, boot),
        Slice("decode_waiting", boot, transfer),
        Slice("decode_transferred", transfer, sent),
        Slice("decode_loop", sent, end, {"decode_count": rng.randint(1, 500)}),
    ])
    return [prefill, decode]


def replay(requests: Iterable[Request], exporter_for: Callable[[str], Any],
           skews: dict[str, float], *, batch: bool = True) -> None:
    """Send ``requests`` through the SDK: a tracer provider per host (resource
    ``host.name``), its exporter from ``exporter_for(host)``, its clock ``skews[host]``
    seconds behind the dump's (engine time + skew = dump time). Returns once every
    provider has flushed and shut down."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    providers: dict[str, Any] = {}

    def tracer(host: str) -> Any:
        if host not in providers:
            provider = TracerProvider(resource=Resource.create(
                {"service.name": "sglang", "host.name": host}))
            processor = BatchSpanProcessor if batch else SimpleSpanProcessor
            provider.add_span_processor(processor(exporter_for(host)))
            providers[host] = provider
        return providers[host].get_tracer("sglang")

    def ns(host: str, seconds: float) -> int:
        return round((seconds - skews.get(host, 0.0)) * 1e9)

    try:
        for request in requests:
            first = request.halves[0]
            context = (TraceContextTextMapPropagator().extract(
                {"traceparent": request.traceparent}) if request.traceparent else None)
            room = tracer(first.host).start_span(
                f"Bootstrap Room 0x{abs(hash(request.rid)) & 0xFFFFFFFF:08x}", context=context,
                start_time=ns(first.host, min(h.start for h in request.halves)),
                attributes={"bootstrap_room": abs(hash(request.rid)) & 0xFFFFFFFF})
            room_context = trace.set_span_in_context(room)
            for half in request.halves:
                _replay_half(tracer(half.host), half, request.rid, room_context, ns)
            room.end(end_time=ns(first.host, max(h.end for h in request.halves)))
    finally:
        for provider in providers.values():
            provider.shutdown()


def _replay_half(tracer: Any, half: Half, rid: str, parent: Any,
                 ns: Callable[[str, float], int]) -> None:
    from opentelemetry import trace

    host = half.host
    label = f"{half.role} Req {rid[:8]}".strip()
    root = tracer.start_span(label, context=parent, start_time=ns(host, half.start),
                             attributes={"rid": rid})
    thread = tracer.start_span(
        f"Scheduler [TP 0] (host:{host[:8]} | pid:{half.pid})",
        context=trace.set_span_in_context(root), start_time=ns(host, half.start),
        attributes={"tp_rank": 0, "host_id": host, "pid": half.pid,
                    "thread_label": "Scheduler"})
    inside = trace.set_span_in_context(thread)
    for piece in half.slices:
        span = tracer.start_span(piece.name, context=inside, start_time=ns(host, piece.start),
                                 attributes=piece.attrs)
        for name, at, attrs in piece.events:
            span.add_event(name, attrs, timestamp=ns(host, at))
        span.end(end_time=ns(host, piece.end))
    thread.end(end_time=ns(host, half.end))
    root.end(end_time=ns(host, half.end))


def joined_halves(frames: TraceFrames, requests: Iterable[Request]
                  ) -> Iterator[tuple[Request, Half, Any, Any]]:
    """Each half of each request beside what the join made of it: its request span
    (None when the generation span has no single one of that host) and the spans
    under it (empty then), both rows of ``frames.spans``."""
    spans = frames.spans
    engine = spans[(spans["origin"] == "engine").to_numpy()]
    for request in requests:
        roots = engine[engine["parent_index"] == request.span]
        for half in request.halves:
            root = roots[roots["attr.engine.host"] == half.host]
            if len(root) != 1:
                yield request, half, None, engine.iloc[:0]
                continue
            yield request, half, root.iloc[0], engine[engine["parent_index"] == root.index[0]]
