"""Scripted tour of the harness: screenshots of the main states.
python dev/explore.py ../test-artifacts/harness_20000.html ../test-artifacts/tour"""
import sys, time, json
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from shoot import open_page
from playwright.sync_api import sync_playwright

html, outdir = sys.argv[1], Path(sys.argv[2])
outdir.mkdir(parents=True, exist_ok=True)
dark = "--dark" in sys.argv
R = "document.querySelector('.stw-root')"
with sync_playwright() as p:
    browser, page, log = open_page(p, html, dark=dark)
    dbg = lambda js: page.evaluate(f"(() => {{ const d = {R}.stwDebug; return {js}; }})()")
    time.sleep(0.2)
    page.screenshot(path=str(outdir / "01_default.png"))
    # zoom into the first 60 s, expand row 0
    dbg("d.setView(5, 45)")
    time.sleep(0.2)
    box = page.locator("canvas.stw-canvas").bounding_box()
    page.mouse.click(box["x"] + 60, box["y"] + 26 + 12)  # label of row 0
    time.sleep(0.3)
    page.screenshot(path=str(outdir / "02_zoom_expand.png"))
    # hover a span in row 1 area and click it
    st = dbg("d.state()")
    # find a visible sglang_generate span via spanRect scanning
    idx = page.evaluate(f"""(() => {{ const d = {R}.stwDebug; for (let i = 0; i < 5000; i++) {{ const r = d.spanRect(i); if (r && r.w > 40 && r.h > 10) return [i, r]; }} return null; }})()""")
    print("span", idx)
    if idx:
        i, r = idx
        page.mouse.move(r["x"] + r["w"] / 2, r["y"] + r["h"] * 0.7)
        time.sleep(0.3)
        page.screenshot(path=str(outdir / "03_hover.png"))
        page.mouse.click(r["x"] + r["w"] / 2, r["y"] + r["h"] * 0.7)
        time.sleep(0.5)
        page.screenshot(path=str(outdir / "04_select.png"))
        print("selected", dbg("d.state().selected"))
    # brush
    page.keyboard.down("Shift")
    page.mouse.move(box["x"] + 500, box["y"] + 200)
    page.mouse.down()
    page.mouse.move(box["x"] + 700, box["y"] + 260, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    time.sleep(0.3)
    page.screenshot(path=str(outdir / "05_brush.png"))
    print("state", json.dumps(dbg("d.state()"))[:600])
    print("saved", json.dumps(page.evaluate("window.__stwSaved"))[:800])
    for k, v in log.items():
        bad = [x for x in v if not x.startswith(("file:", "blob:", "data:"))] if k == "requests" else v
        if bad: print(k, bad[:20])
    browser.close()
