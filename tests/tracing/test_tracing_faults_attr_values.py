"""Fault injection: attribute values and mappings that refuse to be read.

Values whose ``repr`` or pickling fails (or whose ``repr`` is huge or not text),
protocol-4-only pickles, locks, generators, self-containing and 100,000-deep
lists, given through every way attributes reach a record; mappings and keys that
cannot be read. Every record is kept, with the value replaced by a bounded text
where needed, and pickles with protocol 2.

Every case checks that the user's code gets its own result or its own exception
(the very object), and that the samples still save, load and flatten
(``assert_loadable``). Injected faults are counted for ``test_tracing_faults_total.py``.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any

import pytest

from slime_trace_widget.tracing import (
    MAX_REPR_CHARS,
    TRACE_CHILDREN_KEY,
    trace_event,
    trace_function,
    trace_next_attempt,
    trace_span,
)
from tests.support.trace_faults import (
    BrokenMapping,
    Result,
    assert_loadable,
    assert_well_formed,
    inject,
    self_containing_list,
)
from tests.support.traced_samples import FakeSample, end_of, events_of, starts

pytestmark = pytest.mark.usefixtures("isolated_context")


class ReprRaises:
    """Pickles fine; only ``repr`` fails."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class ReduceRaises:
    def __reduce__(self) -> Any:
        raise RuntimeError("no reduce")


class ReduceExRaises:
    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("no reduce_ex")


class NothingWorks:
    def __reduce__(self) -> Any:
        raise RuntimeError("no reduce")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class ReprNotText:
    def __reduce__(self) -> Any:
        raise RuntimeError("no reduce")

    def __repr__(self) -> Any:
        return 5


class HugeRepr:
    def __reduce__(self) -> Any:
        raise RuntimeError("no reduce")

    def __repr__(self) -> str:
        return "r" * 5_000_000


class NewProtocolsOnly:
    """Pickles with protocol 4 and later only; torch.save writes protocol 2."""

    def __reduce_ex__(self, protocol: Any) -> Any:
        if protocol < 4:
            raise TypeError("needs protocol 4")
        return (Result, ())


class BadKey:
    """A hashable key whose text cannot be made."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __hash__(self) -> int:
        return 1


NoModule = type("NoModule", (), {"__module__": None, "__reduce__": ReduceRaises.__reduce__})


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _odd_values() -> dict[str, Any]:
    return {
        "repr raises": ReprRaises(),
        "reduce raises": ReduceRaises(),
        "reduce_ex raises": ReduceExRaises(),
        "nothing works": NothingWorks(),
        "repr is not text": ReprNotText(),
        "huge repr": HugeRepr(),
        "protocol 4+ only": NewProtocolsOnly(),
        "PickleBuffer": pickle.PickleBuffer(b"bytes"),
        "class without a module": NoModule(),
        "lock": threading.Lock(),
        "generator": (i for i in range(3)),
        "self-containing list": self_containing_list(),
        "nested 100k deep": _deep_list(100_000),
        "nan": float("nan"),
        "text": "ok",
    }


def test_attr_values_that_refuse_repr_or_pickling(tmp_path):
    samples = [FakeSample(index=i) for i in range(3)]
    values = _odd_values()
    places = 0

    @trace_function("decorated", target="sample", attrs_getter=lambda sample: _odd_values())
    def decorated(sample: FakeSample) -> Result:
        return Result()

    with trace_span(samples, "group", attrs=values) as group:
        for sample in samples:
            with trace_span(sample, "generate", attrs=_odd_values()) as span:
                span.update(_odd_values())
                for key, value in _odd_values().items():
                    span.set(key, value)
                span.update({TRACE_CHILDREN_KEY: [
                    {"type": "span", "name": "child", "start_offset": 0.0, "end_offset": 0.5,
                     "attrs": _odd_values()},
                    {"type": "event", "name": "child_event", "attrs": _odd_values()},
                ]})
                trace_event(sample, "event", attrs=_odd_values())
                trace_next_attempt(sample, _odd_values())
                assert isinstance(decorated(sample), Result)
            places += 8
        group.update(values)
    places += 2
    inject("attr values refusing repr/pickle", places * len(values))

    for sample in samples:
        assert_well_formed(sample)
        (start,) = starts(sample, "generate")
        end = end_of(sample, start)
        assert set(end["attrs"]) == set(values)
        assert end["attrs"]["repr raises"] is not None
        assert end["attrs"]["nothing works"] == "<NothingWorks>"
        assert end["attrs"]["repr is not text"] == "<ReprNotText>"
        assert len(end["attrs"]["huge repr"]) < MAX_REPR_CHARS + 40
        assert isinstance(end["attrs"]["protocol 4+ only"], str)
        assert isinstance(end["attrs"]["PickleBuffer"], str)
        for record in events_of(sample):
            pickle.dumps(record.get("attrs"), protocol=2)
    frames = assert_loadable(samples, tmp_path / "odd_values.pt")
    assert len(frames.span_core) == sum(
        sum(e["type"] == "span_start" for e in events_of(s)) for s in samples)


def test_attr_mappings_that_cannot_be_read_keep_their_records(tmp_path):
    sample = FakeSample()
    inject("unreadable attr mappings", 4)
    with trace_span(sample, "broken_start", attrs=BrokenMapping(a=1)) as span:
        span.update({BadKey(): 1})
        trace_event(sample, "broken_event", attrs={BadKey(): 2})
        trace_next_attempt(sample, BrokenMapping(b=2))
    (start,) = starts(sample, "broken_start")
    assert "attrs" not in start
    assert end_of(sample, start) is not None
    assert [e["name"] for e in events_of(sample)] == [
        "broken_start", "broken_event", "attempt_start", "broken_start"]
    assert_loadable([sample], tmp_path / "mappings.pt")
