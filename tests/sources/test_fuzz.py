"""Fuzzing the loader and the flattening with damaged and ill-typed dumps (hypothesis).

Inputs are valid dumps made invalid: bytes flipped, cut, inserted or deleted
in the whole file and in ``data.pkl`` alone (re-zipped so torch gets past the
archive), for ``tests/fixtures/small.pt`` and for small dumps saved here (zip
and legacy format); and dumps whose fields (dump, sample, carrier, event)
hold the wrong types. The property, for every input:

* :func:`load_dump` returns or raises :class:`DumpError`, nothing else;
* what loads flattens (:func:`build_frames`, attribute columns included) with
  finite starts and ``display_end >= start``;
* it encodes (:func:`payload.encode`, meta JSON without NaN), and the details
  of every span, event and sample serialise with ``json.dumps(...,
  allow_nan=False)``, both column-wise (snapshot) and as single clicks;
* none of it hangs: hypothesis' ``deadline`` per example, and a SIGALRM guard
  that turns a hang into a failure.

The default run is bounded (under a minute); ``STW_FUZZ_LONG=1`` runs many
more examples. Outcome counts (loaded / DumpError per input kind) are printed
and written to ``test-artifacts/fuzz_summary.json``.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import math
import os
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.sources.dumps import DumpError
from slime_trace_widget.sources.loading import load_dump
from slime_trace_widget.view.details import (
    event_columns,
    event_detail,
    sample_summaries,
    span_columns,
    span_detail,
)
from slime_trace_widget.view.page.page_attrs import page_attr_table
from slime_trace_widget.view.payload import encode
from tests.support.hostile_pickles import dag, time_limit

ROOT = Path(__file__).resolve().parents[2]
SMALL = (ROOT / "tests" / "fixtures" / "small.pt").read_bytes()
SUMMARY = ROOT / "test-artifacts" / "fuzz_summary.json"

LONG = os.environ.get("STW_FUZZ_LONG") == "1"
#: Examples per test: bounded by default, x25 in the long mode.
SCALE = 25 if LONG else 1
#: An example slower than this fails (hypothesis deadline); the alarm is the hard stop.
DEADLINE = timedelta(seconds=10)
HARD_SECONDS = 60

OUTCOMES: dict[str, Counter[str]] = {}


def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=examples * SCALE, deadline=DEADLINE, derandomize=not LONG,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                    database=None)


@pytest.fixture(scope="module", autouse=True)
def fuzz_summary() -> Iterator[None]:
    """After the module: print the counts and write them for the report."""
    yield
    tried = sum(sum(c.values()) for c in OUTCOMES.values())
    summary = {"mode": "long" if LONG else "bounded", "inputs": tried,
               "by_kind": {kind: dict(counts) for kind, counts in sorted(OUTCOMES.items())},
               "outcomes": dict(sum(OUTCOMES.values(), Counter()))}
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nfuzz: {tried} inputs, {summary['outcomes']} -> {SUMMARY}")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# --------------------------------------------------------------------------- the property


def check_input(data: bytes, kind: str, folder: Path) -> None:
    """Write ``data`` as a dump and hold it to the property."""
    path = folder / "rollout_3.pt"
    path.write_bytes(data)
    counts = OUTCOMES.setdefault(kind, Counter())
    with time_limit(HARD_SECONDS):
        try:
            dump = load_dump(path)
        except DumpError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(path))
            counts["DumpError"] += 1
            return
        counts["loaded"] += 1
        check_frames(build_frames(dump))


def check_frames(frames: TraceFrames) -> None:
    spans = frames.span_core
    assert np.isfinite(spans["start"]).all() and np.isfinite(spans["display_end"]).all()
    assert (spans["display_end"] >= spans["start"]).all()
    assert np.isfinite(frames.event_core["ts"]).all()
    assert len(frames.spans) == len(spans) and len(frames.events) == len(frames.event_core)
    json.dumps(encode(frames).payload["meta"], allow_nan=False)
    # Every item's details at once (what a snapshot embeds), then single clicks.
    every_span, every_event = np.arange(len(spans)), np.arange(len(frames.event_core))
    json.dumps([span_columns(frames, spans.index), event_columns(frames, frames.event_core.index),
                sample_summaries(frames, frames.samples.index),
                page_attr_table(frames.span_start_attrs, every_span, 100, {}),
                page_attr_table(frames.span_end_attrs, every_span, 100, {}),
                page_attr_table(frames.event_attrs, every_event, 100, {})], allow_nan=False)
    for index in spans.index[:1].append(spans.index[-1:]):
        json.dumps(span_detail(frames, index), allow_nan=False)
    for index in frames.event_core.index[:1]:
        json.dumps(event_detail(frames, index), allow_nan=False)
    frames.summary()


# --------------------------------------------------------------------------- base dumps


def rec(kind: str, name: str, ts: float, sid: str | None = None, pid: str | None = None,
        attempt: int = 0, attrs: dict | None = None) -> dict:
    out: dict = {"type": kind, "name": name, "ts": 1_700_000_000.0 + ts, "trace_id": "t" * 32,
                 "sample_id": 0, "group_id": 0, "attempt": attempt}
    if sid is not None:
        out["span_id"] = sid
    if pid is not None:
        out["parent_span_id"] = pid
    if attrs is not None:
        out["attrs"] = attrs
    return out


def base_dump() -> dict:
    """Three samples covering what the reader distinguishes: nesting, PD in both forms,
    an open span, an orphan end, a late parent, a retry, an untraced sample."""
    pd_child = [rec("span_start", "generate", 0.0, "g"),
                rec("span_start", "sglang_pd_prefill", 0.0, "p", "g"),
                rec("span_start", "sglang_pd_prefill_forward", 0.0, "pf", "p"),
                rec("span_end", "sglang_pd_prefill_forward", 0.5, "pf",
                    attrs={"pd_prefill_forward_duration": 0.5}),
                rec("span_end", "sglang_pd_prefill", 0.5, "p"),
                rec("event", "sglang_pd_summary", 0.5, pid="g",
                    attrs={"pd_transfer_total_mb": 3.0}),
                rec("span_end", "generate", 1.0, "g", attrs={"completion_tokens": 12}),
                rec("event", "attempt_start", 1.1, attempt=1, attrs={"attempt": 1}),
                rec("span_start", "reward_model", 1.2, "r", attempt=1),
                rec("span_end", "reward_model", 1.5, "r", attempt=1,
                    attrs={"score": np.float64(0.5), "t": torch.arange(3.0)})]
    pd_attrs = [rec("span_start", "child", 0.2, "c", "late"),
                rec("span_start", "late", 0.1, "late"),
                rec("span_end", "late", 2.0, "late",
                    attrs={"pd_prefill_forward_duration": 0.3, "pd_decode_forward_duration": 0.7,
                           "error_type": "ValueError"}),
                rec("span_end", "ghost", 2.5, "orphan"),
                rec("span_start", "open", 2.1, "o")]
    return {"rollout_id": 3, "samples": [
        {"index": 0, "group_index": 0, "status": "completed", "reward": 1.0, "label": "4",
         "metadata": {"source": "math"}, "response_length": 12,
         "trace": {"version": 1, "trace_id": "t" * 32, "sample_id": 0, "group_id": 0,
                   "attempt": 1, "events": pd_child}},
        {"index": 1, "group_index": 0, "status": "truncated", "reward": {"acc": 0.0},
         "metadata": {"source_name": "code"},
         "trace": {"version": 1, "trace_id": "u" * 32, "attempt": 0, "events": pd_attrs}},
        {"index": 2, "group_index": 1, "status": "completed", "reward": None, "trace": None},
    ]}


def saved(obj: object, *, legacy: bool = False) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, _use_new_zipfile_serialization=not legacy)
    return buffer.getvalue()


BASE_ZIP = saved(base_dump())
BASE_LEGACY = saved(base_dump(), legacy=True)


# --------------------------------------------------------------------------- byte mutations


@st.composite
def mutations(draw: st.DrawFn, data: bytes) -> bytes:
    """1-4 edits of ``data``: a bit flip, a cut, an insertion, a deletion or an overwrite."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        if not out:
            break
        at = draw(st.integers(0, len(out) - 1))
        edit = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "overwrite"]))
        if edit == "flip":
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif edit == "truncate":
            del out[at:]
        elif edit == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif edit == "delete":
            del out[at:at + draw(st.integers(1, 16))]
        else:
            patch = draw(st.binary(min_size=1, max_size=8))
            out[at:at + len(patch)] = patch
    return bytes(out)


def rezipped(archive: bytes, edit: Callable[[bytes], bytes]) -> bytes:
    """The archive with ``data.pkl`` replaced by ``edit(data.pkl)``, every other record kept."""
    target = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as source, \
            zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
        for info in source.infolist():
            data = source.read(info.filename)
            out.writestr(info.filename,
                         edit(data) if info.filename.endswith("/data.pkl") else data)
    return target.getvalue()


def data_pkl(archive: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(archive)) as source:
        (name,) = [n for n in source.namelist() if n.endswith("/data.pkl")]
        return source.read(name)


SMALL_PKL, BASE_PKL = data_pkl(SMALL), data_pkl(BASE_ZIP)


@fuzz_settings(80)
@given(data=mutations(SMALL))
def test_small_fixture_file_mutations(data: bytes, workdir: Path) -> None:
    check_input(data, "small.pt file bytes", workdir)


@fuzz_settings(80)
@given(pkl=mutations(SMALL_PKL))
def test_small_fixture_data_pkl_mutations(pkl: bytes, workdir: Path) -> None:
    check_input(rezipped(SMALL, lambda _: pkl), "small.pt data.pkl", workdir)


@fuzz_settings(60)
@given(data=mutations(BASE_ZIP))
def test_saved_dump_file_mutations(data: bytes, workdir: Path) -> None:
    check_input(data, "saved dump file bytes", workdir)


@fuzz_settings(80)
@given(pkl=mutations(BASE_PKL))
def test_saved_dump_data_pkl_mutations(pkl: bytes, workdir: Path) -> None:
    check_input(rezipped(BASE_ZIP, lambda _: pkl), "saved dump data.pkl", workdir)


@fuzz_settings(50)
@given(data=mutations(BASE_LEGACY))
def test_legacy_dump_mutations(data: bytes, workdir: Path) -> None:
    check_input(data, "legacy dump bytes", workdir)


# --------------------------------------------------------------------------- wrong types

#: Values no field expects: edge numbers, odd text, containers, arrays, tensors, a
#: Decimal whose int() never returns, a list sharing its halves 2**40 times.
SPECIAL_VALUES: list[object] = [
    None, True, 0, -1, 2**31, 2**63, -(2**63) - 1, 2**200, 10**5000, math.nan, math.inf,
    -math.inf, 1e308, 5e-324, -0.0, "", "span_end", "\x1b[31m\x00", "名字 🚀", "x" * 5000,
    b"\xff\x00", bytearray(b"ab"), decimal.Decimal("1e999999999"), decimal.Decimal("NaN"),
    decimal.Decimal("sNaN"), 1 + 2j, np.float64("nan"), np.int64(-5), np.float32(3.5),
    np.array([1.0, 2.0]), np.zeros(2000), np.array(["a", None], dtype=object),
    torch.tensor(3.5), torch.ones(3), torch.arange(5000), torch.tensor([], dtype=torch.int64),
    frozenset({1, 2}), {3, 4}, range(10**12), slice(1, None), (1, "a"),
    datetime.datetime(2026, 1, 1), datetime.timedelta(seconds=1), uuid.UUID(int=1),
    dag(40), [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()  # the key is removed instead


class Special:
    """Stands for ``SPECIAL_VALUES[i]`` in drawn data: hypothesis prints what it draws,
    and ``repr`` of 10**5000 raises while that of the shared list never ends."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"SPECIAL_VALUES[{self.index}]"


def resolve(value: object) -> object:
    """Drawn data with every Special replaced by its value."""
    if isinstance(value, Special):
        return SPECIAL_VALUES[value.index]
    if isinstance(value, list):
        return [resolve(v) for v in value]
    if isinstance(value, tuple):
        return tuple(resolve(v) for v in value)
    if isinstance(value, dict):
        return {k: resolve(v) for k, v in value.items()}
    return value


JUNK = st.recursive(
    st.builds(Special, st.integers(0, len(SPECIAL_VALUES) - 1)) | st.integers() | st.floats()
    | st.text(max_size=20),
    lambda inner: (st.lists(inner, max_size=4)
                   | st.dictionaries(st.text(max_size=6) | st.integers(-3, 3), inner,
                                     max_size=4)
                   | st.tuples(inner, inner)),
    max_leaves=8,
)

DUMP_KEYS = ["rollout_id", "samples"]
SAMPLE_KEYS = ["index", "group_index", "status", "reward", "metadata", "label", "trace",
               "response_length", "rollout_id"]
CARRIER_KEYS = ["version", "trace_id", "sample_id", "group_id", "attempt", "events"]
EVENT_KEYS = ["type", "name", "ts", "span_id", "parent_span_id", "attempt", "attrs",
              "trace_id"]
FIELDS = ([("dump", k) for k in DUMP_KEYS] + [("sample", k) for k in SAMPLE_KEYS]
          + [("carrier", k) for k in CARRIER_KEYS] + [("event", k) for k in EVENT_KEYS]
          + [("event", None), ("sample", None)])  # key None: the whole event/sample


def corrupt(dump: dict, level: str, key: str | None, which: int, value: object) -> None:
    """Put ``value`` (or remove the key, for MISSING) at one field of ``dump``."""
    samples = dump.get("samples")
    sample = samples[which % len(samples)] if isinstance(samples, list) and samples else None
    carrier = sample.get("trace") if isinstance(sample, dict) else None
    events = carrier.get("events") if isinstance(carrier, dict) else None
    holder: object = {"dump": dump, "sample": sample, "carrier": carrier}.get(level)
    if level == "event":
        if not isinstance(events, list) or not events:
            return
        if key is None:
            events[which % len(events)] = value
            return
        holder = events[which % len(events)]
    if level == "sample" and key is None and isinstance(samples, list) and samples:
        samples[which % len(samples)] = value
        return
    if isinstance(holder, dict):
        if value is MISSING:
            holder.pop(key, None)
        else:
            holder[key] = value


@fuzz_settings(200)
@given(edits=st.lists(st.tuples(st.sampled_from(FIELDS), st.integers(0, 20),
                                JUNK | st.just(MISSING)), min_size=1, max_size=4),
       legacy=st.booleans())
def test_wrong_types_in_every_field(edits: list, legacy: bool, workdir: Path) -> None:
    dump = base_dump()
    for (level, key), which, value in edits:
        corrupt(dump, level, key, which, resolve(value))
    check_input(saved(dump, legacy=legacy), "wrong field types", workdir)


def test_every_field_takes_every_special_value(workdir: Path) -> None:
    """Deterministic sweep: each special value alone in each field (not left to chance)."""
    for level, key in FIELDS:
        for value in [*SPECIAL_VALUES, MISSING]:
            dump = base_dump()
            for which in range(3):
                corrupt(dump, level, key, which, value)
            check_input(saved(dump), "special value sweep", workdir)


# --------------------------------------------------------------------------- found by fuzzing


def one_sample(records: list) -> list[dict]:
    return [{"index": 0, "trace": {"events": records}}]


@pytest.mark.parametrize("parent", [[], (None, None), {"a": 1}, 10**5000],
                         ids=["list", "tuple", "dict", "huge int"])
def test_orphan_end_with_an_odd_parent_id(parent: object) -> None:
    """A span_end without its start kept its parent_span_id as it was: a list then
    failed as a dict key (TypeError: unhashable type: 'list')."""
    records = [rec("span_start", "a", 0.0, "a"), rec("span_end", "a", 1.0, "a"),
               {**rec("span_end", "ghost", 2.0, "orphan"), "parent_span_id": parent}]
    check_frames(build_frames(one_sample(records)))


@pytest.mark.parametrize("kind", [np.array(["span_start", "event"]), torch.ones(2), ["event"]],
                         ids=["array", "tensor", "list"])
def test_record_type_that_compares_element_wise(kind: object) -> None:
    """``type`` holding an array made ``kind == "span_start"`` an array, whose truth
    value raises; it now reads as an unknown type."""
    records = [rec("span_start", "a", 0.0, "a"), {**rec("event", "x", 0.5), "type": kind},
               rec("span_end", "a", 1.0, "a")]
    frames = build_frames(one_sample(records))
    assert frames.warnings["unknown_record_type"] == 1
    check_frames(frames)


def test_events_without_spans_encode() -> None:
    """Frames with events but no spans (every start record unreadable) made encode index
    an empty array (IndexError in payload._event_columns)."""
    frames = build_frames(one_sample([rec("event", "only", 0.0)]))
    assert len(frames.span_core) == 0
    encode(frames)
