"""Loading real ``.pt`` files: the fixture dumps, their kinds, bad input, many dumps.

Every fixture in tests/fixtures loads with the counts its README gives (and the
same trusted or not), a dump's kind and rollout id come from its contents or its
name, slime's Sample objects become records; a file that is not a dump, or a
damaged one, is a one-line DumpError naming it; ``load_dumps`` takes globs and
lists, in natural order, with a progress bar only where someone watches.
"""

import math
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from slime_trace_widget.sources.dumps import DumpError, LoadedDump, save_dump
from slime_trace_widget.sources.dumps.paths import dump_kind, dump_labels
from slime_trace_widget.sources.loading import load_dump, load_dumps, load_frames
from tests.support.dump_samples import events_or_empty

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: Every test fails if a load created the hostile fixture dump's marker file.
pytestmark = pytest.mark.usefixtures("no_fixture_marker")


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


def summarize(dump: LoadedDump) -> tuple:
    """The README's columns, counted by scanning the loaded records."""
    kinds: Counter[str] = Counter()
    for sample in dump.samples:
        kinds.update(e.get("type") for e in events_or_empty(sample) if isinstance(e, dict))
    statuses = Counter(s.get("status") for s in dump.samples if "status" in s)
    return (
        len(dump.samples) + dump.warnings["sample_not_a_dict"],
        sum(1 for s in dump.samples if events_or_empty(s)),
        kinds["span_start"],
        kinds["span_end"],
        kinds["event"],
        dict(statuses),
    )


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



@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize("name", CORRUPT)
def test_a_corrupt_fixture_among_others_fails_alone_with_its_error(name, trusted):
    """Trusted or not, the others load; the corrupt one is listed with the error its
    own load gives."""
    bad = FIXTURES / name
    with pytest.warns(RuntimeWarning, match="skipped"):
        frames = load_frames([bad, FIXTURES / "small.pt"], trusted=trusted, progress=False)
    with pytest.raises(DumpError) as info:
        load_dump(bad, trusted=trusted)
    assert frames.failures == [(str(bad), str(info.value))]
    assert frames.paths == [str(FIXTURES / "small.pt")] and len(frames.samples) == 8


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


@pytest.mark.parametrize(("relative", "kind", "rollout_id"), [
    # slime formats the template with rollout_id=f"eval_{id}": `{rollout_id}/data.pt`
    ("run/eval_3/data.pt", "eval", 3),
    ("run/rollout_eval_3/samples.pt", "eval", 3),
    ("run/3/data.pt", "train", None),
    ("run/rollout_3/data.pt", "train", 3),
    # folders above the one holding the id never decide
    ("eval_runs/3/data.pt", "train", None),
    ("eval_2024/3/data.pt", "train", None),
    ("eval_runs/rollout_3.pt", "train", 3),
    ("evaluation_team/run/rollout_3.pt", "train", 3),
    ("eval_2024/rollout_3.pt", "train", 3),
    ("eval_5/rollout_3.pt", "train", 3),
    ("run/eval_dumps_0/data.pt", "train", None),
    # the file's stem says eval as it always has
    ("run_1/eval.pt", "eval", None),
    ("run_1/rollout_eval_4.pt", "eval", 4),
])
def test_the_kind_and_id_come_from_the_name_the_template_filled(
        tmp_path, relative, kind, rollout_id):
    """The eval marker and the rollout id stand where slime's template put ``{rollout_id}``:
    the file's stem when it holds a digit, else the nearest folder holding one."""
    path = tmp_path / relative
    path.parent.mkdir(parents=True)
    torch.save([{"index": 0}], path)  # a bare list: its id comes from its path
    loaded = load_dump(path)
    assert dump_kind(str(path)) == dump_kind(relative) == kind
    assert (loaded.kind, loaded.rollout_id) == ("eval" if kind == "eval" else "list", rollout_id)
    save_dump(path, [{"index": 0}], rollout_id=7)
    assert load_dump(path).kind == ("eval" if kind == "eval" else "rollout")


@pytest.mark.parametrize(("paths", "labels"), [
    (["/r/runA/rollout_5.pt", "/r/runB/rollout_5.pt", "/r/runA/rollout_6.pt"],
     ["runA/rollout_5.pt", "runB/rollout_5.pt", "rollout_6.pt"]),
    (["x/r.pt", "x/r.pt", "y/x/r.pt"], ["x/r.pt", "x/r.pt #2", "y/x/r.pt"]),
    (["a/b/rollout_eval_3.pt", "c/b/rollout_eval_3.pt"],
     ["a/b/rollout_eval_3.pt", "c/b/rollout_eval_3.pt"]),
    (["<memory>", "<memory>"], ["<memory>", "<memory> #2"]),
    ([], []),
])
def test_each_dump_gets_a_label_of_its_own(paths, labels):
    assert dump_labels(paths) == labels
    assert [dump_kind(label) for label in labels] == [dump_kind(path) for path in paths]


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
        assert sample["trace"]["version"] == 1 and events_or_empty(sample)


def test_weird_values_keep_numpy_and_tensors():
    metadata = load_dump(FIXTURES / "edge_weird_values.pt").samples[0]["metadata"]
    assert isinstance(metadata["tensor"], torch.Tensor)
    assert isinstance(metadata["np"], np.floating) and math.isnan(metadata["nan"])


@pytest.mark.skipif(sys.modules.get("slime") is not None, reason="slime is installed here")
def test_trusted_sample_objects_without_slime_is_a_clear_error():
    with pytest.raises(DumpError, match=r"edge_sample_objects\.pt"):
        load_dump(FIXTURES / "edge_sample_objects.pt", trusted=True)


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


def _with_pickle(path: Path, change) -> None:
    """A real dump saved by torch, its ``data.pkl`` then changed by ``change``: the zip
    archive itself stays sound."""
    import zipfile

    torch.save({"rollout_id": 0, "samples": [{"index": i, "trace": {}} for i in range(40)]},
               path)
    with zipfile.ZipFile(path) as archive:
        members = [(info.filename, archive.read(info)) for info in archive.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members:
            archive.writestr(name, change(data) if name.endswith("/data.pkl") else data)


@pytest.mark.parametrize(("change", "cause"), [
    (lambda data: data[: len(data) // 2], "pickle data was truncated"),
    # the second sample's fetch of the key "index" made to fetch an index never stored
    (lambda data: data.replace(b"h\x05", b"h\xfe", 1), "Memo value not found at index 254"),
    (lambda data: data.replace(b"index", b"\xffndex", 1), "UnicodeDecodeError"),
])
@pytest.mark.parametrize("load", [load_dump, load_frames])
def test_a_damaged_pickle_in_a_sound_archive_says_so(tmp_path, change, cause, load):
    """The unpickler's own words (a memo index) told the user nothing about the file."""
    path = tmp_path / "rollout_0.pt"
    _with_pickle(path, change)
    with pytest.raises(DumpError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: cannot load torch zip archive: its pickled data is "
                              "damaged or cut short (")
    assert cause in message and "\n" not in message


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


def test_a_dump_named_twice_in_two_spellings_loads_once(tmp_path, monkeypatch):
    """``run/a.pt ./run/a.pt`` loaded (and converted) the same file twice."""
    (tmp_path / "run").mkdir()
    save_dump(tmp_path / "run" / "rollout_1.pt", [{"index": 1}])
    monkeypatch.chdir(tmp_path)
    spellings = ["run/rollout_1.pt", "./run/rollout_1.pt", str(tmp_path / "run" / "*.pt")]
    assert len(load_dumps(spellings, progress=False)) == 1
    assert load_frames(spellings).paths == ["run/rollout_1.pt"]


def test_load_dumps_glob_without_match(tmp_path):
    with pytest.raises(DumpError, match="no files match"):
        load_dumps(str(tmp_path / "nothing_*.pt"))


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="Linux's /proc")
def test_save_dump_where_no_file_can_be_made_is_an_os_error() -> None:
    """torch's writer, given the path, raised a RuntimeError quoting its C++ source
    ("[enforce fail at inline_container.cc...] open file failed")."""
    with pytest.raises(OSError) as info:
        save_dump("/proc/rollout_0.pt", [{"index": 0}], rollout_id=0)
    assert "enforce fail" not in str(info.value)
