"""SGLang 0.5.23's own request tracing, driven on a CPU for the generation spans of a dump.

:func:`write_dump` writes a small real dump whose ``sglang_generate`` spans carry chosen
rids; :func:`plan` decides, for each of them, the request SGLang would have served (the
scenario, the servers, every moment of its timeline in the dump's clock), plus requests
no sample made; :func:`drive` runs each simulated machine ("host") in a process of its
own (``sglang_host``), where SGLang's tokenizer-manager and scheduler calls into
``srt/observability`` are made at those moments, shifted into the host's clock by its
skew, and SGLang's own exporter sends the spans to an OTLP endpoint (this package's
receiver in the tests). What SGLang emitted is captured on the side
(:attr:`Driven.emitted`), so a test holds the store, and the join, to what was driven.

Scenarios (``../shared/engine-traces.md`` has the shapes): ``normal``; ``chunked``
(chunked prefill); ``retracted`` (decode retracted and re-run); ``pd_client_rid`` (PD,
both servers use the client's rid); ``pd_no_client_rid`` (PD, the prefill server makes
its own uuid4 rid, the client records the decode server's); ``tp2`` (two scheduler
ranks); ``underscore_rid`` (a rid with ``_``, whose root ``rid`` is its last part);
``traceparent`` (the request carries the generation span's W3C context, flags 01);
``unsampled`` (the same with flags 00: SGLang drops the request; not in the default
cycle); ``stray`` (another client's request: no generation span).

:func:`plan`'s ``kv_senders`` gives every PD prefill half SGLang's Mooncake KV sender (the
default transfer backend's trace of its own, one per prefill TP rank, see
``sglang_host``), and ``pd_tp_size`` the TP ranks of both PD halves.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]

SCENARIOS = ("normal", "chunked", "retracted", "pd_client_rid", "pd_no_client_rid", "tp2",
             "underscore_rid", "traceparent", "stray")
#: Scenarios :func:`plan` knows besides the default cycle.
EXTRA_SCENARIOS = ("unsampled",)
PD_SCENARIOS = ("pd_client_rid", "pd_no_client_rid")
#: 2026-01-01, as the demo's rollouts.
DEFAULT_START = 1767225600.0
#: Seconds of network each side between the client's span and the engine's work, at most.
NETWORK_SECONDS = 0.002
#: How long :func:`drive` waits for its hosts, a hang guard (a busy 2-core machine).
DRIVE_TIMEOUT = 1800.0


def machine_id(name: str) -> str:
    """A 32-hex-digit id such as /etc/machine-id holds, made from ``name``."""
    return hashlib.md5(name.encode()).hexdigest()


#: Three machines: each runs every kind of server the plan gives it.
DEFAULT_HOSTS = tuple(machine_id(f"sglang-engine-{letter}") for letter in "abc")


# --------------------------------------------------------------------------- the record


@dataclass
class Half:
    """One server's share of a request, as driven.

    ``tok`` holds the tokenizer's moments (``created``, ``tokenized``, ``dispatch``,
    ``dispatched``, ``first_token``, ``finished``) and ``sched`` the scheduler's calls,
    in order, as ``(op, time, *args)``; all times in the DUMP's clock (the host's clock
    is this minus its skew). ``decode`` ops are ``("decode", first, step, count, gap)``:
    ``count`` iterations scheduled ``step`` seconds apart, each result ``gap`` before the
    next schedule.
    """

    role: str  # "unified", "prefill" or "decode"
    host: str  # our label of the simulated machine, also its fake host_id
    server_rid: str  # the whole rid this server used (gen_ai.request.id)
    tp_size: int
    retractions: int  # retract events driven
    decode_iterations: int  # scheduler decode iterations driven (decode_loop spans, level 3)
    chunked_prefill_chunks: int
    bootstrap_room: int | None
    tok: dict[str, float] = field(default_factory=dict)
    sched: list[tuple] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    kv_sender: bool = False  # a prefill half whose TP ranks each run a Mooncake KV sender

    @property
    def start(self) -> float:
        """When the request root begins (the tokenizer received it), dump clock."""
        return self.tok["created"]

    @property
    def end(self) -> float:
        """When the request root ends (the tokenizer finished it), dump clock."""
        return self.tok["finished"]

    def at(self, op: str) -> list[float]:
        """The times of the scheduler op ``op`` (dump clock)."""
        return [step[1] for step in self.sched if step[0] == op]

    @property
    def root_name(self) -> str:
        """The request root's name SGLang gives it."""
        role = "" if self.role == "unified" else self.role
        return f"{role} Req {self.server_rid.split('_')[-1][:8]}"


@dataclass
class Request:
    """A request as driven: ``span`` is the index (``frames.span_core``) of the generation
    span that made it, None for another client's request."""

    span: int | None
    client_rid: str | None  # what slime records as sglang_request_id
    scenario: str
    start: float  # the request's window in the dump's clock
    end: float
    halves: list[Half]
    traceparent: str | None = None

    @property
    def sampled(self) -> bool:
        """False when a traceparent with flags 00 makes SGLang drop the whole request."""
        return self.traceparent is None or self.traceparent.endswith("-01")


@dataclass
class Driven:
    """What :func:`drive` did: the requests, every span SGLang's code ended (when
    captured; times in the ENGINE's clock), and each host's counts (``spans_ended``,
    ``spans_exported``, ``spans_failed``, ``dropped``, ``startup_seconds``,
    ``drive_seconds``)."""

    requests: list[Request]
    emitted: pd.DataFrame
    hosts: dict[str, dict[str, Any]]
    seconds: float = 0.0

    @property
    def spans_ended(self) -> int:
        return sum(int(report["spans_ended"]) for report in self.hosts.values())

    @property
    def dropped(self) -> int:
        """Spans SGLang ended that its exporter never got, or that the receiver refused."""
        return sum(int(report["dropped"]) + int(report["spans_failed"])
                   for report in self.hosts.values())


# --------------------------------------------------------------------------- the dump


def default_rids(count: int = 24, seed: int = 0) -> list[str]:
    """Rids of the kinds the join meets: SGLang's uuid4 hex, the demo's 16 hex digits,
    agent sessions with ``_`` sharing their last part (``sess-17_turn-2`` and
    ``sess-23_turn-2``), and a router's ``<worker>_<rid>``."""
    rng = random.Random(seed)
    fixed = ["sess-17_turn-2", "sess-23_turn-2", "sess-17_turn-3",
             f"worker3_{uuid.UUID(int=rng.getrandbits(128), version=4).hex}"]
    rids = []
    for number in range(count):
        if number % 4 == 3 and fixed:
            rids.append(fixed.pop(0))
        elif number % 3 == 1:
            rids.append(f"{rng.getrandbits(64):016x}")
        else:
            rids.append(uuid.UUID(int=rng.getrandbits(128), version=4).hex)
    return rids


def write_dump(path: str | Path, rids: Sequence[str] | None = None, *, seed: int = 0,
               start: float = DEFAULT_START, seconds: tuple[float, float] = (1.0, 6.0),
               per_sample: int = 2, rollout_id: int = 0) -> Path:
    """A real slime dump (``torch.save`` of ``{"rollout_id", "samples"}``, written by this
    package's recording API) whose ``sglang_generate`` spans carry ``rids`` as
    ``sglang_request_id``, ``per_sample`` of them one after another in each sample,
    each lasting ``seconds`` (uniform)."""
    from slime_trace_widget.sources.dumps import save_dump
    from slime_trace_widget.tracing import (
        bind_trace,
        build_sglang_meta_trace_attrs,
        trace_span,
        use_clock,
    )

    rng = random.Random(seed)
    rids = list(rids) if rids is not None else default_rids(seed=seed)
    now = [start]
    samples = []
    with use_clock(lambda: now[0]):
        for number in range(math.ceil(len(rids) / per_sample)):
            sample: dict[str, Any] = {
                "index": number, "group_index": number // 2, "prompt": f"prompt {number}",
                "response": "", "response_length": 0, "label": "", "reward": 1.0,
                "status": "completed", "metadata": {}}
            bind_trace(sample)
            now[0] = start + rng.uniform(0.0, 1.0)
            with trace_span(sample, "generate"):
                for turn, rid in enumerate(rids[number * per_sample:(number + 1) * per_sample]):
                    now[0] += rng.uniform(0.05, 0.3)
                    prompt_tokens = rng.randint(100, 2000)
                    with trace_span(sample, "sglang_generate",
                                    {"max_new_tokens": 1024, "turn": turn}) as span:
                        now[0] += rng.uniform(*seconds)
                        completion = rng.randint(16, 1024)
                        span.update(build_sglang_meta_trace_attrs({
                            "id": rid, "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion,
                            "cached_tokens": prompt_tokens // 3,
                            "finish_reason": {"type": "stop"}}))
                    sample["response_length"] += completion
            now[0] += rng.uniform(0.01, 0.1)
            samples.append(sample)
    save_dump(path, samples, rollout_id=rollout_id)
    return Path(path)


def generation_spans(frames: Any) -> pd.DataFrame:
    """The generation spans of ``frames`` that carry a ``sglang_request_id``: their index,
    start, end, rid and the W3C ids of their context (``trace_id``, ``span_id``)."""
    from slime_trace_widget.schema import w3c_span_id, w3c_trace_id

    core = frames.span_core
    rids: dict[int, Any] = {}
    index = core.index.to_numpy()
    for table in (frames.span_start_attrs, frames.span_end_attrs):
        if "sglang_request_id" in table.keys:
            for position, value in enumerate(table.column("sglang_request_id").to_pylist()):
                if value is not None:
                    rids[int(index[position])] = str(value)
    rows = []
    trace_ids = frames.samples["trace_id"]
    for span_index, rid in sorted(rids.items()):
        row = core.loc[span_index]
        if row["name"] != "sglang_generate" or bool(row["virtual"]):
            continue
        trace_id = trace_ids.get(row["sample_row"])
        rows.append({"span": span_index, "rid": rid, "start": float(row["start"]),
                     "end": float(row["end"]),
                     "trace_id": w3c_trace_id(trace_id) if trace_id is not None else None,
                     "span_id": w3c_span_id(row["span_id"])})
    return pd.DataFrame(rows, columns=["span", "rid", "start", "end", "trace_id", "span_id"])


# --------------------------------------------------------------------------- the plan


def plan(frames: Any, scenarios: Sequence[str] = SCENARIOS, seed: int = 0,
         hosts: Sequence[str] = DEFAULT_HOSTS, *, strays: int | None = None,
         decode_iterations: int | tuple[int, int] = (3, 10), kv_senders: bool = False,
         pd_tp_size: int = 1) -> list[Request]:
    """One request per generation span of ``frames`` with a ``sglang_request_id``, its
    scenario cycling through ``scenarios`` (a rid with ``_`` takes ``underscore_rid``
    when that is among them), plus ``strays`` requests of other clients (default: one
    per ten spans, at least two, when ``stray`` is among them) within the dump's time.

    Unified requests go round-robin over ``hosts``; a PD request's prefill half to one
    host and its decode half to the next. ``decode_iterations`` is a count or a
    (low, high) range of scheduler decode iterations per request. ``kv_senders``: each
    PD prefill half runs SGLang's Mooncake KV sender on each of its ``pd_tp_size`` ranks.
    """
    unknown = set(scenarios) - set(SCENARIOS) - set(EXTRA_SCENARIOS)
    if unknown:
        raise ValueError(f"unknown scenarios {sorted(unknown)}")
    if not hosts:
        raise ValueError("plan needs at least one host")
    rng = random.Random(seed)
    ids = random.Random(f"sglang-driver-rids-{seed}")  # never the dump's own rids
    pd = {"kv_senders": kv_senders, "pd_tp_size": pd_tp_size}
    cycle = [name for name in scenarios if name not in ("stray", "underscore_rid")]
    spans = generation_spans(frames)
    requests: list[Request] = []
    turn = 0
    for row in spans.itertuples(index=False):
        if "underscore_rid" in scenarios and "_" in row.rid:
            scenario = "underscore_rid"
        elif cycle:
            scenario = cycle[turn % len(cycle)]
            turn += 1
        else:
            continue
        network = min(NETWORK_SECONDS, 0.05 * (row.end - row.start))
        traceparent = None
        if scenario in ("traceparent", "unsampled"):
            flags = "01" if scenario == "traceparent" else "00"
            traceparent = f"00-{row.trace_id}-{row.span_id}-{flags}"
        requests.append(_request(rng, int(row.span), row.rid, scenario,
                                 row.start + network, row.end - network, hosts,
                                 len(requests), decode_iterations, traceparent, ids, **pd))
    if "stray" in scenarios:
        count = max(2, len(spans) // 10) if strays is None else strays
        low = float(spans["start"].min()) if len(spans) else DEFAULT_START
        high = float(spans["end"].max()) if len(spans) else DEFAULT_START + 10.0
        for number in range(count):
            length = rng.uniform(0.5, 2.0)
            begin = rng.uniform(low, max(low, high - length))
            kind = "pd_no_client_rid" if number % 3 == 2 else "normal"
            request = _request(rng, None, _uuid(ids), kind, begin, begin + length, hosts,
                               len(requests), decode_iterations, None, ids, **pd)
            request.scenario = "stray"
            requests.append(request)
    return requests


def _uuid(rng: random.Random) -> str:
    return uuid.UUID(int=rng.getrandbits(128), version=4).hex


def _request(rng: random.Random, span: int | None, rid: str, scenario: str, start: float,
             end: float, hosts: Sequence[str], number: int,
             iterations: int | tuple[int, int], traceparent: str | None,
             ids: random.Random, *, kv_senders: bool = False, pd_tp_size: int = 1
             ) -> Request:
    count = iterations if isinstance(iterations, int) else rng.randint(*iterations)
    usage = {"prompt_tokens": rng.randint(100, 2000), "cached_tokens": rng.randint(0, 99),
             "completion_tokens": count + 1, "max_new_tokens": 1024, "temperature": 1.0,
             "model": "Qwen/Qwen3-8B", "finish_reason": "stop"}
    host = hosts[number % len(hosts)]
    if scenario in PD_SCENARIOS:
        room = rng.getrandbits(63) or 1
        prefill_rid = rid if scenario == "pd_client_rid" else _uuid(ids)
        prefill, decode = _pd_halves(rng, start, end, count,
                                     hosts[number % len(hosts)],
                                     hosts[(number + 1) % len(hosts)], prefill_rid, rid, room,
                                     usage)
        prefill.kv_sender = kv_senders
        prefill.tp_size = decode.tp_size = pd_tp_size
        halves = [prefill, decode]
    else:
        tp_size = 2 if scenario == "tp2" else 1
        chunks = rng.randint(2, 4) if scenario == "chunked" else 0
        retractions = (1 + number % 2) if scenario == "retracted" else 0
        halves = [_unified_half(rng, start, end, count, host, rid, tp_size, chunks,
                                retractions, usage)]
    for half in halves:
        _check_order(half)
    return Request(span, rid, scenario, start, end, halves, traceparent)


def _tokenizer(start: float, length: float) -> dict[str, float]:
    tokenized = start + 0.002 * length
    return {"created": start, "tokenized": tokenized, "dispatch": tokenized,
            "dispatched": tokenized + 0.001 * length}


def _prefill_ops(rng: random.Random, forward: float, length: float, chunks: int
                 ) -> tuple[list[tuple], float]:
    """The prefill batch(es) from ``forward``: the schedule of each chunk's batch and its
    result; returns the ops and when the prefill finished."""
    duration = rng.uniform(0.03, 0.08) * length
    ops: list[tuple] = [("forward", forward), ("schedule", forward + 1e-6, "extend")]
    for chunk in range(1, max(chunks, 1)):
        done = forward + duration * chunk / chunks
        ops += [("chunk_done", done), ("schedule", done + 1e-6, "extend")]
    finished = forward + duration
    ops.append(("prefill_done", finished))
    return ops, finished


def _decode_op(first: float, last_finish: float, count: int) -> tuple:
    step = (last_finish - first) / count
    gap = min(step * 0.1, 1e-4)
    return ("decode", first, step, count, gap)


def _last_result(op: tuple) -> float:
    """When the last iteration of a ``decode`` op was processed."""
    _, first, step, count, gap = op
    return first + step * count - gap


def _unified_half(rng: random.Random, start: float, end: float, count: int, host: str,
                  rid: str, tp_size: int, chunks: int, retractions: int,
                  usage: dict[str, Any]) -> Half:
    length = end - start
    tok = _tokenizer(start, length)
    recv = tok["dispatched"] + 0.0005 * length
    queued = recv + 0.001 * length
    forward = queued + rng.uniform(0.02, 0.12) * length
    ops: list[tuple] = [("recv", recv), ("queue", queued)]
    prefill, prefill_done = _prefill_ops(rng, forward, length, chunks)
    ops += prefill
    decode_start = prefill_done + rng.uniform(0.005, 0.02) * length
    decode_end = end - 0.001 * length
    count = max(count, retractions + 1)
    segments = retractions + 1
    per_segment = [count // segments + (1 if part < count % segments else 0)
                   for part in range(segments)]
    bounds = [decode_start + (decode_end - decode_start) * part / segments
              for part in range(segments + 1)]
    for part in range(segments):
        first = bounds[part]
        if part:  # retracted when the KV cache ran out: re-queued, prefilled again
            span = bounds[part + 1] - bounds[part]
            requeued = first + 1e-4 * span
            again = requeued + 0.1 * span
            redone = again + 0.1 * span
            ops += [("requeue", requeued), ("forward", again),
                    ("schedule", again + 1e-6, "extend"), ("prefill_done", redone)]
            first = redone + 0.1 * span
        ops.append(_decode_op(first, bounds[part + 1], per_segment[part]))
    ops.append(("complete", _last_result(ops[-1])))  # with the last decode result
    tok.update(first_token=prefill_done, finished=end)
    return Half("unified", host, rid, tp_size, retractions, count, chunks, None, tok, ops,
                dict(usage, completion_tokens=count + 1))


def _pd_halves(rng: random.Random, start: float, end: float, count: int, prefill_host: str,
               decode_host: str, prefill_rid: str, decode_rid: str, room: int,
               usage: dict[str, Any]) -> tuple[Half, Half]:
    length = end - start
    # prefill server
    tok = _tokenizer(start, length)
    recv = tok["dispatched"] + 0.0005 * length
    bootstrap_queue = recv + 0.001 * length
    bootstrapped = bootstrap_queue + 0.01 * length
    queued = bootstrapped + 0.001 * length
    forward = queued + rng.uniform(0.01, 0.06) * length
    ops: list[tuple] = [("recv", recv), ("bootstrap_queue", bootstrap_queue),
                        ("bootstrap_done", bootstrapped), ("queue", queued)]
    prefill, prefill_done = _prefill_ops(rng, forward, length, 0)
    ops += prefill
    kv_queue = prefill_done + 1e-6
    kv_done = kv_queue + rng.uniform(0.01, 0.03) * length
    ops += [("kv_queue", kv_queue), ("kv_done", kv_done), ("complete", kv_done)]
    tok.update(first_token=prefill_done, finished=kv_done + 0.001 * length)
    prefill_half = Half("prefill", prefill_host, prefill_rid, 1, 0, 0, 0, room, tok, ops,
                        dict(usage, completion_tokens=1))
    # decode server: the router sent it the request at the same time
    dtok = _tokenizer(start + 0.0005 * length, length)
    drecv = dtok["dispatched"] + 0.0005 * length
    prealloc = drecv + 0.001 * length
    dbootstrapped = max(prealloc, bootstrapped) + 0.001 * length
    transfer_queue = dbootstrapped + 0.001 * length
    transferred = kv_done + 0.0005 * length
    dforward = transferred + rng.uniform(0.005, 0.02) * length
    prebuilt = dforward + 0.002 * length
    decode_end = end - 0.001 * length
    dops: list[tuple] = [
        ("recv", drecv), ("prealloc_queue", prealloc), ("bootstrap_done", dbootstrapped),
        ("transfer_queue", transfer_queue), ("queue", transferred), ("forward", dforward),
        ("schedule", dforward + 1e-6, "prebuilt"), ("prebuilt_done", prebuilt),
        _decode_op(prebuilt + 0.001 * length, decode_end, count)]
    dops.append(("complete", _last_result(dops[-1])))
    dtok.update(first_token=prebuilt, finished=end)
    decode_half = Half("decode", decode_host, decode_rid, 1, 0, count, 0, room, dtok, dops,
                       dict(usage, completion_tokens=count + 1))
    return prefill_half, decode_half


def _check_order(half: Half) -> None:
    times = [half.tok[key] for key in ("created", "tokenized", "dispatch", "dispatched")]
    for op in half.sched:
        times.append(op[1])
        if op[0] == "decode":
            times.append(_last_result(op))
    times.append(half.tok["finished"])
    if any(later < earlier for earlier, later in itertools.pairwise(times)):
        raise ValueError(f"{half.server_rid}: the planned times go backwards: {times}")


# --------------------------------------------------------------------------- driving


def _ns(seconds: float, skew: float) -> int:
    return round((seconds - skew) * 1e9)


def _half_spec(half: Half, skew: float, traceparent: str | None) -> dict[str, Any]:
    sched: list[list] = []
    for op in half.sched:
        if op[0] == "decode":
            _, first, step, count, gap = op
            sched.append(["decode", _ns(first, skew), round(step * 1e9), count,
                          round(gap * 1e9)])
        elif op[0] == "complete" and sched and sched[-1][0] == "decode":
            _, first_ns, step_ns, count, gap_ns = sched[-1]  # the same ns as that result
            sched.append(["complete", first_ns + step_ns * count - gap_ns])
        else:
            sched.append([op[0], _ns(op[1], skew), *op[2:]])
    return {"role": half.role, "rid": half.server_rid, "tp": half.tp_size,
            "room": half.bootstrap_room, "traceparent": traceparent,
            "kv_sender": half.kv_sender,
            "tok": {key: _ns(value, skew) for key, value in half.tok.items()},
            "sched": sched, "usage": half.usage}


def drive(requests: Sequence[Request], endpoint: str, protocol: str,
          skews: Mapping[str, float], trace_level: int | Mapping[str, int] = 3,
          workdir: str | Path = ".", *, capture: bool = True,
          export_batch_size: int | None = None, flush_every: int = 4096,
          timeout: float = DRIVE_TIMEOUT) -> Driven:
    """Drive ``requests`` through SGLang's own tracing, one process per host, exporting
    with SGLang's own exporter to ``endpoint`` over ``protocol`` (``grpc``: ``HOST:PORT``;
    ``http/protobuf``: ``http://HOST:PORT/v1/traces``).

    ``skews``: each host's clock minus the dump's (seconds; a host not named has 0).
    ``trace_level``: ``SGLANG_TRACE_LEVEL``, for all hosts or per host. ``capture``:
    record every span SGLang ends into :attr:`Driven.emitted` (off for benchmarks).
    ``export_batch_size``: ``SGLANG_OTLP_EXPORTER_MAX_EXPORT_BATCH_SIZE`` (None: SGLang's
    default, 64). Every ``flush_every`` spans a host flushes its exporter, so that the
    ``BatchSpanProcessor``'s queue (``OTEL_BSP_MAX_QUEUE_SIZE``, set well above it)
    never overflows. Raises when a host fails; its log is in ``workdir``.
    """
    if protocol not in ("grpc", "http/protobuf"):
        raise ValueError(f"protocol {protocol!r}: grpc or http/protobuf")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    by_host: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    for request in requests:
        for half in request.halves:
            skew = float(skews.get(half.host, 0.0))
            by_host.setdefault(half.host, []).append(
                (half.start, _half_spec(half, skew, request.traceparent)))
    began = time.perf_counter()
    running: list[tuple[str, subprocess.Popen, Path, Path, Any]] = []
    try:
        for number, (host, halves) in enumerate(sorted(by_host.items())):
            halves.sort(key=lambda item: item[0])
            stem = workdir / f"host{number}"
            level = trace_level if isinstance(trace_level, int) else trace_level.get(host, 3)
            spec = {"host": host, "host_id": host, "endpoint": endpoint,
                    "capture": str(stem.with_suffix(".spans.jsonl")) if capture else None,
                    "result": str(stem.with_suffix(".result.json")),
                    "flush_every": flush_every,
                    "clock_start_ns": halves[0][1]["tok"]["created"],
                    "halves": [item[1] for item in halves]}
            spec_path = stem.with_suffix(".spec.json")
            spec_path.write_text(json.dumps(spec))
            log = stem.with_suffix(".log").open("w")
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.sglang_host", str(spec_path)],
                cwd=ROOT, env=_host_env(protocol, level, export_batch_size, flush_every),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            running.append((host, process, stem, Path(spec["result"]), log))
        deadline = time.monotonic() + timeout
        for host, process, stem, _, _ in running:
            try:
                code = process.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"host {host} did not finish within {timeout} s: "
                                   f"{_tail(stem.with_suffix('.log'))}") from None
            if code != 0:
                raise RuntimeError(f"host {host} failed ({code}): "
                                   f"{_tail(stem.with_suffix('.log'))}")
    finally:
        for _, process, _, _, log in running:
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()
    reports = {host: json.loads(result.read_text()) for host, _, _, result, _ in running}
    emitted = (read_emitted([stem.with_suffix(".spans.jsonl") for _, _, stem, _, _ in running])
               if capture else pd.DataFrame(columns=EMITTED_COLUMNS))
    return Driven(list(requests), emitted, reports, time.perf_counter() - began)


def _host_env(protocol: str, level: int, batch: int | None, flush_every: int
              ) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "SGLANG_", "PROMETHEUS_"))}
    env.update({
        "SGLANG_TRACE_LEVEL": str(level),
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": protocol,
        # comfortably above what a host queues between two flushes
        "OTEL_BSP_MAX_QUEUE_SIZE": str(max(2048, 4 * flush_every + 4 * 4096)),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
    })
    if batch is not None:
        env["SGLANG_OTLP_EXPORTER_MAX_EXPORT_BATCH_SIZE"] = str(batch)
    return env


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


EMITTED_COLUMNS = ["trace_id", "span_id", "parent_id", "name", "start_ns", "end_ns", "status",
                   "attributes", "events", "links", "host"]


def read_emitted(paths: Iterable[Path]) -> pd.DataFrame:
    """The spans the hosts captured, one row each (times in the engine's clock)."""
    rows = []
    for path in paths:
        if path.exists():
            with path.open(encoding="utf-8") as lines:
                rows += [json.loads(line) for line in lines if line.strip()]
    frame = pd.DataFrame(rows, columns=EMITTED_COLUMNS)
    if len(frame):
        frame = frame.astype({"start_ns": "int64", "end_ns": "int64"})
        # a root's parent is None (pandas would make it NaN)
        frame["parent_id"] = pd.Series([value if isinstance(value, str) else None
                                        for value in frame["parent_id"]],
                                       index=frame.index, dtype=object)
    return frame
