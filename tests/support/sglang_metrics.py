"""SGLang 0.5.23's own Prometheus metrics, served over HTTP on a CPU, set by a test.

:func:`serve_metrics` starts a child process (``python -m tests.support.sglang_metrics``)
that builds SGLang's ``SchedulerMetricsCollector`` (with ``init_new``, as a scheduler
does, so SGLang chooses the labels) and ``TokenizerMetricsCollector``, in prometheus
multiprocess mode as SGLang runs them, and serves ``/metrics`` through SGLang's own
``add_prometheus_middleware`` on a Starlette app under uvicorn, on a free loopback
port. The test sets what the scheduler would log:

* :meth:`MetricsServer.set` a ``SchedulerStats`` (any of its fields, by name, e.g.
  ``num_running_reqs``, ``num_queue_reqs``, ``token_usage``, ``gen_throughput``,
  ``cache_hit_rate``, ``num_retracted_reqs``) through ``log_stats``;
* :meth:`MetricsServer.retract` the retraction counters (``increment_retracted_reqs``);
* :meth:`MetricsServer.finish_request` one finished request on the tokenizer's collector.

Each call returns once the child has applied it, so the next scrape sees it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: A hang guard for the child's start and each command (imports are slow on a busy box).
WAIT_SECONDS = 120.0

#: Metric names SGLang 0.5.23 exposes for the quantities a load view wants, by the
#: ``SchedulerStats`` field (or call) that sets them. Labels: ``engine_type``,
#: ``model_name``, ``moe_ep_rank``, ``pp_rank``, ``tp_rank`` (and ``dp_rank`` with data
#: parallelism); the tokenizer's metrics carry ``engine_type``, ``model_name`` (and
#: ``is_streaming`` on the request counters).
METRIC_NAMES = {
    "num_running_reqs": "sglang:num_running_reqs",
    "num_queue_reqs": "sglang:num_queue_reqs",
    "token_usage": "sglang:token_usage",
    "gen_throughput": "sglang:gen_throughput",
    "cache_hit_rate": "sglang:cache_hit_rate",
    "num_retracted_reqs": "sglang:num_retracted_reqs",
    "retracted_requests_total": "sglang:num_retracted_requests_total",
    "retracted_input_tokens_total": "sglang:num_retracted_input_tokens_total",
    "retracted_output_tokens_total": "sglang:num_retracted_output_tokens_total",
}


class MetricsServer:
    """A running metrics child: ``url`` is its ``/metrics`` address."""

    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process = process
        self.url = url
        self._lock = threading.Lock()

    def _command(self, message: dict[str, Any]) -> None:
        with self._lock:
            if self.process.poll() is not None:
                raise RuntimeError(f"the metrics server has exited: {self._stderr()}")
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
            answer = _readline(self.process, WAIT_SECONDS)
        if answer != "ok":
            raise RuntimeError(f"the metrics server answered {answer!r}: {self._stderr()}")

    def set(self, **stats: float) -> None:
        """Log a ``SchedulerStats`` with these fields (the rest at their defaults), as the
        scheduler does every few batches."""
        self._command({"stats": stats})

    def retract(self, requests: int, input_tokens: int = 0, output_tokens: int = 0) -> None:
        """Count a retraction of ``requests`` requests (``increment_retracted_reqs``)."""
        self._command({"retract": [requests, input_tokens, output_tokens]})

    def finish_request(self, prompt_tokens: int, generation_tokens: int, e2e_latency: float,
                       cached_tokens: int = 0, time_to_first_token: float | None = None
                       ) -> None:
        """One finished request on the tokenizer's collector."""
        self._command({"request": {"prompt_tokens": prompt_tokens,
                                   "generation_tokens": generation_tokens,
                                   "cached_tokens": cached_tokens, "e2e_latency": e2e_latency,
                                   "ttft": time_to_first_token}})

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
            try:
                self.process.wait(WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def _stderr(self) -> str:
        if self.process.poll() is None:
            return "(still running)"
        return (self.process.stderr.read() or "")[-4000:]

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _readline(process: subprocess.Popen, timeout: float) -> str:
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()),
                              daemon=True)
    reader.start()
    reader.join(timeout)
    if not lines:
        process.kill()
        raise RuntimeError(f"the metrics server said nothing within {timeout} s")
    return lines[0].strip()


def serve_metrics(*, model_name: str = "Qwen/Qwen3-8B", engine_type: str = "unified",
                  tp_rank: int = 0, dp_rank: int | None = None,
                  initial: dict[str, float] | None = None) -> MetricsServer:
    """Start SGLang's metrics on a free 127.0.0.1 port for a server of ``engine_type``
    (``unified``, ``prefill`` or ``decode``) at ``tp_rank``; ``initial`` is logged first.
    Use as a context manager, or call :meth:`MetricsServer.close`."""
    if engine_type not in ("unified", "prefill", "decode"):
        raise ValueError(f"engine_type {engine_type!r}")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PROMETHEUS_", "SGLANG_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    config = {"model_name": model_name, "engine_type": engine_type, "tp_rank": tp_rank,
              "dp_rank": dp_rank}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.sglang_metrics", json.dumps(config)],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    first = _readline(process, WAIT_SECONDS)
    if not first.startswith("serving "):
        process.kill()
        raise RuntimeError(f"the metrics server did not start: {first!r} "
                           f"{process.communicate()[1][-4000:]}")
    server = MetricsServer(process, first.split(" ", 1)[1])
    if initial:
        server.set(**initial)
    return server


# --------------------------------------------------------------------------- the child


def _child(config: dict[str, Any]) -> int:
    # SGLang's launcher sets this before anything imports prometheus_client; its
    # collectors then write to files there and /metrics reads them all.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="sglang-metrics-")
    from .sglang_import import import_sglang

    sgl = import_sglang()
    import uvicorn
    from sglang.srt.runtime_context import get_context, get_parallel
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.utils.common import add_prometheus_middleware
    from starlette.applications import Starlette

    collectors = sgl.metrics_collector
    mode = {"unified": "null"}.get(config["engine_type"], config["engine_type"])
    rank = config["tp_rank"]
    server_args = ServerArgs(model_path=config["model_name"],
                             served_model_name=config["model_name"], enable_metrics=True,
                             disaggregation_mode=mode, tp_size=rank + 1)
    get_context().set_server_args(server_args)
    # The ranks a launcher's SpawnRanks would give this scheduler process.
    get_parallel().override_permanently(tp_rank=rank, pp_rank=0, attn_tp_rank=rank,
                                        attn_cp_rank=0, moe_ep_rank=0,
                                        dp_rank=config["dp_rank"])
    scheduler = collectors.SchedulerMetricsCollector.init_new(
        server_args=server_args, enable_priority_scheduling=False, enable_lora=False,
        enable_hierarchical_cache=False).collector
    tokenizer_labels = collectors.tokenizer_metric_labels()
    tokenizer = collectors.TokenizerMetricsCollector(server_args=server_args,
                                                     labels=tokenizer_labels)
    app = Starlette()
    add_prometheus_middleware(app)
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                        lifespan="off"))
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    while not web.started:
        if not thread.is_alive():
            return 1
        thread.join(0.05)
    port = web.servers[0].sockets[0].getsockname()[1]
    print(f"serving http://127.0.0.1:{port}/metrics", flush=True)
    fields = {field.name: field for field in collectors.SchedulerStats.__dataclass_fields__
              .values()}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            command = json.loads(line)
            if "stats" in command:
                stats = collectors.SchedulerStats()
                for name, value in command["stats"].items():
                    if name not in fields:
                        raise KeyError(f"SchedulerStats has no field {name}")
                    current = getattr(stats, name)
                    if isinstance(current, collectors.QueueCount):
                        value = collectors.QueueCount(total=int(value))
                    setattr(stats, name, value)
                scheduler.log_stats(stats)
            elif "retract" in command:
                scheduler.increment_retracted_reqs(*command["retract"])
            elif "request" in command:
                request = command["request"]
                tokenizer.observe_one_finished_request(
                    tokenizer_labels, request["prompt_tokens"], request["generation_tokens"],
                    request["cached_tokens"], request["e2e_latency"], has_grammar=False)
                if request.get("ttft") is not None:
                    tokenizer.observe_time_to_first_token(tokenizer_labels, request["ttft"],
                                                          stream=False)
            else:
                raise KeyError(f"unknown command {sorted(command)}")
        except Exception as exc:  # report it and go on serving
            print(f"error: {type(exc).__name__}: {exc}", flush=True)
            continue
        print("ok", flush=True)
    web.should_exit = True
    thread.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(_child(json.loads(sys.argv[1])))
