// Header toolbar: title, "N of M samples" (or what the query matched), the
// query box and its message, attempt filter and
// mode, expand mode, sort key and direction, toggles, row colouring (by span
// or by the sample's fate), lane height, fit buttons. Reflects state without
// re-triggering; reports user changes.

import { SORT_KEYS, SORT_LABELS } from "../data/layout.js";
import { matchSummary, queryHelp } from "../data/query.js";
import { formatNumber } from "../util/format.js";
import { el } from "../util/dom.js";

/**
 * The user-facing settings the toolbar edits (also saved in `view_state`).
 * @typedef {Object} Settings
 * @property {string} filter
 * @property {number} attempt -1 = all
 * @property {"filter"|"highlight"} attemptMode
 * @property {import("../data/layout.js").SortKey} sort
 * @property {boolean} desc
 * @property {boolean} showEvents
 * @property {boolean} showOpen
 * @property {boolean} showUnmatched
 * @property {number} laneH
 * @property {boolean} expandAll
 * @property {boolean} diff the rollout diff panel is open
 * @property {[number, number]} diffPair rollouts A and B of the diff (meta.rollouts indices)
 * @property {boolean} critical the selected sample's critical path is the focus (critical_panel.js)
 * @property {boolean} flame the flame view is open (icicle.js)
 * @property {boolean} loadSplit the engines' load tracks one per engine, else summed (render/tracks.js)
 * @property {"span"|"fate"} colorBy rows plain (bars by span name), or tinted by their sample's fate (render/fate_rows.js)
 */

/**
 * @typedef {Object} ControlsInfo what the toolbar shows besides the settings
 * @property {string} title
 * @property {number} nRows rows after the filter
 * @property {number} nTotal samples in the frames
 * @property {number} nPayload samples in the payload
 * @property {number} maxAttempt
 * @property {number} nRollouts
 * @property {number} [nEngines] engines whose load the payload carries
 * @property {string} [match] what the query matched, in words
 * @property {boolean} [hasFates] the payload's samples have fates (the colour control is offered)
 */

/**
 * @typedef {Object} ControlActions
 * @property {(patch: Partial<Settings>) => void} change
 * @property {() => void} fitAll
 * @property {() => void} fitFiltered
 */

export const LANE_MIN = 6;
export const LANE_MAX = 40;

/**
 * @param {string} label
 * @param {HTMLElement} control
 */
function field(label, control) {
  const labelEl = el("label", "stw-field");
  labelEl.appendChild(el("span", "stw-field-label", label));
  labelEl.appendChild(control);
  return labelEl;
}

/**
 * @param {[string, string][]} options
 */
function select(options) {
  const selectEl = /** @type {HTMLSelectElement} */ (el("select", "stw-select"));
  for (const [value, text] of options) {
    const option = /** @type {HTMLOptionElement} */ (el("option", "", text));
    option.value = value;
    selectEl.appendChild(option);
  }
  return selectEl;
}

/** @param {string} label */
function checkbox(label) {
  const labelEl = el("label", "stw-check");
  const inputEl = /** @type {HTMLInputElement} */ (el("input"));
  inputEl.type = "checkbox";
  labelEl.appendChild(inputEl);
  labelEl.appendChild(document.createTextNode(label));
  return { wrap: labelEl, input: inputEl };
}

/**
 * What the toolbar shows of a payload, its rows and the query's result.
 * @param {import("../data/decode.js").Data} data
 * @param {number} nRows rows after the filter
 * @param {import("../data/query.js").QueryResult|null} result the query's result, null without one
 * @returns {ControlsInfo}
 */
export function controlsInfo(data, nRows, result) {
  return {
    title: data.meta.title,
    nRows,
    nTotal: data.meta.n_samples_total,
    nPayload: data.nSamples,
    maxAttempt: data.maxAttempt,
    nRollouts: data.meta.rollouts.length,
    nEngines: data.load.series.length ? data.load.engines.length : 0,
    match: result ? matchSummary(result, data.meta.n_samples_total) : "",
    hasFates: data.hasFates,
  };
}

export class Controls {
  /**
   * @param {HTMLElement} host
   * @param {ControlActions} act
   */
  constructor(host, act) {
    this.host = host;
    this.act = act;
    /** @type {ReturnType<typeof setTimeout>|undefined} */
    this.filterTimer = undefined;

    const top = el("div", "stw-titlebar");
    this.title = el("div", "stw-title");
    this.count = el("div", "stw-count");
    top.appendChild(this.title);
    top.appendChild(this.count);
    host.appendChild(top);

    const bar = el("div", "stw-toolbar");
    const bar2 = el("div", "stw-toolbar");
    this.filter = /** @type {HTMLInputElement} */ (el("input", "stw-input"));
    this.filter.type = "search";
    this.filter.placeholder = "name:tool* duration>2s key=value status:failed, or words";
    this.filter.title = queryHelp();
    this.filter.spellcheck = false;
    this.filter.addEventListener("input", () => {
      clearTimeout(this.filterTimer);
      this.filterTimer = setTimeout(() => act.change({ filter: this.filter.value }), 120);
    });
    this.filter.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        clearTimeout(this.filterTimer);
        act.change({ filter: this.filter.value });
      }
      if (event.key === "Escape" && this.filter.value) {
        event.stopPropagation();
        this.filter.value = "";
        act.change({ filter: "" });
      }
    });
    const fWrap = field("Filter", this.filter);
    fWrap.classList.add("stw-field-filter");
    bar.appendChild(fWrap);
    /** What the query is doing: "matching…", or why it does not parse (text only). */
    this.queryMsg = el("div", "stw-query-msg");
    this.queryMsg.setAttribute("role", "status");
    this.queryMsg.hidden = true;
    bar.appendChild(this.queryMsg);

    this.attempt = select([["-1", "all attempts"]]);
    this.attempt.addEventListener("change", () => act.change({ attempt: Number(this.attempt.value) }));
    bar.appendChild(field("Attempt", this.attempt));

    this.attemptMode = select([
      ["filter", "filter segments"],
      ["highlight", "highlight"],
    ]);
    this.attemptMode.addEventListener("change", () => act.change({ attemptMode: this.attemptMode.value === "highlight" ? "highlight" : "filter" }));
    bar.appendChild(field("Attempt view", this.attemptMode));

    this.view = select([
      ["collapsed", "collapsed"],
      ["expanded", "expanded"],
    ]);
    this.view.title = "expand or collapse every row (click a row label to toggle one)";
    this.view.addEventListener("change", () => act.change({ expandAll: this.view.value === "expanded" }));
    bar.appendChild(field("View", this.view));

    this.sort = select(SORT_KEYS.map((sortKey) => [sortKey, SORT_LABELS[sortKey]]));
    this.sort.addEventListener("change", () => act.change({ sort: /** @type {any} */ (this.sort.value) }));
    bar.appendChild(field("Sort", this.sort));
    const desc = checkbox("desc");
    this.desc = desc.input;
    this.desc.addEventListener("change", () => act.change({ desc: this.desc.checked }));
    bar.appendChild(desc.wrap);

    const ev = checkbox("instant events");
    this.showEvents = ev.input;
    this.showEvents.addEventListener("change", () => act.change({ showEvents: this.showEvents.checked }));
    bar2.appendChild(ev.wrap);
    const op = checkbox("open spans");
    this.showOpen = op.input;
    this.showOpen.addEventListener("change", () => act.change({ showOpen: this.showOpen.checked }));
    bar2.appendChild(op.wrap);
    const um = checkbox("unmatched ends");
    this.showUnmatched = um.input;
    this.showUnmatched.addEventListener("change", () => act.change({ showUnmatched: this.showUnmatched.checked }));
    bar2.appendChild(um.wrap);

    const cp = checkbox("critical path");
    this.critical = cp.input;
    cp.wrap.title = "dim everything but the selected sample's critical path";
    this.critical.addEventListener("change", () => act.change({ critical: this.critical.checked }));
    bar2.appendChild(cp.wrap);
    const fl = checkbox("flame");
    this.flame = fl.input;
    fl.wrap.title = "icicle of the shown rows, or of the shift-drag range";
    this.flame.addEventListener("change", () => act.change({ flame: this.flame.checked }));
    bar2.appendChild(fl.wrap);

    this.colorBy = select([
      ["span", "by span"],
      ["fate", "by fate"],
    ]);
    this.colorBy.title = "by fate: each row tinted by what became of its sample (signal, no signal, filtered, truncated, aborted, failed)";
    this.colorBy.addEventListener("change", () => act.change({ colorBy: this.colorBy.value === "fate" ? "fate" : "span" }));
    this.colorField = field("Colour", this.colorBy);
    this.colorField.classList.add("stw-field-color");
    bar2.appendChild(this.colorField);

    this.lane = /** @type {HTMLInputElement} */ (el("input", "stw-range"));
    this.lane.type = "range";
    this.lane.min = String(LANE_MIN);
    this.lane.max = String(LANE_MAX);
    this.lane.step = "1";
    this.lane.addEventListener("input", () => act.change({ laneH: Number(this.lane.value) }));
    bar2.appendChild(field("Lane height", this.lane));

    const fitAll = el("button", "stw-btn", "fit all");
    fitAll.title = "show the whole time range";
    fitAll.addEventListener("click", act.fitAll);
    const fitF = el("button", "stw-btn", "fit filtered");
    fitF.title = "fit the time range of the filtered rows";
    fitF.addEventListener("click", act.fitFiltered);
    const fits = el("div", "stw-btn-group");
    fits.appendChild(fitAll);
    fits.appendChild(fitF);
    bar2.appendChild(fits);
    this.load = select([
      ["summed", "summed"],
      ["split", "per engine"],
    ]);
    this.load.title = "the engines' load tracks above the rows: summed over the engines (KV token usage: the fullest), or one per engine";
    this.load.addEventListener("change", () => act.change({ loadSplit: this.load.value === "split" }));
    this.loadField = field("Engine load", this.load);
    this.loadField.classList.add("stw-field-load");
    bar2.appendChild(this.loadField);
    this.diff = el("button", "stw-btn stw-diff-btn", "diff");
    this.diff.title = "rollout diff: per span name, rollout B against rollout A";
    this.diff.addEventListener("click", () => act.change({ diff: this.diff.getAttribute("aria-pressed") !== "true" }));
    bar2.appendChild(this.diff);
    host.appendChild(bar);
    host.appendChild(bar2);
  }

  /**
   * Reflect state into the inputs (without firing change events).
   * @param {Settings} settings
   * @param {ControlsInfo} info
   */
  update(settings, info) {
    this.title.textContent = info.title;
    const shown = info.nTotal !== info.nPayload ? ` (${formatNumber(info.nPayload)} in this view)` : "";
    this.count.textContent = `${info.match || `${formatNumber(info.nRows)} of ${formatNumber(info.nTotal)} samples`}${shown}`;
    if (document.activeElement !== this.filter && this.filter.value !== settings.filter) this.filter.value = settings.filter;
    // Attempt options: all, 0..maxAttempt.
    const want = info.maxAttempt + 2;
    if (this.attempt.options.length !== want) {
      while (this.attempt.options.length > 1) this.attempt.remove(1);
      for (let attempt = 0; attempt <= info.maxAttempt; attempt++) {
        const option = /** @type {HTMLOptionElement} */ (el("option", "", `only attempt ${attempt}`));
        option.value = String(attempt);
        this.attempt.appendChild(option);
      }
    }
    this.attempt.value = String(settings.attempt);
    this.attemptMode.value = settings.attemptMode;
    this.attemptMode.disabled = settings.attempt < 0;
    this.view.value = settings.expandAll ? "expanded" : "collapsed";
    this.sort.value = settings.sort;
    this.desc.checked = settings.desc;
    this.showEvents.checked = settings.showEvents;
    this.showOpen.checked = settings.showOpen;
    this.showUnmatched.checked = settings.showUnmatched;
    this.critical.checked = settings.critical;
    this.flame.checked = settings.flame;
    if (Number(this.lane.value) !== settings.laneH) this.lane.value = String(settings.laneH);
    this.diff.hidden = info.nRollouts < 2;
    this.loadField.hidden = !info.nEngines;
    this.load.value = settings.loadSplit ? "split" : "summed";
    this.colorField.hidden = !info.hasFates;
    this.colorBy.value = settings.colorBy;
    this.diff.setAttribute("aria-pressed", String(settings.diff));
  }

  /**
   * Show the query's state next to the box: nothing, "matching…", or the problem.
   * @param {import("../data/query.js").QueryStatus} st
   */
  setQueryStatus(st) {
    this.queryMsg.hidden = st.state === "idle";
    this.queryMsg.textContent = st.text;
    this.queryMsg.classList.toggle("stw-query-error", st.state === "error");
    this.filter.classList.toggle("stw-input-bad", st.state === "error");
  }

  /** Put the keyboard focus in the filter box ("/" shortcut). */
  focusFilter() {
    this.filter.focus();
    this.filter.select();
  }

  dispose() {
    clearTimeout(this.filterTimer);
  }
}
