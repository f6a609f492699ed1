"""The SGLang driver (tests/support) against SGLang 0.5.23's own code and this package's
receiver: what SGLang's tracing emits for each scenario reaches the store whole, over
OTLP/gRPC and OTLP/HTTP, in the shape ``shared/engine-traces.md`` describes; and SGLang's
own metrics collector, served over HTTP, says what the test set.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from slime_trace_widget.sources.engine.store import load_engine_traces
from slime_trace_widget.sources.loading import load_frames
from tests.support.receiver import start_receiver
from tests.support.sglang_driver import (
    DEFAULT_HOSTS,
    PD_SCENARIOS,
    SCENARIOS,
    Driven,
    Half,
    Request,
    default_rids,
    generation_spans,
    plan,
    write_dump,
)
from tests.support.sglang_import import SGLANG_VERSION

ROOT = Path(__file__).parents[2]
#: Hang guards, generous: a busy 2-core machine imports torch and SGLang slowly.
STARTUP_SECONDS = 120
DRIVE_SECONDS = 600
#: SGLang converts times through floats (perf_counter + offset): a few hundred ns.
TIME_TOLERANCE_NS = 2_000
SKEWS = {DEFAULT_HOSTS[0]: 1.5, DEFAULT_HOSTS[1]: -0.8, DEFAULT_HOSTS[2]: 0.03}
#: The third host traces at level 2: no decode_loop, chunked_prefill, fake_output, schedule.
LEVELS = {DEFAULT_HOSTS[0]: 3, DEFAULT_HOSTS[1]: 3, DEFAULT_HOSTS[2]: 2}
TOP_SLICES = {
    "unified": ["request_process", "prefill_waiting", "prefill_forward", "decode_waiting",
                "decode_forward"],
    "prefill": ["prefill_prepare", "prefill_bootstrap", "prefill_waiting", "prefill_forward",
                "prefill_transfer_kv_cache"],
    "decode": ["decode_prepare", "decode_bootstrap", "decode_transferred", "decode_waiting",
               "decode_forward"],
}
TOKENIZER = {"unified": "Tokenizer", "prefill": "PrefillTokenizer", "decode": "DecodeTokenizer"}
SCHEDULER = {"unified": "Scheduler", "prefill": "Prefill Scheduler",
             "decode": "Decode Scheduler"}


@pytest.fixture(scope="module", autouse=True)
def sglang_installed() -> None:
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version != SGLANG_VERSION:
        pytest.fail(f"these tests run SGLang {SGLANG_VERSION}'s own code (found {version}): "
                    f"pip install --no-deps sglang=={SGLANG_VERSION} (README command 2 and "
                    ".ci/run do)")


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_frames(write_dump(tmp_path_factory.mktemp("dump") / "rollout_0.pt",
                                  default_rids(30, seed=5), seed=5))


@pytest.fixture(scope="module")
def requests(frames: Any) -> list[Request]:
    return plan(frames, (*SCENARIOS, "unsampled"), seed=5, decode_iterations=(2, 5))


# --------------------------------------------------------------------------- receiver


@dataclass
class Run:
    driven: Driven
    stored: pd.DataFrame
    protocol: str


@pytest.fixture(scope="module", params=["grpc", "http/protobuf"])
def run(request: pytest.FixtureRequest, requests: list[Request],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    from tests.support.sglang_driver import drive

    protocol = request.param
    work = tmp_path_factory.mktemp(protocol.replace("/", "-"))
    receiver = start_receiver(work / "engine")
    try:
        driven = drive(requests, receiver.endpoint(protocol), protocol, SKEWS, LEVELS,
                       work / "hosts", timeout=DRIVE_SECONDS)
        receiver.stop()
        yield Run(driven, load_engine_traces(receiver.folder), protocol)
    finally:
        if receiver.process.poll() is None:
            receiver.process.kill()
            receiver.process.communicate(timeout=STARTUP_SECONDS)


# --------------------------------------------------------------------------- helpers


class Tree:
    """Spans by id and their children, from the store's or the capture's rows."""

    def __init__(self, spans: pd.DataFrame) -> None:
        self.rows = {row["span_id"]: row for row in spans.to_dict("records")}
        self.children: dict[str, list[dict]] = {}
        for row in self.rows.values():
            parent = row["parent_id"]
            if isinstance(parent, str):
                self.children.setdefault(parent, []).append(row)
        for kids in self.children.values():
            kids.sort(key=lambda row: (row["start_ns"], row["name"]))

    def kids(self, row: dict) -> list[dict]:
        return self.children.get(row["span_id"], [])

    def below(self, row: dict) -> list[dict]:
        out, stack = [], list(self.kids(row))
        while stack:
            item = stack.pop()
            out.append(item)
            stack.extend(self.kids(item))
        return out

    def root(self, half: Half) -> dict | None:
        found = [row for row in self.rows.values() if row["name"] == half.root_name
                 and row["attributes"].get("gen_ai.request.id") == half.server_rid]
        assert len(found) <= 1, (half.server_rid, len(found))
        return found[0] if found else None


def text(value: Any) -> str | None:
    """An id column's value: text, or None where pandas holds a missing one as NaN."""
    return value if isinstance(value, str) else None


def ns(seconds: float, host: str) -> int:
    return round((seconds - SKEWS[host]) * 1e9)


def close(actual: int, seconds: float, host: str) -> bool:
    return abs(actual - ns(seconds, host)) <= TIME_TOLERANCE_NS


def halves(requests: list[Request]) -> Iterator[tuple[Request, Half]]:
    for request in requests:
        if request.sampled:
            for half in request.halves:
                yield request, half


def scheduler_threads(tree: Tree, root: dict, half: Half) -> list[dict]:
    return [row for row in tree.kids(root) if row["name"].startswith(SCHEDULER[half.role] + " [")]


def schedule_ops(half: Half) -> int:
    return sum(op[3] if op[0] == "decode" else op[0] == "schedule" for op in half.sched)


# --------------------------------------------------------------------------- the plan


def test_the_plan_covers_every_scenario_for_the_dumps_rids(frames: Any,
                                                           requests: list[Request]) -> None:
    spans = generation_spans(frames)
    assert len(spans) == 30
    assert {request.scenario for request in requests} == {*SCENARIOS, "unsampled"}
    by_span = {request.span: request for request in requests if request.span is not None}
    assert set(by_span) == set(spans["span"])
    for row in spans.itertuples():
        request = by_span[row.span]
        assert request.client_rid == row.rid
        assert row.start < request.start < request.end < row.end
        assert all(row.start < half.start and half.end <= row.end for half in request.halves)
        if "_" in row.rid:
            assert request.scenario == "underscore_rid"
        if request.scenario in PD_SCENARIOS:
            prefill, decode = request.halves
            assert (prefill.role, decode.role) == ("prefill", "decode")
            assert decode.server_rid == row.rid
            assert (prefill.server_rid == row.rid) == (request.scenario == "pd_client_rid")
            assert prefill.bootstrap_room == decode.bootstrap_room is not None
            assert prefill.host != decode.host
        if request.scenario in ("traceparent", "unsampled"):
            flags = "01" if request.scenario == "traceparent" else "00"
            assert request.traceparent == f"00-{row.trace_id}-{row.span_id}-{flags}"
    strays = [request for request in requests if request.scenario == "stray"]
    assert strays and all(request.span is None for request in strays)
    rids = [half.server_rid for request in requests for half in request.halves
            if request.scenario != "pd_client_rid"]
    assert len(rids) == len(set(rids))


# --------------------------------------------------------------------------- the store


def test_everything_sglang_emitted_arrives_in_the_store(run: Run) -> None:
    driven, stored = run.driven, run.stored
    assert driven.dropped == 0, driven.hosts
    assert driven.spans_ended == len(driven.emitted) == len(stored)
    emitted = driven.emitted.set_index("span_id")
    stored = stored.set_index("span_id")
    assert set(emitted.index) == set(stored.index)
    assert not stored.index.duplicated().any()
    for span_id, row in emitted.iterrows():
        kept = stored.loc[span_id]
        assert (kept["trace_id"], kept["name"]) == (row["trace_id"], row["name"])
        assert (kept["start_ns"], kept["end_ns"]) == (row["start_ns"], row["end_ns"])
        assert text(kept["parent_id"]) == text(row["parent_id"])
        assert kept["attributes"] == row["attributes"], row["name"]
        assert kept["events"] == row["events"], row["name"]
        assert [(link["trace_id"], link["span_id"]) for link in kept["links"]] == [
            (link["trace_id"], link["span_id"]) for link in row["links"]]
        assert kept["resource"]["service.name"] == "sglang"


def test_each_request_root_as_sglang_names_it(run: Run) -> None:
    tree = Tree(run.stored)
    for request, half in halves(run.driven.requests):
        root = tree.root(half)
        assert root is not None, (request.scenario, half.role, half.server_rid)
        attrs = root["attributes"]
        assert attrs["rid"] == half.server_rid.split("_")[-1]
        assert root["name"] == f"{'' if half.role == 'unified' else half.role} Req " \
                               f"{attrs['rid'][:8]}"
        assert attrs["module"] == "sglang::request"
        assert attrs["gen_ai.request.id"] == half.server_rid
        assert attrs["gen_ai.usage.completion_tokens"] == half.usage["completion_tokens"]
        assert attrs["gen_ai.latency.e2e"] == pytest.approx(half.end - half.start, abs=1e-5)
        if half.role == "unified":
            assert "bootstrap_room" not in attrs
        else:
            assert attrs["bootstrap_room"] == hex(half.bootstrap_room)
        assert close(root["start_ns"], half.start, half.host)
        assert close(root["end_ns"], half.end, half.host)
        if request.traceparent is None:
            assert text(root["parent_id"]) is None
            assert root["trace_id"].startswith("0" * 16)  # SGLang's 64-bit trace ids
        else:
            _, trace_id, span_id, _ = request.traceparent.split("-")
            assert (root["trace_id"], root["parent_id"]) == (trace_id, span_id)


def test_thread_spans_one_tokenizer_and_one_scheduler_per_tp_rank(run: Run) -> None:
    tree = Tree(run.stored)
    seen_tp2 = False
    for _, half in halves(run.driven.requests):
        root = tree.root(half)
        threads = tree.kids(root)
        tokenizers = [row for row in threads
                      if row["name"].startswith(TOKENIZER[half.role] + "(host:")]
        schedulers = scheduler_threads(tree, root, half)
        assert len(threads) == 1 + half.tp_size == len(tokenizers) + len(schedulers)
        tokenizer = tokenizers[0]
        assert tokenizer["name"] == (f"{TOKENIZER[half.role]}(host:{half.host[:8]} | "
                                     f"pid:{tokenizer['attributes']['pid']})")
        assert [row["name"] for row in tree.kids(tokenizer)] == ["tokenize",
                                                                 "api_server_dispatch"]
        assert close(tokenizer["end_ns"], half.tok["dispatched"], half.host)
        shapes = []
        for rank, thread in enumerate(sorted(schedulers, key=lambda row: row["name"])):
            attrs = thread["attributes"]
            assert thread["name"] == (f"{SCHEDULER[half.role]} [TP {rank}]  [PP 0] "
                                      f"(host:{half.host[:8]} | pid:{attrs['pid']})")
            assert (attrs["tp_rank"], attrs["pp_rank"], attrs["host_id"]) == (rank, 0, half.host)
            assert attrs["thread_label"] == SCHEDULER[half.role]
            assert close(thread["start_ns"], half.at("recv")[0], half.host)
            assert close(thread["end_ns"], half.at("complete")[0], half.host)
            shapes.append([(row["name"], row["start_ns"], row["end_ns"])
                           for row in sorted(tree.below(thread),
                                             key=lambda row: (row["start_ns"], row["name"]))])
        assert all(shape == shapes[0] for shape in shapes)  # every rank the same slices
        seen_tp2 |= half.tp_size == 2
    assert seen_tp2


def test_slices_events_and_levels_follow_each_scenario(run: Run) -> None:
    tree = Tree(run.stored)
    covered: set[tuple[str, int]] = set()
    for request, half in halves(run.driven.requests):
        level = LEVELS[half.host]
        covered.add((request.scenario, level))
        root = tree.root(half)
        for thread in scheduler_threads(tree, root, half):
            top = tree.kids(thread)
            assert [row["name"] for row in top] == TOP_SLICES[half.role], request.scenario
            below = tree.below(thread)
            loops = [row for row in below if row["name"] == "decode_loop"]
            assert len(loops) == (half.decode_iterations if level == 3 else 0)
            assert sorted(row["attributes"]["decode_ct"] for row in loops) == list(
                range(len(loops)))
            if loops:
                assert max(row["end_ns"] for row in loops) == thread["end_ns"]
            chunks = [row for row in below if row["name"] == "chunked_prefill"]
            assert len(chunks) == (half.chunked_prefill_chunks if level == 3 else 0)
            prefill = [row["span_id"] for row in top if row["name"] == "prefill_forward"]
            assert all([row["parent_id"]] == prefill for row in chunks)
            fake = [row for row in below if row["name"] == "fake_output"]
            assert len(fake) == (1 if half.role == "decode" and level == 3 else 0)
            schedules = [event for row in [thread, *below] for event in row["events"]
                         if event["name"] == "schedule"]
            assert len(schedules) == (schedule_ops(half) if level == 3 else 0)
            assert all(set(event["attributes"]) == {"bid", "batch_size", "forward_mode"}
                       for event in schedules)
            retracts = [event for event in thread["events"] if event["name"] == "retract"]
            assert len(retracts) == half.retractions
            assert all(event["attributes"] == {} for event in retracts)
            assert not any(event["name"] == "retract" for row in below
                           for event in row["events"])
            # a re-run after a retraction nests inside the decode_forward it interrupted
            forward = top[-1]
            for _ in range(half.retractions):
                names = [row["name"] for row in tree.kids(forward)]
                assert {"prefill_forward", "decode_waiting", "decode_forward"} <= set(names)
                forward = next(row for row in tree.kids(forward)
                               if row["name"] == "decode_forward")
            assert not any(row["name"] == "decode_forward" for row in tree.kids(forward))
            # each top-level slice links to the one before it (the first: the dispatch)
            for before, after in itertools.pairwise(top):
                assert [link["span_id"] for link in after["links"]] == [before["span_id"]]
            tokenizer = next(row for row in tree.kids(root) if "Tokenizer(" in row["name"])
            dispatch = tree.kids(tokenizer)[-1]
            assert [link["span_id"] for link in top[0]["links"]] == [dispatch["span_id"]]
    for scenario in ("normal", "chunked", "retracted", "tp2", *PD_SCENARIOS):
        assert (scenario, 3) in covered, scenario
    assert any(level == 2 for _, level in covered)


def test_an_unsampled_traceparent_drops_the_whole_request(run: Run) -> None:
    unsampled = [request for request in run.driven.requests if not request.sampled]
    assert unsampled
    stored = run.stored
    rids = set(stored["attributes"].map(lambda attrs: attrs.get("gen_ai.request.id")))
    parents = set(stored["parent_id"].map(text))
    for request in unsampled:
        _, _, span_id, flags = request.traceparent.split("-")
        assert flags == "00"
        assert request.halves[0].server_rid not in rids
        assert span_id not in parents  # nothing nests under its generation span
    assert len(run.driven.emitted) == len(stored)  # nor was anything of it emitted


def test_other_clients_requests_arrive_beside_the_samples(run: Run) -> None:
    tree = Tree(run.stored)
    strays = [request for request in run.driven.requests if request.scenario == "stray"]
    assert strays
    for request in strays:
        assert request.span is None
        for half in request.halves:
            assert tree.root(half) is not None


# --------------------------------------------------------------------------- metrics


def scrape(url: str) -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=STARTUP_SECONDS) as answer:
        assert answer.status == 200
        text = answer.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families: dict[str, Any], family: str, sample: str | None = None) -> float:
    samples = [item for item in families[family].samples if item.name == (sample or family)]
    assert len(samples) == 1, samples
    return samples[0].value


def test_sglang_metrics_serve_what_the_test_sets() -> None:
    from tests.support.sglang_metrics import METRIC_NAMES, serve_metrics

    with serve_metrics(engine_type="decode", tp_rank=1,
                       initial={"num_running_reqs": 3, "token_usage": 0.25}) as server:
        families = scrape(server.url)
        assert value(families, "sglang:num_running_reqs") == 3
        assert value(families, "sglang:token_usage") == 0.25
        labels = families["sglang:num_running_reqs"].samples[0].labels
        assert labels == {"engine_type": "decode", "model_name": "Qwen/Qwen3-8B",
                          "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "1"}
        server.set(num_running_reqs=48, num_queue_reqs=17, token_usage=0.97,
                   gen_throughput=2150.5, cache_hit_rate=0.4, num_retracted_reqs=3)
        server.retract(3, input_tokens=4000, output_tokens=600)
        server.finish_request(1200, 300, 4.5, cached_tokens=200, time_to_first_token=0.8)
        families = scrape(server.url)
        for field, expected in (("num_running_reqs", 48), ("num_queue_reqs", 17),
                                ("token_usage", 0.97), ("gen_throughput", 2150.5),
                                ("cache_hit_rate", 0.4), ("num_retracted_reqs", 3)):
            assert value(families, METRIC_NAMES[field]) == expected, field
        assert families["sglang:num_running_reqs"].type == "gauge"
        retracted = METRIC_NAMES["retracted_requests_total"]
        assert families[retracted.removesuffix("_total")].type == "counter"
        assert value(families, retracted.removesuffix("_total"), retracted) == 3
        assert value(families, "sglang:num_retracted_input_tokens",
                     "sglang:num_retracted_input_tokens_total") == 4000
        assert value(families, "sglang:prompt_tokens", "sglang:prompt_tokens_total") == 1200
        assert value(families, "sglang:e2e_request_latency_seconds",
                     "sglang:e2e_request_latency_seconds_count") == 1
        server.set(num_running_reqs=0)
        assert value(scrape(server.url), "sglang:num_running_reqs") == 0
    assert server.process.poll() == 0


def test_planned_times_are_in_the_dumps_clock(requests: list[Request]) -> None:
    """Each half's moments lie inside its request's window, in order (driven as is)."""
    for request in requests:
        for half in request.halves:
            assert request.start <= half.start < half.end <= request.end + 1e-9
            moments = [op[1] for op in half.sched]
            assert moments == sorted(moments)
            assert json.dumps(half.usage)
