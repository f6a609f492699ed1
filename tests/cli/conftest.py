"""Fixtures of the CLI's tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    """A copy of the small fixture dump as ``rollout_0.pt`` in the test's own folder."""
    target = tmp_path / "rollout_0.pt"
    shutil.copy(FIXTURES / "small.pt", target)
    return target
