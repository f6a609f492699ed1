"""``slime_trace_widget.tracing`` accepts everything slime's ``trace_utils`` offers.

The table below states the facts of slime's public surface
(``slime.observability.trace_utils`` at THUDM/slime 624b824a8): each name, and for
callables each parameter's name, kind and default. Every call written against
slime must bind against ours, so a parameter must exist under the same name, be
passable the same way (a keyword-only one may be positional-or-keyword here) and
have the same default. The behaviour tests record through the arguments and
return values slime added and load the dump with this package's own loader.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget import schema, tracing
from slime_trace_widget.frames import build_frames
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_dump
from slime_trace_widget.tracing import (
    TraceHandle,
    TraceSpanContext,
    bind_trace,
    bind_trace_carrier,
    build_sglang_meta_trace_attrs,
    export_trace,
    import_trace,
    merge_trace,
    trace_event,
    trace_function,
    trace_next_attempt,
    trace_span,
)

POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
KW = inspect.Parameter.KEYWORD_ONLY
REQUIRED = inspect.Parameter.empty
#: A dataclass field with ``default_factory``: any default is accepted here.
FACTORY = object()

#: slime's callables: name -> ((parameter, kind, default), ...).
SLIME_CALLABLES: dict[str, tuple[tuple[str, Any, Any], ...]] = {
    "build_sglang_meta_trace_attrs": (("meta", POS, REQUIRED),),
    "bind_trace": (("sample", POS, REQUIRED),),
    "bind_trace_carrier": (
        ("carrier", POS, REQUIRED),
        ("trace_id", KW, None),
        ("sample_id", KW, None),
        ("group_id", KW, None),
        ("attempt", KW, 0),
        ("parent_span_id", KW, None),
    ),
    "export_trace": (("handle", POS, REQUIRED),),
    "import_trace": (("payload", POS, REQUIRED), ("carrier", POS, None)),
    "trace_event": (("target", POS, REQUIRED), ("name", POS, REQUIRED), ("attrs", KW, None)),
    "trace_span": (
        ("target", POS, REQUIRED),
        ("name", POS, REQUIRED),
        ("attrs", KW, None),
        ("record_error", KW, True),
    ),
    "trace_next_attempt": (("target", POS, REQUIRED), ("attrs", KW, None)),
    "trace_function": (
        ("name", POS, REQUIRED),
        ("target", KW, None),
        ("target_getter", KW, None),
        ("attrs_getter", KW, None),
        ("record_error", KW, True),
    ),
    "TraceHandle": (
        ("trace_id", POS, REQUIRED),
        ("carrier", POS, REQUIRED),
        ("sample_id", POS, None),
        ("group_id", POS, None),
        ("attempt", POS, 0),
        ("parent_span_id", POS, None),
    ),
    "TraceSpanContext": (
        ("target", POS, REQUIRED),
        ("handles", POS, REQUIRED),
        ("span_records", POS, FACTORY),
        ("start_ts", POS, 0.0),
        ("end_attrs", POS, FACTORY),
        ("end_events", POS, FACTORY),
        ("closed", POS, False),
    ),
}

#: Methods of slime's classes: (class, method) -> parameters after ``self``.
SLIME_METHODS: dict[tuple[str, str], tuple[tuple[str, Any, Any], ...]] = {
    ("TraceSpanContext", "set"): (("key", POS, REQUIRED), ("value", POS, REQUIRED)),
    ("TraceSpanContext", "update"): (("attrs", POS, REQUIRED),),
    ("TraceSpanContext", "set_attr"): (("key", POS, REQUIRED), ("value", POS, REQUIRED)),
    ("TraceSpanContext", "update_attrs"): (("attrs", POS, REQUIRED),),
    ("TraceSpanContext", "build_end_attrs"): (),
    ("TraceSpanContext", "finalize"): (("end_events", POS, REQUIRED),),
}

#: Attributes of slime's dataclass instances.
SLIME_FIELDS = {
    "TraceHandle": ("trace_id", "carrier", "sample_id", "group_id", "attempt", "parent_span_id"),
    "TraceSpanContext": (
        "target", "handles", "span_records", "start_ts", "end_attrs", "end_events", "closed",
    ),
}

#: slime's module constants and their values.
SLIME_CONSTANTS: dict[str, Any] = {
    "TRACE_VERSION": 1,
    "TRACE_CHILDREN_KEY": "_trace_children",
    "SGLANG_TRACE_META_KEYS": (
        "prompt_tokens", "completion_tokens", "cached_tokens",
        "queue_time", "e2e_latency", "decode_throughput",
    ),
    "SGLANG_PD_PREFILL_SEGMENTS": (
        ("pd_prefill_bootstrap_queue_duration", "sglang_pd_prefill_bootstrap_queue"),
        ("pd_prefill_bootstrap_duration", "sglang_pd_prefill_bootstrap"),
        ("pd_prefill_alloc_wait_duration", "sglang_pd_prefill_alloc_wait"),
        ("pd_prefill_forward_duration", "sglang_pd_prefill_forward"),
        ("pd_prefill_transfer_queue_duration", "sglang_pd_prefill_transfer_queue"),
    ),
    "SGLANG_PD_DECODE_SEGMENTS": (
        ("pd_decode_prealloc_duration", "sglang_pd_decode_prealloc"),
        ("pd_decode_bootstrap_duration", "sglang_pd_decode_bootstrap"),
        ("pd_decode_alloc_wait_duration", "sglang_pd_decode_alloc_wait"),
        ("pd_decode_transfer_duration", "sglang_pd_decode_transfer"),
        ("pd_decode_forward_duration", "sglang_pd_decode_forward"),
    ),
    "SGLANG_PD_SUMMARY_KEYS": (
        "pd_transfer_speed_gb_s", "pd_transfer_total_mb", "pd_prefill_retry_count",
    ),
}


def _check_accepts(ours: inspect.Signature, slime: tuple[tuple[str, Any, Any], ...]) -> None:
    params = ours.parameters
    positional = [p.name for p in params.values() if p.kind == POS]
    slime_positional = [name for name, kind, _ in slime if kind == POS]
    assert positional[: len(slime_positional)] == slime_positional
    for name, kind, default in slime:
        assert name in params, name
        param = params[name]
        assert param.kind in ((POS,) if kind == POS else (POS, KW)), name
        if default is FACTORY:
            assert param.default is not REQUIRED, name
        elif default is not REQUIRED:
            assert param.default is not REQUIRED and param.default == default, name
            assert type(param.default) is type(default), name
    slime_names = {name for name, _, _ in slime}
    extra_required = [
        p.name for p in params.values()
        if p.name not in slime_names and p.default is REQUIRED
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    assert not extra_required


def _slime_call(slime: tuple[tuple[str, Any, Any], ...]) -> tuple[list[Any], dict[str, Any]]:
    """A call passing every parameter the way slime's signature requires."""
    args = [f"arg-{name}" for name, kind, _ in slime if kind == POS]
    kwargs = {name: f"kw-{name}" for name, kind, _ in slime if kind == KW}
    return args, kwargs


@pytest.mark.parametrize("name", sorted(SLIME_CALLABLES))
def test_every_slime_callable_is_accepted(name):
    ours = getattr(tracing, name)
    signature = inspect.signature(ours)
    _check_accepts(signature, SLIME_CALLABLES[name])
    args, kwargs = _slime_call(SLIME_CALLABLES[name])
    signature.bind(*args, **kwargs)
    required = [n for n, _, default in SLIME_CALLABLES[name] if default is REQUIRED]
    signature.bind(*[f"arg-{n}" for n in required])


@pytest.mark.parametrize(("cls", "method"), sorted(SLIME_METHODS))
def test_every_slime_method_is_accepted(cls, method):
    ours = getattr(getattr(tracing, cls), method)
    signature = inspect.signature(ours)
    assert next(iter(signature.parameters)) == "self"
    without_self = signature.replace(parameters=list(signature.parameters.values())[1:])
    _check_accepts(without_self, SLIME_METHODS[(cls, method)])


@pytest.mark.parametrize("cls", sorted(SLIME_FIELDS))
def test_slime_fields_are_attributes(cls):
    spec = SLIME_CALLABLES[cls]
    args, _ = _slime_call(spec)
    if cls == "TraceHandle":
        args[1] = {"trace_id": "t", "events": []}
    instance = getattr(tracing, cls)(*args)
    for field_name in SLIME_FIELDS[cls]:
        assert hasattr(instance, field_name), field_name
    if cls == "TraceHandle":
        assert [getattr(instance, f) for f in SLIME_FIELDS[cls]] == args


@pytest.mark.parametrize("name", sorted(SLIME_CONSTANTS))
def test_slime_constants_have_slime_values(name):
    assert getattr(tracing, name) == SLIME_CONSTANTS[name]


def test_slime_logger_and_all_names_exist():
    assert isinstance(tracing.logger, logging.Logger)
    for name in (*SLIME_CALLABLES, *SLIME_CONSTANTS):
        assert name in tracing.__all__, name


# --------------------------------------------------------------------------- behaviour


class Sample:
    """The attributes of slime's ``Sample`` that tracing reads."""

    def __init__(self, index: int, group_index: int = 0) -> None:
        self.index = index
        self.group_index = group_index
        self.trace: dict[str, Any] | None = None


class SampleBox:
    """slime's box of a prompt sample and the samples generated from it."""

    def __init__(self, prompt_sample: Sample, generation: list[Sample]) -> None:
        self.prompt_sample = prompt_sample
        self.generation = generation


def _load(tmp_path: Path, samples: list[Any]):
    dicts = [{"index": s.index, "group_index": s.group_index, "trace": s.trace} for s in samples]
    save_dump(tmp_path / "dump.pt", dicts, rollout_id=0)
    return build_frames(load_dump(tmp_path / "dump.pt"))


def _records(carrier: dict[str, Any]) -> list[tuple[str, str]]:
    return [(record["type"], record["name"]) for record in carrier["events"]]


def test_bind_trace_carrier_identity_keywords_reach_the_records(tmp_path):
    handle = bind_trace_carrier(None, trace_id="a" * 32, sample_id=7, group_id=2, attempt=3)
    carrier = handle.carrier
    assert list(carrier) == list(schema.CARRIER_KEYS)
    assert (carrier["trace_id"], carrier["sample_id"], carrier["group_id"]) == ("a" * 32, 7, 2)
    assert carrier["attempt"] == 3 and handle.attempt == 3
    with trace_span(handle, "reward", attrs={"k": 1}):
        trace_event(handle, "tick", attrs={"n": 1})
    start = carrier["events"][0]
    assert list(start) == ["type", "name", "ts", "trace_id", "sample_id", "group_id", "attempt",
                           "span_id", "attrs"]
    assert (start["sample_id"], start["group_id"], start["attempt"]) == (7, 2, 3)

    existing = {"trace_id": "b" * 32, "events": [], "sample_id": 1, "attempt": 5}
    rebound = bind_trace_carrier(existing, trace_id="c" * 32, sample_id=9, group_id=4, attempt=0)
    assert rebound.carrier is existing
    assert (existing["trace_id"], existing["sample_id"], existing["group_id"]) == ("b" * 32, 9, 4)
    assert existing["attempt"] == 5 and rebound.attempt == 5

    sample = Sample(7, 2)
    sample.trace = carrier
    frames = _load(tmp_path, [sample])
    assert frames.spans["name"].tolist() == ["reward"]
    assert frames.spans["attempt"].tolist() == [3]
    assert frames.events["name"].tolist() == ["tick"]


def test_import_trace_into_a_given_carrier_merges_back(tmp_path):
    sample = Sample(4, 1)
    with trace_span(sample, "local") as span:
        payload = export_trace(bind_trace(sample))
    remote_carrier: dict[str, Any] = {}
    remote = import_trace(payload, carrier=remote_carrier)
    assert remote.carrier is remote_carrier
    assert remote.trace_id == sample.trace["trace_id"]
    assert remote.parent_span_id == span.span_ids[0]
    with trace_span(remote, "remote_reward"):
        pass
    # Ours marks the import (slime's records nothing there): the link's target.
    assert _records(remote_carrier) == [("event", "trace_import"),
                                        ("span_start", "remote_reward"),
                                        ("span_end", "remote_reward")]
    assert merge_trace(sample, remote_carrier) == 3
    frames = _load(tmp_path, [sample])
    spans = frames.spans.set_index("name")
    assert spans.loc["remote_reward", "parent_name"] == "local"
    assert frames.events.set_index("name").loc["trace_import", "parent_name"] == "local"


def test_trace_next_attempt_returns_the_handles():
    sample = Sample(0)
    handle = trace_next_attempt(sample, attrs={"reason": "abort"})
    assert isinstance(handle, TraceHandle)
    assert handle.carrier is sample.trace and handle.attempt == 1
    group = [Sample(1), Sample(2)]
    handles = trace_next_attempt(group)
    assert [h.carrier for h in handles] == [s.trace for s in group]
    assert [h.attempt for h in handles] == [1, 1]
    assert trace_next_attempt(None) is None
    again = trace_next_attempt(handle)
    assert again is handle and handle.attempt == 2
    assert sample.trace["events"][-1]["attrs"] == {"attempt": 2}


def test_trace_handle_built_the_slime_way_records(tmp_path):
    carrier = {"version": 1, "trace_id": "d" * 32, "events": [], "sample_id": 5,
               "group_id": 0, "attempt": 0}
    handle = TraceHandle(trace_id="d" * 32, carrier=carrier, sample_id=5, group_id=0)
    with trace_span(handle, "work"):
        pass
    assert [r["sample_id"] for r in carrier["events"]] == [5, 5]
    sample = Sample(5)
    sample.trace = carrier
    assert _load(tmp_path, [sample]).spans["name"].tolist() == ["work"]


def test_trace_span_yields_a_trace_span_context(tmp_path):
    sample = Sample(0)
    with trace_span(sample, "generate", attrs={"max_new_tokens": 8}) as span:
        assert isinstance(span, TraceSpanContext)
        assert isinstance(span.target, TraceHandle) and span.target.carrier is sample.trace
        assert [h.carrier for h in span.handles] == [sample.trace]
        assert [h.carrier for h, _ in span.span_records] == [sample.trace]
        span.set_attr("a", 1).update_attrs({"b": 2})
        span.update(build_sglang_meta_trace_attrs({"prompt_tokens": 3,
                                                   "pd_prefill_forward_duration": 0.25}))
        assert span.build_end_attrs() == {"a": 1, "b": 2, "prompt_tokens": 3}
        assert span.end_attrs == {"a": 1, "b": 2, "prompt_tokens": 3}
        assert not span.closed
    assert span.closed
    (end,) = span.end_events
    assert end is sample.trace["events"][-1] and end["type"] == "span_end"
    span.set("late", "yes")
    assert end["attrs"] == {"a": 1, "b": 2, "prompt_tokens": 3, "late": "yes"}

    group = [Sample(1), Sample(2)]
    with trace_span(group, "group_rm") as group_span:
        pass
    assert [h.carrier for h in group_span.target] == [s.trace for s in group]
    group_span.update({"score": 1.0})
    assert [e["attrs"] for e in group_span.end_events] == [{"score": 1.0}, {"score": 1.0}]
    assert group_span.end_events[0]["attrs"] is not group_span.end_events[1]["attrs"]

    frames = _load(tmp_path, [sample])
    spans = frames.spans.set_index("name")
    assert spans.loc["generate", "end_attrs"]["late"] == "yes"
    assert "generate [P]" in spans.index


def test_a_standalone_trace_span_context_collects_and_syncs():
    record = {"type": "span_end", "name": "x"}
    context = TraceSpanContext(target=None, handles=[])
    assert context.build_end_attrs() is None
    context.set("k", 1)
    context.finalize([record])
    assert context.closed and record["attrs"] == {"k": 1}


def test_sample_boxes_record_into_their_generations():
    prompt = Sample(0)
    generated = [Sample(1), Sample(2)]
    with trace_span(SampleBox(prompt, generated), "box_span"):
        pass
    assert prompt.trace is None
    assert all(_records(s.trace) == [("span_start", "box_span"), ("span_end", "box_span")]
               for s in generated)
    with trace_span(SampleBox(prompt, []), "prompt_span"):
        pass
    assert _records(prompt.trace) == [("span_start", "prompt_span"), ("span_end", "prompt_span")]

    @trace_function("boxed")
    def boxed(box: SampleBox) -> int:
        return 1

    assert boxed(SampleBox(prompt, [])) == 1
    assert _records(prompt.trace)[-1] == ("span_end", "boxed")


def test_slime_style_keyword_calls_record(tmp_path):
    @trace_function("generate_and_rm", target="sample", record_error=True,
                    attrs_getter=lambda sample: {"index": sample.index})
    def generate_and_rm(sample: Sample) -> str:
        with trace_span(sample, "sglang_generate", attrs={"turn": 0}, record_error=False):
            trace_event(sample, "first_token", attrs={"latency": 0.1})
        return "done"

    sample = Sample(3)
    assert generate_and_rm(sample) == "done"
    frames = _load(tmp_path, [sample])
    spans = frames.spans.set_index("name")
    assert spans.loc["sglang_generate", "parent_name"] == "generate_and_rm"
    assert frames.events["name"].tolist() == ["first_token"]
