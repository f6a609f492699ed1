"""The frames reader (tensors as numpy, without torch) reads every storage class a
dump names, in either byte order, as ``torch.load`` does.

Legacy typed storages (``torch.FloatStorage``, ``torch.BFloat16Storage``...) named
their torch dtype where the reader wanted a numpy type code: a bfloat16 tensor
failed the whole dump ("data type 'bfloat16' not understood") where the reader
promises a description, and a big-endian dump failed on every tensor (">float32").
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from slime_trace_widget.sources.loading import load_frames
from tests.support.hostile_pickles import record

#: One tensor of each dtype torch.save writes with a typed storage class, and the
#: numpy layout its storage bytes have (to write them big-endian).
TENSORS = {name: torch.tensor([1, 2], dtype=getattr(torch, name)) for name in (
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
    "bool", "complex64", "complex128")}
LAYOUTS = {"float64": "<f8", "float32": "<f4", "float16": "<f2", "bfloat16": "<u2",
           "int64": "<i8", "int32": "<i4", "int16": "<i2", "int8": "i1", "uint8": "u1",
           "bool": "u1", "complex64": "<f4", "complex128": "<f8"}
#: What the span's end attributes hold once read, as the frames show them.
EXPECTED = {
    "float64": [1.0, 2.0], "float32": [1.0, 2.0], "float16": [1.0, 2.0],
    "bfloat16": "<tensor shape=(2,) dtype=torch.bfloat16>", "int64": [1, 2],
    "int32": [1, 2], "int16": [1, 2], "int8": [1, 2], "uint8": [1, 2],
    "bool": [True, True], "complex64": ["(1+0j)", "(2+0j)"],
    "complex128": ["(1+0j)", "(2+0j)"],
}


def tensor_dump(path: Path, byteorder: str) -> Path:
    """A dump whose one span ends with :data:`TENSORS` as attributes, its storages
    written in ``byteorder`` (torch.save writes them in the attributes' order)."""
    events = [record("span_start", "gen", 0.0, "s1"),
              record("span_end", "gen", 1.0, "s1", attrs=TENSORS)]
    sample = {"index": 0, "group_index": 0, "status": "completed", "reward": 1.0,
              "trace": {"version": 1, "trace_id": "a" * 32, "attempt": 0, "events": events}}
    buffer = io.BytesIO()
    torch.save({"rollout_id": 1, "samples": [sample]}, buffer)
    layouts = {f"archive/data/{key}": layout for key, layout in enumerate(LAYOUTS.values())}
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if byteorder == "big" and info.filename == "archive/byteorder":
                data = b"big"
            elif byteorder == "big" and info.filename in layouts:
                data = np.frombuffer(data, layouts[info.filename]).byteswap().tobytes()
            target.writestr(info, data)
    return path


@pytest.mark.parametrize("byteorder", ["little", "big"])
def test_every_storage_class_reads_in_either_byte_order(tmp_path: Path, byteorder: str) -> None:
    path = tensor_dump(tmp_path / "rollout_1.pt", byteorder)
    read_by_torch = torch.load(path, weights_only=False)["samples"][0]["trace"]["events"][1]
    assert {name: value.tolist() for name, value in read_by_torch["attrs"].items()
            if name != "bfloat16"} == {name: tensor.tolist() for name, tensor in TENSORS.items()
                                       if name != "bfloat16"}
    frames = load_frames(path)
    assert frames.failures == []
    assert frames.spans["end_attrs"].iloc[0] == EXPECTED
