// Flame table of payload spans, the same answer as analysis.flame: one row per
// name path from the root (names joined by ";"), with count, total and self
// seconds (self: duration minus the union of the children's intervals clipped
// to the span, never below zero) and p50/p95 of the durations; optionally over
// a window, spans clipped to it. Pure: the icicle view (icicle.js) draws it.
// Parents and children are taken among the chosen spans only, as in Python.
// The segments of a chosen span flagged F_PD_SEGMENT_SPANS are its children
// (Python counts the real segment spans they mirror).

import { segmentsAreChildren } from "./critical.js";
import { quantile } from "./quantile.js";

/** @typedef {import("./decode.js").Data} Data */

/**
 * @typedef {Object} FlameRow
 * @property {string} path names from the root joined by ";" (a backslash or ";" in a name escaped by a backslash)
 * @property {string} name
 * @property {number} depth
 * @property {number} parent row of the parent path, -1 for a root
 * @property {number} count
 * @property {number} total
 * @property {number} self
 * @property {number} p50
 * @property {number} p95
 */

/**
 * @typedef {Object} Flame
 * @property {FlameRow[]} rows sorted by path
 * @property {Int32Array} spanRow per payload span, its row in `rows` (-1: not counted)
 * @property {Int32Array} segRow per payload segment, its row in `rows` (-1: not counted as a child)
 */

/**
 * The flame table of the spans with `include[i]` set (all when null), clipped
 * to `window` ([a, b] in payload seconds) when given: spans outside it drop.
 * Linear passes over typed arrays (a million spans in well under a second):
 * paths are interned as (parent path, name) pairs, children and durations
 * grouped by counting sort.
 * @param {Data} data
 * @param {Uint8Array|null} include
 * @param {[number, number]|null} [window]
 * @returns {Flame}
 */
export function flameOf(data, include, window = null) {
  const nSpans = data.nSpans;
  // Nodes: spans (0 .. nSpans-1), then segments (nSpans + seg) of the spans whose
  // segments are children (critical.js segmentsAreChildren).
  const nNodes = nSpans + data.nSegs;
  const start = new Float64Array(nNodes);
  const end = new Float64Array(nNodes);
  const chosen = new Uint8Array(nNodes);
  const nameOfNode = new Uint32Array(nNodes);
  const depthOfNode = new Uint32Array(nNodes);
  const parentOfNode = new Int32Array(nNodes);
  let nChosen = 0;
  const choose = (/** @type {number} */ node, /** @type {number} */ nodeStart, /** @type {number} */ nodeEnd) => {
    if (window) {
      nodeStart = Math.max(nodeStart, window[0]);
      nodeEnd = Math.min(nodeEnd, window[1]);
      if (!(nodeEnd > nodeStart)) return;
    }
    start[node] = nodeStart;
    end[node] = nodeEnd;
    chosen[node] = 1;
    nChosen++;
  };
  for (let i = 0; i < nSpans; i++) {
    nameOfNode[i] = data.spanName[i];
    depthOfNode[i] = data.spanDepth[i];
    parentOfNode[i] = data.spanParent[i];
    if (include && !include[i]) continue;
    choose(i, data.spanStart[i], data.spanEnd[i]);
  }
  for (let i = 0; i < nSpans; i++) {
    if ((include && !include[i]) || !segmentsAreChildren(data, i)) continue;
    for (let position = data.spanSegOff[i]; position < data.spanSegOff[i + 1]; position++) {
      const seg = data.segOrder[position];
      const node = nSpans + seg;
      nameOfNode[node] = data.segName[seg];
      depthOfNode[node] = data.spanDepth[i] + 1;
      parentOfNode[node] = i;
      if (data.segEnd[seg] > data.segStart[seg]) choose(node, data.segStart[seg], data.segEnd[seg]);
    }
  }
  const parentOf = (/** @type {number} */ node) => {
    const parent = parentOfNode[node];
    return parent >= 0 && chosen[parent] ? parent : -1;
  };
  // Nodes by depth (parents first), then each one's path id.
  const byDepth = bucket(nNodes, 257, (i) => (chosen[i] ? depthOfNode[i] : -1));
  const pathId = new Int32Array(nNodes).fill(-1);
  /** @type {Map<number, number>} (parent path + 1) * 65536 + name -> path id */
  const intern = new Map();
  /** @type {number[]} */
  const pathParent = [];
  /** @type {number[]} */
  const pathName = [];
  for (let position = 0; position < byDepth.order.length; position++) {
    const i = byDepth.order[position];
    const parent = parentOf(i);
    const above = parent >= 0 ? pathId[parent] : -1;
    const key = (above + 1) * 65536 + nameOfNode[i];
    let id = intern.get(key);
    if (id === undefined) {
      id = pathParent.length;
      intern.set(key, id);
      pathParent.push(above);
      pathName.push(nameOfNode[i]);
    }
    pathId[i] = id;
  }
  // Self time: duration minus the union of the children's intervals clipped to it.
  const kids = bucket(nNodes, nSpans, (i) => (chosen[i] ? parentOf(i) : -1));
  const own = new Float64Array(nNodes);
  let sa = new Float64Array(16);
  let sb = new Float64Array(16);
  for (let i = 0; i < nNodes; i++) {
    if (!chosen[i]) continue;
    let nIntervals = 0;
    for (let position = kids.off[i]; position < kids.off[i + 1]; position++) {
      const j = kids.order[position];
      const childStart = Math.max(start[j], start[i]);
      const childEnd = Math.min(end[j], end[i]);
      if (!(childEnd > childStart)) continue;
      if (nIntervals === sa.length) {
        sa = grow(sa);
        sb = grow(sb);
      }
      sa[nIntervals] = childStart;
      sb[nIntervals] = childEnd;
      nIntervals++;
    }
    own[i] = Math.max(end[i] - start[i] - (nIntervals ? unionLength(sa, sb, nIntervals) : 0), 0);
  }
  // Rows: names spelled once per path, sorted by path; durations grouped per row for quantiles.
  const nPaths = pathParent.length;
  /** @type {string[]} */
  const text = new Array(nPaths);
  const depthOf = new Int32Array(nPaths);
  for (let id = 0; id < nPaths; id++) {
    // A parent path is always interned before its children: its text and depth are known.
    const name = pathPiece(data.names[pathName[id]] ?? "");
    const up = pathParent[id];
    text[id] = up < 0 ? name : `${text[up]};${name}`;
    depthOf[id] = up < 0 ? 0 : depthOf[up] + 1;
  }
  const sortedIds = Array.from({ length: nPaths }, (_, id) => id).sort((left, right) => (text[left] < text[right] ? -1 : text[left] > text[right] ? 1 : 0));
  const rowOfPath = new Int32Array(nPaths);
  sortedIds.forEach((id, row) => (rowOfPath[id] = row));
  const nodeRow = new Int32Array(nNodes).fill(-1);
  for (let i = 0; i < nNodes; i++) if (chosen[i]) nodeRow[i] = rowOfPath[pathId[i]];
  const perRow = bucket(nNodes, nPaths, (i) => nodeRow[i]);
  const seconds = new Float64Array(nChosen);
  const rows = sortedIds.map((id, row) => {
    const lo = perRow.off[row];
    const hi = perRow.off[row + 1];
    let total = 0;
    let self = 0;
    for (let position = lo; position < hi; position++) {
      const i = perRow.order[position];
      seconds[position] = end[i] - start[i];
      total += seconds[position];
      self += own[i];
    }
    const sorted = seconds.subarray(lo, hi).sort();
    const up = pathParent[id];
    return { path: text[id], name: data.names[pathName[id]] ?? "", depth: depthOf[id], parent: up < 0 ? -1 : rowOfPath[up], count: hi - lo, total, self, p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95) };
  });
  return { rows, spanRow: nodeRow.subarray(0, nSpans), segRow: nodeRow.subarray(nSpans) };
}

/**
 * A name as a piece of a path: a backslash or ";" in it escaped by a backslash,
 * so a path splits back into its names (analysis.flame writes the same).
 * @param {string} name
 */
export function pathPiece(name) {
  return name.replace(/[\\;]/g, (character) => `\\${character}`);
}

/**
 * Counting sort of the span indices into `nKeys` buckets (`keyOf` < 0: left out).
 * @param {number} nItems
 * @param {number} nKeys
 * @param {(i: number) => number} keyOf
 * @returns {{order: Uint32Array, off: Uint32Array}} bucket k holds order[off[k] .. off[k+1])
 */
function bucket(nItems, nKeys, keyOf) {
  const keys = new Int32Array(nItems);
  const off = new Uint32Array(nKeys + 1);
  let total = 0;
  for (let i = 0; i < nItems; i++) {
    const key = keyOf(i);
    keys[i] = key;
    if (key >= 0) {
      off[key + 1]++;
      total++;
    }
  }
  for (let key = 0; key < nKeys; key++) off[key + 1] += off[key];
  const fill = off.slice(0, nKeys);
  const order = new Uint32Array(total);
  for (let i = 0; i < nItems; i++) if (keys[i] >= 0) order[fill[keys[i]]++] = i;
  return { order, off };
}

/** @param {Float64Array} values */
function grow(values) {
  const grown = new Float64Array(values.length * 2);
  grown.set(values);
  return grown;
}

/**
 * Length of the union of the first `count` intervals [starts[j], ends[j]) (ends > starts).
 * @param {Float64Array} starts
 * @param {Float64Array} ends
 * @param {number} count
 */
function unionLength(starts, ends, count) {
  // Insertion sort by start: a span has few children, and they come mostly in order.
  for (let i = 1; i < count; i++) {
    const av = starts[i];
    const bv = ends[i];
    let j = i - 1;
    while (j >= 0 && starts[j] > av) {
      starts[j + 1] = starts[j];
      ends[j + 1] = ends[j];
      j--;
    }
    starts[j + 1] = av;
    ends[j + 1] = bv;
  }
  let total = 0;
  let lo = starts[0];
  let hi = ends[0];
  for (let i = 1; i < count; i++) {
    if (starts[i] > hi) {
      total += hi - lo;
      lo = starts[i];
      hi = ends[i];
    } else if (ends[i] > hi) {
      hi = ends[i];
    }
  }
  return total + (hi - lo);
}
