"""What the safe unpickler may resolve a global to, and the checks on numpy data.

Only names in these tables resolve to real objects; everything else becomes a
placeholder (:mod:`.placeholders`). The tables hold data constructors only
(builtins, containers, dates, numpy arrays and dtypes). Tensors are served by
one of two extensions: :mod:`.torch_tensors` (real torch tensors, for
``load_dump``) or :mod:`.plain_tensors` (numpy arrays, no torch import, for the
frames worker). ``docs/loader-safety.md`` explains why each entry is safe.
"""

from __future__ import annotations

import builtins
import collections
import datetime
import decimal
import math
import pickle
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .python2_names import python3_name

if TYPE_CHECKING:
    from .placeholders import Placeholder


class BlockedCalls(Protocol):
    """What a stand-in needs of the load session: turning a refused call into a placeholder."""

    def blocked_call(self, module: str, name: str, *args: Any) -> Placeholder: ...

_TORCH_MODULE_ALIASES = {"torch.tensor": "torch._tensor"}
_BUILTIN_NAMES = (
    "set", "frozenset", "complex", "slice", "range", "bytearray", "bytes", "int", "float",
    "str", "bool", "tuple", "list", "dict", "object", "Ellipsis", "NotImplemented",
)
SAFE_ENCODINGS = frozenset({"latin1", "latin-1", "iso-8859-1", "iso8859-1", "utf-8", "utf8",
                            "ascii"})


def canonical(module: str, name: str) -> tuple[str, str]:
    """Map Python 2 names (:mod:`.python2_names`) and old torch paths to today's, so
    allowlist entries and blocked names read as Python 3 names (``commands.Popen`` is
    ``subprocess.Popen``)."""
    module, name = python3_name(module, name)
    return _TORCH_MODULE_ALIASES.get(module, module), name


# numpy's pickle helpers, found from numpy's own reductions so no shim is imported.
# Files reach them only through the checking wrappers in _session_wrappers, under
# both module names numpy has used.
NUMPY_CORES = ("numpy.core", "numpy._core")
NUMPY_RECONSTRUCT = np.zeros(1).__reduce__()[0]
NUMPY_SCALAR = np.float64(0).__reduce__()[0]
NUMPY_FROMBUFFER = np.zeros(1).__reduce_ex__(5)[0]


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
    return table


STATIC_GLOBALS = _static_globals()


def forwarder(function: Callable) -> Callable:
    """A fresh function calling ``function``: BUILD may scribble on it, not on the original."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return forward


class DataOnlyClass:
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

    def __init__(self, cls: type, module: str, name: str, session: BlockedCalls) -> None:
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


def unwrap(value: Any) -> Any:
    """The real class behind a DataOnlyClass stand-in; anything else as it is."""
    return value.cls if isinstance(value, DataOnlyClass) else value


_MISSING = object()
_CLASS_SPECIALS = ("__class__", "__bases__", "__name__", "__qualname__")


def _same_special(now: object, before: object) -> bool:
    """Whether a class's special attribute is as it was: the same object, or (for its
    names, which a C class makes anew on each read) an exact ``str`` of the same text.
    An equal text of another type (numpy's ``str_``) is a change."""
    return now is before or (type(now) is str and type(before) is str and now == before)


class ClassGuard:
    """Snapshots allowed classes so a load that alters them can be undone and refused.

    Every class is watched: one written in Python (``uuid.UUID``, ``Counter``) is
    open to a BUILD's setattr, and one written in C is left as it was, which the
    comparison then finds.

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
            changed = [k for k, v in specials.items() if not _same_special(getattr(cls, k), v)]
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
            refuse_bad_dtype(dtype)
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
def check_dtypes(dtypes: Iterable[Any]) -> None:
    """Refuse numpy dtypes a file built with fields outside their own item size.

    BUILD can give a structured dtype a field at offset 65536 of a 4-byte item;
    reading that field (the widget showing the value) reads whatever memory
    lies there. Arrays and scalars check their dtype as they are made; this
    catches the dtypes left as values.
    """
    for dtype in dtypes:
        refuse_bad_dtype(dtype)


def refuse_bad_dtype(dtype: Any) -> None:
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


#: ``numpy.dtypes.*DType``: calling one makes a dtype, which must pass the same checks.
NUMPY_DTYPE_CLASSES = {key: value for key, value in STATIC_GLOBALS.items()
                        if key[0] == "numpy.dtypes"}




def tensor_extent(offset: Any, size: Any, stride: Any) -> int | None:
    """Elements of storage a strided tensor reaches (0 when empty), or None when the
    numbers are not a valid layout (the rebuild then refuses them itself)."""
    try:
        sizes, strides, start = [int(n) for n in size], [int(n) for n in stride], int(offset)
    except (TypeError, ValueError):
        return None
    if len(sizes) != len(strides) or min([start, *sizes, *strides]) < 0:
        return None
    if 0 in sizes:
        return 0
    return start + 1 + sum((n - 1) * step for n, step in zip(sizes, strides, strict=True))


def refuse_past_storage(extent: int | None, available: int) -> None:
    """Raise UnpicklingError when a tensor would read past the end of its storage:
    torch's own pickles always fit, and what lies beyond is leftover memory."""
    if extent is not None and extent > available:
        raise pickle.UnpicklingError(
            f"a tensor reaches past its storage ({extent} elements, storage has {available})")
