"""Benchmark: safe (restricted) vs trusted loading of a big slime rollout dump.

Builds a synthetic dump with at least 250k spans (or reuses a given path), then
times ``load_dump`` in fresh subprocesses so each run's peak RSS is its own.
The target is safe/trusted <= 1.3: the restricted unpickler and the worker that
loads the file first must not cost much. Modes: ``safe`` is the default load with
a worker already running (every load after the first in a session), ``safe cold``
includes starting it, ``in-process`` is ``isolate=False``. Peak RSS is this
process's; the worker holds a second copy of the samples while it runs. The
frames path (workers flatten, only columns come back) is in bench_pipeline.py.

    python benchmarks/bench_load.py                 # build benchmarks/out/bench_dump.pt
    python benchmarks/bench_load.py path/to/rollout_3.pt
    python benchmarks/bench_load.py --demo          # use slime_trace_widget.demo instead
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "out" / "bench_dump.pt"
MODES = ("torch.load", "trusted", "safe", "safe cold", "in-process")
PD_PHASES = {
    "prefill": ("bootstrap_queue", "bootstrap", "alloc_wait", "forward", "transfer_queue"),
    "decode": ("prealloc", "bootstrap", "alloc_wait", "transfer", "forward"),
}
SPANS_PER_TURN = 2 + sum(1 + len(parts) for parts in PD_PHASES.values())


class _Carrier:
    """Builds one sample's trace carrier the way slime's trace_utils records it."""

    def __init__(self, rng: random.Random, index: int, group: int) -> None:
        self.rng = rng
        self.trace = {"version": 1, "trace_id": f"{rng.getrandbits(128):032x}",
                      "sample_id": index, "group_id": group, "attempt": 0, "events": []}

    def _record(self, kind: str, name: str, ts: float, **extra: object) -> None:
        base = {"type": kind, "name": name, "ts": ts, "trace_id": self.trace["trace_id"],
                "sample_id": self.trace["sample_id"], "group_id": self.trace["group_id"],
                "attempt": 0}
        self.trace["events"].append({**base, **extra})

    def span(self, name: str, start: float, end: float, parent: str | None,
             start_attrs: dict | None = None, end_attrs: dict | None = None) -> str:
        span_id = f"{self.rng.getrandbits(128):032x}"
        extra = {"parent_span_id": parent} if parent else {}
        self._record("span_start", name, start, span_id=span_id, attrs=start_attrs or {}, **extra)
        self._record("span_end", name, end, span_id=span_id, attrs=end_attrs or {})
        return span_id

    def event(self, name: str, ts: float, parent: str, attrs: dict) -> None:
        self._record("event", name, ts, parent_span_id=parent, attrs=attrs)


def _generation_turn(carrier: _Carrier, t: float, root: str, turn: int) -> float:
    """One sglang_generate span with PD child spans and a summary event; returns its end."""
    rng = carrier.rng
    durations = {(phase, part): rng.uniform(0.001, 0.2)
                 for phase, parts in PD_PHASES.items() for part in parts}
    total = sum(durations.values()) + rng.uniform(0.05, 0.5)
    meta = {"prompt_tokens": rng.randint(200, 4000), "completion_tokens": rng.randint(10, 2000),
            "cached_tokens": rng.randint(0, 2000), "queue_time": rng.random() * 0.1,
            "e2e_latency": total, "decode_throughput": rng.uniform(20, 200),
            "finish_reason": rng.choice(["stop", "length"]),
            "sglang_request_id": f"{rng.getrandbits(64):016x}"}
    gen = carrier.span("sglang_generate", t, t + total, root, {"turn": turn}, meta)
    cursor = t
    for phase, parts in PD_PHASES.items():
        length = sum(durations[(phase, p)] for p in parts)
        phase_id = carrier.span(f"sglang_pd_{phase}", cursor, cursor + length, gen, {},
                                {"phase": phase, "duration_s": length})
        for part in parts:
            d = durations[(phase, part)]
            carrier.span(f"sglang_pd_{phase}_{part}", cursor, cursor + d, phase_id, {},
                         {"duration_s": d})
            cursor += d
    carrier.event("sglang_pd_summary", cursor, gen,
                  {"pd_transfer_speed_gb_s": rng.uniform(1, 40),
                   "pd_transfer_total_mb": rng.uniform(1, 500), "pd_prefill_retry_count": 0})
    tool_end = t + total + rng.uniform(0.01, 3.0)
    carrier.span("tool_call", t + total, tool_end, root,
                 {"tool": rng.choice(["search", "python", "browse"]), "turn": turn},
                 {"ok": rng.random() > 0.05, "output_chars": rng.randint(0, 20000)})
    return tool_end


def synthetic_sample(rng: random.Random, index: int, turns: int, t0: float) -> dict:
    """A slime ``Sample.to_dict()``-shaped record with an agentic multi-turn trace."""
    group = index // 8
    carrier = _Carrier(rng, index, group)
    start = t0 + rng.uniform(0, 30)
    root = f"{rng.getrandbits(128):032x}"
    t = start
    for turn in range(turns):
        t = _generation_turn(carrier, t, root, turn)
    end = t + rng.uniform(0.1, 2.0)
    carrier.span("reward_model", t, end, root, {"rm": "deepsearch"}, {"reward": rng.random()})
    carrier.span("group_reward_model", end, end + 0.5, root, {"group": group}, {})
    carrier.trace["events"][:0] = [
        {"type": "span_start", "name": "generate_and_rm", "ts": start, "span_id": root,
         "trace_id": carrier.trace["trace_id"], "sample_id": index, "group_id": group,
         "attempt": 0, "attrs": {}},
    ]
    carrier.trace["events"].append(
        {"type": "span_end", "name": "generate_and_rm", "ts": end + 0.5, "span_id": root,
         "trace_id": carrier.trace["trace_id"], "sample_id": index, "group_id": group,
         "attempt": 0, "attrs": {}})
    return {"index": index, "group_index": group, "rollout_id": 0,
            "prompt": [{"role": "user", "content": f"question {index}"}],
            "response": "answer " * rng.randint(5, 50), "response_length": rng.randint(10, 4000),
            "label": "x", "reward": rng.random(), "status": "completed",
            "metadata": {"source": rng.choice(["hotpotqa", "math", "code"])},
            "trace": carrier.trace}


def build_synthetic(path: Path, n_samples: int, turns: int, seed: int) -> int:
    """Write the synthetic dump with slime_trace_widget.dump.save_dump; returns span count."""
    from slime_trace_widget.sources.dumps import save_dump

    rng = random.Random(seed)
    samples = [synthetic_sample(rng, i, turns, 1.7e9) for i in range(n_samples)]
    path.parent.mkdir(parents=True, exist_ok=True)
    save_dump(path, samples, rollout_id=0)
    return n_samples * (turns * SPANS_PER_TURN + 3)


def build_demo(path: Path, n_samples: int, seed: int) -> None:
    """Write the dump with the project's own simulator."""
    from slime_trace_widget.demo import write_demo_dump

    path.parent.mkdir(parents=True, exist_ok=True)
    write_demo_dump(path, n_samples=n_samples, seed=seed)


def _peak_rss_bytes() -> int:
    """Peak resident memory of this process.

    Linux's VmHWM restarts at exec; ru_maxrss does not (a child inherits the
    parent's peak through fork), so it is only the fallback.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return usage if sys.platform == "darwin" else usage * 1024


def measure(mode: str, path: str) -> None:
    """Child process: load once in ``mode`` and print seconds and peak RSS growth as JSON."""
    import torch

    from slime_trace_widget.sources.loading import load_dump

    if mode == "safe":  # start the rehearsal helper with a tiny load first
        load_dump(REPO / "tests" / "fixtures" / "small.pt")
    before = _peak_rss_bytes()
    start = time.perf_counter()
    if mode == "torch.load":
        obj = torch.load(path, map_location="cpu", weights_only=False)
        n = len(obj["samples"] if isinstance(obj, dict) else obj)
    else:
        n = len(load_dump(path, trusted=mode == "trusted", isolate=mode != "in-process").samples)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss_delta": _peak_rss_bytes() - before, "samples": n}))


def run_child(mode: str, path: Path) -> dict:
    """Time one load in a fresh interpreter, so caches and peak RSS don't leak across runs."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                      os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, __file__, "--measure", mode, str(path)],
                         check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def count_spans(path: Path) -> int:
    """Span starts in the file, counted from the loaded records."""
    from slime_trace_widget.sources.loading import load_dump

    return sum(1 for s in load_dump(path).samples
               for e in ((s.get("trace") or {}).get("events") or [])
               if isinstance(e, dict) and e.get("type") == "span_start")


def report(path: Path, repeats: int) -> dict[str, float]:
    """Print size, best-of-N time, throughput and peak memory per mode; return best times."""
    size_mb = path.stat().st_size / 1e6
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for _ in range(repeats):
        for mode in MODES:  # interleaved so drift hits every mode alike
            runs[mode].append(run_child(mode, path))
    print(f"file: {path}  size: {size_mb:.1f} MB  spans: {count_spans(path):,}  "
          f"samples: {runs['safe'][0]['samples']:,}")
    best = {}
    for mode in MODES:
        best[mode] = min(r["seconds"] for r in runs[mode])
        peak = max(r["rss_delta"] for r in runs[mode]) / 1e6
        print(f"{mode:>10}: best of {repeats} {best[mode]:.3f} s  "
              f"{size_mb / best[mode]:7.1f} MB/s  peak RSS +{peak:.0f} MB")
    ratio = best["safe"] / best["trusted"]
    print(f"ratio safe/trusted: {ratio:.3f} (target <= 1.3)  "
          f"safe cold/trusted: {best['safe cold'] / best['trusted']:.3f}  "
          f"in-process/trusted: {best['in-process'] / best['trusted']:.3f}  "
          f"safe/torch.load: {best['safe'] / best['torch.load']:.3f}")
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", help="existing dump to time (default: build one)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to build the dump")
    parser.add_argument("--samples", type=int,
                        help="samples to build (default: 1800 synthetic, 3600 demo: ~250k spans)")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--demo", action="store_true", help="build with slime_trace_widget.demo")
    parser.add_argument("--measure", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        measure(args.measure, args.path)
        return
    sys.path.insert(0, str(REPO))
    path = Path(args.path) if args.path else args.out
    if not args.path:
        start = time.perf_counter()
        if args.demo:
            build_demo(path, args.samples or 3600, args.seed)
        else:
            build_synthetic(path, args.samples or 1800, args.turns, args.seed)
        print(f"built {path} in {time.perf_counter() - start:.1f} s")
    report(path, args.repeats)


if __name__ == "__main__":
    main()
