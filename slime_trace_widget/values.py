"""Turn attribute values from dumps into plain Python data, and plain data into JSON.

Dumps hold whatever user code passed to ``span.set``: numpy scalars, tensors,
NaN/inf, nested dicts, inert placeholders from the safe unpickler. Two
conversions are needed and they are deliberately different:

* :func:`plain_value` runs once while flattening, so that DataFrame columns
  hold values pandas can compare (``spans["attr.x"] > 5`` must not meet a
  tensor). It keeps strings whole and NaN as NaN.
* :func:`json_safe` runs only where data leaves Python (widget messages, HTML
  snapshot, Perfetto JSON): NaN/inf become strings, long strings are cut with
  a visible marker, and depth is bounded.
"""

from __future__ import annotations

import math
from typing import Any

#: Types that need no conversion; checked by identity on the hot path.
PLAIN_TYPES: frozenset[type] = frozenset({str, int, float, bool, type(None)})

#: Arrays up to this many elements become lists; larger ones a short summary.
MAX_ARRAY_ELEMENTS = 1000

#: Longest string kept whole when data leaves Python.
MAX_STRING_CHARS = 100_000

_MAX_DEPTH = 32


def plain_value(value: Any, _depth: int = 0) -> Any:
    """Return ``value`` as plain Python data (scalars, str, list, dict)."""
    kind = type(value)
    if kind in PLAIN_TYPES:
        return value
    if _depth > _MAX_DEPTH:
        return _describe(value)
    if kind is dict:
        return {_plain_key(k): plain_value(v, _depth + 1) for k, v in value.items()}
    if kind in (list, tuple):
        return [plain_value(v, _depth + 1) for v in value]
    return _plain_other(value, _depth)


def plain_attrs(attrs: dict) -> dict:
    """Fast path for an attribute dict: copy only when some value needs converting."""
    for key, value in attrs.items():
        if type(value) not in PLAIN_TYPES or type(key) is not str:
            return {_plain_key(k): plain_value(v, 1) for k, v in attrs.items()}
    return attrs


def _plain_key(key: Any) -> str:
    return key if type(key) is str else str(key)


def _plain_other(value: Any, depth: int) -> Any:
    """Convert numpy/torch values and other objects without importing torch eagerly."""
    if isinstance(value, (bool, int, float, str)):
        # Subclasses (numpy.float64 is a float subclass, IntEnum, str enums).
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value)
        return str(value)
    if isinstance(value, dict):
        return {_plain_key(k): plain_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain_value(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    array_like = _array_to_plain(value, depth)
    if array_like is not _NOT_ARRAY:
        return array_like
    return _describe(value)


_NOT_ARRAY = object()


def _array_to_plain(value: Any, depth: int) -> Any:
    """numpy arrays/scalars and torch tensors: small ones as lists, big ones summarised."""
    shape = getattr(value, "shape", None)
    tolist = getattr(value, "tolist", None)
    if shape is None or not callable(tolist):
        return _NOT_ARRAY
    try:
        size = 1
        for dim in tuple(shape):
            size *= int(dim)
        if size > MAX_ARRAY_ELEMENTS:
            dtype = getattr(value, "dtype", "?")
            return f"<{type(value).__name__} shape={tuple(int(d) for d in shape)} dtype={dtype}>"
        return plain_value(tolist(), depth + 1)
    except Exception:  # a broken __array__ or placeholder must not stop the flattening
        return _describe(value)


def _describe(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 500 else text[:500] + "…"


def json_safe(value: Any, max_chars: int = MAX_STRING_CHARS, _depth: int = 0) -> Any:
    """Return data ``json.dumps(..., allow_nan=False)`` accepts; strings cut to ``max_chars``."""
    kind = type(value)
    if kind is str:
        return truncate(value, max_chars)
    if kind is float:
        return value if math.isfinite(value) else _nonfinite_text(value)
    if kind in (int, bool, type(None)):
        return value
    if _depth > _MAX_DEPTH:
        return "<nested too deep>"
    if kind is dict:
        if _json_ready(value, max_chars):
            return value
        return {
            truncate(_plain_key(k), 1000): json_safe(v, max_chars, _depth + 1)
            for k, v in value.items()
        }
    if kind in (list, tuple):
        return [json_safe(v, max_chars, _depth + 1) for v in value]
    return json_safe(plain_value(value), max_chars, _depth + 1)


def _json_ready(mapping: dict, max_chars: int) -> bool:
    """True when a flat dict is already JSON-safe (the common attrs case): no copy needed."""
    for key, item in mapping.items():
        kind = type(item)
        if type(key) is not str or len(key) > 1000:
            return False
        if kind is str:
            if len(item) > max_chars:
                return False
        elif kind is float:
            if item - item != 0.0:  # NaN and ±inf
                return False
        elif kind not in (int, bool, type(None)):
            return False
    return True


def _nonfinite_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def truncate(text: str, max_chars: int) -> str:
    """Cut ``text`` to ``max_chars`` with a marker that says how much is missing."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}…[truncated {len(text) - max_chars} chars]"
