"""values: plain data and JSON made of recorded attribute values, walked within a budget."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch

from slime_trace_widget import values
from slime_trace_widget.values import MAX_STEPS, json_safe, plain_value


def _items(value: Any) -> int:
    """Container items in ``value``, markers included: the steps a walk of it takes."""
    if isinstance(value, dict):
        return len(value) + sum(map(_items, value.values()))
    if isinstance(value, list):
        return len(value) + sum(map(_items, value))
    return 0


def test_a_value_cut_at_the_budget_keeps_its_marker_when_walked_again():
    """The recorder stores ``plain_value`` of a value and the reader walks it again: the
    marker the first walk wrote must survive, not become ``"…[1 more items]"``."""
    tokens = plain_value(list(range(200_000)))
    assert len(tokens) == MAX_STEPS and tokens[-1] == "…[100001 more items]"
    by_id = plain_value({f"k{i}": i for i in range(150_000)})
    assert len(by_id) == MAX_STEPS and by_id["…"] == "[50001 more keys]"
    per_turn = plain_value([list(range(30_000)) for _ in range(5)])
    assert per_turn[-1] == "…[1 more items]" and per_turn[-2][-1] == "…[20006 more items]"
    for cut in (tokens, by_id, per_turn):
        assert _items(cut) <= MAX_STEPS
        assert plain_value(cut) == cut
        assert json_safe(cut) == cut


def _random_value(rng: random.Random, depth: int) -> Any:
    kind = rng.randrange(9 if depth < 4 else 4)
    if kind == 0:
        return rng.randrange(100)
    if kind == 1:
        return f"s{rng.randrange(10)}"
    if kind == 2:
        return np.int64(rng.randrange(5))
    if kind == 3:
        return None
    size = rng.randrange(6)
    items = [_random_value(rng, depth + 1) for _ in range(size)]
    if kind == 4:
        return items
    if kind == 5:
        return tuple(items)
    if kind == 6:
        return {f"k{k}": item for k, item in enumerate(items)}
    if kind == 7:
        return {k: item for k, item in enumerate(items)}
    return np.arange(size)


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 8, 13, 40])
def test_any_cut_value_walks_again_to_itself(monkeypatch, budget):
    """Whatever the nesting and wherever the budget runs out, a walk's output, markers
    included, fits the budget, so a second walk (of either kind) gives it back."""
    monkeypatch.setattr(values, "MAX_STEPS", budget)
    rng = random.Random(budget)
    for _ in range(400):
        value = [_random_value(rng, 0) for _ in range(rng.randrange(1, 8))]
        once = plain_value(value)
        assert _items(once) <= budget
        assert plain_value(once) == once
        assert json_safe(once) == json_safe(value) == once


_NUMPY_SCALARS = (np.bool_, np.int8, np.int64, np.uint64, np.float16, np.float32, np.float64,
                  np.longdouble, np.complex64, np.datetime64)


def _numpy_list(rng: random.Random, kinds: tuple[type, ...]) -> list:
    """``list(array)``'s items: numpy scalars of one or a few types, now and then a NaN, an
    extreme or a Python number among them."""
    items: list = []
    for _ in range(rng.randrange(12)):
        kind = rng.choice(kinds)
        if kind is np.datetime64:
            items.append(np.datetime64(rng.randrange(10**9), "s"))
        elif kind is np.uint64:
            items.append(np.uint64(rng.choice([0, 2**64 - 1, rng.randrange(2**63)])))
        elif kind is np.bool_:
            items.append(np.bool_(rng.randrange(2)))
        else:
            items.append(kind(rng.choice([0, 1, -7, 0.1, float("nan"), float("inf")]))
                         if np.dtype(kind).kind in "fc" else kind(rng.randrange(-100, 100)))
    if items and rng.random() < 0.2:
        items[rng.randrange(len(items))] = rng.choice([3, 2.5, None])
    return items


@pytest.mark.parametrize("budget", [1, 3, 8, 13, 40, MAX_STEPS])
def test_lists_of_numpy_numbers_become_what_the_item_walk_gives(monkeypatch, budget):
    """A list of numpy scalars (``list(array)``) is converted at once: the same values,
    types and markers as the walk of each item gave, whatever the budget; the walk took
    microseconds an item."""
    monkeypatch.setattr(values, "MAX_STEPS", budget)
    rng = random.Random(budget)
    cases = []
    for _ in range(300):
        kinds = tuple(rng.sample(_NUMPY_SCALARS, rng.choice([1, 1, 2, 3])))
        cases.append({"a": _numpy_list(rng, kinds), "b": [_numpy_list(rng, kinds)],
                      "c": tuple(_numpy_list(rng, kinds))})
    fast = [plain_value(case) for case in cases]
    monkeypatch.setattr(values, "_numpy_numbers", lambda flat, kinds: None)
    slow = [plain_value(case) for case in cases]
    assert repr(fast) == repr(slow)  # repr: NaN equals NaN, and 1 differs from 1.0 or True


def test_numbers_numpy_gives_back_as_themselves_become_numbers():
    """``tolist`` of a longdouble gives a longdouble back: the walk recursed to its
    depth limit and read ``"<longdouble nested too deep>"``."""
    assert plain_value(np.longdouble(1.5)) == 1.5
    assert plain_value(np.array([0.5, 2], dtype=np.longdouble)) == [0.5, 2.0]


def test_complex_numbers_are_text_as_json_has_none():
    assert plain_value(np.complex64(1 + 2j)) == "(1+2j)"
    assert plain_value(np.clongdouble(1 + 2j)) == "(1+2j)"
    assert plain_value(torch.ones(2, dtype=torch.complex64)) == ["(1+0j)", "(1+0j)"]
    assert json_safe([1j]) == ["1j"]


def test_keys_of_one_text_are_all_kept():
    """``{1: ..., "1": ...}``: both keys become ``"1"``; the later one is kept under its
    text and its type, numbered when that repeats too."""
    value = {1: "int", "1": "str", 1.5: "float", "1.5": "str", "1 (str)": "taken"}
    expected = {"1": "int", "1 (str)": "str", "1.5": "float", "1.5 (str)": "str",
                "1 (str) (str)": "taken"}
    assert plain_value(value) == json_safe(value) == expected
    assert plain_value(expected) == expected
    many = {**{k: k for k in range(5)}, **{str(k): -k for k in range(5)}, "0 (str)": "x"}
    assert list(plain_value({"outer": many})["outer"]) == [
        "0", "1", "2", "3", "4", "0 (str)", "1 (str)", "2 (str)", "3 (str)", "4 (str)",
        "0 (str) (str)"]


def test_an_object_is_described_by_a_repr_cut_with_a_marker():
    class Long:
        def __repr__(self) -> str:
            return "x" * 2_000

    class Failing:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    text = plain_value(Long())
    assert text == "x" * values.MAX_REPR_CHARS + "…[truncated 1500 chars]"
    assert values.describe(Long()) == text and plain_value(Failing()) == "<Failing>"


class _Flag(int):
    """An int subclass (as IntEnum is): made a plain int, or its text when too long."""


@pytest.mark.parametrize("huge", [10**5000, -(10**5000), _Flag(10**5000)],
                         ids=["positive", "negative", "int-subclass"])
def test_an_int_too_long_to_print_is_its_text_at_any_depth(huge):
    """``str`` refuses an int of more than 4,300 digits; the plain data holds its text
    wherever it is, in a flat list (token ids) as in a mixed one, a dict or a tuple,
    so that what the recorder stores is what readers show and JSON can hold."""
    text = values.big_int_text(10**5000)
    value = {"top": huge, "ints": [1, huge], "mixed": [huge, "x", 1.5], "deep": ({"n": huge},)}
    expected = {"top": text, "ints": [1, text], "mixed": [text, "x", 1.5],
                "deep": [{"n": text}]}
    assert plain_value(huge) == text
    assert plain_value(value) == json_safe(value) == expected
    longest = 2**values.MAX_INT_BITS - 1
    assert plain_value([longest, True]) == [longest, True]  # kept as it is


def test_bounded_int_takes_whole_numbers_only():
    assert [values.bounded_int(v, 0, 10) for v in (3.0, np.float32(2.0), torch.tensor(4.0))] \
        == [3, 2, 4]
    assert [values.bounded_int(v, 0, 10) for v in (1.5, np.float64(2.25), float("nan"), 11.0)] \
        == [None, None, None, None]
