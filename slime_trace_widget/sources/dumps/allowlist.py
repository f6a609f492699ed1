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


class RefusedState(pickle.UnpicklingError):
    """Pickled state the loader refuses: well formed, but it would have numpy or torch
    read memory the file does not own (a dtype numpy would not build, an object array
    short of items, a tensor past its storage)."""


class CheckedArray(np.ndarray):
    """A numpy array the safe loader rebuilt: its pickled state is checked before numpy
    reads it.

    numpy's ``ndarray.__setstate__`` trusts the state it is given: an object
    array whose shape promises more items than its list holds reads pointers
    past the list's end, and the process crashes once they are touched; a
    structured dtype with a field outside its item reads past each element; a
    dtype whose pickled flags hide its object fields takes the file's bytes as
    object pointers. So every dtype must be the one numpy builds from its
    description, and the array takes numpy's build, not the file's object, which a
    later BUILD could still change (:func:`numpys_dtype`). Behaves as an
    ``ndarray`` otherwise, and pickles as a plain one.
    """

    def __setstate__(self, state: Any) -> None:
        parts = state if isinstance(state, tuple) else ()
        if len(parts) in (4, 5):
            shape, dtype, data = parts[-4], numpys_dtype(parts[-3]), parts[-1]
            if isinstance(dtype, np.dtype) and dtype.hasobject:
                expected = _element_count(shape)
                if not isinstance(data, list) or len(data) != expected:
                    count = len(data) if isinstance(data, list) else type(data).__name__
                    raise RefusedState(
                        f"a numpy object array of {expected} items comes with {count}")
            state = (*parts[:-3], dtype, *parts[-2:])
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
    """Refuse numpy dtypes a file built other than numpy would (:func:`numpys_dtype`).

    BUILD can give a structured dtype a field at offset 65536 of a 4-byte item;
    reading that field (the widget showing the value) reads whatever memory
    lies there; or flags that hide its object fields. Arrays and scalars are made
    with numpy's build of their dtype; this catches the file's dtypes left as values.
    """
    for dtype in dtypes:
        numpys_dtype(dtype)


def numpys_dtype(dtype: Any) -> Any:
    """The dtype numpy builds from ``dtype``'s description, for an array or scalar to
    be made with; RefusedState for a numpy dtype numpy itself would not have made
    (fields or subarrays that do not fit in it, or a state: flags, size, alignment,
    fields, other than that of numpy's build). Anything but a dtype is returned as
    it is, for numpy to refuse.

    A dtype of the file stays open to BUILD after an array is made with it: numpy
    takes a new state on a dtype in use, and an array whose dtype gained an object
    field would read its bytes from the file as object pointers. numpy's build is
    never in the file's reach."""
    if not isinstance(dtype, np.dtype):
        return dtype
    try:
        problem = _dtype_problem(dtype)
        if problem is None:
            return _numpys_twin(dtype, 0)
    except _NotNumpys as exc:
        problem = str(exc)
    except Exception as exc:  # a state numpy's own accessors choke on
        problem = f"cannot be read ({type(exc).__name__}: {exc})"
    raise RefusedState(f"a numpy dtype {problem}")


def _dtype_problem(dtype: np.dtype, depth: int = 0) -> str | None:
    """What is wrong with ``dtype``, or None: fields and subarrays must fit in it."""
    if depth > _MAX_DTYPE_DEPTH:
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


_MAX_DTYPE_DEPTH = 32


class _NotNumpys(Exception):
    """A dtype (or one inside it) differs from the one numpy builds from its description."""


def _numpys_twin(dtype: np.dtype, depth: int) -> np.dtype:
    """The dtype numpy builds from ``dtype``'s description, inner dtypes first; raises
    _NotNumpys where the two differ.

    A dtype's pickled state (its BUILD) sets its flags, size, alignment and fields as
    given, and numpy trusts the flags: ``flags=0`` on a dtype with an object field
    makes ``hasobject`` false, so an array of it takes raw bytes from the file as
    object pointers and the process crashes once one is touched. numpy derives
    those from the fields when it builds a dtype itself, so any difference is a
    crafted state.
    """
    if dtype.isbuiltin == 1:  # numpy's own instance (its state cannot be set)
        return dtype
    if depth > _MAX_DTYPE_DEPTH:
        raise _NotNumpys("is nested too deep")
    if dtype.names is None and dtype.fields is None and dtype.subdtype is None:
        return _leaf_twin(dtype)
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        twin = np.dtype((_numpys_twin(base, depth + 1), shape))
    else:
        twin = np.dtype(dtype.str)
    if dtype.names is not None or dtype.fields is not None:
        twin = _structured_twin(dtype, twin, depth)
    _compare(dtype, twin)
    return twin


#: numpy's build of each plain dtype description seen (``.str``: "<f8", "|O", "<U5"),
#: with what a pickled state can set of it; emptied when it grows past a bound.
_LEAF_TWINS: dict[str, tuple[np.dtype, tuple]] = {}
_LEAF_TWINS_MAX = 4096


def _leaf_twin(dtype: np.dtype) -> np.dtype:
    """:func:`_numpys_twin` of a dtype without fields or subarray, numpy's build of its
    ``.str`` (looked up: the check runs for every numpy scalar of a file)."""
    if dtype.kind == "T":
        options = {"na_object": dtype.na_object} if hasattr(dtype, "na_object") else {}
        twin = type(dtype)(coerce=dtype.coerce, **options)
        _compare(dtype, twin)
        return twin
    text = dtype.str
    known = _LEAF_TWINS.get(text)
    if known is None:
        if len(_LEAF_TWINS) >= _LEAF_TWINS_MAX:
            _LEAF_TWINS.clear()
        twin = np.dtype(text)
        known = _LEAF_TWINS[text] = (twin, _leaf_state(twin))
    if _leaf_state(dtype) != known[1]:
        _compare(dtype, known[0])
    return known[0]


def _leaf_state(dtype: np.dtype) -> tuple:
    return dtype.type, dtype.flags, dtype.itemsize, dtype.alignment


def _structured_twin(dtype: np.dtype, core: np.dtype, depth: int) -> np.dtype:
    """numpy's build of a dtype with fields (a struct, a record, or fields laid over
    ``core``, numpy's union form)."""
    names, fields = dtype.names, dtype.fields
    if names is None or fields is None:
        raise _NotNumpys("has names without fields, or fields without names")
    described = [fields[name] for name in names]
    spec = {"names": list(names),
            "formats": [_numpys_twin(field[0], depth + 1) for field in described],
            "offsets": [field[1] for field in described],
            "titles": [field[2] if len(field) > 2 else None for field in described],
            "itemsize": dtype.itemsize}
    if dtype.kind == "V" and dtype.subdtype is None:
        struct = np.dtype(spec, align=dtype.isalignedstruct)
        return struct if dtype.type is np.void else np.dtype((dtype.type, struct))
    return np.dtype((core, spec))


def _compare(dtype: np.dtype, twin: np.dtype) -> None:
    """Raise _NotNumpys naming what ``dtype`` has that numpy's ``twin`` has not."""
    # Named by .str (and no repr, which runs numpy's Python code on the crafted state).
    for what in ("flags", "itemsize", "alignment", "type", "names", "isalignedstruct"):
        mine, numpys = getattr(dtype, what), getattr(twin, what)
        if mine != numpys:
            hidden = (" (it hides the objects it holds)"
                      if what == "flags" and twin.hasobject and not dtype.hasobject else "")
            if what == "flags":
                mine, numpys = hex(mine), hex(numpys)
            raise _NotNumpys(f"{dtype.str} has {what} {mine} where numpy's own of its "
                             f"description has {numpys}{hidden}")
    if (dtype.fields or {}).keys() != (twin.fields or {}).keys() or dtype != twin:
        raise _NotNumpys(f"{dtype.str} has fields other than numpy's own of its description")


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
        raise RefusedState(
            f"a tensor reaches past its storage ({extent} elements, storage has {available})")
