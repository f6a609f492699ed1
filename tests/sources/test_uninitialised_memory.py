"""No dump can make the loader hand out memory nobody initialised.

``torch.Tensor(n)``, a storage class called with a size, ``numpy.ndarray(shape)``,
numpy's ``_reconstruct`` without the BUILD that fills it, and a legacy-format
storage the file never supplies data for all allocate memory without clearing
it: leftover bytes of the process (the Jupyter kernel), which the widget would
show as tensor values and a shared snapshot would carry. Before each load the
heap is sprayed with a marker, so before the fix these files showed it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from slime_trace_widget.sources.dumps import DumpError, Placeholder
from slime_trace_widget.sources.loading import load_dump
from tests.support.hostile_pickles import (
    BINPERSID,
    BUILD,
    MARK,
    NEWFALSE,
    TUPLE,
    dump_stream,
    op_call,
    op_global,
    op_text,
    op_value,
    write_legacy,
    write_zip,
)

ELEMENTS = 1024
SPRAY = 0x5A5A5A5A


def spray_the_heap() -> None:
    """Fill and free many small blocks, so reused memory holds a recognisable pattern."""
    blocks = [np.full(ELEMENTS, SPRAY, dtype=np.uint32) for _ in range(2000)]
    blocks += [torch.full((ELEMENTS,), SPRAY, dtype=torch.int32) for _ in range(2000)]
    del blocks


def legacy_storage_without_data() -> bytes:
    """A tensor on a legacy storage whose key the file's storage list leaves out."""
    pid = (MARK + op_text("storage") + op_global("torch", "IntStorage") + op_text("0")
           + op_text("cpu") + op_value(ELEMENTS) + op_value(None) + TUPLE + BINPERSID)
    return op_call(op_global("torch._utils", "_rebuild_tensor_v2"), pid, op_value(0),
                   op_value((ELEMENTS,)), op_value((1,)), NEWFALSE,
                   op_call(op_global("collections", "OrderedDict")))


#: Each call and what the loader must make of it: an inert placeholder, zeros, or a
#: refusal (torch's zip reader answers storage names with dtype holders, not callable).
CALLS = {
    "torch.Tensor(n)": (op_call(op_global("torch", "Tensor"), op_value(ELEMENTS)),
                        "placeholder"),
    "torch.nn.Parameter(torch.Tensor(n))": (
        op_call(op_global("torch.nn.parameter", "Parameter"),
                op_call(op_global("torch", "Tensor"), op_value(ELEMENTS))), "placeholder"),
    "torch.IntStorage(n)": (op_call(op_global("torch", "IntStorage"), op_value(ELEMENTS)),
                            "refused"),
    "torch.UntypedStorage(n)": (op_call(op_global("torch", "UntypedStorage"),
                                        op_value(4 * ELEMENTS)), "placeholder"),
    "numpy.ndarray(shape)": (op_call(op_global("numpy", "ndarray"), op_value((ELEMENTS,)),
                                     op_text("u4")), "placeholder"),
    "numpy _reconstruct without BUILD": (op_call(
        op_global("numpy.core.multiarray", "_reconstruct"), op_global("numpy", "ndarray"),
        op_value((ELEMENTS,)), op_value(b"u4")), "zeros"),
}


def leaked_words(value: object) -> int:
    """How many 32-bit words of ``value`` (a tensor, storage or array) are not zero."""
    if isinstance(value, torch.Tensor):
        return int(value.view(-1).ne(0).sum()) if value.numel() else 0
    if isinstance(value, torch.UntypedStorage | torch.TypedStorage):
        return int(torch.tensor(list(value)).ne(0).sum())
    if isinstance(value, np.ndarray):
        return int(np.count_nonzero(value.view(np.uint8)))
    raise AssertionError(f"unexpected {type(value).__name__}")


@pytest.mark.parametrize("call", list(CALLS), ids=list(CALLS))
def test_constructors_of_uninitialised_memory_never_show_leftover_bytes(
        tmp_path: Path, call: str) -> None:
    opcodes, expected = CALLS[call]
    path = tmp_path / "rollout_1.pt"
    write_zip(path, dump_stream(opcodes, "metadata"))
    for isolate in (True, False):
        spray_the_heap()
        if expected == "refused":
            with pytest.raises(DumpError, match="not callable"):
                load_dump(path, isolate=isolate)
            continue
        dump = load_dump(path, isolate=isolate)
        (value,) = [s["metadata"]["extra"] for s in dump.samples if s["index"] == 1]
        if expected == "placeholder":
            assert isinstance(value, Placeholder), value
            assert call.split("(")[0] in repr(value).replace(".parameter", "")
        else:
            assert value.shape == (ELEMENTS,) and leaked_words(value) == 0


def test_a_legacy_storage_the_file_never_fills_is_zeros(tmp_path: Path) -> None:
    path = tmp_path / "rollout_1.pt"
    write_legacy(path, dump_stream(legacy_storage_without_data(), "metadata"))
    spray_the_heap()
    dump = load_dump(path)
    (value,) = [s["metadata"]["extra"] for s in dump.samples if s["index"] == 1]
    assert value.shape == (ELEMENTS,) and leaked_words(value) == 0


def test_genuine_numpy_and_torch_values_still_load(tmp_path: Path) -> None:
    path = tmp_path / "rollout_1.pt"
    values = {"array": np.arange(6, dtype=np.int16).reshape(2, 3), "tensor": torch.arange(4.0),
              "param": torch.nn.Parameter(torch.ones(2)), "empty": np.zeros(0),
              "half": torch.ones(3, dtype=torch.bfloat16)}
    torch.save({"samples": [{"index": 0, "values": values}]}, path)
    loaded = load_dump(path).samples[0]["values"]
    assert loaded["array"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert loaded["tensor"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert isinstance(loaded["param"], torch.nn.Parameter)
    assert loaded["half"].dtype == torch.bfloat16 and loaded["empty"].shape == (0,)


def legacy_tensor(key: str, numel: int, size: int, view: object = None) -> bytes:
    pid = (MARK + op_text("storage") + op_global("torch", "IntStorage") + op_text(key)
           + op_text("cpu") + op_value(numel) + op_value(view) + TUPLE + BINPERSID)
    return op_call(op_global("torch._utils", "_rebuild_tensor_v2"), pid, op_value(0),
                   op_value((size,)), op_value((1,)), NEWFALSE,
                   op_call(op_global("collections", "OrderedDict")))


def test_a_tensor_larger_than_its_storage_is_refused(tmp_path: Path) -> None:
    """A legacy root named twice with size 0 comes back the second time as a fresh empty
    storage, which torch's ``set_`` grows to the tensor's size without clearing."""
    path = tmp_path / "rollout_1.pt"
    tensors = MARK + legacy_tensor("0", 0, 0) + legacy_tensor("0", 0, ELEMENTS) + TUPLE
    write_legacy(path, dump_stream(tensors, "metadata"))
    spray_the_heap()
    with pytest.raises(DumpError, match="reaches past its storage") as refused:
        load_dump(path)
    assert "state the loader refuses" in str(refused.value)


def test_structured_dtypes_must_fit_their_items(tmp_path: Path) -> None:
    """BUILD can put a field 64 KiB past a 4-byte item; reading it reads other memory."""
    dtype = np.dtype([("a", "u4")])
    dtype.__setstate__((3, "|", None, ("a",), {"a": (np.dtype("u4"), 1 << 16)}, 4, 1, 16))
    path = tmp_path / "rollout_1.pt"
    torch.save({"samples": [{"index": 0, "v": np.zeros(64, dtype)}]}, path)
    for isolate in (True, False):
        with pytest.raises(DumpError, match="field outside its item") as refused:
            load_dump(path, isolate=isolate)
        # refused on purpose, not taken for a damaged file
        assert "state the loader refuses (RefusedState: a numpy dtype" in str(refused.value)
        assert "damaged" not in str(refused.value)


@pytest.mark.parametrize("count", [0, 1, 2])
def test_object_arrays_must_hold_as_many_items_as_their_shape(tmp_path: Path,
                                                              count: int) -> None:
    """numpy's ndarray.__setstate__ reads past a short list: the array then holds stray
    pointers and the process crashes once they are touched."""
    array = op_call(op_global("numpy.core.multiarray", "_reconstruct"),
                    op_global("numpy", "ndarray"), op_value((0,)), op_value(b"b"))
    state = (MARK + op_value(1) + op_value((3,)) + op_call(
        op_global("numpy", "dtype"), op_value("O8"), op_value(False), op_value(True))
        + op_value(False) + op_value(list(range(count))) + TUPLE)
    path = tmp_path / "rollout_1.pt"
    write_zip(path, dump_stream(array + state + BUILD, "metadata"))
    for isolate in (True, False):
        with pytest.raises(DumpError, match=f"object array of 3 items comes with {count}") \
                as refused:
            load_dump(path, isolate=isolate)
        assert "state the loader refuses" in str(refused.value)
