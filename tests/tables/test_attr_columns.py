"""Attributes as typed Arrow columns, and back to the dicts they came from."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch

from slime_trace_widget.frames import attr_frames
from slime_trace_widget.frames.attr_frames import merged_attr_frame
from slime_trace_widget.tables import attr_columns, attr_grouping, attr_python
from slime_trace_widget.tables.attr_columns import AttrTable

ROWS = [
    {"turn": 1, "tool": "python", "ok": True, "latency": 0.5},
    None,
    {"turn": 2, "latency": 1, "reason": None},
    {"nested": {"hits": [1, 2]}, "mixed": 1},
    {"mixed": "text", "tool": "search", "huge": 2**70},
    {},
    {"np": np.float32(1.5), "t": torch.tensor([1, 2]), "odd": "\ud800x", "nan": math.nan},
]


def test_columns_are_typed() -> None:
    table = AttrTable.from_dicts(ROWS).table
    types = {field.name: field.type for field in table.schema}
    assert types["turn"] == pa.int64() and types["latency"] == pa.float64()
    assert types["ok"] == pa.bool_() and types["tool"] == pa.string()
    assert types["mixed"] == pa.string() and types["huge"] == pa.string()
    assert types["np"] == pa.float64() and types["nested"] == pa.string()


def test_an_int_too_long_to_print_reads_as_it_does_nested() -> None:
    """``str`` of an int over 4,300 digits raises: a dump holding one at the top level
    of its attributes could not be read at all."""
    huge = 10**5000
    back = AttrTable.from_dicts([{"v": huge, "w": huge}, {"v": 2**70, "w": "text"},
                                 {"v": [huge]}]).dicts()
    assert back == [{"v": "<int of 16610 bits>", "w": "<int of 16610 bits>"},
                    {"v": 2**70, "w": "text"}, {"v": ["<int of 16610 bits>"]}]


def test_dicts_come_back_with_nones_nesting_and_cleaned_text() -> None:
    back = AttrTable.from_dicts(ROWS).dicts()
    assert back[0] == {"turn": 1, "tool": "python", "ok": True, "latency": 0.5}
    assert back[1] is None and back[5] is None
    assert back[2] == {"turn": 2, "latency": 1.0, "reason": None}
    assert back[3] == {"nested": {"hits": [1, 2]}, "mixed": "1"}
    assert back[4] == {"mixed": "text", "tool": "search", "huge": str(2**70)}
    assert back[6]["np"] == 1.5 and back[6]["t"] == [1, 2] and back[6]["odd"] == "\ufffdx"
    assert math.isnan(back[6]["nan"])
    assert AttrTable.from_dicts(ROWS).rows([4, 0]) == [back[4], back[0]]


def test_keys_past_the_cap_travel_per_row(monkeypatch) -> None:
    monkeypatch.setattr(attr_columns, "MAX_ATTR_COLUMNS", 2)
    warnings: Counter[str] = Counter()
    rows = [{"a": 1, "b": 2, "c": 3}, {"a": 4, "d": "x"}]
    table = AttrTable.from_dicts(rows, warnings)
    assert table.keys == ["a", "b"] and warnings["attr_columns_capped"] == 2
    assert table.dicts() == rows


def test_non_text_keys_become_text() -> None:
    rows = [{1: "one", (2, 3): "pair"}]
    assert AttrTable.from_dicts(rows).dicts() == [{"1": "one", "[2, 3]": "pair"}]


def test_rows_whose_keys_become_text_join_the_rows_already_keyed_so() -> None:
    """A row keyed by 1 reads as one keyed by "1": its values land in that group's
    columns, in row order, and each column's type is that of every value in it."""
    rows = [{"1": 1.5, "a": "x"}, {1: 2, "a": "y"}, None, {"1": 3, "a": None}]
    table = AttrTable.from_dicts(rows)
    assert table.table.schema.field("1").type == pa.float64()
    assert table.column("1").to_pylist() == [1.5, 2.0, None, 3.0]
    assert table.column("a").to_pylist() == ["x", "y", None, None]
    assert table.explicit_nones() == {3: ["a"]}


def test_concat_promotes_numbers_and_falls_back_to_text() -> None:
    first = AttrTable.from_dicts([{"x": 1, "y": 1}])
    second = AttrTable.from_dicts([{"x": 2.5, "y": "two"}, None])
    joined = AttrTable.concat([first, second])
    assert joined.table.schema.field("x").type == pa.float64()
    assert joined.table.schema.field("y").type == pa.string()
    assert joined.dicts() == [{"x": 1.0, "y": "1"}, {"x": 2.5, "y": "two"}, None]


def test_concat_holds_the_cap_over_all_parts(monkeypatch) -> None:
    """Parts whose keys differ: the most frequent keys keep their columns (the first
    seen of equally frequent ones), the others travel per row with the overflow a
    part already had, and every dict comes back as it was."""
    first = AttrTable.from_dicts([{"common": 1, "a": "x", "nested": {"n": [1, 2]}}, None,
                                  {"common": 3, "a": "y", "gone": None}])
    second = AttrTable.from_dicts([{"common": 2, "b": 2.5, "flag": True},
                                   {"b": 1.5, "common": 4}])
    monkeypatch.setattr(attr_columns, "MAX_ATTR_COLUMNS", 3)
    third = AttrTable.from_dicts([{"c1": 1, "c2": "two", "c3": 3.0, "c4": [4]}])
    assert third.overflow() == {0: {"c4": [4]}}
    warnings: Counter[str] = Counter()
    joined = AttrTable.concat([first, second, third], warnings)
    assert joined.keys == ["common", "a", "b"]
    assert joined.dicts() == first.dicts() + second.dicts() + third.dicts()
    assert joined.overflow() == {0: {"nested": {"n": [1, 2]}}, 3: {"flag": True},
                                 5: {"c1": 1, "c2": "two", "c3": 3.0, "c4": [4]}}
    assert joined.explicit_nones() == {2: ["gone"]}
    assert warnings["attr_columns_capped"] == 6  # nested, gone, flag, c1, c2, c3


def test_concat_of_many_parts_makes_a_null_chunk_per_run_of_parts_without_a_key() -> None:
    """A key of one part among many: its column has that part's chunk and one null
    chunk for the parts after it, not a chunk per part."""
    parts = [AttrTable.from_dicts([{"rare": 1, "all": 0}])] + \
        [AttrTable.from_dicts([{"all": n}, None]) for n in range(1, 60)]
    joined = AttrTable.concat(parts)
    assert joined.column("rare").num_chunks == 2
    assert joined.column("rare").to_pylist() == [1] + [None] * 118
    assert joined.dicts() == [row for part in parts for row in part.dicts()]


def test_merged_columns_prefer_the_end_value() -> None:
    start = AttrTable.from_dicts([{"k": 1, "only_start": "s"}, {"k": 2}])
    end = AttrTable.from_dicts([{"k": 10}, None])
    frame = merged_attr_frame(start, end, pd.RangeIndex(2))
    assert frame["attr.k"].tolist() == [10, 2]
    assert frame["attr.only_start"].tolist() == ["s", None]


def _typed_rows(rng: np.random.Generator, n: int, kinds: tuple[str, ...]) -> list[dict | None]:
    """Rows whose keys "a" to "c" each hold a value of one of ``kinds``, or nothing."""
    makers = {"int": lambda: int(rng.integers(-2**62, 2**62)), "float": lambda: float(
        rng.normal()), "bool": lambda: bool(rng.random() < 0.5),
        "text": lambda: f"t{int(rng.integers(5))}"}
    kind_of = {key: kinds[int(rng.integers(len(kinds)))] for key in "abc"}
    rows: list[dict | None] = []
    for _ in range(n):
        row = {key: makers[kind_of[key]]() for key in "abc" if rng.random() < 0.7}
        rows.append(row or None)
    return rows


def _in_chunks(table: AttrTable, rng: np.random.Generator, narrow: bool) -> AttrTable:
    """``table`` in chunks of a random size, its int64 and float64 columns int32 and
    float32 when ``narrow`` (types a run dataset's tables may hold)."""
    data = table.table
    if narrow:
        data = data.cast(pa.schema([field.with_type({pa.int64(): pa.int32(),
                                                     pa.float64(): pa.float32()}.get(
                                                         field.type, field.type))
                                    for field in data.schema]), safe=False)
    size = int(rng.integers(1, max(2, data.num_rows)))
    return AttrTable(pa.Table.from_batches(data.to_batches(max_chunksize=size), data.schema))


def test_merged_columns_in_pandas_are_the_arrow_rule() -> None:
    """A key at both ends: the end value where there is one, else the start value. The
    pandas columns (text merged as shared objects) have the values and dtype of the
    Arrow rule (``merged_attr_arrays``: both cast to their common type and coalesced)
    made a pandas column, whatever the types, gaps and chunks."""
    rng = np.random.default_rng(23)
    kinds = ("int", "float", "bool", "text")
    for trial in range(80):
        n = int(rng.integers(1, 60))
        narrow = trial % 4 == 3
        start = _in_chunks(AttrTable.from_dicts(_typed_rows(rng, n, kinds)), rng, narrow)
        end = _in_chunks(AttrTable.from_dicts(_typed_rows(rng, n, kinds)), rng, narrow)
        index = pd.RangeIndex(n)
        frame = merged_attr_frame(start, end, index)
        for name, arrow in attr_columns.merged_attr_arrays(start, end).items():
            expected = attr_frames._pandas_column(arrow, None, index)
            got, want = frame[name].to_numpy(), np.asarray(expected)
            assert got.dtype == want.dtype, (trial, name)
            if want.dtype == object:
                assert got.tolist() == want.tolist(), (trial, name)
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{trial} {name}")


def test_rows_with_the_same_keys_in_another_order_keep_each_value_under_its_key() -> None:
    rows = [{"a": 1, "b": "x"}, {"b": "y", "a": 2}, {"a": 3, "b": "z"}, {"b": "w", "a": 4}]
    table = AttrTable.from_dicts(rows)
    assert table.column("a").to_pylist() == [1, 2, 3, 4]
    assert table.column("b").to_pylist() == ["x", "y", "z", "w"]
    assert table.dicts() == rows


def test_a_key_that_fails_late_records_its_nones_once() -> None:
    """The first group converts as int64, the last cannot (past int64): the whole key
    becomes text, and its explicit None is listed once, not once per attempt."""
    rows = [{"n": 1, "m": None}, {"n": None, "m": 1}, {"m": 2, "n": 2**64}]
    table = AttrTable.from_dicts(rows)
    assert table.table.schema.field("n").type == pa.string()
    assert table.explicit_nones() == {0: ["m"], 1: ["n"]}
    assert table.dicts() == [{"n": "1", "m": None}, {"n": None, "m": 1},
                             {"m": 2, "n": str(2**64)}]


def test_ints_among_floats_and_all_none_keys() -> None:
    rows = [{"v": 1, "gone": None}, {"v": 2.5, "gone": None}, {"other": True}]
    table = AttrTable.from_dicts(rows)
    assert table.column("v").type == pa.float64()
    assert table.column("v").to_pylist() == [1.0, 2.5, None]
    assert table.dicts() == [{"v": 1.0, "gone": None}, {"v": 2.5, "gone": None},
                             {"other": True}]


def _random_rows(rng: np.random.Generator, n: int) -> list[dict | None]:
    """Rows whose keys tie in frequency, change kind between rows, are not text or
    not clean text; values of every kind the columns handle."""
    keys = ["a", "b", "c", "d", 7, "\ud800k", "e"]
    values = [0, 1, -2**70, 2.5, math.nan, True, "text", "\udc80", None, [1, {"x": 2}],
              {"y": None}, np.int32(3), np.float64(0.25)]
    rows: list[dict | None] = []
    for _ in range(n):
        if rng.random() < 0.15:
            rows.append(None if rng.random() < 0.5 else {})
            continue
        chosen = rng.choice(len(keys), size=int(rng.integers(1, 5)), replace=False)
        rows.append({keys[k]: values[int(rng.integers(len(values)))] for k in chosen})
    return rows


def test_a_table_built_from_parts_is_the_table_of_the_parts_end_to_end(monkeypatch) -> None:
    """The worker's fork groups the real spans' end attributes before the PD spans'
    exist; whatever the split, the table and its warnings are those of one pass."""
    rng = np.random.default_rng(5)
    for trial in range(60):
        monkeypatch.setattr(attr_columns, "MAX_ATTR_COLUMNS", [3, 500][trial % 2])
        rows = _random_rows(rng, int(rng.integers(1, 40)))
        cuts = sorted(rng.integers(0, len(rows) + 1, size=int(rng.integers(1, 4))).tolist())
        builder = attr_columns.AttrTableBuilder()
        for start, end in zip([0, *cuts], [*cuts, len(rows)], strict=True):
            builder.add(rows[start:end])
        in_parts, in_one = Counter(), Counter()
        parts_table = builder.table(in_parts).table
        one_table = AttrTable.from_dicts(rows, in_one).table
        assert _ipc_bytes(parts_table) == _ipc_bytes(one_table), (trial, cuts)  # NaN too
        assert in_parts == in_one


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_blocks_of_rows_converted_as_they_are_laid_make_the_table_of_one_block(
        monkeypatch) -> None:
    """Grouping converts each key tuple's values every few thousand, while they are in
    the cache; whatever the block size, the table is the one of a single block,
    each column's type decided over all its values: ints among floats stay ints in a
    column that becomes text (a block converted them to floats: "0.0", not "0")."""
    monkeypatch.setattr(attr_grouping, "BLOCK_ROWS", 1)
    monkeypatch.setattr(attr_grouping, "BLOCK_VALUES", 1)
    assert AttrTable.from_dicts([{"v": 0}, {"v": 2.5}, {"v": "x"}]).column("v").to_pylist() \
        == ["0", "2.5", "x"]
    rng = np.random.default_rng(17)
    per_key = {"a": [0, 1, 2**62, None], "b": [1.5, 2, math.nan, None, -0.0],
               "c": ["x", None, "\udc80"], "d": [True, False, None], "e": [3, 2**70], "g": [None]}
    for trial in range(200):
        if trial % 2:
            rows = _random_rows(rng, int(rng.integers(1, 60)))
        else:
            rows = [None if rng.random() < 0.1 else
                    {key: per_key[key][int(rng.integers(len(per_key[key])))] for key in
                     rng.choice(list(per_key), size=int(rng.integers(1, 5)), replace=False)}
                    for _ in range(int(rng.integers(1, 60)))]
        tables = []
        for block_values in (int(rng.integers(1, 12)), 10**9):
            monkeypatch.setattr(attr_grouping, "BLOCK_VALUES", block_values)
            warnings: Counter[str] = Counter()
            tables.append((_ipc_bytes(AttrTable.from_dicts(rows, warnings).table), warnings))
        assert tables[0] == tables[1], trial



def test_a_block_holds_enough_rows_that_each_keys_chunk_is_long(monkeypatch) -> None:
    """Each chunk costs microseconds beyond its values: a wide key tuple's block holds
    :data:`BLOCK_ROWS` rows, not just :data:`BLOCK_VALUES` values (50-58 keys made
    chunks of about 150 values on the 62 MB dump)."""
    monkeypatch.setattr(attr_grouping, "BLOCK_VALUES", 8)
    monkeypatch.setattr(attr_grouping, "BLOCK_ROWS", 4)
    wide = {f"k{index}": index for index in range(5)}
    rows = [dict(wide) for _ in range(12)] + [{"x": 1.5} for _ in range(20)]
    _, groups = attr_grouping.group_by_keys_in_python(rows)
    assert [len(chunk) for chunk in groups[tuple(wide)].columns[0]] == [4, 4, 4]
    assert [len(chunk) for chunk in groups[("x",)].columns[0]] == [8, 8, 4]

def test_a_block_of_one_plain_type_is_what_arrow_makes_of_it() -> None:
    """Blocks of numbers (numpy) and of ASCII text (one join) skip Arrow's own conversion;
    they must give its array, byte for byte, and stay Python where it refuses."""
    rng = np.random.default_rng(23)
    pools = {
        int: [0, -1, 7, 2**63 - 1, -(2**63), 2**62, 2**63, -(2**63) - 1],
        float: [0.5, -0.0, math.nan, math.inf, -math.inf, 1e308, 5e-324, 3.0],
        bool: [True, False],
        str: ["", "x", "tool\x00call", "a" * 300, "é", "日本", "\udc80", " \t\n"],
    }
    for trial in range(400):
        kind = list(pools)[trial % 4]
        pool = pools[kind]
        values = [pool[int(rng.integers(len(pool)))] for _ in range(int(rng.integers(1, 30)))]
        chunk = attr_grouping.block_chunk(values, frozenset(map(type, values)))
        arrow_type = {int: pa.int64(), float: pa.float64(), bool: pa.bool_(),
                      str: pa.string()}[kind]
        try:
            expected = pa.array(values, type=arrow_type)
        except (pa.ArrowException, OverflowError, UnicodeError):
            assert chunk is values, (trial, values)
            continue
        assert isinstance(chunk, pa.Array) and chunk.type == expected.type, (trial, values)
        assert _ipc_bytes(pa.table({"v": chunk})) == _ipc_bytes(pa.table({"v": expected})), \
            (trial, values)


def test_text_placed_at_its_rows_is_what_a_take_with_null_positions_makes() -> None:
    """A text column whose key only some rows have is built from the values' own buffers
    (in row order, each length at its row); it must equal Arrow's take with null
    positions, for rows in order or interleaved, sliced arrays and empty text."""
    rng = np.random.default_rng(29)
    pool = ["", "a", "tool call", "日本語", "x" * 70]
    cases = [(pa.array(["", ""], type=pa.string()), np.array([3, 0]), 5)]
    for trial in range(300):
        n = int(rng.integers(1, 50))
        rows = rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)
        if trial % 3 == 0:
            rows = np.sort(rows)
        values = pa.array([pool[int(rng.integers(len(pool)))] for _ in range(len(rows) + 2)],
                          type=pa.string()).slice(1, len(rows))  # an offset into its buffers
        cases.append((values, rows, n))
    for values, rows, n in cases:
        placed = attr_columns._scattered(values, rows, n)
        positions = np.full(n, -1, dtype=np.int64)
        positions[rows] = np.arange(len(rows))
        expected = values.take(pa.array(positions, mask=positions < 0))
        placed.validate(full=True)
        assert placed.equals(expected), (values, rows, n)


def test_rows_of_many_keys_come_back_each_with_its_own_keys() -> None:
    """Rows are grouped by which keys they have, 64 keys to a word: past that too."""
    rng = np.random.default_rng(4)
    rows: list[dict | None] = []
    for number in range(300):
        keys = np.flatnonzero(rng.random(150) < 0.1)
        rows.append({f"k{key}": (int(key) if key % 3 else f"t{number}") for key in keys}
                    or None)
    back = AttrTable.from_dicts(rows).dicts()
    assert [row and sorted(row.items()) for row in back] == \
        [row and sorted(row.items()) for row in rows]


#: The compiled dict pass, as imported (tests set the module's name to None).
NATIVE_DICTS = attr_python._native_dicts


def _dicts_both_ways(table: AttrTable, monkeypatch) -> tuple[list, list]:
    """``table.dicts()`` by the native dict pass, then by the Python pass."""
    made = []
    for module in (NATIVE_DICTS, None):
        monkeypatch.setattr(attr_python, "_native_dicts", module)
        made.append(table.dicts())
    return made[0], made[1]


def _typed(rows: list) -> list:
    """Each row's items with each value's type, NaN as a marker: what the dicts are
    compared by (1 == 1.0 == True, and NaN != NaN, in plain equality)."""
    return [row if row is None else
            [(key, type(value), "nan" if value != value else repr(value))
             for key, value in row.items()] for row in rows]


def test_the_native_dict_pass_makes_the_dicts_of_the_python_pass(monkeypatch) -> None:
    """Numbers, bools and text with gaps, JSON values, keys whose values were None and
    keys past the cap, in row groups of many key patterns, within one block of rows of
    the native pass and across several: the same dicts, the same value types and key
    order."""
    if NATIVE_DICTS is None:
        pytest.skip("built without a C compiler")
    rng = np.random.default_rng(17)
    for trial in range(60):
        monkeypatch.setattr(attr_columns, "MAX_ATTR_COLUMNS", [500, 3][trial % 5 == 0])
        rows = int(rng.integers(257, 900) if trial % 4 == 3 else rng.integers(1, 200))
        table = AttrTable.from_dicts(_random_rows(rng, rows))
        by_native, by_python = _dicts_both_ways(table, monkeypatch)
        assert _typed(by_native) == _typed(by_python), trial
    table = AttrTable.from_dicts([{"small": np.int32(3), "bits": 200, "flag": False}] * 3)
    by_native, by_python = _dicts_both_ways(table, monkeypatch)
    assert _typed(by_native) == _typed(by_python)


def test_the_native_dict_pass_refuses_what_it_cannot_read() -> None:
    native = NATIVE_DICTS
    if native is None:
        pytest.skip("built without a C compiler")
    rows = np.array([0, 0], dtype=np.int64)
    assert native.row_dicts(("a",), [np.array([1.5, 2.5])], rows, [(0,)]) == \
        [{"a": 1.5}, {"a": 2.5}]
    assert native.row_dicts(("a",), [np.array(["x", "y"], dtype=object)], rows, [(0,)]) == \
        [{"a": "x"}, {"a": "y"}]
    for not_one_per_row in (np.array(["x", "_", "y"], dtype=object)[::2],  # strided
                            np.array([["x"], ["y"]], dtype=object),  # 2-D
                            np.array(["x"], dtype=object)):  # one row short
        with pytest.raises(ValueError):
            native.row_dicts(("a",), [not_one_per_row], rows, [(0,)])
    with pytest.raises(ValueError, match="not a list, an array of objects or a buffer"):
        native.row_dicts(("a",), [np.array([1, 2], dtype=np.int16)], rows, [(0,)])
    with pytest.raises(ValueError, match="rows"):
        native.row_dicts(("a",), [[1]], rows, [(0,)])
    with pytest.raises(ValueError, match="no pattern"):
        native.row_dicts(("a",), [[1, 2]], np.array([0, 3], dtype=np.int64), [(0,)])
    with pytest.raises(ValueError, match="not one of"):
        native.row_dicts(("a",), [[1, 2]], rows, [(4,)])
    with pytest.raises(ValueError, match="int64"):
        native.row_dicts(("a",), [[1, 2]], np.array([0, 0], dtype=np.int32), [(0,)])
    with pytest.raises(TypeError):
        native.row_dicts((7,), [[1, 2]], rows, [(0,)])
