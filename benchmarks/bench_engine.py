"""Engine traces on SGLang 0.5.23's own traces: the join's accuracy, a level-3 rollout's
load cost, the engine load's store, and the receiver's throughput.

Usage::

    python benchmarks/bench_engine.py                      # every section
    python benchmarks/bench_engine.py --sections join,level3

Sections (each prints its figures and the issue's target beside them):

* ``join``: every scenario of ``tests/support/sglang_driver.py`` (normal, chunked
  prefill, retracted, PD with and without a client rid, TP=2, rids with ``_``,
  traceparent, unsampled traceparent, other clients) driven through SGLang's own
  tracing code on three hosts whose clocks are off by +1.5, -1.5 and +0.4 s (one at trace
  level 2), exported by SGLang's exporter into ``slime-trace-viewer collect``, loaded with
  the dump, and held to what SGLang emitted (``tests/support/engine_oracle.py``):
  requests attached, wrong and missed; slices compared; duration error; p95 start
  offset; samples whose retraction count is wrong.
* ``level3``: a rollout of 2,000 requests of 500 decode steps each at trace level 3,
  driven the same way (capture off), for two dumps: the 2,048-sample token-list demo
  shape (``demo_dumps.SHAPES["612mb_tokens"]``: what a rollout of that many requests
  saves) and a 256-sample text-light demo dump (3.4 MB: the strictest ratio).
  ``load_frames(dump)`` against ``load_frames(dump, engine_traces=DIR)``, each in a fresh
  interpreter, best of 3 alternating; engine spans per attached request.
* ``load``: 16 engines scraped every second for an hour (``engine_load_figures``):
  stored size and the cost of reading one rollout's window.
* ``receiver``: ``collect`` in its own process fed by 8 exporter processes at once
  (4 OTLP/HTTP, 4 OTLP/gRPC, batches of 512 made beforehand): spans/s, kept against
  sent, peak RSS (the last release's figures: 20,000 spans/s, nothing lost, < 500 MB).

Stores and dumps are kept in ``benchmarks/out/`` and reused.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
OUT = HERE / "out"
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from processes import peak_rss, timed_run  # noqa: E402 (a sibling module, found by the line above)

SECTIONS = ("join", "level3", "load", "receiver")
BATCH = 512
EXPORTERS = 8
HOUR = 3600.0
#: The receiver section's two hosts and their clocks (the older-shape generator's).
RECEIVER_SKEWS = {"prefill-0": 1.5, "decode-0": -1.5}
LEVEL3_REQUESTS = 2_000
LEVEL3_STEPS = 500


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--copies", type=int, default=25,
                        help="receiver: the folder holds this many times a rollout's spans")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    OUT.mkdir(exist_ok=True)
    rows: list[tuple[str, bool, str]] = []
    for name in chosen:
        rows += {"join": _join, "level3": _level3, "load": _load,
                 "receiver": lambda: _receiver(args.copies)}[name]()
    print("\n== targets ==")
    for what, met, figure in rows:
        print(f"  {what:<58} {'met' if met else 'NOT MET':>8}   {figure}")
    return 0


# --------------------------------------------------------------------------- join


def _join() -> list[tuple[str, bool, str]]:
    from slime_trace_widget.sources.loading import load_frames
    from tests.support.engine_oracle import LEVELS as levels
    from tests.support.engine_oracle import SKEWS as skews
    from tests.support.engine_oracle import compare
    from tests.support.receiver import start_receiver
    from tests.support.sglang_driver import SCENARIOS, default_rids, drive, plan, write_dump

    work = OUT / "engine_join"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    dump = write_dump(work / "rollout_0.pt", default_rids(120, seed=11), seed=11)
    requests = plan(load_frames(str(dump), progress=False), (*SCENARIOS, "unsampled"),
                    seed=11, decode_iterations=(20, 200))
    with start_receiver(work / "engine") as receiver:
        driven = drive(requests, receiver.endpoint("grpc"), "grpc", skews, levels,
                       work / "hosts")
    frames = load_frames(str(dump), progress=False, engine_traces=str(work / "engine"))
    report = compare(frames, driven, skews)
    found = frames.engine_skew.set_index("host")["skew"]
    skew_error = max(abs(found[host] - truth) for host, truth in skews.items())
    worst = max(report.duration_errors) if report.duration_errors else 0.0
    print("\n== join: SGLang 0.5.23's own traces, every scenario, skews +1.5/-1.5/+0.4 s ==")
    print(f"  {len(requests)} requests driven ({sum(r.scenario == 'stray' for r in requests)} "
          f"other clients', {sum(not r.sampled for r in requests)} unsampled), "
          f"{driven.spans_ended:,} spans emitted, {driven.dropped} dropped")
    print(f"  request halves a sample made {report.expected}: attached {report.attached}, "
          f"wrong {report.wrong}, missed {report.missed}; unmatched listed "
          f"{len(frames.engine_unmatched)}")
    print(f"  slices compared {report.slices:,}, halves whose slices differ "
          f"{len(report.slice_mismatches)}; largest duration error {worst * 1e6:.2f} us; "
          f"start offset p95 {report.p95_start_offset * 1e3:.2f} ms, max "
          f"{max(report.start_offsets) * 1e3:.2f} ms; largest skew error "
          f"{skew_error * 1e3:.2f} ms")
    print(f"  samples whose retraction count differs: {report.retraction_rows_wrong}")
    return [
        ("every request a sample made attached (0 wrong, 0 missed)",
         report.attached == report.expected and not report.wrong,
         f"{report.attached}/{report.expected}, wrong {report.wrong}"),
        ("slices once each", not report.slice_mismatches,
         f"{report.slices:,} slices, {len(report.slice_mismatches)} halves differ"),
        ("exact durations (< 2 us)", worst < 2e-6, f"{worst * 1e6:.2f} us"),
        ("p95 start offset <= 50 ms (skews to +-1.5 s)", report.p95_start_offset <= 0.05,
         f"{report.p95_start_offset * 1e3:.2f} ms"),
        ("retractions per sample exact", report.retraction_rows_wrong == 0,
         f"{report.retraction_rows_wrong} samples wrong"),
    ]


# --------------------------------------------------------------------------- level 3


def _level3() -> list[tuple[str, bool, str]]:
    from demo_dumps import demo_dump

    from slime_trace_widget.demo import write_demo_dump

    light = OUT / "engine_l3_256.pt"
    if not light.exists():
        write_demo_dump(light, n_samples=256, seed=11)
    rows = []
    for label, dump in (("2,048-sample token-list rollout", demo_dump("612mb_tokens")),
                        ("256-sample text-light rollout", light)):
        store, driven = _level3_store(dump)
        alone, joined, spans = _load_times(dump, store)
        per_request = spans["engine"] / max(spans["requests"], 1)
        budget = 1.5 * alone + 0.5
        print(f"\n== level 3: {LEVEL3_REQUESTS:,} requests x {LEVEL3_STEPS} decode steps, "
              f"{label} ({dump.stat().st_size / 1e6:.0f} MB) ==")
        print(f"  {driven['spans']:,} engine spans stored ({driven['seconds']:.0f} s to drive "
              f"through SGLang's code); frames hold {spans['engine']:,} engine spans for "
              f"{spans['requests']:,} requests: {per_request:.1f} per request")
        print(f"  load_frames: dump alone {alone:.2f} s, with engine traces {joined:.2f} s "
              f"(engine part {joined - alone:.2f} s); target 1.5x + 0.5 s = {budget:.2f} s")
        rows += [(f"level 3, {label}: <= a few dozen engine spans a request",
                  per_request <= 36, f"{per_request:.1f}"),
                 (f"level 3, {label}: load <= 1.5x dump alone + 0.5 s", joined <= budget,
                  f"{joined:.2f} s vs {budget:.2f} s")]
    return rows


def _level3_store(dump: Path) -> tuple[Path, dict[str, Any]]:
    """A collector folder with the level-3 requests of ``dump``'s generations (made once)."""
    folder = OUT / f"l3_store_{dump.stem}"
    marker = folder / "driven.json"
    if marker.exists():
        return folder, json.loads(marker.read_text())
    from slime_trace_widget.sources.loading import load_frames
    from tests.support.engine_oracle import SKEWS as skews
    from tests.support.receiver import start_receiver
    from tests.support.sglang_driver import SCENARIOS, drive, plan

    shutil.rmtree(folder, ignore_errors=True)
    requests = plan(load_frames(str(dump), progress=False), SCENARIOS, seed=3, strays=20,
                    decode_iterations=LEVEL3_STEPS)
    made = [r for r in requests if r.span is not None][:LEVEL3_REQUESTS]
    requests = made + [r for r in requests if r.span is None]
    with start_receiver(folder) as receiver:
        driven = drive(requests, receiver.endpoint("grpc"), "grpc", skews, 3,
                       OUT / "engine_l3_hosts", capture=False)
    if driven.dropped:
        raise SystemExit(f"{driven.dropped} spans dropped while driving {dump.name}")
    figures = {"spans": driven.spans_ended, "seconds": driven.seconds}
    marker.write_text(json.dumps(figures))
    return folder, figures


LOAD = """
import sys, time, json
from slime_trace_widget.sources.loading import load_frames
began = time.perf_counter()
frames = load_frames(sys.argv[1], progress=False,
                     engine_traces=sys.argv[2] if len(sys.argv) > 2 else None)
seconds = time.perf_counter() - began
core = frames.span_core
engine = core[(core["origin"] == "engine").to_numpy()] if "origin" in core else core.iloc[:0]
requests = engine["name"].astype(str).str.startswith("sglang ").sum()
print(json.dumps({"seconds": seconds, "engine": len(engine), "requests": int(requests)}))
"""


def _load_times(dump: Path, folder: Path) -> tuple[float, float, dict[str, int]]:
    """Best of 3 of each, alternating, each in a fresh interpreter (imports not timed)."""
    alone, joined = [], []
    counts: dict[str, int] = {}
    for _ in range(3):
        for extra, out in (([], alone), ([str(folder)], joined)):
            result = subprocess.run([sys.executable, "-c", LOAD, str(dump), *extra],
                                    capture_output=True, text=True, check=True, cwd=ROOT)
            figures = json.loads(result.stdout.strip().splitlines()[-1])
            out.append(figures["seconds"])
            if extra:
                counts = {"engine": figures["engine"], "requests": figures["requests"]}
    return min(alone), min(joined), counts


# --------------------------------------------------------------------------- load


def _load() -> list[tuple[str, bool, str]]:
    from engine_load_figures import figures, report

    result = figures(engines=16, minutes=60.0, window_minutes=5.0)
    print("\n== engine load: 16 engines scraped every second for an hour ==")
    print(report(result))
    return []


# --------------------------------------------------------------------------- receiver


def _receiver(copies: int) -> list[tuple[str, bool, str]]:
    from slime_trace_widget.demo import write_demo_dump
    from slime_trace_widget.sources.engine.store import read_spans
    from slime_trace_widget.sources.loading import load_frames
    from tests.support.browser import free_port
    from tests.support.engine_traces import requests_for

    dump = OUT / "engine_demo_256.pt"
    if not dump.exists():
        write_demo_dump(dump, n_samples=256, seed=11)
    frames = load_frames(str(dump), progress=False)
    truth = requests_for(frames, pd=True, hosts=tuple(RECEIVER_SKEWS))
    batches = _span_batches(truth, copies)
    sent = sum(len(batch) for batch in batches)
    folder = OUT / "engine_collector"
    shutil.rmtree(folder, ignore_errors=True)
    http_port, grpc_port = free_port(), free_port()
    collector = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", "collect", str(folder),
         "--http", f"127.0.0.1:{http_port}", "--grpc", f"127.0.0.1:{grpc_port}"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    print("\n== receiver: 8 exporters at once (4 OTLP/HTTP, 4 OTLP/gRPC) ==")
    print("  " + collector.stdout.readline().strip())
    seconds = _send(batches, http_port, grpc_port)
    peak = peak_rss(collector.pid)
    collector.send_signal(signal.SIGTERM)
    collector.communicate(timeout=600)
    kept = len(read_spans(folder))
    print(f"  {sent:,} spans in {seconds:.2f} s: {sent / seconds:,.0f} spans/s   kept {kept:,} "
          f"of {sent:,}   collector peak RSS {peak / 2**20:.0f} MB")
    return [("receiver >= 20,000 spans/s", sent / seconds >= 20_000, f"{sent / seconds:,.0f}"),
            ("receiver loses nothing", kept == sent, f"{kept:,}/{sent:,}"),
            ("collector RSS < 500 MB", peak < 500 * 2**20, f"{peak / 2**20:.0f} MB")]


def _span_batches(truth: list[Any], copies: int) -> list[list[Any]]:
    """The SDK's finished spans of the requests and their copies, in export batches."""
    from dataclasses import replace

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.support.engine_traces import Half, Slice, replay

    def shifted(request: Any, copy: int) -> Any:
        hours = copy * HOUR
        halves = [Half(h.role, h.host, h.pid, [Slice(p.name, p.start + hours, p.end + hours,
                                                     p.attrs, [(n, t + hours, a) for n, t, a
                                                               in p.events])
                                               for p in h.slices]) for h in request.halves]
        return replace(request, rid=f"x{copy}{request.rid}", span=None, halves=halves)

    memory = InMemorySpanExporter()
    everything = list(truth) + [shifted(r, copy) for copy in range(1, copies) for r in truth]
    replay(everything, lambda host: memory, RECEIVER_SKEWS, batch=False)
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
    return timed_run(workers, start, "an exporter")


if __name__ == "__main__":
    sys.exit(main())
