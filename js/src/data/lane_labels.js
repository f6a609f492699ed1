// What an expanded row's lane holds, as its label in the gutter: the names of
// the spans drawn in it, most frequent first, and for the engine's spans the
// role of the server that did the work ("[P]" prefill, "[D]" decode: the role
// `meta.engine_roles` gives the name of the request span they belong to). A lane
// is a depth of the row's span tree, so it can hold spans of many names (a
// generation's tool calls beside it, the engine's slices of every request); one
// name would mislabel the rest.

import { F_ENGINE, F_PD_DETAIL, PD_ROLE_MARKS, nameOf } from "./decode.js";
import { isRequestSpan } from "./engine_lanes.js";
import { bidiIsolated } from "../util/text.js";

/** @typedef {import("./decode.js").Data} Data */

/** Names a label lists before it counts the rest ("+2"). */
export const MAX_LABEL_NAMES = 4;

/**
 * @typedef {Object} LaneLabel
 * @property {string} names the span names, ", "-separated, "+k" for the ones left out
 * @property {string} role "[P]", "[D]", "[P+D]" for the engine's spans of those roles, else ""
 * @property {string} text the whole label: names, then role
 */

/** @type {WeakMap<Data, Map<number, LaneLabel>>} */
const CACHE = new WeakMap();

/**
 * The label of lane slot `slot` (cached per payload); names "" when it holds no drawn span.
 * @param {Data} data
 * @param {number} slot
 * @returns {LaneLabel}
 */
export function laneLabel(data, slot) {
  let labels = CACHE.get(data);
  if (!labels) CACHE.set(data, (labels = new Map()));
  let label = labels.get(slot);
  if (!label) labels.set(slot, (label = computeLabel(data, slot)));
  return label;
}

/**
 * @param {Data} data
 * @param {number} slot
 * @returns {LaneLabel}
 */
function computeLabel(data, slot) {
  /** @type {Map<number, {count: number, first: number}>} */
  const counts = new Map();
  /** @type {Set<string>} */
  const roles = new Set();
  const lo = data.laneSpanOff[slot];
  const hi = data.laneSpanOff[slot + 1];
  for (let i = lo; i < hi; i++) {
    const fl = data.spanFlags[i];
    if (fl & F_PD_DETAIL) continue;
    const seen = counts.get(data.spanName[i]);
    if (seen) seen.count++;
    else counts.set(data.spanName[i], { count: 1, first: i });
    if (fl & F_ENGINE) {
      const role = engineRole(data, i);
      if (role) roles.add(role);
    }
  }
  const ranked = [...counts].sort((first, second) => second[1].count - first[1].count || first[1].first - second[1].first);
  const shown = ranked.slice(0, MAX_LABEL_NAMES).map(([nameIndex]) => bidiIsolated(nameOf(data, nameIndex)));
  const rest = ranked.length - shown.length;
  const names = shown.join(", ") + (rest > 0 ? ` +${rest}` : "");
  const role = roles.size === 0 ? "" : `[${[...roles].sort((first, second) => (first === "P" ? -1 : second === "P" ? 1 : 0)).join("+")}]`;
  return { names, role, text: role ? `${names} ${role}` : names };
}

/**
 * The role of the server that did engine span `span`: "P" (prefill) or "D"
 * (decode), as `meta.engine_roles` names its request span; "" for a server doing
 * both (a name it does not list).
 * @param {Data} data
 * @param {number} span
 */
export function engineRole(data, span) {
  let request = span;
  for (let steps = 0; steps < 256 && request >= 0 && !isRequestSpan(data, request); steps++) request = data.spanParent[request];
  if (request < 0 || !(data.spanFlags[request] & F_ENGINE)) return "";
  const role = data.meta.engine_roles[nameOf(data, data.spanName[request])];
  return role === undefined ? "" : PD_ROLE_MARKS[role];
}
