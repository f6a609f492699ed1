"""Loading a dump by default never runs code from it, while the benign data next to
the payload still loads.

The hostile fixture dump; payloads written by ``torch.save`` (``__reduce__`` to
os.system, eval, exec, Popen, partial, open, a bound method, torch.load) in trace
attrs and as a sample; hand-made pickle streams (double BUILD, numpy object
arrays, protocol-0 ``__import__`` chains, BUILD on a global class, codecs and
Python 2 names); placeholders that stay inert and read-only, and a TorchScript
archive refused. tests/sources/test_hostile_pickles.py runs further vectors
through every entry point.
"""

import builtins
import contextlib
import functools
import io
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import types
from collections import Counter, OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from slime_trace_widget.sources.dumps import DumpError, LoadedDump, Placeholder, save_dump
from slime_trace_widget.sources.loading import load_dump
from tests.support.dump_samples import FIXTURE_MARKER, events_or_empty, span_sample

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: Every test fails if a load created the hostile fixture dump's marker file.
pytestmark = pytest.mark.usefixtures("no_fixture_marker")


# --------------------------------------------------------------------------- hostile: fixture


def test_hostile_fixture_loads_inertly():
    dump = load_dump(FIXTURES / "hostile_pickle.pt")
    assert not FIXTURE_MARKER.exists()
    assert "posix.system" in dump.blocked_globals or "nt.system" in dump.blocked_globals
    assert dump.warnings["unsafe_global_blocked"] >= 1
    (sample,) = dump.samples
    start, end = events_or_empty(sample)
    assert (start["type"], end["type"]) == ("span_start", "span_end")
    payload = end["attrs"]["note"]
    assert isinstance(payload, Placeholder) and "system" in repr(payload)


# --------------------------------------------------------------------------- hostile: torch.save


class Reduce:
    """Pickles as ``func(*args)``: what a malicious object's __reduce__ looks like."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


def touch_code(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').close()"


PAYLOADS = {
    "os.system": lambda m: (Reduce(os.system, (f"touch {m}",)), f"{os.system.__module__}.system"),
    "eval": lambda m: (Reduce(eval, (touch_code(m),)), "builtins.eval"),
    "exec": lambda m: (Reduce(builtins.exec, (touch_code(m),)), "builtins.exec"),
    "Popen": lambda m: (Reduce(subprocess.Popen, (["touch", str(m)],)), "subprocess.Popen"),
    "partial": lambda m: (Reduce(functools.partial(os.system, f"touch {m}"), ()),
                          "functools.partial"),
    "open": lambda m: (Reduce(open, (str(m), "w")), f"{open.__module__}.open"),
    "bound method": lambda m: (Reduce(pathlib.Path(m).touch, ()), "builtins.getattr"),
    "torch.load": lambda m: (Reduce(torch.load, (str(m),)), "torch.serialization.load"),
}


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_malicious_reduce_in_trace_attrs_never_runs(tmp_path, kind):
    marker = tmp_path / "PWNED"
    payload, blocked = PAYLOADS[kind](marker)
    path = tmp_path / "rollout_4.pt"
    nested = {"deep": [{"payload": payload}], "ok": 1}
    torch.save({"rollout_id": 4, "samples": [span_sample(0, nested), span_sample(1, {"x": 2})]},
               path)
    dump = load_dump(path)
    assert not marker.exists()
    assert blocked in dump.blocked_globals
    assert [len(events_or_empty(s)) for s in dump.samples] == [2, 2]
    attrs = events_or_empty(dump.samples[0])[1]["attrs"]
    assert attrs["ok"] == 1 and isinstance(attrs["deep"][0]["payload"], Placeholder)
    assert events_or_empty(dump.samples[1])[1]["attrs"] == {"x": 2}


def test_malicious_sample_item_is_skipped_and_counted(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "rollout_1.pt"
    torch.save([span_sample(0, {}), Reduce(os.system, (f"touch {marker}",))], path)
    dump = load_dump(path)
    assert not marker.exists()
    assert len(dump.samples) == 1 and dump.warnings["sample_not_a_dict"] == 1


# --------------------------------------------------------------------------- hostile: raw pickles


PROTO2, STOP, MARK, TUPLE, TUPLE2 = b"\x80\x02", b".", b"(", b"t", b"\x86"
EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, NONE = b"}", b"]", b")", b"N"
SETITEM, APPEND, REDUCE, BUILD = b"s", b"a", b"R", b"b"


def glob_op(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def text(value: str) -> bytes:
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def fragment(obj: object) -> bytes:
    """A value as pickle opcodes to splice into a hand-made stream (memo puts are harmless)."""
    return pickle.dumps(obj, protocol=2)[2:-1]


def pickle_ops(*parts: bytes) -> bytes:
    return b"".join(parts)


class _RawPickler:
    """Stand-in Pickler so torch.save writes prepared pickle bytes as data.pkl verbatim."""

    def __init__(self, file, protocol=None):
        self._file = file

    def dump(self, raw: bytes) -> None:
        self._file.write(raw)


def save_raw(path: Path, raw: bytes) -> None:
    torch.save(raw, path, pickle_module=types.SimpleNamespace(__name__="raw", Pickler=_RawPickler))


def calls_under_plain_pickle(raw: bytes, dangerous: set) -> list:
    """What an unrestricted unpickler would call among ``dangerous`` (recorded, not run).

    Proves a hand-made payload is live, so a test that sees no side effect is meaningful.
    """
    calls = []

    class Recording(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in dangerous:
                return lambda *args: calls.append((module, name, args))
            return super().find_class(module, name)

    with contextlib.suppress(Exception):  # the stream may not finish without the real callables
        Recording(io.BytesIO(raw)).load()
    return calls


def with_benign(*hostile: bytes) -> bytes:
    """``{"rollout_id": 2, "samples": [benign, {"index": 1, "payload": <hostile>}]}``."""
    return pickle_ops(PROTO2, EMPTY_DICT, text("rollout_id"), fragment(2), SETITEM,
                      text("samples"), EMPTY_LIST, fragment(span_sample(0, {"ok": True})), APPEND,
                      EMPTY_DICT, text("index"), fragment(1), SETITEM, text("payload"), *hostile,
                      SETITEM, APPEND, SETITEM, STOP)


def load_payload(tmp_path: Path, raw: bytes) -> tuple[LoadedDump, object]:
    """Save the stream as a .pt file, load it safely, check the benign sample survived."""
    path = tmp_path / "rollout_2.pt"
    save_raw(path, raw)
    dump = load_dump(path)
    assert dump.rollout_id == 2 and [s["index"] for s in dump.samples] == [0, 1]
    assert events_or_empty(dump.samples[0])[1]["attrs"] == {"ok": True}
    return dump, dump.samples[1]["payload"]


def double_build(target: bytes, marker: Path) -> bytes:
    """BUILD plants __setstate__ = os.system on the instance; a 2nd BUILD would call it."""
    return pickle_ops(target, EMPTY_DICT, text("__setstate__"), glob_op("posix", "system"),
                      SETITEM, BUILD, text(f"touch {marker}"), BUILD)


def test_double_build_on_ordereddict_runs_nothing(tmp_path):
    marker = tmp_path / "PWNED"
    raw = with_benign(double_build(glob_op("collections", "OrderedDict") + EMPTY_TUPLE + REDUCE,
                                   marker))
    assert calls_under_plain_pickle(raw, {("posix", "system")}), "payload must be live"
    dump, payload = load_payload(tmp_path, raw)
    assert not marker.exists()
    assert isinstance(payload, OrderedDict) and "posix.system" in dump.blocked_globals


def test_double_build_on_placeholder_runs_nothing(tmp_path):
    marker = tmp_path / "PWNED"
    new_sample = glob_op("slime.utils.types", "Sample") + EMPTY_TUPLE + b"\x81"  # NEWOBJ
    _, payload = load_payload(tmp_path, with_benign(double_build(new_sample, marker)))
    assert not marker.exists()
    assert isinstance(payload, Placeholder) and isinstance(vars(payload)["__setstate__"], type)


EMPTY_ARRAY = pickle_ops(glob_op("numpy._core.multiarray", "_reconstruct"), MARK,
                         glob_op("numpy", "ndarray"), fragment((0,)), fragment(b"b"), TUPLE, REDUCE)


def test_numpy_object_array_state_stays_inert(tmp_path):
    marker = tmp_path / "PWNED"
    call = pickle_ops(glob_op("posix", "system"), text(f"touch {marker}"), b"\x85", REDUCE)
    state = pickle_ops(MARK, fragment(1), fragment((1,)), fragment(np.dtype("O")),
                       fragment(False), EMPTY_LIST, call, APPEND, TUPLE, BUILD)
    _, payload = load_payload(tmp_path, with_benign(EMPTY_ARRAY, state))
    assert not marker.exists()
    assert payload.dtype == object and isinstance(payload[0], Placeholder)


def test_numpy_array_rejects_a_planted_setstate(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "rollout_2.pt"
    save_raw(path, with_benign(double_build(EMPTY_ARRAY, marker)))
    with pytest.raises(DumpError, match=r"rollout_2\.pt"):  # ndarray has no __dict__ to plant in
        load_dump(path)
    assert not marker.exists()


def test_protocol0_import_getattr_chain_runs_nothing(tmp_path):
    marker = tmp_path / "PWNED"
    chain = (b"c__builtin__\ngetattr\n(c__builtin__\n__import__\n(S'os'\ntRS'system'\ntR"
             + b"(S'touch " + str(marker).encode() + b"'\ntR")
    raw = with_benign(chain)
    assert calls_under_plain_pickle(raw, {("__builtin__", "__import__")}), "payload must be live"
    dump, payload = load_payload(tmp_path, raw)
    assert not marker.exists() and isinstance(payload, Placeholder)
    assert {"builtins.__import__", "builtins.getattr"} <= set(dump.blocked_globals)


def test_blocked_globals_are_not_imported(tmp_path):
    path = tmp_path / "rollout_1.pt"
    raw = pickle_ops(PROTO2, EMPTY_DICT, text("samples"), EMPTY_LIST,
                     glob_op("antigravity", "fly"), APPEND, SETITEM, STOP)
    save_raw(path, raw)
    assert "antigravity" not in sys.modules
    dump = load_dump(path)
    assert "antigravity" not in sys.modules
    assert dump.blocked_globals == ["antigravity.fly"]


@pytest.mark.parametrize(
    ("attribute", "value"),
    [("most_common", glob_op("builtins", "set")), ("__name__", text("Evil")),
     ("fresh_attribute", text("x")),
     # an equal name of another type (numpy's str): a change all the same
     ("__name__", fragment(np.str_("Counter"))), ("__qualname__", fragment(np.str_("Counter")))],
    ids=["method", "name", "new attribute", "name as numpy str", "qualname as numpy str"],
)
def test_build_on_a_global_class_is_undone_and_refused(tmp_path, attribute, value):
    before = dict(vars(Counter)), Counter.__name__, Counter.__qualname__
    poison = pickle_ops(glob_op("collections", "Counter"), NONE, EMPTY_DICT, text(attribute),
                        value, SETITEM, TUPLE2, BUILD)
    path = tmp_path / "rollout_2.pt"
    save_raw(path, with_benign(poison))
    with pytest.raises(DumpError, match=r"modify collections\.Counter"):
        load_dump(path)
    assert (dict(vars(Counter)), Counter.__name__, Counter.__qualname__) == before
    assert type(Counter.__name__) is str and type(Counter.__qualname__) is str
    assert Counter("aab").most_common(1) == [("a", 2)]


def test_codecs_and_reconstructor_only_serve_plain_uses(tmp_path):
    odd_encoding = pickle_ops(glob_op("_codecs", "encode"), MARK, text("abc"), text("rot13"),
                              TUPLE, REDUCE)
    foreign_base = pickle_ops(glob_op("copyreg", "_reconstructor"), MARK,
                              glob_op("collections", "OrderedDict"), glob_op("os", "_wrap_close"),
                              NONE, TUPLE, REDUCE)
    dump, payload = load_payload(tmp_path, with_benign(odd_encoding, foreign_base, TUPLE2))
    assert all(isinstance(p, Placeholder) for p in payload)
    assert {"_codecs.encode", "copyreg._reconstructor"} <= set(dump.blocked_globals)


def test_python2_names_serve_what_their_python3_names_serve(tmp_path):
    """Protocol 0-2 pickles may name builtins and copyreg as Python 2 did; those names
    resolve as the C unpickler renames them, a Python 2 name for anything not served
    stays refused under the name the file wrote, and ``_codecs.encode`` with a plain
    encoding makes bytes."""
    number_range = pickle_ops(glob_op("__builtin__", "xrange"), MARK, fragment(3), TUPLE, REDUCE)
    old_text = pickle_ops(glob_op("__builtin__", "unicode"), MARK, text("ab"), TUPLE, REDUCE)
    a_set = pickle_ops(glob_op("__builtin__", "set"), MARK, fragment([1, 2]), TUPLE, REDUCE)
    reconstructed = pickle_ops(glob_op("copy_reg", "_reconstructor"), MARK,
                               glob_op("collections", "OrderedDict"),
                               glob_op("__builtin__", "dict"), EMPTY_TUPLE, TUPLE, REDUCE)
    encoded = pickle_ops(glob_op("_codecs", "encode"), MARK, text("ab\u00e9"), text("latin1"),
                         TUPLE, REDUCE)
    not_served = pickle_ops(glob_op("UserDict", "OrderedDict"), EMPTY_TUPLE, REDUCE)
    raw = with_benign(MARK, number_range, old_text, a_set, reconstructed, encoded, not_served,
                      TUPLE)
    dump, payload = load_payload(tmp_path, raw)
    assert payload[:5] == (range(3), "ab", {1, 2}, OrderedDict(), b"ab\xe9")
    assert type(payload[3]) is OrderedDict
    assert isinstance(payload[5], Placeholder)
    assert dump.blocked_globals == ["UserDict.OrderedDict"]


def test_resaving_a_hostile_dump_writes_no_globals(tmp_path):
    path = save_dump(tmp_path / "rollout_0.pt", load_dump(FIXTURES / "hostile_pickle.pt").samples)
    dump = load_dump(path)
    assert dump.blocked_globals == []
    assert "posix.system" in events_or_empty(dump.samples[0])[1]["attrs"]["note"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_archive_is_refused(tmp_path):
    path = tmp_path / "rollout_1.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(path))
    with pytest.raises(DumpError, match="TorchScript"):
        load_dump(path)


def test_placeholder_classes_are_read_only():
    dump = load_dump(FIXTURES / "hostile_pickle.pt")
    cls = type(events_or_empty(dump.samples[0])[1]["attrs"]["note"])
    with pytest.raises(TypeError):
        cls.__setstate__ = print
    assert repr(cls) == f"<placeholder class {cls.placeholder_global}>"


def test_restricted_unpickler_is_the_c_unpickler():
    import _pickle

    from slime_trace_widget.sources.dumps import unpickler

    assert issubclass(unpickler.RestrictedUnpickler, _pickle.Unpickler)
