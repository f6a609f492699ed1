// Which links (docs/payload.md "Link columns") touch a selected span or event:
// pure functions over the decoded payload, used by the arrows (arrows.js) and
// the details panel. A group travels as each member pointing at one hub; it is
// expanded here, so a selected member links to every other member.

import { LINK_KINDS } from "./decode.js";

/** @typedef {import("./decode.js").Data} Data */
/** @typedef {import("../render/hit.js").Hit} Hit */
/** @typedef {import("./filters.js").ViewMasks} ViewMasks */

/**
 * @typedef {{kind: "span"|"event", index: number}} End
 * @typedef {{kind: string, from: End, to: End}} Link
 */

/**
 * An encoded endpoint as {kind, index}; null when out of range.
 * @param {Data} data
 * @param {number} endpoint span i as i, event j as -1 - j
 * @returns {End|null}
 */
export function endOf(data, endpoint) {
  if (endpoint >= 0) return endpoint < data.nSpans ? { kind: "span", index: endpoint } : null;
  const eventIndex = -1 - endpoint;
  return eventIndex < data.nEvents ? { kind: "event", index: eventIndex } : null;
}

/**
 * The selected item as a link end (spans and events only).
 * @param {Hit|null} hit
 * @returns {End|null}
 */
export function endOfHit(hit) {
  if (hit && hit.type === "span") return { kind: "span", index: hit.span };
  if (hit && hit.type === "event") return { kind: "event", index: hit.ev };
  return null;
}

/**
 * @param {"span"|"event"} kind
 * @param {number} index
 */
export const encodeEnd = (kind, index) => (kind === "span" ? index : -1 - index);

/** @type {WeakMap<Data, Map<number, number[]>>} per payload: endpoint -> link rows touching it */
const byEnd = new WeakMap();

/**
 * Link rows by endpoint (both ends), built once per payload.
 * @param {Data} data
 */
function index(data) {
  let rowsByEnd = byEnd.get(data);
  if (rowsByEnd) return rowsByEnd;
  rowsByEnd = new Map();
  for (let link = 0; link < data.nLinks; link++) {
    for (const endpoint of [data.linkFrom[link], data.linkTo[link]]) {
      const list = rowsByEnd.get(endpoint);
      if (list) list.push(link);
      else rowsByEnd.set(endpoint, [link]);
    }
  }
  byEnd.set(data, rowsByEnd);
  return rowsByEnd;
}

/**
 * Members of the group of span `span` (itself included, by payload index), or []
 * when it is in no group.
 * @param {Data} data
 * @param {number} span
 * @returns {number[]}
 */
export function groupMembers(data, span) {
  const rowsByEnd = index(data);
  const group = LINK_KINDS.indexOf("group");
  let hub = -1;
  for (const link of rowsByEnd.get(span) || []) {
    if (data.linkKind[link] !== group) continue;
    hub = data.linkTo[link];
    break;
  }
  if (hub < 0 || hub >= data.nSpans) return [];
  const members = [hub];
  for (const link of rowsByEnd.get(hub) || []) {
    const from = data.linkFrom[link];
    if (data.linkKind[link] === group && data.linkTo[link] === hub && from >= 0 && from < data.nSpans) members.push(from);
  }
  return members.sort((left, right) => left - right);
}

/**
 * The links touching the item: a group as arrows from the item to each other
 * member, the others as recorded (from the newer attempt to the older, from
 * the exported span to where it was continued), whichever end the item is.
 * @param {Data} data
 * @param {"span"|"event"} kind
 * @param {number} item payload index
 * @returns {Link[]}
 */
export function linksOf(data, kind, item) {
  /** @type {Link[]} */
  const out = [];
  const self = /** @type {End} */ ({ kind, index: item });
  if (kind === "span") {
    for (const member of groupMembers(data, item)) {
      if (member !== item) out.push({ kind: "group", from: self, to: { kind: "span", index: member } });
    }
  }
  const group = LINK_KINDS.indexOf("group");
  for (const link of index(data).get(encodeEnd(kind, item)) || []) {
    if (data.linkKind[link] === group) continue;
    const from = endOf(data, data.linkFrom[link]);
    const to = endOf(data, data.linkTo[link]);
    const name = LINK_KINDS[data.linkKind[link]];
    if (from && to && name) out.push({ kind: name, from, to });
  }
  return out;
}

/**
 * What the details panel says about a link of the selected item, and which end
 * a click selects.
 * @param {Link} link one of linksOf(d, kind, i)
 * @param {End} self the selected item
 * @returns {{label: string, target: End}}
 */
export function describe(link, self) {
  const outgoing = link.from.kind === self.kind && link.from.index === self.index;
  const target = outgoing ? link.to : link.from;
  if (link.kind === "group") return { label: "group member", target };
  if (link.kind === "attempt") return { label: outgoing ? "previous attempt" : "next attempt", target };
  if (link.kind === "remote") return { label: outgoing ? "continued remotely" : "exported from", target };
  return { label: link.kind, target };
}

/** @type {WeakMap<Data, ViewMasks>} per payload: the masks its App lays over it */
const masksOf = new WeakMap();

/**
 * Record the masks over `data` (App.setMasks does), so a link button can tell a
 * target the filter box hides: the details panel is built without the App.
 * @param {Data} data
 * @param {ViewMasks} masks
 */
export function noteMasks(data, masks) {
  masksOf.set(data, masks);
}

/**
 * Whether the filter box's query hides an end: its row is gone, or the item
 * is hidden in it.
 * @param {Data} data
 * @param {End} end
 */
export function filteredOut(data, end) {
  const masks = masksOf.get(data);
  if (!masks) return false;
  const sample = end.kind === "span" ? data.spanSample[end.index] : data.evSample[end.index];
  if (masks.rowKeep && !masks.rowKeep[sample]) return true;
  const keep = end.kind === "span" ? masks.keep : masks.evKeep;
  return !!keep && !keep[end.index];
}
