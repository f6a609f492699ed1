"""One simulated SGLang machine: SGLang 0.5.23's own tracing code, called as its servers call it.

Run by :func:`tests.support.sglang_driver.drive` as
``python -m tests.support.sglang_host SPEC.json`` (cwd the repository root), one process
per host, because SGLang's tracer provider is process-global. The process

* imports SGLang's ``trace`` and ``req_time_stats`` (``sglang_import``), gives
  ``_get_host_id`` the host's fake machine id, replaces the clock those modules read
  (``req_time_stats.time``, ``trace.get_cur_time_ns``) with a virtual one, and the
  ``uuid4`` that names schedule batches with a seeded one (``os.urandom`` is slow);
* calls SGLang's own ``process_tracing_init``: its tracer provider, id generator,
  ``BatchSpanProcessor`` and OTLP exporter (gRPC or HTTP by
  ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``), configured by the environment the driver set;
* runs a thread per server thread SGLang has (the tokenizer, one scheduler per TP rank),
  each registered with ``trace_set_thread_info`` as SGLang registers it, and drives every
  request half of the spec through ``APIServerReqTimeStats`` in the tokenizer thread,
  pickles it as the tokenizer sends it, and unpickles it into ``SchedulerReqTimeStats``
  in each rank's thread, calling the methods in the order SGLang's scheduler calls them;
* optionally records every span SGLang ends, through an extra ``SimpleSpanProcessor`` on
  SGLang's provider, to a JSON-lines file (the truth the tests compare the store with);
* for a prefill half with ``kv_sender``, runs on each TP rank SGLang's own
  ``MooncakeKVSender`` (Mooncake is the default transfer backend; its ``__init__`` opens a
  trace of its own, "Sender Req 0x…"): created as the request enters the bootstrap
  queue, its KV sent as it enters the transfer queue, the chunk taken by a transfer
  worker thread ("mooncake transfer worker 0", its slices written with SGLang's own
  stages as ``transfer_worker`` writes them) until the transfer finished, then polled to
  ``Success``, which ends the sender's trace. Its KV manager is :class:`_KVManager`: a
  real one needs a transfer engine and RDMA devices.

Each scheduler op of the spec carries the engine-clock time (ns) the driver chose: the
virtual clock is set to it before the call, and the time is passed where SGLang's method
takes one. Exports are paced with the provider's ``force_flush`` so the processor's queue
never overflows; the result file tells how many spans ended, reached the exporter, and
were refused.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import random
import sys
import time
import types
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .sglang_import import import_mooncake, import_sglang

#: perf_counter() = time() - OFFSET in the virtual clock: a power of two, so that for
#: epoch seconds in [2**30, 2**31) (2004 to 2038) the conversions SGLang does are exact.
OFFSET = float(2**30)


class VirtualClock:
    """The ``time`` module as SGLang's tracing reads it, at a time the driver sets."""

    def __init__(self) -> None:
        self.now = 0.0  # epoch seconds in the engine's clock

    def set_ns(self, ns: int) -> float:
        """Move to ``ns`` (epoch ns); returns the perf_counter reading there."""
        self.now = ns / 1e9
        return self.now - OFFSET

    def time(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        return self.now - OFFSET

    def monotonic(self) -> float:
        return self.now - OFFSET

    def time_ns(self) -> int:
        # The same float arithmetic as req_time_stats.convert_time_to_realtime_ns, so a time
        # SGLang reads itself equals one it converts from a perf_counter stamp.
        return int((self.perf_counter() + OFFSET) * 1e9)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _Req:
    """What SGLang's batch helpers read of a scheduler ``Req``."""

    __slots__ = ("time_stats",)

    def __init__(self, time_stats: Any) -> None:
        self.time_stats = time_stats


class _Batch:
    """What ``set_schedule_time_batch`` reads of a ``ScheduleBatch``."""

    __slots__ = ("forward_mode", "reqs")

    def __init__(self, reqs: list[_Req], forward_mode: Any) -> None:
        self.reqs = reqs
        self.forward_mode = forward_mode


class _KVManager:
    """What SGLang's ``CommonKVSender`` reads and calls of its KV manager, as a prefill
    server's ``MooncakeKVManager`` answers them without a deferred bootstrap, CP or KV
    sharding: each room's status, and the chunks queued for the transfer workers."""

    deferred_bootstrap = None
    is_dummy_cp_rank = False
    kv_shard_size = 1
    enable_all_cp_ranks_for_transfer = False
    defer_decode_allocation = False
    reports_transfer_latency = False

    def __init__(self, trace_module: str) -> None:
        self.sender_trace_module = trace_module
        self.request_status: dict[int, Any] = {}
        self._staging_outstanding: dict[int, int] = {}
        self.queued: list[Any] = []  # each chunk's trace context, for a transfer worker

    def update_status(self, room: int, status: Any) -> None:
        self.request_status[room] = status

    def check_status(self, room: int) -> Any:
        return self.request_status[room]

    def prepare_send_state_indices(self, state_indices: Any) -> Any:
        return state_indices

    def add_transfer_request(self, room: int, *args: Any, trace_ctx: Any = None,
                             **kwargs: Any) -> None:
        self.queued.append(trace_ctx)


class _KVSending:
    """One prefill TP rank's Mooncake KV sender for one request (see the module's
    docstring), moved along by the scheduler ops it sits beside."""

    def __init__(self, host: Host, rank: int, room: int) -> None:
        self.host = host
        self.rank = rank
        self.room = room
        self.manager = _KVManager(host.mooncake.Manager.sender_trace_module)
        self.sender: Any = None
        self.chunk: Any = None
        self.sent_at = 0.0

    def before(self, op: str, at: int) -> None:
        """What the sender does as the scheduler reaches ``op`` at ``at`` (engine ns)."""
        clock = self.host.clock
        if op == "bootstrap_queue":  # PrefillBootstrapQueue.create_sender
            clock.set_ns(at)
            self.sender = self.host.mooncake.Sender(self.manager, "127.0.0.1:8998", self.room)
            self.sender.init(8, 0)
        elif op == "kv_queue" and self.sender is not None:  # send_kv_chunk, last chunk
            self.sent_at = clock.set_ns(at)
            self.sender.send(np.arange(8, dtype=np.int32))
            self.chunk = self.manager.queued.pop()
            self.host.kv_worker(self.rank).run(self.worker_start)
        elif op == "kv_done" and self.chunk is not None:
            clock.set_ns(at)
            self.host.kv_worker(self.rank).run(self.worker_finish)
            self.sender.poll()  # Success: the sender's trace ends

    def worker_start(self) -> None:
        stage = self.host.mooncake.stages.MooncakeRequestStage.MOONCAKE_WORKER_SEND
        self.chunk.rebuild_thread_context()
        self.chunk.trace_slice_start(stage.stage_name, stage.level)

    def worker_finish(self) -> None:
        stages = self.host.mooncake.stages
        stage = stages.MooncakeRequestStage
        stages.mooncake_trace_slice(self.chunk, stage.MOONCAKE_WORKER_SEND_SESSION,
                                    self.sent_at)
        self.chunk.trace_slice_end(stage.MOONCAKE_WORKER_SEND.stage_name,
                                   stage.MOONCAKE_WORKER_SEND.level, thread_finish_flag=True)
        self.manager.update_status(self.room, self.host.mooncake.KVPoll.Success)


class _Exporter:
    """Hands SGLang's exporter its batches unchanged, counting spans and failures."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spans = 0
        self.failed = 0

    def export(self, spans: Sequence[Any]) -> Any:
        result = self.inner.export(spans)
        self.spans += len(spans)
        if getattr(result, "name", "") != "SUCCESS":
            self.failed += len(spans)
        return result

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        self.inner.shutdown(*args, **kwargs)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _span_processors() -> tuple[type, type]:
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    return SpanProcessor, SimpleSpanProcessor


def _counter(base: type) -> Any:
    class Counter(base):  # type: ignore[misc, valid-type]
        """Counts the spans SGLang's code ends (the exporter must get all of them)."""

        def __init__(self) -> None:
            self.ended = 0

        def on_end(self, span: Any) -> None:
            self.ended += 1

    return Counter()


class _JsonLines:
    """A span exporter writing each span as a JSON line: what SGLang emitted, in full."""

    def __init__(self, path: Path, host: str) -> None:
        self.file = path.open("w", encoding="utf-8")
        self.host = host

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        for span in spans:
            parent = span.parent
            self.file.write(json.dumps({
                "trace_id": format(span.context.trace_id, "032x"),
                "span_id": format(span.context.span_id, "016x"),
                "parent_id": format(parent.span_id, "016x") if parent is not None else None,
                "name": span.name,
                "start_ns": span.start_time,
                "end_ns": span.end_time,
                "status": int(span.status.status_code.value),
                "attributes": _plain(dict(span.attributes or {})),
                "events": [{"name": event.name, "time_ns": event.timestamp,
                            "attributes": _plain(dict(event.attributes or {}))}
                           for event in span.events],
                "links": [{"trace_id": format(link.context.trace_id, "032x"),
                           "span_id": format(link.context.span_id, "016x")}
                          for link in span.links],
                "host": self.host,
            }, ensure_ascii=False) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.file.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.file.flush()
        return True


def _plain(attrs: dict[str, Any]) -> dict[str, Any]:
    return {key: list(value) if isinstance(value, tuple) else value
            for key, value in attrs.items()}


class _Thread:
    """One SGLang server thread: a single worker thread registered with SGLang's
    ``trace_set_thread_info`` the way the server registers it at start-up."""

    def __init__(self, register: Callable[[], None]) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, initializer=register)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.pool.submit(fn, *args).result()

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class Host:
    """The servers of one machine, driving request halves through SGLang's code."""

    def __init__(self, spec: dict[str, Any], sgl: Any, clock: VirtualClock) -> None:
        self.spec = spec
        self.sgl = sgl
        self.clock = clock
        self.rts = sgl.req_time_stats
        self.servers: dict[tuple[str, int], tuple[_Thread, list[_Thread]]] = {}
        self.kv_workers: dict[int, _Thread] = {}
        self.mooncake: Any = None
        self.pace: Callable[[], None] = lambda: None
        modes = sgl.DisaggregationMode
        self.modes = {"unified": modes.NULL, "prefill": modes.PREFILL, "decode": modes.DECODE}
        self.forward = {"extend": sgl.ForwardMode.EXTEND, "decode": sgl.ForwardMode.DECODE,
                        "prebuilt": sgl.ForwardMode.PREBUILT}

    # ----------------------------------------------------------------- threads

    def server(self, role: str, tp_size: int) -> tuple[_Thread, list[_Thread]]:
        key = (role, tp_size)
        if key not in self.servers:
            trace = self.sgl.trace
            # http_server.lifespan and run_scheduler_process name their threads so.
            prefix = {"unified": "", "prefill": "Prefill", "decode": "Decode"}[role]
            tokenizer = _Thread(lambda: trace.trace_set_thread_info(f"{prefix}Tokenizer"))
            label = {"unified": "Scheduler", "prefill": "Prefill Scheduler",
                     "decode": "Decode Scheduler"}[role]
            ranks = [_Thread(lambda rank=rank: trace.trace_set_thread_info(label, rank, None, 0))
                     for rank in range(tp_size)]
            self.servers[key] = (tokenizer, ranks)
        return self.servers[key]

    def kv_worker(self, rank: int) -> _Thread:
        """TP rank ``rank``'s Mooncake transfer worker thread, registered as
        ``MooncakeKVManager.transfer_worker`` registers it."""
        if rank not in self.kv_workers:
            trace = self.sgl.trace
            self.kv_workers[rank] = _Thread(lambda: trace.trace_set_thread_info(
                "mooncake transfer worker 0", tp_rank=rank, dp_rank=0))
        return self.kv_workers[rank]

    def kv_sending(self, half: dict[str, Any], rank: int) -> _KVSending | None:
        """A Mooncake sender for a prefill half with ``kv_sender`` (None otherwise)."""
        if not half.get("kv_sender") or half["role"] != "prefill" or not half.get("room"):
            return None
        if self.mooncake is None:
            self.mooncake = import_mooncake()
            self.mooncake.stages.time = self.clock  # its slices read perf_counter()
        return _KVSending(self, rank, int(half["room"]))

    def close(self) -> None:
        for tokenizer, ranks in self.servers.values():
            tokenizer.close()
            for rank in ranks:
                rank.close()
        for worker in self.kv_workers.values():
            worker.close()

    # ----------------------------------------------------------------- a half

    def drive(self, half: dict[str, Any]) -> None:
        tokenizer, ranks = self.server(half["role"], half["tp"])
        stats, message = tokenizer.run(self.tokenizer_start, half)
        for number, rank in enumerate(ranks):  # each TP rank unpickles the broadcast request
            rank.run(self.scheduler, message, half, number)
        tokenizer.run(self.tokenizer_finish, stats, half)

    def tokenizer_start(self, half: dict[str, Any]) -> tuple[Any, bytes]:
        """TokenizerManager: _init_req_state, tokenize, dispatch to the scheduler."""
        clock, times = self.clock, half["tok"]
        stats = self.rts.APIServerReqTimeStats(disagg_mode=self.modes[half["role"]])
        header = {"traceparent": half["traceparent"]} if half.get("traceparent") else None
        stats.init_trace_ctx(half["rid"], half.get("room"), header)
        stats.set_created_time(clock.set_ns(times["created"]))
        stats.set_tokenize_finish_time(clock.set_ns(times["tokenized"]))
        stats.set_api_server_dispatch_time(clock.set_ns(times["dispatch"]))
        message = pickle.dumps(stats)  # sent with the TokenizedGenerateReqInput
        stats.set_api_server_dispatch_finish_time(clock.set_ns(times["dispatched"]))
        return stats, message

    def tokenizer_finish(self, stats: Any, half: dict[str, Any]) -> None:
        """TokenizerManager: the finished output arrives (non-streaming: one batch)."""
        clock, times = self.clock, half["tok"]
        stats.set_first_token_time(clock.set_ns(times["first_token"]))
        arrived = clock.set_ns(times["finished"])
        stats.set_last_time(arrived)
        stats.set_finished_time(arrived, span_attrs=self.root_attrs(half))

    def root_attrs(self, half: dict[str, Any]) -> dict[str, Any]:
        """What TokenizerManager.convert_to_span_attrs puts on the request root."""
        names = self.sgl.trace.SpanAttributes
        usage = half["usage"]
        attrs: dict[str, Any] = {
            names.GEN_AI_USAGE_COMPLETION_TOKENS: usage["completion_tokens"],
            names.GEN_AI_USAGE_PROMPT_TOKENS: usage["prompt_tokens"],
            names.GEN_AI_USAGE_CACHED_TOKENS: usage["cached_tokens"],
            names.GEN_AI_REQUEST_ID: half["rid"],
            names.GEN_AI_REQUEST_MAX_TOKENS: usage["max_new_tokens"],
            names.GEN_AI_REQUEST_TEMPERATURE: usage["temperature"],
            names.GEN_AI_RESPONSE_MODEL: usage["model"],
            names.GEN_AI_RESPONSE_FINISH_REASONS: json.dumps([usage["finish_reason"]]),
        }
        return attrs

    def scheduler(self, message: bytes, half: dict[str, Any], rank: int = 0) -> None:
        """One scheduler rank: Req(...) from the received request, then the ops as the
        scheduler loop, its batch result processor and the PD queues call them (and a
        prefill rank's KV sender, see :class:`_KVSending`)."""
        clock, rts = self.clock, self.rts
        ops = half["sched"]
        name, at = ops[0]
        assert name == "recv", ops[0]
        received = pickle.loads(message)
        clock.set_ns(at)
        stats = rts.SchedulerReqTimeStats.new_from_obj(received)  # Req.__init__
        stats.set_metrics_collector(None)
        stats.set_scheduler_recv_time(clock.perf_counter())
        req = _Req(stats)
        calls: dict[str, Callable[[float], Any]] = {
            "queue": stats.set_wait_queue_entry_time,  # _add_request_to_queue, pop_bootstrapped
            "requeue": stats.set_wait_queue_entry_time,  # _add_request_to_queue(is_retracted)
            "bootstrap_queue": stats.set_prefill_bootstrap_queue_entry_time,
            "bootstrap_done": stats.set_bootstrap_done_time,
            "prealloc_queue": stats.set_decode_prealloc_queue_entry_time,
            "transfer_queue": stats.set_decode_transfer_queue_entry_time,
            "chunk_done": stats.set_last_chunked_prefill_finish_time,
            "prefill_done": stats.set_prefill_finished_time,
            "kv_queue": stats.set_prefill_transfer_queue_entry_time,
            "kv_done": stats.set_prefill_kv_transfer_finish_time,
            "prebuilt_done": stats.set_decode_prebuilt_finish_time,
            "complete": stats.set_completion_time,
        }
        sending = self.kv_sending(half, rank)
        for op in ops[1:]:
            name, at = op[0], op[1]
            if sending is not None:
                sending.before(name, at)
            if name == "forward":  # get_new_batch_prefill / get_new_prebuilt_batch
                clock.set_ns(at)
                rts.set_time_batch([req], "set_forward_entry_time")
            elif name == "schedule":  # the end of get_next_batch_to_run
                clock.set_ns(at)
                rts.set_schedule_time_batch(_Batch([req], self.forward[op[2]]))
            elif name == "decode":
                self.decode(req, at, *op[2:])
            else:
                calls[name](clock.set_ns(at))

    def decode(self, req: _Req, first: int, step: int, count: int, gap: int) -> None:
        """``count`` decode iterations: the batch scheduled at ``first + i * step``, its
        result processed ``gap`` ns before the next one is scheduled."""
        clock, rts = self.clock, self.rts
        batch = _Batch([req], self.forward["decode"])
        stats = req.time_stats
        for number in range(count):
            scheduled = first + number * step
            clock.set_ns(scheduled)
            rts.set_schedule_time_batch(batch)
            stats.set_last_decode_finish_time(clock.set_ns(scheduled + step - gap))
            self.pace()


# --------------------------------------------------------------------------- the process


def _install(spec: dict[str, Any]) -> tuple[Any, VirtualClock, _Exporter]:
    sgl = import_sglang()
    trace, rts = sgl.trace, sgl.req_time_stats
    host_id = spec["host_id"]
    trace._get_host_id = lambda: host_id
    clock = VirtualClock()
    clock.set_ns(int(spec.get("clock_start_ns") or time.time_ns()))
    rts.time = clock
    rts.real_time = clock.time
    rts.monotonic_time = clock.perf_counter
    trace.get_cur_time_ns = clock.time_ns
    rts.calibrate_time_diff()
    # set_schedule_time_batch names each batch with uuid4().hex[:8]: os.urandom costs tens
    # of microseconds a call here, an eighth of the whole drive; seeded ids are as unique.
    ids = random.Random(host_id)
    rts.uuid = types.SimpleNamespace(
        uuid4=lambda: uuid.UUID(int=ids.getrandbits(128), version=4))
    exporters: list[_Exporter] = []
    make_exporter = trace.get_otlp_span_exporter

    def counted(endpoint: str) -> _Exporter:
        exporters.append(_Exporter(make_exporter(endpoint)))
        return exporters[-1]

    trace.get_otlp_span_exporter = counted
    trace.process_tracing_init(spec["endpoint"], None)
    return sgl, clock, exporters[0]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(args[0]).read_text())
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    began = time.perf_counter()
    sgl, clock, exporter = _install(spec)
    from opentelemetry import trace as otel_trace

    provider = otel_trace.get_tracer_provider()
    span_processor, simple = _span_processors()
    counter = _counter(span_processor)
    provider.add_span_processor(counter)
    if spec.get("capture"):
        provider.add_span_processor(simple(_JsonLines(Path(spec["capture"]), spec["host"])))
    host = Host(spec, sgl, clock)
    flush_every = int(spec.get("flush_every") or 4096)
    flushed = [0]

    def pace() -> None:
        if counter.ended - flushed[0] >= flush_every:
            provider.force_flush()
            flushed[0] = counter.ended

    host.pace = pace
    ready = time.perf_counter()
    try:
        for half in spec["halves"]:
            host.drive(half)
            pace()
    finally:
        host.close()
        provider.force_flush()
        provider.shutdown()
    result = {"host": spec["host"], "halves": len(spec["halves"]),
              "spans_ended": counter.ended, "spans_exported": exporter.spans,
              "spans_failed": exporter.failed, "dropped": counter.ended - exporter.spans,
              "startup_seconds": ready - began, "drive_seconds": time.perf_counter() - ready,
              "sglang": sgl.version, "pid": os.getpid()}
    Path(spec["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
