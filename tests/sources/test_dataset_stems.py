"""Each dump of a run dataset has file stems of its own: two dumps never share a file.

slime saves evaluation dumps as ``eval_N/data.pt``: every one of them is named ``data``,
so only the hash of its path told their stems apart. That hash was 32 bits; a run's
paths soon held a pair alike, and the second dump's files replaced the first's without
a word. The dumps here are real fixtures converted by the local worker pool.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from itertools import count
from pathlib import Path

import pytest

from slime_trace_widget.sources.dataset import Manifest, convert, manifest, open_dataset
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.dumps.files import load_trusted
from tests.sources.runs import FIXTURES, settle

#: Samples of the second dump: fewer than the first's, so a dump's rows replacing the
#: other's show in the count.
SECOND_DUMP_SAMPLES = 5


def eval_paths_alike_in_32_bits(folder: Path) -> tuple[Path, Path]:
    """Two ``eval_N/data.pt`` paths under ``folder`` whose 32-bit blake2b path hashes are
    alike, as the stems of both were before (a birthday search: some 80 000 paths)."""
    seen: dict[str, Path] = {}
    for number in count():
        path = folder / f"eval_{number}" / "data.pt"
        tag = hashlib.blake2b(os.fsencode(str(path)), digest_size=4).hexdigest()
        if tag in seen:
            return seen[tag], path
        seen[tag] = path
    raise AssertionError("unreachable")


def two_eval_dumps(first: Path, second: Path) -> None:
    """The small fixture at ``first``; ``SECOND_DUMP_SAMPLES`` samples of another at
    ``second``; both settled."""
    for path in (first, second):
        path.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "small.pt", first)
    samples = load_trusted(str(FIXTURES / "legacy_v1_pd.pt")).samples[:SECOND_DUMP_SAMPLES]
    save_dump(second, samples, rollout_id=0)
    settle(first, second)


def read_back_whole(root: Path) -> None:
    """Every converted dump of ``root`` reads back with all the samples it was converted
    with, each dump's own, and no warning; no two entries share a stem."""
    entries = Manifest.load(root).converted()
    stems = [entry["stem"] for entry in entries]
    assert len({stem.casefold() for stem in stems}) == len(stems), stems
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frames = open_dataset(root)
    assert len(frames.samples) == sum(entry["samples"] for entry in entries)
    by_dump = frames.samples["dump"].value_counts().to_dict()
    assert {frames.paths[dump]: n for dump, n in by_dump.items()} == {
        entry["path"]: entry["samples"] for entry in entries}


def test_dumps_whose_path_hashes_were_alike_keep_their_own_files(tmp_path: Path) -> None:
    """eval_13652/data.pt and eval_138513/data.pt under one folder had the stem
    ``data-81c89bcb`` both: the dataset read back 10 samples, the second dump's five
    twice, instead of 8 + 5."""
    first, second = eval_paths_alike_in_32_bits(tmp_path / "run")
    two_eval_dumps(first, second)
    root = tmp_path / "ds"
    report = convert([str(first), str(second)], root, progress=False, workers=1)
    assert sorted(report.converted) == sorted([str(first), str(second)])
    read_back_whole(root)


def test_stems_alike_by_chance_are_told_apart(tmp_path: Path, monkeypatch) -> None:
    """No 64-bit hashes alike can be found to test with, so every path hashes alike here
    (a stand-in for :func:`manifest.path_tag`): the stems still differ from those in the
    manifest and from each other within a convert, and come out the same for the same
    manifest and dumps."""
    monkeypatch.setattr(manifest, "path_tag", lambda path, attempt: f"{attempt:016x}")
    first, second = tmp_path / "run" / "eval_1" / "data.pt", tmp_path / "run" / "eval_2" / "data.pt"
    two_eval_dumps(first, second)
    third = tmp_path / "run" / "eval_3" / "data.pt"
    third.parent.mkdir()
    shutil.copy(FIXTURES / "rollout_eval_3.pt", third)
    settle(third)
    root = tmp_path / "ds"
    convert([str(first)], root, progress=False, workers=1)
    planned = Manifest.load(root).new_stems([str(second), str(third)])
    assert planned == Manifest.load(root).new_stems([str(second), str(third)])
    report = convert([str(first), str(second), str(third)], root, progress=False, workers=1)
    assert sorted(report.converted) == [str(second), str(third)]
    assert report.unchanged == [str(first)]
    assert [Manifest.load(root).dumps[str(p)]["stem"] for p in (second, third)] == planned
    read_back_whole(root)


def test_a_stem_is_the_dump_s_name_and_a_64_bit_hash_of_its_path(tmp_path: Path) -> None:
    """A file name that is not UTF-8 (read back with surrogates) names its tables too."""
    stems = Manifest(tmp_path, {}).new_stems(
        [os.fsdecode(b"/runs/rollout_\xff.pt"), "/runs/rollout_3.pt"])
    assert stems[0].startswith("rollout_\udcff-")
    tag = hashlib.blake2b(b"/runs/rollout_3.pt", digest_size=8).hexdigest()
    assert stems[1] == f"rollout_3-{tag}"


@pytest.mark.parametrize("spelling", ["data", "DATA"])
def test_a_stem_alike_but_for_case_is_taken(tmp_path: Path, spelling: str) -> None:
    """A case-insensitive file system (macOS) takes ``DATA-…`` and ``data-…`` for one file:
    a stem an entry holds in any case is not given again."""
    path = "/runs/eval_1/data.pt"
    (first,) = Manifest(tmp_path, {}).new_stems([path])
    held = spelling + first[len("data"):]
    known = Manifest(tmp_path, {"/elsewhere/x.pt": {"status": "ok", "stem": held}})
    (second,) = known.new_stems([path])
    assert second.casefold() != held.casefold() and second.startswith("data-")
