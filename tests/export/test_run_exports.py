"""A run dataset's dumps out to an OTLP receiver: each span arrives once, also when an
export stopped halfway and a later ``convert --otlp`` takes it up again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from slime_trace_widget.cli import main
from slime_trace_widget.export.otlp_spans import exported_span_count
from slime_trace_widget.export.otlp_transport import OtlpExportError
from slime_trace_widget.export.run_exports import LEDGER, send_new_dumps
from slime_trace_widget.sources.loading import load_frames
from tests.sources.runs import copy_run
from tests.support.scripted_otlp import spans_taken


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A converted run of three dumps (copied by each test: the ledger is written)."""
    parent = tmp_path_factory.mktemp("run")
    run = copy_run(parent)
    out = parent / "dataset"
    assert main(["convert", str(run / "*.pt"), "--out", str(out), "--workers", "1"]) == 0
    return out


def expected_spans(dataset: Path) -> int:
    """The spans of the run's dumps, each exported on its own."""
    return sum(exported_span_count(load_frames(path))
               for path in sorted((dataset.parent / "debug").glob("*.pt")))


@pytest.mark.parametrize("script", [
    [200, 200, 400],             # the third request refused
    [200, 200, 413, 200, 400],   # the third one too large: its first half taken, not its second
], ids=["whole-requests", "inside-a-split-request"])
def test_an_export_that_stopped_resumes_after_what_arrived(dataset: Path, tmp_path: Path,
                                                            scripted, script) -> None:
    root = shutil.copytree(dataset, tmp_path / "dataset")
    url = f"http://127.0.0.1:{scripted.server_address[1]}/v1/traces"
    scripted.script = list(script)
    with pytest.raises(OtlpExportError, match="HTTP 400"):
        send_new_dumps(root, url, batch_spans=50)
    arrived = sum(spans_taken(scripted.bodies).values())
    partial = json.loads((root / LEDGER).read_text())["partial"][f"otlp:{url}"]
    assert [part["spans"] for part in partial.values()] == [arrived]  # kept as it arrived

    reports = send_new_dumps(root, url, batch_spans=50)
    taken = spans_taken(scripted.bodies)
    assert set(taken.values()) == {1}  # no span arrived twice
    assert sum(taken.values()) == expected_spans(dataset)
    assert sum(report.spans for report in reports) == expected_spans(dataset) - arrived
    ledger = json.loads((root / LEDGER).read_text())
    assert "partial" not in ledger and len(ledger["targets"][f"otlp:{url}"]) == 3
    assert send_new_dumps(root, url, batch_spans=50) == []


def test_a_resume_with_other_batch_options_is_refused(dataset: Path, tmp_path: Path,
                                                      scripted) -> None:
    root = shutil.copytree(dataset, tmp_path / "dataset")
    url = f"http://127.0.0.1:{scripted.server_address[1]}/v1/traces"
    scripted.script = [200, 400]
    with pytest.raises(OtlpExportError, match="HTTP 400"):
        send_new_dumps(root, url, batch_spans=50)
    with pytest.raises(OtlpExportError, match=r"partly sent .* with other options"):
        send_new_dumps(root, url, batch_spans=80)
    assert len(scripted.bodies) == 1
