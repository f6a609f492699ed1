"""``slime-trace-viewer --follow DIR`` in Chromium: the served page offers new dumps
as slime writes them, the update keeps the view, and a tab of a command that was
started again still learns of the new run's dumps."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from slime_trace_widget.cli.files import HTML_SUFFIX
from slime_trace_widget.cli.follow import FOLLOW_SUFFIX
from slime_trace_widget.cli.names import folder_claim
from tests.sources.test_follow import _place
from tests.support.browser import VIEWPORT, free_port
from tests.support.processes import ended_with, line_starting

FIXTURES = Path(__file__).parents[1] / "fixtures"
READY = '.stw-root[data-ready="1"]'


def _state(url: str) -> dict:
    """The state file beside the page at ``url``."""
    with urllib.request.urlopen(url.removesuffix(HTML_SUFFIX) + FOLLOW_SUFFIX, timeout=10) as r:
        return json.loads(r.read())


def _follow(run: Path, port: int, out: Path) -> tuple[subprocess.Popen, str]:
    """The command following ``run`` on ``port``, and its page's URL once it serves."""
    process = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", "--follow", str(run), "--port",
         str(port), "--interval", "0.2", "--out-dir", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = line_starting(process, "serving", 120)
    assert line, f"the command did not start serving: {ended_with(process)}"
    return process, line.split(" at ")[1].split()[0]


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 0


def test_followed_page_offers_new_dumps(chromium: Any, tmp_path: Path) -> None:
    run = tmp_path / "debug"
    run.mkdir()
    _place(FIXTURES / "small.pt", run / "rollout_0.pt")
    port = free_port()
    process, url = _follow(run, port, tmp_path / "out")
    page = None
    try:
        first = _state(url)
        assert {**first, "run": None} == {"version": 1, "dumps": 1, "run": None,
                                          "of": folder_claim(run)}
        page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
        page.goto(url)
        page.wait_for_selector(READY, timeout=30_000)
        assert page.locator(".stw-root").get_attribute("data-rows") == "8"
        kept = page.locator(".stw-root").evaluate("""(el) => {
            const d = el.stwDebug, s = d.state(), w = s.viewEnd - s.viewStart;
            d.setView(s.viewStart + w / 4, s.viewStart + w / 2);
            return [d.state().viewStart, d.state().viewEnd];
        }""")

        _place(FIXTURES / "rollout_eval_3.pt", run / "rollout_1.pt")
        banner = page.locator(".stw-follow-banner")
        banner.wait_for(timeout=60_000)
        assert "2 dump(s)" in banner.inner_text()
        assert _state(url) == {"version": 2, "dumps": 2, "run": first["run"],
                               "of": first["of"]}
        page.locator(".stw-follow-update").click()
        page.wait_for_selector('.stw-root[data-rows="30"][data-ready="1"]', timeout=30_000)
        assert page.locator(".stw-follow-banner").count() == 0
        again = page.locator(".stw-root").evaluate(
            "(el) => [el.stwDebug.state().viewStart, el.stwDebug.state().viewEnd]")
        assert again == kept  # the zoom survived the update
        assert page.locator("#stw-error").inner_text() == ""

        # Started again, the command counts from version 1, below the tab's 2: the tab
        # still offers the new run's three dumps.
        _stop(process)
        _place(FIXTURES / "small.pt", run / "rollout_2.pt")
        process, url_again = _follow(run, port, tmp_path / "out")
        assert url_again == url and _state(url)["version"] == 1
        page.locator(".stw-follow-banner").wait_for(timeout=60_000)
        assert "3 dump(s)" in page.locator(".stw-follow-banner").inner_text()
        _stop(process)
    finally:
        if page is not None:
            page.close()
        if process.poll() is None:
            process.kill()
            process.wait()
