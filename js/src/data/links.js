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
 * @param {Data} d
 * @param {number} v span i as i, event j as -1 - j
 * @returns {End|null}
 */
export function endOf(d, v) {
  if (v >= 0) return v < d.nSpans ? { kind: "span", index: v } : null;
  const j = -1 - v;
  return j < d.nEvents ? { kind: "event", index: j } : null;
}

/**
 * The selected item as a link end (spans and events only).
 * @param {Hit|null} h
 * @returns {End|null}
 */
export function endOfHit(h) {
  if (h && h.type === "span") return { kind: "span", index: h.span };
  if (h && h.type === "event") return { kind: "event", index: h.ev };
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
 * @param {Data} d
 */
function index(d) {
  let m = byEnd.get(d);
  if (m) return m;
  m = new Map();
  for (let k = 0; k < d.nLinks; k++) {
    for (const v of [d.linkFrom[k], d.linkTo[k]]) {
      const list = m.get(v);
      if (list) list.push(k);
      else m.set(v, [k]);
    }
  }
  byEnd.set(d, m);
  return m;
}

/**
 * Members of the group of span `span` (itself included, by payload index), or []
 * when it is in no group.
 * @param {Data} d
 * @param {number} span
 * @returns {number[]}
 */
export function groupMembers(d, span) {
  const m = index(d);
  const group = LINK_KINDS.indexOf("group");
  let hub = -1;
  for (const k of m.get(span) || []) {
    if (d.linkKind[k] !== group) continue;
    hub = d.linkTo[k];
    break;
  }
  if (hub < 0 || hub >= d.nSpans) return [];
  const members = [hub];
  for (const k of m.get(hub) || []) {
    const from = d.linkFrom[k];
    if (d.linkKind[k] === group && d.linkTo[k] === hub && from >= 0 && from < d.nSpans) members.push(from);
  }
  return members.sort((a, b) => a - b);
}

/**
 * The links touching the item: a group as arrows from the item to each other
 * member, the others as recorded (from the newer attempt to the older, from
 * the exported span to where it was continued), whichever end the item is.
 * @param {Data} d
 * @param {"span"|"event"} kind
 * @param {number} i payload index
 * @returns {Link[]}
 */
export function linksOf(d, kind, i) {
  /** @type {Link[]} */
  const out = [];
  const self = /** @type {End} */ ({ kind, index: i });
  if (kind === "span") {
    for (const member of groupMembers(d, i)) {
      if (member !== i) out.push({ kind: "group", from: self, to: { kind: "span", index: member } });
    }
  }
  const group = LINK_KINDS.indexOf("group");
  for (const k of index(d).get(encodeEnd(kind, i)) || []) {
    if (d.linkKind[k] === group) continue;
    const from = endOf(d, d.linkFrom[k]);
    const to = endOf(d, d.linkTo[k]);
    const name = LINK_KINDS[d.linkKind[k]];
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
 * Record the masks over `d` (App.setMasks does), so a link button can tell a
 * target the filter box hides: the details panel is built without the App.
 * @param {Data} d
 * @param {ViewMasks} masks
 */
export function noteMasks(d, masks) {
  masksOf.set(d, masks);
}

/**
 * Whether the filter box's query hides an end: its row is gone, or the item
 * is hidden in it.
 * @param {Data} d
 * @param {End} end
 */
export function filteredOut(d, end) {
  const m = masksOf.get(d);
  if (!m) return false;
  const sample = end.kind === "span" ? d.spanSample[end.index] : d.evSample[end.index];
  if (m.rowKeep && !m.rowKeep[sample]) return true;
  const keep = end.kind === "span" ? m.keep : m.evKeep;
  return !!keep && !keep[end.index];
}
