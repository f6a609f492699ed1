"""Real notebook front ends and headless Chromium for the browser tests and benchmarks.

``LocalServer`` runs one private server (127.0.0.1, free port, token, its config,
data and state dirs inside a temp dir) and stops it by itself; ``JupyterLab``,
``Notebook7`` (news and update checks off, notebook windowing off so cells
scrolled out of view stay attached) and ``Marimo`` (``marimo edit`` or ``marimo
run`` over a folder of generated notebooks) say only how to start theirs.
``NotebookPage`` (JupyterLab, Notebook 7) and ``MarimoPage`` run cells the way a
person does and wait on what the page shows, never on sleeps.
``launch_chromium`` starts Debian's Chromium through Playwright, every page of it with
the front end's test hooks (``root.stwDebug``, ``js/test/hooks/``), which the package
does not ship.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The Chromium Playwright drives: ``$STW_CHROMIUM`` when set, else the ``chromium`` on
#: PATH (Debian's package puts it at /usr/bin/chromium; Playwright's own download is
#: not used).
CHROMIUM = os.environ.get("STW_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1600, "height": 900}


#: Ports :func:`free_port` handed out in this session: never handed out again.
_HANDED_OUT: set[int] = set()
#: The lowest port :func:`free_port` picks: above the well-known services.
_LOWEST_PORT = 10_000


def outgoing_ports() -> range:
    """The ports the kernel gives outgoing connections (Linux's default if unknown)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32_768, 60_999
    return range(low, high + 1)


def free_port() -> int:
    """A loopback TCP port nothing listens on now, for a server a test starts later.

    Not one the kernel picks for outgoing connections: a client elsewhere on the machine
    (a retrying sender, another test run) could take such a port between this call and
    the server's bind. Never one handed out before in this session either: two servers
    of one test must not be given the same port."""
    outgoing = outgoing_ports()
    if len(outgoing) >= 65_536 - _LOWEST_PORT:  # the kernel may give any port out
        return _port_the_kernel_picks()
    for _ in range(1000):
        port = random.randrange(_LOWEST_PORT, 65_536)
        if port in outgoing or port in _HANDED_OUT:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise AssertionError("no free loopback port outside the outgoing range")


def _port_the_kernel_picks() -> int:
    """A free loopback port as the kernel picks one (any, where it may give any port to
    outgoing connections), never one handed out before in this session."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


#: The front end's test hooks: the entry the browser tests inject into every page.
HOOKS_ENTRY = Path(__file__).resolve().parents[2] / "js" / "test" / "hooks" / "index.js"
#: Bundling them takes far less; the limit only guards against a hung esbuild.
HOOKS_BUILD_TIMEOUT = 300


@functools.cache
def hooks_script() -> str:
    """The test hooks as one script, bundled by the esbuild in ``js/node_modules``
    (which installing the package from a clone puts there)."""
    esbuild = HOOKS_ENTRY.parents[2] / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():
        raise RuntimeError(f"{esbuild} is missing: run `npm ci` in js/ to bundle the "
                           "front end's test hooks")
    built = subprocess.run(
        [str(esbuild), str(HOOKS_ENTRY), "--bundle", "--format=iife", "--target=es2020",
         "--log-level=warning"],
        capture_output=True, text=True, timeout=HOOKS_BUILD_TIMEOUT)
    if built.returncode != 0:
        raise RuntimeError(f"bundling {HOOKS_ENTRY} failed: {built.stderr.strip()}")
    return built.stdout


class HookedChromium:
    """A launched Chromium whose every new page runs :func:`hooks_script` before any
    script of its own, so ``root.stwDebug`` answers on each view it draws."""

    def __init__(self, browser: Any) -> None:
        self._browser = browser
        self._hooks = hooks_script()

    @property
    def version(self) -> str:
        return self._browser.version

    def new_page(self, **options: Any) -> Any:
        page = self._browser.new_page(**options)
        page.add_init_script(script=self._hooks)
        return page

    def close(self) -> None:
        self._browser.close()


def launch_chromium(playwright: Any) -> HookedChromium:
    return HookedChromium(playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                     args=CHROMIUM_ARGS))


class LocalServer:
    """A server process private to one test session, on a free port of 127.0.0.1.

    Subclasses say how to start it (``_command``, ``_environment``, ``_ready``); this
    class starts it in its own process group, waits until it answers, and stops it:
    ``_shutdown`` asks politely, then the group gets SIGTERM, then SIGKILL.
    """

    name = "server"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.notebooks = root / "notebooks"
        self.notebooks.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = root / f"{self.name}.log"
        self._process: subprocess.Popen | None = None

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _environment(self) -> dict[str, str]:
        """Private config, data and state dirs; the token goes here or on stdin, never
        on the command line, where every user of the machine could read it."""
        return {**os.environ, "PYTHONUNBUFFERED": "1"}

    def _ready(self) -> bool:
        raise NotImplementedError

    def _stdin(self) -> bytes:
        return b""

    def start(self, timeout: float = 90.0) -> None:
        log = self.log_path.open("w")
        self._process = subprocess.Popen(
            self._command(), env=self._environment(), cwd=self.notebooks, stdin=subprocess.PIPE,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        assert self._process.stdin is not None
        self._process.stdin.write(self._stdin())
        self._process.stdin.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_path.read_text()[-2000:]}")
            if self._ready():
                return
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer in {timeout:.0f} s")

    def answers(self, path: str, headers: dict[str, str] | None = None) -> bool:
        """Whether GET ``path`` answers 200 now (the readiness probe)."""
        request = urllib.request.Request(f"{self.url}{path}", headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def _shutdown(self) -> None:
        """Ask the server to exit by itself; the default leaves it to the signals."""

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            self._shutdown()
            process.wait(timeout=15)
            return
        except (OSError, subprocess.TimeoutExpired):
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=10)
                return
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue


class JupyterLab(LocalServer):
    """A JupyterLab server private to one test session."""

    name = "jupyter-lab"
    #: the ``jupyter`` subcommand, its application class, and where a notebook opens: a
    #: workspace of its own, or JupyterLab would reopen the notebooks of earlier tests
    #: (hidden, but the first cells NotebookPage's selectors find)
    app, app_class, tree = "lab", "LabApp", "lab/workspaces/{stem}/tree"

    def _environment(self) -> dict[str, str]:
        settings = self.root / "settings"
        tracker = settings / "@jupyterlab" / "notebook-extension"
        tracker.mkdir(parents=True, exist_ok=True)
        (tracker / "tracker.jupyterlab-settings").write_text(
            json.dumps({"windowingMode": "none"}))
        notices = settings / "@jupyterlab" / "apputils-extension"
        notices.mkdir(parents=True, exist_ok=True)
        (notices / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        config = self.root / "config"
        config.mkdir(exist_ok=True)
        (config / "jupyter_server_config.json").write_text(json.dumps({
            "LabApp": {"news_url": None,
                       "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"},
        }))
        return {
            **super()._environment(),
            "JUPYTER_TOKEN": self.token,
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_RUNTIME_DIR": str(self.root / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.root / "workspaces"),
            "IPYTHONDIR": str(self.root / "ipython"),
        }

    def _command(self) -> list[str]:
        return [
            sys.executable, "-m", "jupyter", self.app, "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0", f"--ServerApp.root_dir={self.notebooks}",
            f"--{self.app_class}.user_settings_dir={self.root / 'settings'}",
            f"--{self.app_class}.workspaces_dir={self.root / 'workspaces'}",
        ]

    def _ready(self) -> bool:
        return self.answers("/api/status", {"Authorization": f"token {self.token}"})

    def _shutdown(self) -> None:
        request = urllib.request.Request(f"{self.url}/api/shutdown", method="POST",
                                         headers={"Authorization": f"token {self.token}"})
        urllib.request.urlopen(request, timeout=5).close()

    def write_notebook(self, name: str, cells: list[str]) -> str:
        """Write a notebook of code cells directly as JSON (nbformat costs seconds to
        import); the URL that opens it."""
        notebook = {
            "cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                       "outputs": [], "source": source} for source in cells],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                        "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5,
        }
        (self.notebooks / name).write_text(json.dumps(notebook))
        tree = self.tree.format(stem=Path(name).stem)
        return f"{self.url}/{tree}/{name}?token={self.token}"


class Notebook7(JupyterLab):
    """Jupyter Notebook 7: the same server and settings as JupyterLab, one document a tab."""

    name = "jupyter-notebook"
    app, app_class, tree = "notebook", "JupyterNotebookApp", "notebooks"


class Marimo(LocalServer):
    """A marimo server over a folder of generated notebooks, in ``edit`` or ``run`` mode.

    ``marimo run`` serves the notebooks it finds on start: write them first. The
    token is marimo's ``access_token`` (read from stdin); home, config, cache and
    state live in the temp dir, so the user's marimo settings play no part."""

    name = "marimo"

    def __init__(self, root: Path, mode: str = "edit") -> None:
        assert mode in ("edit", "run"), mode
        self.mode = mode
        self.name = f"marimo-{mode}"
        super().__init__(root)

    def _environment(self) -> dict[str, str]:
        home = self.root / "home"
        dirs = {"HOME": home, "XDG_CONFIG_HOME": home / ".config",
                "XDG_CACHE_HOME": home / ".cache", "XDG_STATE_HOME": home / ".state",
                "XDG_DATA_HOME": home / ".data"}
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        return {**super()._environment(), **{k: str(v) for k, v in dirs.items()}}

    def _command(self) -> list[str]:
        command = [sys.executable, "-m", "marimo", self.mode, "--headless",
                   "--host", "127.0.0.1", "--port", str(self.port), "--no-sandbox",
                   "--token-password-file", "-"]
        if self.mode == "edit":
            command.append("--skip-update-check")
        return [*command, str(self.notebooks)]

    def _stdin(self) -> bytes:
        return self.token.encode()

    def _ready(self) -> bool:
        return self.answers("/health")

    def write_notebook(self, name: str, cells: list[str]) -> str:
        """Write a marimo notebook of these cells; the URL that opens it. marimo finds
        each cell's inputs and outputs itself, so every cell is a bare ``def _():``."""
        lines = ["import marimo", "", "app = marimo.App()", ""]
        for source in cells:
            body = "\n".join(f"    {line}" if line else "" for line in source.splitlines())
            lines += ["", "@app.cell", "def _():", body, "    return", ""]
        lines += ["", 'if __name__ == "__main__":', "    app.run()", ""]
        (self.notebooks / name).write_text("\n".join(lines))
        return f"{self.url}/?file={name}&access_token={self.token}"


#: The kernel of the open notebook is connected and idle, so Shift+Enter runs the cell
#: rather than clearing it (a notebook whose session is still starting has no kernel, and
#: running a cell then just resets it). The toolbar's execution indicator says "idle" both
#: before any session exists (next to "No Kernel") and once the kernel answered, so it
#: counts only beside a real kernel name and with the status line settled: JupyterLab's
#: status bar reads "<kernel> | Idle"; Notebook 7's kernel status shows "Kernel
#: Initializing" and "Kernel Connecting", already faded, and is emptied once connected.
KERNEL_CONNECTED = """() => {
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const kernelName = document.querySelector('.jp-KernelName')?.textContent?.trim() || '';
  if (indicator?.getAttribute('data-status') !== 'idle' || !kernelName
      || kernelName === 'No Kernel') return false;
  const labStatus = [...document.querySelectorAll('#jp-main-statusbar .jp-StatusBar-TextItem')]
    .some(item => /^(?!No Kernel).+ \\| Idle$/.test((item.textContent || '').trim()));
  const notebookStatus = document.querySelector(
    '.jp-NotebookKernelStatus.jp-NotebookKernelStatus-fade');
  return labStatus || (!!notebookStatus && !(notebookStatus.textContent || '').trim());
}"""


#: Cell ``index``'s prompt reads ``[runs]``: its run of that count is over.
PROMPT_SHOWS_RUN = """([index, runs]) => {
  const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[index];
  const prompt = cell?.querySelector('.jp-InputArea-prompt')?.textContent || '';
  return prompt.includes('[' + runs + ']');
}"""

#: What the page says about its kernel and cells, for the message of a run that never ended.
KERNEL_STATE = """() => JSON.stringify({
  kernel: document.querySelector('.jp-KernelName')?.textContent,
  indicator: document.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status'),
  status: [...document.querySelectorAll(
    '#jp-main-statusbar .jp-StatusBar-TextItem, .jp-NotebookKernelStatus')]
    .map(item => item.textContent).filter(Boolean),
  prompts: [...document.querySelectorAll('.jp-Notebook .jp-Cell .jp-InputArea-prompt')]
    .map(prompt => prompt.textContent),
  dialogs: [...document.querySelectorAll('.jp-Dialog')].map(dialog => dialog.textContent),
})"""


class NotebookPage:
    """One notebook open in JupyterLab or Notebook 7; runs cells and reads their output."""

    def __init__(self, page: Any, timeout_ms: int = 90_000) -> None:
        self.page = page
        self.timeout_ms = timeout_ms
        self.runs = 0

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=self.timeout_ms)
        self.page.wait_for_function(KERNEL_CONNECTED, timeout=self.timeout_ms)

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def run_cell(self, index: int) -> Any:
        """Run cell ``index`` with Shift+Enter; returns once its prompt shows this run's
        count. The prompt is looked up afresh on each check, so a cell the notebook
        re-renders meanwhile is still followed."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        cell = self.cell(index)
        cell.locator(".jp-InputArea-editor").click()
        self.page.wait_for_function(
            "() => document.querySelector('.jp-Notebook')?.getAttribute('data-jp-mode')"
            " === 'edit' || !!document.querySelector('.jp-mod-editMode')",
            timeout=self.timeout_ms)
        self.page.keyboard.press("Shift+Enter")
        self.runs += 1
        try:
            self.page.wait_for_function(PROMPT_SHOWS_RUN, arg=[index, self.runs],
                                        timeout=self.timeout_ms)
        except PlaywrightTimeout as timeout:
            raise AssertionError(f"cell {index} never showed [{self.runs}]: "
                                 f"{self.page.evaluate(KERNEL_STATE)}") from timeout
        return cell

    def output_text(self, index: int) -> str:
        return self.cell(index).locator(".jp-OutputArea").inner_text()

    def set_theme(self, name: str) -> None:
        """Settings > Theme > ``name`` (e.g. "JupyterLab Dark") from the menu bar, as a
        person switches it; returns once the page wears it."""
        self.page.locator(".lm-MenuBar-item", has_text="Settings").click()
        self.page.locator(".lm-Menu-item", has_text="Theme").first.click()
        self.page.locator(".lm-Menu-item", has_text=name).first.click()
        self.page.wait_for_function(
            "name => document.body.dataset.jpThemeName === name", arg=name,
            timeout=self.timeout_ms)


#: Installed on a marimo cell before its run button is pressed: notes every status the
#: cell passes through, so the run is over when it has left "idle" and come back. The
#: cell is found by its id each time: React may replace its elements meanwhile.
MARIMO_WATCH_RUN = """(cell) => {
  const id = cell.dataset.cellId;
  const status = () =>
    document.getElementById('cell-' + id)?.closest('[data-status]')?.dataset.status;
  const run = {id, status, seen: []};
  run.observer = new MutationObserver(() => {
    const now = status();
    if (now && now !== run.seen[run.seen.length - 1]) run.seen.push(now);
  });
  run.observer.observe(document.body, {subtree: true, childList: true, attributes: true,
                                       attributeFilter: ['data-status']});
  window.__stwCellRun = run;
}"""

MARIMO_RUN_OVER = """() => {
  const run = window.__stwCellRun;
  const cell = document.getElementById('cell-' + run.id);
  const over = run.seen.some(s => s !== 'idle') && run.status() === 'idle'
    && !!cell && !cell.classList.contains('needs-run');
  if (over) run.observer.disconnect();
  return over;
}"""


class MarimoPage:
    """One marimo notebook in the browser, in edit mode (cells run from their run
    buttons) or run mode (every cell runs on open; buttons and widgets re-run cells)."""

    def __init__(self, page: Any, timeout_ms: int = 90_000) -> None:
        self.page = page
        self.timeout_ms = timeout_ms

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector("[data-connection-state=OPEN] [data-cell-id]",
                                    state="attached", timeout=self.timeout_ms)

    def cell(self, index: int) -> Any:
        return self.page.locator("[data-cell-id]").nth(index)

    def output(self, index: int) -> Any:
        """The cell's output area (its last expression; printed text goes elsewhere)."""
        cell_id = self.cell(index).get_attribute("data-cell-id")
        return self.page.locator(f"#output-{cell_id}")

    def run_cell(self, index: int) -> Any:
        """Press the cell's run button and wait until it has run (edit mode)."""
        cell = self.cell(index)
        cell.evaluate(MARIMO_WATCH_RUN)
        cell.locator("[data-testid=run-button]").first.click()
        self.page.wait_for_function(MARIMO_RUN_OVER, timeout=self.timeout_ms)
        return cell

    def wait_for_output(self, index: int, text: str) -> str:
        """Wait until the cell's output shows ``text``; the whole output."""
        output = self.output(index)
        output.get_by_text(text).first.wait_for(timeout=self.timeout_ms)
        return output.inner_text()

    def set_theme(self, theme: str) -> None:
        """"Set theme: dark" or "light" from marimo's command palette, as a person
        switches it; returns once the page wears it (edit mode)."""
        self.page.locator("[data-testid=command-palette-button]").click()
        self.page.keyboard.type(f"Set theme: {theme}")
        self.page.locator("[cmdk-item]", has_text=f"Set theme: {theme}").click()
        self.page.wait_for_function(
            "theme => document.body.dataset.theme === theme", arg=theme,
            timeout=self.timeout_ms)


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
