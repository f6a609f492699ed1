"""Engine traces: the OTLP receiver's throughput, loading a dump with its engine traces,
and how well the join places each request.

Usage::

    python benchmarks/bench_engine.py                 # a 256-sample demo rollout, PD engines
    python benchmarks/bench_engine.py --samples 64 --copies 5

A demo rollout (benchmarks/out/engine_demo.pt) gets, for each generation span, the
request its engines would trace (``devtools.engine_traces``, PD: prefill on one host,
decode on another, clocks +1.5 s and -1.5 s off), plus ``--copies - 1`` copies of all
of them at other hours under other rids: a collector folder holding that many times
the spans the dump needs. Prints:

* receiver throughput: ``slime-trace-viewer collect`` in its own process, fed by 8
  exporter processes at once (4 OTLP/HTTP, 4 OTLP/gRPC, the SDK's own exporters
  sending batches of 512 spans made beforehand): spans/s from the first send to the
  last answer, spans kept against spans sent, the collector's peak RSS (targets:
  20,000 spans/s, nothing lost, under 500 MB);
* ``load_frames(dump)`` against ``load_frames(dump, engine_traces=DIR)``, each in a
  fresh interpreter, best of 3, alternating (target: at most 2x + 0.5 s);
* the join against the truth: slices attached, the largest duration error and start
  error (targets: all, exact, within 50 ms).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
OUT = HERE / "out"
ROOT = HERE.parent
SKEWS = {"prefill-0": 1.5, "decode-0": -1.5}
BATCH = 512
EXPORTERS = 8
HOUR = 3600.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--copies", type=int, default=25,
                        help="the folder holds this many times the spans the dump needs")
    args = parser.parse_args()
    from slime_trace_widget.demo import write_demo_dump
    from slime_trace_widget.devtools.browser import free_port
    from slime_trace_widget.devtools.engine_traces import requests_for
    from slime_trace_widget.sources.loading import load_frames

    OUT.mkdir(exist_ok=True)
    dump = OUT / f"engine_demo_{args.samples}.pt"
    if not dump.exists():
        write_demo_dump(dump, n_samples=args.samples, seed=11)
    frames = load_frames(str(dump), progress=False)
    truth = requests_for(frames, pd=True, hosts=tuple(SKEWS))
    batches = _span_batches(truth, args.copies)
    sent = sum(len(batch) for batch in batches)
    print(f"dump {dump.name}: {len(frames.samples)} samples, {len(truth)} requests; "
          f"{sent:,} engine spans ({args.copies}x what the dump needs)")

    folder = OUT / "engine_collector"
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    http_port, grpc_port = free_port(), free_port()
    collector = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", "collect", str(folder),
         "--http", f"127.0.0.1:{http_port}", "--grpc", f"127.0.0.1:{grpc_port}"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    print(collector.stdout.readline().strip())
    seconds = _send(batches, http_port, grpc_port)
    peak = _peak_rss(collector.pid)
    collector.send_signal(signal.SIGTERM)
    print(collector.communicate(timeout=600)[0].strip())
    from slime_trace_widget.sources.engine.store import load_engine_traces

    kept = len(load_engine_traces(folder))
    print("\n== receiver: 8 exporters at once (4 OTLP/HTTP, 4 OTLP/gRPC) ==")
    print(f"  {sent:,} spans in {seconds:.2f} s: {sent / seconds:,.0f} spans/s   kept {kept:,} "
          f"of {sent:,}   collector peak RSS {peak / 2**20:.0f} MB")

    alone, joined = _load_times(dump, folder)
    print("\n== load_frames, fresh interpreter, best of 3 ==")
    print(f"  dump alone {alone:.2f} s   with engine traces {joined:.2f} s   "
          f"ratio {joined / alone:.2f}x   (target <= 2x + 0.5 s: {2 * alone + 0.5:.2f} s)")

    report = _accuracy(dump, folder, truth)
    print("\n== join against the truth ==")
    print(f"  slices attached {report['attached']:,} of {report['expected']:,}   "
          f"largest duration error {report['duration_error'] * 1e6:.1f} us   "
          f"largest start error {report['start_error'] * 1e3:.2f} ms   skews found "
          + ", ".join(f"{h} {s:+.4f} s" for h, s in report["skews"].items()))
    print("\n== targets ==")
    rows = [("receiver >= 20,000 spans/s", sent / seconds >= 20_000, f"{sent / seconds:,.0f}"),
            ("nothing lost", kept == sent, f"{kept:,}/{sent:,}"),
            ("collector RSS < 500 MB", peak < 500 * 2**20, f"{peak / 2**20:.0f} MB"),
            ("load with engine traces <= 2x + 0.5 s", joined <= 2 * alone + 0.5,
             f"{joined:.2f} s vs {2 * alone + 0.5:.2f} s"),
            ("every slice attached", report["attached"] == report["expected"],
             f"{report['attached']}/{report['expected']}"),
            ("durations exact (< 2 us)", report["duration_error"] < 2e-6,
             f"{report['duration_error'] * 1e6:.2f} us"),
            ("starts within 50 ms", report["start_error"] < 0.05,
             f"{report['start_error'] * 1e3:.2f} ms")]
    for what, met, figure in rows:
        print(f"  {what:<44} {'met' if met else 'not met':>8}   {figure}")
    return 0


def _span_batches(truth: list[Any], copies: int) -> list[list[Any]]:
    """The SDK's finished spans of the requests and their copies, in export batches."""
    from dataclasses import replace

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from slime_trace_widget.devtools.engine_traces import Half, Slice, replay

    def shifted(request: Any, copy: int) -> Any:
        hours = copy * HOUR
        halves = [Half(h.role, h.host, h.pid, [Slice(p.name, p.start + hours, p.end + hours,
                                                     p.attrs, [(n, t + hours, a) for n, t, a
                                                               in p.events])
                                               for p in h.slices]) for h in request.halves]
        return replace(request, rid=f"x{copy}{request.rid}", span=None, halves=halves)

    memory = InMemorySpanExporter()
    everything = list(truth) + [shifted(r, copy) for copy in range(1, copies) for r in truth]
    replay(everything, lambda host: memory, SKEWS, batch=False)
    spans = list(memory.get_finished_spans())
    return [spans[i:i + BATCH] for i in range(0, len(spans), BATCH)]


def _export(share: list[list[Any]], kind: str, port: int, start: Any) -> None:
    """One exporter process: its batches through the SDK's OTLP exporter."""
    if kind == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True)
    from opentelemetry.sdk.trace.export import SpanExportResult

    start.wait()
    for batch in share:
        if exporter.export(batch) is not SpanExportResult.SUCCESS:
            sys.exit(1)
    exporter.shutdown()


def _send(batches: list[list[Any]], http_port: int, grpc_port: int) -> float:
    """Seconds for 8 exporter processes to send every batch and have it acknowledged."""
    context = multiprocessing.get_context("fork")
    start = context.Event()
    workers = []
    for k in range(EXPORTERS):
        kind, port = ("http", http_port) if k % 2 == 0 else ("grpc", grpc_port)
        workers.append(context.Process(target=_export, args=(batches[k::EXPORTERS], kind,
                                                              port, start)))
    for worker in workers:
        worker.start()
    time.sleep(2.0)  # let every exporter import and connect before the clock starts
    began = time.perf_counter()
    start.set()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - began
    failed = [w.exitcode for w in workers if w.exitcode]
    if failed:
        raise SystemExit(f"an exporter failed: exit codes {failed}")
    return seconds


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


LOAD = """
import sys, time, json
from slime_trace_widget.sources.loading import load_frames
began = time.perf_counter()
frames = load_frames(sys.argv[1], progress=False,
                     engine_traces=sys.argv[2] if len(sys.argv) > 2 else None)
print(json.dumps({"seconds": time.perf_counter() - began, "spans": len(frames.span_core)}))
"""


def _load_times(dump: Path, folder: Path) -> tuple[float, float]:
    """Best of 3 of each, alternating, each in a fresh interpreter (imports not timed)."""
    alone, joined = [], []
    for _ in range(3):
        for extra, out in (([], alone), ([str(folder)], joined)):
            result = subprocess.run([sys.executable, "-c", LOAD, str(dump), *extra],
                                    capture_output=True, text=True, check=True, cwd=ROOT)
            out.append(json.loads(result.stdout.strip().splitlines()[-1])["seconds"])
    return min(alone), min(joined)


def _accuracy(dump: Path, folder: Path, truth: list[Any]) -> dict[str, Any]:
    """Slices attached, and the largest errors of their durations and starts."""
    from slime_trace_widget.devtools.engine_traces import joined_halves
    from slime_trace_widget.sources.loading import load_frames

    frames = load_frames(str(dump), progress=False, engine_traces=str(folder))
    expected = attached = 0
    duration_error = start_error = 0.0
    for _, half, _, children in joined_halves(frames, truth):
        expected += len(half.slices)
        for piece in half.slices:
            match = children[children["name"].astype(str) == piece.name]
            if len(match) != 1:
                continue
            attached += 1
            duration_error = max(duration_error, abs(
                float(match["duration"].iloc[0]) - (piece.end - piece.start)))
            start_error = max(start_error, abs(float(match["start"].iloc[0]) - piece.start))
    skews = dict(zip(frames.engine_skew["host"], frames.engine_skew["skew"], strict=True))
    return {"expected": expected, "attached": attached, "duration_error": duration_error,
            "start_error": start_error, "skews": skews}


if __name__ == "__main__":
    sys.exit(main())
