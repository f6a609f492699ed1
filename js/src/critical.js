// Critical path of one sample over the payload's spans: the same walk as
// analysis._critical_positions (from the sample's end, the span that finished
// last, then the last to finish before it started, recursively into each
// chosen span's children), so the widget and `analysis.critical_path` agree.
// Which spans count is `measuredSpans`: a [P]/[D] virtual span stands for its
// phase only while the real `sglang_pd_*` span it mirrors is not in the
// payload (the default payload leaves those out), so a phase counts once.
// CriticalView wires the answer to the toolbar toggle, the focus mask and the
// side panel.

import { F_PD_DETAIL, F_VIRTUAL, nameOf } from "./decode.js";
import { formatDuration } from "./format.js";
import { el } from "./dom.js";

/** @typedef {import("./decode.js").Data} Data */
/** @typedef {import("./app.js").App} App */

/** Prefix of the real PD span names (schema.PD_SPAN_PREFIX). */
const PD_PREFIX = "sglang_pd_";
/** Seconds: a child ending exactly with its parent is still inside it (as in analysis.py). */
const EPSILON = 1e-9;

/** @type {WeakMap<Data, Uint8Array>} */
const measuredCache = new WeakMap();

/**
 * Per span, 1 when it carries its own time (analysis.measured_spans): not a
 * PD-detail span, and not a virtual span whose real `sglang_pd_*` twin (same
 * parent and interval) is in the payload too.
 * @param {Data} d
 * @returns {Uint8Array}
 */
export function measuredSpans(d) {
  const cached = measuredCache.get(d);
  if (cached) return cached;
  const out = new Uint8Array(d.nSpans);
  const realPd = d.names.map((n) => n.startsWith(PD_PREFIX));
  /** @type {Set<string>} */
  const twins = new Set();
  const key = (/** @type {number} */ i) => `${d.spanParent[i]}:${d.spanStart[i]}:${d.spanEnd[i]}`;
  for (let i = 0; i < d.nSpans; i++) {
    const fl = d.spanFlags[i];
    if (fl & F_PD_DETAIL) continue;
    out[i] = 1;
    if (!(fl & F_VIRTUAL) && realPd[d.spanName[i]] && d.spanParent[i] >= 0) twins.add(key(i));
  }
  if (twins.size) {
    for (let i = 0; i < d.nSpans; i++) if (d.spanFlags[i] & F_VIRTUAL && twins.has(key(i))) out[i] = 0;
  }
  measuredCache.set(d, out);
  return out;
}

/**
 * @typedef {Object} CriticalStep
 * @property {number} span payload span index
 * @property {number} critical seconds it holds the path itself (its time on the path minus its children's)
 */

/**
 * The critical path of payload sample `s`, in time order (start, then depth).
 * @param {Data} d
 * @param {number} s
 * @returns {CriticalStep[]}
 */
export function criticalPath(d, s) {
  const measured = measuredSpans(d);
  const lo = d.spanOff[s];
  const hi = d.spanOff[s + 1];
  const starts = d.spanStart;
  const ends = d.spanEnd;
  /** @type {Map<number, number[]>} */
  const children = new Map();
  /** @type {number[]} */
  const roots = [];
  let last = -Infinity;
  for (let i = lo; i < hi; i++) {
    if (!measured[i]) continue;
    const p = d.spanParent[i];
    if (p >= lo && p < hi && measured[p]) {
      const kids = children.get(p);
      if (kids) kids.push(i);
      else children.set(p, [i]);
    } else {
      roots.push(i);
    }
    if (ends[i] > last) last = ends[i];
  }
  /** @type {CriticalStep[]} */
  const path = [];
  const latestFirst = (/** @type {number[]} */ pool) => pool.slice().sort((a, b) => ends[b] - ends[a] || starts[a] - starts[b]);
  // The walk with an explicit stack (a crafted chain thousands deep must not
  // exhaust the JS stack). A frame: the span (-1 for the sample), its children
  // latest end first, the next one to look at, the limit, and the time its own
  // path covers so far.
  /** @type {{span: number, kids: number[], next: number, limit: number, covered: number}[]} */
  const stack = roots.length ? [{ span: -1, kids: latestFirst(roots), next: 0, limit: last, covered: 0 }] : [];
  while (stack.length) {
    const top = stack[stack.length - 1];
    let chosen = -1;
    while (top.next < top.kids.length) {
      const k = top.kids[top.next++];
      if (ends[k] <= top.limit + EPSILON) {
        chosen = k; // else still running here: not what the path waited for
        break;
      }
    }
    if (chosen >= 0) {
      stack.push({ span: chosen, kids: latestFirst(children.get(chosen) || []), next: 0, limit: ends[chosen], covered: 0 });
      continue;
    }
    stack.pop();
    if (top.span < 0) break;
    const length = Math.max(ends[top.span] - starts[top.span], 0);
    path.push({ span: top.span, critical: Math.max(length - top.covered, 0) });
    const parent = stack[stack.length - 1];
    parent.covered += length;
    parent.limit = starts[top.span];
  }
  return path.sort((a, b) => starts[a.span] - starts[b.span] || d.spanDepth[a.span] - d.spanDepth[b.span]);
}

/** Steps the side panel lists at most: a DOM row each. */
export const MAX_LISTED = 200;

/**
 * The steps the panel lists: all of them, or the `max` holding the most
 * critical seconds, still in time order.
 * @param {CriticalStep[]} path
 * @param {number} max
 */
export function listedSteps(path, max) {
  if (path.length <= max) return path;
  const keep = new Set(
    path
      .map((step, k) => [step.critical, k])
      .sort((a, b) => b[0] - a[0] || a[1] - b[1])
      .slice(0, max)
      .map(([, k]) => k),
  );
  return path.filter((_, k) => keep.has(k));
}

/**
 * The sample's end-to-end latency (seconds), the denominator of each step's share.
 * @param {Data} d
 * @param {number} s
 */
export function sampleLatency(d, s) {
  const t = d.smpEnd[s] - d.smpStart[s];
  return Number.isFinite(t) && t > 0 ? t : 0;
}

/**
 * The "critical path" toggle: while on, the selected item's sample's path is
 * the timeline's focus (everything else dims) and the side panel lists it.
 */
export class CriticalView {
  /** @param {App} app */
  constructor(app) {
    this.app = app;
    this.panel = app.criticalEl;
    /** @type {Uint8Array|null} the focus mask this view set (null: none) */
    this.focus = null;
    /** @type {CriticalStep[]} */
    this.path = [];
    this.sample = -1;
  }

  /** Recompute for the current selection and toggle (on every change of either, and of the payload). */
  update() {
    const app = this.app;
    const h = app.selection;
    const s = app.s.critical && h && "sample" in h ? h.sample : -1;
    if (s < 0) {
      this.sample = -1;
      this.path = [];
      if (this.focus && app.masks.focus === this.focus) app.setMasks({ focus: null, evFocus: null });
      this.focus = null;
      this.render();
      return;
    }
    const d = app.d;
    this.sample = s;
    this.path = criticalPath(d, s);
    const focus = new Uint8Array(d.nSpans);
    for (const step of this.path) focus[step.span] = 1;
    this.focus = focus;
    app.setMasks({ focus, evFocus: new Uint8Array(d.nEvents) });
    this.render();
  }

  render() {
    const app = this.app;
    const d = app.d;
    this.panel.replaceChildren();
    if (this.sample >= 0) {
      const total = sampleLatency(d, this.sample);
      const head = el("div", "stw-panel-title", `critical path · ${this.path.length} spans · latency ${formatDuration(total)}`);
      this.panel.appendChild(head);
      const list = el("div", "stw-critical-list");
      const shown = listedSteps(this.path, MAX_LISTED);
      for (const step of shown) {
        const row = el("div", "stw-critical-row");
        const share = total > 0 ? `${((100 * step.critical) / total).toFixed(1)}%` : "";
        row.appendChild(el("span", "stw-critical-name", nameOf(d, d.spanName[step.span])));
        row.appendChild(el("span", "stw-critical-secs", formatDuration(step.critical)));
        row.appendChild(el("span", "stw-critical-share", share));
        row.title = `starts at ${formatDuration(d.spanStart[step.span])}; click to select`;
        row.dataset.span = String(step.span);
        row.addEventListener("click", () => {
          const r = app.L.rowOfSample[this.sample] ?? -1;
          app.select({ type: "span", row: r, sample: this.sample, span: step.span, t: d.spanStart[step.span] });
        });
        list.appendChild(row);
      }
      this.panel.appendChild(list);
      if (shown.length < this.path.length) this.panel.appendChild(el("div", "stw-critical-more", `${this.path.length - shown.length} shorter steps not listed (all are bright in the timeline)`));
    }
    app.updateSide();
  }
}
