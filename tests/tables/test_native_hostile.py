"""The compiled passes refuse what they cannot read with an exception, never a crash.

Each case runs in a fresh interpreter: a regression that corrupts memory then fails
its own test instead of ending the whole test session. The finalizer cases arm a
reference cycle whose ``__del__`` changes an input while the pass runs, as a
collection started by one of its allocations would.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from slime_trace_widget.tables import attr_grouping, attr_python, carrier

ROOT = Path(__file__).resolve().parents[2]
needs_native = pytest.mark.skipif(
    None in (attr_python._native_dicts, attr_grouping._native_columns, carrier._native_records),
    reason="built without a C compiler")
#: Hang guard for one case, generous for a busy machine.
CASE_SECONDS = 120

ARM = """
import gc
class Bomb:
    fired = False
    def __del__(self):
        if not Bomb.fired:
            Bomb.fired = True
            change()
def arm():
    bomb = Bomb(); bomb.self = bomb  # a cycle: only a collection frees it
arm()
gc.set_threshold(1)
"""


def run_case(code: str) -> str:
    """Run ``code`` in a fresh interpreter; its last line of output (it must exit 0)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=CASE_SECONDS)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout.strip().splitlines()[-1]


def raised(call: str) -> str:
    """Code that prints the name of the exception ``call`` raises (or ``none``)."""
    return f"""
try:
    {call}
    print("none")
except Exception as exc:
    print(type(exc).__name__)
"""


@needs_native
@pytest.mark.parametrize("pattern", [(0, 0), (1, 0), (0,) * 64])
def test_row_dicts_refuses_a_pattern_that_repeats_or_reorders_columns(pattern: tuple) -> None:
    out = run_case(f"""
import numpy as np
from slime_trace_widget.tables import _native_dicts
rows = 4096
{raised(f"_native_dicts.row_dicts(('a', 'b'), [[1] * rows, [2] * rows], "
        f"np.zeros(rows, np.int64), [{pattern!r}])")}
""")
    assert out == "ValueError"


@needs_native
def test_row_dicts_refuses_a_list_column_a_finalizer_shrinks() -> None:
    out = run_case(f"""
import numpy as np
from slime_trace_widget.tables import _native_dicts
rows = 5000
column = [f"v{{i}}" for i in range(rows)]
def change():
    column.clear()
{ARM}
{raised("_native_dicts.row_dicts(('a',), [column], np.zeros(rows, np.int64), [(0,)])")}
""")
    assert out == "RuntimeError"


@needs_native
def test_row_dicts_takes_numpy_s_own_arrays_only() -> None:
    """A class that calls itself numpy.ndarray and offers an address is not read."""
    out = run_case(f"""
import numpy as np
from slime_trace_widget.tables import _native_dicts
Fake = type("numpy.ndarray", (), {{"__array_interface__": {{
    "typestr": "|O", "shape": (1,), "strides": None, "data": (8, False)}}}})
{raised("_native_dicts.row_dicts(('a',), [Fake()], np.zeros(1, np.int64), [(0,)])")}
""")
    assert out == "TypeError"


@needs_native
def test_lay_columns_refuses_a_dict_a_finalizer_grows() -> None:
    out = run_case(f"""
from slime_trace_widget.tables import _native_columns
width = 40  # a key tuple this wide is newly allocated, so a collection may start
row = {{f"k{{i}}": i for i in range(width)}}
def change():
    for i in range(width, 4 * width):
        row[f"k{{i}}"] = i
{ARM}
{raised("_native_columns.lay_columns([None, row])")}
""")
    assert out == "RuntimeError"


@needs_native
def test_read_records_refuses_a_scan_that_would_overflow() -> None:
    out = run_case(f"""
import sys
from slime_trace_widget.tables import _native_records, carrier
{raised("_native_records.read_records([], carrier._NATIVE_FIELDS, carrier._NATIVE_KINDS, "
        "(1e12, 100, sys.maxsize), 0, 0)")}
""")
    assert out == "ValueError"


@needs_native
def test_row_dicts_refuses_a_list_of_columns_a_finalizer_clears() -> None:
    out = run_case(f"""
import numpy as np
from slime_trace_widget.tables import _native_dicts
width = 64  # a tuple this wide is newly allocated, so a collection may start
names = tuple(f"k{{i}}" for i in range(width))
columns = [[f"v{{i}}"] * 4 for i in range(width)]
arguments = (names, columns, np.zeros(4, np.int64), [tuple(range(width))])
def change():
    columns.clear()
{ARM}
{raised("_native_dicts.row_dicts(*arguments)")}
""")
    assert out == "RuntimeError"
