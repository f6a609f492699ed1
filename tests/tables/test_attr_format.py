"""The JSON text of attribute values (``attr_format.exact_json``): what Python's
``json`` reads back as the value, bounded by the value's own size."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from slime_trace_widget.tables.attr_format import MAX_REPEATED_CHARS, exact_json, repeated_chars
from slime_trace_widget.values import MAX_STRING_CHARS
from tests.support.same_values import same


@pytest.mark.parametrize("value", [[math.nan, -0.0], {"x": -math.inf}, [2**70, -(2**200)],
                                   ["é" * (MAX_STRING_CHARS + 5)], "top", 1.5])
def test_exact_json_is_what_python_json_reads_back(value: Any) -> None:
    text = exact_json(value)
    assert text is not None and same(json.loads(text), value)


def test_repeated_chars_counts_what_writing_out_adds() -> None:
    text = "z" * 10
    assert repeated_chars([text, "other"]) == 0
    assert repeated_chars([text, text, {"k": text, "l": [text]}]) == 30
    assert repeated_chars({"a": [[["w" * 7]]], "b": 1.5}) == 0
    assert exact_json([text] * (MAX_REPEATED_CHARS // 10 + 2)) is None


def test_a_value_nested_past_the_recursion_limit_is_refused_not_raised() -> None:
    """``plain_value`` bounds the depth of what reaches the encoder; given a value
    without that bound, the encoder refuses it (the caller then writes ``json_safe``)."""
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert exact_json(deep) is None


def test_a_list_held_twice_is_refused_without_walking_it_out() -> None:
    """Plain data is a tree; a value sharing its lists (2**60 leaves in 60 lists) or
    holding itself is not, and writing it out would never end."""
    shared: list = [0]
    for _ in range(60):
        shared = [shared, shared]
    cyclic: list = []
    cyclic.append(cyclic)
    assert repeated_chars(shared) is None and exact_json(shared) is None
    assert repeated_chars(cyclic) is None and exact_json(cyclic) is None
    assert repeated_chars([[1], [1]]) == 0
