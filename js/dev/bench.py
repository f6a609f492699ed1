"""Measure first paint and frame times in the harness during pans, zooms,
expansions and scrolling. python dev/bench.py ../test-artifacts/harness_1000000.html"""
import sys, time, json, statistics
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from shoot import open_page
from playwright.sync_api import sync_playwright

html = sys.argv[1]
dpr = float(sys.argv[sys.argv.index("--dpr") + 1]) if "--dpr" in sys.argv else 1
R = "document.querySelector('.stw-root')"


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * len(xs) + 0.5)) - 1))] if xs else float("nan")


with sync_playwright() as p:
    t = time.time()
    browser, page, log = open_page(p, html, dpr=dpr)
    load = time.time() - t
    fp = page.evaluate(f"{R}.stwDebug.firstPaintMs")
    boot = page.evaluate("window.__stwBootMs")
    info = page.evaluate(f"[{R}.dataset.rows, {R}.dataset.drawnRows]")
    print(f"page ready {load:.1f}s, boot(decode b64+import) {boot:.0f} ms, firstPaint {fp:.0f} ms, rows {info[0]} drawn {info[1]}")
    page.evaluate("window.__long = []; new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(Math.round(e.duration)); }).observe({type: 'longtask', buffered: false})")
    box = page.locator("canvas.stw-canvas").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    results = {}

    def measure(name, fn):
        n0 = page.evaluate(f"{R}.stwDebug.frameTimes().length")
        page.evaluate(f"{R}.stwDebug._mark = {R}.stwDebug.frameTimes().length")
        t0 = time.time()
        fn()
        time.sleep(0.15)
        ft = page.evaluate(f"(() => {{ const d = {R}.stwDebug; const a = d.frameTimes(); return a; }})()")
        # frameTimes keeps the last 600 frames: take the new tail
        new = ft[-max(0, min(len(ft), page.evaluate(f"{R}.stwDebug.frameTimes().length") - 0)):]
        results[name] = ft
        return time.time() - t0

    def frames_since(k):
        return page.evaluate(f"{R}.stwDebug.frameTimes()")[k:]

    def run(name, fn):
        # clear the log by reading its current length (the log is capped at 600)
        before = page.evaluate(f"{R}.stwDebug.frameCount")
        fn()
        time.sleep(0.2)
        n = page.evaluate(f"{R}.stwDebug.frameCount") - before
        fr = page.evaluate(f"{R}.stwDebug.frameTimes()")[-n:] if n > 0 else []
        results[name] = fr
        print(f"{name:28s} frames {len(fr):4d}  p50 {pct(fr, .5):6.2f} ms  p95 {pct(fr, .95):6.2f} ms  max {max(fr) if fr else 0:6.2f} ms")

    def reset_log():
        page.evaluate(f"{R}.stwDebug.frameTimes().length")

    def fit():
        page.evaluate(f"{R}.stwDebug.setView(-10, 1e4)")
        page.click("text=fit all")
        time.sleep(0.2)

    def drag_pan():
        page.mouse.move(cx, cy)
        page.mouse.down()
        for i in range(40):
            page.mouse.move(cx - i * 8, cy)
        for i in range(40):
            page.mouse.move(cx - 320 + i * 8, cy)
        page.mouse.up()

    def wheel_zoom():
        page.mouse.move(cx, cy)
        for i in range(25):
            page.mouse.wheel(0, -120)
            time.sleep(0.016)
        for i in range(25):
            page.mouse.wheel(0, 120)
            time.sleep(0.016)

    def deep_zoom_pan():
        page.evaluate(f"{R}.stwDebug.setView(100, 102)")
        time.sleep(0.1)
        drag_pan()

    def keys():
        page.locator(".stw-root").focus()
        page.keyboard.down("w"); time.sleep(0.6); page.keyboard.up("w")
        page.keyboard.down("d"); time.sleep(0.5); page.keyboard.up("d")
        page.keyboard.down("s"); time.sleep(0.6); page.keyboard.up("s")

    def expand_all():
        page.select_option("select.stw-select >> nth=2", "expanded")
        time.sleep(0.2)
        drag_pan()
        wheel_zoom()
        page.select_option("select.stw-select >> nth=2", "collapsed")

    def expand_rows():
        for i in range(8):
            page.mouse.click(box["x"] + 40, box["y"] + 26 + 12 + i * 3)
            time.sleep(0.03)

    def scroll():
        page.mouse.move(box["x"] + 60, cy)
        for i in range(30):
            page.mouse.wheel(0, 200)
            time.sleep(0.016)

    def small_lanes_zoomed_out():
        page.evaluate(f"""(() => {{ const el = document.querySelector('input.stw-range'); el.value = '6'; el.dispatchEvent(new Event('input')); }})()""")
        fit()
        drag_pan()
        page.evaluate(f"""(() => {{ const el = document.querySelector('input.stw-range'); el.value = '18'; el.dispatchEvent(new Event('input')); }})()""")

    def hover_sweep():
        for i in range(60):
            page.mouse.move(box["x"] + 300 + i * 15, cy + (i % 7) * 9)

    def clicks():
        for i in range(6):
            page.mouse.click(box["x"] + 400 + i * 120, cy)
            time.sleep(0.05)
        page.keyboard.press("Escape")

    def filter_typing():
        page.fill("input.stw-input", "")
        page.type("input.stw-input", "deepsearch", delay=30)
        page.keyboard.press("Enter")
        time.sleep(0.2)
        page.fill("input.stw-input", "")
        page.keyboard.press("Enter")

    fit()
    run("hover sweep", hover_sweep)
    run("clicks (cursor+select)", clicks)
    run("filter typing", filter_typing)
    fit()
    run("pan (fit all)", drag_pan)
    run("wheel zoom in/out", wheel_zoom)
    run("pan at 2 s window", deep_zoom_pan)
    fit()
    run("W/S/A/D held", keys)
    fit()
    run("expand all + pan + zoom", expand_all)
    run("expand rows (label clicks)", expand_rows)
    run("scroll rows", scroll)
    run("lane height 6, pan", small_lanes_zoomed_out)
    allf = [x for v in results.values() for x in v]
    print(f"ALL frames {len(allf)}  p50 {pct(allf, .5):.2f} ms  p95 {pct(allf, .95):.2f} ms  max {max(allf):.2f}")
    print("long tasks (>50 ms) during the run:", page.evaluate("window.__long"))
    errs = log["errors"] + [c for c in log["console"] if c.startswith("error")]
    if errs: print("errors", errs[:10])
    browser.close()
