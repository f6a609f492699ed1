"""Grouping attribute dicts into typed chunks: the native pass against the Python pass."""

from __future__ import annotations

import math
import os
import shlex
import shutil
import sysconfig
from collections import Counter, OrderedDict
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget.sources.dumps import worker
from slime_trace_widget.tables import attr_columns, attr_grouping, attr_python, build
from slime_trace_widget.tables.attr_columns import AttrTable
from tests.tables.test_attr_columns import _ipc_bytes

FIXTURES = Path(__file__).parents[1] / "fixtures"
native = attr_grouping._native_columns
needs_native = pytest.mark.skipif(native is None, reason="built without a C compiler")


def _can_compile() -> bool:
    """What hatch_build.py needs: a C compiler and this Python's headers."""
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which(shlex.split(compiler)[0]) is not None and headers.exists()


@pytest.mark.parametrize(("module", "name"), [(attr_grouping, "_native_columns"),
                                              (attr_python, "_native_dicts")])
def test_the_native_passes_are_built_where_a_c_compiler_is(module: object, name: str) -> None:
    """The install compiles them (hatch_build.py); a build that silently fell back to
    Python would leave every load slower with nothing said at run time."""
    if not _can_compile():
        pytest.skip("no C compiler or no Python headers here: the package runs its Python pass")
    assert getattr(module, name) is not None, f"pip install -e . did not compile {name}.c"


def _both_ways(rows: list, monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, Counter]]:
    """The table of ``rows`` (as IPC bytes, NaN and metadata included) and its warnings,
    by the native pass, then by the Python pass."""
    made = []
    for module in (native, None):
        monkeypatch.setattr(attr_grouping, "_native_columns", module)
        warnings: Counter[str] = Counter()
        made.append((_ipc_bytes(AttrTable.from_dicts(rows, warnings).table), warnings))
    return made


#: Values by how the native pass takes them: typed (floats, ints within int64, bools,
#: ASCII text), or left to Python (None, ints past int64, other text, subclasses of
#: the plain types, containers, numpy scalars).
TYPED = [0, -1, 2**63 - 1, -(2**63), 1.5, -0.0, math.nan, math.inf, True, False, "", "x",
         "tool\x00call", "a" * 300]
LEFT = [None, 2**63, -(2**63) - 1, "é", "\udc80", [1, {"x": 2}], {"y": None},
        np.float64(0.25), np.int32(3), type("Text", (str,), {})("sub")]


def _rows(rng: np.random.Generator, count: int, keys: list) -> list:
    """Rows in runs of one key tuple (as a dump's spans come), a run's values of one
    kind per key mostly, with a value of another kind now and then."""
    rows: list = []
    while len(rows) < count:
        chosen = [keys[k] for k in rng.choice(len(keys), size=int(rng.integers(1, 5)),
                                               replace=False)]
        kinds = {key: TYPED[int(rng.integers(len(TYPED)))] for key in chosen}
        for _ in range(int(rng.integers(1, 30))):
            roll = rng.random()
            if roll < 0.05:
                rows.append(None if roll < 0.025 else {})
                continue
            row = {}
            for key in chosen:
                like = kinds[key]
                if rng.random() < 0.04:
                    row[key] = LEFT[int(rng.integers(len(LEFT)))]
                elif rng.random() < 0.04:
                    row[key] = TYPED[int(rng.integers(len(TYPED)))]
                else:
                    row[key] = _another_like(like, rng)
            rows.append(row)
    return rows


def _another_like(value: object, rng: np.random.Generator) -> object:
    """A value of the same type as ``value``."""
    if type(value) is bool:
        return bool(rng.integers(2))
    if type(value) is int:
        return int(rng.integers(-(2**62), 2**62))
    if type(value) is float:
        return float(rng.normal())
    return "v" * int(rng.integers(0, 6)) + str(int(rng.integers(100)))


@needs_native
def test_the_native_pass_makes_the_tables_of_the_python_pass(monkeypatch) -> None:
    """Typed columns, columns left to Python in blocks (the block size made tiny, so a
    kind that changes between blocks is met), lists the native pass refuses (a key
    not ASCII text, a row not exactly a dict): byte for byte the same table and
    warnings."""
    rng = np.random.default_rng(31)
    ascii_keys = ["a", "b", "c", "d", "e", "f"]
    odd_keys = [*ascii_keys, "é", 7]
    for trial in range(300):
        monkeypatch.setattr(attr_grouping, "BLOCK_VALUES", [8192, 3, 1][trial % 3])
        monkeypatch.setattr(attr_grouping, "BLOCK_ROWS", [256, 2, 1][trial % 3])
        monkeypatch.setattr(attr_columns, "MAX_ATTR_COLUMNS", [500, 3][trial % 7 == 0])
        rows = _rows(rng, int(rng.integers(1, 120)), odd_keys if trial % 5 == 0 else ascii_keys)
        if trial % 11 == 0:  # a dict subclass: its own iteration could run code
            rows.insert(int(rng.integers(len(rows) + 1)), OrderedDict(a=1, b="x"))
        if trial % 13 == 0:
            rows.append(dict.fromkeys(["a", "b"], 1) | {"a": 2.5})  # key order kept
        by_native, by_python = _both_ways(rows, monkeypatch)
        assert by_native == by_python, trial


@needs_native
def test_the_native_pass_leaves_rows_it_cannot_type_to_python() -> None:
    assert native.lay_columns([{"a": 1}, OrderedDict(a=1)]) is None
    assert native.lay_columns([{"a": 1}, {"é": 1}]) is None
    assert native.lay_columns([{"a": 1}, {7: 1}]) is None
    laid = native.lay_columns([None, {"a": 1, "b": "x"}, {}, {"a": 2, "b": None},
                               {"b": 1.5}])
    assert [(keys, np.frombuffer(members, np.int64).tolist()) for keys, members, _ in laid] \
        == [(("a", "b"), [1, 3]), (("b",), [4])]
    (_, _, first), (_, _, second) = laid
    assert first[0] == ("i", np.array([1, 2], np.int64).tobytes(), None)
    assert first[1] is None  # text, then None: Python's
    assert second[0] == ("f", np.array([1.5]).tobytes(), None)
    with pytest.raises(TypeError):
        native.lay_columns(({"a": 1},))


@needs_native
@pytest.mark.parametrize("name", ["small.pt", "rollout_eval_3.pt", "edge_weird_values.pt",
                                  "legacy_v1_pd.pt", "edge_malformed_events.pt"])
def test_a_dumps_attribute_tables_are_the_same_either_way(name: str, monkeypatch) -> None:
    """Span starts, span ends and events of real dumps, read as a worker reads them."""
    loaded = worker.read_for_frames(str(FIXTURES / name))
    kept: dict[str, list] = {}

    class Keep(build.AttrTablesHere):
        def tables(self) -> list[AttrTable]:
            kept["lists"] = self._lists
            return super().tables()

    build.build_tables(loaded, Keep())
    assert any(kept["lists"]), name
    for dicts in kept["lists"]:
        by_native, by_python = _both_ways(dicts, monkeypatch)
        assert by_native == by_python, name
