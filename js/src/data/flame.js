// Flame table of payload spans, the same answer as analysis.flame: one row per
// name path from the root (names joined by ";"), with count, total and self
// seconds (self: duration minus the union of the children's intervals clipped
// to the span, never below zero) and p50/p95 of the durations; optionally over
// a window, spans clipped to it. Pure: the icicle view (icicle.js) draws it.
// Parents and children are taken among the included spans only. A window keeps
// each span's path, as in Python: a child that outlived its parent stays under
// it, and a path above a span in the window has its row even when the window
// holds none of its own spans (count 0, no time, p50 and p95 NaN).
// The segments of a chosen span flagged F_PD_SEGMENT_SPANS are its children
// (Python counts the real segment spans they mirror).

import { segmentsAreChildren } from "./critical.js";
import { quantile } from "./quantile.js";
import { compareCodePoints } from "../util/text.js";

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
 * Linear passes over typed arrays, with no object per span: paths are interned
 * as (parent path, name) pairs, children and durations grouped by counting sort.
 * @param {Data} data
 * @param {Uint8Array|null} include
 * @param {[number, number]|null} [window]
 * @returns {Flame}
 */
export function flameOf(data, include, window = null) {
  const nodes = flameNodes(data, include, window);
  const paths = internPaths(nodes);
  const own = selfTimes(nodes, data.nSpans);
  const { rows, nodeRow } = flameRows(data, nodes, paths, own);
  return { rows, spanRow: nodeRow.subarray(0, data.nSpans), segRow: nodeRow.subarray(data.nSpans) };
}

/**
 * @typedef {Object} FlameNodes the spans and child segments a flame counts
 * @property {number} count nodes: spans (0 .. nSpans-1), then segments (nSpans + seg)
 * @property {Float64Array} start clipped to the window
 * @property {Float64Array} end clipped to the window
 * @property {Uint8Array} chosen 1 for a node the flame counts
 * @property {number} nChosen
 * @property {Uint8Array} pathed 1 for a chosen node and the included spans above it (their paths are rows)
 * @property {Uint32Array} name name id
 * @property {Uint32Array} depth
 * @property {(node: number) => number} parentOf the node's parent when it is included, else -1
 */

/**
 * The spans with `include[i]` set and the segments that are their children
 * (critical.js segmentsAreChildren), clipped to `window`; a node of no time in it drops.
 * @param {Data} data
 * @param {Uint8Array|null} include
 * @param {[number, number]|null} window
 * @returns {FlameNodes}
 */
function flameNodes(data, include, window) {
  const nSpans = data.nSpans;
  const count = nSpans + data.nSegs;
  const start = new Float64Array(count);
  const end = new Float64Array(count);
  const chosen = new Uint8Array(count);
  const name = new Uint32Array(count);
  const depth = new Uint32Array(count);
  const parent = new Int32Array(count);
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
    name[i] = data.spanName[i];
    depth[i] = data.spanDepth[i];
    parent[i] = data.spanParent[i];
    if (include && !include[i]) continue;
    choose(i, data.spanStart[i], data.spanEnd[i]);
  }
  for (let i = 0; i < nSpans; i++) {
    if ((include && !include[i]) || !segmentsAreChildren(data, i)) continue;
    for (let position = data.spanSegOff[i]; position < data.spanSegOff[i + 1]; position++) {
      const seg = data.segOrder[position];
      const node = nSpans + seg;
      name[node] = data.segName[seg];
      depth[node] = data.spanDepth[i] + 1;
      parent[node] = i;
      if (data.segEnd[seg] > data.segStart[seg]) choose(node, data.segStart[seg], data.segEnd[seg]);
    }
  }
  const parentOf = (/** @type {number} */ node) => {
    const up = parent[node];
    return up >= 0 && (!include || include[up]) ? up : -1;
  };
  const pathed = chosen.slice();
  for (let i = 0; i < count; i++) {
    if (!chosen[i]) continue;
    for (let up = parentOf(i); up >= 0 && !pathed[up]; up = parentOf(up)) pathed[up] = 1;
  }
  return { count, start, end, chosen, nChosen, pathed, name, depth, parentOf };
}

/**
 * @typedef {Object} FlamePaths the name paths of the pathed nodes, parents before children
 * @property {Int32Array} pathOfNode -1 for a node not pathed
 * @property {number[]} parent each path's parent path, -1 for a root
 * @property {number[]} name each path's last name id
 */

/**
 * Each pathed node's path, interned as (parent path, name): nodes are visited by
 * depth, so a parent path always has its id before its children ask for one.
 * @param {FlameNodes} nodes
 * @returns {FlamePaths}
 */
function internPaths(nodes) {
  const byDepth = bucket(nodes.count, 257, (i) => (nodes.pathed[i] ? nodes.depth[i] : -1));
  const pathOfNode = new Int32Array(nodes.count).fill(-1);
  /** @type {Map<number, number>} (parent path + 1) * 65536 + name -> path id */
  const intern = new Map();
  /** @type {number[]} */
  const parent = [];
  /** @type {number[]} */
  const name = [];
  for (let position = 0; position < byDepth.order.length; position++) {
    const i = byDepth.order[position];
    const up = nodes.parentOf(i);
    const above = up >= 0 ? pathOfNode[up] : -1;
    const key = (above + 1) * 65536 + nodes.name[i];
    let id = intern.get(key);
    if (id === undefined) {
      id = parent.length;
      intern.set(key, id);
      parent.push(above);
      name.push(nodes.name[i]);
    }
    pathOfNode[i] = id;
  }
  return { pathOfNode, parent, name };
}

/**
 * Each chosen node's self time: its duration minus the union of its chosen
 * children's intervals clipped to it, never below zero.
 * @param {FlameNodes} nodes
 * @param {number} nSpans only spans have children
 * @returns {Float64Array}
 */
function selfTimes(nodes, nSpans) {
  const { start, end, chosen } = nodes;
  const kids = bucket(nodes.count, nSpans, (i) => (chosen[i] ? nodes.parentOf(i) : -1));
  const own = new Float64Array(nodes.count);
  let starts = new Float64Array(16);
  let ends = new Float64Array(16);
  for (let i = 0; i < nodes.count; i++) {
    if (!chosen[i]) continue;
    let nIntervals = 0;
    for (let position = kids.off[i]; position < kids.off[i + 1]; position++) {
      const j = kids.order[position];
      const childStart = Math.max(start[j], start[i]);
      const childEnd = Math.min(end[j], end[i]);
      if (!(childEnd > childStart)) continue;
      if (nIntervals === starts.length) {
        starts = grow(starts);
        ends = grow(ends);
      }
      starts[nIntervals] = childStart;
      ends[nIntervals] = childEnd;
      nIntervals++;
    }
    own[i] = Math.max(end[i] - start[i] - (nIntervals ? unionLength(starts, ends, nIntervals) : 0), 0);
  }
  return own;
}

/**
 * One row per path, sorted by its text in code point order as Python sorts it
 * (names spelled once per path), with the count, total and self time and the
 * p50/p95 of its chosen nodes' durations; and each node's row (-1 for a node not
 * chosen).
 * @param {Data} data
 * @param {FlameNodes} nodes
 * @param {FlamePaths} paths
 * @param {Float64Array} own
 * @returns {{rows: FlameRow[], nodeRow: Int32Array}}
 */
function flameRows(data, nodes, paths, own) {
  const nPaths = paths.parent.length;
  /** @type {string[]} */
  const text = new Array(nPaths);
  const depthOf = new Int32Array(nPaths);
  for (let id = 0; id < nPaths; id++) {
    const name = pathPiece(data.names[paths.name[id]] ?? "");
    const up = paths.parent[id];
    text[id] = up < 0 ? name : `${text[up]};${name}`;
    depthOf[id] = up < 0 ? 0 : depthOf[up] + 1;
  }
  const sortedIds = Array.from({ length: nPaths }, (_, id) => id).sort((left, right) => compareCodePoints(text[left], text[right]));
  const rowOfPath = new Int32Array(nPaths);
  sortedIds.forEach((id, row) => (rowOfPath[id] = row));
  const nodeRow = new Int32Array(nodes.count).fill(-1);
  for (let i = 0; i < nodes.count; i++) if (nodes.chosen[i]) nodeRow[i] = rowOfPath[paths.pathOfNode[i]];
  const perRow = bucket(nodes.count, nPaths, (i) => nodeRow[i]);
  const seconds = new Float64Array(nodes.nChosen);
  const rows = sortedIds.map((id, row) => {
    const lo = perRow.off[row];
    const hi = perRow.off[row + 1];
    let total = 0;
    let self = 0;
    for (let position = lo; position < hi; position++) {
      const i = perRow.order[position];
      seconds[position] = nodes.end[i] - nodes.start[i];
      total += seconds[position];
      self += own[i];
    }
    const sorted = seconds.subarray(lo, hi).sort();
    const up = paths.parent[id];
    return { path: text[id], name: data.names[paths.name[id]] ?? "", depth: depthOf[id], parent: up < 0 ? -1 : rowOfPath[up], count: hi - lo, total, self, p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95) };
  });
  return { rows, nodeRow };
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
 * Length of the union of the first `count` intervals [starts[j], ends[j]) (ends > starts),
 * which it sorts by start in place.
 * @param {Float64Array} starts
 * @param {Float64Array} ends
 * @param {number} count
 */
function unionLength(starts, ends, count) {
  if (count > INSERTION_SORT_MAX) sortThroughIndex(starts, ends, count);
  else insertionSort(starts, ends, count);
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

/** Past this many children, insertion sort's moves grow with their square: children
 * on two lanes arrive as two interleaved runs, far from sorted, so a span with many
 * children is sorted by the general sort instead. */
const INSERTION_SORT_MAX = 64;

/**
 * Sort the first `count` intervals by start: a span has few children, mostly in order.
 * @param {Float64Array} starts
 * @param {Float64Array} ends
 * @param {number} count
 */
function insertionSort(starts, ends, count) {
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
}

/**
 * Sort the first `count` intervals by start through a sorted index (n log n).
 * @param {Float64Array} starts
 * @param {Float64Array} ends
 * @param {number} count
 */
function sortThroughIndex(starts, ends, count) {
  const order = new Uint32Array(count);
  for (let k = 0; k < count; k++) order[k] = k;
  order.sort((a, b) => starts[a] - starts[b]);
  const oldStarts = starts.slice(0, count);
  const oldEnds = ends.slice(0, count);
  for (let k = 0; k < count; k++) {
    starts[k] = oldStarts[order[k]];
    ends[k] = oldEnds[order[k]];
  }
}
