"""The widget follows its host's theme, light or dark, and a live switch, in headless
Chromium: real JupyterLab (its Settings > Theme menu), and pages that carry the marks
marimo, VS Code and Colab put on theirs (with the OS set to the other scheme, since the
host's word must win over the OS's). The CSS (the root's background) and the canvas (its
pixels) must both follow; a screenshot is kept of each.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget
from tests.support.browser import VIEWPORT, JupyterLab

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).parents[1] / "fixtures"
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"
STATIC = Path(__file__).parents[2] / "slime_trace_widget" / "view" / "static"

#: True when the root is marked `scheme`, its background is of that scheme, the canvas
#: axis strip is painted in the root's --stw-bg1 (so the canvas re-read its colours),
#: and the canvas is as wide as its container.
FOLLOWS = """([el, scheme]) => {
  const rgb = (c) => {
    const probe = document.createElement('canvas').getContext('2d');
    probe.fillStyle = c;
    probe.fillRect(0, 0, 1, 1);
    return probe.getImageData(0, 0, 1, 1).data;
  };
  const lum = (p) => 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
  const dark = scheme === 'dark';
  const cs = getComputedStyle(el);
  const want = rgb(cs.getPropertyValue('--stw-bg1').trim());
  const canvas = el.querySelector('.stw-canvas');
  const got = canvas.getContext('2d').getImageData(2, 2, 1, 1).data;
  const scroll = el.querySelector('.stw-scroll');
  return el.dataset.ready === '1' && el.dataset.stwTheme === scheme
    && (dark ? lum(rgb(cs.backgroundColor)) < 100 : lum(rgb(cs.backgroundColor)) > 160)
    && [0, 1, 2].every((i) => Math.abs(got[i] - want[i]) <= 2)
    && (dark ? lum(got) < 100 : lum(got) > 160)
    && scroll.clientWidth > 0 && parseFloat(canvas.style.width) === scroll.clientWidth;
}"""


def _follows(page: Any, root: Any, scheme: str, shot: str) -> None:
    """Wait until the widget at element handle ``root`` follows ``scheme``; screenshot."""
    page.wait_for_function(FOLLOWS, arg=[root, scheme], timeout=30_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"theme-{shot}.png"))


# ---------------------------------------------------------------------- JupyterLab


def _use_theme(page: Any, name: str, light: bool) -> None:
    """Settings > Theme > ``name``, as a user does; wait until JupyterLab applied it."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Theme", exact=True).hover()
    page.locator(".lm-Menu-itemLabel").get_by_text(name, exact=True).click()
    page.wait_for_function("light => document.body.dataset.jpThemeLight === String(light)",
                           arg=light, timeout=30_000)
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=30_000)


def test_jupyterlab_theme_switch_live(lab: JupyterLab, chromium) -> None:
    dump = lab.notebooks / "theme.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    url = lab.write_notebook("theme.ipynb", [
        f"from slime_trace_widget import TraceTimeline\nTraceTimeline.from_dump({str(dump)!r})",
    ])
    # The OS says dark: JupyterLab's light theme must still win.
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1, color_scheme="dark")
    run_first_widget(page, url + "&reset")
    locator = page.locator(f'{FIRST_WIDGET}[data-ready="1"]')
    root = locator.element_handle()
    _follows(page, root, "light", "jupyterlab-light")
    _use_theme(page, "JupyterLab Dark", light=False)
    _follows(page, root, "dark", "jupyterlab-dark")
    _use_theme(page, "JupyterLab Light", light=True)
    _follows(page, root, "light", "jupyterlab-light-again")
    assert root.evaluate("el => el.stwDebug.frameCount") > 0
    page.close()


# ---------------------------------------------------------------------- other hosts' marks

HOST = "http://host.test"
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="stylesheet" href="/widget.css"></head>
<body><div id="app"></div>
<script type="module">
import * as bundle from "/widget.js";
const payload = await (await fetch("/payload.json")).json();
const css = await (await fetch("/widget.css")).text();
// Mount the widget in #app, or inside a shadow root as marimo does.
window.mount = (shadow) => {
  let el = document.getElementById("app");
  if (shadow) {
    const root = el.attachShadow({ mode: "open" });
    root.innerHTML = `<style>${css}</style><div class="output"></div>`;
    el = root.querySelector(".output");
  }
  bundle.default.render({ model: bundle.createLocalModel(payload), el });
  return el.querySelector(".stw-root");
};
window.booted = true;
</script></body></html>"""

#: JS run on the page before the widget mounts: how each host marks its theme.
MARKS = {
    "marimo-dark": "document.body.classList.add('dark', 'dark-theme');"
                   " document.body.dataset.theme = 'dark';",
    "marimo-light": "document.body.classList.add('light', 'light-theme');"
                    " document.body.dataset.theme = 'light';",
    "vscode-dark": "document.body.classList.add('vscode-dark');"
                   " document.body.dataset.vscodeThemeKind = 'vscode-dark';"
                   " document.documentElement.style.cssText = '--vscode-editor-background: #1f1f1f;"
                   " --vscode-sideBar-background: #181818; --vscode-editor-foreground: #cccccc;"
                   " --vscode-foreground: #cccccc';",
    "vscode-light": "document.body.classList.add('vscode-light');"
                    " document.body.dataset.vscodeThemeKind = 'vscode-light';"
                    " document.documentElement.style.cssText ="
                    " '--vscode-editor-background: #ffffff;"
                    " --vscode-sideBar-background: #f8f8f8; --vscode-editor-foreground: #3b3b3b;"
                    " --vscode-foreground: #3b3b3b';",
    "colab-dark": "document.documentElement.setAttribute('theme', 'dark');",
    "colab-light": "document.documentElement.setAttribute('theme', 'light');",
    "color-scheme-dark": "document.documentElement.style.colorScheme = 'dark';",
    "none": "",
}


@pytest.fixture(scope="module")
def host_page(chromium) -> Any:
    """A page on a made-up origin served from memory: the built bundle and CSS, and the
    small dump's payload (buffers as base64, as a page without a kernel has them)."""
    payload = encode(load_frames(FIXTURES / "small.pt")).payload
    payload = {**payload, "buffers": {k: base64.b64encode(v).decode()
                                      for k, v in payload["buffers"].items()}}
    files = {
        "/": (PAGE.encode(), "text/html"),
        "/widget.js": ((STATIC / "widget.js").read_bytes(), "text/javascript"),
        "/widget.css": ((STATIC / "widget.css").read_bytes(), "text/css"),
        "/payload.json": (json.dumps(payload).encode(), "application/json"),
    }

    def serve(route: Any) -> None:
        path = route.request.url[len(HOST):].split("?")[0]
        if path in files:
            body, kind = files[path]
            route.fulfill(status=200, body=body, content_type=kind)
        else:
            route.abort()

    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route(f"{HOST}/**", serve)
    yield page
    page.close()
    assert errors == []


def _mount(page: Any, os_scheme: str, marks: str, shadow: bool = False) -> Any:
    page.emulate_media(color_scheme=os_scheme)
    page.goto(f"{HOST}/")
    page.wait_for_function("() => window.booted === true")
    page.evaluate(f"() => {{ {marks} }}")
    return page.evaluate_handle("shadow => window.mount(shadow)", shadow)


@pytest.mark.parametrize(("host", "os_scheme", "scheme", "shadow"), [
    ("marimo-dark", "light", "dark", False),
    ("marimo-light", "dark", "light", False),
    ("marimo-dark", "light", "dark", True),
    ("vscode-dark", "light", "dark", False),
    ("vscode-light", "dark", "light", False),
    ("colab-dark", "light", "dark", False),
    ("colab-light", "dark", "light", False),
    ("color-scheme-dark", "light", "dark", False),
    ("none", "dark", "dark", False),
    ("none", "light", "light", False),
])
def test_host_marks_win_over_the_os(host_page: Any, host: str, os_scheme: str, scheme: str,
                                    shadow: bool) -> None:
    root = _mount(host_page, os_scheme, MARKS[host], shadow)
    _follows(host_page, root, scheme, f"{host}{'-shadow' if shadow else ''}-os-{os_scheme}")
    if host.startswith("vscode"):  # VS Code's own colours, not the fallbacks
        pixel = root.evaluate("el => [...el.querySelector('.stw-canvas').getContext('2d')"
                              ".getImageData(2, 2, 1, 1).data].slice(0, 3)")
        assert pixel == ([24, 24, 24] if scheme == "dark" else [248, 248, 248])


#: (host, OS scheme, [(JS that switches the host's theme, the scheme it switches to)])
SWITCHES = [
    ("marimo-light", "dark", [
        ("document.body.classList.replace('light', 'dark');"
         " document.body.classList.replace('light-theme', 'dark-theme');"
         " document.body.dataset.theme = 'dark';", "dark"),
        ("document.body.classList.replace('dark', 'light');"
         " document.body.classList.replace('dark-theme', 'light-theme');"
         " document.body.dataset.theme = 'light';", "light"),
    ]),
    ("vscode-dark", "dark", [(MARKS["vscode-light"].replace(
        "classList.add('vscode-light')", "classList.replace('vscode-dark', 'vscode-light')"),
        "light")]),
    ("colab-light", "light", [("document.documentElement.setAttribute('theme', 'dark');",
                               "dark")]),
]


@pytest.mark.parametrize(("host", "os_scheme", "steps"), SWITCHES,
                         ids=[s[0] for s in SWITCHES])
def test_live_switch_is_followed(host_page: Any, host: str, os_scheme: str,
                                 steps: list[tuple[str, str]]) -> None:
    root = _mount(host_page, os_scheme, MARKS[host], shadow=host.startswith("marimo"))
    for n, (switch, scheme) in enumerate(steps):
        host_page.evaluate(f"() => {{ {switch} }}")
        _follows(host_page, root, scheme, f"{host}-switched-{n}")


def test_os_switch_counts_only_when_the_host_says_nothing(host_page: Any) -> None:
    root = _mount(host_page, "light", MARKS["none"])
    _follows(host_page, root, "light", "none-os-light")
    host_page.emulate_media(color_scheme="dark")
    _follows(host_page, root, "dark", "none-os-switched-dark")
    stated = _mount(host_page, "light", MARKS["marimo-light"])
    _follows(host_page, stated, "light", "marimo-light-os-light")
    frames = stated.evaluate("el => el.stwDebug.frameCount")
    host_page.emulate_media(color_scheme="dark")
    # the widget saw the switch (it re-reads its theme and repaints) and stayed light
    host_page.wait_for_function("([el, n]) => el.stwDebug.frameCount > n", arg=[stated, frames])
    assert host_page.evaluate(FOLLOWS, [stated, "light"])
