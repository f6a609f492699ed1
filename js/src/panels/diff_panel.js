// The rollout diff panel (side column): the table of diff.js for rollouts A and
// B, their selects when there are more than two, and a click on a name that
// highlights it and shows its slowest span in A, then (clicked again) in B,
// with the view spanning both. The table covers what the filter box leaves
// (the shown rows, the spans its query keeps) and follows it while open; a
// click never selects a hidden span. Text from dumps goes in with textContent.

import { rolloutDiff, diffPair } from "../data/diff.js";
import { filteredOut } from "../data/links.js";
import { formatDuration, formatNumber } from "../util/format.js";
import { colorForName } from "../render/colors.js";
import { el } from "../util/dom.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/diff.js").DiffRow} DiffRow */
/** @typedef {import("../data/diff.js").DiffSide} DiffSide */
/** @typedef {import("../ui/app.js").App} App */

/**
 * The name last clicked and which rollout's slowest span it shows.
 * @typedef {{name: number, side: "a"|"b", span: number}} DiffFocus
 */

/**
 * @typedef {Object} DiffActions
 * @property {() => void} close
 * @property {(pair: [number, number]) => void} setPair
 * @property {(name: number) => void} pick
 */

/** @param {number} v seconds, signed */
function signedDuration(v) {
  if (!Number.isFinite(v)) return "";
  return v > 0 ? `+${formatDuration(v)}` : formatDuration(v);
}

/** @param {number} v */
function signedCount(v) {
  return v > 0 ? `+${formatNumber(v)}` : formatNumber(v);
}

/**
 * @param {string} cls
 * @param {string} text
 */
function th(cls, text) {
  return /** @type {HTMLTableCellElement} */ (el("th", cls, text));
}

/**
 * @param {string} text
 * @param {string} [cls]
 */
function num(text, cls = "") {
  return el("td", `stw-num${cls ? " " + cls : ""}`, text);
}

/**
 * @param {Data} d
 * @param {number} value
 * @param {(v: number) => void} onChange
 */
function rolloutSelect(d, value, onChange) {
  const s = /** @type {HTMLSelectElement} */ (el("select", "stw-select"));
  d.meta.rollouts.forEach((label, i) => {
    const o = /** @type {HTMLOptionElement} */ (el("option", "", label));
    o.value = String(i);
    s.appendChild(o);
  });
  s.value = String(value);
  s.addEventListener("change", () => onChange(Number(s.value)));
  return s;
}

/**
 * What the table covers, in words: all the payload's samples, or what the
 * filter box leaves of them.
 * @param {Data} d
 * @param {import("../data/diff.js").DiffScope} scope
 */
export function diffScopeText(d, scope) {
  if (!scope.rows && !scope.keep) return `over all ${formatNumber(d.nSamples)} samples of the timeline`;
  const shown = scope.rows ? scope.rows.length : d.nSamples;
  return `over the ${formatNumber(shown)} of ${formatNumber(d.nSamples)} samples the filter leaves${scope.keep ? ", counting only the spans it matches" : ""}`;
}

/**
 * Fill the diff panel.
 * @param {HTMLElement} host
 * @param {Data} d
 * @param {[number, number]} pair
 * @param {DiffRow[]} rows
 * @param {DiffFocus|null} focus
 * @param {DiffActions} act
 * @param {string} scope what the table covers, in words (diffScopeText)
 */
export function renderDiffPanel(host, d, pair, rows, focus, act, scope) {
  host.replaceChildren();
  const head = el("div", "stw-panel-head");
  head.appendChild(el("div", "stw-panel-title", "Rollout diff"));
  const close = el("button", "stw-btn stw-icon-btn", "×");
  close.title = "close the diff";
  close.addEventListener("click", act.close);
  head.appendChild(close);
  host.appendChild(head);

  const pick = el("div", "stw-diff-pair");
  if (d.meta.rollouts.length > 2) {
    pick.appendChild(el("span", "stw-field-label", "A"));
    pick.appendChild(rolloutSelect(d, pair[0], (v) => act.setPair([v, pair[1]])));
    pick.appendChild(el("span", "stw-field-label", "B"));
    pick.appendChild(rolloutSelect(d, pair[1], (v) => act.setPair([pair[0], v])));
  } else {
    pick.textContent = `A: ${d.meta.rollouts[pair[0]]} · B: ${d.meta.rollouts[pair[1]]}`;
  }
  host.appendChild(pick);
  host.appendChild(
    el(
      "div",
      "stw-panel-sub",
      "per span name, B − A, largest increase of total first; closed spans (open ones only counted, under open); [P]/[D] count once. Click a name: its slowest span in A, again: in B.",
    ),
  );
  host.appendChild(el("div", "stw-panel-sub stw-diff-scope", scope));
  if (rows.length === 0) {
    host.appendChild(el("div", "stw-empty", "no spans in these rollouts"));
    return;
  }
  const wrap = el("div", "stw-diff-scroll");
  const table = el("table", "stw-table stw-diff-table");
  const thead = el("thead");
  const top = el("tr");
  const sub = el("tr");
  const nameTh = th("stw-col-name", "name");
  nameTh.rowSpan = 2;
  top.appendChild(nameTh);
  for (const [h, tip] of [
    ["count", "closed spans"],
    ["p50", "median duration (linear interpolation)"],
    ["p95", "95th percentile duration (linear interpolation)"],
    ["total", "summed duration"],
  ]) {
    const group = th("stw-diff-group", h);
    group.colSpan = 3;
    group.title = tip;
    top.appendChild(group);
    for (const s of ["A", "B", "Δ"]) sub.appendChild(th("stw-num", s));
  }
  for (const [h, tip] of [
    ["p50 B/A", "ratio of the medians"],
    ["open", "open spans in A/B (not in the statistics)"],
  ]) {
    const cell = th("stw-num", h);
    cell.rowSpan = 2;
    cell.title = tip;
    top.appendChild(cell);
  }
  thead.appendChild(top);
  thead.appendChild(sub);
  table.appendChild(thead);
  const tb = el("tbody");
  for (const r of rows) tb.appendChild(diffRow(r, focus, act));
  table.appendChild(tb);
  wrap.appendChild(table);
  host.appendChild(wrap);
}

/**
 * @param {DiffRow} r
 * @param {DiffFocus|null} focus
 * @param {DiffActions} act
 */
function diffRow(r, focus, act) {
  const tr = el("tr", focus && focus.name === r.name ? "stw-diff-row stw-row-current" : "stw-diff-row");
  tr.dataset.name = r.label;
  const td = el("td");
  const cell = el("div", "stw-name-cell");
  const sw = el("span", "stw-swatch");
  sw.style.background = colorForName(r.label);
  cell.appendChild(sw);
  cell.appendChild(el("span", "stw-ellipsis", r.label));
  if (focus && focus.name === r.name) cell.appendChild(el("span", "stw-badge", focus.side.toUpperCase()));
  cell.title = `${r.label}: click to show its slowest span in A, again in B`;
  cell.addEventListener("click", () => act.pick(r.name));
  td.appendChild(cell);
  tr.appendChild(td);
  const { a, b } = r;
  /** @param {number} v */
  const trend = (v) => (v > 0 ? "stw-diff-up" : v < 0 ? "stw-diff-down" : "");
  tr.appendChild(num(a ? formatNumber(a.count) : ""));
  tr.appendChild(num(b ? formatNumber(b.count) : ""));
  tr.appendChild(num(signedCount(r.countDiff)));
  for (const key of /** @type {const} */ (["p50", "p95"])) {
    tr.appendChild(num(a && a.count ? formatDuration(a[key]) : ""));
    tr.appendChild(num(b && b.count ? formatDuration(b[key]) : ""));
    const delta = key === "p50" ? r.p50Diff : r.p95Diff;
    tr.appendChild(num(signedDuration(delta), trend(delta)));
  }
  tr.appendChild(num(a ? formatDuration(a.total) : ""));
  tr.appendChild(num(b ? formatDuration(b.total) : ""));
  tr.appendChild(num(signedDuration(r.totalDiff), trend(r.totalDiff)));
  tr.appendChild(num(Number.isFinite(r.p50Ratio) ? `${formatNumber(r.p50Ratio)}×` : ""));
  tr.appendChild(num(`${a ? a.open : ""}/${b ? b.open : ""}`));
  return tr;
}

/**
 * The diff of one widget: which pair, its rows (recomputed when the payload or
 * the pair changes), the focused name, and the panel.
 */
export class DiffView {
  /** @param {App} app */
  constructor(app) {
    this.app = app;
    /** @type {Data|null} payload the rows were computed from */
    this.data = null;
    /** @type {[number, number]} */
    this.pair = [0, 1];
    /** @type {DiffRow[]} */
    this.rows = [];
    /** @type {DiffFocus|null} */
    this.focus = null;
    /** @type {import("../data/diff.js").DiffScope} what `rows` cover */
    this.scope = { rows: null, keep: null };
  }

  /** Offered only with two rollouts or more. */
  available() {
    return this.app.data.meta.rollouts.length >= 2;
  }

  isOpen() {
    return this.app.settings.diff && this.available();
  }

  /**
   * What the table covers now: the app's rows and the query's span mask
   * (null for each when the filter box is empty).
   * @returns {import("../data/diff.js").DiffScope}
   */
  scopeNow() {
    const m = this.app.masks;
    return { rows: m.rowKeep ? this.app.rows : null, keep: m.keep };
  }

  /** Recompute when needed and fill (or clear) the panel. */
  render() {
    const app = this.app;
    if (!this.isOpen()) {
      app.diffEl.replaceChildren();
      this.focus = null;
      app.root.classList.remove("stw-diff-open");
      app.updateSide();
      return;
    }
    const pair = diffPair(app.data, app.settings.diffPair);
    const scope = this.scopeNow();
    const moved = this.data !== app.data || pair[0] !== this.pair[0] || pair[1] !== this.pair[1];
    if (moved || scope.rows !== this.scope.rows || scope.keep !== this.scope.keep) {
      this.data = app.data;
      this.pair = pair;
      this.scope = scope;
      this.rows = rolloutDiff(app.data, pair[0], pair[1], scope);
      const f = this.focus;
      const row = f && this.rows.find((r) => r.name === f.name);
      if (moved || !row || row[f.side]?.slowest !== f.span) this.focus = null; // its span is no longer the one shown
    }
    renderDiffPanel(
      app.diffEl,
      app.data,
      this.pair,
      this.rows,
      this.focus,
      {
        close: () => app.changeSettings({ diff: false }),
        setPair: (p) => app.changeSettings({ diffPair: p }),
        pick: (n) => this.pick(n),
      },
      diffScopeText(app.data, this.scope),
    );
    app.root.classList.add("stw-diff-open");
    app.updateSide();
  }

  /** The rows or the masks may have changed (App.recomputeBrush): follow them while open. */
  changed() {
    if (!this.isOpen()) return;
    const scope = this.scopeNow();
    if (scope.rows !== this.scope.rows || scope.keep !== this.scope.keep) this.render();
  }

  /**
   * Highlight name `n` and select its slowest span in A (in B when A was just
   * shown, or when A lacks the name), the view spanning the slowest of both.
   * @param {number} n
   */
  pick(n) {
    const row = this.rows.find((r) => r.name === n);
    if (!row) return;
    /** @type {"a"|"b"} */
    let side = this.focus && this.focus.name === n && this.focus.side === "a" ? "b" : "a";
    if (!row[side]) side = side === "a" ? "b" : "a";
    const span = /** @type {DiffSide} */ (row[side]).slowest;
    const app = this.app;
    const d = app.data;
    if (app.highlight !== n) app.toggleHighlight(n);
    let lo = Infinity;
    let hi = -Infinity;
    for (const x of [row.a, row.b]) {
      if (!x) continue;
      lo = Math.min(lo, d.spanStart[x.slowest]);
      hi = Math.max(hi, d.spanEnd[x.slowest]);
    }
    const pad = Math.max(hi - lo, 1e-3) * 0.1;
    app.setView(lo - pad, hi + pad);
    app.userView();
    const s = d.spanSample[span];
    const r = app.layout.rowOfSample[s] ?? -1;
    if (r >= 0 && !filteredOut(d, { kind: "span", index: span })) {
      app.select({ type: "span", row: r, sample: s, span, t: d.spanStart[span] });
      app.scrollRowIntoView(r);
    }
    this.focus = { name: n, side, span };
    this.render();
  }

  /** What the tests read (root.stwDebug.diff()). */
  debugState() {
    const side = (/** @type {DiffSide|null} */ x) => (x ? { count: x.count, p50: x.p50, p95: x.p95, total: x.total, open: x.open, slowest: x.slowest } : null);
    return {
      available: this.available(),
      open: this.isOpen(),
      pair: this.isOpen() ? [...this.pair] : null,
      scope: this.isOpen() ? diffScopeText(this.app.data, this.scope) : null,
      rows: this.isOpen() ? this.rows.map((r) => ({ name: r.label, a: side(r.a), b: side(r.b), totalDiff: r.totalDiff, p50Ratio: r.p50Ratio })) : [],
      focus: this.focus ? { name: this.rows.find((r) => r.name === this.focus?.name)?.label ?? null, side: this.focus.side, span: this.focus.span } : null,
    };
  }
}
