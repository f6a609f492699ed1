"""Values survive a save and a safe load: ``torch.save`` and ``save_dump`` round trips.

One of every allowed value type (containers, scalars, tensors, numpy arrays) in
the zip and legacy formats and several pickle protocols; slime-like Sample objects
with a nested enum, whose class the loader never imports; ``save_dump`` writing
plain records that load back equal, trusted loads turning objects into records.
"""

import collections
import datetime
import decimal
import enum
import math
import sys
import types
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_dump
from tests.support.dump_samples import events_or_empty, span_sample

#: Every test fails if a load created the hostile fixture dump's marker file.
pytestmark = pytest.mark.usefixtures("no_fixture_marker")


# --------------------------------------------------------------------------- benign values


class Status(enum.Enum):
    COMPLETED = "completed"
    TRUNCATED = "truncated"


@dataclass
class Obj:
    index: int
    status: Status = Status.COMPLETED
    metadata: dict = field(default_factory=dict)


def rich_values() -> dict:
    """One of every allowed value type a sample's metadata or attrs may hold."""
    tensor_with_attr = torch.arange(3.0)
    tensor_with_attr.note = "kept"
    containers = {
        "od": OrderedDict(a=1), "dd": collections.defaultdict(list, {"k": [1]}),
        "dq": collections.deque([1, 2], maxlen=5), "counter": Counter("aab"),
        "set": {1, 2}, "frozen": frozenset({3}), "range": range(1, 9, 2),
        "slice": slice(1, None, 2),
    }
    scalars = {
        "complex": 1 + 2j, "bytes": b"\x00\xff", "empty_bytes": b"", "bytearray": bytearray(b"ab"),
        "when": datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc),
        "day": datetime.date(2026, 1, 2), "clock": datetime.time(3, 4),
        "delta": datetime.timedelta(seconds=1.5), "decimal": decimal.Decimal("1.25"),
        "uuid": uuid.UUID(int=7), "inf": math.inf, "text": "多语言 🚀" * 3,
    }
    tensors = {
        "tensor": torch.tensor([1.5, 2.5]), "long": torch.arange(4),
        "bf16": torch.ones(2, dtype=torch.bfloat16), "size": torch.Size([2, 3]),
        "device": torch.device("cpu"), "dtype": torch.float16,
        "param": torch.nn.Parameter(torch.ones(2)), "tensor_attr": tensor_with_attr,
    }
    arrays = {
        "array": np.arange(6).reshape(2, 3), "objects": np.array([{"a": 1}, None], dtype=object),
        "scalar": np.int32(7), "record": np.zeros(2, dtype=[("x", "<f4"), ("y", "<i8")]),
    }
    return {**containers, **scalars, **tensors, **arrays}


def assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert type(a) is type(b) and torch.equal(a, b)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    else:
        assert type(a) is type(b) and a == b


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("legacy", [False, True])
def test_rich_values_round_trip_safely(tmp_path, protocol, legacy):
    values = rich_values()
    path = tmp_path / "rollout_5.pt"
    torch.save({"rollout_id": 5, "samples": [{"index": 0, "metadata": values}]}, path,
               pickle_protocol=protocol, _use_new_zipfile_serialization=not legacy)
    dump = load_dump(path)
    assert dump.blocked_globals == [] and dump.warnings == Counter()
    loaded = dump.samples[0]["metadata"]
    assert loaded.keys() == values.keys()
    for key, value in values.items():
        assert_same(value, loaded[key])
    assert loaded["tensor_attr"].note == "kept"
    assert loaded["dq"].maxlen == 5 and loaded["dd"]["missing"] == []


def test_legacy_format_round_trip(tmp_path):
    path = tmp_path / "rollout_9.pt"
    samples = [span_sample(i, {"t": torch.ones(i + 1)}) for i in range(3)]
    torch.save({"rollout_id": 9, "samples": samples}, path, _use_new_zipfile_serialization=False)
    dump = load_dump(path)
    assert dump.rollout_id == 9 and len(dump.samples) == 3
    assert torch.equal(events_or_empty(dump.samples[2])[1]["attrs"]["t"], torch.ones(3))


@pytest.fixture
def fake_slime_types():
    """A throwaway module standing in for slime.utils.types while saving, removed after."""
    module = types.ModuleType("fake_slime_types")

    class Sample:
        class Status(enum.Enum):
            COMPLETED = "completed"

        def __init__(self, index):
            self.index = index
            self.status = Sample.Status.COMPLETED
            self.trace = {"version": 1, "events": []}

    Sample.__module__ = Sample.Status.__module__ = module.__name__
    Sample.__qualname__, Sample.Status.__qualname__ = "Sample", "Sample.Status"
    module.Sample = Sample
    sys.modules[module.__name__] = module
    yield Sample
    sys.modules.pop(module.__name__, None)


@pytest.mark.parametrize("protocol", [2, 4])
def test_object_samples_with_nested_enum(tmp_path, fake_slime_types, protocol):
    path = tmp_path / "rollout_3.pt"
    torch.save({"samples": [fake_slime_types(0), fake_slime_types(1)]}, path,
               pickle_protocol=protocol)
    sys.modules.pop("fake_slime_types")
    dump = load_dump(path)
    assert "fake_slime_types" not in sys.modules
    assert [s["status"] for s in dump.samples] == ["completed", "completed"]
    assert [s["index"] for s in dump.samples] == [0, 1] and dump.rollout_id == 3
    assert "fake_slime_types.Sample.Status" in dump.blocked_globals


# --------------------------------------------------------------------------- save_dump


def test_save_dump_round_trip(tmp_path):
    samples = [span_sample(0, {"a": 1}), Obj(1, Status.TRUNCATED, {"source": "math"})]
    path = save_dump(tmp_path / "rollout_6.pt", samples, rollout_id=6)
    assert path == str(tmp_path / "rollout_6.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rollout_6.pt"]
    raw = torch.load(path, weights_only=True)
    assert raw["rollout_id"] == 6 and raw["samples"][1] == {
        "index": 1, "status": "truncated", "metadata": {"source": "math"}}
    dump = load_dump(path)
    assert dump.samples == raw["samples"] and dump.blocked_globals == []


JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20,
)


@settings(max_examples=30, deadline=None)
@given(samples=st.lists(st.dictionaries(st.text(max_size=8), JSON_LIKE, max_size=5), max_size=5))
def test_save_load_round_trip_property(tmp_path_factory, samples):
    path = save_dump(tmp_path_factory.mktemp("prop") / "rollout_1.pt", samples, rollout_id=1)
    dump = load_dump(path)
    assert dump.samples == samples and dump.rollout_id == 1 and dump.blocked_globals == []


def test_save_dump_rejects_non_samples(tmp_path):
    with pytest.raises(TypeError, match="sample 1"):
        save_dump(tmp_path / "x.pt", [{}, 3])


def test_save_load_trusted_objects_become_records(tmp_path):
    path = tmp_path / "rollout_1.pt"
    torch.save([Obj(0), {"index": 1}, 5], path)
    dump = load_dump(path, trusted=True)
    assert (dump.kind, dump.rollout_id) == ("list", 1)
    assert dump.samples == [{"index": 0, "status": "completed", "metadata": {}}, {"index": 1}]
    assert dump.warnings == Counter(object_sample_converted=1, sample_not_a_dict=1)
