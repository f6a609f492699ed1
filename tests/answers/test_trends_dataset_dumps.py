"""Trends of a run dataset folder are of the dumps its manifest lists, read from those
dumps' files alone: files a convert wrote but never recorded (it was interrupted) are
not read, and a dump with a damaged file is skipped with a warning, as ``open_dataset``
skips it, never failing with DuckDB's error. The fates are each dump's, however many
rollout ids its samples carry, as over the dump's frames.

The dumps are the fixtures slime wrote (the shared run of ``tests.sources.runs``) and a
demo dump saved as slime saves it; the damage is done to the dataset's real files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from slime_trace_widget.answers.ledger import signal_ledger
from slime_trace_widget.answers.trends import LEDGER_COLUMNS, ledger_trends, rollout_trends
from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.sources.dataset import Manifest, conversion, convert, open_dataset
from slime_trace_widget.sources.dataset.layout import part_path
from slime_trace_widget.sources.dumps import DumpError, save_dump
from slime_trace_widget.sources.loading import load_dump, load_frames
from tests.sources.runs import copy_run, settle


def converted(tmp_path: Path) -> tuple[Path, dict[str, dict]]:
    """The shared run converted: the dataset folder and its manifest entries by file name."""
    run = copy_run(tmp_path)
    root = tmp_path / "ds"
    convert(str(run / "*.pt"), root, progress=False, workers=1)
    return root, {Path(entry["path"]).name: entry for entry in Manifest.load(root).converted()}


def first_file(root: Path, entry: dict, table: str) -> Path:
    return part_path(root, table, entry["rollouts"][0], entry["stem"])


def garble_pages(path: Path) -> None:
    """Every byte between the leading magic and the footer flipped: the footer still
    reads (a cheap check sees a whole file), the pages do not."""
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    for i in range(4, len(data) - footer - 8):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    assert pq.read_metadata(path).num_rows > 0


def skipped(record: pytest.WarningsRecorder) -> dict[str, str]:
    """The dumps the warnings say were skipped: file name -> the warning."""
    out = {}
    for warning in record:
        text = str(warning.message)
        if text.startswith("skipped "):
            out[Path(text[len("skipped "):].split(": ", 1)[0]).name] = text
    return out


def test_files_a_convert_wrote_but_never_recorded_are_not_read(tmp_path: Path,
                                                                monkeypatch) -> None:
    """A convert stopped (Ctrl-C) after a worker wrote rollout_7's files, before the
    manifest recorded them, and stopped again while it removed them: trends read them
    all the same (rollout id 3 appeared)."""
    run = copy_run(tmp_path)
    root = tmp_path / "ds"
    convert([str(run / "rollout_0.pt")], root, progress=False, workers=1)

    def interrupted(*_: object, **__: object) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(Manifest, "record", interrupted)
    monkeypatch.setattr(conversion, "remove_stems", interrupted)  # the second Ctrl-C
    with pytest.raises(KeyboardInterrupt):
        convert([str(run / "rollout_7.pt")], root, progress=False, workers=1)
    monkeypatch.undo()
    assert list((root / "samples" / "rollout_id=3").glob("*.parquet")), "files were written"
    assert open_dataset(root).paths == [str(run / "rollout_0.pt")]
    for trends in (rollout_trends(root), ledger_trends(root)):
        assert trends["dump_file"].tolist() == ["rollout_0.pt"]
        assert trends["rollout_id"].tolist() == [0]


def test_a_dump_with_a_file_gone_or_cut_short_is_skipped_as_open_dataset_skips_it(
        tmp_path: Path) -> None:
    """rollout_0's samples file deleted, rollout_7's spans file cut short: trends failed
    with DuckDB's "No magic bytes found"; now both are skipped, each with a warning in
    open_dataset's words, and the eval dump's row is what it was. ledger_trends skips
    only the dumps whose files it reads (samples and events) are damaged."""
    root, entries = converted(tmp_path)
    before = rollout_trends(root)
    first_file(root, entries["rollout_0.pt"], "samples").unlink()
    spans = first_file(root, entries["rollout_7.pt"], "spans")
    spans.write_bytes(spans.read_bytes()[:500])
    with pytest.warns(RuntimeWarning) as record:
        failures = open_dataset(root).failures
    assert sorted(skipped(record)) == sorted(Path(path).name for path, _ in failures) == [
        "rollout_0.pt", "rollout_7.pt"]
    with pytest.warns(RuntimeWarning) as record:
        after = rollout_trends(root)
    warned = skipped(record)
    assert sorted(warned) == ["rollout_0.pt", "rollout_7.pt"]
    assert f"damaged dataset files ({spans}: " in warned["rollout_7.pt"]
    common = [c for c in after.columns if c in before.columns]  # the heaviest names differ
    pd.testing.assert_frame_equal(after[common], before.loc[
        before["dump_file"] == "rollout_eval_3.pt", common].reset_index(drop=True))
    with pytest.warns(RuntimeWarning) as record:  # it reads no spans: rollout_7 is whole
        assert ledger_trends(root)["dump_file"].tolist() == ["rollout_eval_3.pt",
                                                             "rollout_7.pt"]
    assert list(skipped(record)) == ["rollout_0.pt"]


def test_a_dump_whose_pages_are_damaged_is_skipped_and_no_duckdb_error_escapes(
        tmp_path: Path) -> None:
    """The eval dump's events file keeps its footer but not its pages: only reading it
    finds the damage (DuckDB failed the whole query); then every dump damaged."""
    root, entries = converted(tmp_path)
    garble_pages(first_file(root, entries["rollout_eval_3.pt"], "events"))
    with pytest.warns(RuntimeWarning) as record:
        trends = rollout_trends(root)
    assert list(skipped(record)) == ["rollout_eval_3.pt"]
    assert trends["dump_file"].tolist() == ["rollout_0.pt", "rollout_7.pt"]
    with pytest.warns(RuntimeWarning):
        assert [Path(path).name for path, _ in open_dataset(root).failures] == [
            "rollout_eval_3.pt"]
    first_file(root, entries["rollout_0.pt"], "samples").unlink()
    first_file(root, entries["rollout_7.pt"], "events").write_bytes(b"")
    with pytest.warns(RuntimeWarning) as record, pytest.raises(DumpError, match="3 dump"):
        rollout_trends(root)
    assert len(skipped(record)) == 3


def test_the_fates_are_the_dumps_whatever_rollout_ids_its_samples_carry(
        tmp_path: Path) -> None:
    """One dump whose samples carry rollout ids 4, 9 and none, its groups spanning them:
    the folder's trends took a group to be its members of one rollout id, so a group's
    rewards were judged in three pieces (signal shares 0.11 / 0.48 / 0.49 where the
    dump's frames give 0.80 / 0.62 / 0.82)."""
    demo = write_demo_dump(tmp_path / "demo.pt", seed=1, rollout_id=1)
    samples = load_dump(demo).samples
    for i, sample in enumerate(samples):
        sample["rollout_id"] = [4, 9, None][i % 3]
    dump = tmp_path / "run" / "rollout_multi.pt"
    dump.parent.mkdir()
    save_dump(dump, samples, rollout_id=None)
    settle(dump)
    convert([str(dump)], tmp_path / "ds", progress=False, workers=1)
    frames = load_frames(dump)
    expected = signal_ledger(frames)  # per rollout id, -1 for none: the frames' fates
    assert expected["share_signal"].between(0.01, 0.99).all()
    columns = ["rollout_id", *LEDGER_COLUMNS]
    for trends in (rollout_trends(frames), rollout_trends(tmp_path / "ds"),
                   rollout_trends(open_dataset(tmp_path / "ds")),
                   ledger_trends(frames), ledger_trends(tmp_path / "ds")):
        assert trends["rollout_id"].tolist() == [-1, 4, 9]
        pd.testing.assert_frame_equal(
            trends[columns].set_index("rollout_id"),
            expected[list(LEDGER_COLUMNS)].rename_axis("rollout_id"),
            check_dtype=False, check_index_type=False, rtol=1e-12)


def test_a_manifest_field_of_another_kind_is_named_not_a_traceback(tmp_path: Path) -> None:
    """``"files": 5`` in an entry: trends failed with ``TypeError: 'int' object is not
    iterable``; now, as open_dataset, they name the manifest, the entry and the field."""
    root, entries = converted(tmp_path)
    manifest = root / "manifest.json"
    data = json.loads(manifest.read_text())
    dump = entries["rollout_7.pt"]["path"]
    data["dumps"][dump]["files"] = 5
    manifest.write_text(json.dumps(data))
    expected = (f"{manifest}: unreadable manifest (the entry of {dump!r}: 'files' is 5, "
                "not a list of strings)")
    for trends in (rollout_trends, ledger_trends):
        with pytest.raises(DumpError) as raised:
            trends(root)
        assert str(raised.value) == expected
