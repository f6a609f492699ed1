"""Read and write slime rollout dumps (``rollout_{id}.pt``) without trusting them.

A dump is a pickle inside torch's container, and unpickling an untrusted pickle
runs whatever callables it names. Dumps get passed around between colleagues and
machines, so :func:`load_dump` never executes code from the file unless asked to.

How the safe loader works
-------------------------
``torch.load`` is given a restricted ``pickle_module``. Its ``Unpickler`` is a
subclass of the C :class:`pickle.Unpickler` that overrides ``find_class`` only,
so every opcode other than a global lookup keeps the C unpickler's full speed
(slime dumps of plain dicts contain no globals at all). ``find_class`` never
imports a module: it looks the name up in a table built when this module is
imported, and anything not in the table becomes an inert placeholder.

The allowlist (module, name) resolves to real objects:

* torch: ``torch._utils._rebuild_tensor`` / ``_rebuild_tensor_v2`` /
  ``_rebuild_tensor_v3`` / ``_rebuild_parameter`` /
  ``_rebuild_parameter_with_state``, ``torch._tensor._rebuild_from_type_v2``
  (tensor state restricted to new public attributes, backward hooks dropped),
  ``torch.Tensor``, ``torch.nn.Parameter``, ``torch.Size``, ``torch.device``,
  every ``torch.<name>`` that is a ``torch.dtype``, ``torch.UntypedStorage``,
  ``torch.TypedStorage`` and the legacy typed storages (``torch.FloatStorage``...).
* numpy: ``_reconstruct`` and ``scalar`` from ``numpy.core.multiarray`` and
  ``numpy._core.multiarray``, ``_frombuffer`` from ``numpy(._)core.numeric``,
  ``numpy.ndarray``, ``numpy.dtype`` and the ``numpy.dtypes.*DType`` classes.
* builtins: ``set frozenset complex slice range bytearray bytes int float str
  bool tuple list dict object Ellipsis NotImplemented``; ``_codecs.encode`` for
  the latin-1/utf-8/ascii encodings pickle protocol 2 uses for ``bytes``;
  ``copyreg._reconstructor`` when both of its classes are allowed;
  ``builtins.getattr`` only to name a nested class of a placeholder
  (``Sample.Status`` in protocol 2 pickles).
* ``collections.OrderedDict / defaultdict / deque / Counter``, ``datetime.date /
  time / datetime / timedelta / timezone / tzinfo``, ``decimal.Decimal``,
  ``uuid.UUID``.

``torch.Tensor``, ``torch.nn.Parameter``, the storage classes and ``numpy.ndarray``
may be named only as data (what torch's and numpy's rebuild functions take):
calling one with a size returns memory nobody initialised, leftover bytes of this
process, so such a call becomes a placeholder; an array ``_reconstruct`` makes
without filling it, and a legacy storage the file never supplies, are zeros; a
tensor reaching past its storage is refused. numpy trusts pickled state: arrays
come back as :class:`CheckedArray` (an ``ndarray`` subclass that pickles as a
plain one), whose BUILD refuses an object array with fewer items than its shape,
and dtypes whose fields lie outside their item are refused.

Everything else (``os.system``, ``builtins.eval``, ``subprocess.Popen``,
``functools.partial``, ``torch.load``, ``slime.utils.types.Sample``...) is
replaced by a :class:`Placeholder` subclass made for that name. Calling it,
``__new__`` on it and BUILD on its instances only record ``args``, ``kwargs`` and
``state``; nothing else runs. After loading, a sample that is a placeholder
becomes the dict of its fields (so a pickled ``Sample`` reads like
``Sample.to_dict()``); in those fields, placeholder objects become dicts too and
enum-like values (a class outside the standard library called with one scalar,
e.g. ``Sample.Status("completed")``) become that scalar. Placeholders anywhere
else (say inside trace attrs) stay inert objects whose ``repr`` names the
blocked global: finding them would mean walking every event in Python.

Why BUILD (``__setstate__`` / ``__dict__`` update) on real objects is safe: every
callable a file can reach is either on the list above, all of which only build
data from data, or a placeholder, which runs nothing. So a state that plants
``__setstate__`` in an instance's ``__dict__`` (the classic double-BUILD trick)
can only make the unpickler call an allowed data constructor or a placeholder.
The remaining risk is BUILD on a global *class* rather than an instance: on a
mutable Python class (``Counter``, ``UUID``, ``torch.Tensor``, the storages) it
would set class attributes for the whole process. Those classes are snapshotted
when the file names them and restored after the load, and the file is refused;
Python functions on the list are handed out as fresh per-load forwarders so
their attributes cannot be changed either.

Zip files holding TorchScript (``constants.pkl``) are refused outright, because
``torch.load`` would hand them to ``torch.jit.load``, which runs their code. So
are tar files (torch's pre-0.4 format), which torch extracts to disk and whose
symlinked members it would open. Persistent ids, the one other way a pickle
reaches torch's own code, are screened: a legacy ``module`` id would make torch
write a ``.patch`` file named and filled by the dump.

Resources: some hostile pickles need no code to do harm. A dict key that is a
tuple sharing its halves takes 2**64 steps to hash, int keys chosen to collide
make dict insertion quadratic, a few bytes can ask for gigabytes; all of that runs
inside the C unpickler, where no signal can stop it. So by default a safe load is
rehearsed in a disposable child process under a CPU time limit and a memory cap
(see :mod:`slime_trace_widget.isolation`), and the load here, of the same bytes,
is only handed bytes the child's unpickler has already got through.

``trusted=True`` skips all of this and calls ``torch.load(weights_only=False)``,
which runs any code the file contains. Use it only for files you made.
"""

import _codecs
import _compat_pickle
import builtins
import collections
import copyreg
import datetime
import decimal
import io
import itertools
import math
import numbers
import os
import pickle
import re
import sys
import tarfile
import types
import uuid
import zipfile
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np
import torch

from .isolation import Rehearsal
from .paths import DumpError, PathLike, expand_paths
from .values import bounded_int, short_text

__all__ = ["CheckedArray", "DumpError", "LoadedDump", "Placeholder", "ReadWatcher", "expand_paths",
           "load_dump", "load_dump_bytes", "load_dumps", "save_dump"]


@dataclass
class LoadedDump:
    """One dump file read into plain sample records, with what had to be skipped.

    ``warnings`` counts, by kind: ``unsafe_global_blocked`` (globals replaced by
    placeholders, listed in ``blocked_globals``), ``placeholder_sample_object`` /
    ``object_sample_converted`` (samples that were objects, now dicts),
    ``sample_not_a_dict`` (items skipped), ``tensor_state_dropped`` /
    ``tensor_hooks_dropped`` / ``tensor_subclass_dropped`` (tensor extras not restored),
    ``module_id_ignored`` (legacy module ids answered without torch's source check).
    """

    path: str
    rollout_id: int | None
    samples: list[dict]
    warnings: Counter[str] = field(default_factory=Counter)
    kind: str = "rollout"
    blocked_globals: list[str] = field(default_factory=list)
    trusted: bool = False

    @property
    def name(self) -> str:
        """The file name without its directory, for labels and messages."""
        return os.path.basename(self.path)


# ---------------------------------------------------------------------------
# Placeholders: inert stand-ins for every global the allowlist refuses.


class _PlaceholderMeta(type):
    """Metaclass that makes placeholder classes read-only, so BUILD cannot alter them."""

    def __setattr__(cls, name: str, value: object) -> None:
        raise TypeError(f"placeholder class for {cls.placeholder_global} is read-only")

    def __delattr__(cls, name: str) -> None:
        raise TypeError(f"placeholder class for {cls.placeholder_global} is read-only")

    def __repr__(cls) -> str:
        return f"<placeholder class {cls.placeholder_global}>"

    @property
    def placeholder_global(cls) -> str:
        """``module.name`` of the global this class stands in for."""
        return f"{cls.placeholder_module}.{cls.placeholder_name}"


class Placeholder(metaclass=_PlaceholderMeta):
    """Stand-in for an object whose class or function the safe loader refused.

    Creating, calling or restoring state on it only records what was asked,
    so a hostile pickle has nothing to execute. Fields restored by BUILD live in
    ``__dict__`` (readable as attributes); how it was made is kept in
    ``placeholder_args`` / ``placeholder_kwargs`` / ``placeholder_state``.
    """

    __slots__ = ("__dict__", "_ph_args", "_ph_called", "_ph_kwargs", "_ph_state")
    placeholder_module: ClassVar[str] = ""
    placeholder_name: ClassVar[str] = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> "Placeholder":
        obj = object.__new__(cls)
        obj._ph_args = args
        obj._ph_kwargs = kwargs
        obj._ph_state = None
        obj._ph_called = False
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Reached only when the pickle *called* the class (REDUCE), not via NEWOBJ:
        # that is what tells an enum lookup like Status("completed") from an object.
        self._ph_called = True

    def __call__(self, *args: Any, **kwargs: Any) -> "Placeholder":
        """Calling a placeholder object yields another inert record, never an error."""
        return type(self)(*args, **kwargs)

    def __setstate__(self, state: Any) -> None:
        dict_state, slot_state = _split_state(state)
        if isinstance(dict_state, dict):
            self.__dict__.update(dict_state)
        elif dict_state is not None:
            self._ph_state = dict_state
        if slot_state:
            self.__dict__.update(slot_state)

    def __reduce__(self) -> tuple[type, tuple[str]]:
        # Re-saving a loaded dump must not re-create the blocked call: write its description.
        return (str, (repr(self),))

    def __repr__(self) -> str:
        return f"<placeholder {type(self).placeholder_global}{_describe_args(self._ph_args)}>"

    @property
    def placeholder_args(self) -> tuple:
        """Positional arguments the pickle passed when creating this object."""
        return self._ph_args

    @property
    def placeholder_kwargs(self) -> dict:
        """Keyword arguments the pickle passed (NEWOBJ_EX), usually empty."""
        return self._ph_kwargs

    @property
    def placeholder_state(self) -> Any:
        """Non-dict BUILD state, if any (dict state becomes attributes)."""
        return self._ph_state


def _split_state(state: Any) -> tuple[Any, dict | None]:
    """Split pickle BUILD state into its ``__dict__`` part and its ``__slots__`` part."""
    if (
        isinstance(state, tuple)
        and len(state) == 2
        and (state[0] is None or isinstance(state[0], dict))
        and isinstance(state[1], dict)
    ):
        return state[0], state[1]
    return state, None


_SCALARS = (str, int, float, bool)


def _describe_args(args: tuple) -> str:
    """Short argument list for a repr; only scalars are shown so repr cannot recurse."""
    if not args:
        return ""
    text = ", ".join(_describe_arg(a) for a in args[:8])
    return f"({text[:117]}...)" if len(text) > 120 else f"({text})"


def _describe_arg(arg: Any) -> str:
    """One argument, cheaply: a 100 MB string is cut before repr and a huge int (whose
    repr raises) is summarised, because the repr is built each time a value is shown."""
    if isinstance(arg, str):
        return repr(arg[:120])
    if isinstance(arg, int) and arg.bit_length() > 64:
        return f"<int of {arg.bit_length()} bits>"
    return repr(arg) if isinstance(arg, _SCALARS) or arg is None else f"<{type(arg).__name__}>"


def _make_placeholder_class(module: str, name: str) -> type:
    """A fresh read-only Placeholder subclass standing in for ``module.name``."""
    return _PlaceholderMeta(
        "Placeholder",
        (Placeholder,),
        {
            "__slots__": (),
            "__module__": __name__,
            # No real source defines this qualname, so inspect-based code finds nothing.
            "__qualname__": f"<placeholder {module}.{name}>",
            "placeholder_module": module,
            "placeholder_name": name,
        },
    )


# ---------------------------------------------------------------------------
# The allowlist.

_TORCH_MODULE_ALIASES = {"torch.tensor": "torch._tensor"}
_BUILTIN_NAMES = (
    "set", "frozenset", "complex", "slice", "range", "bytearray", "bytes", "int", "float",
    "str", "bool", "tuple", "list", "dict", "object", "Ellipsis", "NotImplemented",
)
_SAFE_ENCODINGS = frozenset({"latin1", "latin-1", "iso-8859-1", "iso8859-1", "utf-8", "utf8",
                             "ascii"})
_IMMUTABLE_TYPE_FLAG = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE


def _canonical(module: str, name: str) -> tuple[str, str]:
    """Map Python 2 names (which protocol 0-2 pickles write) and old torch paths to today's.

    The same renaming the C unpickler's own find_class does, so allowlist entries
    and blocked names read as Python 3 names (``commands.Popen`` is ``subprocess.Popen``).
    """
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    else:
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
    return _TORCH_MODULE_ALIASES.get(module, module), name


# numpy's pickle helpers, found from numpy's own reductions so no shim is imported.
# Files reach them only through the checking wrappers in _session_wrappers, under
# both module names numpy has used.
_NUMPY_CORES = ("numpy.core", "numpy._core")
_NUMPY_RECONSTRUCT = np.zeros(1).__reduce__()[0]
_NUMPY_SCALAR = np.float64(0).__reduce__()[0]
_NUMPY_FROMBUFFER = np.zeros(1).__reduce_ex__(5)[0]


def _numpy_globals() -> dict[tuple[str, str], object]:
    """numpy's array and dtype classes (the helpers that build them are wrapped per load)."""
    table: dict[tuple[str, str], object] = {("numpy", "ndarray"): np.ndarray,
                                             ("numpy", "dtype"): np.dtype}
    dtypes = getattr(np, "dtypes", None)
    for name in dir(dtypes) if dtypes is not None else ():
        value = getattr(dtypes, name)
        if name.endswith("DType") and isinstance(value, type):
            table[("numpy.dtypes", name)] = value
    return table


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


def _static_globals() -> dict[tuple[str, str], object]:
    """Every allowed global that resolves to the real object (or a per-load forwarder)."""
    table: dict[tuple[str, str], object] = {("builtins", n): getattr(builtins, n)
                                             for n in _BUILTIN_NAMES}
    for cls in (collections.OrderedDict, collections.defaultdict, collections.deque, Counter):
        table[("collections", cls.__name__)] = cls
    for cls in (datetime.date, datetime.time, datetime.datetime, datetime.timedelta,
                datetime.timezone, datetime.tzinfo):
        table[("datetime", cls.__name__)] = cls
    table[("decimal", "Decimal")] = decimal.Decimal
    table[("uuid", "UUID")] = uuid.UUID
    table.update(_numpy_globals())
    table.update(_torch_globals())
    return table


_STATIC_GLOBALS = _static_globals()
_ALLOWED_TYPES = frozenset(v for v in _STATIC_GLOBALS.values() if isinstance(v, type))


def _is_mutable_class(obj: object) -> bool:
    """True for Python-defined classes, whose attributes a pickle BUILD could overwrite."""
    return isinstance(obj, type) and not obj.__flags__ & _IMMUTABLE_TYPE_FLAG


def _forwarder(function: Callable) -> Callable:
    """A fresh function calling ``function``: BUILD may scribble on it, not on the original."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return forward


def _data_only_classes() -> frozenset[type]:
    """Allowed classes whose call hands out uninitialised memory (see _DataOnlyClass)."""
    storages = {v for v in _STATIC_GLOBALS.values() if isinstance(v, type)
                and issubclass(v, torch.storage.TypedStorage | torch.UntypedStorage)}
    return frozenset({torch.Tensor, torch.nn.Parameter, np.ndarray, *storages})


_DATA_ONLY_CLASSES = _data_only_classes()


class _DataOnlyClass:
    """Stand-in for an allowed class that a file may name but not call.

    ``torch.Tensor(n)``, a storage class called with a size and
    ``numpy.ndarray(shape)`` return memory nobody initialised: leftover bytes of
    this process (heap addresses, earlier data), which the widget would show as
    values and a shared snapshot would carry. torch's and numpy's own pickles
    never call these classes, they pass them to rebuild functions, which unwrap
    the stand-in (:func:`_unwrap`). A call becomes an inert placeholder, and
    since the stand-in has no attributes of its own, BUILD cannot touch the
    real class through it.
    """

    __slots__ = ("_module", "_name", "_session", "cls")

    def __init__(self, cls: type, module: str, name: str, session: "_LoadSession") -> None:
        for slot, value in (("cls", cls), ("_module", module), ("_name", name),
                            ("_session", session)):
            object.__setattr__(self, slot, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self!r} is read-only")

    def __call__(self, *args: Any, **kwargs: Any) -> Placeholder:
        return self._session.blocked_call(self._module, self._name, *args)

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return (str, (repr(self),))

    def __repr__(self) -> str:
        return f"<class {self._module}.{self._name}>"


def _unwrap(value: Any) -> Any:
    """The real class behind a _DataOnlyClass stand-in; anything else as it is."""
    return value.cls if isinstance(value, _DataOnlyClass) else value


_MISSING = object()
_CLASS_SPECIALS = ("__class__", "__bases__", "__name__", "__qualname__")


class _ClassGuard:
    """Snapshots mutable allowed classes so a load that alters them can be undone and refused.

    Besides the class ``__dict__`` it records the attributes that live outside it
    (metaclass, bases, names), which BUILD's setattr could also reach.
    """

    def __init__(self) -> None:
        self._snapshots: dict[int, tuple[type, dict[str, Any], dict[str, Any]]] = {}

    def watch(self, cls: type) -> None:
        specials = {key: getattr(cls, key) for key in _CLASS_SPECIALS}
        self._snapshots.setdefault(id(cls), (cls, specials, dict(vars(cls))))

    def restore(self) -> list[str]:
        """Put back every changed class attribute; return the names of the classes touched."""
        touched = []
        for cls, specials, before in self._snapshots.values():
            changed = [k for k, v in specials.items() if getattr(cls, k) is not v]
            after = dict(vars(cls))
            same_dict = after.keys() == before.keys() and all(
                after[k] is v for k, v in before.items())
            if not changed and same_dict:
                continue
            touched.append(f"{before.get('__module__', '?')}.{specials['__qualname__']}")
            for key in changed:
                type.__setattr__(cls, key, specials[key])
            for key in after.keys() - before.keys():
                type.__delattr__(cls, key)
            for key, value in before.items():
                if after.get(key, _MISSING) is not value:
                    type.__setattr__(cls, key, value)
        return touched


class ReadWatcher(Protocol):
    """Sees every read the restricted unpickler makes, before it gets the bytes.

    Readers are numbered in the order torch creates unpicklers during one load
    (a zip dump has one; a legacy file several), which is the same in every
    process loading the same bytes. :mod:`.isolation` uses this to report how
    far a rehearsal got, and to hold the real load behind it.
    """

    def allow(self, reader: int, start: int, end: int, exact: bool) -> int:
        """How far reader ``reader`` may read from ``start``: ``end`` when ``exact``,
        else anything in ``(start, end]``."""
        ...

    def loaded(self, reader: int) -> None:
        """Reader ``reader`` finished its pickle."""
        ...


class _LoadSession:
    """State of one safe load: resolved globals, placeholders made, warnings counted."""

    def __init__(self, watcher: ReadWatcher | None = None) -> None:
        self.watcher = watcher
        self.readers = 0
        self.last_pickle: Any = None  # what the latest pickle of the file held
        self.legacy_storages: list[tuple[Any, Any]] = []  # (storage key, storage) handed out
        self.dtypes: list[np.dtype] = []  # numpy dtypes the file made, checked after BUILD
        self.warnings: Counter[str] = Counter()
        self.blocked: dict[str, None] = {}  # insertion-ordered set of "module.name"
        self.guard = _ClassGuard()
        self.modified_classes: list[str] = []
        self._resolved: dict[tuple[str, str], object] = {}
        self._placeholders: dict[tuple[str, str], type] = {}
        self._wrapped = _session_wrappers(self)

    def resolve(self, module: str, name: str) -> object:
        """What ``find_class(module, name)`` returns: an allowed object or a placeholder."""
        key = _canonical(module, name)
        if key in self._resolved:
            return self._resolved[key]
        if key in self._wrapped:
            obj = self._wrapped[key]
        elif key in _STATIC_GLOBALS:
            obj = _STATIC_GLOBALS[key]
            if obj in _DATA_ONLY_CLASSES:
                obj = _DataOnlyClass(obj, *key, self)
            elif isinstance(obj, types.FunctionType):
                obj = _forwarder(obj)
            elif _is_mutable_class(obj):
                self.guard.watch(obj)
        else:
            return self.placeholder_class(*key)
        self._resolved[key] = obj
        return obj

    def placeholder_class(self, module: str, name: str) -> type:
        """The (cached) placeholder class for a refused global, recorded as blocked."""
        key = (module, name)
        cls = self._placeholders.get(key)
        if cls is None:
            cls = self._placeholders[key] = _make_placeholder_class(module, name)
        self.blocked[f"{module}.{name}"] = None
        self.warnings["unsafe_global_blocked"] += 1
        return cls

    def blocked_call(self, module: str, name: str, *args: Any) -> Placeholder:
        """Record a refused use of an otherwise allowed function as an inert object."""
        return self.placeholder_class(module, name)(*args)


_REBUILD_V3 = torch._utils._rebuild_tensor_v3


class CheckedArray(np.ndarray):
    """A numpy array the safe loader rebuilt: its pickled state is checked before numpy
    reads it.

    numpy's ``ndarray.__setstate__`` trusts the state it is given: an object
    array whose shape promises more items than its list holds reads pointers
    past the list's end, and the process crashes once they are touched; a
    structured dtype with a field outside its item reads past each element.
    Behaves as an ``ndarray`` otherwise, and pickles as a plain one.
    """

    def __setstate__(self, state: Any) -> None:
        parts = state if isinstance(state, tuple) else ()
        if len(parts) in (4, 5):
            shape, dtype, data = parts[-4], parts[-3], parts[-1]
            _refuse_bad_dtype(dtype)
            if isinstance(dtype, np.dtype) and dtype.hasobject:
                expected = _element_count(shape)
                if not isinstance(data, list) or len(data) != expected:
                    count = len(data) if isinstance(data, list) else type(data).__name__
                    raise pickle.UnpicklingError(
                        f"a numpy object array of {expected} items comes with {count}")
        super().__setstate__(state)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.view(np.ndarray).__reduce_ex__(protocol)


def _element_count(shape: Any) -> int | None:
    """How many items a shape holds, or None when it is not a tuple of sizes."""
    try:
        return math.prod(int(n) for n in shape)
    except (TypeError, ValueError):
        return None
#: ``numpy.dtypes.*DType``: calling one makes a dtype, which must pass the same checks.
_NUMPY_DTYPE_CLASSES = {key: value for key, value in _STATIC_GLOBALS.items()
                        if key[0] == "numpy.dtypes"}


def _check_within_storage(storage: Any, offset: Any, size: Any, stride: Any,
                          dtype: Any) -> None:
    """Refuse a tensor whose elements would lie outside its storage.

    torch checks this for storages read from a zip, but a legacy file can hand
    out an empty storage that ``set_`` then grows without initialising it; a
    tensor over it would show leftover memory. torch's own pickles always fit.
    """
    if isinstance(storage, torch.storage.TypedStorage):
        available = storage._size()  # size() would warn that TypedStorage is deprecated
    elif isinstance(storage, torch.UntypedStorage) and isinstance(dtype, torch.dtype):
        available = storage.nbytes() // torch._utils._element_size(dtype)
    else:
        return  # not a storage: the rebuild itself fails
    try:
        sizes, strides, start = [int(n) for n in size], [int(n) for n in stride], int(offset)
    except (TypeError, ValueError):
        return  # not numbers: the rebuild itself fails
    if len(sizes) != len(strides) or min([start, *sizes, *strides]) < 0:
        return  # torch refuses these itself
    reach = sum((n - 1) * step for n, step in zip(sizes, strides, strict=True))
    extent = 0 if 0 in sizes else start + 1 + reach
    if extent > available:
        raise pickle.UnpicklingError(
            f"a tensor reaches past its storage ({extent} elements, storage has {available})")


def _check_dtypes(session: "_LoadSession") -> None:
    """Refuse numpy dtypes a file built with fields outside their own item size.

    BUILD can give a structured dtype a field at offset 65536 of a 4-byte item;
    reading that field (the widget showing the value) reads whatever memory
    lies there. Arrays and scalars check their dtype as they are made; this
    catches the dtypes left as values.
    """
    for dtype in session.dtypes:
        _refuse_bad_dtype(dtype)


def _refuse_bad_dtype(dtype: Any) -> None:
    """Raise UnpicklingError for a numpy dtype whose fields do not fit in it."""
    problem = _dtype_problem(dtype) if isinstance(dtype, np.dtype) else None
    if problem:
        raise pickle.UnpicklingError(f"a numpy dtype {problem}")


def _dtype_problem(dtype: np.dtype, depth: int = 0) -> str | None:
    """What is wrong with ``dtype``, or None: fields and subarrays must fit in it."""
    if depth > 32:
        return "is nested too deep"
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        if base.itemsize * int(np.prod(shape)) > dtype.itemsize:
            return "has a subarray larger than its item"
        return _dtype_problem(base, depth + 1)
    for described in (dtype.fields or {}).values():
        field_type, offset = described[0], described[1]
        if offset < 0 or offset + field_type.itemsize > dtype.itemsize:
            return "has a field outside its item"
        problem = _dtype_problem(field_type, depth + 1)
        if problem:
            return problem
    return None


def _apply_plain_state(tensor: torch.Tensor, state: Any, session: _LoadSession) -> None:
    """Copy a tensor's pickled Python attributes, but only new public ones.

    Existing attributes (``grad``, ``data``, ``__class__``, hooks...) have setters
    with side effects, so they are never assigned from the file.
    """
    for part in _split_state(state):
        if not isinstance(part, dict):
            continue
        for key, value in part.items():
            fresh = (isinstance(key, str) and key.isidentifier() and not key.startswith("_")
                     and not hasattr(type(tensor), key))
            if fresh:
                tensor.__dict__[key] = value
            else:
                session.warnings["tensor_state_dropped"] += 1


def _session_wrappers(session: _LoadSession) -> dict[tuple[str, str], Callable]:
    """Allowed functions that need checks bound to this load.

    They are closures made per load, so a BUILD that sets attributes on one of
    them touches nothing outside this load.
    """

    def without_hooks(rebuild: Callable) -> Callable:
        def rebuild_tensor(*args: Any) -> torch.Tensor:
            _check_within_storage(*args[:4], args[6] if rebuild is _REBUILD_V3 else None)
            # args[5] is backward_hooks: torch never serialises live hooks, so keep none.
            if len(args) > 5 and not (isinstance(args[5], dict) and not args[5]):
                session.warnings["tensor_hooks_dropped"] += 1
            return rebuild(*args[:5], OrderedDict(), *args[6:])

        return rebuild_tensor

    def rebuild_tensor_v1(storage: Any, offset: Any, size: Any, stride: Any) -> torch.Tensor:
        _check_within_storage(storage, offset, size, stride, None)
        return torch._utils._rebuild_tensor(storage, offset, size, stride)

    def dtype_maker(make: Callable[..., np.dtype]) -> Callable[..., np.dtype]:
        def make_dtype(*args: Any, **kwargs: Any) -> np.dtype:
            dtype = make(*args, **kwargs)
            session.dtypes.append(dtype)  # BUILD sets its state later: checked after the load
            return dtype

        return make_dtype

    def rebuild_parameter(data: Any, requires_grad: Any, _hooks: Any, state: Any = None) -> Any:
        if not isinstance(data, torch.Tensor):
            return session.blocked_call("torch._utils", "_rebuild_parameter", data)
        param = torch.nn.Parameter(data, bool(requires_grad))
        _apply_plain_state(param, state, session)
        return param

    def rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
        new_type = _unwrap(new_type)
        result = func(*args)
        if not isinstance(result, torch.Tensor):
            return result
        if new_type is torch.Tensor or new_type is torch.nn.Parameter:
            result = result if type(result) is new_type else result.as_subclass(new_type)
        else:
            session.warnings["tensor_subclass_dropped"] += 1
        _apply_plain_state(result, state, session)
        return result

    def reconstructor(cls: Any, base: Any, state: Any) -> Any:
        if isinstance(cls, _PlaceholderMeta):
            return cls.__new__(cls) if state is None else cls.__new__(cls, state)
        if isinstance(cls, type) and cls in _ALLOWED_TYPES and base in _ALLOWED_TYPES:
            return copyreg._reconstructor(cls, base, state)
        return session.blocked_call("copyreg", "_reconstructor", cls, base, state)

    def reconstruct(cls: Any, shape: Any, dtype: Any) -> Any:
        # numpy pickles an array as an empty one plus BUILD with its data; a file that
        # asks for a shape and no BUILD would get uninitialised memory, so it gets zeros.
        if _unwrap(cls) is not np.ndarray:
            return session.blocked_call("numpy.core.multiarray", "_reconstruct", cls, shape)
        array = _NUMPY_RECONSTRUCT(np.ndarray, shape, dtype)
        if array.size:
            array = np.zeros(array.shape, array.dtype)
        return array.view(CheckedArray)

    def scalar(dtype: Any, *args: Any) -> Any:
        _refuse_bad_dtype(dtype)
        return _NUMPY_SCALAR(dtype, *args)

    def frombuffer(buffer: Any, dtype: Any, *args: Any) -> Any:
        _refuse_bad_dtype(dtype)
        return _NUMPY_FROMBUFFER(buffer, dtype, *args)

    def encode(*args: Any) -> Any:
        plain = (len(args) == 2 and all(isinstance(a, str) for a in args)
                 and args[1].lower() in _SAFE_ENCODINGS)
        return _codecs.encode(*args) if plain else session.blocked_call("_codecs", "encode", *args)

    def nested_getattr(owner: Any, attr: Any) -> Any:
        # Protocol 2 names Sample.Status as getattr(Sample, "Status"); only that use is served.
        if isinstance(owner, _PlaceholderMeta) and isinstance(attr, str):
            return session.placeholder_class(owner.placeholder_module,
                                             f"{owner.placeholder_name}.{attr}")
        return session.blocked_call("builtins", "getattr", owner, attr)

    return {
        ("torch._utils", "_rebuild_tensor"): rebuild_tensor_v1,
        ("torch._utils", "_rebuild_tensor_v2"): without_hooks(torch._utils._rebuild_tensor_v2),
        ("torch._utils", "_rebuild_tensor_v3"): without_hooks(_REBUILD_V3),
        ("numpy", "dtype"): dtype_maker(np.dtype),
        **{key: dtype_maker(cls) for key, cls in _NUMPY_DTYPE_CLASSES.items()},
        ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): rebuild_parameter,
        ("torch._tensor", "_rebuild_from_type_v2"): rebuild_from_type_v2,
        ("copyreg", "_reconstructor"): reconstructor,
        **{(f"{core}.multiarray", "_reconstruct"): reconstruct for core in _NUMPY_CORES},
        **{(f"{core}.multiarray", "scalar"): scalar for core in _NUMPY_CORES},
        **{(f"{core}.numeric", "_frombuffer"): frombuffer for core in _NUMPY_CORES},
        ("_codecs", "encode"): encode,
        ("builtins", "getattr"): nested_getattr,
    }


class _RestrictedUnpickler(pickle.Unpickler):
    """C unpickler with ``find_class`` replaced and persistent ids screened.

    Every other opcode runs in C, so loading keeps C speed.
    """

    _session: ClassVar[_LoadSession]

    def __init__(self, file: Any, **kwargs: Any) -> None:
        session = self._session
        self._reader = session.readers
        session.readers += 1
        if _seekable(file):
            file = _PrefetchingReader(file, self._reader, session.watcher)
        elif session.watcher is not None:
            raise pickle.UnpicklingError("the guarded load needs a seekable file")
        super().__init__(file, **kwargs)

    def load(self) -> Any:
        result = super().load()
        if self._session.watcher is not None:
            self._session.watcher.loaded(self._reader)
        return result

    def find_class(self, module: str, name: str) -> Any:
        return self._session.resolve(module, name)

    def persistent_load(self, pid: Any) -> Any:
        """Pass storage ids to torch's handler; answer legacy module ids without it.

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
        storage = handler(tuple(_unwrap(part) for part in pid))
        if len(pid) == 6:  # the legacy format's ("storage", type, key, location, size, view)
            self._session.legacy_storages.append((pid[2], storage))
        return storage


def _seekable(file: Any) -> bool:
    seekable = getattr(file, "seekable", None)
    return bool(seekable and seekable() and not hasattr(file, "peek"))


class _PrefetchingReader:
    """A file view with ``peek``, so the C unpickler reads the pickle in large slices.

    Handed a plain file (torch passes a ``BytesIO``), the C unpickler calls
    ``read`` once per opcode argument: 15 million Python calls for a 58 MB dump.
    Given ``peek`` it works from the peeked buffer and only calls ``read`` to
    advance past what it used, which halves the load time. ``peek`` reads ahead
    and seeks back, so the file position always matches what the unpickler
    consumed: torch's legacy format reads tensor data right after the pickle.
    Every read is shown to the session's watcher first.
    """

    _SLICE = 1 << 20

    def __init__(self, file: Any, reader: int, watcher: ReadWatcher | None) -> None:
        self._file = file
        self._reader = reader
        self._watcher = watcher

    def peek(self, size: int = 0) -> bytes:
        start = self._file.tell()
        data = self._file.read(max(size, self._SLICE))
        self._file.seek(start)
        if self._watcher is None or not data:
            return data
        end = self._watcher.allow(self._reader, start, start + len(data), False)
        return data[: end - start]

    def read(self, size: int = -1) -> bytes:
        return self._allowed(self._file.tell(), self._file.read(size))

    def readline(self, size: int = -1) -> bytes:
        return self._allowed(self._file.tell(), self._file.readline(size))

    def readinto(self, buffer: Any) -> int:
        start = self._file.tell()
        count = self._file.readinto(buffer)
        if self._watcher is not None and count:
            self._watcher.allow(self._reader, start, start + count, True)
        return count

    def _allowed(self, start: int, data: bytes) -> bytes:
        """``data`` (read from ``start``) once the watcher lets the unpickler have it."""
        if self._watcher is not None and data:
            self._watcher.allow(self._reader, start, start + len(data), True)
        return data


def _restricted_pickle_module(session: _LoadSession) -> types.SimpleNamespace:
    """The ``pickle_module`` torch.load uses (zip and legacy formats), bound to one load."""
    unpickler = type("RestrictedUnpickler", (_RestrictedUnpickler,), {"_session": session})

    def load(file: Any, **kwargs: Any) -> Any:
        session.last_pickle = unpickler(file, **kwargs).load()
        return session.last_pickle

    return types.SimpleNamespace(__name__=f"{__name__}.restricted_pickle",
                                 Unpickler=unpickler, load=load)


# ---------------------------------------------------------------------------
# Turning placeholders back into plain data.


def _enum_value(obj: Placeholder) -> Any:
    """The scalar an enum-like placeholder stands for, or ``_MISSING``.

    Enum members pickle as ``Class(value)``. Standard-library names are excluded
    so that e.g. a blocked ``subprocess.Popen("cmd")`` is not passed off as a string.
    """
    cls = type(obj)
    single_scalar = (obj._ph_called and len(obj._ph_args) == 1 and not obj._ph_kwargs
                     and obj._ph_state is None and not vars(obj)
                     and isinstance(obj._ph_args[0], _SCALARS))
    class_like = cls.placeholder_name.rsplit(".", 1)[-1][:1].isupper()
    foreign = cls.placeholder_module.split(".")[0] not in sys.stdlib_module_names
    return obj._ph_args[0] if single_scalar and class_like and foreign else _MISSING


def _placeholder_record(obj: Placeholder, memo: dict[int, dict]) -> dict:
    """An object placeholder's fields as a dict, with placeholder field values converted.

    Only chains of placeholders are followed (a Sample's ``status``,
    ``spec_info``...), never plain containers: converting placeholders nested in
    every trace event would mean walking the whole dump in Python. Those stay
    inert Placeholder objects.
    """
    if id(obj) in memo:
        return memo[id(obj)]
    record = memo[id(obj)] = {}
    for key, value in vars(obj).items():
        record[key] = _placeholder_value(value, memo) if isinstance(value, Placeholder) else value
    return record


def _placeholder_value(obj: Placeholder, memo: dict[int, dict]) -> Any:
    """A field's placeholder as data: a dict of fields, an enum's scalar, or itself."""
    if vars(obj):
        return _placeholder_record(obj, memo)
    value = _enum_value(obj)
    return obj if value is _MISSING else value


def _object_record(obj: Any) -> dict:
    """``Sample.to_dict()`` without slime: the object's fields, status as its string value."""
    record = dict(vars(obj))
    status = record.get("status")
    if hasattr(status, "value"):
        record["status"] = status.value
    return record


def _sample_records(items: list) -> tuple[list[dict], Counter]:
    """Plain dict records from the loaded ``samples`` list; counts what was converted or skipped."""
    counts: Counter[str] = Counter()
    memo: dict[int, dict] = {}
    records = []
    for item in items:
        if isinstance(item, Placeholder) and vars(item):
            records.append(_placeholder_record(item, memo))
            counts["placeholder_sample_object"] += 1
        elif isinstance(item, dict):
            records.append(item)
        elif not isinstance(item, Placeholder) and getattr(item, "__dict__", None):
            records.append(_object_record(item))
            counts["object_sample_converted"] += 1
        else:
            counts["sample_not_a_dict"] += 1
    return records, counts


# ---------------------------------------------------------------------------
# Reading files.

_EVAL_NAME = re.compile(r"(?:^|_)eval_(\d+)")
_ROLLOUT_NAME = re.compile(r"rollout_(?:eval_)?(\d+)")
_ZIP_MAGIC = b"PK\x03\x04"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

def _one_line(text: str, limit: int = 240) -> str:
    """Collapse an exception text to one short line for a DumpError message.

    The text can quote the file (torch echoes a bad ``byteorder`` record), so
    control characters are shown escaped: printing the message must not send
    escape sequences to the user's terminal.
    """
    line = " ".join(str(text).split())
    line = line if len(line) <= limit else line[: limit - 3] + "..."
    return line if line.isprintable() else "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in line)


def _read_header(path: str) -> bytes:
    """First bytes of the file after checking it is a readable, non-empty regular file."""
    if not os.path.exists(path):
        raise DumpError(f"{path}: no such file")
    if os.path.isdir(path):
        raise DumpError(f"{path}: is a directory, not a dump file")
    if not os.path.isfile(path):
        raise DumpError(f"{path}: not a regular file")
    try:
        with open(path, "rb") as handle:
            header = handle.read(8)
    except OSError as exc:
        raise DumpError(f"{path}: cannot be read ({_one_line(exc.strerror or exc)})") from exc
    if not header:
        raise DumpError(f"{path}: not a torch dump (zero-byte file)")
    return header


def _zip_names(path: str, source: Any) -> list[str]:
    """Member names of a zip dump; a clear error for a truncated or damaged archive."""
    try:
        with zipfile.ZipFile(source) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        problem = f"corrupt or truncated torch zip archive ({_one_line(exc)})"
        raise DumpError(f"{path}: {problem}") from exc


def _is_torchscript(names: list[str]) -> bool:
    """torch.load hands TorchScript archives to torch.jit.load, which runs their code."""
    return any(name.rsplit("/", 1)[-1] == "constants.pkl" for name in names)


def _is_tar(data: bytes) -> bool:
    """Whether torch.load would read the bytes as its pre-0.4 tar format.

    torch tries that format first for every file that is not a zip, the way
    this does, and extracts members into a temporary folder before unpickling:
    a member that is a symlink makes it open any file on the machine (a FIFO
    or ``/dev/stdin`` never returns). slime never wrote that format.
    """
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:"):
            return True
    except (tarfile.TarError, OSError, ValueError):
        return False


def _load_failure(path: str, header: bytes, exc: BaseException) -> DumpError:
    """A DumpError saying which kind of file torch choked on and why."""
    detail = _one_line(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, MemoryError):
        detail = "MemoryError: it asks for more memory than a file of its size could need"
    if header.startswith(_ZIP_MAGIC):
        problem = "cannot load torch zip archive"
    elif header.startswith(b"\x80"):
        problem = "cannot load legacy torch file"
    else:
        problem = "not a torch dump (unrecognised content)"
    return DumpError(f"{path}: {problem} ({detail})")


def _read_all(path: str) -> bytes:
    """The whole file: the rehearsal and the load must see the same bytes."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise DumpError(f"{path}: cannot be read ({_one_line(exc.strerror or exc)})") from exc


def _load_trusted(path: str, header: bytes) -> tuple[Any, None]:
    """Plain torch.load, which runs any code the file holds."""
    if header.startswith(_ZIP_MAGIC):
        _zip_names(path, path)  # a damaged archive gets the same clear message as a safe load
    return torch.load(path, map_location="cpu", weights_only=False), None


def _clear_unfilled_storages(session: _LoadSession) -> None:
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
            # The untyped view: TypedStorage.fill_ warns that typed storages are deprecated.
            untyped = getattr(storage, "_untyped_storage", storage)
            if hasattr(untyped, "fill_"):
                untyped.fill_(0)


def _load_restricted(path: str, data: bytes,
                     watcher: ReadWatcher | None) -> tuple[Any, _LoadSession]:
    """torch.load of in-memory bytes with the restricted unpickler."""
    if data.startswith(_ZIP_MAGIC):
        if _is_torchscript(_zip_names(path, io.BytesIO(data))):
            raise DumpError(f"{path}: is a TorchScript archive, not a rollout dump (refused)")
    elif _is_tar(data):
        raise DumpError(f"{path}: is a tar archive (torch's pre-0.4 format), not a rollout dump "
                        "(refused)")
    session = _LoadSession(watcher)
    module = _restricted_pickle_module(session)
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False,
                         pickle_module=module)
    finally:
        session.modified_classes = session.guard.restore()
    _clear_unfilled_storages(session)
    _check_dtypes(session)
    if session.modified_classes:
        touched = ", ".join(session.modified_classes)
        raise DumpError(f"{path}: refused: the file tried to modify {touched} (undone)")
    return obj, session


def _rollout_id_from_name(path: str) -> int | None:
    """The id in ``rollout_7.pt`` / ``rollout_eval_3.pt`` / ``eval_3.pt``, if any."""
    stem = os.path.basename(path)
    match = _ROLLOUT_NAME.search(stem) or _EVAL_NAME.search(stem)
    return _rollout_id(match.group(1)) if match else None


def _rollout_id(value: Any) -> int | None:
    """``value`` as a rollout id if it fits the int64 column ids are kept in, else None."""
    return bounded_int(value, _INT64_MIN, _INT64_MAX)


def _unpack(obj: Any, path: str) -> tuple[list, int | None, str]:
    """Split the top-level object into (samples, rollout id, kind) for the known layouts."""
    is_eval = _EVAL_NAME.search(os.path.basename(path)) is not None
    if isinstance(obj, list):
        return obj, _rollout_id_from_name(path), "eval" if is_eval else "list"
    if not isinstance(obj, dict):
        raise DumpError(f"{path}: top-level object is a {type(obj).__name__}, "
                        "expected a dict with 'samples' or a list of samples")
    if "samples" not in obj:
        keys = _one_line(", ".join(repr(short_text(k, 60)) for k in itertools.islice(obj, 8)))
        raise DumpError(f"{path}: top-level dict has no 'samples' key (keys: {keys})")
    samples = obj["samples"]
    if not isinstance(samples, list):
        raise DumpError(f"{path}: 'samples' is a {type(samples).__name__}, expected a list")
    rollout_id = obj.get("rollout_id")
    if isinstance(rollout_id, numbers.Integral) and _rollout_id(rollout_id) is not None:
        rollout_id = int(rollout_id)
    else:
        rollout_id = _rollout_id_from_name(path)
    return samples, rollout_id, "eval" if is_eval else "rollout"


def load_dump(
    path: PathLike,
    *,
    trusted: bool = False,
    isolate: bool = True,
    time_limit: float | None = None,
    memory_limit: int | None = None,
) -> LoadedDump:
    """Load one slime dump into plain sample dicts, without running code from it.

    Accepts ``{"rollout_id": k, "samples": [...]}``, ``{"samples": [Sample, ...]}``
    and bare lists, zip or legacy torch format. Pickled ``Sample`` objects and
    other unknown classes come back as dicts of their fields (see the module
    docstring for the allowlist); refused globals are listed in
    ``blocked_globals``. ``trusted=True`` uses plain ``torch.load`` and so runs any
    code in the file: only for files you produced yourself.

    The safe load is first rehearsed in a child process (``isolate=True``) that
    may use ``time_limit`` CPU seconds (default 10 s plus 1 s per MB) and
    ``memory_limit`` bytes of new memory (default 64 times the file size, at
    least 4 GiB); ``isolate=False`` skips that guard, for platforms that cannot
    start a child process.

    Raises DumpError (one line naming the file) for anything unreadable.
    """
    name = os.fspath(path)
    header = _read_header(name)
    if trusted:
        return _loaded(name, header, _guarded(name, header, _load_trusted, name, header))
    data = _read_all(name)
    if not isolate:
        return load_dump_bytes(name, data)
    with Rehearsal(name, data, time_limit=time_limit, memory_limit=memory_limit) as rehearsal:
        if data.startswith(_ZIP_MAGIC):
            # Opening the archive and inflating data.pkl come before any watched read:
            # wait until the child has got through them to the pickle.
            rehearsal.allow(0, 0, 0, True)
        else:
            # torch reads a legacy file's tensor data after the pickle, unwatched.
            rehearsal.finish()
        loaded = load_dump_bytes(name, data, rehearsal)
        rehearsal.finish()
    return loaded


def load_dump_bytes(name: str, data: bytes, watcher: ReadWatcher | None = None) -> LoadedDump:
    """The safe load of a dump's bytes in this process, with no CPU or memory guard.

    ``name`` is the file name used in messages and for the rollout id. This is
    what an isolated rehearsal runs, and then what :func:`load_dump` runs, with
    ``watcher`` keeping it behind the rehearsal.
    """
    header = data[:8]
    return _loaded(name, header, _guarded(name, header, _load_restricted, name, data, watcher))


def _guarded(name: str, header: bytes, load: Callable[..., tuple[Any, _LoadSession | None]],
             *args: Any) -> tuple[Any, _LoadSession | None]:
    """Run a loader, turning anything it raises into a DumpError naming the file."""
    try:
        return load(*args)
    except DumpError:
        raise
    except Exception as exc:
        raise _load_failure(name, header, exc) from exc


def _loaded(name: str, header: bytes, result: tuple[Any, _LoadSession | None]) -> LoadedDump:
    """The LoadedDump for what torch returned: samples unpacked and made plain dicts."""
    obj, session = result
    samples, rollout_id, kind = _unpack(obj, name)
    try:
        records, counts = _sample_records(samples)
    except Exception as exc:
        raise DumpError(f"{name}: could not read samples ({_one_line(exc)})") from exc
    warnings = counts if session is None else session.warnings + counts
    return LoadedDump(path=name, rollout_id=rollout_id, samples=records, warnings=warnings,
                      kind=kind, blocked_globals=[] if session is None else list(session.blocked),
                      trusted=session is None)


# ---------------------------------------------------------------------------
# Many files.

# Safe loading measured ~25 MB/s on a 2-CPU box (benchmarks/bench_load.py).
_EXPECTED_BYTES_PER_SECOND = 30e6


def _interactive() -> bool:
    """Whether a progress line would be seen: a terminal, or a Jupyter kernel."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty()) or "ipykernel" in sys.modules


def _wants_progress(paths: list[str], progress: bool | None) -> bool:
    """Show progress when forced, or for long loads when someone is watching."""
    if progress is not None:
        return progress
    total = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
    long_load = len(paths) > 3 or total / _EXPECTED_BYTES_PER_SECOND > 1.0
    return long_load and _interactive()


def _terminal_columns(stream: Any) -> int:
    """Columns of the terminal ``stream`` writes to; 0 when it is not a terminal."""
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        pass
    return 0


class _ProgressLine:
    """A single rewritten ``[i/n] name`` line on stderr (no tqdm needed).

    Progress never costs the load: when stderr is missing (``None`` under
    pythonw and some service runners), closed or broken, the line just stops.
    In a terminal the line is kept narrower than the window, because ``\r``
    returns to the start of the last screen row only: a line that wraps would
    leave a copy behind at every update. The name is cut at its start, since
    its end (the rollout number) is what tells files apart.
    """

    def __init__(self) -> None:
        self._stream: Any = sys.stderr
        self._columns = _terminal_columns(self._stream)
        self._width = 0

    def show(self, index: int, total: int, path: str) -> None:
        text = f"[{index}/{total}] "
        name = os.path.basename(path)
        room = self._columns - 1 - len(text)
        if self._columns and len(name) > room:
            name = "…" + name[len(name) - room + 1:] if room > 1 else ""
        text += name
        self._write("\r" + text.ljust(self._width))
        self._width = max(self._width, len(text))

    def close(self) -> None:
        self._write("\n")

    def _write(self, text: str) -> None:
        if self._stream is None:
            return
        try:
            self._stream.write(text)
            self._stream.flush()
        except (AttributeError, OSError, ValueError):
            self._stream = None


def load_dumps(
    paths_or_glob: PathLike | Iterable[PathLike],
    *,
    trusted: bool = False,
    progress: bool | None = None,
    isolate: bool = True,
    time_limit: float | None = None,
    memory_limit: int | None = None,
) -> list[LoadedDump]:
    """Load several dumps: a path, a glob (natural order), or a list of paths/globs.

    A progress line is printed to stderr for long loads in a terminal or notebook;
    ``progress=True/False`` forces it on or off. The other options apply to each
    file as in :func:`load_dump`. Raises DumpError if a glob matches nothing or any
    file is unreadable.
    """
    paths = expand_paths(paths_or_glob)
    line = _ProgressLine() if _wants_progress(paths, progress) else None
    loaded = []
    try:
        for index, path in enumerate(paths, 1):
            if line is not None:
                line.show(index, len(paths), path)
            loaded.append(load_dump(path, trusted=trusted, isolate=isolate,
                                    time_limit=time_limit, memory_limit=memory_limit))
    finally:
        if line is not None:
            line.close()
    return loaded


# ---------------------------------------------------------------------------
# Writing.


def _record_for_save(index: int, sample: Any) -> dict:
    """A sample as slime saves it: dicts as they are, objects via their fields."""
    if isinstance(sample, dict):
        return sample
    if getattr(sample, "__dict__", None) is not None:
        return _object_record(sample)
    raise TypeError(f"sample {index} is a {type(sample).__name__}, not a dict or an object")


def save_dump(path: PathLike, samples: Iterable[Any], *, rollout_id: int | None = None) -> str:
    """Write samples in slime's format, ``{"rollout_id": id, "samples": [dict, ...]}``.

    The file is written next to its destination and renamed into place, so a
    crash never leaves a half-written dump under the final name. Returns the path.
    """
    target = os.fspath(path)
    records = [_record_for_save(i, sample) for i, sample in enumerate(samples)]
    partial = f"{target}.{os.getpid()}.partial"
    try:
        torch.save({"rollout_id": rollout_id, "samples": records}, partial)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return target

