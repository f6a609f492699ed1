"""Fixtures shared by the tracing tests: debug-level log capture and the fault
suite's check that no span is left active in the test's context."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from slime_trace_widget import tracing
from tests.support.traced_samples import LOGGER


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
