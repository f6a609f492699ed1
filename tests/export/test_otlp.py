"""OTLP export: the mapping checked span by span, and sent for real.

The receiver is this package's own collector (``slime-trace-viewer collect``), over
OTLP/HTTP (plain and gzip) and OTLP/gRPC, read back from its store; retries, refusals
and lost replies run against small HTTP servers that answer the way a busy or
broken receiver does. Phoenix, a backend users run, is in ``test_otlp_phoenix.py``.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget.answers.stats import measured_spans
from slime_trace_widget.cli import main
from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.export.otlp import to_otlp
from slime_trace_widget.export.otlp_spans import any_value, exported_span_count, otlp_batches
from slime_trace_widget.export.otlp_transport import OtlpExportError, RequestUnanswered
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.sources.engine.store import load_engine_traces
from slime_trace_widget.sources.loading import load_frames
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.browser import free_port
from tests.support.counting_proxy import counting_proxy
from tests.support.engine_traces import requests_for
from tests.support.grpc_trace_service import serving
from tests.support.scripted_otlp import spans_taken

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def frames() -> TraceFrames:
    return load_frames([FIXTURES / "small.pt", FIXTURES / "legacy_v1_pd.pt",
                        FIXTURES / "edge_open_span.pt", FIXTURES / "edge_malformed_events.pt"])


def decoded(frames: TraceFrames, **options) -> list[dict]:
    """Every OTLP span of the export as a dict (ids in hex), in the order sent."""
    out = []
    for batch in otlp_batches(frames, **options):
        for resource in batch.request.resource_spans:
            where = {kv.key: _value(kv.value) for kv in resource.resource.attributes}
            for scope in resource.scope_spans:
                for span in scope.spans:
                    out.append({
                        "trace": span.trace_id.hex(), "id": span.span_id.hex(),
                        "parent": span.parent_span_id.hex(), "name": span.name,
                        "start": span.start_time_unix_nano, "end": span.end_time_unix_nano,
                        "attrs": {kv.key: _value(kv.value) for kv in span.attributes},
                        "events": [(e.name, e.time_unix_nano,
                                    {kv.key: _value(kv.value) for kv in e.attributes})
                                   for e in span.events],
                        "error": span.status.code == 2, "resource": where})
    return out


def sent_by_span(frames: TraceFrames, spans: list[dict]) -> dict[int, dict]:
    """The sent span of each exported ``span_core`` row: the sample's trace is found by its
    root (dump and sample index), the span by slime's span id within that trace (a span
    id used twice in a sample: in order)."""
    trace_of = {(s["resource"]["slime.dump"], s["attrs"]["slime.sample_index"]): s["trace"]
                for s in spans if s["name"] == "sample"}
    by_id: dict[tuple, list[dict]] = {}
    for span in spans:
        if span["name"] != "sample":
            by_id.setdefault((span["trace"], span["attrs"]["slime.span_id"]), []).append(span)
    samples = frames.samples
    dumps = [Path(p).name for p in frames.paths]
    out = {}
    for index in measured_spans(frames).index:
        row = frames.span_core.at[index, "sample_row"]
        trace = trace_of[(dumps[samples.at[row, "dump"]], samples.at[row, "sample_index"])]
        out[index] = by_id[(trace, frames.span_core.at[index, "span_id"])].pop(0)
    return out


def _value(value) -> object:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


# --------------------------------------------------------------------------- the mapping


def test_one_trace_per_sample_and_every_parent_is_there(frames: TraceFrames) -> None:
    spans = decoded(frames, batch_spans=37)
    measured = measured_spans(frames)
    roots = [s for s in spans if s["name"] == "sample"]
    assert len(spans) == len(measured) + len(roots) == exported_span_count(frames)
    with_items = set(measured["sample_row"]) | set(frames.event_core["sample_row"])
    assert len(roots) == len(with_items)
    assert len({s["trace"] for s in spans}) == len(roots)  # one root per trace
    assert all(s["parent"] == "" for s in roots)
    ids = {(s["trace"], s["id"]) for s in spans}
    assert len(ids) == len({s["id"] for s in spans}) == len(spans)  # no id used twice
    assert all((s["trace"], s["parent"]) in ids for s in spans if s["parent"])
    # names and start times are the measured spans', in any order
    assert Counter(s["name"] for s in spans if s not in roots) == \
        Counter(measured["name"].astype(str))
    sent = sent_by_span(frames, spans)
    assert set(sent) == set(measured.index)
    for index, span in measured.iterrows():
        assert sent[index]["start"] == round(span["start"] * 1e9)
        assert sent[index]["name"] == span["name"]


def test_parents_and_traces_follow_the_frames(frames: TraceFrames) -> None:
    spans = decoded(frames)
    core = frames.span_core
    by_index = sent_by_span(frames, spans)
    for index, sent in by_index.items():
        parent_index = core.at[index, "parent_index"]
        if parent_index in by_index:
            assert sent["parent"] == by_index[parent_index]["id"]
        else:
            root = next(s for s in spans if s["name"] == "sample" and s["trace"] == sent["trace"])
            assert sent["parent"] == root["id"]
    # slime's own 128-bit trace ids are kept as they are
    sent_traces = {s["trace"] for s in spans}
    assert set(frames.samples["trace_id"].dropna()) & sent_traces


def test_attributes_keep_their_types_and_sample_fields_are_on_the_root(frames) -> None:
    spans = decoded(frames)
    generation = next(s for s in spans if "completion_tokens" in s["attrs"])
    assert isinstance(generation["attrs"]["completion_tokens"], int)
    assert isinstance(generation["attrs"]["e2e_latency"], float)
    root = next(s for s in spans if s["name"] == "sample")
    sample = frames.samples.iloc[0]
    assert root["attrs"]["slime.sample_index"] == sample["sample_index"]
    assert root["attrs"]["slime.source"] == sample["source"]
    assert root["attrs"]["slime.status"] == sample["status"]
    assert root["attrs"]["slime.reward"] == sample["reward"]
    assert root["attrs"]["slime.rollout_id"] == sample["rollout_id"]
    assert root["resource"]["service.name"] == "slime-rollout"
    assert root["resource"]["slime.dump"] == "small.pt"
    assert "input.value" not in root["attrs"]
    with_text = decoded(frames, include_text=True, service_name="my-rl")[0]
    assert with_text["attrs"]["input.value"] == sample["prompt"]
    assert with_text["resource"]["service.name"] == "my-rl"



def test_attributes_named_like_the_exporters_own_fields_move_aside() -> None:
    """A span attribute named ``slime.span_id`` or ``slime.attempt``, or an unmatched
    end's ``slime.event_kind``, was overwritten by the exporter's field of that name;
    it is kept as ``attr.<name>``."""
    from tests.frames.test_frames import frames_of, rec, sample

    frames = frames_of(sample(
        rec("span_start", "tool", 0, "a", attrs={"slime.span_id": "theirs", "slime.attempt": 7}),
        rec("span_end", "tool", 2, "a"),
        rec("span_end", "lost", 3, "zz", attrs={"slime.event_kind": "mine"})))
    spans = decoded(frames)
    (tool,) = [s for s in spans if s["name"] == "tool"]
    assert (tool["attrs"]["slime.span_id"], tool["attrs"]["slime.attempt"]) == ("a", 0)
    assert (tool["attrs"]["attr.slime.span_id"], tool["attrs"]["attr.slime.attempt"]) == (
        "theirs", 7)
    ((_, _, fields),) = [e for s in spans for e in s["events"] if e[0] == "lost"]
    assert (fields["slime.event_kind"], fields["attr.slime.event_kind"]) == (
        "unmatched_end", "mine")

def test_open_spans_end_at_their_clipped_end_and_are_marked(frames: TraceFrames) -> None:
    spans = decoded(frames)
    core = frames.span_core
    open_spans = core[(core["state"] == "open") & ~core["virtual"]]
    assert len(open_spans)
    by_index = sent_by_span(frames, spans)
    for index, span in open_spans.iterrows():
        sent = by_index[index]
        assert sent["attrs"]["slime.state"] == "open"
        assert sent["end"] == round(max(span["display_end"], span["start"]) * 1e9)
    closed = [s for s in spans if s["name"] != "sample" and "slime.state" not in s["attrs"]]
    assert closed and all(s["end"] >= s["start"] for s in spans)


def test_events_ride_on_the_span_they_happened_in(frames: TraceFrames) -> None:
    spans = decoded(frames)
    events = frames.event_core
    sent = [(s, name, attrs) for s in spans for name, _, attrs in s["events"]]
    assert len(sent) == len(events)
    by_index = sent_by_span(frames, spans)
    for _, event in events[events["parent_index"] >= 0].iterrows():
        holder = by_index[event["parent_index"]]
        assert event["name"] in [name for name, _, _ in holder["events"]]
    unmatched = [attrs for _, _, attrs in sent if attrs.get("slime.event_kind")]
    assert len(unmatched) == int((events["kind"] == "unmatched_end").sum())


def test_pd_phases_are_child_spans_and_errors_have_an_error_status(frames) -> None:
    spans = decoded(frames)
    phases = [s for s in spans if s["attrs"].get("slime.pd_phase")]
    assert len(phases) == int((frames.span_core["pd_form"] == "attrs").sum()) > 0
    ids = {s["id"]: s for s in spans}
    assert all(ids[p["parent"]]["name"] != "sample" for p in phases)
    errors = frames.span_core[frames.span_core["error"] & ~frames.span_core["virtual"]]
    assert sum(s["error"] for s in spans if s["name"] != "sample") == len(errors) > 0


def test_samples_sharing_a_trace_id_still_get_a_trace_each(tmp_path: Path) -> None:
    """A dump given twice never shares OTLP ids with its first copy (group members that
    share slime's trace id share the trace, not span ids: ``test_otlp_ids.py``)."""
    copies = [tmp_path / "a.pt", tmp_path / "b.pt"]
    for copy in copies:
        shutil.copyfile(FIXTURES / "small.pt", copy)
    once = decoded(load_frames(copies[0]))
    twice = decoded(load_frames(copies))
    assert len({s["id"] for s in twice}) == len(twice) == 2 * len(once)
    assert len({s["trace"] for s in twice}) == 2 * len({s["trace"] for s in once})
    # the first keeps slime's trace ids; the second copy's are derived
    assert {s["trace"] for s in once} < {s["trace"] for s in twice}


def test_ids_are_stable_from_one_export_to_the_next(frames: TraceFrames) -> None:
    first = [(s["trace"], s["id"], s["parent"]) for s in decoded(frames, batch_spans=50)]
    second = [(s["trace"], s["id"], s["parent"]) for s in decoded(frames, batch_spans=500)]
    assert first == second


def test_engine_slices_hang_under_their_generation_span(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(12, seed=5))
    joined = join_engine(frames, load_engine_traces(
        store_requests(requests_for(frames), tmp_path, SKEWS)))
    spans = decoded(joined)
    engine = [s for s in spans if s["attrs"].get("slime.origin") == "engine"]
    assert len(engine) == int((joined.span_core["origin"] == "engine").sum()) > 0
    ids = {s["id"]: s for s in spans}
    for span in engine:  # up the parents to a span of the dump that made the request
        parent = ids[span["parent"]]
        while parent["attrs"].get("slime.origin") == "engine":
            parent = ids[parent["parent"]]
        assert "sglang_request_id" in parent["attrs"]


@pytest.mark.parametrize(("value", "kind", "expected"), [
    (True, "bool_value", True), (7, "int_value", 7), (2**70, "string_value", str(2**70)),
    (0.25, "double_value", 0.25), ("text", "string_value", "text"),
    ([1, 2], "array_value", [1, 2]), (["a", "b"], "array_value", ["a", "b"]),
    ([1, "a"], "string_value", '[1, "a"]'), ({"k": [1]}, "string_value", '{"k": [1]}'),
    (np.int64(3), "int_value", 3), (json.loads('"x\\ud800"'), "string_value", "x\ufffd"),
])
def test_values_keep_their_kind(value, kind, expected) -> None:
    converted = any_value(value)
    assert converted.WhichOneof("value") == kind
    assert _value(converted) == expected


def test_none_is_left_out_and_long_text_is_cut_visibly() -> None:
    assert any_value(None) is None
    cut = any_value("x" * 50, max_chars=10).string_value
    assert cut.startswith("x" * 10) and "truncated 40 chars" in cut


# --------------------------------------------------------------------------- sending


def check_received(frames: TraceFrames, folder: Path, copies: int = 1) -> None:
    received = load_engine_traces(folder)
    expected = decoded(frames)
    assert len(received) == copies * len(expected)
    sent = Counter((s["trace"], s["id"], s["parent"], s["name"]) for s in expected)
    got = Counter(zip(received["trace_id"], received["span_id"],
                      received["parent_id"].fillna(""), received["name"], strict=True))
    assert got == Counter({key: copies * n for key, n in sent.items()})


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/protobuf+gzip", "grpc"])
def test_a_receiver_gets_every_span_once(frames, collector, protocol) -> None:
    http_url, grpc_address, folder = collector
    report = to_otlp(frames, grpc_address if protocol == "grpc" else http_url,
                     protocol=protocol.removesuffix("+gzip"), batch_spans=100,
                     compression="gzip" if protocol.endswith("gzip") else None)
    assert report.spans == exported_span_count(frames)
    assert report.batches > 1 and report.retries == 0 and report.rejected_spans == 0
    assert report.traces == report.spans - len(measured_spans(frames))
    assert "sent" in report.summary()
    check_received(frames, folder)


def test_a_busy_receiver_gets_each_batch_again_and_only_that_batch(frames, scripted) -> None:
    scripted.script = [200, 503, 429, 200]
    url = f"http://127.0.0.1:{scripted.server_address[1]}/v1/traces"
    report = to_otlp(frames, url, batch_spans=100)
    assert report.retries == 2
    taken = spans_taken(scripted.bodies)
    assert sum(taken.values()) == report.spans == exported_span_count(frames)
    assert set(taken.values()) == {1}  # nothing arrived twice


@pytest.mark.parametrize("header", ["nan", "-5", "soon", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_a_retry_after_of_no_usable_seconds_is_waited_out_as_a_plain_retry(
        frames, scripted, header: str) -> None:
    """``Retry-After: nan`` reached time.sleep as NaN and failed the export with a
    ValueError; a past date, -5 or text mean no wait of their own."""
    scripted.script = [("503 after", header)]
    url = f"http://127.0.0.1:{scripted.server_address[1]}/v1/traces"
    report = to_otlp(frames, url, batch_spans=100_000)
    assert report.retries == 1 and report.spans == exported_span_count(frames)


def test_a_request_without_a_reply_is_not_sent_again(frames, scripted) -> None:
    scripted.script = [200, "hang up"]
    url = f"http://127.0.0.1:{scripted.server_address[1]}"
    with pytest.raises(OtlpExportError, match="not sent again") as caught:
        to_otlp(frames, url, batch_spans=100)
    assert "\n" not in str(caught.value)
    assert len(scripted.bodies) == 2  # the first batch, and the one that got no answer


def test_a_refusal_is_one_line_naming_the_endpoint(frames, scripted) -> None:
    scripted.script = [400]
    url = f"http://127.0.0.1:{scripted.server_address[1]}/v1/traces"
    with pytest.raises(OtlpExportError) as caught:
        to_otlp(frames, url)
    message = str(caught.value)
    assert url in message and "HTTP 400" in message and "bad spans" in message
    assert "\n" not in message


def test_a_receiver_that_stays_busy_is_given_up_on(frames, scripted) -> None:
    scripted.script = [503] * 1000
    url = f"http://127.0.0.1:{scripted.server_address[1]}"
    with pytest.raises(OtlpExportError, match="gave up after"):
        to_otlp(frames, url, retry_seconds=0.5)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_nobody_listening_is_a_clear_error_at_once(frames, protocol) -> None:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}" if protocol != "grpc" else f"127.0.0.1:{port}"
    with pytest.raises(OtlpExportError, match="is an OTLP receiver listening there"):
        to_otlp(frames, endpoint, protocol=protocol)


def test_bad_endpoints_and_protocols_are_named() -> None:
    frames = build_frames(make_demo_samples(2, seed=1))
    with pytest.raises(OtlpExportError, match="a URL such as"):
        to_otlp(frames, "127.0.0.1:4318")
    with pytest.raises(OtlpExportError, match="protocol must be"):
        to_otlp(frames, "http://127.0.0.1:4318", protocol="thrift")


def test_the_cli_sends_a_dump_and_reports_it(collector, tmp_path: Path, capsys) -> None:
    http_url, grpc_address, folder = collector
    dump = FIXTURES / "small.pt"
    code = main([str(dump), "--no-serve", "--out-dir", str(tmp_path), "--otlp", http_url,
                 "--otlp-header", "x-team=rl"])
    assert code == 0
    assert "sent 265 spans" in capsys.readouterr().out
    code = main([str(dump), "--no-serve", "--out-dir", str(tmp_path), "--otlp", grpc_address,
                 "--otlp-protocol", "grpc", "--service-name", "rollouts"])
    assert code == 0
    check_received(load_frames(dump), folder, copies=2)
    services = set(load_engine_traces(folder)["service"])
    assert services == {"slime-rollout", "rollouts"}


def test_the_cli_says_in_one_line_when_nobody_listens(tmp_path: Path, capsys) -> None:
    code = main([str(FIXTURES / "small.pt"), "--no-serve", "--out-dir", str(tmp_path),
                 "--otlp", f"http://127.0.0.1:{free_port()}"])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("slime-trace-viewer: http://127.0.0.1:") and "\n" not in error


class _FlakyTraceService:
    """A gRPC TraceService that answers each call of spans from its script (a status
    code, or None for success) and keeps the requests it took; an empty request it
    answers at once, as the OpenTelemetry Collector does."""

    def __init__(self, script: list) -> None:
        self.script, self.taken = script, []

    def Export(self, request, context):  # the generated service's method name
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        if not request.resource_spans:
            return ExportTraceServiceResponse()
        code = self.script.pop(0) if self.script else None
        if code is not None:
            context.abort(code, "try later" if code.name == "UNAVAILABLE" else "bad spans")
        self.taken.append(request.SerializeToString())
        return ExportTraceServiceResponse()


@pytest.fixture
def grpc_receiver() -> Iterator[tuple[str, _FlakyTraceService]]:
    service = _FlakyTraceService([])
    with serving(service) as (address, _):
        yield address, service


def test_grpc_unavailable_is_retried_and_nothing_arrives_twice(frames, grpc_receiver) -> None:
    import grpc

    address, service = grpc_receiver
    service.script = [None, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE]
    report = to_otlp(frames, address, protocol="grpc", batch_spans=150)
    assert report.retries == 2
    taken = spans_taken(service.taken)
    assert sum(taken.values()) == report.spans == exported_span_count(frames)
    assert set(taken.values()) == {1}


def test_grpc_refusal_is_one_line(frames, grpc_receiver) -> None:
    import grpc

    address, service = grpc_receiver
    service.script = [grpc.StatusCode.INVALID_ARGUMENT]
    with pytest.raises(OtlpExportError, match="INVALID_ARGUMENT: bad spans") as caught:
        to_otlp(frames, address, protocol="grpc")
    assert "\n" not in str(caught.value) and address in str(caught.value)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_grpc_sends_gzip_compressed_requests_when_asked(frames, grpc_receiver,
                                                        compression) -> None:
    """Fewer bytes cross the wire than the requests hold only when they went compressed;
    uncompressed, the wire carries more (gRPC's and HTTP/2's framing)."""
    address, service = grpc_receiver
    host, port = address.rsplit(":", 1)
    with counting_proxy((host, int(port))) as proxy:
        report = to_otlp(frames, proxy.address, protocol="grpc", compression=compression)
        on_the_wire = proxy.sent_up
    held = sum(len(request) for request in service.taken)
    assert sum(spans_taken(service.taken).values()) == report.spans
    if compression == "gzip":
        assert on_the_wire < held / 2
    else:
        assert on_the_wire > held


def test_an_unknown_compression_is_refused_for_grpc_too(frames, grpc_receiver) -> None:
    with pytest.raises(OtlpExportError, match="compression must be 'gzip' or None"):
        to_otlp(frames, grpc_receiver[0], protocol="grpc", compression="br")


def test_large_exports_show_a_progress_bar_of_spans(frames, scripted, capsys) -> None:
    url = f"http://127.0.0.1:{scripted.server_address[1]}"
    report = to_otlp(frames, url, progress=True)
    bar = capsys.readouterr().err
    assert "OTLP" in bar and f"{report.spans}/{report.spans}" in bar
    to_otlp(frames, url, progress=False)
    assert capsys.readouterr().err == ""


class _VanishingTraceService:
    """A gRPC TraceService that takes its second request and then goes away (its server
    stopped) before it replies, as a Collector that crashes or restarts meanwhile."""

    def __init__(self) -> None:
        self.taken: list[bytes] = []
        self.server = None

    def Export(self, request, context):  # the generated service's method name
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        self.taken.append(request.SerializeToString())
        if len(self.taken) == 2:
            ended = threading.Event()
            context.add_callback(ended.set)
            threading.Thread(target=self.server.stop, args=(0,)).start()
            assert ended.wait(60), "the call was not cancelled"
        return ExportTraceServiceResponse()


def test_a_grpc_request_whose_connection_is_lost_is_not_sent_again(frames) -> None:
    """An ``UNAVAILABLE`` after the receiver took the request and went away is no
    "try later": the request may have arrived, so it is not retried."""
    service = _VanishingTraceService()
    with serving(service) as (address, service.server), \
            pytest.raises(RequestUnanswered, match="may have arrived"):
        to_otlp(frames, address, protocol="grpc", batch_spans=50, retry_seconds=5)
    assert len(service.taken) == 2


class _DroppedTraceService:
    """A gRPC TraceService behind a relay that takes its second request of spans and has
    the relay drop the connection before it replies (a network or a receiver's host
    that goes away just then), then takes new connections as before; an empty request
    it answers at once, as the OpenTelemetry Collector does."""

    def __init__(self) -> None:
        self.taken: list[bytes] = []
        self.relay = None

    def Export(self, request, context):  # the generated service's method name
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        if not request.resource_spans:
            return ExportTraceServiceResponse()
        self.taken.append(request.SerializeToString())
        if len(self.taken) == 2:
            ended = threading.Event()
            context.add_callback(ended.set)
            self.relay.cut()
            assert ended.wait(60), "the call did not end with its connection"
        return ExportTraceServiceResponse()


def test_a_grpc_request_whose_connection_drops_is_never_sent_twice(frames) -> None:
    """The ``UNAVAILABLE`` of a connection dropped during a request can come while the
    channel still says READY, and the channel connects again at once: read as the
    receiver's answer, the request would be sent again. It is not, however the two
    race (so the drop is tried on several exports)."""
    for _ in range(8):
        service = _DroppedTraceService()
        with serving(service) as (address, _):
            host, _, port = address.rpartition(":")
            with counting_proxy((host, int(port))) as relay:
                service.relay = relay
                with pytest.raises(RequestUnanswered, match="may have arrived"):
                    to_otlp(frames, relay.address, protocol="grpc", batch_spans=50,
                            retry_seconds=5)
        assert len(service.taken) == 2
