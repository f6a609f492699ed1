"""The engines' load: the Prometheus parser on real and hostile text, the scraper against
real local HTTP servers, ``collect --scrape`` in its own process (and ``kill -9``), the
store's window reads, and the load reaching frames, the run dataset and the trends."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from slime_trace_widget.sources.engine.load_store import (
    SUBDIR,
    LoadStore,
    load_engine_load,
    read_load,
    scrape_table,
)
from slime_trace_widget.sources.engine.prometheus import (
    MAX_BODY_BYTES,
    MAX_SERIES,
    Exposition,
    parse_exposition,
)
from slime_trace_widget.sources.engine.scrape import STATUS_FILE, Scraper, Target, parse_target
from tests.support.browser import free_port

ROOT = Path(__file__).parents[2]
GUARD_SECONDS = 120  # a hang guard, never a timing assertion


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Return once ``condition()`` holds; fail after the hang guard."""
    deadline = time.monotonic() + GUARD_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what}")
        time.sleep(0.02)


# --------------------------------------------------------------------------- the parser


def real_exposition() -> bytes:
    """What prometheus_client (SGLang's exporter) writes for a few SGLang metrics."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    registry = CollectorRegistry()
    labels = ["model_name", "engine_type", "tp_rank"]
    running = Gauge("sglang:num_running_reqs", "The number of running requests.", labels,
                    registry=registry)
    running.labels('org/m "v2"\\x\ny', "unified", "0").set(7)
    usage = Gauge("sglang:token_usage", "The token usage.", labels, registry=registry)
    usage.labels("m", "unified", "0").set(float("nan"))
    usage.labels("m", "unified", "1").set(float("inf"))
    retracted = Counter("sglang:num_retracted_requests_total", "Retracted.", labels,
                        registry=registry)
    retracted.labels("m", "unified", "0").inc(3)
    latency = Histogram("sglang:e2e_request_latency_seconds", "E2E.", labels,
                        buckets=(0.5, 2.0), registry=registry)
    latency.labels("m", "unified", "0").observe(1.0)
    Gauge("python_gc_objects_collected", "not SGLang's", registry=registry).set(1)
    return generate_latest(registry)


def test_the_parser_reads_what_prometheus_client_writes() -> None:
    scrape = parse_exposition(real_exposition())
    rows = {(m, lab): (t, v) for m, lab, t, v in
            zip(scrape.metrics, scrape.labels, scrape.types, scrape.values, strict=True)}
    assert not scrape.skipped
    assert rows[("sglang:num_running_reqs",
                 'engine_type="unified",model_name="org/m \\"v2\\"\\\\x\\ny",tp_rank="0"')] \
        == ("gauge", 7.0)
    nan = rows[("sglang:token_usage", 'engine_type="unified",model_name="m",tp_rank="0"')]
    assert nan[0] == "gauge" and np.isnan(nan[1])
    assert rows[("sglang:token_usage", 'engine_type="unified",model_name="m",tp_rank="1"')] \
        == ("gauge", float("inf"))
    assert rows[("sglang:num_retracted_requests_total",
                 'engine_type="unified",model_name="m",tp_rank="0"')] == ("counter", 3.0)
    buckets = [lab for m, lab in rows if m.endswith("_bucket")]
    assert len(buckets) == 3 and all(rows[("sglang:e2e_request_latency_seconds_bucket", b)][0]
                                     == "histogram" for b in buckets)
    assert ("sglang:e2e_request_latency_seconds_sum",
            'engine_type="unified",model_name="m",tp_rank="0"') in rows
    names = set(scrape.metrics)
    assert not any(name.endswith("_created") for name in names)  # creation times: not load
    assert not any(name.startswith("python_") for name in names)
    everything = parse_exposition(real_exposition(), prefixes=None)
    assert "python_gc_objects_collected" in everything.metrics


def test_the_parser_reads_openmetrics_text() -> None:
    text = b"""# HELP sglang:num_requests Requests.
# TYPE sglang:num_requests counter
sglang:num_requests_total{model_name="m"} 12 1700000000.5 # {trace_id="abc"} 1.0 1700000000
sglang:num_requests_created{model_name="m"} 1.7e9
# TYPE sglang:gen_throughput gauge
# UNIT sglang:gen_throughput tokens
sglang:gen_throughput{model_name="m"} 1.5e3
# EOF
sglang:after_the_end 1
"""
    scrape = parse_exposition(text)
    assert list(zip(scrape.metrics, scrape.types, scrape.values, strict=True)) == [
        ("sglang:num_requests_total", "counter", 12.0),
        ("sglang:gen_throughput", "gauge", 1500.0)]


def test_the_parser_skips_and_counts_what_is_not_a_sample() -> None:
    long_value = "x" * 20_000
    text = "\n".join([
        'sglang:ok{a="1"} 1',
        'sglang:bad_escape{a="\\q"} 1',
        'sglang:repeated_label{a="1",a="2"} 1',
        "sglang:no_value",
        "sglang:underscored 1_000",
        "sglang:not_a_number twelve",
        'sglang:unclosed{a="1" 1',
        'sglang:no_blank{a="1"}1',
        'sglang:trailing 1 2 3',
        f'sglang:long{{a="{long_value}"}} 1',
        'sglang:ok{a="1"} 2',  # the same series again
        '{"utf8.name"} 1',
        "\x00\xff garbage",
        'sglang:braces_in_value{a="}{,="} -Inf',
        'sglang:spaces { a = "1" , } +Inf',
        "sglang:windows_line 3\r",
    ]).encode("utf-8", "surrogateescape")
    scrape = parse_exposition(text)
    assert list(zip(scrape.metrics, scrape.labels, scrape.values, strict=True)) == [
        ("sglang:ok", 'a="1"', 1.0),
        ("sglang:no_blank", 'a="1"', 1.0),
        ("sglang:braces_in_value", 'a="}{,="', float("-inf")),
        ("sglang:spaces", 'a="1"', float("inf")),
        ("sglang:windows_line", "", 3.0)]
    assert scrape.skipped == {"bad_lines": 9, "long_lines": 1, "duplicates": 1}


def test_a_huge_body_is_cut_off_at_the_limit_and_counted() -> None:
    line = b'sglang:big{pad="' + b"p" * 500 + b'"} 1\n'
    body = b"".join(line.replace(b"big", b"big%d" % i) for i in range(20_000))  # ~10 MB
    scrape = parse_exposition(body)
    assert scrape.skipped["cut_off"] == 1
    assert len(scrape) == body[:MAX_BODY_BYTES].count(b"\n")  # the whole lines before it
    assert scrape.metrics[-1] == f"sglang:big{len(scrape) - 1}"


def test_millions_of_series_stop_at_the_series_limit() -> None:
    count = 2_000_000
    body = b"".join(b"sglang:s{i=\"%d\"} 1\n" % i for i in range(count))
    scrape = parse_exposition(body, max_bytes=len(body))
    assert len(scrape) == MAX_SERIES
    assert scrape.skipped["over_series_limit"] == count - MAX_SERIES
    cut = parse_exposition(body)  # the default byte limit comes first
    assert cut.skipped["cut_off"] == 1 and len(cut) == MAX_SERIES


def test_targets_are_http_urls_with_a_name() -> None:
    assert parse_target("http://10.0.0.1:30000") == Target("10.0.0.1:30000",
                                                           "http://10.0.0.1:30000/metrics")
    assert parse_target("decode-0=https://h/x/metrics?a=b") == Target(
        "decode-0", "https://h/x/metrics?a=b")
    assert parse_target("http://[::1]:9/metrics").name == "[::1]:9"
    assert parse_target("http://h.example/").name == "h.example:80"
    for bad in ("file:///etc/passwd", "ftp://h/metrics", "h:30000", "http://:80/",
                "http://h:99999/", "x\ny=http://h/", "http://user:secret@h/metrics"):
        with pytest.raises(ValueError):
            parse_target(bad)


# --------------------------------------------------------------------------- a real server


class MetricsServer:
    """A local HTTP server with the answers the tests need, on a free 127.0.0.1 port."""

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}
        self.release = threading.Event()
        self.running = 1
        pad = "p" * 500
        self.huge = "".join(f'sglang:big{i}{{pad="{pad}"}} {i}\n'
                            for i in range(12_000)).encode()  # ~6 MB
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path
                server.requests[path] = server.requests.get(path, 0) + 1
                if path == "/metrics":
                    body = ("# TYPE sglang:num_running_reqs gauge\n"
                            f'sglang:num_running_reqs{{model_name="m",tp_rank="0"}} '
                            f"{server.running}\n"
                            "# TYPE sglang:num_requests_total counter\n"
                            f'sglang:num_requests_total{{model_name="m"}} '
                            f"{server.requests[path]}\n").encode()
                    self._send(200, body)
                elif path == "/huge":
                    self._send(200, server.huge)
                elif path == "/html":
                    self._send(200, b"<html><body>Not here</body></html>\n")
                elif path == "/flaky" and server.requests[path] <= 3:
                    self._send(503, b"busy\n")
                elif path == "/flaky":
                    self._send(200, b"sglang:num_queue_reqs 2\n")
                elif path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", "/metrics")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif path == "/slow":
                    server.release.wait(GUARD_SECONDS)
                    self._send(200, b"sglang:late 1\n")
                else:
                    self._send(500, b"error\n")

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, address: object) -> None:
                pass  # a scraper that stops reading a huge answer is expected

        self.server = Server(("127.0.0.1", free_port()), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    running = MetricsServer()
    yield running
    running.close()


def test_failing_targets_are_counted_retried_and_do_not_stop_the_others(
        tmp_path: Path, server: MetricsServer) -> None:
    targets = [Target("good", server.url("/metrics")),
               Target("refused", f"http://127.0.0.1:{free_port()}/metrics"),
               Target("error", server.url("/error")), Target("html", server.url("/html")),
               Target("redirect", server.url("/redirect")), Target("slow", server.url("/slow")),
               Target("flaky", server.url("/flaky")), Target("huge", server.url("/huge"))]
    scraper = Scraper(tmp_path, targets, interval=0.05, timeout=0.5).start()
    stats = scraper.stats
    try:
        wait_for(lambda: stats["good"].scrapes >= 10 and stats["flaky"].scrapes >= 2
                 and stats["huge"].scrapes >= 2 and stats["slow"].failures["timeout"] >= 2
                 and all(sum(stats[name].failures.values()) >= 3
                         for name in ("refused", "error", "html", "redirect")),
                 "every target's outcome, more than once")
    finally:
        scraper.stop()
    assert stats["refused"].failures == {"refused": stats["refused"].failures["refused"]}
    assert set(stats["error"].failures) == {"http 500"}
    assert set(stats["html"].failures) == {"unparseable"}
    assert set(stats["redirect"].failures) == {"http 302"}  # never followed
    assert stats["flaky"].failures == {"http 503": 3}  # retried until it answered
    assert stats["huge"].skipped["cut_off"] == stats["huge"].scrapes
    assert server.requests.get("/metrics", 0) == stats["good"].scrapes  # the redirect's not
    load = load_engine_load(tmp_path)
    assert set(load["engine"]) == {"good", "flaky", "huge"}
    good = load[load["engine"] == "good"]
    assert good["ts"].nunique() == stats["good"].scrapes
    assert set(good["metric"]) == {"sglang:num_running_reqs", "sglang:num_requests_total"}
    huge = load[load["engine"] == "huge"]
    per_scrape = huge.groupby("ts").size()
    assert (per_scrape == stats["huge"].samples // stats["huge"].scrapes).all()
    assert per_scrape.iloc[0] < 12_000  # cut at the byte limit, whole lines only
    status = json.loads((tmp_path / STATUS_FILE).read_text())
    assert status["targets"]["refused"]["failures"]["refused"] >= 3
    assert status["targets"]["good"]["scrapes"] == stats["good"].scrapes
    # the finished files are sorted by time and dictionary-encoded
    files = sorted((tmp_path / SUBDIR).glob("load-*.parquet"))
    assert files and not list((tmp_path / SUBDIR).glob("wal-*"))
    table = pq.read_table(files[0])
    assert table.schema.field("labels").type.value_type == "string"
    stamps = table.column("ts_ns").to_numpy()
    assert (np.diff(stamps) >= 0).all()


def test_scrape_times_are_the_collectors_clock_around_the_request(
        tmp_path: Path, server: MetricsServer) -> None:
    before = time.time()
    scraper = Scraper(tmp_path, [Target("good", server.url("/metrics"))], interval=0.05)
    scraper.start()
    try:
        wait_for(lambda: scraper.stats["good"].scrapes >= 3, "three scrapes")
    finally:
        scraper.stop()
    after = time.time()
    load = load_engine_load(tmp_path)
    assert before <= load["ts"].min() and load["ts"].max() <= after
    counts = load[load["metric"] == "sglang:num_requests_total"]["value"]
    assert counts.tolist() == sorted(counts.tolist())  # one answer per time, in order


# --------------------------------------------------------------------------- the command


def start_collect(folder: Path, *scrape: str) -> tuple[subprocess.Popen, list[str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", "collect", str(folder), "--no-grpc",
         "--http", f"127.0.0.1:{free_port()}", *scrape],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines: list[str] = []

    def read() -> None:
        for _ in range(2 if scrape else 1):
            lines.append(process.stdout.readline())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(GUARD_SECONDS)
    if not lines or not all(lines):
        process.kill()
        raise AssertionError(f"the collector did not start: {process.communicate()[1]}")
    return process, lines


def test_collect_scrapes_and_kill_9_loses_nothing_stored(tmp_path: Path,
                                                         server: MetricsServer) -> None:
    folder = tmp_path / "engine"
    process, lines = start_collect(folder, "--scrape", server.url("/metrics"),
                                   "--scrape", f"down=http://127.0.0.1:{free_port()}",
                                   "--scrape-interval", "0.05")
    try:
        assert lines[0].startswith("receiving OTLP on ")
        assert lines[1].startswith("scraping 2 engine(s) every 0.05 s")
        assert f"127.0.0.1:{server.port}=" in lines[1] and "down=" in lines[1]
        wait_for(lambda: read_load(folder).num_rows >= 40, "twenty scrapes on disk")
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=GUARD_SECONDS)
    assert list((folder / SUBDIR).glob("wal-*.arrows"))  # kept, not yet rolled
    as_it_lies = load_engine_load(folder)
    assert len(as_it_lies) >= 40
    restarted, _ = start_collect(folder)  # reopening rolls what the killed one left
    restarted.send_signal(signal.SIGTERM)
    _, err = restarted.communicate(timeout=GUARD_SECONDS)
    assert restarted.returncode == 0, err
    recovered = load_engine_load(folder)
    pd.testing.assert_frame_equal(recovered, as_it_lies)
    files = [f for f in (folder / SUBDIR).iterdir() if f.name != ".lock"]
    assert files and all(f.suffix == ".parquet" for f in files)


def test_collect_reports_each_target_when_stopped(tmp_path: Path,
                                                  server: MetricsServer) -> None:
    process, _ = start_collect(tmp_path, "--scrape", f"good={server.url('/metrics')}",
                               "--scrape", f"down=http://127.0.0.1:{free_port()}",
                               "--scrape-interval", "0.05")
    def counted() -> bool:
        try:
            targets = json.loads((tmp_path / STATUS_FILE).read_text())["targets"]
        except (OSError, ValueError):
            return False
        return targets["good"]["scrapes"] >= 2 and targets["down"]["failures"].get("refused")

    try:
        wait_for(counted, "the status file's counts")
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=GUARD_SECONDS)
    assert process.returncode == 0, err
    assert "scraped good: " in out and "0 failed" in out.split("scraped good: ")[1]
    assert "scraped down: 0 scrape(s) kept" in out and "refused" in out
    status = json.loads((tmp_path / STATUS_FILE).read_text())
    assert status["targets"]["down"]["failures"]["refused"] >= 1


def test_collect_refuses_bad_targets(tmp_path: Path) -> None:
    for args, message in ((["--scrape", "file:///etc/passwd"], "only http"),
                          (["--scrape", "a=http://h/", "--scrape", "a=http://g/"], "named alike"),
                          (["--scrape-interval", "0"], "is not a number of seconds from")):
        result = subprocess.run([sys.executable, "-m", "slime_trace_widget", "collect",
                                 str(tmp_path), *args], capture_output=True, text=True,
                                timeout=GUARD_SECONDS, cwd=ROOT)
        assert result.returncode == 2 and message in result.stderr
    help_text = subprocess.run([sys.executable, "-m", "slime_trace_widget", "collect", "--help"],
                               capture_output=True, text=True, timeout=GUARD_SECONDS,
                               cwd=ROOT).stdout
    assert "--scrape [NAME=]URL" in help_text and "--scrape-interval SECONDS" in help_text


# --------------------------------------------------------------------------- the store


def store_scrapes(folder: Path, engine: str, times: np.ndarray,
                  series: dict[str, Callable[[float], float]], labels: str = "") -> None:
    """Scrapes of ``engine`` at ``times`` (one file), each with ``series`` (metric -> value
    at that time), written through the scraper's path."""
    store = LoadStore(folder)
    for ts in times:
        scrape = Exposition(list(series), [labels] * len(series), ["gauge"] * len(series),
                            [value(float(ts)) for value in series.values()])
        store.append(scrape_table(engine, scrape, round(ts * 1e9)))
    store.close()


def test_a_window_reads_only_the_files_that_overlap_it(tmp_path: Path) -> None:
    from slime_trace_widget.sources.engine.store import read_spans

    store_scrapes(tmp_path, "e", np.arange(1000.0, 1100.0), {"sglang:a": lambda t: t})
    store_scrapes(tmp_path, "e", np.arange(9000.0, 9100.0), {"sglang:a": lambda t: t})
    files = sorted((tmp_path / SUBDIR).glob("load-*.parquet"))
    assert len(files) == 2
    window = load_engine_load(tmp_path, 1010.0, 1019.5)
    assert window["ts"].tolist() == [float(t) for t in range(1010, 1020)]
    assert window["value"].tolist() == window["ts"].tolist()
    files[1].write_bytes(b"not parquet")  # a file outside the window is never opened
    assert len(load_engine_load(tmp_path, 990.0, 1200.0)) == 100
    with pytest.warns(RuntimeWarning, match="skipped engine load"):
        assert len(load_engine_load(tmp_path)) == 100
    # a list of files: each store takes its own and leaves the other's alone
    assert len(load_engine_load([files[0]])) == 100
    assert read_spans([files[0]]).num_rows == 0
    assert load_engine_load(tmp_path, 5000.0, 6000.0).empty


# --------------------------------------------------------------------------- frames, dataset


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A dump; a collector folder with its requests (hosts of known skew) and the load of
    two engines over the dump's time and ten minutes either side."""
    from slime_trace_widget import load_frames
    from slime_trace_widget.demo import write_demo_dump
    from tests.sources.test_engine_join import SKEWS, store_requests
    from tests.support.engine_traces import requests_for

    folder = tmp_path_factory.mktemp("load_run")
    (folder / "debug").mkdir()
    dump = write_demo_dump(folder / "debug" / "rollout_3.pt", n_samples=12, seed=5,
                           rollout_id=3)
    frames = load_frames(str(dump), progress=False)
    store_requests(requests_for(frames, pd=False, hosts=tuple(SKEWS)), folder / "engine", SKEWS)
    times = np.arange(np.floor(frames.t0) - 600, np.ceil(frames.t1) + 600, 1.0)
    middle = (frames.t0 + frames.t1) / 2
    host = next(iter(SKEWS))
    labels = 'model_name="m",tp_rank="0"'
    store_scrapes(folder / "engine", host, times, {
        "sglang:num_running_reqs": lambda t: 11.0 if abs(t - middle) < 0.5 else 3.0,
        "sglang:token_usage": lambda t: 0.2}, labels)
    store_scrapes(folder / "engine", "10.0.0.9:30000", times + 0.25, {
        "sglang:num_running_reqs": lambda t: 5.0, "sglang:token_usage": lambda t: 0.9,
        "sglang:cache_hit_rate": lambda t: 0.5}, labels)
    return {"dump": dump, "engine": folder / "engine", "frames": frames, "host": host,
            "times": times}


def test_load_frames_reads_the_load_of_the_dumps_window_only(run: dict) -> None:
    from slime_trace_widget import load_frames
    from slime_trace_widget.sources.engine.window import MARGIN_SECONDS

    frames = load_frames(str(run["dump"]), progress=False, engine_traces=str(run["engine"]))
    load = frames.engine_load
    assert list(load.columns) == ["engine", "metric", "labels", "ts", "value"]
    low, high = frames.t0 - MARGIN_SECONDS, frames.t1 + MARGIN_SECONDS
    plain = load[load["engine"] == "10.0.0.9:30000"]
    stored = run["times"] + 0.25
    expected = stored[(stored >= low) & (stored <= high)]
    assert np.allclose(np.sort(plain["ts"].unique()), expected)
    assert set(plain["metric"]) == {"sglang:num_running_reqs", "sglang:token_usage",
                                    "sglang:cache_hit_rate"}
    # the engine named after a traced host is shifted by that host's skew
    skew = frames.engine_skew.set_index("host").at[run["host"], "skew"]
    shifted = load[load["engine"] == run["host"]]
    inside = run["times"][(run["times"] >= low) & (run["times"] <= high)]
    assert np.allclose(np.sort(shifted["ts"].unique()), inside + skew)
    assert abs(skew) > 0.5


def test_the_dataset_keeps_the_load_and_trends_read_it(run: dict, tmp_path: Path) -> None:
    import shutil

    from slime_trace_widget import load_frames
    from slime_trace_widget.answers.trends import rollout_trends
    from slime_trace_widget.export.trend_log import scalars
    from slime_trace_widget.sources.dataset import convert, open_dataset

    engine = shutil.copytree(run["engine"], tmp_path / "engine")  # this test adds to it
    out = tmp_path / "dataset"
    dump = str(run["dump"])
    assert convert([dump], out, engine_traces=engine, settle_seconds=0).converted == [dump]
    direct = load_frames(dump, progress=False, engine_traces=str(engine))
    opened = open_dataset(out)
    pd.testing.assert_frame_equal(opened.engine_load, direct.engine_load)
    assert list((out / "engine_load").glob("rollout_id=3/*.parquet"))
    assert convert([dump], out, engine_traces=engine, settle_seconds=0).unchanged == [dump]
    # new load in the dump's window: converted again
    store_scrapes(engine, "late", np.array([run["frames"].t0 + 1.0]),
                  {"sglang:num_running_reqs": lambda t: 1.0})
    assert convert([dump], out, engine_traces=engine, settle_seconds=0).converted == [dump]
    assert "late" in set(open_dataset(out).engine_load["engine"])
    for trends in (rollout_trends(out), rollout_trends(direct)):
        row = trends.iloc[0]
        # per engine its median and largest; then the busiest engine's
        assert row["load_running_p50"] == 5.0 and row["load_running_max"] == 11.0
        assert row["load_token_usage_p50"] == 0.9 and row["load_token_usage_max"] == 0.9
        assert np.isnan(row["load_queued_p50"]) and np.isnan(row["load_throughput_max"])
        assert "rollout/load_running_max" in scalars(row, "rollout")
    without = tmp_path / "without"
    convert([dump], without, settle_seconds=0)
    assert open_dataset(without).engine_load.empty
    assert not any(c.startswith("load_") for c in rollout_trends(without).columns)


# --------------------------------------------------------------------------- SGLang's own


def test_sglangs_own_metrics_become_the_tracks(tmp_path: Path) -> None:
    """SGLang 0.5.23's metrics collectors, served as its server serves them, scraped."""
    import importlib.util

    if importlib.util.find_spec("sglang") is None:
        pytest.skip("SGLang is not installed (pip install --no-deps sglang==0.5.23)")
    from slime_trace_widget.frames.engine_load import load_tracks
    from tests.support.sglang_metrics import serve_metrics

    with serve_metrics(initial={"num_running_reqs": 5, "num_queue_reqs": 2,
                                "token_usage": 0.5, "gen_throughput": 800.0}) as engine:
        scraper = Scraper(tmp_path, [Target("decode-0", engine.url)], interval=0.05).start()
        stats = scraper.stats["decode-0"]

        def two_more_scrapes() -> None:
            seen = stats.scrapes
            wait_for(lambda: stats.scrapes >= seen + 2, "two scrapes after a change")

        try:
            two_more_scrapes()
            engine.set(num_running_reqs=9, num_queue_reqs=4, token_usage=0.95,
                       gen_throughput=2000.0)
            engine.retract(3)
            two_more_scrapes()
            engine.retract(2)
            two_more_scrapes()
        finally:
            scraper.stop()
    assert not stats.failures and not stats.skipped
    load = load_engine_load(tmp_path)
    assert {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
            "sglang:gen_throughput", "sglang:num_retracted_requests_total"} <= set(load["metric"])
    tracks = load_tracks(load)
    assert set(tracks["engine"]) == {"decode-0"}

    def values(name: str) -> list[float]:
        return tracks[tracks["track"] == name]["value"].tolist()

    running, queued = values("running"), values("queued")
    assert running[0] == 5.0 and running[-1] == 9.0 and set(running) == {5.0, 9.0}
    assert queued[0] == 2.0 and queued[-1] == 4.0
    assert values("token_usage")[-1] == 0.95 and values("throughput")[-1] == 2000.0
    counter = load[load["metric"] == "sglang:num_retracted_requests_total"]
    assert counter["value"].iloc[-1] == 5.0
    retractions = tracks[tracks["track"] == "retractions"]
    times = np.sort(counter["ts"].unique())
    gaps = pd.Series(np.diff(times), index=times[1:])
    # the rates, over the time between scrapes, add up to what the counter gained
    gained = float((retractions.set_index("ts")["value"] * gaps).sum())
    assert gained == pytest.approx(counter["value"].iloc[-1] - counter["value"].iloc[0])
    assert gained > 0


def test_back_off_doubles_to_its_cap_and_never_overflows() -> None:
    from slime_trace_widget.sources.engine.scrape import MAX_BACKOFF, backoff

    assert backoff(1.0, 0) == 1.0
    assert [backoff(1.0, n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert backoff(1.0, 10_000) == MAX_BACKOFF  # days of a target down
    assert backoff(60.0, 5) == 60.0  # never below the interval
