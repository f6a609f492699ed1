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

/** @param {number} value seconds, signed */
function signedDuration(value) {
  if (!Number.isFinite(value)) return "";
  return value > 0 ? `+${formatDuration(value)}` : formatDuration(value);
}

/** @param {number} value */
function signedCount(value) {
  return value > 0 ? `+${formatNumber(value)}` : formatNumber(value);
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
 * @param {Data} data
 * @param {number} value
 * @param {(v: number) => void} onChange
 */
function rolloutSelect(data, value, onChange) {
  const select = /** @type {HTMLSelectElement} */ (el("select", "stw-select"));
  data.meta.rollouts.forEach((label, i) => {
    const option = /** @type {HTMLOptionElement} */ (el("option", "", label));
    option.value = String(i);
    select.appendChild(option);
  });
  select.value = String(value);
  select.addEventListener("change", () => onChange(Number(select.value)));
  return select;
}

/**
 * What the table covers, in words: all the payload's samples, or what the
 * filter box leaves of them.
 * @param {Data} data
 * @param {import("../data/diff.js").DiffScope} scope
 */
export function diffScopeText(data, scope) {
  if (!scope.rows && !scope.keep) return `over all ${formatNumber(data.nSamples)} samples of the timeline`;
  const shown = scope.rows ? scope.rows.length : data.nSamples;
  return `over the ${formatNumber(shown)} of ${formatNumber(data.nSamples)} samples the filter leaves${scope.keep ? ", counting only the spans it matches" : ""}`;
}

/**
 * Fill the diff panel.
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {[number, number]} pair
 * @param {DiffRow[]} rows
 * @param {DiffFocus|null} focus
 * @param {DiffActions} act
 * @param {string} scope what the table covers, in words (diffScopeText)
 */
export function renderDiffPanel(host, data, pair, rows, focus, act, scope) {
  host.replaceChildren();
  const head = el("div", "stw-panel-head");
  head.appendChild(el("div", "stw-panel-title", "Rollout diff"));
  const close = el("button", "stw-btn stw-icon-btn", "×");
  close.title = "close the diff";
  close.addEventListener("click", act.close);
  head.appendChild(close);
  host.appendChild(head);

  const pick = el("div", "stw-diff-pair");
  if (data.meta.rollouts.length > 2) {
    pick.appendChild(el("span", "stw-field-label", "A"));
    pick.appendChild(rolloutSelect(data, pair[0], (rollout) => act.setPair([rollout, pair[1]])));
    pick.appendChild(el("span", "stw-field-label", "B"));
    pick.appendChild(rolloutSelect(data, pair[1], (rollout) => act.setPair([pair[0], rollout])));
  } else {
    pick.textContent = `A: ${data.meta.rollouts[pair[0]]} · B: ${data.meta.rollouts[pair[1]]}`;
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
  for (const [heading, tip] of [
    ["count", "closed spans"],
    ["p50", "median duration (linear interpolation)"],
    ["p95", "95th percentile duration (linear interpolation)"],
    ["total", "summed duration"],
  ]) {
    const group = th("stw-diff-group", heading);
    group.colSpan = 3;
    group.title = tip;
    top.appendChild(group);
    for (const column of ["A", "B", "Δ"]) sub.appendChild(th("stw-num", column));
  }
  for (const [heading, tip] of [
    ["p50 B/A", "ratio of the medians"],
    ["open", "open spans in A/B (not in the statistics)"],
  ]) {
    const cell = th("stw-num", heading);
    cell.rowSpan = 2;
    cell.title = tip;
    top.appendChild(cell);
  }
  thead.appendChild(top);
  thead.appendChild(sub);
  table.appendChild(thead);
  const tb = el("tbody");
  for (const row of rows) tb.appendChild(diffRow(row, focus, act));
  table.appendChild(tb);
  wrap.appendChild(table);
  host.appendChild(wrap);
}

/**
 * @param {DiffRow} row
 * @param {DiffFocus|null} focus
 * @param {DiffActions} act
 */
function diffRow(row, focus, act) {
  const tr = el("tr", focus && focus.name === row.name ? "stw-diff-row stw-row-current" : "stw-diff-row");
  tr.dataset.name = row.label;
  const td = el("td");
  const cell = el("div", "stw-name-cell");
  const sw = el("span", "stw-swatch");
  sw.style.background = colorForName(row.label);
  cell.appendChild(sw);
  cell.appendChild(el("span", "stw-ellipsis", row.label));
  if (focus && focus.name === row.name) cell.appendChild(el("span", "stw-badge", focus.side.toUpperCase()));
  cell.title = `${row.label}: click to show its slowest span in A, again in B`;
  cell.addEventListener("click", () => act.pick(row.name));
  td.appendChild(cell);
  tr.appendChild(td);
  const { a: statsA, b: statsB } = row;
  /** @param {number} value */
  const trend = (value) => (value > 0 ? "stw-diff-up" : value < 0 ? "stw-diff-down" : "");
  tr.appendChild(num(statsA ? formatNumber(statsA.count) : ""));
  tr.appendChild(num(statsB ? formatNumber(statsB.count) : ""));
  tr.appendChild(num(signedCount(row.countDiff)));
  for (const key of /** @type {const} */ (["p50", "p95"])) {
    tr.appendChild(num(statsA && statsA.count ? formatDuration(statsA[key]) : ""));
    tr.appendChild(num(statsB && statsB.count ? formatDuration(statsB[key]) : ""));
    const delta = key === "p50" ? row.p50Diff : row.p95Diff;
    tr.appendChild(num(signedDuration(delta), trend(delta)));
  }
  tr.appendChild(num(statsA ? formatDuration(statsA.total) : ""));
  tr.appendChild(num(statsB ? formatDuration(statsB.total) : ""));
  tr.appendChild(num(signedDuration(row.totalDiff), trend(row.totalDiff)));
  tr.appendChild(num(Number.isFinite(row.p50Ratio) ? `${formatNumber(row.p50Ratio)}×` : ""));
  tr.appendChild(num(`${statsA ? statsA.open : ""}/${statsB ? statsB.open : ""}`));
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
    return this.app.shown.data.meta.rollouts.length >= 2;
  }

  isOpen() {
    return this.app.viewState.settings.diff && this.available();
  }

  /**
   * What the table covers now: the app's rows and the query's span mask
   * (null for each when the filter box is empty).
   * @returns {import("../data/diff.js").DiffScope}
   */
  scopeNow() {
    const masks = this.app.shown.masks;
    return { rows: masks.rowKeep ? this.app.shown.rows : null, keep: masks.keep };
  }

  /** Recompute when needed and fill (or clear) the panel. */
  render() {
    const app = this.app;
    if (!this.isOpen()) {
      app.ui.diffEl.replaceChildren();
      this.focus = null;
      app.ui.root.classList.remove("stw-diff-open");
      app.updateSide();
      return;
    }
    const pair = diffPair(app.shown.data, app.viewState.settings.diffPair);
    const scope = this.scopeNow();
    const moved = this.data !== app.shown.data || pair[0] !== this.pair[0] || pair[1] !== this.pair[1];
    if (moved || scope.rows !== this.scope.rows || scope.keep !== this.scope.keep) {
      this.data = app.shown.data;
      this.pair = pair;
      this.scope = scope;
      this.rows = rolloutDiff(app.shown.data, pair[0], pair[1], scope);
      const focus = this.focus;
      const row = focus && this.rows.find((candidate) => candidate.name === focus.name);
      if (moved || !row || row[focus.side]?.slowest !== focus.span) this.focus = null; // its span is no longer the one shown
    }
    renderDiffPanel(
      app.ui.diffEl,
      app.shown.data,
      this.pair,
      this.rows,
      this.focus,
      {
        close: () => app.changeSettings({ diff: false }),
        setPair: (newPair) => app.changeSettings({ diffPair: newPair }),
        pick: (name) => this.pick(name),
      },
      diffScopeText(app.shown.data, this.scope),
    );
    app.ui.root.classList.add("stw-diff-open");
    app.updateSide();
  }

  /** The rows or the masks may have changed (App.recomputeBrush): follow them while open. */
  changed() {
    if (!this.isOpen()) return;
    const scope = this.scopeNow();
    if (scope.rows !== this.scope.rows || scope.keep !== this.scope.keep) this.render();
  }

  /**
   * Highlight name `name` and select its slowest span in A (in B when A was just
   * shown, or when A lacks the name), the view spanning the slowest of both.
   * @param {number} name
   */
  pick(name) {
    const row = this.rows.find((candidate) => candidate.name === name);
    if (!row) return;
    /** @type {"a"|"b"} */
    let side = this.focus && this.focus.name === name && this.focus.side === "a" ? "b" : "a";
    if (!row[side]) side = side === "a" ? "b" : "a";
    const span = /** @type {DiffSide} */ (row[side]).slowest;
    const app = this.app;
    const data = app.shown.data;
    if (app.viewState.highlight !== name) app.toggleHighlight(name);
    let lo = Infinity;
    let hi = -Infinity;
    for (const stats of [row.a, row.b]) {
      if (!stats) continue;
      lo = Math.min(lo, data.spanStart[stats.slowest]);
      hi = Math.max(hi, data.spanEnd[stats.slowest]);
    }
    const pad = Math.max(hi - lo, 1e-3) * 0.1;
    app.setView(lo - pad, hi + pad);
    app.userView();
    const sample = data.spanSample[span];
    const rowIndex = app.shown.layout.rowOfSample[sample] ?? -1;
    if (rowIndex >= 0 && !filteredOut(data, { kind: "span", index: span })) {
      app.select({ type: "span", row: rowIndex, sample, span, t: data.spanStart[span] });
      app.scrollRowIntoView(rowIndex);
    }
    this.focus = { name, side, span };
    this.render();
  }
}
