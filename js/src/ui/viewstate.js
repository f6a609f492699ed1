// The `view_state` value (docs/payload.md): the controls, expanded rows,
// highlight, view, cursor and scroll, read back at start (so a snapshot opens
// as it was saved) and written on every change.

import { SORT_KEYS } from "../data/layout.js";
import { LANE_MIN, LANE_MAX } from "./controls.js";

/** @typedef {import("./controls.js").Settings} Settings */

/**
 * What `view_state` reads and restores (a ViewState holds it).
 * @typedef {Object} ViewBits
 * @property {Settings} settings
 * @property {Set<number>} expanded sample row ids expanded (when not expand-all)
 * @property {Set<number>} collapsed sample row ids collapsed (when expand-all)
 * @property {number} highlight highlighted name index, -1 for none
 * @property {string|null} flamePath the flame frame chosen (its name path), null for none
 */

/**
 * A view's own state: what `view_state` saves (the controls, expanded rows,
 * highlight, flame frame, time window), and the saved scroll until the first
 * frame applies it. The cursor is the pointer's (pointer.js).
 */
export class ViewState {
  constructor() {
    /** @type {Settings} */
    this.settings = defaultSettings();
    /** @type {Set<number>} sample row ids expanded (when not expand-all) */
    this.expanded = new Set();
    /** @type {Set<number>} sample row ids collapsed (when expand-all) */
    this.collapsed = new Set();
    /** highlighted name index, -1 for none */
    this.highlight = -1;
    /** @type {string|null} the flame frame chosen (its name path) */
    this.flamePath = null;
    /** the time window shown (seconds) */
    this.timeWindow = { t0: 0, t1: 1 };
    /** @type {number|undefined} scroll offset restored from view_state, applied on the first frame */
    this.pendingScroll = undefined;
  }

  /** @param {number} rowId sample row id */
  isExpanded(rowId) {
    return this.settings.expandAll ? !this.collapsed.has(rowId) : this.expanded.has(rowId);
  }

  /** @param {number} rowId sample row id */
  toggleExpanded(rowId) {
    const set = this.settings.expandAll ? this.collapsed : this.expanded;
    if (set.has(rowId)) set.delete(rowId);
    else set.add(rowId);
  }
}

/** @returns {Settings} */
export function defaultSettings() {
  return { filter: "", attempt: -1, attemptMode: "filter", sort: "start", desc: false, showEvents: true, showOpen: true, showUnmatched: true, laneH: 18, expandAll: false, diff: false, diffPair: [0, 1], critical: false, flame: false, loadSplit: false, colorBy: "span" };
}

/** @param {any} range */
export function validRange(range) {
  return Array.isArray(range) && range.length === 2 && Number.isFinite(range[0]) && Number.isFinite(range[1]) && range[1] > range[0];
}

/**
 * Apply a saved `view_state` to `st`; unknown keys and wrong types are ignored.
 * @param {ViewBits} st
 * @param {any} vs
 * @param {string[]} names the payload's name table (the highlight is saved by name)
 */
export function restoreViewState(st, vs, names) {
  if (!vs || typeof vs !== "object") return;
  const settings = st.settings;
  if (typeof vs.filter === "string") settings.filter = vs.filter;
  if (Number.isInteger(vs.attempt)) settings.attempt = vs.attempt;
  if (vs.attempt_mode === "highlight" || vs.attempt_mode === "filter") settings.attemptMode = vs.attempt_mode;
  if (SORT_KEYS.includes(vs.sort)) settings.sort = vs.sort;
  if (typeof vs.desc === "boolean") settings.desc = vs.desc;
  if (typeof vs.show_events === "boolean") settings.showEvents = vs.show_events;
  if (typeof vs.show_open === "boolean") settings.showOpen = vs.show_open;
  if (typeof vs.show_unmatched === "boolean") settings.showUnmatched = vs.show_unmatched;
  if (Number.isFinite(vs.lane_height)) settings.laneH = Math.max(LANE_MIN, Math.min(LANE_MAX, Math.round(vs.lane_height)));
  if (typeof vs.expand_all === "boolean") settings.expandAll = vs.expand_all;
  if (Array.isArray(vs.expanded)) st.expanded = new Set(vs.expanded.filter(Number.isFinite));
  if (Array.isArray(vs.collapsed)) st.collapsed = new Set(vs.collapsed.filter(Number.isFinite));
  if (typeof vs.highlight === "string") st.highlight = names.indexOf(vs.highlight);
  if (typeof vs.diff === "boolean") settings.diff = vs.diff;
  if (Array.isArray(vs.diff_pair) && vs.diff_pair.length === 2 && vs.diff_pair.every(Number.isInteger)) settings.diffPair = [vs.diff_pair[0], vs.diff_pair[1]];
  if (typeof vs.critical === "boolean") settings.critical = vs.critical;
  if (typeof vs.flame === "boolean") settings.flame = vs.flame;
  if (typeof vs.flame_path === "string") st.flamePath = vs.flame_path;
  if (typeof vs.load_split === "boolean") settings.loadSplit = vs.load_split;
  if (vs.color_by === "span" || vs.color_by === "fate") settings.colorBy = vs.color_by;
}

/**
 * The index of the highlighted name in a new payload's name table: the same name's, -1
 * when it is gone. A new payload (`show()`, a live update) builds its names anew, so
 * the old index named another span there.
 * @param {number} highlight the index in `oldNames`, -1 for none
 * @param {string[]} oldNames
 * @param {string[]} names
 */
export function highlightIn(highlight, oldNames, names) {
  return highlight >= 0 && highlight < oldNames.length ? names.indexOf(oldNames[highlight]) : -1;
}

/**
 * The `view_state` value.
 * @param {ViewBits} st
 * @param {string[]} names
 * @param {{t0: number, t1: number}} view
 * @param {number} cursor NaN for none
 * @param {number} scrollTop
 */
export function viewStateOf(st, names, view, cursor, scrollTop) {
  const settings = st.settings;
  return {
    filter: settings.filter,
    attempt: settings.attempt,
    attempt_mode: settings.attemptMode,
    sort: settings.sort,
    desc: settings.desc,
    show_events: settings.showEvents,
    show_open: settings.showOpen,
    show_unmatched: settings.showUnmatched,
    lane_height: settings.laneH,
    expand_all: settings.expandAll,
    expanded: [...st.expanded].sort((first, second) => first - second),
    collapsed: [...st.collapsed].sort((first, second) => first - second),
    highlight: st.highlight >= 0 ? names[st.highlight] ?? null : null,
    view: [view.t0, view.t1],
    cursor: Number.isFinite(cursor) ? cursor : null,
    scroll_top: Math.round(scrollTop),
    diff: settings.diff,
    diff_pair: [...settings.diffPair],
    critical: settings.critical,
    flame: settings.flame,
    flame_path: st.flamePath,
    load_split: settings.loadSplit,
    color_by: settings.colorBy,
  };
}
