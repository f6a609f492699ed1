"""Throwaway Playwright driver for the dev harness: open a harness page from
file://, wait for the first frame, take screenshots, report console errors
and any network request. Usage:

    python dev/shoot.py ../test-artifacts/harness_20000.html out.png [--dark] [--dpr 2]
"""

import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.browser import hooks_script  # root.stwDebug (js/test/hooks)

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def open_page(p, html, dpr=1, dark=False, width=1600, height=900):
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
    ctx = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=dpr)
    ctx.add_init_script(script=hooks_script())
    page = ctx.new_page()
    log = {"console": [], "requests": [], "errors": []}
    page.on("console", lambda m: log["console"].append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: log["errors"].append(str(e)))
    page.on("request", lambda r: log["requests"].append(r.url[:80]))
    url = Path(html).resolve().as_uri() + ("?theme=dark" if dark else "")
    page.goto(url)
    page.wait_for_selector(".stw-root[data-ready='1']", timeout=60000)
    return browser, page, log


def main():
    html, out = sys.argv[1], sys.argv[2]
    dark = "--dark" in sys.argv
    dpr = float(sys.argv[sys.argv.index("--dpr") + 1]) if "--dpr" in sys.argv else 1
    with sync_playwright() as p:
        browser, page, log = open_page(p, html, dpr=dpr, dark=dark)
        time.sleep(0.3)
        page.screenshot(path=out)
        print("firstPaintMs", page.evaluate("document.querySelector('.stw-root').stwDebug.firstPaintMs"))
        print("rows", page.evaluate("document.querySelector('.stw-root').dataset.rows"),
              "drawn", page.evaluate("document.querySelector('.stw-root').dataset.drawnRows"))
        for k, v in log.items():
            bad = [x for x in v if not x.startswith(("file:", "blob:", "data:"))] if k == "requests" else v
            if bad:
                print(k, bad[:20])
        browser.close()


if __name__ == "__main__":
    main()
