"""bench_live's ``widget`` section: what a live widget update costs in the kernel, and
how soon a recorded span start is drawn in a JupyterLab widget.

A rollout of 10,000 samples x 200 records (2M records, the demo's samples copied
under new trace ids, filled up to 200 with instant events) is taken in by a
``LiveBlocks``; then each update adds records to a few running samples (a span
opened, an event, the span closed: what a second of a rollout brings) and the clock
runs from the records' arrival to the message's bytes: the moved samples flattened
again (``RecordTraces.frames``; the collector's reader does the same from its own
records) and encoded (``LiveBlocks.replace``), ``delta_since`` and the message's
buffers. Alternating sizes, fresh samples each time, several rounds; p50 and p95 per
size, of this process's CPU time and of wall time (on a shared machine the wall time
also counts the waits for a core).

Visibility: ``TraceTimeline.live`` in JupyterLab on a real receiver subprocess; a span
start recorded with our recording API on the real clock, streamed by
``tracing.live.install``; the clock stops when the widget has drawn its bar (the
page's wall clock, the same machine's).
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.view.live_blocks import LiveBlocks
from tests.support.live_feeds import RecordTraces  # bench_live puts the repository on sys.path


def rollout_records(n_samples: int, per_sample: int = 200, seed: int = 0
                    ) -> tuple[list[dict[str, Any]], list[str]]:
    """``per_sample`` records per sample (a demo sample's, cut there or filled up with
    instant events), each sample under its own trace id; and the trace ids."""
    base = make_demo_samples(100, seed=seed)
    records: list[dict[str, Any]] = []
    traces = []
    for n in range(n_samples):
        source = base[n % len(base)]["trace"]["events"][:per_sample]
        trace_id = f"bench-{n}"
        traces.append(trace_id)
        records.extend({**r, "trace_id": trace_id, "sample_id": n} for r in source)
        last = source[-1]["ts"]
        records.extend({"type": "event", "name": "progress", "ts": last + 0.001 * k,
                        "trace_id": trace_id, "sample_id": n, "group_id": 0, "attempt": 0}
                       for k in range(per_sample - len(source)))
    return records, traces


def update_records(traces: list[str], ts: float) -> list[dict[str, Any]]:
    """Four records per sample: a span opened and closed, an event inside it."""
    out = []
    for trace_id in traces:
        span_id = uuid.uuid4().hex
        common = {"trace_id": trace_id, "sample_id": 0, "group_id": 0, "attempt": 0}
        out += [{**common, "type": "span_start", "name": "tool_call", "ts": ts, "span_id": span_id},
                {**common, "type": "event", "name": "tool_output", "ts": ts + 0.1,
                 "parent_span_id": span_id},
                {**common, "type": "span_end", "name": "tool_call", "ts": ts + 0.2,
                 "span_id": span_id},
                {**common, "type": "span_start", "name": "generate", "ts": ts + 0.3,
                 "span_id": uuid.uuid4().hex}]
    return out


def widget_figures(n_samples: int = 10_000, moved: tuple[int, ...] = (10, 50, 100),
                   rounds: int = 5) -> dict[str, Any]:
    records, traces = rollout_records(n_samples)
    store, live = RecordTraces(), LiveBlocks()
    started = time.perf_counter()
    keys = store.add(records)
    live.replace(keys, store.frames(keys))
    ingest_s = time.perf_counter() - started
    figures: dict[str, Any] = {"samples": n_samples, "records": len(records),
                               "first_ingest_s": round(ingest_s, 2)}
    ts = max(r["ts"] for r in records) + 1.0
    cursor = 0
    timings: dict[int, list[float]] = {k: [] for k in moved}
    cpu_timings: dict[int, list[float]] = {k: [] for k in moved}
    for _ in range(rounds):
        for k in moved:
            chosen = [traces[(cursor + i * 97) % n_samples] for i in range(k)]
            cursor += 1
            batch = update_records(chosen, ts)
            ts += 1.0
            seq = live.seq
            started, cpu = time.perf_counter(), time.process_time()
            keys = store.add(batch)
            live.replace(keys, store.frames(keys, now=ts))
            content, buffers = live.delta_since(seq, now=ts).as_message()
            timings[k].append(time.perf_counter() - started)
            cpu_timings[k].append(time.process_time() - cpu)
            assert len(content["positions"]) == k and buffers
    for k in moved:
        figures[f"update_{k}_samples_{4 * k}_records_ms"] = {
            "wall": _quantiles(timings[k]), "cpu": _quantiles(cpu_timings[k])}
    started = time.perf_counter()
    full = live.delta_since(0, now=ts).as_message()
    figures["full_sync_ms"] = round(1000 * (time.perf_counter() - started), 1)
    figures["full_sync_mb"] = round(sum(len(b) for b in full[1]) / 1e6, 1)
    return figures


def _quantiles(seconds: list[float]) -> dict[str, float]:
    """p50 and p95 in ms (the CPU time of this process beside the wall time: on a
    shared machine the wall time also counts the waits for a core)."""
    ordered = sorted(seconds)
    return {"p50": round(1000 * statistics.median(ordered), 1),
            "p95": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1)}


#: Browser-side: the wall clock (epoch ms) when the widget first drew a span named
#: ``name``: checked every animation frame once armed.
WATCH = """(name) => { window.__stwDrawn = new Promise((resolve) => {
  const root = document.querySelector('.jp-Cell:nth-child(1) .stw-root');
  const look = () => {
    const live = root.stwDebug.live();
    const found = live.spans.find((s) => s.name === name);
    if (found && root.stwDebug.spanRect(found.span)) resolve(Date.now());
    else requestAnimationFrame(look);
  };
  look();
}); }"""


def visibility_figures(repeats: int = 10) -> dict[str, Any]:
    """Seconds from a span start recorded (our recording API, real clock, streamed by
    ``tracing.live``) to its bar drawn in a JupyterLab widget on a real receiver."""
    from playwright.sync_api import sync_playwright

    from slime_trace_widget.tracing import live
    from slime_trace_widget.tracing.spans import trace_span
    from tests.support.browser import (
        VIEWPORT,
        JupyterLab,
        NotebookPage,
        launch_chromium,
    )
    from tests.support.receiver import start_receiver

    root = Path(tempfile.mkdtemp(prefix="bench_live_"))
    folder = root / "collect"
    seconds = []
    lab = JupyterLab(root / "lab")
    lab.start(timeout=180)
    try:
        with start_receiver(folder) as receiver, sync_playwright() as playwright, \
                live.install(f"http://127.0.0.1:{receiver.http_port}"):
            browser = launch_chromium(playwright)
            page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
            notebook = NotebookPage(page)
            notebook.open(lab.write_notebook("live_bench.ipynb", [
                "from slime_trace_widget import TraceTimeline\n"
                f"tl = TraceTimeline.live({str(folder)!r})\ntl"]))
            notebook.run_cell(0)
            page.wait_for_selector('.jp-Cell:nth-child(1) .stw-root[data-ready="1"]',
                                   timeout=120_000)
            for k in range(repeats):
                sample = {"index": k, "group_index": 0}
                name = f"generate_{k}"
                page.evaluate(WATCH, name)  # armed: the promise waits in the page
                span = trace_span(sample, name)
                span.__enter__()
                recorded = sample["trace"]["events"][-1]["ts"]
                drawn_ms = page.evaluate("() => window.__stwDrawn")
                seconds.append(drawn_ms / 1000 - recorded)
                span.__exit__(None, None, None)
            browser.close()
    finally:
        lab.stop()
    seconds.sort()
    return {"record_to_widget_s": {
        "p50": round(statistics.median(seconds), 2),
        "p95": round(seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 2),
        "max": round(seconds[-1], 2), "repeats": repeats}}
