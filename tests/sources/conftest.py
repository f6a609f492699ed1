"""Fixtures shared by the tests of tests/sources."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.dump_samples import FIXTURE_MARKER


@pytest.fixture
def no_fixture_marker() -> Iterator[None]:
    """Fails the test if loading created the hostile fixture's marker file (a dump ran
    code); the dump-loading test files use it for every test."""
    FIXTURE_MARKER.unlink(missing_ok=True)
    yield
    assert not FIXTURE_MARKER.exists(), "a dump ran code while loading"
