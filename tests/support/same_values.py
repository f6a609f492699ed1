"""Comparing values read back with the values recorded, exactly: types, NaN, -0.0."""

from __future__ import annotations

import math
from typing import Any

from slime_trace_widget.values import plain_value


def same(got: Any, want: Any) -> bool:
    """Equal values of equal types all the way down, NaN equal to NaN, -0.0 not 0.0,
    dict keys in the same order."""
    if type(got) is not type(want):
        return False
    if type(got) is float:
        return (math.isnan(got) and math.isnan(want)) or \
            (got == want and math.copysign(1.0, got) == math.copysign(1.0, want))
    if type(got) is dict:
        return list(got) == list(want) and all(same(got[key], want[key]) for key in got)
    if type(got) is list:
        return len(got) == len(want) and all(map(same, got, want))
    return got == want


def same_row(got: dict, row: dict) -> bool:
    """A row's attribute dict read back (keys in column order) against ``plain_value`` of
    each of the recorded row's values."""
    return got.keys() == row.keys() and all(same(got[key], plain_value(value))
                                            for key, value in row.items())
