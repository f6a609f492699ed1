"""Real JupyterLab and headless Chromium for the browser tests.

``JupyterLab`` starts a private server on 127.0.0.1 (free port, token, every
config and data dir inside a temp dir, news/update checks off, notebook
windowing off so cells scrolled out of view stay attached) and stops it by
itself. ``launch_chromium`` starts Debian's Chromium through Playwright.
``NotebookPage`` runs cells the way a person does and waits on what the page
shows, never on sleeps.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1600, "height": 900}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_chromium(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=CHROMIUM_ARGS)


class JupyterLab:
    """A JupyterLab server private to one test session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.notebooks = root / "notebooks"
        self.notebooks.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None
        self.log_path = root / "jupyter.log"

    def start(self, timeout: float = 90.0) -> None:
        config = self.root / "config"
        settings = self.root / "settings"
        tracker = settings / "@jupyterlab" / "notebook-extension"
        tracker.mkdir(parents=True, exist_ok=True)
        (tracker / "tracker.jupyterlab-settings").write_text(
            json.dumps({"windowingMode": "none"}))
        notices = settings / "@jupyterlab" / "apputils-extension"
        notices.mkdir(parents=True, exist_ok=True)
        (notices / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        config.mkdir(exist_ok=True)
        (config / "jupyter_server_config.json").write_text(json.dumps({
            "LabApp": {"news_url": None,
                       "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"},
        }))
        env = dict(os.environ)
        env.update({
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_RUNTIME_DIR": str(self.root / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.root / "workspaces"),
            "IPYTHONDIR": str(self.root / "ipython"),
            "PYTHONUNBUFFERED": "1",
        })
        command = [
            sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.notebooks}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={self.root / 'workspaces'}",
        ]
        log = self.log_path.open("w")
        self._process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}",
                                            timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("jupyter lab did not answer in time")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            request = urllib.request.Request(f"{self.url}/api/shutdown?token={self.token}",
                                             method="POST")
            urllib.request.urlopen(request, timeout=5).close()
            process.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, sig)
                    process.wait(timeout=10)
                    return
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue

    def write_notebook(self, name: str, cells: list[str]) -> str:
        """Write a notebook of code cells directly as JSON (nbformat costs seconds to import)."""
        notebook = {
            "cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                       "outputs": [], "source": source} for source in cells],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                        "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5,
        }
        (self.notebooks / name).write_text(json.dumps(notebook))
        return f"{self.url}/lab/tree/{name}?token={self.token}"


class NotebookPage:
    """One notebook open in JupyterLab; runs cells and reads their output."""

    def __init__(self, page: Any, timeout_ms: int = 90_000) -> None:
        self.page = page
        self.timeout_ms = timeout_ms
        self.runs = 0

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=self.timeout_ms)
        # The toolbar says idle before the kernel session exists; the status bar does not.
        self.page.wait_for_function(
            """() => [...document.querySelectorAll('#jp-main-statusbar .jp-StatusBar-TextItem')]
                   .some(e => /\\| Idle/.test(e.textContent || ''))""",
            timeout=self.timeout_ms)

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def run_cell(self, index: int) -> Any:
        cell = self.cell(index)
        cell.locator(".jp-InputArea-editor").click()
        self.page.wait_for_function(
            "() => document.querySelector('.jp-Notebook')?.getAttribute('data-jp-mode')"
            " === 'edit' || !!document.querySelector('.jp-mod-editMode')",
            timeout=self.timeout_ms)
        self.page.keyboard.press("Shift+Enter")
        self.runs += 1
        prompt = cell.locator(".jp-InputArea-prompt")
        self.page.wait_for_function(
            "([el, n]) => new RegExp('\\\\[' + n + '\\\\]').test(el.textContent || '')",
            arg=[prompt.element_handle(), self.runs], timeout=self.timeout_ms)
        return cell

    def output_text(self, index: int) -> str:
        return self.cell(index).locator(".jp-OutputArea").inner_text()


# ---------------------------------------------------------------------- the page guard

#: Installed before any page script. A request the Content-Security-Policy blocks never
#: reaches the route, so its violation event is how the attempt is still seen.
CSP_WATCH = """
window.__stwViolations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__stwViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


class PageGuard:
    """What a page under test must never do: request a URL ``allowed`` refuses (such
    requests are aborted as well as noted), break its CSP, log an error, throw, or open
    a dialog. ``file:`` URLs it requests are kept in ``files`` for the caller to judge;
    ``watch`` is more init script for checks of the caller's own."""

    def __init__(self, page: Any, allowed: Callable[[str], bool], watch: str = "") -> None:
        self.page = page
        self.allowed = allowed
        self.foreign: list[str] = []
        self.files: list[str] = []
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.dialogs: list[str] = []
        page.add_init_script(CSP_WATCH + watch)
        page.route("**/*", self._route)
        page.on("request", self._request)
        page.on("websocket", lambda ws: self._check(ws.url))
        page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.on("dialog", self._dialog)

    def _route(self, route: Any) -> None:
        if self._check(route.request.url):
            route.continue_()
        else:
            route.abort()

    def _request(self, request: Any) -> None:
        """Also sees requests that skip routing (the route sees them first otherwise)."""
        if request.url.startswith("file:"):
            self.files.append(request.url)
        self._check(request.url)

    def _check(self, url: str) -> bool:
        ok = self.allowed(url)
        if not ok and url not in self.foreign:
            self.foreign.append(url)
        return ok

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def check(self) -> None:
        """Fail on anything recorded."""
        assert self.foreign == [], f"requests the page may not make: {self.foreign}"
        violations = self.page.evaluate("() => window.__stwViolations")
        assert violations == [], f"CSP violations: {violations}"
        assert self.dialogs == [], f"dialogs: {self.dialogs}"
        assert self.page_errors == [], f"page errors: {self.page_errors}"
        assert self.console_errors == [], f"console errors: {self.console_errors}"


def origin_of(url: str) -> Callable[[str], bool]:
    """Requests a page may make: its own origin (http and websocket), blobs and data URLs."""
    match = re.match(r"(https?)://([^/]+)", url)
    assert match, url
    websocket = "wss" if match[1] == "https" else "ws"
    own = (f"{match[1]}://{match[2]}/", f"{websocket}://{match[2]}/")
    return lambda target: target.startswith((*own, "blob:", "data:"))


def file_only(target: str) -> bool:
    """Requests a page opened from disk may make: files, blobs and data URLs (callers
    check which files in ``PageGuard.files``)."""
    return target.startswith(("file:", "blob:", "data:"))
