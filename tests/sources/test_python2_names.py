"""Python 2 names as protocol 0-2 pickles write them, read as today's names."""

from __future__ import annotations

import pickle
import pickletools
import subprocess
from collections import defaultdict

from slime_trace_widget.sources.dumps.python2_names import python3_name


def written_globals(value: object) -> list[tuple[str, str]]:
    """The globals Python 3's pickler names at protocol 2 (torch.save's) for ``value``."""
    ops = pickletools.genops(pickle.dumps(value, protocol=2))
    return [tuple(argument.split(" ", 1)) for op, argument, _ in ops if op.name == "GLOBAL"]


def test_what_python3_writes_at_protocol_2_reads_back_as_its_own_name():
    cases = [(subprocess.Popen, [("subprocess", "Popen")]),
             (range(3), [("builtins", "range")]),
             (defaultdict(int), [("collections", "defaultdict"), ("builtins", "int")]),
             (ValueError("x"), [("builtins", "ValueError")]),
             (frozenset({1}), [("builtins", "frozenset")])]
    for value, names in cases:
        written = written_globals(value)
        assert written != names  # the file holds Python 2 names
        assert [python3_name(*name) for name in written] == names


def test_single_renames_and_names_left_as_written():
    assert python3_name("__builtin__", "unicode") == ("builtins", "str")
    assert python3_name("__builtin__", "reduce") == ("functools", "reduce")
    assert python3_name("itertools", "izip") == ("builtins", "zip")
    assert python3_name("itertools", "chain") == ("itertools", "chain")
    assert python3_name("UserDict", "OrderedDict") == ("UserDict", "OrderedDict")
    assert python3_name("posix", "system") == ("posix", "system")
    assert python3_name("exceptions", "StandardError") == ("builtins", "Exception")
    # only the exception classes of Python 2's exceptions module are builtins now
    assert python3_name("exceptions", "int") == ("exceptions", "int")
    assert python3_name("exceptions", "getattr") == ("exceptions", "getattr")
