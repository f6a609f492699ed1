"""bench_render's opening of a widget in JupyterLab: the page's websocket and long-task
probes, the from_dump cell that reports the payload's sizes, the display cell, and the
first paint's timings read in the page; and freeing a finished case's kernel.

``PROBES`` is shared: ``bench_frontends.py`` takes it through ``bench_render``.
``bench_render.py`` sets up ``sys.path`` before importing this module.
"""

from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.browser import VIEWPORT, JupyterLab, NotebookPage

DISPLAY_CELL = 1

# Runs in every document before JupyterLab's scripts: timestamps each kernel
# websocket message (type read from its header, size in bytes) and every long task.
PROBES = """
(() => {
  const wsLog = [];
  const longTasks = [];
  window.__stwWs = wsLog;
  window.__stwLong = longTasks;
  const decoder = new TextDecoder("latin1");
  const typeOf = (data) => {
    let head = "";
    if (typeof data === "string") head = data.slice(0, 4096);
    else if (data instanceof ArrayBuffer)
      head = decoder.decode(new Uint8Array(data, 0, Math.min(4096, data.byteLength)));
    else if (ArrayBuffer.isView(data))
      head = decoder.decode(new Uint8Array(data.buffer, data.byteOffset,
                                           Math.min(4096, data.byteLength)));
    const m = /"msg_type"\\s*:\\s*"(\\w+)"/.exec(head);
    return m ? m[1] : "?";
  };
  const sizeOf = (data) =>
    typeof data === "string" ? data.length : (data.byteLength ?? data.size ?? 0);
  const Native = window.WebSocket;
  class ProbedWebSocket extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (e) => wsLog.push(
        {t: performance.now(), dir: "in", type: typeOf(e.data), bytes: sizeOf(e.data)}));
    }
    send(data) {
      wsLog.push({t: performance.now(), dir: "out", type: typeOf(data), bytes: sizeOf(data)});
      super.send(data);
    }
  }
  window.WebSocket = ProbedWebSocket;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) longTasks.push({start: e.startTime, dur: e.duration});
  }).observe({type: "longtask"});
})();
"""

# Watches one cell: when its output area gets a child, when .stw-root appears and
# when data-ready turns "1" (the observer runs in the same task as the frame that set it).
WATCH_FIRST_PAINT = """
(cell) => {
  const rec = {out: null, root: null, ready: null};
  window.__stwFirstPaint = rec;
  const obs = new MutationObserver((mutations) => {
    const now = performance.now();
    for (const m of mutations) {
      if (m.type === "childList") {
        for (const n of m.addedNodes) {
          if (!(n instanceof Element)) continue;
          if (rec.out === null && (n.matches(".jp-OutputArea-child")
                                   || n.querySelector(".jp-OutputArea-child"))) rec.out = now;
          if (rec.root === null && (n.matches(".stw-root") || n.querySelector(".stw-root")))
            rec.root = now;
        }
      } else if (rec.ready === null && m.target.getAttribute("data-ready") === "1") {
        rec.ready = now;
        obs.disconnect();
      }
    }
  });
  obs.observe(cell, {subtree: true, childList: true, attributes: true,
                     attributeFilter: ["data-ready"]});
}
"""

FROM_DUMP_CELL = """\
import json, time
from slime_trace_widget import TraceTimeline
_start = time.perf_counter()
tl = TraceTimeline.from_dump({path!r})
_seconds = time.perf_counter() - _start
_end_epoch_ms = time.time() * 1000
_buffers = tl.view.payload["buffers"]
_core = tl.frames.span_core
print("STATS " + json.dumps({{
    "from_dump_s": _seconds,
    "end_epoch_ms": _end_epoch_ms,
    "group_bytes": {{g: sum(len(v) for k, v in _buffers.items() if k.startswith(g + "_"))
                    for g in ("smp", "span", "seg", "ev")}},
    "n_bytes": sum(len(b) for b in tl.view.payload["buffers"].values()),
    "meta_bytes": len(json.dumps(tl.view.payload["meta"])),
    "samples": len(tl.view.sample_rows),
    "spans": len(tl.view.span_index),
    "segments": len(_buffers["seg_start"]) // 4,
    "events": len(tl.view.event_index),
    "frame_spans": len(_core),
    "virtual": int(_core["virtual"].sum()),
    "pd_detail": int(_core["pd_detail"].sum()),
}}))
"""


def shutdown_kernels(lab: JupyterLab) -> None:
    """Delete every session of the private server, so a finished case frees its kernel."""
    base = f"{lab.url}/api/sessions"
    with urllib.request.urlopen(f"{base}?token={lab.token}", timeout=10) as response:
        sessions = json.load(response)
    for session in sessions:
        request = urllib.request.Request(f"{base}/{session['id']}?token={lab.token}",
                                         method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()


def open_widget(lab: JupyterLab, browser: Any, key: str,
                dump: Path) -> tuple[Any, dict[str, Any]]:
    """Run the from_dump cell on ``dump``, then the display cell, in a notebook and
    workspace named after the case ``key``; returns the page and the timings."""
    url = lab.write_notebook(f"bench_{key}.ipynb",
                             [FROM_DUMP_CELL.format(path=str(dump)), "tl"])
    # A workspace per case: the default one would reopen the previous case's notebook,
    # and NotebookPage's selectors would then find its cells first.
    url = url.replace("/lab/tree/", f"/lab/workspaces/bench-{key}/tree/")
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    page.add_init_script(PROBES)
    errors: list[str] = []  # keeps filling during the interactions; printed at the end
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    notebook = NotebookPage(page, timeout_ms=240_000)
    notebook.open(url)

    mark = page.evaluate("() => window.__stwWs.length")
    notebook.run_cell(0)
    text = notebook.output_text(0)
    stats_line = next((line for line in text.splitlines() if line.startswith("STATS ")), None)
    if stats_line is None:
        raise RuntimeError(f"from_dump cell failed:\n{text[-3000:]}")
    stats = json.loads(stats_line[len("STATS "):])
    ws = page.evaluate("(k) => window.__stwWs.slice(k)", mark)
    sent = next(m for m in ws if m["dir"] == "out" and m["type"] == "execute_request")
    comm = max((m for m in ws if m["dir"] == "in" and m["type"] == "comm_open"),
               key=lambda m: m["bytes"], default=None)
    stats["comm_open_s"] = (comm["t"] - sent["t"]) / 1000 if comm else math.nan
    stats["comm_open_bytes"] = comm["bytes"] if comm else 0
    # Same machine, same clock: the kernel's epoch time against the page's time origin.
    origin = page.evaluate("() => performance.timeOrigin")
    stats["transfer_ms"] = origin + comm["t"] - stats["end_epoch_ms"] if comm else math.nan

    cell = notebook.cell(DISPLAY_CELL).element_handle()
    cell.evaluate(WATCH_FIRST_PAINT)
    mark = page.evaluate("() => window.__stwWs.length")
    notebook.run_cell(DISPLAY_CELL)
    ready = f".jp-Notebook .jp-Cell:nth-child({DISPLAY_CELL + 1}) .stw-root[data-ready='1']"
    try:
        page.wait_for_selector(ready, timeout=240_000)
    except Exception as exc:
        raise RuntimeError(f"widget never painted; page errors: {errors[:5]}; output: "
                           f"{notebook.output_text(DISPLAY_CELL)[-2000:]}") from exc
    page.wait_for_function("() => window.__stwFirstPaint.ready !== null")
    seen = page.evaluate("() => window.__stwFirstPaint")
    ws = page.evaluate("(k) => window.__stwWs.slice(k)", mark)
    sent = next(m for m in ws if m["dir"] == "out" and m["type"] == "execute_request")
    root = page.locator(ready)
    stats.update(
        fp_exec_ms=seen["ready"] - sent["t"],
        fp_output_ms=seen["ready"] - seen["out"] if seen["out"] is not None else math.nan,
        fp_renderer_ms=root.evaluate("el => el.stwDebug.firstPaintMs"),
        rows=int(root.get_attribute("data-rows")),
        drawn_rows=int(root.get_attribute("data-drawn-rows")),
        errors=errors,
    )
    return page, stats
