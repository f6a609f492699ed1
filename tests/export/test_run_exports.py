"""A run dataset's dumps out to an OTLP receiver: each span arrives once, also when an
export stopped halfway (refused, unanswered, killed) and a later ``convert --otlp``
takes it up again, whatever its options and whatever the dump gained meanwhile."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from slime_trace_widget.cli import main
from slime_trace_widget.export.otlp import to_otlp
from slime_trace_widget.export.otlp_journal import SpanJournal
from slime_trace_widget.export.otlp_spans import exported_span_count, otlp_batches, span_ids
from slime_trace_widget.export.otlp_transport import OtlpExportError
from slime_trace_widget.export.run_exports import JOURNALS, LEDGER, Ledger, send_new_dumps
from slime_trace_widget.sources.dataset import convert
from slime_trace_widget.sources.loading import load_frames
from tests.sources.runs import FIXTURES, copy_run, settle
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.engine_traces import requests_for
from tests.support.scripted_otlp import spans_taken
from tests.support.sglang_driver import default_rids, write_dump

REPO = Path(__file__).parents[2]
#: Generous: a Python process starts and sends a few requests well within it.
WAIT_SECONDS = 300
#: A journal's ``T`` and ``N`` records, as they end the file after an answer.
_TAKEN_OR_NOT = {kind: kind.encode() + zlib.crc32(kind.encode()).to_bytes(4, "little")
                 for kind in "TN"}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A converted run of three dumps (copied by each test: the ledger is written)."""
    parent = tmp_path_factory.mktemp("run")
    run = copy_run(parent)
    out = parent / "dataset"
    assert main(["convert", str(run / "*.pt"), "--out", str(out), "--workers", "1"]) == 0
    return out


@pytest.fixture
def root(dataset: Path, tmp_path: Path) -> Path:
    """This test's copy of the dataset (of the module's dumps, left as they are)."""
    return shutil.copytree(dataset, tmp_path / "dataset")


def convert_again(dataset: Path, root: Path, *options: str) -> int:
    """``convert`` of the run's dumps into ``root``, with ``options``; the exit code."""
    return main(["convert", str(dataset.parent / "debug" / "*.pt"), "--out", str(root),
                 "--workers", "1", *options])


def expected_spans(dataset: Path) -> int:
    """The spans of the run's dumps, each exported on its own."""
    return sum(exported_span_count(load_frames(path))
               for path in sorted((dataset.parent / "debug").glob("*.pt")))


def url_of(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1/traces"


def journals(root: Path) -> list[Path]:
    return sorted((root / JOURNALS).rglob("*.spans"))


def assert_all_arrived_once(dataset: Path, root: Path, server) -> None:
    """Every span of the run at ``root`` (a copy of ``dataset``) arrived, once; the ledger
    lists the three dumps and no journal is left."""
    taken = spans_taken(server.bodies)
    assert set(taken.values()) == {1}  # no span arrived twice
    assert sum(taken.values()) == expected_spans(dataset)  # and none is missing
    assert len(json.loads((root / LEDGER).read_text())["targets"][f"otlp:{url_of(server)}"]) == 3
    assert journals(root) == []


@pytest.mark.parametrize("script", [
    [200, 200, 400],             # the third request refused
    [200, 200, 413, 200, 400],   # the third one too large: its first half taken, not its second
], ids=["whole-requests", "inside-a-split-request"])
def test_an_export_that_stopped_resumes_after_what_arrived(dataset: Path, root: Path,
                                                            scripted, script) -> None:
    url = url_of(scripted)
    scripted.script = list(script)
    with pytest.raises(OtlpExportError, match="HTTP 400"):
        send_new_dumps(root, url, batch_spans=50)
    arrived = sum(spans_taken(scripted.bodies).values())
    assert len(journals(root)) == 1

    reports = send_new_dumps(root, url, batch_spans=50)
    assert_all_arrived_once(dataset, root, scripted)
    assert sum(report.spans for report in reports) == expected_spans(dataset) - arrived
    assert sum(report.resumed_spans for report in reports) == arrived
    assert send_new_dumps(root, url, batch_spans=50) == []


def test_a_resume_with_other_options_sends_the_rest_once(dataset: Path, root: Path,
                                                         scripted) -> None:
    """Begun by ``convert --otlp`` (the service name given, requests cut by size), taken
    up by the API with the defaults (None) and other batches: the spans are the same."""
    url = url_of(scripted)
    scripted.script = [413, 200, 400]
    assert convert_again(dataset, root, "--otlp", url) == 2
    first = sum(spans_taken(scripted.bodies).values())
    assert first > 0
    reports = send_new_dumps(root, url, batch_spans=7, include_text=False)
    assert_all_arrived_once(dataset, root, scripted)
    assert sum(report.resumed_spans for report in reports) == first


def test_a_request_without_a_reply_is_not_sent_by_the_next_run(dataset: Path, root: Path,
                                                                scripted, capsys) -> None:
    url = url_of(scripted)
    scripted.script = [200, "hang up"]  # the first dump taken, the second unanswered
    assert convert_again(dataset, root, "--otlp", url) == 2
    assert "it may have arrived, so it is not sent again" in capsys.readouterr().err
    [_, unanswered] = [spans_taken([body]) for body in scripted.bodies]  # it arrived

    assert convert_again(dataset, root, "--otlp", url) == 0
    assert_all_arrived_once(dataset, root, scripted)
    assert (f"{sum(unanswered.values())} spans not sent again: a request of them got no "
            "reply") in capsys.readouterr().out


def test_a_sender_killed_while_a_request_was_out_does_not_send_it_again(
        dataset: Path, root: Path, scripted) -> None:
    """Killed after the receiver took its second request, before any reply reached it:
    the journal held that request before it went out, so the next run leaves it out."""
    url = url_of(scripted)
    scripted.script = [200, "kill sender"]
    sender = _sender(root, url, after_a_line=True, stdin=subprocess.PIPE)
    scripted.sender = sender.pid  # known before it sends anything: it waits for a line
    sender.communicate(b"go\n", timeout=WAIT_SECONDS)
    assert sender.returncode == -9
    assert sum(spans_taken(scripted.bodies).values()) == 100

    reports = send_new_dumps(root, url, batch_spans=50)
    assert_all_arrived_once(dataset, root, scripted)
    assert sum(report.unanswered_spans for report in reports) == 50


def test_spans_a_dump_gained_after_a_stop_are_sent_and_none_twice(tmp_path: Path,
                                                                   scripted) -> None:
    """Converted again with the engines' traces (the same dump, so the same key), the
    dump's export has more spans, in another order: each still arrives once."""
    dump = write_dump(tmp_path / "rollout_3.pt", default_rids(8, seed=5), seed=5,
                      rollout_id=3)
    engine = store_requests(requests_for(load_frames(dump), pd=True, seed=5),
                            tmp_path / "engine", SKEWS)
    root = tmp_path / "dataset"
    convert([str(dump)], root, settle_seconds=0, progress=False)
    url = url_of(scripted)
    scripted.script = [200, 200, 200, 400]
    with pytest.raises(OtlpExportError, match="HTTP 400"):
        send_new_dumps(root, url, batch_spans=4)
    assert len(convert([str(dump)], root, engine_traces=str(engine), settle_seconds=0,
                       progress=False).converted) == 1

    send_new_dumps(root, url, batch_spans=4)
    joined = load_frames(root)
    wanted = {span.span_id for batch in otlp_batches(joined)
              for resource in batch.request.resource_spans
              for scope in resource.scope_spans for span in scope.spans}
    taken = spans_taken(scripted.bodies)
    assert len(wanted) > exported_span_count(load_frames(dump))  # the engine's spans came
    assert {span_id for _, span_id in taken} == wanted
    assert set(taken.values()) == {1}


def test_the_journal_of_a_dump_changed_on_disk_goes(tmp_path: Path, scripted) -> None:
    run = copy_run(tmp_path)
    root = tmp_path / "dataset"
    assert main(["convert", str(run / "*.pt"), "--out", str(root), "--workers", "1"]) == 0
    url = url_of(scripted)
    scripted.script = [200, 400]
    with pytest.raises(OtlpExportError, match="HTTP 400"):
        send_new_dumps(root, url, batch_spans=50)
    [stale] = journals(root)
    changed = run / "rollout_0.pt"
    shutil.copy(FIXTURES / "rollout_eval_3.pt", changed)
    settle(changed)
    assert main(["convert", str(run / "*.pt"), "--out", str(root), "--workers", "1"]) == 0

    send_new_dumps(root, url, batch_spans=50)
    assert not stale.exists() and journals(root) == []


@pytest.mark.parametrize("ledger", [
    "{not json",
    '{"targets": {"otlp:x": "abc"}}',
    '{"targets": [1, 2]}',
    '{"targets": {"otlp:x": [1e400]}}',
    "[" * 100_000 + "]" * 100_000,
], ids=["not-json", "keys-a-string", "targets-a-list", "a-key-a-number", "deeply-nested"])
def test_an_unreadable_ledger_is_one_line_naming_it(dataset: Path, root: Path, scripted,
                                                    ledger: str, capsys) -> None:
    (root / LEDGER).write_text(ledger)
    assert convert_again(dataset, root, "--otlp", url_of(scripted)) == 2
    error = capsys.readouterr().err
    assert str(root / LEDGER) in error and "unreadable" in error
    assert error.count("\n") == 1 and "Traceback" not in error
    assert scripted.bodies == []


def test_exports_to_two_targets_at_once_keep_each_others_entries(tmp_path: Path) -> None:
    """Exports of one dataset to two targets each read the ledger at their start; what
    one writes after is kept by the other's later writes (else the dump it sent would
    go again, whole, on the next run)."""
    first, second = Ledger(tmp_path), Ledger(tmp_path)
    first.add("otlp:http://a:4318", ["rollout_0:h0"])
    second.add("otlp:http://b:4318", ["rollout_0:h0"])
    first.add("otlp:http://a:4318", ["rollout_1:h1"])
    second.add("wandb", ["rollout_0"])
    assert json.loads((tmp_path / LEDGER).read_text())["targets"] == {
        "otlp:http://a:4318": ["rollout_0:h0", "rollout_1:h1"],
        "otlp:http://b:4318": ["rollout_0:h0"], "wandb": ["rollout_0"]}
    assert Ledger(tmp_path).keys("otlp:http://b:4318") == {"rollout_0:h0"}


def test_a_damaged_journal_is_one_line_naming_it(dataset: Path, root: Path, scripted,
                                                 capsys) -> None:
    url = url_of(scripted)
    scripted.script = [200, 400]
    with pytest.raises(OtlpExportError, match="HTTP 400"):
        send_new_dumps(root, url, batch_spans=50)
    [journal] = journals(root)
    journal.write_bytes(b"not a journal")
    assert convert_again(dataset, root, "--otlp", url) == 2
    error = capsys.readouterr().err
    assert str(journal) in error and error.count("\n") == 1
    assert len(scripted.bodies) == 1


def test_spans_the_receiver_rejected_are_reported(dataset: Path, root: Path, scripted,
                                                  capsys) -> None:
    """A receiver's OTLP partial success: the spans it took but rejected as invalid are
    in ``convert --otlp``'s line, not hidden in the count of spans sent."""
    scripted.script = [200, ("partial", 30)]
    assert convert_again(dataset, root, "--otlp", url_of(scripted)) == 0
    out = capsys.readouterr().out
    assert f"{expected_spans(dataset)} spans" in out
    assert ", 30 rejected by the receiver" in out


def test_a_sender_stopped_while_it_waits_to_retry_sends_that_request_next_run(
        dataset: Path, root: Path, scripted) -> None:
    """Ctrl-C while the export waits to try again a request the receiver answered 503:
    that request was not taken (the journal says so before the wait), so the next run
    sends its spans, none counted as may-have-arrived."""
    url = url_of(scripted)
    scripted.script = [200, "503 later"]
    sender = _sender(root, url, stderr=subprocess.PIPE)
    refused = _TAKEN_OR_NOT["N"]
    deadline = time.monotonic() + WAIT_SECONDS  # a hang guard, not a synchronisation
    while not any(path.read_bytes().endswith(refused) for path in journals(root)):
        assert sender.poll() is None and time.monotonic() < deadline, "no refusal recorded"
        time.sleep(0.05)
    sender.send_signal(signal.SIGINT)  # it waits up to 30 s before trying again
    assert "KeyboardInterrupt" in sender.communicate(timeout=WAIT_SECONDS)[1].decode()

    reports = send_new_dumps(root, url, batch_spans=50)
    assert_all_arrived_once(dataset, root, scripted)
    assert sum(report.unanswered_spans for report in reports) == 0


def test_one_journal_given_to_two_exports_resumes_the_second(dataset: Path,
                                                             tmp_path: Path,
                                                             scripted) -> None:
    """``to_otlp`` twice with one journal, the first stopped by a refusal: the second
    sends only the spans the first did not, and keeps the first's records."""
    frames = load_frames(sorted((dataset.parent / "debug").glob("*.pt"))[0])
    journal = SpanJournal(tmp_path / "dump.spans")
    scripted.script = [200, 200, 400]
    with pytest.raises(OtlpExportError, match="HTTP 400"):
        to_otlp(frames, url_of(scripted), batch_spans=50, journal=journal)
    report = to_otlp(frames, url_of(scripted), batch_spans=50, journal=journal)
    taken = spans_taken(scripted.bodies)
    assert set(taken.values()) == {1} and len(taken) == exported_span_count(frames)
    assert report.resumed_spans == 100
    assert len(SpanJournal(tmp_path / "dump.spans").confirmed) == len(taken)


def test_a_second_export_of_a_dataset_at_once_is_refused_naming_it(dataset: Path,
                                                                   root: Path, scripted,
                                                                   capsys) -> None:
    """While one export of the dataset to an endpoint runs (its request held by the
    receiver), a second is refused at once in one line naming the dataset, and
    touches neither the ledger nor the journals; the first then ends whole."""
    url = url_of(scripted)
    release = threading.Event()
    scripted.script = [200, ("hold", release)]
    first = concurrent.futures.ThreadPoolExecutor(1)
    running = first.submit(send_new_dumps, root, url, batch_spans=50)
    try:
        assert scripted.held.wait(WAIT_SECONDS)
        assert convert_again(dataset, root, "--otlp", url) == 2
        error = capsys.readouterr().err
        assert f"{root}: another export of this dataset to {url}" in error
        assert error.count("\n") == 1
    finally:
        release.set()
        first.shutdown()
    running.result(WAIT_SECONDS)
    assert_all_arrived_once(dataset, root, scripted)


def test_a_partial_entry_of_an_earlier_copy_resumes_after_its_spans(dataset: Path,
                                                                    root: Path,
                                                                    scripted) -> None:
    """An export begun by the copy that kept ``partial`` span counts in the ledger (the
    first 100 spans of a dump, in the order of its requests of 50) and stopped: those
    spans are taken before, not sent again, and the entry goes."""
    from slime_trace_widget.sources.dataset.layout import read_dump
    from slime_trace_widget.sources.dataset.manifest import Manifest

    url = url_of(scripted)
    entry = Manifest.load(root).converted()[0]
    key = f"{entry['stem']}:{entry['blake2b']}"
    options = {"service_name": None, "batch_spans": 50, "batch_bytes": None,
               "include_text": None}
    (root / LEDGER).write_text(json.dumps({"targets": {}, "partial": {
        f"otlp:{url}": {key: {"spans": 100, "options": options}},
        "otlp:http://other/v1/traces": {key: {"spans": 7, "options": options}}}}))
    batches = list(otlp_batches(read_dump(root, entry), batch_spans=50))
    arrived = {span_id for batch in batches[:2] for span_id in span_ids(batch)}
    assert len(arrived) == 100

    reports = send_new_dumps(root, url, batch_spans=30)
    taken = spans_taken(scripted.bodies)
    assert set(taken.values()) == {1}
    assert not arrived & {span_id for _, span_id in taken}
    assert len(taken) == expected_spans(dataset) - 100
    assert sum(report.resumed_spans for report in reports) == 100
    ledger = json.loads((root / LEDGER).read_text())
    assert list(ledger["partial"]) == ["otlp:http://other/v1/traces"]  # kept for its turn


def _sender(root: Path, url: str, after_a_line: bool = False, **pipes: int
            ) -> subprocess.Popen:
    """``send_new_dumps(root, url, batch_spans=50)`` in a process of its own (this
    checkout's package), started at once or after it reads a line from its stdin."""
    wait = "sys.stdin.readline(); " if after_a_line else ""
    code = ("import sys; from slime_trace_widget.export.run_exports import send_new_dumps; "
            f"{wait}send_new_dumps(sys.argv[1], sys.argv[2], batch_spans=50)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", code, str(root), url], env=env, **pipes)
