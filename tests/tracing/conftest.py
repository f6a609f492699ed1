"""Fixtures shared by the tracing tests: debug-level log capture and the fault
suite's check that no span is left active in the test's context; and the fault
suite's tally put after every other test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from slime_trace_widget import tracing
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
