"""Fixtures of the export tests: this package's own OTLP receiver, live, and a receiver
that answers from a script."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from slime_trace_widget.sources.engine.receiver import collect
from tests.support.browser import free_port
from tests.support.scripted_otlp import scripted_receiver

#: Generous: a receiver on a busy machine still starts and stops well within it.
WAIT_SECONDS = 60


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """This package's OTLP receiver on free ports: (HTTP URL, gRPC address, store folder)."""
    stop = threading.Event()
    http_port, grpc_port = free_port(), free_port()
    ready = threading.Event()
    folder = tmp_path / "received"
    thread = threading.Thread(target=collect, args=(
        str(folder), ("127.0.0.1", http_port), ("127.0.0.1", grpc_port),
        lambda _: ready.set(), stop), daemon=True)
    thread.start()
    assert ready.wait(WAIT_SECONDS), "the collector did not start"
    yield f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}", folder
    stop.set()
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive(), "the collector did not stop"


@pytest.fixture
def scripted() -> Iterator[http.server.ThreadingHTTPServer]:
    """An OTLP/HTTP receiver answering from its ``script`` (see ``scripted_otlp``)."""
    with scripted_receiver() as server:
        yield server
