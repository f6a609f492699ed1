"""Nested attribute values (lists and dicts, stored as JSON text) read back exactly as
``values.plain_value`` makes them: NaN and infinities as floats, ints whole up to
``values.MAX_INT_BITS``, strings whole; and the JSON text of one value stays bounded
by the value's own size, however it is shared or nested."""

from __future__ import annotations

import json
import math
from collections import Counter

from slime_trace_widget.tables import attr_columns
from slime_trace_widget.tables.attr_columns import AttrTable
from slime_trace_widget.values import MAX_STRING_CHARS, json_safe, plain_value
from tests.support.same_values import same, same_row

LONG = "é" * (MAX_STRING_CHARS + 5)
NESTED = {"scores": [1.0, math.nan, math.inf, -math.inf, -0.0],
          "big": [2**70, -(2**63) - 1, 2**200],
          "deep": {"x": -math.inf, "y": [{"z": math.nan}]},
          "texts": [LONG, "short"],
          "too_long_to_print": [10**5000]}


def test_nested_values_read_back_as_plain_value_makes_them() -> None:
    rows = [{**NESTED, "top": math.nan}, {"scores": [2.5], "top": 1.0}, None]
    back = AttrTable.from_dicts(rows).dicts()
    assert same_row(back[0], rows[0]) and same_row(back[1], rows[1])
    assert back[2] is None
    assert back[0]["too_long_to_print"] == ["<int of 16610 bits>"]  # as plain_value has it


def test_the_json_text_of_a_column_reads_back_with_python_json() -> None:
    """``attr.<key>`` of a nested key is its JSON text; ``json.loads`` gives the value."""
    table = AttrTable.from_dicts([NESTED])
    for key, value in NESTED.items():
        assert table.is_json(key)
        (text,) = table.column(key).to_pylist()
        assert same(json.loads(text), plain_value(value))


def test_keys_past_the_cap_keep_their_values_exactly(monkeypatch) -> None:
    """``_overflow`` rows hold nested and top-level values as their columns would."""
    monkeypatch.setattr(attr_columns, "MAX_ATTR_COLUMNS", 1)
    rows = [{"kept": 1, "nan": math.nan, "huge": 2**70, "nested": [math.inf, LONG]},
            {"kept": 2}]
    warnings: Counter[str] = Counter()
    table = AttrTable.from_dicts(rows, warnings)
    assert table.keys == ["kept"] and warnings["attr_columns_capped"] == 3
    assert same_row(table.dicts()[0], rows[0])
    assert same_row(AttrTable.concat([table, AttrTable.from_dicts([{"other": [math.nan]}])],
                                     warnings).dicts()[0], rows[0])


def test_a_string_shared_in_many_places_is_cut_and_counted() -> None:
    """A pickle's memo lets one long string stand in many places of one value: written
    out whole that is gigabytes of text. Past ``MAX_REPEATED_CHARS`` characters more
    than the value's own, the value is written as ``json_safe`` cuts it, and counted."""
    shared = "x" * 100_000
    bomb = [shared] * 1000  # 10**8 characters written out, 10**5 held
    repeated = ["y" * 1000] * 100  # well within the allowance: kept whole
    warnings: Counter[str] = Counter()
    back = AttrTable.from_dicts([{"bomb": bomb, "repeated": repeated}], warnings).dicts()
    assert warnings["attr_value_cut"] == 1
    assert back[0]["bomb"] == json_safe(bomb)  # strings cut, 400,000 characters in all
    assert back[0]["repeated"] == repeated


def test_deep_nesting_never_reaches_the_recursion_limit() -> None:
    """A value nested past the interpreter's recursion limit: ``plain_value`` stops at
    its depth bound, so the text is written and read back."""
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    back = AttrTable.from_dicts([{"deep": deep}]).dicts()
    assert same(back[0]["deep"], plain_value(deep))
    assert json.dumps(back[0]["deep"]).endswith('["<list nested too deep>"]' + "]" * 32)
