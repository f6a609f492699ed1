"""Benchmark: sending a rollout to an OpenTelemetry backend over OTLP.

For each demo dump asked for (default: the 62 MB agentic shape), loads its frames,
then prints:

* building the OTLP messages alone (no sending): seconds, spans per second, and
  protobuf bytes per span;
* sending them to this package's own receiver (``slime-trace-viewer collect``, which
  answers only once the spans are on disk) over OTLP/HTTP, OTLP/HTTP with gzip and
  OTLP/gRPC: seconds and spans per second, end to end.

    python benchmarks/bench_otlp.py [--shapes 62mb_agentic 146mb_1m]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo_dumps import demo_dump

from slime_trace_widget.export.otlp import to_otlp
from slime_trace_widget.export.otlp_spans import otlp_batches
from slime_trace_widget.sources.engine.receiver import collect
from slime_trace_widget.sources.loading import load_frames


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def build_only(frames) -> tuple[float, int, int]:
    """Seconds to build every request, spans, and protobuf bytes."""
    started = time.perf_counter()
    spans = size = 0
    for batch in otlp_batches(frames):
        spans += batch.spans
        size += batch.request.ByteSize()
    return time.perf_counter() - started, spans, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["62mb_agentic"])
    args = parser.parse_args()
    for shape in args.shapes:
        frames = load_frames(demo_dump(shape))
        seconds, spans, size = build_only(frames)
        print(f"{shape}: {len(frames.samples)} samples, {spans} OTLP spans")
        print(f"  build only       {seconds:6.2f} s  {spans / seconds:9.0f} spans/s  "
              f"{size / spans:6.0f} B/span ({size / 1e6:.1f} MB)")
        with tempfile.TemporaryDirectory(prefix="stw-otlp-bench-") as folder:
            stop, ready = threading.Event(), threading.Event()
            http_port, grpc_port = free_port(), free_port()
            receiver = threading.Thread(target=collect, args=(
                folder, ("127.0.0.1", http_port), ("127.0.0.1", grpc_port),
                lambda _, started=ready: started.set(), stop), daemon=True)
            receiver.start()
            ready.wait(60)
            for label, endpoint, options in (
                    ("http/protobuf", f"http://127.0.0.1:{http_port}", {}),
                    ("http + gzip", f"http://127.0.0.1:{http_port}", {"compression": "gzip"}),
                    ("grpc", f"127.0.0.1:{grpc_port}", {"protocol": "grpc"})):
                report = to_otlp(frames, endpoint, progress=False, **options)
                print(f"  {label:<16} {report.seconds:6.2f} s  "
                      f"{report.spans / report.seconds:9.0f} spans/s  "
                      f"{report.batches} requests, {report.retries} retries")
            stop.set()
            receiver.join(120)


if __name__ == "__main__":
    main()
