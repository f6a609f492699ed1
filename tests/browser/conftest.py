"""Fixtures shared by the browser tests: one Chromium and one server of each front end
per module, each started on first use and stopped by itself."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import (
    JupyterLab,
    LocalServer,
    Marimo,
    Notebook7,
    launch_chromium,
)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


def _serve(server: LocalServer) -> Iterator[Any]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    yield from _serve(JupyterLab(tmp_path_factory.mktemp("lab")))


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook7]:
    yield from _serve(Notebook7(tmp_path_factory.mktemp("notebook7")))


@pytest.fixture(scope="module")
def marimo_edit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Marimo]:
    yield from _serve(Marimo(tmp_path_factory.mktemp("marimo-edit"), "edit"))


@pytest.fixture
def marimo_run(tmp_path: Path) -> Iterator[Callable[[str, list[str]], str]]:
    """``serve(name, cells)``: the URL of a new ``marimo run`` server of that notebook
    (it serves what it finds on start, so each notebook gets its own)."""
    servers: list[Marimo] = []

    def serve(name: str, cells: list[str]) -> str:
        server = Marimo(tmp_path / name, "run")
        url = server.write_notebook(name, cells)
        servers.append(server)
        server.start()
        return url

    yield serve
    for server in servers:
        server.stop()
