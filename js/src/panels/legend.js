// Legend: span names with their colours (most used first; click one to
// highlight it), PD phase colours, instant-event names, and a key for the
// markers (instant event, cluster, unmatched end, open span, error).

import { F_ENGINE, F_PD_DETAIL, F_VIRTUAL, EV_INSTANT, nameOf } from "../data/decode.js";
import { colorForName, colorForSegment } from "../render/colors.js";
import { el } from "../util/dom.js";

/** @typedef {import("../data/decode.js").Data} Data */

/**
 * @typedef {Object} LegendInfo
 * @property {{name: number, count: number}[]} spans drawable span names, most used first
 * @property {{name: number, count: number}[]} engine names of the engine's spans, most used first
 * @property {{name: number, count: number}[]} segments PD segment names
 * @property {{name: number, count: number}[]} events instant event names
 * @property {boolean} hasOpen
 * @property {boolean} hasUnmatched
 * @property {boolean} hasError
 */

/**
 * Count name usage once per payload.
 * @param {Data} d
 * @returns {LegendInfo}
 */
export function legendInfo(d) {
  const n = d.names.length + 1;
  const sp = new Uint32Array(n);
  const en = new Uint32Array(n);
  const sg = new Uint32Array(n);
  const ev = new Uint32Array(n);
  let hasOpen = false;
  let hasError = false;
  let hasUnmatched = false;
  for (let i = 0; i < d.nSpans; i++) {
    const fl = d.spanFlags[i];
    if (fl & (F_PD_DETAIL | F_VIRTUAL)) continue;
    (fl & F_ENGINE ? en : sp)[Math.min(d.spanName[i], n - 1)]++;
    if (fl & 1) hasOpen = true;
    if (fl & 4) hasError = true;
  }
  for (let i = 0; i < d.nSegs; i++) sg[Math.min(d.segName[i], n - 1)]++;
  for (let i = 0; i < d.nEvents; i++) {
    if (d.evKind[i] === EV_INSTANT) ev[Math.min(d.evName[i], n - 1)]++;
    else hasUnmatched = true;
  }
  const list = (/** @type {Uint32Array} */ a) => {
    /** @type {{name: number, count: number}[]} */
    const out = [];
    for (let i = 0; i < a.length; i++) if (a[i]) out.push({ name: i, count: a[i] });
    return out.sort((x, y) => y.count - x.count || x.name - y.name);
  };
  const segs = list(sg);
  // PD segments in pipeline order: prefill first, then decode.
  segs.sort((x, y) => phaseRank(nameOf(d, x.name)) - phaseRank(nameOf(d, y.name)) || x.name - y.name);
  return { spans: list(sp), engine: list(en), segments: segs, events: list(ev), hasOpen, hasUnmatched, hasError };
}

/** @param {string} name */
function phaseRank(name) {
  const n = name.toLowerCase();
  const dec = n.includes("decode") ? 10 : 0;
  const order = ["bootstrap_queue", "prealloc", "bootstrap", "alloc_wait", "forward", "transfer_queue", "transfer"];
  const k = order.findIndex((o) => n.includes(o));
  return dec + (k < 0 ? 9 : k);
}

/**
 * Render the legend.
 * @param {HTMLElement} host
 * @param {Data} d
 * @param {LegendInfo} info
 * @param {number} highlight highlighted name index, -1 for none
 * @param {(name: number) => void} onClick
 */
export function renderLegend(host, d, info, highlight, onClick) {
  host.replaceChildren();
  const group = (/** @type {string} */ title) => {
    const g = el("div", "stw-legend-group");
    if (title) g.appendChild(el("span", "stw-legend-title", title));
    host.appendChild(g);
    return g;
  };
  /**
   * @param {HTMLElement} g
   * @param {number} name
   * @param {string} color
   * @param {string} text
   * @param {number} count
   * @param {string} shape
   */
  const item = (g, name, color, text, count, shape) => {
    const b = el("button", "stw-legend-item");
    if (highlight >= 0) b.classList.add(highlight === name ? "stw-active" : "stw-dim");
    const sw = el("span", shape);
    sw.style.background = color;
    b.appendChild(sw);
    b.appendChild(el("span", "stw-legend-text", text.length > 48 ? text.slice(0, 47) + "…" : text));
    b.title = `${text}: ${count.toLocaleString("en-US")} — click to highlight`;
    b.addEventListener("click", () => onClick(name));
    g.appendChild(b);
  };
  const MAX = 24;
  const names = (/** @type {string} */ title, /** @type {{name: number, count: number}[]} */ entries) => {
    if (!entries.length) return;
    const g = group(title);
    for (const e of entries.slice(0, MAX)) {
      const nm = nameOf(d, e.name);
      item(g, e.name, colorForName(nm), nm, e.count, "stw-swatch");
    }
    if (entries.length > MAX) g.appendChild(el("span", "stw-legend-more", `+${entries.length - MAX} more`));
  };
  names("", info.spans);
  names("engine (SGLang's own trace of each request)", info.engine);
  if (info.segments.length) {
    const g = group("PD (collapsed: thin band, P over D; expanded: [P]/[D] lanes)");
    for (const e of info.segments.slice(0, MAX)) {
      const nm = nameOf(d, e.name);
      const phase = nm.toLowerCase().includes("decode") ? "[D]" : "[P]";
      item(g, e.name, colorForSegment(nm), `${phase} ${nm.replace(/^(sglang_)?(pd_)?(prefill_|decode_)?/, "")}`, e.count, "stw-swatch");
    }
  }
  if (info.events.length) {
    const g = group("events");
    for (const e of info.events.slice(0, 12)) {
      const nm = nameOf(d, e.name);
      item(g, e.name, colorForName(nm), nm, e.count, "stw-diamond");
    }
    if (info.events.length > 12) g.appendChild(el("span", "stw-legend-more", `+${info.events.length - 12} more`));
  }
  const key = group("");
  key.classList.add("stw-legend-key");
  const k = (/** @type {string} */ cls, /** @type {string} */ text, /** @type {string} */ tip) => {
    const s = el("span", "stw-key");
    s.appendChild(el("span", cls));
    s.appendChild(document.createTextNode(text));
    s.title = tip;
    key.appendChild(s);
  };
  k("stw-key-cluster", "cluster", "instant events closer than a few pixels, drawn as one badge with their count");
  if (info.hasOpen) k("stw-key-open", "open span", "a span with no end record, drawn dashed up to where it was clipped");
  if (info.hasUnmatched) k("stw-key-unmatched", "unmatched end", "an end record whose start is missing");
  if (info.hasError) k("stw-key-error", "error", "the span ended with an error");
}
