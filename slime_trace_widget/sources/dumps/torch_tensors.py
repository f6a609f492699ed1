"""Tensors as real torch tensors: the extension ``load_dump`` uses (through ``torch.load``).

Imported only when a caller asks for raw samples with their tensors; the
frames worker reads tensors as numpy arrays without importing torch
(:mod:`.plain_tensors`).
"""

from __future__ import annotations

import contextlib
import functools
import io
import operator
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ...machine_memory import memory_amount
from .allowlist import refuse_past_storage, tensor_extent, unwrap
from .placeholders import split_state
from .unpickler import TENSOR_REBUILDERS, LoadSession, restricted_pickle_module

__all__ = ["TORCH_TENSORS", "torch_load"]

#: Legacy storages may declare, in all, the file's size or this much, whichever is
#: more: a tiny file may still name a small storage it leaves unfilled (zeros).
LEGACY_STORAGE_FLOOR = 1 << 20

def _torch_globals() -> dict[tuple[str, str], object]:
    """torch classes and constants a tensor-holding dump names."""
    table: dict[tuple[str, str], object] = {
        ("torch", "Size"): torch.Size,
        ("torch", "device"): torch.device,
        ("torch", "Tensor"): torch.Tensor,
        ("torch._tensor", "Tensor"): torch.Tensor,
        ("torch.nn", "Parameter"): torch.nn.Parameter,
        ("torch.nn.parameter", "Parameter"): torch.nn.Parameter,
        ("torch", "UntypedStorage"): torch.UntypedStorage,
        ("torch.storage", "UntypedStorage"): torch.UntypedStorage,
        ("torch", "TypedStorage"): torch.storage.TypedStorage,
        ("torch.storage", "TypedStorage"): torch.storage.TypedStorage,
    }
    for name, value in vars(torch).items():
        legacy_storage = (isinstance(value, type) and name.endswith("Storage")
                          and issubclass(value, torch.storage.TypedStorage))
        if isinstance(value, torch.dtype) or legacy_storage:
            table[("torch", name)] = value
    return table


@functools.cache
def _legacy_storage_dtypes() -> dict[type, torch.dtype]:
    """Each legacy storage class torch has (``torch.FloatStorage`` ...) with its dtype,
    read once through the classes' public ``dtype`` (the deprecation warnings torch may
    give for these classes are not the reader's to show)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = {value: getattr(value, "dtype", None) for value in _torch_globals().values()
                 if isinstance(value, type) and issubclass(value, torch.storage.TypedStorage)}
    return {storage: dtype for storage, dtype in found.items() if isinstance(dtype, torch.dtype)}


def _untyped(storage: Any) -> torch.UntypedStorage:
    """The bytes of a storage the file handed out; ValueError for anything else. A
    typed storage's are reached through a tensor over it, since its own accessors
    warn that the class is deprecated."""
    if isinstance(storage, torch.storage.TypedStorage):
        return torch.empty((0,), dtype=storage.dtype).set_(storage).untyped_storage()
    if isinstance(storage, torch.UntypedStorage):
        return storage
    raise ValueError("a tensor whose storage is not one")


def _rebuilt_tensor(storage: Any, offset: Any, size: Any, stride: Any,
                    dtype: Any = None) -> torch.Tensor:
    """The tensor the file describes, made as torch's rebuild functions make it but
    through public calls: an empty tensor of ``dtype`` (default: the storage's) set
    onto the storage's bytes.

    A tensor whose elements would lie outside its storage is refused: torch checks
    this for storages read from a zip, but a legacy file can hand out an empty
    storage that ``set_`` then grows without initialising it.
    """
    data = _untyped(storage)
    typed = isinstance(storage, torch.storage.TypedStorage)
    element = storage.dtype if dtype is None and typed else dtype
    if not isinstance(element, torch.dtype):
        raise ValueError("a tensor whose dtype is not one")
    available = torch.empty((0,), dtype=element).set_(data).numel()
    refuse_past_storage(tensor_extent(offset, size, stride), available)
    return torch.empty((0,), dtype=element).set_(data, offset, size, stride)


def _apply_metadata(tensor: torch.Tensor, metadata: Any, session: LoadSession) -> torch.Tensor:
    """The tensor with the flags torch pickles beside it (``{"conj": True}``) applied
    where a public call can; any other flag is dropped and counted."""
    if not metadata:
        return tensor
    if not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, bool) for k, v in metadata.items())):
        raise ValueError("tensor metadata that is not a dict of flags")
    for flag, on in metadata.items():
        if flag == "conj" and on and tensor.is_complex():
            tensor = tensor.conj()
        elif on:
            session.warnings["tensor_metadata_dropped"] += 1
    return tensor


def _apply_plain_state(tensor: torch.Tensor, state: Any, session: LoadSession) -> None:
    """Copy a tensor's pickled Python attributes, but only new public ones.

    Existing attributes (``grad``, ``data``, ``__class__``, hooks...) have setters
    with side effects, so they are never assigned from the file.
    """
    for part in split_state(state):
        if not isinstance(part, dict):
            continue
        for key, value in part.items():
            fresh = (isinstance(key, str) and key.isidentifier() and not key.startswith("_")
                     and not hasattr(type(tensor), key))
            if fresh:
                tensor.__dict__[key] = value
            else:
                session.warnings["tensor_state_dropped"] += 1


class _TorchTensors:
    """The :class:`~.unpickler.TensorSupport` that rebuilds real torch tensors."""

    def __init__(self) -> None:
        self.globals = _torch_globals()
        storages = {v for v in self.globals.values() if isinstance(v, type)
                    and issubclass(v, torch.storage.TypedStorage | torch.UntypedStorage)}
        self.data_only = frozenset({torch.Tensor, torch.nn.Parameter, *storages})

    def rebuilders(self, session: LoadSession) -> dict[str, Callable]:
        """Rebuilders that make torch tensors and parameters through public calls, with
        the storage bounds, flags and attributes checked."""

        def finished(tensor: torch.Tensor, requires_grad: Any, hooks: Any,
                     metadata: Any) -> torch.Tensor:
            # torch never serialises live hooks, so a new tensor keeps none.
            if not (hooks is None or (isinstance(hooks, dict) and not hooks)):
                session.warnings["tensor_hooks_dropped"] += 1
            tensor.requires_grad_(bool(requires_grad))
            return _apply_metadata(tensor, metadata, session)

        def rebuild_tensor_v1(storage: Any, offset: Any, size: Any, stride: Any) -> Any:
            return _rebuilt_tensor(storage, offset, size, stride)

        def rebuild_tensor_v2(storage: Any, offset: Any, size: Any, stride: Any,
                              requires_grad: Any, hooks: Any, metadata: Any = None) -> Any:
            return finished(_rebuilt_tensor(storage, offset, size, stride),
                            requires_grad, hooks, metadata)

        def rebuild_tensor_v3(storage: Any, offset: Any, size: Any, stride: Any,
                              requires_grad: Any, hooks: Any, dtype: Any,
                              metadata: Any = None) -> Any:
            return finished(_rebuilt_tensor(storage, offset, size, stride, dtype),
                            requires_grad, hooks, metadata)

        def rebuild_parameter(data: Any, requires_grad: Any, _hooks: Any,
                              state: Any = None) -> Any:
            if not isinstance(data, torch.Tensor):
                return session.blocked_call(*TENSOR_REBUILDERS["parameter"], data)
            param = torch.nn.Parameter(data, bool(requires_grad))
            _apply_plain_state(param, state, session)
            return param

        def rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
            new_type = unwrap(new_type)
            result = func(*args)
            if not isinstance(result, torch.Tensor):
                return result
            if new_type is torch.Tensor or new_type is torch.nn.Parameter:
                result = result if type(result) is new_type else result.as_subclass(new_type)
            else:
                session.warnings["tensor_subclass_dropped"] += 1
            _apply_plain_state(result, state, session)
            return result

        return {
            "tensor": rebuild_tensor_v1,
            "tensor_v2": rebuild_tensor_v2,
            "tensor_v3": rebuild_tensor_v3,
            "parameter": rebuild_parameter,
            "parameter_with_state": rebuild_parameter,
            "from_type": rebuild_from_type_v2,
        }

    def wrappers(self, session: LoadSession) -> dict[tuple[str, str], Callable]:
        """No functions beside the rebuilders: the torch classes allowed here need no
        per-load checks."""
        return {}


TORCH_TENSORS = _TorchTensors()


def _clear_unfilled_storages(session: LoadSession) -> None:
    """Zero legacy storages whose data the file never supplied.

    torch allocates a legacy storage, uninitialised, when the pickle first names
    it, and fills it only if its key is in the list pickled after the data
    (the file's last pickle): a key left out would show leftover memory.
    """
    if not session.legacy_storages:
        return
    filled = session.last_pickle if isinstance(session.last_pickle, list) else []
    filled_keys = {key for key in filled if isinstance(key, str | bytes | int)}
    for key, storage in session.legacy_storages:
        if key not in filled_keys:
            with contextlib.suppress(ValueError):  # not a storage: nothing to clear
                _untyped(storage).fill_(0)


def _legacy_storage_bytes(pid: Any) -> tuple[Any, int] | None:
    """(key, bytes) of the storage a legacy persistent id ``("storage", type, key,
    location, size, view)`` declares, as torch reckons them; None for any other id, or
    one torch refuses itself (a type that is no legacy storage class, a size that is
    no integer, an unhashable key)."""
    if not (isinstance(pid, tuple) and len(pid) == 6):
        return None
    storage_type, key = unwrap(pid[1]), unwrap(pid[2])
    try:
        numel = operator.index(unwrap(pid[4]))
        hash(key)
    except TypeError:
        return None
    # torch's unpickler names a storage class by a StorageType; a pickle may name the
    # legacy class itself.
    if isinstance(storage_type, torch.serialization.StorageType):
        dtype = storage_type.dtype
    elif isinstance(storage_type, type):
        dtype = _legacy_storage_dtypes().get(storage_type)
    else:
        return None
    if not isinstance(dtype, torch.dtype):
        return None
    return key, max(0, numel) * dtype.itemsize


def _bounded_pickle_module(session: LoadSession, data_bytes: int) -> types.SimpleNamespace:
    """The restricted ``pickle_module``, with legacy storages bounded by the file: torch
    allocates each storage a legacy pickle names at the size it declares, before any
    of its data is read, and fills it from the bytes after the pickle. Storages
    declaring more bytes in all than the file holds (``data_bytes``; at least
    :data:`LEGACY_STORAGE_FLOOR`) could never be filled: they are refused before they
    are allocated (ValueError, which the loader reports as a DumpError naming the
    file)."""
    module = restricted_pickle_module(session)
    declared: set[Any] = set()
    total = 0
    allowed = max(data_bytes, LEGACY_STORAGE_FLOOR)

    class Unpickler(module.Unpickler):  # type: ignore[name-defined, misc]
        def persistent_load(self, pid: Any) -> Any:
            nonlocal total
            storage = _legacy_storage_bytes(pid)
            if storage is not None and storage[0] not in declared:
                declared.add(storage[0])
                total += storage[1]
                if total > allowed:
                    raise ValueError(
                        f"refused: its legacy storages declare {memory_amount(total)}, "
                        f"more than the {memory_amount(data_bytes)} the file holds")
            return super().persistent_load(pid)

    return types.SimpleNamespace(__name__=module.__name__, Unpickler=Unpickler,
                                 load=module.load)


def torch_load(session: LoadSession, data: bytes) -> Any:
    """``torch.load`` of in-memory bytes (zip or legacy format) with the restricted unpickler."""
    obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False,
                     pickle_module=_bounded_pickle_module(session, len(data)))
    _clear_unfilled_storages(session)
    return obj


def torch_load_trusted(path: str) -> Any:
    """Plain torch.load, which runs any code the file holds."""
    return torch.load(path, map_location="cpu", weights_only=False)
