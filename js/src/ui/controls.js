// Header toolbar: title, "N of M samples" (or what the query matched), the
// loader's warnings (warnings.js), the query box and its message, attempt filter and
// mode, expand mode, sort key and direction, toggles, row colouring (by span
// or by the sample's fate), lane height, fit buttons. Reflects state without
// re-triggering; reports user changes.

import { SORT_KEYS, SORT_LABELS } from "../data/layout.js";
import { matchSummary, queryHelp } from "../data/query.js";
import { formatNumber } from "../util/format.js";
import { el } from "../util/dom.js";
import { FATES, FATE_LABELS } from "../data/fates.js";
import { WarningsNotice } from "./warnings.js";

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
 * @property {boolean} [attemptsPastLast] the last attempt offered also stands for those after it
 * @property {number} nRollouts
 * @property {number} [nEngines] engines whose load the payload carries
 * @property {string} [match] what the query matched, in words
 * @property {boolean} [hasFates] the payload's samples have fates (the colour control is offered)
 * @property {Record<string, number>} [warnings] what the loader skipped or repaired, by kind (meta.warnings)
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
    attemptsPastLast: data.attemptsPastLast,
    nRollouts: data.meta.rollouts.length,
    nEngines: data.load.series.length ? data.load.engines.length : 0,
    match: result ? matchSummary(result, data.meta.n_samples_total) : "",
    hasFates: data.hasFates,
    warnings: data.meta.warnings,
  };
}

/**
 * A select of `options` whose choice goes to `choose`.
 * @param {[string, string][]} options
 * @param {(value: string) => void} choose
 * @param {string} [title]
 */
function choice(options, choose, title) {
  const selectEl = select(options);
  if (title) selectEl.title = title;
  selectEl.addEventListener("change", () => choose(selectEl.value));
  return selectEl;
}

/**
 * A labelled checkbox whose state goes to `flip`.
 * @param {string} label
 * @param {(checked: boolean) => void} flip
 * @param {string} [title]
 */
function toggle(label, flip, title) {
  const box = checkbox(label);
  if (title) box.wrap.title = title;
  box.input.addEventListener("change", () => flip(box.input.checked));
  return box;
}

/**
 * `field(label, control)` with an extra class, for the fields shown only when they apply.
 * @param {string} label
 * @param {HTMLElement} control
 * @param {string} className
 */
function classedField(label, control, className) {
  const wrap = field(label, control);
  wrap.classList.add(className);
  return wrap;
}

/** The query box and its message: what is typed is reported after a pause, at once
 * on Enter; Escape empties it. */
class QueryBox {
  /** @param {(filter: string) => void} report */
  constructor(report) {
    /** @type {ReturnType<typeof setTimeout>|undefined} */
    this.timer = undefined;
    this.input = /** @type {HTMLInputElement} */ (el("input", "stw-input"));
    this.input.type = "search";
    this.input.placeholder = "name:tool* duration>2s key=value status:failed, or words";
    this.input.title = queryHelp();
    this.input.spellcheck = false;
    this.input.addEventListener("input", () => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => report(this.input.value), 120);
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        clearTimeout(this.timer);
        report(this.input.value);
      }
      if (event.key === "Escape" && this.input.value) {
        event.stopPropagation();
        this.input.value = "";
        report("");
      }
    });
    this.wrap = classedField("Filter", this.input, "stw-field-filter");
    /** What the query is doing: "matching…", or why it does not parse (text only). */
    this.message = el("div", "stw-query-msg");
    this.message.setAttribute("role", "status");
    this.message.hidden = true;
  }

  dispose() {
    clearTimeout(this.timer);
  }
}

/**
 * The buttons that fit the time range to all rows or to the filtered ones.
 * @param {ControlActions} act
 */
function fitButtons(act) {
  const group = el("div", "stw-btn-group");
  for (const [text, title, fit] of /** @type {[string, string, () => void][]} */ ([
    ["fit all", "show the whole time range", act.fitAll],
    ["fit filtered", "fit the time range of the filtered rows", act.fitFiltered],
  ])) {
    const button = el("button", "stw-btn", text);
    button.title = title;
    button.addEventListener("click", fit);
    group.appendChild(button);
  }
  return group;
}

/** @param {(laneH: number) => void} resize */
function laneSlider(resize) {
  const slider = /** @type {HTMLInputElement} */ (el("input", "stw-range"));
  slider.type = "range";
  slider.min = String(LANE_MIN);
  slider.max = String(LANE_MAX);
  slider.step = "1";
  slider.addEventListener("input", () => resize(Number(slider.value)));
  return slider;
}

/**
 * `parent` with `children` appended, in order.
 * @param {HTMLElement} parent
 * @param {HTMLElement[]} children
 */
function holding(parent, children) {
  for (const child of children) parent.appendChild(child);
  return parent;
}

export class Controls {
  /**
   * Two rows under the title: what is shown (query, attempts, expansion, order), then
   * how it is drawn (toggles, colours, lane height, fit, load tracks, diff).
   * @param {HTMLElement} host
   * @param {ControlActions} act
   */
  constructor(host, act) {
    const change = act.change;
    this.title = el("div", "stw-title");
    this.count = el("div", "stw-count");
    this.warnings = new WarningsNotice();
    host.appendChild(holding(el("div", "stw-titlebar"), [this.title, this.count, this.warnings.el]));

    this.query = new QueryBox((filter) => change({ filter }));
    this.filter = this.query.input;
    this.queryMsg = this.query.message;
    this.attempt = choice([["-1", "all attempts"]], (value) => change({ attempt: Number(value) }));
    this.attemptMode = choice([["filter", "filter segments"], ["highlight", "highlight"]],
      (value) => change({ attemptMode: value === "highlight" ? "highlight" : "filter" }));
    this.view = choice([["collapsed", "collapsed"], ["expanded", "expanded"]],
      (value) => change({ expandAll: value === "expanded" }),
      "expand or collapse every row (click a row label to toggle one)");
    this.sort = choice(SORT_KEYS.map((sortKey) => [sortKey, SORT_LABELS[sortKey]]),
      (value) => change({ sort: /** @type {any} */ (value) }));
    const desc = toggle("desc", (desc) => change({ desc }));
    this.desc = desc.input;
    host.appendChild(holding(el("div", "stw-toolbar"), [
      this.query.wrap, this.queryMsg, field("Attempt", this.attempt),
      field("Attempt view", this.attemptMode), field("View", this.view),
      field("Sort", this.sort), desc.wrap,
    ]));

    const events = toggle("instant events", (showEvents) => change({ showEvents }));
    const open = toggle("open spans", (showOpen) => change({ showOpen }));
    const unmatched = toggle("unmatched ends", (showUnmatched) => change({ showUnmatched }));
    const critical = toggle("critical path", (critical) => change({ critical }),
      "dim everything but the selected sample's critical path");
    const flame = toggle("flame", (flame) => change({ flame }),
      "icicle of the shown rows, or of the shift-drag range");
    this.showEvents = events.input;
    this.showOpen = open.input;
    this.showUnmatched = unmatched.input;
    this.critical = critical.input;
    this.flame = flame.input;
    this.colorBy = choice([["span", "by span"], ["fate", "by fate"]],
      (value) => change({ colorBy: value === "fate" ? "fate" : "span" }),
      `by fate: each row tinted by what became of its sample (${FATES.map((fate) => FATE_LABELS[fate]).join(", ")})`);
    this.colorField = classedField("Colour", this.colorBy, "stw-field-color");
    this.lane = laneSlider((laneH) => change({ laneH }));
    this.load = choice([["summed", "summed"], ["split", "per engine"]],
      (value) => change({ loadSplit: value === "split" }),
      "the engines' load tracks above the rows: summed over the engines (KV token usage: the fullest), or one per engine");
    this.loadField = classedField("Engine load", this.load, "stw-field-load");
    this.diff = el("button", "stw-btn stw-diff-btn", "diff");
    this.diff.title = "rollout diff: per span name, rollout B against rollout A";
    this.diff.addEventListener("click", () => change({ diff: this.diff.getAttribute("aria-pressed") !== "true" }));
    host.appendChild(holding(el("div", "stw-toolbar"), [
      events.wrap, open.wrap, unmatched.wrap, critical.wrap, flame.wrap, this.colorField,
      field("Lane height", this.lane), fitButtons(act), this.loadField, this.diff,
    ]));
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
    this.warnings.update(info.warnings ?? {});
    if (document.activeElement !== this.filter && this.filter.value !== settings.filter) this.filter.value = settings.filter;
    // Attempt options: all, 0..maxAttempt (the last one "and later" when items past it carry it).
    const want = info.maxAttempt + 2;
    const label = (/** @type {number} */ attempt) =>
      `only attempt ${attempt}${attempt === info.maxAttempt && info.attemptsPastLast ? " and later" : ""}`;
    const options = this.attempt.options;
    if (options.length !== want || options[want - 1].textContent !== label(info.maxAttempt)) {
      while (options.length > 1) this.attempt.remove(1);
      for (let attempt = 0; attempt <= info.maxAttempt; attempt++) {
        const option = /** @type {HTMLOptionElement} */ (el("option", "", label(attempt)));
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
    this.query.dispose();
  }
}
