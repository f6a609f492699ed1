"""Engine load: an hour of 16 engines scraped every second, its stored size, and the cost of
reading one rollout's window.

Usage::

    python benchmarks/engine_load_figures.py                  # 16 engines, 60 min, 5 min window
    python benchmarks/engine_load_figures.py --engines 4 --minutes 10 --window 2

Each simulated engine answers ``/metrics`` as an SGLang 0.5.23 server with
``--enable-metrics`` does under load (unified, one scheduler logging): the families of
``srt/observability/metrics_collector.py`` that a busy server sets, with their label
sets and histogram buckets (:data:`FAMILIES`, about 500 series), gauges moving and
counters and histograms growing as requests finish. Its text is parsed once by the
scraper's parser for the series; every tick then goes through the scraper's writing path
(``scrape_table`` for each engine, one durable append for the tick's scrapes, as the
group-commit writer makes it, a roll every 60 s). Prints:

* the parse cost of one answer, once its target's label texts are known (what 16 engines
  at 1 Hz cost the collector each second);
* rows, stored bytes (finished files) and bytes per row; the write time of the hour;
* reading one ``--window`` minutes window into ``engine_load`` (``load_engine_load``)
  and into tracks (``load_tracks``), best of 3.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

START = 1_800_000_000.0
MODEL = "Qwen/Qwen3-30B-A3B"
#: (name, type, extra label name, its values, bucket count): the families a busy SGLang
#: 0.5.23 server exposes (scheduler and tokenizer collectors), as measured by their shape.
FAMILIES: list[tuple[str, str, str, tuple[str, ...], int]] = [
    *[(f"sglang:{name}", "gauge", "", (), 0) for name in (
        "num_running_reqs", "num_queue_reqs", "num_grammar_queue_reqs", "gen_throughput",
        "cache_hit_rate", "decode_sum_seq_lens", "token_usage", "full_token_usage",
        "swa_token_usage", "mamba_usage", "num_used_tokens", "kv_available_tokens",
        "kv_evictable_tokens", "kv_used_tokens", "swa_available_tokens",
        "swa_evictable_tokens", "swa_used_tokens", "mamba_available_tokens",
        "mamba_evictable_tokens", "mamba_used_tokens", "spec_accept_length",
        "spec_accept_rate", "spec_cap_length", "spec_block_accept_length", "spec_num_steps",
        "spec_num_draft_tokens", "num_retracted_reqs", "num_paused_reqs",
        "num_prefill_bootstrap_queue_reqs", "num_prefill_inflight_queue_reqs",
        "num_decode_prealloc_queue_reqs", "num_decode_transfer_queue_reqs",
        "num_decode_host_receive_queue_reqs", "num_decode_deferred_kv_release_reqs",
        "pending_prealloc_token_usage", "prealloc_full_token_usage",
        "prealloc_swa_token_usage", "utilization", "fwd_occupancy", "new_token_ratio",
        "is_cuda_graph", "num_unique_running_routing_keys", "max_total_num_tokens",
        "weight_memory_usage_gb", "kv_cache_memory_usage_gb", "page_size", "num_pages",
        "context_len", "startup_available_gpu_memory_gb")],
    ("sglang:graph_memory_usage_gb", "gauge", "phase", ("decode", "prefill"), 0),
    *[(f"sglang:{name}", "counter", "", (), 0) for name in (
        "num_retracted_requests_total", "num_retracted_input_tokens_total",
        "num_retracted_output_tokens_total", "forward_execution_seconds_total",
        "scheduler_idle_seconds_total", "scheduler_process_cpu_seconds_total",
        "estimated_flops_per_gpu_total", "estimated_read_bytes_per_gpu_total",
        "estimated_write_bytes_per_gpu_total", "num_so_requests_total",
        "num_aborted_requests_total")],
    ("sglang:realtime_tokens_total", "counter", "mode",
     ("prefill_compute", "prefill_cache", "decode"), 0),
    ("sglang:prefill_effective_tokens_total", "counter", "mode",
     ("device_hit", "host_hit", "storage_hit", "input"), 0),
    ("sglang:scheduler_stage_seconds_total", "counter", "category",
     ("recv", "schedule", "forward", "process", "output", "idle"), 0),
    ("sglang:cuda_graph_passes_total", "counter", "mode", ("decode", "extend"), 0),
    ("sglang:prompt_tokens_total", "counter", "is_streaming", ("false",), 0),
    ("sglang:generation_tokens_total", "counter", "is_streaming", ("false",), 0),
    ("sglang:num_requests_total", "counter", "is_streaming", ("false",), 0),
    ("sglang:cached_tokens_total", "counter", "cache_source", ("device", "host"), 0),
    ("sglang:queue_time_seconds", "histogram", "", (), 40),
    ("sglang:per_stage_req_latency_seconds", "histogram", "stage",
     ("request_process", "prefill_waiting", "prefill_forward", "decode_forward"), 30),
    ("sglang:prompt_tokens_histogram", "histogram", "", (), 29),
    ("sglang:uncached_prompt_tokens_histogram", "histogram", "", (), 29),
    ("sglang:generation_tokens_histogram", "histogram", "", (), 29),
    ("sglang:get_loads_duration_seconds", "histogram", "", (), 9),
    ("sglang:time_to_first_token_seconds", "histogram", "is_streaming", ("false",), 18),
    ("sglang:inter_token_latency_seconds", "histogram", "", (), 23),
    ("sglang:request_time_per_output_token_seconds", "histogram", "is_streaming",
     ("false",), 23),
    ("sglang:e2e_request_latency_seconds", "histogram", "is_streaming", ("false",), 22),
]
_STATIC = {"sglang:max_total_num_tokens", "sglang:weight_memory_usage_gb",
           "sglang:kv_cache_memory_usage_gb", "sglang:page_size", "sglang:num_pages",
           "sglang:context_len", "sglang:startup_available_gpu_memory_gb",
           "sglang:graph_memory_usage_gb", "sglang:is_cuda_graph"}


class SimulatedEngine:
    """One engine's series and how they move from one second to the next."""

    def __init__(self, index: int, rng: np.random.Generator) -> None:
        self.rng = rng
        base = (f'engine_type="unified",model_name="{MODEL}",moe_ep_rank="0",pp_rank="0",'
                f'tp_rank="0"')
        lines: list[tuple[str, str, str]] = []  # (family, kind, sample prefix)
        for name, kind, extra, values, buckets in FAMILIES:
            for value in values or ("",):
                labels = base + (f',{extra}="{value}"' if extra else "")
                if kind != "histogram":
                    lines.append((name, kind, f"{name}{{{labels}}}"))
                    continue
                for bound in [*np.geomspace(0.001, 1000, buckets).tolist(), "+Inf"]:
                    lines.append((name, "bucket", f'{name}_bucket{{{labels},le="{bound}"}}'))
                lines.append((name, "count", f"{name}_count{{{labels}}}"))
                lines.append((name, "sum", f"{name}_sum{{{labels}}}"))
        self.lines = lines
        self.families = [name for name, _, _, _, _ in FAMILIES]
        self.kinds = np.array([kind for _, kind, _ in lines])
        static = np.array([family in _STATIC for family, _, _ in lines])
        self.moving_gauge = (self.kinds == "gauge") & ~static
        self.values = np.where(static, 1000.0 + index, 0.0)
        self.share = np.linspace(1.0, 0.02, len(lines))  # upper buckets grow faster

    def tick(self) -> np.ndarray:
        """The values a second later."""
        gauges = self.moving_gauge
        self.values[gauges] = np.maximum(0.0, self.values[gauges] + self.rng.normal(
            0, 1, gauges.sum())).round(3)
        growing = np.isin(self.kinds, ("counter", "bucket", "count", "sum"))
        finished = self.rng.poisson(6)
        gain = self.rng.binomial(finished, np.clip(self.share[growing], 0, 1))
        self.values[growing] += gain
        return self.values

    def text(self) -> bytes:
        """The answer's text, as prometheus_client writes it (0.0.4)."""
        out: list[str] = []
        done: set[str] = set()
        for (family, kind, prefix), value in zip(self.lines, self.values.tolist(),
                                                 strict=True):
            if family not in done:
                done.add(family)
                declared = "histogram" if kind in ("bucket", "count", "sum") else kind
                out.append(f"# HELP {family} {family[7:]}.\n# TYPE {family} {declared}\n")
            out.append(f"{prefix} {value!r}\n")
        return "".join(out).encode()


def simulate(folder: Path, engines: int, seconds: int, seed: int = 0) -> dict[str, Any]:
    """Write ``seconds`` of ``engines`` scraped every second into the load store at
    ``folder``; the parse cost of one answer, the rows and the time it took."""
    from slime_trace_widget.sources.engine.load_store import LoadStore, scrape_table
    from slime_trace_widget.sources.engine.prometheus import Exposition, parse_exposition

    rng = np.random.default_rng(seed)
    simulated = [SimulatedEngine(i, rng) for i in range(engines)]
    names = [f"10.0.{i // 8}.{i % 8 + 10}:30000" for i in range(engines)]
    caches: list[dict[str, str]] = [{} for _ in simulated]  # a scraper keeps one per target
    parsed = [parse_exposition(engine.text(), cache=cache)
              for engine, cache in zip(simulated, caches, strict=True)]
    texts = []
    for engine in simulated:
        engine.tick()
        texts.append(engine.text())
    started = time.perf_counter()
    for text, cache in zip(texts, caches, strict=True):  # the answers of the next second
        parse_exposition(text, cache=cache)
    parse_s = (time.perf_counter() - started) / engines
    store = LoadStore(folder)
    rows = 0
    started = time.perf_counter()
    for second in range(seconds):
        tables = []
        for index, (engine, first) in enumerate(zip(simulated, parsed, strict=True)):
            scrape = Exposition(first.metrics, first.labels, first.types,
                                engine.tick().tolist())
            ts_ns = int((START + second + rng.uniform(0.001, 0.02)) * 1e9) + index
            tables.append(scrape_table(names[index], scrape, ts_ns))
        table = pa.concat_tables(tables)
        store.append(table)
        rows += len(table)
        if second % 60 == 59:
            store.roll()  # the collector rolls its write-ahead file every minute
    store.close()
    return {"series": len(parsed[0]), "parse_ms": parse_s * 1e3, "rows": rows,
            "write_s": time.perf_counter() - started, "names": names}


def figures(engines: int = 16, minutes: float = 60.0, window_minutes: float = 5.0,
            folder: Path | None = None) -> dict[str, Any]:
    """Simulate, then measure the store and a window read; the figures as a dict."""
    from slime_trace_widget.frames.engine_load import load_tracks
    from slime_trace_widget.sources.engine.load_store import SUBDIR, load_engine_load

    scratch = Path(tempfile.mkdtemp(prefix="stw-load-")) if folder is None else folder
    try:
        written = simulate(scratch, engines, int(minutes * 60))
        files = sorted((scratch / SUBDIR).glob("load-*.parquet"))
        stored = sum(path.stat().st_size for path in files)
        start = START + minutes * 60 / 2
        end = start + window_minutes * 60
        read_s, tracks_s = [], []
        for _ in range(3):
            began = time.perf_counter()
            load = load_engine_load(scratch, start, end)
            read_s.append(time.perf_counter() - began)
            began = time.perf_counter()
            tracks = load_tracks(load)
            tracks_s.append(time.perf_counter() - began)
        return {"engines": engines, "minutes": minutes, "series_per_scrape": written["series"],
                "parse_ms": written["parse_ms"], "rows": written["rows"],
                "write_s": written["write_s"], "files": len(files), "stored_bytes": stored,
                "bytes_per_row": stored / max(written["rows"], 1),
                "window_minutes": window_minutes, "window_rows": len(load),
                "window_memory_bytes": int(load.memory_usage(deep=True).sum()),
                "read_s": min(read_s), "track_rows": len(tracks), "tracks_s": min(tracks_s)}
    finally:
        if folder is None:
            shutil.rmtree(scratch, ignore_errors=True)


def report(result: dict[str, Any]) -> str:
    """The figures as the lines this script prints."""
    return "\n".join([
        f"engine load: {result['engines']} engines scraped every second for "
        f"{result['minutes']:g} min, {result['series_per_scrape']} series per scrape "
        f"(SGLang 0.5.23's shape)",
        f"  parse one answer: {result['parse_ms']:.2f} ms "
        f"({result['parse_ms'] * result['engines'] / 10:.1f}% of a core at 1 Hz)",
        f"  stored: {result['rows']:,} rows in {result['files']} files, "
        f"{result['stored_bytes'] / 1e6:.1f} MB ({result['bytes_per_row']:.2f} B/row); "
        f"written in {result['write_s']:.1f} s",
        f"  one {result['window_minutes']:g} min window: {result['window_rows']:,} rows "
        f"({result['window_memory_bytes'] / 1e6:.0f} MB in pandas) read in "
        f"{result['read_s']:.2f} s; load_tracks {result['track_rows']:,} rows in "
        f"{result['tracks_s']:.2f} s",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", type=int, default=16)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--window", type=float, default=5.0, help="minutes read back")
    args = parser.parse_args()
    print(report(figures(args.engines, args.minutes, args.window)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
