"""OTLP export into a live Phoenix (the backend the README shows), read back with
Phoenix's own client.

Phoenix lives in a virtualenv of its own (its dependencies are not ours): the one
named by ``STW_PHOENIX_VENV``, else one made on first use under
``~/.cache/slime-trace-widget``. A fixture starts ``phoenix serve`` on free ports with a
fresh working folder, and stops it after the module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from slime_trace_widget.export.otlp import to_otlp
from slime_trace_widget.export.otlp_spans import exported_span_count
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.values import MAX_STRING_CHARS, clean_text
from tests.browser.test_hostile_strings_browser import HOSTILE, write_hostile_dump
from tests.export.test_otlp import decoded
from tests.support.browser import free_port

pytestmark = pytest.mark.slow

PHOENIX = "arize-phoenix==20.26.1"
FIXTURES = Path(__file__).parents[1] / "fixtures"
#: Generous limits for a busy machine: installing Phoenix, starting it, reading back.
INSTALL_SECONDS = 1800
START_SECONDS = 180
READ_SECONDS = 120

#: Run by Phoenix's Python: every span of the default project as JSON lines.
READ_BACK = """
import json, sys
from phoenix.client import Client
spans = Client(base_url=sys.argv[1]).spans.get_spans(
    project_identifier="default", limit=1_000_000, timeout=60)
for span in spans:
    print(json.dumps(span, default=str))
"""


def phoenix_python() -> Path:
    """The Python of a virtualenv with Phoenix, made (once per machine) when missing."""
    venv = Path(os.environ.get("STW_PHOENIX_VENV") or
                Path.home() / ".cache" / "slime-trace-widget" / PHOENIX.replace("==", "-"))
    python = venv / "bin" / "python"
    if not (venv / "bin" / "phoenix").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                       timeout=INSTALL_SECONDS)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", PHOENIX], check=True,
                       timeout=INSTALL_SECONDS)
    return python


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A live ``phoenix serve`` on free ports: (its base URL, its Python)."""
    python = phoenix_python()
    port = free_port()
    folder = tmp_path_factory.mktemp("phoenix")
    environment = {**os.environ, "PHOENIX_PORT": str(port), "PHOENIX_HOST": "127.0.0.1",
                   "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_WORKING_DIR": str(folder),
                   "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = (folder / "phoenix.log").open("wb")
    server = subprocess.Popen([str(python.parent / "phoenix"), "serve"], env=environment,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while not _healthy(url):
            assert server.poll() is None, (folder / "phoenix.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "Phoenix did not start"
            time.sleep(0.5)
        yield url, python
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(60)
        log.close()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def read_back(phoenix: tuple[str, Path], expected: int) -> list[dict]:
    """Phoenix's spans once it holds ``expected`` (it writes what it takes in batches)."""
    url, python = phoenix
    deadline = time.monotonic() + READ_SECONDS
    while True:
        lines = subprocess.run([str(python), "-c", READ_BACK, url], check=True,
                               capture_output=True, text=True, timeout=READ_SECONDS).stdout
        spans = [json.loads(line) for line in lines.splitlines()]
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def test_phoenix_gets_one_trace_per_sample_with_every_parent(phoenix, tmp_path: Path) -> None:
    frames = load_frames([FIXTURES / "small.pt", FIXTURES / "edge_open_span.pt"])
    report = to_otlp(frames, f"{phoenix[0]}/v1/traces", batch_spans=200)
    sent = decoded(frames)
    assert report.spans == len(sent) == exported_span_count(frames)
    got = read_back(phoenix, len(sent))
    assert len(got) == len(sent)
    roots = [span for span in got if span["parent_id"] is None]
    assert len(roots) == report.traces == len({span["context"]["trace_id"] for span in got})
    assert {span["name"] for span in roots} == {"sample"}
    ids = {span["context"]["span_id"] for span in got}
    assert all(span["parent_id"] in ids for span in got if span["parent_id"] is not None)
    assert Counter(span["name"] for span in got) == Counter(span["name"] for span in sent)
    by_id = {span["context"]["span_id"]: span for span in got}
    for span in sent[::7]:  # a sample of attributes, typed
        back = by_id[span["id"]]
        assert back["context"]["trace_id"] == span["trace"]
        for key, value in span["attrs"].items():
            assert back["attributes"][key] == value, key
    assert sum(len(span["events"]) for span in got) == len(frames.event_core)


def test_hostile_strings_survive_the_round_trip(phoenix, tmp_path: Path) -> None:
    dump = write_hostile_dump(tmp_path / "hostile.pt", HOSTILE)
    frames: TraceFrames = load_frames(dump)
    before = {span["context"]["span_id"] for span in read_back(phoenix, 0)}
    report = to_otlp(frames, phoenix[0])
    got = [span for span in read_back(phoenix, len(before) + report.spans)
           if span["context"]["span_id"] not in before]
    assert len(got) == report.spans
    names = {span["name"] for span in got}
    values = {value for span in got for value in span["attributes"].values()
              if isinstance(value, str)}
    keys = {key for span in got for key in span["attributes"]}
    for label, text in HOSTILE.items():
        expected = clean_text(text)  # lone surrogates become U+FFFD: UTF-8 has no room
        if len(expected) > MAX_STRING_CHARS:
            expected = expected[:MAX_STRING_CHARS]
            assert any(value.startswith(expected) and "truncated" in value
                       for value in values | names), label
            continue
        assert expected in names, label
        assert expected in values, label
        assert expected in keys, label
