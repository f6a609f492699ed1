"""Read torch's zip dump layout without torch: tensors come back as numpy arrays.

A torch zip holds ``<archive>/data.pkl`` (the pickle), ``<archive>/byteorder``
and one ``<archive>/data/<key>`` record of raw bytes per storage. The pickle
names storages by persistent id ``("storage", <XStorage class>, key, location,
numel)`` and tensors by ``torch._utils._rebuild_tensor_v2(storage, offset,
size, stride, ...)``. All of that is plain data, so the frames worker reads it
with numpy and never imports torch, the largest import a load could pay for. A
tensor whose dtype numpy lacks (bfloat16, complex32, quantised) becomes a short
description of itself.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np

from .allowlist import CheckedArray, refuse_past_storage, tensor_extent, unwrap
from .unpickler import TENSOR_REBUILDERS, LoadSession, unpickle_stream

__all__ = ["PLAIN_TENSORS", "plain_zip_load"]

#: torch dtype name -> numpy type code ("" where numpy has no such type).
_DTYPES = {
    "float64": "f8", "double": "f8", "float32": "f4", "float": "f4", "float16": "f2",
    "half": "f2", "int64": "i8", "long": "i8", "int32": "i4", "int": "i4", "int16": "i2",
    "short": "i2", "int8": "i1", "uint8": "u1", "bool": "?", "complex64": "c8",
    "cfloat": "c8", "complex128": "c16", "cdouble": "c16", "uint16": "u2", "uint32": "u4",
    "uint64": "u8", "bfloat16": "", "complex32": "", "chalf": "",
}
#: Legacy typed storage class names -> torch dtype name (their TorchName carries its
#: numpy type code, as a dtype's does).
_STORAGES = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "BFloat16Storage": "bfloat16", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "UntypedStorage": "uint8",
}
_MAX_DIMS = 64


class TorchName:
    """A torch dtype or storage class named by the file: data only, calling it does nothing."""

    __slots__ = ("dtype", "name")

    def __init__(self, name: str, dtype: str) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "dtype", dtype)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("read-only")

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return (str, (repr(self),))

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class _Storage:
    """The raw bytes of one storage record and the dtype its class named."""

    __slots__ = ("data", "dtype")

    def __init__(self, data: bytes, dtype: str) -> None:
        self.data = data
        self.dtype = dtype


def _plain_globals() -> dict[tuple[str, str], object]:
    table: dict[tuple[str, str], object] = {}
    for name, dtype in _DTYPES.items():
        table[("torch", name)] = TorchName(name, dtype)
    for name, torch_dtype in _STORAGES.items():
        table[("torch", name)] = TorchName(name, _DTYPES[torch_dtype])
    table[("torch.storage", "UntypedStorage")] = table[("torch", "UntypedStorage")]
    table[("torch", "Size")] = tuple
    return table


class _PlainTensors:
    """The :class:`~.unpickler.TensorSupport` that rebuilds tensors as numpy arrays."""

    def __init__(self) -> None:
        self.globals = _plain_globals()
        self.data_only: frozenset[type] = frozenset()

    def rebuilders(self, session: LoadSession) -> dict[str, Callable]:
        """Rebuilders that make numpy arrays (or a description where numpy lacks the
        dtype); gradients, parameters and tensor subclasses are dropped."""

        def rebuild(storage: Any, offset: Any, size: Any, stride: Any,
                    dtype: Any = None) -> Any:
            if not isinstance(storage, _Storage):
                return session.blocked_call(*TENSOR_REBUILDERS["tensor_v2"], size)
            name = dtype.name if isinstance(dtype, TorchName) else _dtype_name(storage.dtype)
            code = dtype.dtype if isinstance(dtype, TorchName) else storage.dtype
            shape = tuple(size) if isinstance(size, tuple | list) else ()
            if not code:
                return f"<tensor shape={shape} dtype=torch.{name}>"
            return _strided_copy(storage, offset, size, stride, np.dtype(code))

        def check_extras(hooks: Any, metadata: Any) -> None:
            # As torch: hooks are never restored; metadata may only hold flags
            # (torch hands anything else to its C code, which refuses it).
            if not (hooks is None or (isinstance(hooks, dict) and not hooks)):
                session.warnings["tensor_hooks_dropped"] += 1
            if metadata is not None and not (isinstance(metadata, dict) and all(
                    isinstance(k, str) and isinstance(v, bool) for k, v in metadata.items())):
                raise ValueError("tensor metadata that is not a dict of flags")

        def rebuild_v2(storage: Any, offset: Any, size: Any, stride: Any, _grad: Any = None,
                       hooks: Any = None, metadata: Any = None, *_: Any) -> Any:
            check_extras(hooks, metadata)
            return rebuild(storage, offset, size, stride)

        def rebuild_v3(storage: Any, offset: Any, size: Any, stride: Any, _grad: Any = None,
                       hooks: Any = None, dtype: Any = None, metadata: Any = None,
                       *_: Any) -> Any:
            check_extras(hooks, metadata)
            return rebuild(storage, offset, size, stride, dtype)

        def rebuild_parameter(data: Any, *_: Any) -> Any:
            return data

        def rebuild_from_type(func: Any, _new_type: Any, args: Any, _state: Any) -> Any:
            if callable(func) and isinstance(args, tuple):
                return func(*args)
            return session.blocked_call(*TENSOR_REBUILDERS["from_type"])

        return {
            "tensor": rebuild,
            "tensor_v2": rebuild_v2,
            "tensor_v3": rebuild_v3,
            "parameter": rebuild_parameter,
            "parameter_with_state": rebuild_parameter,
            "from_type": rebuild_from_type,
        }

    def wrappers(self, session: LoadSession) -> dict[tuple[str, str], Callable]:
        """``torch.device(name)`` as the name itself: tensors here have no device."""

        def device(name: Any, *_: Any) -> Any:
            return name if isinstance(name, str) else session.blocked_call("torch", "device")

        return {("torch", "device"): device}


PLAIN_TENSORS = _PlainTensors()


def _dtype_name(code: str) -> str:
    return next((name for name, value in _DTYPES.items() if value == code), "unknown")


def _strided_copy(storage: _Storage, offset: Any, size: Any, stride: Any,
                  dtype: np.dtype) -> Any:
    """The tensor's elements copied out of its storage, after checking they lie inside."""
    extent = tensor_extent(offset, size, stride)
    if extent is None or len(tuple(size)) > _MAX_DIMS:
        raise ValueError("a tensor with an invalid layout")
    flat = np.frombuffer(storage.data, dtype=dtype, count=len(storage.data) // dtype.itemsize)
    refuse_past_storage(extent, len(flat))
    shape = tuple(int(n) for n in size)
    if extent == 0:
        copy = np.zeros(shape, dtype)
    else:
        steps = tuple(int(n) * dtype.itemsize for n in stride)
        copy = np.array(np.lib.stride_tricks.as_strided(flat[int(offset):], shape, steps,
                                                        writeable=False))
    # A CheckedArray, as every array the file can reach: a BUILD on it is checked.
    return copy.view(CheckedArray)


def plain_zip_load(session: LoadSession, archive: zipfile.ZipFile, pickle_name: str,
                   pickle_stream: BinaryIO | None = None) -> Any:
    """Unpickle ``pickle_name`` of a torch zip archive, storages read as numpy data;
    ``pickle_stream`` stands in for the member's own bytes (a skimmed copy of them)."""
    prefix = pickle_name[: -len("data.pkl")]
    little = _byteorder(archive, prefix) != "big"

    def storage(pid: tuple) -> _Storage:
        if len(pid) != 5 or pid[0] != "storage" or not isinstance(unwrap(pid[1]), TorchName):
            raise ValueError("an unknown persistent id in the pickle")
        key = pid[2]
        if not isinstance(key, str) or "/" in key or key.startswith("."):
            raise ValueError("a storage key that is not a record name")
        code = pid[1].dtype
        if code and not little and code not in ("u1", "i1", "?"):
            code = ">" + code
        return _Storage(archive.read(f"{prefix}data/{key}"), code)

    if pickle_stream is not None:
        return unpickle_stream(session, pickle_stream, storage)
    with archive.open(pickle_name) as stream:
        return unpickle_stream(session, _StreamReader(stream), storage)


def _byteorder(archive: zipfile.ZipFile, prefix: str) -> str:
    try:
        return archive.read(f"{prefix}byteorder").decode("ascii", "replace").strip()
    except KeyError:
        return "little"


class _StreamReader:
    """``peek``/``read``/``readline`` over a forward-only stream, read in 1 MiB slices.

    With ``peek`` the C unpickler parses from large buffers and calls ``read`` only
    to advance past what it used, not once for every opcode argument.
    """

    _SLICE = 1 << 20

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._buffer = b""
        self._at = 0

    def _fill(self, wanted: int) -> None:
        if len(self._buffer) - self._at >= wanted:
            return
        parts = [self._buffer[self._at:]]
        have = len(parts[0])
        while have < wanted:
            chunk = self._stream.read(max(self._SLICE, wanted - have))
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
        self._buffer, self._at = b"".join(parts), 0

    def peek(self, size: int = 0) -> bytes:
        self._fill(max(size, 1))
        return self._buffer[self._at:]

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            rest = self._buffer[self._at:] + self._stream.read()
            self._buffer, self._at = b"", 0
            return rest
        self._fill(size)
        data = self._buffer[self._at:self._at + size]
        self._at += len(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        parts = []
        while True:
            self._fill(1)
            if self._at >= len(self._buffer):
                break
            end = self._buffer.find(b"\n", self._at)
            stop = len(self._buffer) if end < 0 else end + 1
            parts.append(self._buffer[self._at:stop])
            self._at = stop
            if end >= 0:
                break
        return b"".join(parts)
