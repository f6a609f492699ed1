"""Tests for slime_trace_widget.dump: real .pt files through torch.load.

The hostile cases check the one promise that matters most: loading a dump by
default never runs code from it, while the benign data next to the payload
still loads.
"""

import builtins
import collections
import contextlib
import datetime
import decimal
import enum
import functools
import io
import math
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import types
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slime_trace_widget.sources.dumps import DumpError, LoadedDump, Placeholder, save_dump
from slime_trace_widget.sources.dumps.paths import dump_kind
from slime_trace_widget.sources.loading import load_dump, load_dumps, load_frames

FIXTURES = Path(__file__).parents[1] / "fixtures"
FIXTURE_MARKER = Path("/tmp/slime_trace_widget_fixture_PWNED")

# From tests/fixtures/README.md: samples, traced samples, span starts, span ends,
# instant events, statuses.
EXPECTED = {
    "edge_bare_list.pt": (4, 4, 105, 105, 19, {"completed": 3, "truncated": 1}),
    "edge_empty.pt": (0, 0, 0, 0, 0, {}),
    "edge_legacy_torch_format.pt": (4, 4, 54, 54, 11, {"completed": 4}),
    "edge_malformed_events.pt": (12, 7, 33, 31, 7, {"completed": 9}),
    "edge_open_span.pt": (9, 9, 484, 475, 84, {"completed": 6, "pending": 1, "truncated": 2}),
    "edge_orphan_end.pt": (4, 4, 55, 59, 18, {"completed": 4}),
    "edge_partial_rollout_gap.pt": (4, 4, 111, 111, 37, {"completed": 4}),
    "edge_sample_objects.pt": (4, 4, 124, 124, 21, {"completed": 4}),
    "edge_untraced_mixed.pt": (8, 4, 16, 16, 0, {"completed": 8}),
    "edge_weird_values.pt": (3, 3, 21, 21, 3, {"completed": 1, "failed": 1, "truncated": 1}),
    "legacy_v0_pd.pt": (8, 8, 80, 80, 21, {"completed": 7, "truncated": 1}),
    "legacy_v1_pd.pt": (8, 8, 121, 121, 41, {"completed": 6, "truncated": 2}),
    "rollout_eval_3.pt": (22, 22, 294, 294, 64, {"completed": 22}),
    "small.pt": (8, 8, 257, 257, 45, {"completed": 6, "truncated": 2}),
    "hostile_pickle.pt": (1, 1, 1, 1, 0, {"completed": 1}),
}
CORRUPT = ["edge_corrupt_empty_file.pt", "edge_corrupt_garbage.pt", "edge_corrupt_truncated.pt"]
NEEDS_SLIME_OR_HOSTILE = {"edge_sample_objects.pt", "hostile_pickle.pt"}


def events_of(sample: dict) -> list:
    """The carrier's event list, or [] for untraced / damaged carriers."""
    trace = sample.get("trace")
    events = trace.get("events") if isinstance(trace, dict) else None
    return events if isinstance(events, list) else []


def summarize(dump: LoadedDump) -> tuple:
    """The README's columns, counted by scanning the loaded records."""
    kinds: Counter[str] = Counter()
    for sample in dump.samples:
        kinds.update(e.get("type") for e in events_of(sample) if isinstance(e, dict))
    statuses = Counter(s.get("status") for s in dump.samples if "status" in s)
    return (
        len(dump.samples) + dump.warnings["sample_not_a_dict"],
        sum(1 for s in dump.samples if events_of(s)),
        kinds["span_start"],
        kinds["span_end"],
        kinds["event"],
        dict(statuses),
    )


@pytest.fixture(autouse=True)
def _no_fixture_marker():
    FIXTURE_MARKER.unlink(missing_ok=True)
    yield
    assert not FIXTURE_MARKER.exists(), "a dump ran code while loading"


# --------------------------------------------------------------------------- fixtures


def test_fixture_table_covers_every_file():
    assert set(EXPECTED) | set(CORRUPT) == {p.name for p in FIXTURES.glob("*.pt")}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_loads_with_readme_counts(name):
    dump = load_dump(FIXTURES / name)
    assert summarize(dump) == EXPECTED[name]
    assert all(isinstance(s, dict) for s in dump.samples)
    assert dump.path == str(FIXTURES / name) and dump.name == name


@pytest.mark.parametrize("name", sorted(set(EXPECTED) - NEEDS_SLIME_OR_HOSTILE))
def test_fixture_loads_trusted_like_safe(name):
    safe, trusted = load_dump(FIXTURES / name), load_dump(FIXTURES / name, trusted=True)
    assert trusted.trusted and not safe.trusted
    assert summarize(trusted) == summarize(safe) == EXPECTED[name]
    assert safe.blocked_globals == [] and trusted.blocked_globals == []


@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize("name", CORRUPT)
def test_corrupt_fixture_raises_named_one_line_error(name, trusted):
    with pytest.raises(DumpError) as info:
        load_dump(FIXTURES / name, trusted=trusted)
    message = str(info.value)
    assert name in message and "\n" not in message


def test_rollout_ids_and_kinds():
    small = load_dump(FIXTURES / "small.pt")
    assert (small.kind, small.rollout_id) == ("rollout", 0)
    evaluation = load_dump(FIXTURES / "rollout_eval_3.pt")
    assert (evaluation.kind, evaluation.rollout_id) == ("eval", 3)
    assert load_dump(FIXTURES / "edge_bare_list.pt").kind == "list"
    assert load_dump(FIXTURES / "edge_legacy_torch_format.pt").rollout_id == 17


@pytest.mark.parametrize("name", ["rollout_eval_3.pt", "eval_4.pt", "rollout_eval.pt", "eval.pt",
                                  "rollout-eval-3.pt", "rollout_3.pt", "evaluate_3.pt"])
def test_a_dump_s_kind_is_the_run_dataset_s(tmp_path, name):
    """``LoadedDump.kind`` says eval exactly where the run dataset's ``dump_kind`` does."""
    save_dump(tmp_path / name, [{"index": 0}], rollout_id=3)
    loaded = load_dump(tmp_path / name)
    assert (loaded.kind == "eval") == (dump_kind(name) == "eval")
    assert loaded.kind in ("eval", "rollout")
    torch.save([{"index": 0}], tmp_path / f"list_{name}")  # a bare list: id from the name
    bare = load_dump(tmp_path / f"list_{name}")
    assert (bare.kind == "eval") == (dump_kind(f"list_{name}") == "eval")
    if bare.kind == "eval" and "3" in name:
        assert bare.rollout_id == 3


def test_sample_objects_become_readable_records():
    dump = load_dump(FIXTURES / "edge_sample_objects.pt")
    assert dump.warnings["placeholder_sample_object"] == 4
    assert "slime.utils.types.Sample" in dump.blocked_globals
    for sample in dump.samples:
        assert isinstance(sample["status"], str) and sample["status"] == "completed"
        assert isinstance(sample["index"], int) and isinstance(sample["tokens"], list)
        assert isinstance(sample["metadata"], dict)
        assert isinstance(sample["spec_info"], dict)
        assert isinstance(sample["prefix_cache_info"], dict)
        assert sample["trace"]["version"] == 1 and events_of(sample)


def test_weird_values_keep_numpy_and_tensors():
    metadata = load_dump(FIXTURES / "edge_weird_values.pt").samples[0]["metadata"]
    assert isinstance(metadata["tensor"], torch.Tensor)
    assert isinstance(metadata["np"], np.floating) and math.isnan(metadata["nan"])


@pytest.mark.skipif(sys.modules.get("slime") is not None, reason="slime is installed here")
def test_trusted_sample_objects_without_slime_is_a_clear_error():
    with pytest.raises(DumpError, match=r"edge_sample_objects\.pt"):
        load_dump(FIXTURES / "edge_sample_objects.pt", trusted=True)


# --------------------------------------------------------------------------- hostile: fixture


def test_hostile_fixture_loads_inertly():
    dump = load_dump(FIXTURES / "hostile_pickle.pt")
    assert not FIXTURE_MARKER.exists()
    assert "posix.system" in dump.blocked_globals or "nt.system" in dump.blocked_globals
    assert dump.warnings["unsafe_global_blocked"] >= 1
    (sample,) = dump.samples
    start, end = events_of(sample)
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


def span_sample(index: int, attrs: dict) -> dict:
    """A sample dict whose one span carries ``attrs`` on its end record."""
    base = {"trace_id": "t" * 32, "sample_id": index, "group_id": 0, "attempt": 0,
            "span_id": f"{index:032x}", "name": "reward_model"}
    events = [{**base, "type": "span_start", "ts": 1.0},
              {**base, "type": "span_end", "ts": 2.0, "attrs": attrs}]
    return {"index": index, "status": "completed", "trace": {"version": 1, "events": events}}


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
    assert [len(events_of(s)) for s in dump.samples] == [2, 2]
    attrs = events_of(dump.samples[0])[1]["attrs"]
    assert attrs["ok"] == 1 and isinstance(attrs["deep"][0]["payload"], Placeholder)
    assert events_of(dump.samples[1])[1]["attrs"] == {"x": 2}


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
    assert events_of(dump.samples[0])[1]["attrs"] == {"ok": True}
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
    assert "posix.system" in events_of(dump.samples[0])[1]["attrs"]["note"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_archive_is_refused(tmp_path):
    path = tmp_path / "rollout_1.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(path))
    with pytest.raises(DumpError, match="TorchScript"):
        load_dump(path)


def test_placeholder_classes_are_read_only():
    dump = load_dump(FIXTURES / "hostile_pickle.pt")
    cls = type(events_of(dump.samples[0])[1]["attrs"]["note"])
    with pytest.raises(TypeError):
        cls.__setstate__ = print
    assert repr(cls) == f"<placeholder class {cls.placeholder_global}>"


def test_restricted_unpickler_is_the_c_unpickler():
    import _pickle

    from slime_trace_widget.sources.dumps import unpickler

    assert issubclass(unpickler.RestrictedUnpickler, _pickle.Unpickler)


# --------------------------------------------------------------------------- benign values


class Status(enum.Enum):
    COMPLETED = "completed"
    TRUNCATED = "truncated"


@dataclass
class Obj:
    index: int
    status: Status = Status.COMPLETED
    metadata: dict = field(default_factory=dict)


def rich_values() -> dict:
    """One of every allowed value type a sample's metadata or attrs may hold."""
    tensor_with_attr = torch.arange(3.0)
    tensor_with_attr.note = "kept"
    containers = {
        "od": OrderedDict(a=1), "dd": collections.defaultdict(list, {"k": [1]}),
        "dq": collections.deque([1, 2], maxlen=5), "counter": Counter("aab"),
        "set": {1, 2}, "frozen": frozenset({3}), "range": range(1, 9, 2),
        "slice": slice(1, None, 2),
    }
    scalars = {
        "complex": 1 + 2j, "bytes": b"\x00\xff", "empty_bytes": b"", "bytearray": bytearray(b"ab"),
        "when": datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc),
        "day": datetime.date(2026, 1, 2), "clock": datetime.time(3, 4),
        "delta": datetime.timedelta(seconds=1.5), "decimal": decimal.Decimal("1.25"),
        "uuid": uuid.UUID(int=7), "inf": math.inf, "text": "多语言 🚀" * 3,
    }
    tensors = {
        "tensor": torch.tensor([1.5, 2.5]), "long": torch.arange(4),
        "bf16": torch.ones(2, dtype=torch.bfloat16), "size": torch.Size([2, 3]),
        "device": torch.device("cpu"), "dtype": torch.float16,
        "param": torch.nn.Parameter(torch.ones(2)), "tensor_attr": tensor_with_attr,
    }
    arrays = {
        "array": np.arange(6).reshape(2, 3), "objects": np.array([{"a": 1}, None], dtype=object),
        "scalar": np.int32(7), "record": np.zeros(2, dtype=[("x", "<f4"), ("y", "<i8")]),
    }
    return {**containers, **scalars, **tensors, **arrays}


def assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert type(a) is type(b) and torch.equal(a, b)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    else:
        assert type(a) is type(b) and a == b


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("legacy", [False, True])
def test_rich_values_round_trip_safely(tmp_path, protocol, legacy):
    values = rich_values()
    path = tmp_path / "rollout_5.pt"
    torch.save({"rollout_id": 5, "samples": [{"index": 0, "metadata": values}]}, path,
               pickle_protocol=protocol, _use_new_zipfile_serialization=not legacy)
    dump = load_dump(path)
    assert dump.blocked_globals == [] and dump.warnings == Counter()
    loaded = dump.samples[0]["metadata"]
    assert loaded.keys() == values.keys()
    for key, value in values.items():
        assert_same(value, loaded[key])
    assert loaded["tensor_attr"].note == "kept"
    assert loaded["dq"].maxlen == 5 and loaded["dd"]["missing"] == []


def test_legacy_format_round_trip(tmp_path):
    path = tmp_path / "rollout_9.pt"
    samples = [span_sample(i, {"t": torch.ones(i + 1)}) for i in range(3)]
    torch.save({"rollout_id": 9, "samples": samples}, path, _use_new_zipfile_serialization=False)
    dump = load_dump(path)
    assert dump.rollout_id == 9 and len(dump.samples) == 3
    assert torch.equal(events_of(dump.samples[2])[1]["attrs"]["t"], torch.ones(3))


@pytest.fixture
def fake_slime_types():
    """A throwaway module standing in for slime.utils.types while saving, removed after."""
    module = types.ModuleType("fake_slime_types")

    class Sample:
        class Status(enum.Enum):
            COMPLETED = "completed"

        def __init__(self, index):
            self.index = index
            self.status = Sample.Status.COMPLETED
            self.trace = {"version": 1, "events": []}

    Sample.__module__ = Sample.Status.__module__ = module.__name__
    Sample.__qualname__, Sample.Status.__qualname__ = "Sample", "Sample.Status"
    module.Sample = Sample
    sys.modules[module.__name__] = module
    yield Sample
    sys.modules.pop(module.__name__, None)


@pytest.mark.parametrize("protocol", [2, 4])
def test_object_samples_with_nested_enum(tmp_path, fake_slime_types, protocol):
    path = tmp_path / "rollout_3.pt"
    torch.save({"samples": [fake_slime_types(0), fake_slime_types(1)]}, path,
               pickle_protocol=protocol)
    sys.modules.pop("fake_slime_types")
    dump = load_dump(path)
    assert "fake_slime_types" not in sys.modules
    assert [s["status"] for s in dump.samples] == ["completed", "completed"]
    assert [s["index"] for s in dump.samples] == [0, 1] and dump.rollout_id == 3
    assert "fake_slime_types.Sample.Status" in dump.blocked_globals


# --------------------------------------------------------------------------- save_dump


def test_save_dump_round_trip(tmp_path):
    samples = [span_sample(0, {"a": 1}), Obj(1, Status.TRUNCATED, {"source": "math"})]
    path = save_dump(tmp_path / "rollout_6.pt", samples, rollout_id=6)
    assert path == str(tmp_path / "rollout_6.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rollout_6.pt"]
    raw = torch.load(path, weights_only=True)
    assert raw["rollout_id"] == 6 and raw["samples"][1] == {
        "index": 1, "status": "truncated", "metadata": {"source": "math"}}
    dump = load_dump(path)
    assert dump.samples == raw["samples"] and dump.blocked_globals == []


JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20,
)


@settings(max_examples=30, deadline=None)
@given(samples=st.lists(st.dictionaries(st.text(max_size=8), JSON_LIKE, max_size=5), max_size=5))
def test_save_load_round_trip_property(tmp_path_factory, samples):
    path = save_dump(tmp_path_factory.mktemp("prop") / "rollout_1.pt", samples, rollout_id=1)
    dump = load_dump(path)
    assert dump.samples == samples and dump.rollout_id == 1 and dump.blocked_globals == []


def test_save_dump_rejects_non_samples(tmp_path):
    with pytest.raises(TypeError, match="sample 1"):
        save_dump(tmp_path / "x.pt", [{}, 3])


def test_save_load_trusted_objects_become_records(tmp_path):
    path = tmp_path / "rollout_1.pt"
    torch.save([Obj(0), {"index": 1}, 5], path)
    dump = load_dump(path, trusted=True)
    assert (dump.kind, dump.rollout_id) == ("list", 1)
    assert dump.samples == [{"index": 0, "status": "completed", "metadata": {}}, {"index": 1}]
    assert dump.warnings == Counter(object_sample_converted=1, sample_not_a_dict=1)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: None, "no such file"),
        (lambda p: p.write_bytes(b""), "zero-byte"),
        # Not random first: a first byte of 0x80 (1 run in 256) reads as a legacy pickle.
        (lambda p: p.write_bytes(b"junk" + os.urandom(64)), "not a torch dump"),
        (lambda p: p.mkdir(), "directory"),
        (lambda p: torch.save(("a", "b"), p), "top-level object is a tuple"),
        (lambda p: torch.save("samples", p), "top-level object is a str"),
        (lambda p: torch.save({"rollout_id": 1}, p), "no 'samples' key"),
        (lambda p: torch.save({"samples": {"0": {}}}, p), "'samples' is a dict"),
        (lambda p: p.write_bytes(b"PK\x03\x04" + b"\x00" * 40), "corrupt or truncated"),
    ],
)
def test_bad_input_is_a_one_line_dump_error(tmp_path, make, problem):
    path = tmp_path / "rollout_0.pt"
    make(path)
    with pytest.raises(DumpError) as info:
        load_dump(path)
    message = str(info.value)
    assert message.startswith(str(path)) and problem in message and "\n" not in message
    assert isinstance(info.value, ValueError)


def test_truncated_fixture_chains_the_cause():
    """In-process the original exception is chained; a worker's load reports the same
    text (tests/sources/test_workers.py), without a Python cause to chain."""
    with pytest.raises(DumpError) as info:
        load_dump(FIXTURES / "edge_corrupt_truncated.pt", isolate=False)
    assert info.value.__cause__ is not None


# --------------------------------------------------------------------------- load_dumps


def test_load_dumps_glob_natural_order(tmp_path, capsys):
    for i in (10, 2, 1):
        save_dump(tmp_path / f"rollout_{i}.pt", [{"index": i}], rollout_id=i)
    save_dump(tmp_path / "eval_4.pt", [{"index": 4}])
    dumps = load_dumps(str(tmp_path / "rollout_*.pt"))
    assert [d.rollout_id for d in dumps] == [1, 2, 10]
    assert capsys.readouterr().err == ""  # not a terminal: no progress bar
    evals = load_dumps([tmp_path / "eval_4.pt", str(tmp_path / "rollout_1*.pt")], progress=True)
    assert [(d.kind, d.rollout_id) for d in evals] == [("eval", 4), ("rollout", 1),
                                                      ("rollout", 10)]
    assert "3/3 dumps" in capsys.readouterr().err


def test_load_frames_shows_progress_for_many_files_when_watched(tmp_path, capsys, monkeypatch):
    for i in range(4):
        save_dump(tmp_path / f"rollout_{i}.pt", [])
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    load_frames(str(tmp_path / "*.pt"))
    assert "4/4 dumps" in capsys.readouterr().err
    load_frames(str(tmp_path / "rollout_[12].pt"))  # two small files: not worth a bar
    assert "dumps" not in capsys.readouterr().err


def test_load_dumps_single_path_and_duplicates(tmp_path):
    path = save_dump(tmp_path / "rollout_1.pt", [{"index": 1}])
    assert len(load_dumps(path)) == 1
    assert len(load_dumps([path, str(tmp_path / "*.pt")], progress=False)) == 1


def test_load_dumps_glob_without_match(tmp_path):
    with pytest.raises(DumpError, match="no files match"):
        load_dumps(str(tmp_path / "nothing_*.pt"))
