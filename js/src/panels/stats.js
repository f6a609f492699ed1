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
 * Counts at instant time over the given rows.
 * @param {Data} data
 * @param {ArrayLike<number>} rows payload sample indices
 * @param {Uint8Array} vis span visibility
 * @param {number} time
 * @returns {CursorCounts}
 */
export function cursorCounts(data, rows, vis, time) {
  let notStarted = 0;
  let running = 0;
  let ended = 0;
  let untraced = 0;
  const per = new Uint32Array(data.names.length + 1);
  for (let rowIndex = 0; rowIndex < rows.length; rowIndex++) {
    const sample = rows[rowIndex];
    const start = data.smpStart[sample];
    const end = data.smpEnd[sample];
    if (Number.isNaN(start)) {
      untraced++;
      continue;
    }
    if (time < start) notStarted++;
    else if (time > end) ended++;
    else running++;
    if (time < start || time > end) continue;
    const base = data.laneBase[sample];
    for (let lane = base; lane < base + data.nLanes[sample]; lane++) {
      if (!(data.laneKind[lane] & LK_SPANS)) continue;
      const hi = data.laneSpanOff[lane + 1];
      for (let i = firstReaching(data.spanEndMax, data.laneSpanOff[lane], hi, time); i < hi; i++) {
        if (data.spanStart[i] > time) break;
        if (vis[i] === 0 || data.spanFlags[i] & F_VIRTUAL || !(data.spanEnd[i] >= time)) continue;
        per[Math.min(data.spanName[i], per.length - 1)]++;
      }
    }
  }
  /** @type {{name: number, count: number}[]} */
  const active = [];
  for (let name = 0; name < per.length; name++) if (per[name] > 0) active.push({ name, count: per[name] });
  active.sort((first, second) => second.count - first.count || first.name - second.name);
  return { t: time, total: rows.length, notStarted, running, ended, untraced, active };
}

/**
 * Nearest-rank percentile of an ascending array.
 * @param {ArrayLike<number>} sorted
 * @param {number} quantile 0..1
 */
export function percentile(sorted, quantile) {
  const count = sorted.length;
  if (count === 0) return NaN;
  const rank = Math.min(count - 1, Math.max(0, Math.ceil(quantile * count) - 1));
  return sorted[rank];
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
 * Spans overlapping [start, end] over the given rows, per name.
 * @param {Data} data
 * @param {ArrayLike<number>} rows
 * @param {Uint8Array} vis
 * @param {number} start
 * @param {number} end
 * @returns {BrushSummary}
 */
export function brushSummary(data, rows, vis, start, end) {
  if (end < start) [start, end] = [end, start];
  /** @type {Map<number, {count: number, total: number, durs: number[]}>} */
  const acc = new Map();
  let spans = 0;
  let rowsWithSpans = 0;
  for (let rowIndex = 0; rowIndex < rows.length; rowIndex++) {
    const sample = rows[rowIndex];
    if (!(data.smpEnd[sample] >= start) || !(data.smpStart[sample] <= end)) continue;
    const base = data.laneBase[sample];
    let any = false;
    for (let lane = base; lane < base + data.nLanes[sample]; lane++) {
      if (!(data.laneKind[lane] & LK_SPANS)) continue;
      const hi = data.laneSpanOff[lane + 1];
      for (let i = firstReaching(data.spanEndMax, data.laneSpanOff[lane], hi, start); i < hi; i++) {
        const st = data.spanStart[i];
        if (st > end) break;
        if (vis[i] === 0 || data.spanFlags[i] & F_VIRTUAL) continue;
        let en = data.spanEnd[i];
        if (!(en >= st)) en = st;
        if (en < start) continue;
        const clipped = Math.min(en, end) - Math.max(st, start);
        let entry = acc.get(data.spanName[i]);
        if (!entry) {
          entry = { count: 0, total: 0, durs: [] };
          acc.set(data.spanName[i], entry);
        }
        entry.count++;
        entry.total += Math.max(0, clipped);
        entry.durs.push(en - st);
        spans++;
        any = true;
      }
    }
    if (any) rowsWithSpans++;
  }
  /** @type {BrushEntry[]} */
  const entries = [];
  for (const [name, entry] of acc) {
    const sorted = Float64Array.from(entry.durs).sort();
    let sum = 0;
    for (let i = 0; i < sorted.length; i++) sum += sorted[i];
    entries.push({ name, count: entry.count, total: entry.total, mean: sum / sorted.length, p95: percentile(sorted, 0.95), max: sorted[sorted.length - 1] });
  }
  entries.sort((first, second) => second.total - first.total || second.count - first.count || first.name - second.name);
  return { a: start, b: end, rows: rows.length, rowsWithSpans, spans, entries };
}

// ---------------------------------------------------------------- DOM

/**
 * @param {string} label
 * @param {string} value
 * @param {string} [swatch]
 * @param {string} [extraCls]
 */
function card(label, value, swatch, extraCls) {
  const box = el("div", "stw-card" + (extraCls ? " " + extraCls : ""));
  const caption = el("div", "stw-card-label");
  if (swatch) {
    const sw = el("span", "stw-swatch");
    sw.style.background = swatch;
    caption.appendChild(sw);
  }
  caption.appendChild(document.createTextNode(label));
  box.appendChild(caption);
  box.appendChild(el("div", "stw-card-value", value));
  if (swatch) box.title = label;
  return box;
}

/**
 * Fill the stats bar.
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {CursorCounts|null} counts
 * @param {number} nRows
 * @param {(name: number) => void} onName click on an active name (highlight)
 */
export function renderStatsBar(host, data, counts, nRows, onName) {
  host.replaceChildren();
  if (!counts) {
    host.appendChild(card("samples", formatNumber(nRows)));
    const hint = el("div", "stw-stats-hint", "click the timeline to set a cursor: counts of samples not started / running / ended and the spans active at that instant appear here");
    host.appendChild(hint);
    return;
  }
  host.appendChild(card("cursor", formatDuration(counts.t), undefined, "stw-card-cursor"));
  host.appendChild(card("samples", formatNumber(counts.total)));
  host.appendChild(card("not started", formatNumber(counts.notStarted)));
  host.appendChild(card("running", formatNumber(counts.running)));
  host.appendChild(card("ended", formatNumber(counts.ended)));
  if (counts.untraced > 0) host.appendChild(card("untraced", formatNumber(counts.untraced)));
  const max = 8;
  for (const entry of counts.active.slice(0, max)) {
    const name = nameOf(data, entry.name);
    const nameCard = card(name, formatNumber(entry.count), colorForName(name), "stw-card-name");
    nameCard.addEventListener("click", () => onName(entry.name));
    host.appendChild(nameCard);
  }
  if (counts.active.length > max) {
    const rest = counts.active.slice(max).reduce((sum, entry) => sum + entry.count, 0);
    host.appendChild(card(`+${counts.active.length - max} more names`, formatNumber(rest)));
  }
}

/**
 * Fill the range summary panel.
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {BrushSummary} sum
 * @param {() => void} onClose
 * @param {(name: number) => void} onName
 */
export function renderBrushPanel(host, data, sum, onClose, onName) {
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
  const table = el("table", "stw-table stw-range-table");
  const thead = el("thead");
  const hr = el("tr");
  for (const [heading, tip] of [
    ["name", "span name"],
    ["count", "spans overlapping the range"],
    ["in range", "time inside the range, summed over the spans (clipped to the range)"],
    ["mean", "mean full duration of those spans"],
    ["p95", "95th percentile of their full durations"],
  ]) {
    const th = el("th", heading === "name" ? "stw-col-name" : "stw-num", heading);
    th.title = tip;
    hr.appendChild(th);
  }
  thead.appendChild(hr);
  table.appendChild(thead);
  const tb = el("tbody");
  const totalAll = sum.entries.reduce((total, entry) => total + entry.total, 0) || 1;
  for (const entry of sum.entries) {
    const tr = el("tr");
    const nm = nameOf(data, entry.name);
    const td = el("td");
    const wrap = el("div", "stw-name-cell");
    const sw = el("span", "stw-swatch");
    sw.style.background = colorForName(nm);
    wrap.appendChild(sw);
    wrap.appendChild(el("span", "stw-ellipsis", nm));
    wrap.title = `${nm}: click to highlight`;
    wrap.addEventListener("click", () => onName(entry.name));
    td.appendChild(wrap);
    tr.appendChild(td);
    tr.appendChild(el("td", "stw-num", formatNumber(entry.count)));
    const tot = el("td", "stw-num");
    tot.textContent = formatDuration(entry.total);
    const bar = el("div", "stw-minibar");
    bar.style.width = `${Math.max(1, Math.round((entry.total / totalAll) * 100))}%`;
    bar.style.background = colorForName(nm);
    tot.appendChild(bar);
    tr.appendChild(tot);
    tr.appendChild(el("td", "stw-num", formatDuration(entry.mean)));
    tr.appendChild(el("td", "stw-num", formatDuration(entry.p95)));
    tb.appendChild(tr);
  }
  table.appendChild(tb);
  host.appendChild(table);
}
