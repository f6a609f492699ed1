// The `view_state` value (docs/payload.md): the controls, expanded rows,
// highlight, view, cursor and scroll, read back at start (so a snapshot opens
// as it was saved) and written on every change.

import { SORT_KEYS } from "../data/layout.js";
import { LANE_MIN, LANE_MAX } from "./controls.js";

/** @typedef {import("./controls.js").Settings} Settings */

/**
 * What of App the view state reads and restores.
 * @typedef {Object} ViewBits
 * @property {Settings} settings
 * @property {Set<number>} expanded sample row ids expanded (when not expand-all)
 * @property {Set<number>} collapsed sample row ids collapsed (when expand-all)
 * @property {number} highlight highlighted name index, -1 for none
 * @property {string|null} flamePath the flame frame chosen (its name path), null for none
 */

/** @returns {Settings} */
export function defaultSettings() {
  return { filter: "", attempt: -1, attemptMode: "filter", sort: "start", desc: false, showEvents: true, showOpen: true, showUnmatched: true, laneH: 18, expandAll: false, diff: false, diffPair: [0, 1], critical: false, flame: false };
}

/** @param {any} v */
export function validRange(v) {
  return Array.isArray(v) && v.length === 2 && Number.isFinite(v[0]) && Number.isFinite(v[1]) && v[1] > v[0];
}

/**
 * Apply a saved `view_state` to `st`; unknown keys and wrong types are ignored.
 * @param {ViewBits} st
 * @param {any} vs
 * @param {string[]} names the payload's name table (the highlight is saved by name)
 */
export function restoreViewState(st, vs, names) {
  if (!vs || typeof vs !== "object") return;
  const s = st.settings;
  if (typeof vs.filter === "string") s.filter = vs.filter;
  if (Number.isInteger(vs.attempt)) s.attempt = vs.attempt;
  if (vs.attempt_mode === "highlight" || vs.attempt_mode === "filter") s.attemptMode = vs.attempt_mode;
  if (SORT_KEYS.includes(vs.sort)) s.sort = vs.sort;
  if (typeof vs.desc === "boolean") s.desc = vs.desc;
  if (typeof vs.show_events === "boolean") s.showEvents = vs.show_events;
  if (typeof vs.show_open === "boolean") s.showOpen = vs.show_open;
  if (typeof vs.show_unmatched === "boolean") s.showUnmatched = vs.show_unmatched;
  if (Number.isFinite(vs.lane_height)) s.laneH = Math.max(LANE_MIN, Math.min(LANE_MAX, Math.round(vs.lane_height)));
  if (typeof vs.expand_all === "boolean") s.expandAll = vs.expand_all;
  if (Array.isArray(vs.expanded)) st.expanded = new Set(vs.expanded.filter(Number.isFinite));
  if (Array.isArray(vs.collapsed)) st.collapsed = new Set(vs.collapsed.filter(Number.isFinite));
  if (typeof vs.highlight === "string") st.highlight = names.indexOf(vs.highlight);
  if (typeof vs.diff === "boolean") s.diff = vs.diff;
  if (Array.isArray(vs.diff_pair) && vs.diff_pair.length === 2 && vs.diff_pair.every(Number.isInteger)) s.diffPair = [vs.diff_pair[0], vs.diff_pair[1]];
  if (typeof vs.critical === "boolean") s.critical = vs.critical;
  if (typeof vs.flame === "boolean") s.flame = vs.flame;
  if (typeof vs.flame_path === "string") st.flamePath = vs.flame_path;
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
  const s = st.settings;
  return {
    filter: s.filter,
    attempt: s.attempt,
    attempt_mode: s.attemptMode,
    sort: s.sort,
    desc: s.desc,
    show_events: s.showEvents,
    show_open: s.showOpen,
    show_unmatched: s.showUnmatched,
    lane_height: s.laneH,
    expand_all: s.expandAll,
    expanded: [...st.expanded].sort((a, b) => a - b),
    collapsed: [...st.collapsed].sort((a, b) => a - b),
    highlight: st.highlight >= 0 ? names[st.highlight] ?? null : null,
    view: [view.t0, view.t1],
    cursor: Number.isFinite(cursor) ? cursor : null,
    scroll_top: Math.round(scrollTop),
    diff: s.diff,
    diff_pair: [...s.diffPair],
    critical: s.critical,
    flame: s.flame,
    flame_path: st.flamePath,
  };
}
