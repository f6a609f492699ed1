"""Turn attribute values from dumps into plain Python data, and plain data into JSON.

Two conversions, deliberately different: :func:`plain_value` runs once while
flattening so DataFrame columns hold comparable values (strings whole, NaN as
NaN); :func:`json_safe` runs only where data leaves Python (widget messages,
snapshot, Perfetto): NaN/inf become strings, long strings are cut with a
visible marker, depth is bounded. Both are bounded by the work they do, not
only by depth (a pickle's memo lets a few bytes stand for 2**40 elements): at
most :data:`MAX_STEPS` steps, and ``json_safe`` keeps at most
:data:`TOTAL_CHARS_FACTOR` times its per-string limit in all. :func:`short_text`
is the same bounded conversion for names, ids and keys.
"""

from __future__ import annotations

import decimal
import json
import math
import numbers
import operator
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import Any

#: Types that need no conversion; checked by identity on the hot path.
PLAIN_TYPES: frozenset[type] = frozenset({str, int, float, bool, type(None)})

#: Arrays up to this many elements become lists; larger ones a short summary.
MAX_ARRAY_ELEMENTS = 1000

#: Longest string kept whole when data leaves Python.
MAX_STRING_CHARS = 100_000

#: Longest ``repr`` kept of an object that is not data (then cut with a marker).
MAX_REPR_CHARS = 500

#: Most container elements one conversion visits (well under a second of work).
MAX_STEPS = 100_000

#: ``json_safe`` keeps at most this many times ``max_chars`` characters per value.
TOTAL_CHARS_FACTOR = 4

#: Longest int kept as a number: ``int.__str__`` refuses more than 4,300 digits,
#: about 14,280 bits, so a longer one becomes :func:`big_int_text`.
MAX_INT_BITS = 14_000

#: Plain types every value of which is kept as it is (an int only up to
#: :data:`MAX_INT_BITS`); checked by identity on the hot path.
PRINTABLE_TYPES: frozenset[type] = PLAIN_TYPES - {int}

_MAX_DEPTH = 32
#: A Decimal with more digits is summarised rather than printed.
_MAX_DECIMAL_DIGITS = 100
_SEQUENCES = (list, tuple, set, frozenset, deque)
#: Copies of a container changing under a subclass's own iteration tried before giving up.
_SNAPSHOT_TRIES = 3
_CONTAINERS = (dict, *_SEQUENCES)
_INT_TYPES = frozenset({int, bool})


class _Budget:
    """What one conversion may still spend; shared by the whole walk of one value."""

    __slots__ = ("chars", "steps")

    def __init__(self, steps: int, chars: int) -> None:
        self.steps = steps
        self.chars = chars


def plain_value(value: Any) -> Any:
    """Return ``value`` as plain Python data (scalars, str, list, dict); an int too long
    to print becomes :func:`big_int_text`, at the top as anywhere inside."""
    kind = type(value)
    if kind in PRINTABLE_TYPES or (kind is int and value.bit_length() <= MAX_INT_BITS):
        return value
    return _plain(value, 0, _Budget(MAX_STEPS, 0))


def json_safe(value: Any, max_chars: int = MAX_STRING_CHARS) -> Any:
    """Return data ``json.dumps(..., allow_nan=False)`` accepts; strings cut to ``max_chars``."""
    return _json(value, max_chars, _Budget(MAX_STEPS, TOTAL_CHARS_FACTOR * max_chars), 0)


def short_text(value: Any, limit: int = 1000) -> str:
    """``str(value)`` for a name, id or key, at most ``limit`` characters.

    Never raises (``str`` of a 5,000-digit int does) and never expands shared
    references (``str`` of a pickled list-of-lists can take forever).
    """
    return _text(value, limit, _Budget(MAX_STEPS, limit))


def bounded_int(value: Any, low: int, high: int) -> int | None:
    """``int(value)`` when that is a whole number in ``[low, high]``, else None.

    Accepts what ``int()`` does (ints, numpy and tensor scalars, floats, numeric
    text) but never raises and never calls ``int`` on a Decimal, which computes
    every digit: ``int(Decimal("1e999999999"))`` does not return. Bounds keep
    the value inside the integer columns it is stored in.
    """
    if value is None or isinstance(value, bool):
        return None
    try:
        if isinstance(value, (str, bytes)):
            number = int(value) if len(value) <= 100 else None
        else:
            try:
                number = operator.index(value)
            except TypeError:
                real = float(value)
                number = int(real) if math.isfinite(real) and real.is_integer() else None
    except Exception:  # whatever a damaged field holds: text, lists, tensors of many elements
        return None
    return number if number is not None and low <= number <= high else None


def truncate(text: str, max_chars: int) -> str:
    """Cut ``text`` to ``max_chars`` with a marker that says how much is missing.

    Every string that leaves Python passes here, so it also makes the text
    encodable (see :func:`clean_text`).
    """
    text = clean_text(text)
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}…[truncated {len(text) - max_chars} chars]"


#: Every C0 control character but tab, DEL and every C1 control character, as ``\xNN``.
_LINE_BREAKING = str.maketrans({code: f"\\x{code:02x}"
                                for code in (*range(0x20), *range(0x7F, 0xA0))
                                if code != 0x09})


def plain_line(text: str) -> str:
    """``text`` with each control character but tab written as ``\\xNN``: one line of
    plain text on any terminal, whatever a dump or a file's name put in it (a newline
    cannot start a line of its own, an escape sequence cannot act)."""
    return text.translate(_LINE_BREAKING)


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (split pairs rejoined).

    Pickles keep lone surrogates (``"\\ud800"``), but UTF-8 cannot encode them:
    Arrow-backed pandas strings, JSON for the browser and the kernel's
    messages all fail on them. ASCII text, nearly every name and id, returns
    at the cost of one scan.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


# --------------------------------------------------------------------------- plain data


def _plain(value: Any, depth: int, budget: _Budget) -> Any:
    kind = type(value)
    if kind in PRINTABLE_TYPES:
        return value
    if kind is int:
        return _printable_int(value)
    if depth > _MAX_DEPTH:
        return f"<{kind.__name__} nested too deep>"
    if kind is list or kind is tuple:
        flat = value[:budget.steps + 1]  # one step in C: another thread's change is before or after
        if len(flat) <= budget.steps:
            types = set(map(type, flat))
            if _all_plain(flat, types):
                budget.steps -= len(flat)  # a flat list (token ids): what the walk gives, in C
                return flat if kind is list else list(flat)
            numbers = _numpy_numbers(flat, types) if len(flat) < budget.steps else None
            if numbers is not None:  # list(array)'s items: what the walk gives, one call each
                budget.steps -= len(flat)
                return numbers
    if isinstance(value, _CONTAINERS):
        return _each_item(value, budget, lambda item: _plain(item, depth + 1, budget))
    return _plain_scalar(value, depth, budget)


def _printable_int(value: int) -> int | str:
    """``value`` itself, or :func:`big_int_text` when it is too long to print."""
    return value if value.bit_length() <= MAX_INT_BITS else big_int_text(value)


def _all_plain(flat: list | tuple, types: set[type]) -> bool:
    """Whether every item of ``flat`` is a str, int, float, bool or None that the walk
    would give back as it is (no int too long to print): in C for a list without ints
    and, one pass more, for a list of ints alone (token ids); an int among other types
    is measured in Python. ``types``: the types of its items."""
    if int not in types:
        return PLAIN_TYPES.issuperset(types)
    if types <= _INT_TYPES:
        return max(map(int.bit_length, flat)) <= MAX_INT_BITS
    return PLAIN_TYPES.issuperset(types) and all(
        item.bit_length() <= MAX_INT_BITS for item in flat if type(item) is int)


def _numpy_numbers(flat: list | tuple, kinds: set[type]) -> list | None:
    """``flat`` as Python numbers when every item is a numpy bool, integer or float
    scalar of at most 64 bits (the items of ``list(array)``; ``kinds``, their types),
    each as the walk gives it (``tolist``); else None. The walk took microseconds per
    item, through the array path, for each of a recorded list's thousands."""
    if not flat:
        return None
    for kind in kinds:
        known = _NUMPY_NUMBERS.get(kind)
        if known is None:
            known = _NUMPY_NUMBERS[kind] = _is_numpy_number(kind)
        if not known:
            return None
    if len(kinds) == 1:  # one dtype: an array of it holds each value exactly
        return sys.modules["numpy"].array(flat, dtype=next(iter(kinds))).tolist()
    return [item.item() for item in flat]


#: Whether each type met in a list is a numpy number :func:`_numpy_numbers` converts.
_NUMPY_NUMBERS: dict[type, bool] = {}


def _is_numpy_number(kind: type) -> bool:
    """Whether ``kind`` is a numpy scalar type of a bool, integer or float of at most 64
    bits (``item`` gives a Python bool, int or float; a longdouble's gives itself)."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not issubclass(kind, numpy.generic):
        return False
    try:
        dtype = numpy.dtype(kind)
    except TypeError:
        return False
    return dtype.kind in "biuf" and dtype.itemsize <= 8


def _each_item(container: Any, budget: _Budget, convert: Callable[[Any], Any]) -> dict | list:
    """A dict (keys made text) or a sequence (as a list) with ``convert`` applied to each
    item, until ``budget`` runs out of steps; a last item, the marker, then says how
    much was left out (``"…[N more items]"``; in a dict the key ``"…"``, ``"[N more keys]"``).

    Each item costs a step and so does the marker: the container holds a step back
    for its marker until its last item, and an item that is not a str, int, float,
    bool or None needs a second step free, for a marker of its own. So the output,
    marker included, costs no more steps than its walk had, and walking it again
    with the same budget (a reader walks a recorded value again) gives it back
    unchanged. Shared by the plain-data and the JSON walkers, which differ only in
    ``convert``.
    """
    is_dict = isinstance(container, dict)
    size, entries = _snapshot(container, is_dict, max(budget.steps, 0) + 1)
    out: dict[str, Any] | list[Any] = {} if is_dict else []
    if not size:
        return out
    last = size - 1
    repeats: dict[tuple[str, str], int] | None = None
    budget.steps -= 1  # the marker's step
    for position, entry in enumerate(entries):
        item = entry[1] if is_dict else entry
        if position == last:
            budget.steps += 1  # nothing follows the last item: no marker
        if budget.steps < (1 if type(item) in PLAIN_TYPES else 2):
            if position == last:
                budget.steps -= 1
            if is_dict:
                out["…"] = f"[{size - position} more keys]"
            else:
                out.append(f"…[{size - position} more items]")
            return out
        budget.steps -= 1
        if is_dict:
            key = _text(entry[0], 1000, budget)
            if key in out:
                repeats = {} if repeats is None else repeats
                key = distinct_key(out, key, entry[0], repeats)
            out[key] = convert(item)
        else:
            out.append(convert(item))
    return out


def distinct_key(taken: Mapping[str, Any], text: str, key: Any,
                 repeats: dict[tuple[str, str], int]) -> str:
    """A text key for ``key``, whose text ``text`` another key of the same dict already
    has (``1`` and ``"1"``): ``"1 (str)"``, then ``"1 (str 2)"`` and so on, the
    type being ``key``'s. ``repeats`` (one per dict) remembers how far each text and
    type got, so many keys of one text cost no more than one each.
    """
    kind = type(key).__name__
    count = repeats.get((text, kind), 0)
    while True:
        count += 1
        candidate = f"{text} ({kind})" if count == 1 else f"{text} ({kind} {count})"
        if candidate not in taken:
            repeats[text, kind] = count
            return candidate


def _snapshot(container: Any, is_dict: bool, most: int) -> tuple[int, Sequence[Any]]:
    """The size of ``container`` and its first ``most`` items (a dict's as pairs), copied
    at once so that another thread changing it meanwhile cannot break the walk.

    Copying a builtin list, tuple, dict, set or deque runs in C without giving up the
    GIL, so it sees the container before or after another thread's change, never
    during one. A subclass whose iteration runs Python code can still change under
    it: that copy is tried again (a container changing all the while raises).
    """
    for attempt in range(_SNAPSHOT_TRIES):
        try:
            entries = list(islice(container.items() if is_dict else container, most))
            break
        except RuntimeError:  # "changed size during iteration"
            if attempt == _SNAPSHOT_TRIES - 1:
                raise
    size = len(entries) if len(entries) < most else max(len(container), len(entries))
    return size, entries


def _plain_scalar(value: Any, depth: int, budget: _Budget) -> Any:
    """Scalar subclasses, bytes, numpy/torch values and other objects."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):  # IntEnum and other int subclasses
        return _printable_int(int(value))
    if isinstance(value, float):  # numpy.float64 is a float subclass
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, _array_types()):
        return _array_to_plain(value, depth, budget)
    return describe(value)


def _array_types() -> tuple[type, ...]:
    """numpy and torch array types, from modules already imported (never imports them).

    Only real arrays are read through ``shape``/``tolist``: a placeholder from
    the safe loader can carry planted attributes of those names.
    """
    found: list[type] = []
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        found += [numpy.ndarray, numpy.generic]
    torch = sys.modules.get("torch")
    if torch is not None:
        found.append(torch.Tensor)
    return tuple(found)


def _array_to_plain(value: Any, depth: int, budget: _Budget) -> Any:
    """numpy arrays/scalars and torch tensors: small ones as lists, big ones summarised.

    A tensor whose data is not plainly in this process's memory is summarised
    whatever its size, its data never touched: one on a GPU (reading it waits for
    the device, and breaks a CUDA graph being captured), on the meta device, not
    strided (sparse), or of a subclass (a DTensor's ``tolist`` can start a
    collective). The summary then names the device (and a layout not strided).
    """
    try:
        shape = tuple(int(d) for d in value.shape)
        placement = _unreadable_placement(value)
        if placement is not None:
            return f"<{type(value).__name__} shape={shape} dtype={value.dtype} {placement}>"
        if math.prod(shape) > MAX_ARRAY_ELEMENTS:
            return f"<{type(value).__name__} shape={shape} dtype={value.dtype}>"
        plain = value.tolist()
        if isinstance(plain, _array_types()):  # longdouble, clongdouble: tolist gives it back
            plain = complex(plain) if isinstance(plain, numbers.Complex) and not \
                isinstance(plain, numbers.Real) else float(plain)
        return _plain(plain, depth + 1, budget)
    except Exception:  # an odd tensor (meta, sparse) must not stop the flattening
        return describe(value)


def _unreadable_placement(value: Any) -> str | None:
    """None when ``value``'s data may be read (numpy, a strided CPU tensor or
    Parameter), else where it is, ``"device=cuda:0"``, read from metadata only."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return None
    if type(value) in (torch.Tensor, torch.nn.Parameter) and value.device.type == "cpu" \
            and value.layout == torch.strided:
        return None
    if value.layout == torch.strided:
        return f"device={value.device}"
    return f"device={value.device} layout={value.layout}"


def describe(value: Any) -> str:
    """A short repr, at most :data:`MAX_REPR_CHARS` characters and a marker (the one
    rule for objects that are not data, when read and when recorded); reprs that
    could be huge or slow to build are summarised instead, and a repr that fails
    becomes ``"<TypeName>"``."""
    if isinstance(value, slice) and not all(type(part) in PLAIN_TYPES for part in
                                            (value.start, value.stop, value.step)):
        return "<slice>"
    if isinstance(value, decimal.Decimal):
        digits = len(value.as_tuple().digits)
        if digits > _MAX_DECIMAL_DIGITS:
            return f"<Decimal of {digits} digits>"
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return truncate(text, MAX_REPR_CHARS)


#: The largest int a browser reads back exactly from JSON (``Number.MAX_SAFE_INTEGER``).
MAX_SAFE_INT = 2**53 - 1


def exact_in_browser(value: Any) -> Any:
    """JSON-ready ``value`` (what :func:`json_safe` gives) with every int past
    ±:data:`MAX_SAFE_INT` written as its decimal text, inside containers too: a
    browser reads a JSON number as a double, so a seed or an id of 64 bits would
    show there with other digits. Containers are copied only where they hold one."""
    kind = type(value)
    if kind is int:
        return str(value) if abs(value) > MAX_SAFE_INT else value
    if kind is dict:
        items = {key: exact_in_browser(item) for key, item in value.items()}
        return value if all(items[key] is item for key, item in value.items()) else items
    if kind is list:
        values = [exact_in_browser(item) for item in value]
        return value if all(new is old for new, old in zip(values, value, strict=True)) \
            else values
    return value


def big_int_text(value: int) -> str:
    """What an int longer than :data:`MAX_INT_BITS` reads as, wherever it is."""
    return f"<int of {value.bit_length()} bits>"


def _text(value: Any, limit: int, budget: _Budget) -> str:
    """One string for ``value``; its steps come out of ``budget``, its characters do not
    (a key or a name has its own ``limit``)."""
    kind = type(value)
    if kind is str:
        return truncate(value, limit)
    if kind is int and value.bit_length() > MAX_INT_BITS:
        return big_int_text(value)
    if kind in PLAIN_TYPES:
        return str(value)
    inner = _Budget(budget.steps, limit)
    safe = _json(value, limit, inner, 0)
    budget.steps = max(inner.steps, 0)  # a key's text is not walked again
    return truncate(safe if type(safe) is str else json.dumps(safe, ensure_ascii=False), limit)


# --------------------------------------------------------------------------- JSON


def _json(value: Any, max_chars: int, budget: _Budget, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        keep = min(max_chars, max(budget.chars, 0))
        budget.chars -= min(len(value), keep)
        return truncate(value, keep)
    if kind is float:
        return value if math.isfinite(value) else _nonfinite_text(value)
    if kind is int:
        return _printable_int(value)
    if kind is bool or value is None:
        return value
    if depth > _MAX_DEPTH:
        return "<nested too deep>"
    if kind is dict and _json_ready(value, max_chars, budget):
        return value
    if isinstance(value, _CONTAINERS):
        return _each_item(value, budget, lambda item: _json(item, max_chars, budget, depth + 1))
    # The walk of the plain data charges its steps, once: as plain_value would.
    plain = _plain_scalar(value, depth, _Budget(budget.steps, 0))
    return _json(plain, max_chars, budget, depth + 1)


def _json_ready(mapping: dict, max_chars: int, budget: _Budget) -> bool:
    """True when a flat dict is already JSON-safe (the common attrs case): no copy needed.

    Its size is charged to ``budget``, so a dict reused across a value still
    counts each time it appears.
    """
    chars = 0
    for key, item in mapping.items():
        kind = type(item)
        if type(key) is not str or len(key) > 1000 or clean_text(key) is not key:
            return False
        chars += len(key)
        if kind is str:
            if len(item) > max_chars or (not item.isascii() and clean_text(item) is not item):
                return False
            chars += len(item)
        elif kind is float:
            if item - item != 0.0:  # NaN and ±inf
                return False
        elif kind is int:
            if item.bit_length() > MAX_INT_BITS:
                return False
        elif kind is not bool and item is not None:
            return False
    if len(mapping) > budget.steps or chars > budget.chars:
        return False
    budget.steps -= len(mapping)
    budget.chars -= chars
    return True


def _nonfinite_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
