"""Inert stand-ins for every global the safe unpickler refuses, and their conversion to data.

A refused class or function becomes a read-only :class:`Placeholder` subclass:
creating, calling or restoring state on it only records what was asked. After
a load, samples that are placeholders (a pickled ``Sample``) become the dicts
of their fields, as ``Sample.to_dict()`` would give.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any, ClassVar

__all__ = ["Placeholder", "PlaceholderMeta", "make_placeholder_class", "object_record",
           "sample_records", "split_state"]



class PlaceholderMeta(type):
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


class Placeholder(metaclass=PlaceholderMeta):
    """Stand-in for an object whose class or function the safe loader refused.

    Creating, calling or restoring state on it only records what was asked,
    so a hostile pickle has nothing to execute. Fields restored by BUILD live in
    ``__dict__`` (readable as attributes); how it was made is kept in
    ``placeholder_args`` / ``placeholder_kwargs`` / ``placeholder_state``.
    """

    __slots__ = ("__dict__", "_ph_args", "_ph_called", "_ph_kwargs", "_ph_state")
    placeholder_module: ClassVar[str] = ""
    placeholder_name: ClassVar[str] = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> Placeholder:
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

    def __call__(self, *args: Any, **kwargs: Any) -> Placeholder:
        """Calling a placeholder object yields another inert record, never an error."""
        return type(self)(*args, **kwargs)

    def __setstate__(self, state: Any) -> None:
        dict_state, slot_state = split_state(state)
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


def split_state(state: Any) -> tuple[Any, dict | None]:
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
_MISSING = object()


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


def make_placeholder_class(module: str, name: str) -> type:
    """A fresh read-only Placeholder subclass standing in for ``module.name``."""
    return PlaceholderMeta(
        "Placeholder",
        (Placeholder,),
        {
            "__slots__": (),
            "__module__": "slime_trace_widget.sources.dumps.placeholders",
            # No real source defines this qualname, so inspect-based code finds nothing.
            "__qualname__": f"<placeholder {module}.{name}>",
            "placeholder_module": module,
            "placeholder_name": name,
        },
    )


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


def object_record(obj: Any) -> dict:
    """``Sample.to_dict()`` without slime: the object's fields, status as its string value."""
    record = dict(vars(obj))
    status = record.get("status")
    if hasattr(status, "value"):
        record["status"] = status.value
    return record


def _with_status_value(record: dict) -> dict:
    """A sample dict with a ``status`` that is an enum's placeholder (``Sample.Status``
    kept in the dict: ``dataclasses.asdict(sample)``, say) as a copy holding the enum's
    value, as ``Sample.to_dict()`` writes it and a trusted load's status column reads
    it; any other dict as it is."""
    status = record.get("status")
    if not isinstance(status, Placeholder):
        return record
    value = _enum_value(status)
    return record if value is _MISSING else {**record, "status": value}


def sample_records(items: list) -> tuple[list[dict], Counter]:
    """Plain dict records from the loaded ``samples`` list; counts what was converted or skipped."""
    counts: Counter[str] = Counter()
    memo: dict[int, dict] = {}
    records = []
    for item in items:
        if isinstance(item, Placeholder) and vars(item):
            records.append(_placeholder_record(item, memo))
            counts["placeholder_sample_object"] += 1
        elif isinstance(item, dict):
            records.append(_with_status_value(item))
        elif not isinstance(item, Placeholder) and getattr(item, "__dict__", None):
            records.append(object_record(item))
            counts["object_sample_converted"] += 1
        else:
            counts["sample_not_a_dict"] += 1
    return records, counts

