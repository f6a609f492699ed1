"""Array state a file sets after the array was checked: every array the file can reach
has its BUILD checked, and none keeps a dtype object the file can still change.

* numpy takes a new state on a dtype an array already uses. A file that makes an
  array of a plain struct and then BUILDs that struct into one with an object field
  (with numpy's own flags, so the check after the load passes) had the array read
  its 8 bytes from the file as an object pointer: the caller of ``load_dump``
  crashed on touching it. Arrays are now made with numpy's build of their dtype.
* ``_frombuffer`` and the frames reader's tensors gave plain ndarrays, whose BUILD
  took an object array's shape without its items: a read past a list's end.

The files are loaded, and touched, in a subprocess (with a timeout as a safety net,
never asserted on), so this process survives them on any code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget import DumpError
from slime_trace_widget.sources.loading import load_frames
from tests.support.hostile_pickles import (
    BUILD,
    MARK,
    STORAGE_PID,
    TUPLE,
    dump_stream,
    op_call,
    op_global,
    op_text,
    op_value,
    touched,
    write_zip,
)

#: Memo slots far past any the dump's own opcodes use.
SLOT = 90_000
#: The object pointer the file would choose: nothing lives at 0x10.
POINTER = b"\x10" + b"\x00" * 7
#: An object array of many items, from a list of one: numpy's own ``__setstate__``
#: would read 999 pointers past the list's end.
SHORT_OBJECTS = op_value((1, (1000,), np.dtype("O"), False, [7]))


def put(slot: int) -> bytes:
    return b"r" + slot.to_bytes(4, "little")


def get(slot: int) -> bytes:
    return b"j" + slot.to_bytes(4, "little")


def dtype_changed_after_use() -> bytes:
    """An array of ``[('a', '<i8')]`` holding POINTER, then its dtype BUILT into
    ``[('a', 'O')]`` with the state numpy's own build of that has."""
    struct = op_call(op_global("numpy", "dtype"), op_value([("a", "<i8")])) + put(SLOT)
    empty = op_call(op_global("numpy.core.multiarray", "_reconstruct"),
                    op_global("numpy", "ndarray"), op_value((0,)), op_value(b"b"))
    array = empty + MARK + op_value(1) + op_value((1,)) + struct + op_value(False) \
        + op_value(POINTER) + TUPLE + BUILD
    objects_state = np.dtype([("a", "O")]).__reduce__()[2]
    return array + get(SLOT) + op_value(objects_state) + BUILD + b"0"  # POP: the array stays


def test_a_dtype_changed_after_its_array_was_made_leaves_the_array_as_it_was(
        tmp_path: Path) -> None:
    path = tmp_path / "rollout_7.pt"
    write_zip(path, dump_stream(dtype_changed_after_use(), "span_end_attrs"))
    for line in touched(path, "LOADED"):  # the file's 8 bytes, read as the int they were stored as
        assert "CheckedArray([(16,)], dtype=[('a', '<i8')])" in line, line


def test_a_frombuffer_array_refuses_an_object_state_short_of_items(tmp_path: Path) -> None:
    path = tmp_path / "rollout_7.pt"
    array = op_call(op_global("numpy._core.numeric", "_frombuffer"), op_value(b""),
                    op_value(np.dtype("b")), op_value((0,)), op_text("C"))
    write_zip(path, dump_stream(array + SHORT_OBJECTS + BUILD, "span_end_attrs"))
    for line in touched(path, "REFUSED"):
        assert str(path) in line and "object array of 1000 items comes with 1" in line, line


def test_a_tensor_of_the_frames_reader_refuses_an_object_state_short_of_items(
        tmp_path: Path) -> None:
    """The frames worker reads tensors as arrays without torch; a BUILD on one is
    checked as on any array the file makes."""
    path = tmp_path / "rollout_7.pt"
    tensor = op_call(op_global("torch._utils", "_rebuild_tensor_v2"), STORAGE_PID,
                     op_value(0), op_value((3,)), op_value((1,)), op_value(False),
                     op_value(None))
    write_zip(path, dump_stream(tensor + SHORT_OBJECTS + BUILD, "span_end_attrs"))
    with pytest.raises(DumpError, match=r"rollout_7\.pt: .*object array of 1000 items "
                                        r"comes with 1"):
        load_frames(path)
