"""A manifest entry whose field holds a value of another kind (a hand edit, another
tool's write) is an unreadable manifest, named with the entry and the field, for the
convert and every reader that loads it; never a traceback from deep inside, nor a dump
read wrongly. The dataset is the shared run's fixtures, converted by the local pool; the
damage is done to its real ``manifest.json``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.sources.dataset import Manifest, convert, open_dataset
from slime_trace_widget.sources.dumps import DumpError
from tests.sources.runs import copy_run

#: (field, value written into one converted entry, what the error says it must be).
MALFORMED = [
    ("files", 5, "a list of strings"),
    ("files", [["samples/rollout_id=0/x.parquet"]], "a list of strings"),
    ("rollouts", ["0"], "a list of integers"),
    ("rollouts", [True], "a list of integers"),
    ("stem", 5, "a file name without a folder"),
    ("stem", "../../elsewhere", "a file name without a folder"),
    ("size", "12", "an integer or null"),
    ("mtime_ns", 1.5, "an integer or null"),
    ("status", "done", "one of 'ok', 'failed'"),
    ("kind", ["train"], "one of 'train', 'eval'"),
    ("file", None, "a string"),
    ("blake2b", 7, "a string"),
    ("meta", [], "an object of paths, rollout_ids, warnings, t0 and t1"),
    ("meta", {"paths": [], "rollout_ids": [], "warnings": [], "t0": 1.0, "t1": 2.0},
     "an object of paths, rollout_ids, warnings, t0 and t1"),
    ("meta", {"paths": [], "rollout_ids": [], "warnings": {}, "t0": "1", "t1": 2.0},
     "an object of paths, rollout_ids, warnings, t0 and t1"),
    ("samples", "38", "an integer"),
    ("last_error", 3, "a string"),
    ("engine_traces", {"a": 1}, "a list of lists"),
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The shared run and its dataset, converted once; each test damages a copy of its
    manifest."""
    parent = tmp_path_factory.mktemp("converted")
    run = copy_run(parent)
    root = parent / "ds"
    convert(str(run / "*.pt"), root, progress=False, workers=1)
    return run, root


#: A field's value in :func:`damage` that drops the field.
DROPPED = object()


@pytest.fixture
def damage(converted: tuple[Path, Path]):
    """Set the fields given (:data:`DROPPED`: drop them) in the first converted entry of
    the dataset's manifest, for one test; the dump's path. The manifest is restored
    after the test."""
    _, root = converted
    manifest = root / "manifest.json"
    whole = manifest.read_text()

    def damaged(**fields: Any) -> str:
        data = json.loads(whole)
        dump = sorted(data["dumps"])[0]
        for field, value in fields.items():
            if value is DROPPED:
                del data["dumps"][dump][field]
            else:
                data["dumps"][dump][field] = value
        manifest.write_text(json.dumps(data))
        return dump

    yield damaged
    manifest.write_text(whole)


def unreadable(root: Path, dump: str, problem: str) -> str:
    """The one-line error of the dataset's manifest, with its entry of ``dump``."""
    return re.escape(f"{root / 'manifest.json'}: unreadable manifest (the entry of "
                     f"{dump!r}{problem})")


@pytest.mark.parametrize(("field", "value", "meaning"), MALFORMED,
                         ids=[f"{field}-{json.dumps(value)[:20]}"
                              for field, value, _ in MALFORMED])
def test_a_field_of_another_kind_is_named_by_the_convert_and_the_readers(
        converted: tuple[Path, Path], damage, field: str, value: Any, meaning: str) -> None:
    """``"files": 5`` in an entry: a rerun of convert failed with ``TypeError: 'int' object
    is not iterable`` (exit 1, a traceback); other fields crashed readers the same way, or
    were read as what they are not."""
    run, root = converted
    dump = damage(**{field: value})
    shown = json.dumps(value)
    shown = shown if len(shown) <= 60 else f"{shown[:57]}..."  # a long value, cut short
    expected = unreadable(root, dump, f": {field!r} is {shown}, not {meaning}")
    with pytest.raises(DumpError, match=f"^{expected}$"):
        convert(str(run / "*.pt"), root, progress=False, workers=1)
    with pytest.raises(DumpError, match=f"^{expected}$"):
        open_dataset(root)
    with pytest.raises(DumpError, match=f"^{expected}$"):
        Manifest.load(root, must_exist=True)


@pytest.mark.parametrize("field", ["stem", "rollouts", "meta", "blake2b", "status"])
def test_a_converted_entry_without_a_field_readers_look_up_is_named(
        converted: tuple[Path, Path], damage, field: str) -> None:
    root = converted[1]
    dump = damage(**{field: DROPPED})
    with pytest.raises(DumpError, match=f"^{unreadable(root, dump, f' has no {field!r}')}$"):
        open_dataset(root)


def test_a_long_value_is_shown_cut_short(converted: tuple[Path, Path], damage) -> None:
    root = converted[1]
    dump = damage(files="x" * 500)
    with pytest.raises(DumpError) as raised:
        open_dataset(root)
    assert str(raised.value) == (f"{root / 'manifest.json'}: unreadable manifest (the entry "
                                 f"of {dump!r}: 'files' is \"{'x' * 56}..., not a list of "
                                 "strings)")


def test_what_converts_write_and_unknown_fields_load(converted: tuple[Path, Path],
                                                     damage) -> None:
    """Every entry a convert writes loads (a failed one, one whose size a moved link left
    null), and a field the manifest does not know yet is left alone."""
    run, root = converted
    damage(size=None, a_later_field={"any": ["thing"]})
    assert len(Manifest.load(root).converted()) == 3
    failed = {"file": "x.pt", "stem": "x-0123456789abcdef", "size": 1, "mtime_ns": 2,
              "status": "failed", "error": "x.pt: refused", "files": []}
    manifest = root / "manifest.json"
    data = json.loads(manifest.read_text())
    data["dumps"][str(run / "x.pt")] = failed
    manifest.write_text(json.dumps(data))
    assert len(Manifest.load(root).dumps) == 4
    assert len(open_dataset(root).paths) == 3
