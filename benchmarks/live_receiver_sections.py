"""The receiver's sections of ``bench_live.py`` (issue 45): the live store's intake, how
soon a record is visible through ``load_live``, and ``kill -9`` in the middle of a rollout.

Usage (also registered in ``bench_live.py``, or alone)::

    python benchmarks/live_receiver_sections.py                    # every section
    python benchmarks/live_receiver_sections.py --sections receiver,kill9

* ``receiver``: ``slime-trace-viewer collect`` in its own process; 4 sender processes,
  each a different sending process on the wire with its own numbering, post a demo
  rollout's records as OTLP logs (2,000 records a request, encoded beforehand, one
  request at a time on a kept-alive connection, as the sender does) until 400,000 are
  acknowledged: records/s, every record on disk once with no number missing (read back
  through the store's loss accounting), the collector's peak RSS. Target: 50,000 live
  records/s on this 2-core machine with nothing lost.
* ``visibility``: a demo rollout on a real clock streamed by ``tracing.live`` while a
  probe span starts every 0.25 s on a fresh sample; ``load_live`` is called over and
  over: the time from recording each probe's start to the first ``load_live`` that
  shows it (p50/p95/max), and what one ``load_live`` costs. Target: p95 <= 2 s.
* ``long_run``: a collector folder holding 10 earlier rollouts of 30 minute-files of
  2,000 records each (600,000 records, 300 files) and the rollout in progress (5 files
  of real demo records): ``load_live`` of the latest rollout in a fresh interpreter,
  against the same rollout alone in a folder. Target: well under a second, whatever
  came before.
* ``kill9``: the same rollout streamed to a collector killed with ``kill -9`` a third
  of the way through and restarted on the same ports 2 s later: the rollout ends
  without an error and no slower than a run without the kill (plus the down time),
  records sent after the restart arrive, and ``load_live`` counts what was lost (seq
  gaps, sender drops) and reports the restart.

Each section returns ``(what, met, figure)`` rows; timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
OUT = HERE / "out"
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from processes import peak_rss, timed_run  # noqa: E402 (a sibling module, found by the line above)

Row = tuple[str, bool, str]
SENDERS = 4
RECORDS_PER_REQUEST = 2_000
RECORDS_TOTAL = 400_000
PROBES = 60
PROBE_EVERY = 0.25
#: The demo rollout streamed by the visibility and kill9 sections: a step of a few
#: simulated minutes played at 1/50 speed (kill9: 1/20, so that it outlasts a restart
#: of the collector, a few seconds on a busy machine).
DEMO_SAMPLES = 96
REAL_TIME_SCALE = 0.02
KILL9_TIME_SCALE = 0.05


def receiver() -> list[Row]:
    from slime_trace_widget.demo import make_demo_samples
    from slime_trace_widget.frames.live_health import HealthTracker
    from slime_trace_widget.sources.live.read import Tail
    from tests.support.live_wire import recording_order
    from tests.support.receiver import start_receiver

    records = recording_order(make_demo_samples(64, seed=21, rollout_id=1))
    folder = OUT / "live_receiver"
    shutil.rmtree(folder, ignore_errors=True)
    collector = start_receiver(folder)
    print("\n== receiver: 4 senders at once, 2,000 records a request, OTLP/HTTP protobuf ==")
    print("  " + collector.first_line)
    per_sender = RECORDS_TOTAL // SENDERS
    seconds = _post_from_processes(records, per_sender, collector.http_port)
    peak = peak_rss(collector.process.pid)
    collector.stop()
    tracker = HealthTracker()
    tracker.observe(Tail(folder).read())
    health = tracker.health(time.time())
    kept = sum(sender.records for sender in health.senders)
    sent = per_sender * SENDERS
    rate = sent / seconds
    print(f"  {sent:,} records in {seconds:.2f} s: {rate:,.0f} records/s   kept {kept:,} of "
          f"{sent:,}, {health.missing} missing   collector peak RSS {peak / 2**20:.0f} MB")
    return [("receiver >= 50,000 live records/s", rate >= 50_000, f"{rate:,.0f}/s"),
            ("receiver loses nothing", kept == sent and not health.missing,
             f"{kept:,}/{sent:,} kept, {health.missing} missing"),
            ("collector peak RSS", True, f"{peak / 2**20:.0f} MB")]


def _post_from_processes(records: list[dict], per_sender: int, port: int) -> float:
    """Seconds for :data:`SENDERS` processes to have every request acknowledged."""
    context = multiprocessing.get_context("fork")
    ready, start = context.Barrier(SENDERS + 1), context.Event()
    workers = [context.Process(target=_sender_process,
                               args=(number, records, per_sender, port, ready, start))
               for number in range(SENDERS)]
    for worker in workers:
        worker.start()
    ready.wait(timeout=600)  # every body encoded, every connection open
    return timed_run(workers, start, "a sender")


def _sender_process(number: int, records: list[dict], count: int, port: int, ready: Any,
                    start: Any) -> None:
    from tests.support.live_wire import Poster, Sender

    sender = Sender(host=f"bench-{number}", pid=1000 + number)
    bodies = []
    for first in range(0, count, RECORDS_PER_REQUEST):
        chunk = [records[(first + k) % len(records)]
                 for k in range(min(RECORDS_PER_REQUEST, count - first))]
        bodies.append(sender.request(chunk, rollout_id=1).SerializeToString())
    poster = Poster(port)
    ready.wait(timeout=600)
    start.wait(timeout=600)
    for body in bodies:
        while True:
            status, answer = poster.post(body)
            if status == 200:
                break
            if status != 503:
                raise SystemExit(f"sender {number}: HTTP {status} {answer[:200]!r}")
            time.sleep(0.1)  # the writer is full: back off as the sender does
    poster.close()


def _rollout_in_thread(rollout_id: int, seed: int, scale: float = REAL_TIME_SCALE
                       ) -> tuple[threading.Thread, dict]:
    """A demo rollout on a real clock in a thread of its own; ``result`` gets its
    samples, wall time, or the error it raised."""
    from slime_trace_widget.demo import make_demo_samples

    result: dict[str, Any] = {}

    def run() -> None:
        began = time.perf_counter()
        try:
            result["samples"] = make_demo_samples(DEMO_SAMPLES, seed=seed, rollout_id=rollout_id,
                                                  real_time_scale=scale)
        except BaseException as exc:  # reported by the section
            result["error"] = repr(exc)
        result["seconds"] = time.perf_counter() - began

    thread = threading.Thread(target=run, name="demo-rollout")
    thread.start()
    return thread, result


def visibility() -> list[Row]:
    import numpy as np

    from slime_trace_widget.sources.live import load_live
    from slime_trace_widget.tracing import live as streaming
    from slime_trace_widget.tracing import trace_span
    from tests.support.receiver import start_receiver

    folder = OUT / "live_visibility"
    shutil.rmtree(folder, ignore_errors=True)
    print("\n== visibility: a probe span start recorded -> shown by load_live ==")
    recorded: dict[str, float] = {}
    with start_receiver(folder) as collector:
        stream = streaming.install(collector.endpoint_url)
        streaming.set_rollout(1)
        rollout, result = _rollout_in_thread(1, seed=22)
        open_probes: list[Any] = []

        def probe() -> None:
            for number in range(PROBES):
                name = f"probe-{number}"
                span = trace_span({"index": 10_000 + number}, name)
                recorded[name] = time.time()
                span.__enter__()
                open_probes.append(span)
                time.sleep(PROBE_EVERY)

        prober = threading.Thread(target=probe, name="probe")
        prober.start()
        seen: dict[str, float] = {}
        costs = []
        while len(seen) < PROBES:
            began = time.perf_counter()
            frames = load_live(folder, engine_traces=False)
            costs.append(time.perf_counter() - began)
            shown = time.time()
            for name in set(frames.span_core["name"].astype(str)) & set(recorded):
                seen.setdefault(name, shown)
        prober.join()
        rollout.join()
        for span in open_probes:
            span.__exit__(None, None, None)
        streaming.set_rollout(None)
        stats = stream.close()
    if "error" in result:
        raise SystemExit(f"the rollout failed: {result['error']}")
    delays = np.array([seen[name] - recorded[name] for name in recorded])
    p50, p95 = np.percentile(delays, [50, 95])
    cost50, cost95 = np.percentile(costs, [50, 95])
    print(f"  {PROBES} probes: record -> visible p50 {p50:.2f} s, p95 {p95:.2f} s, "
          f"max {delays.max():.2f} s; load_live p50 {cost50:.2f} s, p95 {cost95:.2f} s over "
          f"{len(costs)} calls; rollout of {stats.sent:,} records, {stats.dropped} dropped")
    return [("span start visible via load_live p95 <= 2 s", p95 <= 2.0, f"{p95:.2f} s"),
            ("load_live of the rollout in progress p95", True, f"{cost95:.2f} s")]


def kill9() -> list[Row]:
    from slime_trace_widget.sources.live import load_live

    print("\n== kill9: the collector killed with kill -9 mid-rollout, restarted 2 s later ==")
    baseline = _streamed_rollout(OUT / "live_kill9_baseline", kill_after=None)
    folder = OUT / "live_kill9"
    killed = _streamed_rollout(folder, kill_after=baseline["seconds"] / 3)
    frames = load_live(folder, engine_traces=False)
    health = frames.live
    (sender,) = health.senders
    after = killed["restarted_at"]
    arrived_after = killed["received_after_restart"]
    slower = killed["seconds"] - baseline["seconds"]
    print(f"  rollout {baseline['seconds']:.1f} s without the kill, {killed['seconds']:.1f} s "
          f"with it ({slower:+.1f} s; down {killed['down']:.1f} s); error: "
          f"{killed.get('error', 'none')}")
    print(f"  sender: {killed['stats']}")
    print(f"  load_live: {sender.records:,} records of {sender.highest_seq:,} numbered, "
          f"{sender.missing} missing, {sender.dropped} dropped at the sender; "
          f"{arrived_after:,} arrived after the restart at {after:.1f}; restarts: "
          f"{[(round(g.up_at - g.down_after, 1), g.clean) for g in health.restarts]}")
    counted = sender.records + sender.missing == sender.highest_seq
    return [("kill -9: rollout ends without an error", "error" not in killed,
             killed.get("error", "none")),
            ("kill -9: no stall (slower by at most the down time + 2 s)",
             slower <= killed["down"] + 2.0, f"{slower:+.1f} s"),
            ("kill -9: records after the restart arrive", arrived_after > 0,
             f"{arrived_after:,}"),
            ("kill -9: loss counted and restart reported",
             counted and len(health.restarts) == 1, f"{sender.missing} missing, "
             f"{len(health.restarts)} restart(s)")]


def _streamed_rollout(folder: Path, kill_after: float | None) -> dict[str, Any]:
    """A demo rollout streamed to a collector at ``folder``; with ``kill_after``, the
    collector is killed that many seconds in and restarted 2 s later on its ports."""
    import pyarrow.compute as pc

    from slime_trace_widget.sources.live.read import Tail
    from slime_trace_widget.tracing import live as streaming
    from tests.support.receiver import STARTUP_SECONDS, start_receiver

    shutil.rmtree(folder, ignore_errors=True)
    collector = start_receiver(folder)
    stream = streaming.install(collector.endpoint_url)
    streaming.set_rollout(3)
    rollout, result = _rollout_in_thread(3, seed=23, scale=KILL9_TIME_SCALE)
    if kill_after is not None:
        time.sleep(kill_after)
        os.kill(collector.process.pid, signal.SIGKILL)
        collector.process.communicate(timeout=STARTUP_SECONDS)
        down_from = time.perf_counter()
        time.sleep(2.0)
        collector = start_receiver(folder, collector.http_port, collector.grpc_port)
        result["down"] = time.perf_counter() - down_from
        result["restarted_at"] = time.time()
    rollout.join()
    streaming.set_rollout(None)
    result["stats"] = stream.close()
    collector.stop()
    if kill_after is not None:
        rows = Tail(folder).read()
        later = pc.greater(rows["received_ns"], int(result["restarted_at"] * 1e9))
        result["received_after_restart"] = int(pc.sum(later).as_py() or 0)
    return result


def long_run() -> list[Row]:
    print("\n== long_run: the rollout in progress after 10 earlier rollouts (300 files) ==")
    alone, after = OUT / "live_long_alone", OUT / "live_long_after"
    for folder in (alone, after):
        shutil.rmtree(folder, ignore_errors=True)
    _write_old_rollouts(after, rollouts=10, files=30, rows=2_000)
    for folder in (alone, after):
        _write_current_rollout(folder, rollout=10, files=5)
    timings: dict[str, list[float]] = {"alone": [], "after": []}
    for _ in range(3):  # alternating, each in a fresh interpreter (footers read cold)
        for name, folder in (("alone", alone), ("after", after)):
            timings[name].append(_fresh_load_live(folder))
    best = {name: min(values) for name, values in timings.items()}
    print(f"  load_live of the latest rollout, best of 3 in fresh interpreters: alone "
          f"{best['alone']:.2f} s, after 600,000 earlier records in 300 files "
          f"{best['after']:.2f} s (all: {timings})")
    return [("load_live of a rollout in progress, long-running collector",
             best["after"] < 1.0, f"{best['after']:.2f} s (alone {best['alone']:.2f} s)")]


def _write_old_rollouts(folder: Path, rollouts: int, files: int, rows: int) -> None:
    """Earlier rollouts' records, one finished file a minute (their bodies are never read:
    a short span start each)."""
    import numpy as np

    from slime_trace_widget.sources.live.store import LAYOUT, LiveStore

    store = LiveStore(folder)
    start = 1_767_225_600 * 10**9
    seq = 1
    for rollout in range(rollouts):
        for minute in range(files):
            ts = start + (rollout * files + minute) * 60 * 10**9 + np.arange(rows) * 10**7
            columns = {
                "sender": ["bench:1:0"] * rows, "seq": list(range(seq, seq + rows)),
                "record": ["span_start"] * rows, "ts_ns": ts.tolist(),
                "trace_id": [f"{rollout:016x}{n % 512:016x}" for n in range(rows)],
                "span_id": [f"{n:016x}" for n in range(rows)], "sample_id": ["0"] * rows,
                "group_id": ["0"] * rows, "attempt": [0] * rows, "rollout_id": [rollout] * rows,
                "body": ['{"type":"span_start","name":"x","ts":1.0}'] * rows,
                "dropped": [None] * rows, "queued": [None] * rows, "service": ["s"] * rows,
                "received_ns": ts.tolist()}
            seq += rows
            store.append(LAYOUT.rows(columns))
            store.roll()
    store.close()


def _write_current_rollout(folder: Path, rollout: int, files: int) -> None:
    """The rollout in progress: real demo records, late in time, through the receiver's
    parser, a finished file per fifth of it and the last fifth still a write-ahead file."""
    from slime_trace_widget.demo import make_demo_samples
    from slime_trace_widget.sources.live.otlp_logs import parse_protobuf
    from slime_trace_widget.sources.live.store import LAYOUT, LiveStore
    from tests.support.live_wire import Sender, recording_order

    records = recording_order(make_demo_samples(48, seed=24, rollout_id=rollout))
    shift = 30 * 24 * 3600.0  # after every earlier rollout
    records = [{**record, "ts": record["ts"] + shift} for record in records]
    sender = Sender(host="bench", pid=2)
    store = LiveStore(folder)
    size = -(-len(records) // files)
    for first in range(0, len(records), size):
        body = sender.request(records[first:first + size], rollout_id=rollout)
        store.append(LAYOUT.rows(parse_protobuf(body.SerializeToString(), 1).columns))
        if first + size < len(records):
            store.roll()
    store.close()


def _fresh_load_live(folder: Path) -> float:
    """Seconds ``load_live(folder)`` takes in a new interpreter (imports excluded)."""
    import subprocess

    code = ("import time, sys\n"
            "from slime_trace_widget.sources.live import load_live\n"
            "began = time.perf_counter()\n"
            "frames = load_live(sys.argv[1], engine_traces=False)\n"
            "print(time.perf_counter() - began, len(frames.samples))\n")
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                         text=True, check=True, cwd=ROOT, env={**os.environ,
                                                                "PYTHONPATH": str(ROOT)})
    return float(out.stdout.split()[0])


SECTIONS: dict[str, Callable[[], list[Row]]] = {
    "receiver": receiver, "visibility": visibility, "long_run": long_run, "kill9": kill9}


def print_targets(rows: list[Row]) -> None:
    for what, met, figure in rows:
        print(f"  {what:<58} {'met' if met else 'NOT MET':>8}   {figure}")


def printed(name: str) -> Callable[[], None]:
    """Section ``name`` as ``bench_live.py``'s registry runs one: it prints its figures and
    its targets (``section(name)(printed(name))`` registers it there)."""
    def run() -> None:
        OUT.mkdir(exist_ok=True)
        print_targets(SECTIONS[name]())

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    args = parser.parse_args()
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {sorted(SECTIONS)}")
    OUT.mkdir(exist_ok=True)
    rows = [row for name in chosen for row in SECTIONS[name]()]
    print("\n== targets ==")
    print_targets(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
