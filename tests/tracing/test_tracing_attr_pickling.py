"""Attribute values that look like array values but would break ``torch.save``.

Only numpy arrays and scalars of a non-object dtype and torch tensors are stored
without a pickle check. A numpy object array, or any class from a module whose
name merely starts with ``numpy`` or ``torch`` (``torch_helpers``,
``torchvision``), is checked like any other value: when it cannot be pickled it
becomes its bounded ``repr``, and the samples still save with ``torch.save``.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from slime_trace_widget.tracing import trace_event, trace_span
from tests.support.traced_samples import FakeSample, end_of, events_of, starts

pytestmark = pytest.mark.usefixtures("isolated_context")

REPO = Path(__file__).resolve().parents[2]


def _lock_holder(module: str) -> Any:
    """An instance of a class living in ``module`` that cannot be pickled (it holds a lock)."""

    def __init__(self: Any) -> None:
        self.lock = threading.Lock()

    cls = type("Meter", (), {"__module__": module, "__init__": __init__})
    return cls()


def _saved_and_loaded(sample: FakeSample) -> FakeSample:
    """The sample after a ``torch.save``/``torch.load`` round trip, as slime's dump does."""
    buffer = io.BytesIO()
    torch.save({"samples": [sample]}, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)["samples"][0]


def test_numpy_object_array_holding_a_lambda_is_kept_as_text():
    sample = FakeSample()
    with trace_span(sample, "gen", attrs={"arr": np.array([lambda: 0], dtype=object)}):
        pass
    (start,) = starts(sample, "gen")
    assert isinstance(start["attrs"]["arr"], str)
    assert len(events_of(_saved_and_loaded(sample))) == 2


@pytest.mark.parametrize("module", ["torch_helpers", "torchvision.ops", "numpy_extras"])
def test_classes_of_modules_named_like_torch_or_numpy_are_checked(module):
    sample = FakeSample()
    with trace_span(sample, "gen") as span:
        span.set("meter", _lock_holder(module))
        trace_event(sample, "tick", {"meter": _lock_holder(module)})
    (start,) = starts(sample, "gen")
    end = end_of(sample, start)
    assert isinstance(end["attrs"]["meter"], str)
    assert all(isinstance(e.get("attrs", {}).get("meter", ""), str) for e in events_of(sample))
    assert len(events_of(_saved_and_loaded(sample))) == 3


def test_plain_arrays_scalars_and_tensors_are_stored_as_they_are():
    values = {
        "array": np.arange(3),
        "matrix": np.ones((2, 2), dtype=np.float32),
        "record": np.zeros(2, dtype=[("a", "i4"), ("b", "f8")]),
        "scalar": np.float32(1.5),
        "integer": np.int64(7),
        "tensor": torch.ones(2),
        "parameter": torch.nn.Parameter(torch.zeros(2)),
        "object array of numbers": np.array([1, 2.5], dtype=object),
    }
    sample = FakeSample()
    trace_event(sample, "values", values)
    (record,) = events_of(sample)
    for key in ("array", "matrix", "record", "scalar", "integer", "tensor", "parameter"):
        assert record["attrs"][key] is values[key], key
    # An object array that pickles is kept too, after its check.
    assert record["attrs"]["object array of numbers"] is values["object array of numbers"]
    loaded = _saved_and_loaded(sample)
    assert torch.equal(events_of(loaded)[0]["attrs"]["tensor"], values["tensor"])
    assert np.array_equal(events_of(loaded)[0]["attrs"]["array"], values["array"])


class _LockedTensor(torch.Tensor):
    """A tensor subclass: its instance attributes are pickled with it."""


def test_a_tensor_subclass_holding_a_lock_is_checked():
    tensor = torch.ones(2).as_subclass(_LockedTensor)
    tensor.lock = threading.Lock()
    sample = FakeSample()
    trace_event(sample, "subclass", {"tensor": tensor})
    (record,) = events_of(sample)
    assert isinstance(record["attrs"]["tensor"], str)
    assert len(events_of(_saved_and_loaded(sample))) == 1


RECORD_WITHOUT_TORCH = """
import sys
from slime_trace_widget.tracing import trace_event
sample = {"index": 0, "group_index": 0}
trace_event(sample, "e", {"value": [1, {"a": object()}]})
assert len(sample["trace"]["events"]) == 1
print(sorted(name for name in ("numpy", "torch") if name in sys.modules))
"""


def test_recording_never_imports_numpy_or_torch():
    done = subprocess.run(
        [sys.executable, "-c", RECORD_WITHOUT_TORCH],
        capture_output=True, text=True, check=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.stdout.strip() == "[]"
