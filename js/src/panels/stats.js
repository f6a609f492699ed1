// Cursor counts (samples not started / running / ended at an instant, active
// span names) and the range ("brush") summary per span name, plus the DOM
// that shows them.

import { F_VIRTUAL, LK_SPANS, nameOf } from "../data/decode.js";
import { firstReaching } from "../render/lod.js";
import { colorForName } from "../render/colors.js";
import { formatDuration, formatNumber } from "../util/format.js";
import { el } from "../util/dom.js";

/** @typedef {import("../data/decode.js").Data} Data */

/**
 * @typedef {Object} CursorCounts
 * @property {number} t
 * @property {number} total rows considered
 * @property {number} notStarted
 * @property {number} running
 * @property {number} ended
 * @property {number} untraced
 * @property {{name: number, count: number}[]} active active span names, most first
 */

/**
 * Counts at instant t over the given rows.
 * @param {Data} d
 * @param {ArrayLike<number>} rows payload sample indices
 * @param {Uint8Array} vis span visibility
 * @param {number} t
 * @returns {CursorCounts}
 */
export function cursorCounts(d, rows, vis, t) {
  let notStarted = 0;
  let running = 0;
  let ended = 0;
  let untraced = 0;
  const per = new Uint32Array(d.names.length + 1);
  for (let r = 0; r < rows.length; r++) {
    const s = rows[r];
    const a = d.smpStart[s];
    const b = d.smpEnd[s];
    if (Number.isNaN(a)) {
      untraced++;
      continue;
    }
    if (t < a) notStarted++;
    else if (t > b) ended++;
    else running++;
    if (t < a || t > b) continue;
    const base = d.laneBase[s];
    for (let k = base; k < base + d.nLanes[s]; k++) {
      if (!(d.laneKind[k] & LK_SPANS)) continue;
      const hi = d.laneSpanOff[k + 1];
      for (let i = firstReaching(d.spanEndMax, d.laneSpanOff[k], hi, t); i < hi; i++) {
        if (d.spanStart[i] > t) break;
        if (vis[i] === 0 || d.spanFlags[i] & F_VIRTUAL || !(d.spanEnd[i] >= t)) continue;
        per[Math.min(d.spanName[i], per.length - 1)]++;
      }
    }
  }
  /** @type {{name: number, count: number}[]} */
  const active = [];
  for (let n = 0; n < per.length; n++) if (per[n] > 0) active.push({ name: n, count: per[n] });
  active.sort((x, y) => y.count - x.count || x.name - y.name);
  return { t, total: rows.length, notStarted, running, ended, untraced, active };
}

/**
 * Nearest-rank percentile of an ascending array.
 * @param {ArrayLike<number>} sorted
 * @param {number} q 0..1
 */
export function percentile(sorted, q) {
  const n = sorted.length;
  if (n === 0) return NaN;
  const k = Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
  return sorted[k];
}

/**
 * @typedef {Object} BrushEntry
 * @property {number} name name index
 * @property {number} count spans overlapping the range
 * @property {number} total seconds inside the range (clipped), summed
 * @property {number} mean mean full duration
 * @property {number} p95 95th percentile (nearest rank) of full durations
 * @property {number} max longest full duration
 */

/**
 * @typedef {Object} BrushSummary
 * @property {number} a
 * @property {number} b
 * @property {number} rows rows considered
 * @property {number} rowsWithSpans rows having a span in the range
 * @property {number} spans
 * @property {BrushEntry[]} entries sorted by total time, most first
 */

/**
 * Spans overlapping [a, b] over the given rows, per name.
 * @param {Data} d
 * @param {ArrayLike<number>} rows
 * @param {Uint8Array} vis
 * @param {number} a
 * @param {number} b
 * @returns {BrushSummary}
 */
export function brushSummary(d, rows, vis, a, b) {
  if (b < a) [a, b] = [b, a];
  /** @type {Map<number, {count: number, total: number, durs: number[]}>} */
  const acc = new Map();
  let spans = 0;
  let rowsWithSpans = 0;
  for (let r = 0; r < rows.length; r++) {
    const s = rows[r];
    if (!(d.smpEnd[s] >= a) || !(d.smpStart[s] <= b)) continue;
    const base = d.laneBase[s];
    let any = false;
    for (let k = base; k < base + d.nLanes[s]; k++) {
      if (!(d.laneKind[k] & LK_SPANS)) continue;
      const hi = d.laneSpanOff[k + 1];
      for (let i = firstReaching(d.spanEndMax, d.laneSpanOff[k], hi, a); i < hi; i++) {
        const st = d.spanStart[i];
        if (st > b) break;
        if (vis[i] === 0 || d.spanFlags[i] & F_VIRTUAL) continue;
        let en = d.spanEnd[i];
        if (!(en >= st)) en = st;
        if (en < a) continue;
        const clipped = Math.min(en, b) - Math.max(st, a);
        let e = acc.get(d.spanName[i]);
        if (!e) {
          e = { count: 0, total: 0, durs: [] };
          acc.set(d.spanName[i], e);
        }
        e.count++;
        e.total += Math.max(0, clipped);
        e.durs.push(en - st);
        spans++;
        any = true;
      }
    }
    if (any) rowsWithSpans++;
  }
  /** @type {BrushEntry[]} */
  const entries = [];
  for (const [name, e] of acc) {
    const sorted = Float64Array.from(e.durs).sort();
    let sum = 0;
    for (let i = 0; i < sorted.length; i++) sum += sorted[i];
    entries.push({ name, count: e.count, total: e.total, mean: sum / sorted.length, p95: percentile(sorted, 0.95), max: sorted[sorted.length - 1] });
  }
  entries.sort((x, y) => y.total - x.total || y.count - x.count || x.name - y.name);
  return { a, b, rows: rows.length, rowsWithSpans, spans, entries };
}

// ---------------------------------------------------------------- DOM

/**
 * @param {string} label
 * @param {string} value
 * @param {string} [swatch]
 * @param {string} [extraCls]
 */
function card(label, value, swatch, extraCls) {
  const c = el("div", "stw-card" + (extraCls ? " " + extraCls : ""));
  const l = el("div", "stw-card-label");
  if (swatch) {
    const sw = el("span", "stw-swatch");
    sw.style.background = swatch;
    l.appendChild(sw);
  }
  l.appendChild(document.createTextNode(label));
  c.appendChild(l);
  c.appendChild(el("div", "stw-card-value", value));
  if (swatch) c.title = label;
  return c;
}

/**
 * Fill the stats bar.
 * @param {HTMLElement} host
 * @param {Data} d
 * @param {CursorCounts|null} c
 * @param {number} nRows
 * @param {(name: number) => void} onName click on an active name (highlight)
 */
export function renderStatsBar(host, d, c, nRows, onName) {
  host.replaceChildren();
  if (!c) {
    host.appendChild(card("samples", formatNumber(nRows)));
    const hint = el("div", "stw-stats-hint", "click the timeline to set a cursor: counts of samples not started / running / ended and the spans active at that instant appear here");
    host.appendChild(hint);
    return;
  }
  host.appendChild(card("cursor", formatDuration(c.t), undefined, "stw-card-cursor"));
  host.appendChild(card("samples", formatNumber(c.total)));
  host.appendChild(card("not started", formatNumber(c.notStarted)));
  host.appendChild(card("running", formatNumber(c.running)));
  host.appendChild(card("ended", formatNumber(c.ended)));
  if (c.untraced > 0) host.appendChild(card("untraced", formatNumber(c.untraced)));
  const max = 8;
  for (const a of c.active.slice(0, max)) {
    const name = nameOf(d, a.name);
    const k = card(name, formatNumber(a.count), colorForName(name), "stw-card-name");
    k.addEventListener("click", () => onName(a.name));
    host.appendChild(k);
  }
  if (c.active.length > max) {
    const rest = c.active.slice(max).reduce((n, a) => n + a.count, 0);
    host.appendChild(card(`+${c.active.length - max} more names`, formatNumber(rest)));
  }
}

/**
 * Fill the range summary panel.
 * @param {HTMLElement} host
 * @param {Data} d
 * @param {BrushSummary} sum
 * @param {() => void} onClose
 * @param {(name: number) => void} onName
 */
export function renderBrushPanel(host, d, sum, onClose, onName) {
  host.replaceChildren();
  const head = el("div", "stw-panel-head");
  head.appendChild(el("div", "stw-panel-title", "Range summary"));
  const close = el("button", "stw-btn stw-icon-btn", "×");
  close.title = "clear the range (Esc)";
  close.addEventListener("click", onClose);
  head.appendChild(close);
  host.appendChild(head);
  host.appendChild(
    el(
      "div",
      "stw-panel-sub",
      `${formatDuration(sum.a)} → ${formatDuration(sum.b)} (${formatDuration(sum.b - sum.a)}) · ${formatNumber(sum.spans)} spans in ${formatNumber(sum.rowsWithSpans)} of ${formatNumber(sum.rows)} rows`,
    ),
  );
  if (sum.entries.length === 0) {
    host.appendChild(el("div", "stw-empty", "no spans in this range"));
    return;
  }
  const table = el("table", "stw-table");
  const thead = el("thead");
  const hr = el("tr");
  for (const [h, tip] of [
    ["name", "span name"],
    ["count", "spans overlapping the range"],
    ["in range", "time inside the range, summed over the spans (clipped to the range)"],
    ["mean", "mean full duration of those spans"],
    ["p95", "95th percentile of their full durations"],
  ]) {
    const th = el("th", h === "name" ? "stw-col-name" : "stw-num", h);
    th.title = tip;
    hr.appendChild(th);
  }
  thead.appendChild(hr);
  table.appendChild(thead);
  const tb = el("tbody");
  const totalAll = sum.entries.reduce((x, e) => x + e.total, 0) || 1;
  for (const e of sum.entries) {
    const tr = el("tr");
    const nm = nameOf(d, e.name);
    const td = el("td");
    const wrap = el("div", "stw-name-cell");
    const sw = el("span", "stw-swatch");
    sw.style.background = colorForName(nm);
    wrap.appendChild(sw);
    wrap.appendChild(el("span", "stw-ellipsis", nm));
    wrap.title = `${nm}: click to highlight`;
    wrap.addEventListener("click", () => onName(e.name));
    td.appendChild(wrap);
    tr.appendChild(td);
    tr.appendChild(el("td", "stw-num", formatNumber(e.count)));
    const tot = el("td", "stw-num");
    tot.textContent = formatDuration(e.total);
    const bar = el("div", "stw-minibar");
    bar.style.width = `${Math.max(1, Math.round((e.total / totalAll) * 100))}%`;
    bar.style.background = colorForName(nm);
    tot.appendChild(bar);
    tr.appendChild(tot);
    tr.appendChild(el("td", "stw-num", formatDuration(e.mean)));
    tr.appendChild(el("td", "stw-num", formatDuration(e.p95)));
    tb.appendChild(tr);
  }
  table.appendChild(tb);
  host.appendChild(table);
}
