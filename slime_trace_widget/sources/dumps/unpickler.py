"""The restricted unpickler: C speed, ``find_class`` answered from the allowlist.

Every opcode other than a global lookup runs in the C unpickler; a lookup is
answered from :mod:`.allowlist` plus one tensor extension (torch tensors or
numpy stand-ins), and anything else becomes an inert placeholder. One
:class:`LoadSession` holds what a single load resolved, refused and counted.
"""

from __future__ import annotations

import codecs
import pickle
import types
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import numpy as np

from .allowlist import (
    NUMPY_CORES,
    NUMPY_DTYPE_CLASSES,
    NUMPY_FROMBUFFER,
    NUMPY_RECONSTRUCT,
    NUMPY_SCALAR,
    SAFE_ENCODINGS,
    STATIC_GLOBALS,
    CheckedArray,
    ClassGuard,
    DataOnlyClass,
    canonical,
    forwarder,
    numpys_dtype,
    unwrap,
)
from .placeholders import Placeholder, PlaceholderMeta, make_placeholder_class

__all__ = ["TENSOR_REBUILDERS", "LoadSession", "TensorSupport", "restricted_pickle_module",
           "unpickle_stream"]

#: The torch functions a dump calls to rebuild its tensors, keyed by what each
#: rebuilds. The one spelling of these globals: every :class:`TensorSupport` serves
#: each role, and :class:`LoadSession` maps roles to the globals a file names.
TENSOR_REBUILDERS: dict[str, tuple[str, str]] = {
    "tensor": ("torch._utils", "_rebuild_tensor"),
    "tensor_v2": ("torch._utils", "_rebuild_tensor_v2"),
    "tensor_v3": ("torch._utils", "_rebuild_tensor_v3"),
    "parameter": ("torch._utils", "_rebuild_parameter"),
    "parameter_with_state": ("torch._utils", "_rebuild_parameter_with_state"),
    "from_type": ("torch._tensor", "_rebuild_from_type_v2"),
}


class TensorSupport(Protocol):
    """How one kind of load serves the torch names a dump holds."""

    #: Allowed torch globals, beside :data:`.allowlist.STATIC_GLOBALS`.
    globals: dict[tuple[str, str], object]
    #: Allowed classes a file may name but not call (calls hand out raw memory).
    data_only: frozenset[type]

    def rebuilders(self, session: LoadSession) -> dict[str, Callable]:
        """A function for each role of :data:`TENSOR_REBUILDERS`, no other, with checks
        bound to ``session``."""
        ...

    def wrappers(self, session: LoadSession) -> dict[tuple[str, str], Callable]:
        """Allowed torch functions other than the rebuilders, with checks bound to ``session``."""
        ...


class LoadSession:
    """State of one safe load: resolved globals, placeholders made, warnings counted."""

    def __init__(self, tensors: TensorSupport) -> None:
        self.tensors = tensors
        self.last_pickle: Any = None  # what the latest pickle of the file held
        self.legacy_storages: list[tuple[Any, Any]] = []  # (storage key, storage) handed out
        self.dtypes: list[np.dtype] = []  # numpy dtypes the file made, checked after BUILD
        self.warnings: Counter[str] = Counter()
        self.blocked: dict[str, None] = {}  # insertion-ordered set of "module.name"
        self.guard = ClassGuard()
        self.modified_classes: list[str] = []
        self.allowed_types = frozenset(
            v for v in (*STATIC_GLOBALS.values(), *tensors.globals.values())
            if isinstance(v, type))
        self._resolved: dict[tuple[str, str], object] = {}
        self._placeholders: dict[tuple[str, str], type] = {}
        self._wrapped = {**_session_wrappers(self), **tensors.wrappers(self),
                         **_rebuilders_by_global(tensors, self)}

    def resolve(self, module: str, name: str) -> object:
        """What ``find_class(module, name)`` returns: an allowed object or a placeholder."""
        key = canonical(module, name)
        if key in self._resolved:
            return self._resolved[key]
        if key in self._wrapped:
            obj = self._wrapped[key]
        elif key in STATIC_GLOBALS or key in self.tensors.globals:
            obj = STATIC_GLOBALS.get(key, self.tensors.globals.get(key))
            if obj in self.tensors.data_only or obj is np.ndarray:
                obj = DataOnlyClass(obj, *key, self)  # type: ignore[arg-type]
            elif isinstance(obj, types.FunctionType):
                obj = forwarder(obj)
            elif isinstance(obj, type):
                self.guard.watch(obj)  # type: ignore[arg-type]
        else:
            return self.placeholder_class(*key)
        self._resolved[key] = obj
        return obj

    def placeholder_class(self, module: str, name: str) -> type:
        """The (cached) placeholder class for a refused global, recorded as blocked."""
        key = (module, name)
        cls = self._placeholders.get(key)
        if cls is None:
            cls = self._placeholders[key] = make_placeholder_class(module, name)
        self.blocked[f"{module}.{name}"] = None
        self.warnings["unsafe_global_blocked"] += 1
        return cls

    def blocked_call(self, module: str, name: str, *args: Any) -> Placeholder:
        """Record a refused use of an otherwise allowed function as an inert object."""
        return self.placeholder_class(module, name)(*args)


def _rebuilders_by_global(tensors: TensorSupport,
                          session: LoadSession) -> dict[tuple[str, str], Callable]:
    """``tensors``' rebuilders keyed by the global each serves.

    A support that lacks a role of :data:`TENSOR_REBUILDERS` or names one the table
    lacks raises TypeError here, when the session is made, rather than leaving a
    rebuild global to be refused as a placeholder in the middle of a load.
    """
    rebuilders = tensors.rebuilders(session)
    if rebuilders.keys() != TENSOR_REBUILDERS.keys():
        missing = sorted(TENSOR_REBUILDERS.keys() - rebuilders.keys())
        unknown = sorted(rebuilders.keys() - TENSOR_REBUILDERS.keys())
        raise TypeError(f"{type(tensors).__name__} rebuilders: missing roles {missing}, "
                        f"roles not in TENSOR_REBUILDERS {unknown}")
    return {TENSOR_REBUILDERS[role]: rebuild for role, rebuild in rebuilders.items()}


def _reconstructed(cls: type, base: type, state: Any) -> Any:
    """What pickle's ``copyreg._reconstructor(cls, base, state)`` makes (protocols 0
    and 1 pickle an object of a subclass of a built-in type this way): an instance
    of ``cls`` made by ``base``'s constructor from ``state``, or a bare one when
    ``base`` is ``object``. Written out, as the stdlib's is not public API."""
    if base is object:
        return object.__new__(cls)
    obj = base.__new__(cls, state)
    if base.__init__ is not object.__init__:
        base.__init__(obj, state)
    return obj


def _session_wrappers(session: LoadSession) -> dict[tuple[str, str], Callable]:
    """Allowed numpy and builtin functions that need checks bound to this load.

    They are closures made per load, so a BUILD that sets attributes on one of
    them touches nothing outside this load.
    """

    def dtype_maker(make: Callable[..., np.dtype]) -> Callable[..., np.dtype]:
        def make_dtype(*args: Any, **kwargs: Any) -> np.dtype:
            dtype = make(*args, **kwargs)
            session.dtypes.append(dtype)  # BUILD sets its state later: checked after the load
            return dtype

        return make_dtype

    def reconstructor(cls: Any, base: Any, state: Any) -> Any:
        if isinstance(cls, PlaceholderMeta):
            return cls.__new__(cls) if state is None else cls.__new__(cls, state)
        allowed = session.allowed_types
        if isinstance(cls, type) and cls in allowed and base in allowed:
            return _reconstructed(cls, base, state)
        return session.blocked_call("copyreg", "_reconstructor", cls, base, state)

    def reconstruct(cls: Any, shape: Any, dtype: Any) -> Any:
        # numpy pickles an array as an empty one plus BUILD with its data; a file that
        # asks for a shape and no BUILD would get uninitialised memory, so it gets zeros.
        if unwrap(cls) is not np.ndarray:
            return session.blocked_call("numpy.core.multiarray", "_reconstruct", cls, shape)
        array = NUMPY_RECONSTRUCT(np.ndarray, shape, numpys_dtype(dtype))
        if array.size:
            array = np.zeros(array.shape, array.dtype)
        return array.view(CheckedArray)

    def scalar(dtype: Any, *args: Any) -> Any:
        return NUMPY_SCALAR(numpys_dtype(dtype), *args)

    def frombuffer(buffer: Any, dtype: Any, *args: Any) -> Any:
        # A CheckedArray: a BUILD on the array then has its state checked too.
        return NUMPY_FROMBUFFER(buffer, numpys_dtype(dtype), *args).view(CheckedArray)

    def encode(*args: Any) -> Any:
        plain = (len(args) == 2 and all(isinstance(a, str) for a in args)
                 and args[1].lower() in SAFE_ENCODINGS)
        return codecs.encode(*args) if plain else session.blocked_call("_codecs", "encode", *args)

    def nested_getattr(owner: Any, attr: Any) -> Any:
        # Protocol 2 names Sample.Status as getattr(Sample, "Status"); only that use is served.
        if isinstance(owner, PlaceholderMeta) and isinstance(attr, str):
            return session.placeholder_class(owner.placeholder_module,
                                             f"{owner.placeholder_name}.{attr}")
        return session.blocked_call("builtins", "getattr", owner, attr)

    return {
        ("numpy", "dtype"): dtype_maker(np.dtype),
        **{key: dtype_maker(cls) for key, cls in NUMPY_DTYPE_CLASSES.items()},
        ("copyreg", "_reconstructor"): reconstructor,
        **{(f"{core}.multiarray", "_reconstruct"): reconstruct for core in NUMPY_CORES},
        **{(f"{core}.multiarray", "scalar"): scalar for core in NUMPY_CORES},
        **{(f"{core}.numeric", "_frombuffer"): frombuffer for core in NUMPY_CORES},
        ("_codecs", "encode"): encode,
        ("builtins", "getattr"): nested_getattr,
    }


class RestrictedUnpickler(pickle.Unpickler):
    """C unpickler with ``find_class`` replaced and persistent ids screened.

    Every other opcode runs in C, so loading keeps C speed. ``_storages``
    answers storage ids (torch's handler, or the plain reader's).
    """

    _session: ClassVar[LoadSession]

    def __init__(self, file: Any, **kwargs: Any) -> None:
        super().__init__(_buffered(file), **kwargs)

    def find_class(self, module: str, name: str) -> Any:
        return self._session.resolve(module, name)

    def persistent_load(self, pid: Any) -> Any:
        """Pass storage ids to the storage handler; answer legacy module ids without it.

        torch assigns its handler after creating the unpickler. The C code keeps
        calling this method (looked up at creation), and the assignment lands in
        the instance dict, where it is read here. For a legacy ``("module", cls,
        file, source)`` id torch compares ``source`` with the class's source and
        may write ``<cls.__name__>.patch`` with that text: a file the dump
        names, with content the dump chooses. Sample dumps hold no modules, so
        the class is returned without the comparison.
        """
        if isinstance(pid, tuple) and pid and pid[0] in ("module", b"module"):
            self._session.warnings["module_id_ignored"] += 1
            return pid[1] if len(pid) > 1 else None
        handler = vars(self).get("persistent_load")
        if handler is None:
            raise pickle.UnpicklingError("persistent id in a pickle that has no storages")
        if not isinstance(pid, tuple):
            return handler(pid)
        storage = handler(tuple(unwrap(part) for part in pid))
        if len(pid) == 6:  # the legacy format's ("storage", type, key, location, size, view)
            self._session.legacy_storages.append((pid[2], storage))
        return storage


def _buffered(file: Any) -> Any:
    """A seekable file gets a ``peek`` (see :class:`_PrefetchingReader`); others as they are."""
    seekable = getattr(file, "seekable", None)
    if seekable and seekable() and not hasattr(file, "peek"):
        return _PrefetchingReader(file)
    return file


class _PrefetchingReader:
    """A file view with ``peek``, so the C unpickler reads the pickle in large slices.

    Handed a plain file (torch passes a ``BytesIO``), the C unpickler calls
    ``read`` once per opcode argument, a Python call each. Given ``peek`` it works
    from the peeked buffer and only calls ``read`` to advance past what it used.
    ``peek`` reads ahead and seeks back, so the file position always matches what
    the unpickler consumed: torch's legacy format reads tensor data right after the
    pickle.
    """

    _SLICE = 1 << 20

    def __init__(self, file: Any) -> None:
        self._file = file
        self.read = file.read
        self.readline = file.readline
        self.readinto = file.readinto

    def peek(self, size: int = 0) -> bytes:
        start = self._file.tell()
        data = self._file.read(max(size, self._SLICE))
        self._file.seek(start)
        return data


def restricted_pickle_module(session: LoadSession) -> types.SimpleNamespace:
    """The ``pickle_module`` torch.load uses (zip and legacy formats), bound to one load."""
    unpickler = type("RestrictedUnpickler", (RestrictedUnpickler,), {"_session": session})

    def load(file: Any, **kwargs: Any) -> Any:
        session.last_pickle = unpickler(file, **kwargs).load()
        return session.last_pickle

    return types.SimpleNamespace(__name__=f"{__name__}.restricted_pickle",
                                 Unpickler=unpickler, load=load)


def unpickle_stream(session: LoadSession, file: Any,
                    storages: Callable[[tuple], Any] | None) -> Any:
    """Unpickle one pickle from ``file`` with ``storages`` answering storage ids."""
    unpickler = restricted_pickle_module(session).Unpickler(file)
    if storages is not None:
        unpickler.persistent_load = storages
    session.last_pickle = unpickler.load()
    return session.last_pickle
