"""Fixtures shared by the tracing tests: debug-level log capture, the fault
suite's check that no span is left active in the test's context, the live stream's
OTLP sink and a check that no stream outlives its test; and the fault suite's tally
put after every other test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from slime_trace_widget import tracing
from slime_trace_widget.tracing import live
from tests.support.live_sink import Sink, SinkServer
from tests.support.traced_samples import LOGGER

#: The fault suite's tally reads what the other fault tests counted.
_FAULT_TALLY = "test_tracing_faults_total.py::test_fault_count"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the fault tally after every other test, whichever order the files sort in."""
    items.sort(key=lambda item: item.nodeid.endswith(_FAULT_TALLY))


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    return caplog


@pytest.fixture
def isolated_context() -> Iterator[None]:
    """Fail a test that leaves a span marked active in the test's own context.

    A leaked entry would make every later span in the process adopt a stale parent;
    it is cleared here so that one leak fails one test, not every test after it.
    The fault files (``test_tracing_faults_*.py``) use it for every test.
    """
    yield
    leaked = tracing._ACTIVE.get()
    tracing._ACTIVE.set(None)
    assert leaked is None


@pytest.fixture
def sink() -> Iterator[Sink]:
    """An OTLP/HTTP sink served for the test, stopped after it."""
    server = SinkServer()
    yield server.sink
    server.stop()


@pytest.fixture
def no_stream_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts without a live stream and leaves none running."""
    monkeypatch.delenv(live.ENV_VAR, raising=False)
    assert live.current_stream() is None
    yield
    stream = live.current_stream()
    if stream is not None:
        stream.close(timeout=1.0)
    live.set_rollout(None)
