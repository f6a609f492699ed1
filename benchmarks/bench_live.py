"""Benchmark: the live stream of issue 45, one section per figure family.

    python benchmarks/bench_live.py [section ...]      (default: every section)
    python benchmarks/bench_live.py --list

Sections register themselves with ``@section("name")`` and print their own figures
next to their targets; helpers for fresh-process A/B runs (``child``, ``run_child``,
``ab_runs``) and a stand-in receiver process (``sink_process``) are shared by all.
Timings on a shared machine are noisy: every comparison alternates its two sides in
fresh processes and reports medians.

Section ``widget`` (the live view): ``live_widget_figures``.

Sections ``receiver``, ``visibility``, ``long_run``, ``kill9`` (the collector and
``load_live``): ``live_receiver_sections``.

Section ``recording`` (the sender): what streaming costs the code that records.
* per record on the recording thread, streaming off vs on: the thread's CPU time
  (what the hook itself adds; target at most 5 us), and wall time in a tight loop
  (worst case: the sender thread's encoding competes for the interpreter at once)
  and in a loop with 20 us of other Python work per record (a rollout's pace);
* a demo rollout on a real clock, streaming off vs on: wall time (target at most
  3 % slower), records streamed, records dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Section name -> the function that runs it and prints its figures.
SECTIONS: dict[str, Callable[[], None]] = {}
#: Child job name -> the function a fresh process runs (``--child NAME ARGS``); it
#: returns a JSON-able dict, printed as the process's last line.
CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {}
#: A/B pairs per comparison.
PAIRS = 5
CHILD_TIMEOUT_SECONDS = 900


def section(name: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register a section under ``name`` (run in registration order by default)."""
    def register(run: Callable[[], None]) -> Callable[[], None]:
        SECTIONS[name] = run
        return run
    return register


def child(name: str) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
    """Register a job that :func:`run_child` runs in a fresh process."""
    def register(job: Callable[..., dict]) -> Callable[..., dict]:
        CHILDREN[name] = job
        return job
    return register


def run_child(name: str, *args: str) -> dict[str, Any]:
    """Run child job ``name`` with ``args`` in a fresh interpreter; its result."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))}
    done = subprocess.run([sys.executable, __file__, "--child", name, *args], env=env,
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {name} {args} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ab_runs(name: str, a: tuple[str, ...], b: tuple[str, ...], pairs: int = PAIRS
            ) -> tuple[list[dict], list[dict]]:
    """``pairs`` runs of each side, alternating A, B, B, A, A, B... in fresh processes."""
    runs_a, runs_b = [], []
    for pair in range(pairs):
        order = ((runs_a, a), (runs_b, b)) if pair % 2 == 0 else ((runs_b, b), (runs_a, a))
        for runs, args in order:
            runs.append(run_child(name, *args))
    return runs_a, runs_b


def median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


# --------------------------------------------------------------------------- the sink


class _SinkHandler(BaseHTTPRequestHandler):
    """Takes any OTLP/HTTP post and answers 200 at once (a receiver that keeps up)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _serve_sink() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SinkHandler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


@contextmanager
def sink_process() -> Iterator[str]:
    """A receiver stand-in in its own process (so it does not share this interpreter with
    the sender it serves); yields its endpoint."""
    process = subprocess.Popen([sys.executable, __file__, "--sink"], stdout=subprocess.PIPE,
                               text=True)
    try:
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=60)


# --------------------------------------------------------------------------- recording

LOOP_RECORDS = 50_000
PACED_RECORDS = 20_000
PACED_WORK_US = 20.0
DEMO_SAMPLES = 256
DEMO_SCALE = 0.02
RECORD_TARGET_US = 5.0
DEMO_TARGET = 1.03


def _busy(microseconds: float) -> None:
    """Pure-Python work for about ``microseconds`` (holds the interpreter like real work)."""
    end = time.perf_counter() + microseconds / 1e6
    while time.perf_counter() < end:
        pass


@child("record_loop")
def record_loop(endpoint: str, paced: str) -> dict[str, Any]:
    from slime_trace_widget.tracing import bind_trace, live, trace_event

    stream = live.install(endpoint) if endpoint != "off" else None
    handle = bind_trace({"index": 0, "group_index": 0})
    attrs = {"turn": 1, "tool": "search", "chars": 812}
    for _ in range(2_000):  # warm up
        trace_event(handle, "tool_result", attrs)
    handle.carrier["events"].clear()
    work = PACED_WORK_US if paced == "paced" else 0.0
    n = PACED_RECORDS if work else LOOP_RECORDS
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(n):
        trace_event(handle, "tool_result", attrs)
        if work:
            _busy(work)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    stats = stream.close(timeout=120) if stream is not None else None
    return {"wall_us": wall / n * 1e6, "cpu_us": cpu / n * 1e6,
            "sent": stats.sent if stats else 0, "dropped": stats.dropped if stats else 0}


@child("demo")
def demo_rollout(endpoint: str, samples: str, scale: str) -> dict[str, Any]:
    from slime_trace_widget.demo import make_demo_samples
    from slime_trace_widget.tracing import live
    from tests.support.demo_shapes import count_records

    stream = live.install(endpoint) if endpoint != "off" else None
    started, cpu = time.perf_counter(), time.process_time()
    rollout = make_demo_samples(int(samples), seed=0, real_time_scale=float(scale))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    stats = stream.close(timeout=120) if stream is not None else None
    return {"wall_s": wall, "cpu_s": cpu, "records": count_records(rollout),
            "sent": stats.sent if stats else 0, "dropped": stats.dropped if stats else 0,
            "batches": stats.batches if stats else 0}


@section("recording")
def recording() -> None:
    print("recording: what streaming costs the code that records "
          f"({PAIRS} off/on pairs, alternating, fresh processes; medians)")
    with sink_process() as endpoint:
        for paced in ("tight", "paced"):
            off, on = ab_runs("record_loop", ("off", paced), (endpoint, paced))
            label = ("tight loop" if paced == "tight"
                     else f"with {PACED_WORK_US:.0f} us of work per record")
            cpu_added = median(on, "cpu_us") - median(off, "cpu_us")
            wall_added = median(on, "wall_us") - median(off, "wall_us")
            print(f"  per record, {label}: thread CPU {median(off, 'cpu_us'):.2f} -> "
                  f"{median(on, 'cpu_us'):.2f} us (+{cpu_added:.2f}, target <= "
                  f"{RECORD_TARGET_US:.0f}); wall {median(off, 'wall_us'):.2f} -> "
                  f"{median(on, 'wall_us'):.2f} us (+{wall_added:.2f}); "
                  f"sent {min(r['sent'] for r in on)}, dropped {max(r['dropped'] for r in on)}")
        off, on = ab_runs("demo", ("off", str(DEMO_SAMPLES), str(DEMO_SCALE)),
                          (endpoint, str(DEMO_SAMPLES), str(DEMO_SCALE)))
        ratios = [b["wall_s"] / a["wall_s"] for a, b in zip(off, on, strict=True)]
        slower = median(on, "wall_s") / median(off, "wall_s")
        print(f"  demo rollout, {DEMO_SAMPLES} samples on a real clock (x{DEMO_SCALE}), "
              f"~{median(on, 'records'):.0f} records in {median(off, 'wall_s'):.2f} s: "
              f"on/off wall {slower:.3f} (pairwise median {statistics.median(ratios):.3f}, "
              f"target <= {DEMO_TARGET}); process CPU {median(off, 'cpu_s'):.2f} -> "
              f"{median(on, 'cpu_s'):.2f} s; in {min(r['batches'] for r in on)}+ batches, "
              f"records recorded but not sent, worst run: "
              f"{max(r['records'] - r['sent'] for r in on)} (each run records its own "
              f"number: the clock is real), dropped {max(r['dropped'] for r in on)}")


@section("widget")
def widget() -> None:
    """The live widget (``live_widget_figures``): an update's kernel cost over a rollout
    of 10,000 samples x 200 records (target under 100 ms), and a span start from
    recording to its bar in a JupyterLab widget on a real receiver (target 3 s)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from live_widget_figures import visibility_figures, widget_figures

    print("widget: a live update's cost in the kernel (10,000 x 200 records; p50/p95 ms, "
          "this process's CPU and wall time) and record-to-widget time (s)")
    print(json.dumps({"kernel_update": widget_figures(), "visibility": visibility_figures()},
                     indent=1))


def _register_receiver_sections() -> None:
    """The receiver's sections (``live_receiver_sections``): intake records/s with nothing
    lost, record-to-``load_live`` visibility, a long-running collector, ``kill -9``."""
    sys.path.insert(0, str(Path(__file__).parent))
    import live_receiver_sections

    for name in live_receiver_sections.SECTIONS:
        section(name)(live_receiver_sections.printed(name))


_register_receiver_sections()


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--sink"]:
        _serve_sink()
        return 0
    if argv[:1] == ["--child"]:
        print(json.dumps(CHILDREN[argv[1]](*argv[2:])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sections", nargs="*", help=f"of: {', '.join(SECTIONS)}")
    parser.add_argument("--list", action="store_true", help="list the sections")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(SECTIONS))
        return 0
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"no section {', '.join(sorted(unknown))}; sections: {', '.join(SECTIONS)}")
    for name in args.sections or SECTIONS:
        SECTIONS[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
