"""What a run dataset sent or logged is known by the dumps' content: a dump renamed or
copied (the same bytes, the same span ids) is not sent to an OTLP endpoint again nor
its trends logged again, a dump rewritten with other content is new to both; ledgers
an earlier copy keyed by file stem or name are still read. A dataset file gone is
named with the reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from slime_trace_widget.answers.trends import rollout_trends
from slime_trace_widget.cli import main
from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.export.otlp import to_otlp
from slime_trace_widget.export.otlp_journal import SpanJournal
from slime_trace_widget.export.otlp_spans import exported_span_count
from slime_trace_widget.export.otlp_transport import OtlpExportError
from slime_trace_widget.export.run_exports import (
    LEDGER,
    _journal_folder,
    _journal_name,
    export_progress,
    log_new_trends,
    send_new_dumps,
)
from slime_trace_widget.export.trend_log import row_key
from slime_trace_widget.sources.dataset.layout import read_dump
from slime_trace_widget.sources.dataset.manifest import Manifest
from slime_trace_widget.sources.loading import load_frames
from tests.export.test_run_exports import journals, url_of
from tests.export.test_trend_log import tensorboard_points
from tests.sources.runs import copy_run, settle
from tests.support.scripted_otlp import spans_taken


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """The three dumps of the shared run (rollout_0, rollout_7: train ids 0 and 3;
    rollout_eval_3: eval id 3), in the test's own folder."""
    return copy_run(tmp_path)


def convert(run: Path, out: Path, *extra: str) -> int:
    return main(["convert", str(run / "*.pt"), "--out", str(out), "--workers", "1", *extra])


def rewrite(dump: Path, rollout_id: int) -> None:
    """``dump`` replaced by a demo dump of ``rollout_id``: other bytes, the same name."""
    write_demo_dump(dump, n_samples=6, seed=11, rollout_id=rollout_id)
    settle(dump)


def test_a_renamed_or_copied_dump_is_not_sent_again(run: Path, tmp_path: Path,
                                                     scripted, capsys) -> None:
    root, url = tmp_path / "dataset", url_of(scripted)
    assert convert(run, root, "--otlp", url) == 0
    sent = sum(spans_taken(scripted.bodies).values())
    assert sent == sum(exported_span_count(load_frames(path)) for path in run.glob("*.pt"))
    (run / "rollout_0.pt").rename(run / "rollout_0_moved.pt")
    shutil.copy2(run / "rollout_7.pt", run / "rollout_7_copy.pt")
    capsys.readouterr()

    assert convert(run, root, "--otlp", url) == 0
    assert "sent 0 dump(s), 0 spans" in capsys.readouterr().out
    assert sum(spans_taken(scripted.bodies).values()) == sent  # not one span more
    assert export_progress(root, url) == (4, 4)


def test_a_dump_rewritten_with_other_content_is_sent_again(run: Path, tmp_path: Path,
                                                           scripted) -> None:
    root, url = tmp_path / "dataset", url_of(scripted)
    assert convert(run, root, "--otlp", url) == 0
    before = len(scripted.bodies)
    rewrite(run / "rollout_0.pt", 0)
    assert convert(run, root, "--otlp", url) == 0
    taken = spans_taken(scripted.bodies[before:])
    assert sum(taken.values()) == exported_span_count(load_frames(run / "rollout_0.pt"))
    assert set(spans_taken(scripted.bodies).values()) == {1}


def test_a_ledger_keyed_by_stem_is_read_and_its_journal_resumed(run: Path, tmp_path: Path,
                                                               scripted) -> None:
    """An earlier copy's ``stem:hash`` keys say which dumps went; a journal it began for
    a dump under that key resumes after the spans that arrived."""
    root, url = tmp_path / "dataset", url_of(scripted)
    assert convert(run, root) == 0
    target = f"otlp:{url}"
    first, begun, *_ = Manifest.load(root).converted()
    old_keys = [f"{entry['stem']}:{entry['blake2b']}" for entry in (first, begun)]
    (root / LEDGER).write_text(json.dumps({"targets": {target: old_keys[:1]}}))
    journal = _journal_folder(root, target) / _journal_name(old_keys[1])
    journal.parent.mkdir(parents=True)
    scripted.script = [200, 400]
    with pytest.raises(OtlpExportError, match="HTTP 400"):
        to_otlp(read_dump(root, begun), url, batch_spans=50,
                journal=SpanJournal(journal, f"{target}\n{old_keys[1]}"))
    scripted.bodies.clear()

    reports = send_new_dumps(root, url, batch_spans=50)
    taken = spans_taken(scripted.bodies)
    assert set(taken.values()) == {1}
    expected = sum(exported_span_count(load_frames(path)) for path in run.glob("*.pt"))
    assert sum(taken.values()) == expected - exported_span_count(load_frames(first["path"])
                                                                 ) - 50
    assert sum(report.resumed_spans for report in reports) == 50
    assert journals(root) == []
    assert export_progress(root, url) == (3, 3)


def test_a_missing_dataset_file_is_named_with_the_reason(run: Path, tmp_path: Path,
                                                        scripted, capsys) -> None:
    root = tmp_path / "dataset"
    assert convert(run, root) == 0
    [part] = (root / "samples" / "rollout_id=0").glob("*.parquet")
    part.unlink()
    capsys.readouterr()
    # convert only another dump, so the file stays gone (a convert of its own dump
    # would write it again) and the export meets it
    assert main(["convert", str(run / "rollout_7.pt"), "--out", str(root), "--workers", "1",
                 "--otlp", url_of(scripted)]) == 2
    error = capsys.readouterr().err
    assert f"{part}: no such file" in error and error.count("\n") == 1
    assert scripted.bodies == []


def rollout_steps(logdir: Path) -> dict[str, list[int]]:
    """The steps TensorBoard holds of ``duration_p50``, by prefix."""
    points = tensorboard_points(logdir)
    return {prefix: sorted(step for step, _ in points.get(f"{prefix}/duration_p50", []))
            for prefix in ("rollout", "eval")}


def test_a_renamed_dump_is_not_logged_again_and_a_rewritten_one_is(
        run: Path, tmp_path: Path, capsys) -> None:
    root, logdir = tmp_path / "dataset", tmp_path / "tb"
    target = f"tensorboard:{logdir}"
    assert convert(run, root, "--log-trends", target) == 0
    assert "logged 3 rollouts" in capsys.readouterr().out
    (run / "rollout_0.pt").rename(run / "rollout_0_moved.pt")
    assert convert(run, root, "--log-trends", target) == 0
    assert "logged 0 rollouts" in capsys.readouterr().out
    assert rollout_steps(logdir) == {"rollout": [0, 3], "eval": [3]}

    rewrite(run / "rollout_7.pt", 3)
    assert convert(run, root, "--log-trends", target) == 0
    assert "logged 1 rollouts" in capsys.readouterr().out
    assert rollout_steps(logdir) == {"rollout": [0, 3, 3], "eval": [3]}
    samples = tensorboard_points(logdir)["rollout/samples"]
    assert sorted(value for step, value in samples if step == 3) == [6, 8]  # both dumps


def test_a_trends_ledger_keyed_by_file_name_is_read_then_kept_by_content(
        run: Path, tmp_path: Path) -> None:
    """An earlier copy's keys (kind/rollout/file) say which rows went; they are written
    as content keys, so a dump rewritten afterwards is logged again."""
    root, logdir = tmp_path / "dataset", tmp_path / "tb"
    target = f"tensorboard:{logdir}"
    assert convert(run, root) == 0
    old_keys = [row_key(row) for _, row in rollout_trends(root).iterrows()]
    (root / LEDGER).write_text(json.dumps({"targets": {target: old_keys}}))
    report = log_new_trends(root, target)
    assert report.logged == [] and report.skipped == 3
    keys = json.loads((root / LEDGER).read_text())["targets"][target]
    assert len(keys) == 3 and not set(keys) & set(old_keys)

    rewrite(run / "rollout_0.pt", 0)
    assert convert(run, root) == 0
    report = log_new_trends(root, target)
    assert len(report.logged) == 1 and report.skipped == 2
    assert rollout_steps(logdir) == {"rollout": [0], "eval": []}
