"""numpy dtypes whose pickled state is not what numpy builds from their description.

A dtype's BUILD sets its flags as the file gives them, and numpy trusts them:
``flags=0`` on a dtype with an object field (or on ``object`` itself) makes
``hasobject`` false, so an array, a scalar or a ``_frombuffer`` of it takes bytes
of the file as object pointers, and the process crashes once one is touched
(``repr`` of the sample, or the frames worker reading the attributes). The loader
refuses every dtype that differs from numpy's own build of its description, with
a one-line DumpError naming the file, wherever the file hands numpy a dtype.

The files that crashed the loader before are loaded, and touched, in a
subprocess (with a timeout as a safety net, never asserted on), so this test
process survives them on any code.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from slime_trace_widget import DumpError
from slime_trace_widget.sources.dumps.allowlist import numpys_dtype
from slime_trace_widget.sources.loading import load_dump, load_frames
from tests.support.hostile_pickles import (
    BENIGN_SPANS,
    BUILD,
    MARK,
    TUPLE,
    benign_spans,
    dump_stream,
    op_call,
    op_global,
    op_text,
    op_value,
    touched,
    write_zip,
)

HIDDEN = "hides the objects it holds"
#: An object pointer the file chooses (the reviewer's): nothing lives at 0x10.
POINTER = b"\x10" + b"\x00" * 7


def crafted_dtype(base: str, state: tuple) -> bytes:
    """Opcodes for ``numpy.dtype(base, False, True)`` given ``state`` by BUILD, as
    numpy pickles a dtype, with the state the file chooses."""
    return (op_call(op_global("numpy", "dtype"), op_value(base), op_value(False),
                    op_value(True)) + op_value(state) + BUILD)


#: A struct of one object field whose flags say it holds none, and ``object`` itself so.
OBJECT_FIELD = crafted_dtype("V8", (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0))
BARE_OBJECT = crafted_dtype("O8", (3, "|", None, None, None, -1, -1, 0))
RECONSTRUCT = op_global("numpy.core.multiarray", "_reconstruct")


def array_of(dtype: bytes, data: bytes = POINTER) -> bytes:
    """An array as numpy pickles one: an empty ``_reconstruct`` and BUILD with its bytes."""
    empty = op_call(RECONSTRUCT, op_global("numpy", "ndarray"), op_value((0,)), op_value(b"b"))
    state = (MARK + op_value(1) + op_value((1,)) + dtype + op_value(False) + op_value(data)
             + TUPLE)
    return empty + state + BUILD


#: Every place the loader takes a dtype from the file.
VECTORS = {
    "array state (the reviewer's file)": array_of(OBJECT_FIELD),
    "array state, plain object dtype": array_of(BARE_OBJECT),
    "numpy scalar": op_call(op_global("numpy.core.multiarray", "scalar"), OBJECT_FIELD,
                            op_value(POINTER)),
    "_frombuffer": op_call(op_global("numpy._core.numeric", "_frombuffer"),
                           op_value(POINTER), OBJECT_FIELD, op_value((1,)), op_text("C")),
    "_reconstruct without BUILD": op_call(RECONSTRUCT, op_global("numpy", "ndarray"),
                                          op_value((1,)), OBJECT_FIELD),
    "a dtype left as a value": OBJECT_FIELD,
}

def write_vector(path: Path, vector: str) -> None:
    write_zip(path, dump_stream(VECTORS[vector], "span_end_attrs"))


@pytest.mark.parametrize("vector", list(VECTORS), ids=list(VECTORS))
def test_load_dump_refuses_a_dtype_hiding_its_objects(tmp_path: Path, vector: str) -> None:
    path = tmp_path / "rollout_7.pt"
    write_vector(path, vector)
    for line in touched(path, "REFUSED"):
        assert str(path) in line and "numpy dtype" in line and HIDDEN in line, line
        assert "\n" not in line


@pytest.mark.parametrize("vector", list(VECTORS), ids=list(VECTORS))
def test_load_frames_refuses_a_dtype_hiding_its_objects(tmp_path: Path, vector: str) -> None:
    """The frames worker would crash reading the attributes (a DumpError saying SIGSEGV):
    it refuses the file instead, saying why. The kernel never unpickles the file."""
    path = tmp_path / "rollout_7.pt"
    write_vector(path, vector)
    with pytest.raises(DumpError, match=f"rollout_7.pt: .*numpy dtype .*{HIDDEN}"):
        load_frames(path)


#: Crafted states numpy takes (``__setstate__``) that its own build of the same
#: description would not have: each is refused.
CRAFTED_STATES = {
    "object field, flags 0": ([("a", "f8")], (3, "|", None, ("a",),
                                              {"a": (np.dtype("O"), 0)}, 8, 1, 0)),
    "object, flags 0": ("O", (3, "|", None, None, None, -1, -1, 0)),
    "object subarray, flags 0": (("f8", (2,)), (3, "|", (np.dtype("O"), (2,)), None, None,
                                                16, 8, 0)),
    "float claiming objects": ("f8", (3, "<", None, None, None, -1, -1, 0x3F)),
    "a field missing from names": ([("a", "f8")], (3, "|", None, ("a",),
                                                   {"a": (np.dtype("f8"), 0),
                                                    "b": (np.dtype("f8"), 8)}, 16, 1, 16)),
    "a name missing from fields": ([("a", "f8")], (3, "|", None, ("a", "b"),
                                                   {"a": (np.dtype("f8"), 0)}, 16, 1, 16)),
    "a field that is not a dtype": ([("a", "f8")], (3, "|", None, ("a",),
                                                    {"a": ("f8", 0)}, 8, 1, 16)),
    "aligned flag on a packed struct": ([("a", "i1"), ("b", "f8")], (
        3, "|", None, ("a", "b"), {"a": (np.dtype("i1"), 0), "b": (np.dtype("f8"), 1)},
        9, 1, 0x90)),
    "alignment 64": ([("a", "f8")], (3, "|", None, ("a",), {"a": (np.dtype("f8"), 0)},
                                     8, 64, 16)),
    "text of 3 bytes": ("U1", (3, "<", None, None, None, 3, 4, 8)),
}


def crafted(base: object, state: tuple) -> np.dtype:
    dtype = pickle.loads(pickle.dumps(np.dtype(base)))  # a copy: its state can be set
    dtype.__setstate__(state)
    return dtype


@pytest.mark.parametrize("name", list(CRAFTED_STATES), ids=list(CRAFTED_STATES))
def test_a_dtype_numpy_would_not_build_is_refused(name: str) -> None:
    dtype = crafted(*CRAFTED_STATES[name])
    with pytest.raises(pickle.UnpicklingError, match="a numpy dtype"):
        numpys_dtype(dtype)


def test_an_object_field_hidden_inside_a_struct_is_refused() -> None:
    """The outer dtype's flags are numpy's; the inner one's hide its object field."""
    inner = crafted([("b", "f8")], (3, "|", None, ("b",), {"b": (np.dtype("O"), 0)}, 8, 1, 0))
    outer = crafted([("a", [("b", "f8")])], (3, "|", None, ("a",), {"a": (inner, 0)},
                                             8, 1, 0x1B))
    with pytest.raises(pickle.UnpicklingError, match=HIDDEN):
        numpys_dtype(outer)


#: Genuine dtypes of every shape numpy pickles: none may be refused.
GENUINE = [
    np.dtype(code) for code in ("f8", "O", ">i4", "V8", "S3", "U5", "M8[ns]", "m8[3us]", "?",
                                "c16", "e", "V", "S", "U", "longdouble")
] + [
    np.dtype([("a", "f8"), ("b", "O")]),
    np.dtype([("a", "i1"), ("b", "f8")], align=True),
    np.dtype({"names": ["a"], "formats": ["f8"], "titles": ["T"]}),
    np.dtype(("f4", (2, 3))),
    np.dtype(("O", (2,))),
    np.dtype([("x", [("y", "O", (2,))]), ("z", "i4")]),
    np.dtype((np.record, [("a", "f8")])),
    np.dtype(("i4", {"lo": ("i2", 0), "hi": ("i2", 2)})),
    np.dtype("O", metadata={"vlen": str}),
    np.dtype({"names": ["a", "b"], "formats": ["f8", "i4"], "offsets": [0, 0]}),
    np.dtype({"names": ["a"], "formats": ["f8"], "offsets": [8], "itemsize": 24}),
    np.dtype({"names": ["b", "a"], "formats": ["i4", "i4"], "offsets": [4, 0]}),
    np.dtype([("a", "i1"), ("s", [("p", "i1"), ("q", "f8")])], align=True),
    np.dtype([("a", "<f8")]).newbyteorder(">"),
    np.dtypes.StringDType(),
]


@pytest.mark.parametrize("dtype", GENUINE, ids=[str(d) for d in GENUINE])
def test_genuine_dtypes_and_their_pickled_copies_pass(dtype: np.dtype) -> None:
    assert numpys_dtype(dtype) == dtype
    if dtype.kind != "T":  # StringDType pickles through a function the loader refuses
        copy = pickle.loads(pickle.dumps(dtype))
        assert numpys_dtype(copy) == dtype


def test_genuine_arrays_and_scalars_of_object_and_structured_dtypes_load(
        tmp_path: Path) -> None:
    """What numpy itself pickles still loads, by each path and protocol."""
    structured = np.array([(1.5, "x"), (2.5, {"k": 1})], dtype=[("a", "f8"), ("b", "O")])
    aligned = np.zeros(3, dtype=np.dtype([("a", "i1"), ("b", "f8")], align=True))
    values = {"structured": structured, "aligned": aligned,
              "objects": np.array([1, "two", None], dtype=object),
              "scalar": np.float32(2.5),
              "void": aligned[1], "subarray": np.zeros(2, dtype=("f4", (2, 3))),
              "when": np.datetime64("2024-01-02T03:04:05", "ns")}
    for protocol in (2, 5):
        path = tmp_path / f"rollout_{protocol}.pt"
        torch.save({"samples": [{"index": 0, "values": values}]}, path,
                   pickle_protocol=protocol)
        for isolate in (True, False):
            loaded = load_dump(path, isolate=isolate).samples[0]["values"]
            assert loaded["structured"].tolist() == structured.tolist()
            assert loaded["structured"].dtype == structured.dtype
            assert loaded["aligned"].dtype.isalignedstruct
            assert loaded["objects"].tolist() == [1, "two", None]
            assert loaded["scalar"] == np.float32(2.5) and loaded["void"]["b"] == 0.0
            assert loaded["subarray"].shape == (2, 2, 3) and loaded["when"] == values["when"]


def test_a_benign_file_still_reads_its_spans_beside_a_genuine_object_array(
        tmp_path: Path) -> None:
    """The same file shape as the vectors, with an object array numpy itself pickled
    where the crafted one was: frames come through."""
    path = tmp_path / "rollout_7.pt"
    genuine = pickle.dumps(np.array([("ok",)], dtype=[("a", "O")]), protocol=2)[2:-1]
    write_zip(path, dump_stream(genuine, "span_end_attrs"))
    assert benign_spans(load_frames(path)) >= BENIGN_SPANS
