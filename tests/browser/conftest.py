"""Fixtures shared by the browser tests: one Chromium and one JupyterLab per module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from slime_trace_widget.devtools.browser import JupyterLab, launch_chromium


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    server = JupyterLab(tmp_path_factory.mktemp("lab"))
    server.start()
    yield server
    server.stop()
