"""Attribute values that look like array values but would break ``torch.save``.

Every value that is not a str, int, float, bool or None is recorded as the plain
data a reader makes of it (``values.plain_value``): arrays and tensors become
lists (a large one a short summary), and any object, a numpy object array's
items, a class from a module whose name merely starts with ``numpy`` or ``torch``
(``torch_helpers``, ``torchvision``) or a tensor subclass holding a lock, its
bounded ``repr``; so the samples always save with ``torch.save``.
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
    (item,) = start["attrs"]["arr"]
    assert isinstance(item, str) and item.startswith("<function")
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


def test_arrays_scalars_and_tensors_are_stored_as_plain_data():
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
    assert record["attrs"] == {
        "array": [0, 1, 2], "matrix": [[1.0, 1.0], [1.0, 1.0]], "record": [[0, 0.0], [0, 0.0]],
        "scalar": 1.5, "integer": 7, "tensor": [1.0, 1.0], "parameter": [0.0, 0.0],
        "object array of numbers": [1, 2.5]}
    assert all(type(value) in (list, int, float) for value in record["attrs"].values())
    assert events_of(_saved_and_loaded(sample))[0]["attrs"] == record["attrs"]


class _LockedTensor(torch.Tensor):
    """A tensor subclass: its instance attributes are pickled with it."""


def test_a_tensor_subclass_holding_a_lock_is_stored_as_its_summary():
    """A subclass's data is never read (a DTensor's can start a collective)."""
    tensor = torch.ones(2).as_subclass(_LockedTensor)
    tensor.lock = threading.Lock()
    sample = FakeSample()
    trace_event(sample, "subclass", {"tensor": tensor})
    (record,) = events_of(sample)
    assert record["attrs"]["tensor"] == "<_LockedTensor shape=(2,) dtype=torch.float32 device=cpu>"
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
