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
 * @param {Data} d
 * @param {Uint8Array|null} include
 * @param {[number, number]|null} [window]
 * @returns {Flame}
 */
export function flameOf(d, include, window = null) {
  const n = d.nSpans;
  // Nodes: spans (0 .. n-1), then segments (n + seg) of the spans whose
  // segments are children (critical.js segmentsAreChildren).
  const nNodes = n + d.nSegs;
  const start = new Float64Array(nNodes);
  const end = new Float64Array(nNodes);
  const chosen = new Uint8Array(nNodes);
  const nameOfNode = new Uint32Array(nNodes);
  const depthOfNode = new Uint32Array(nNodes);
  const parentOfNode = new Int32Array(nNodes);
  let m = 0;
  const choose = (/** @type {number} */ k, /** @type {number} */ a, /** @type {number} */ b) => {
    if (window) {
      a = Math.max(a, window[0]);
      b = Math.min(b, window[1]);
      if (!(b > a)) return;
    }
    start[k] = a;
    end[k] = b;
    chosen[k] = 1;
    m++;
  };
  for (let i = 0; i < n; i++) {
    nameOfNode[i] = d.spanName[i];
    depthOfNode[i] = d.spanDepth[i];
    parentOfNode[i] = d.spanParent[i];
    if (include && !include[i]) continue;
    choose(i, d.spanStart[i], d.spanEnd[i]);
  }
  for (let i = 0; i < n; i++) {
    if ((include && !include[i]) || !segmentsAreChildren(d, i)) continue;
    for (let c = d.spanSegOff[i]; c < d.spanSegOff[i + 1]; c++) {
      const seg = d.segOrder[c];
      const k = n + seg;
      nameOfNode[k] = d.segName[seg];
      depthOfNode[k] = d.spanDepth[i] + 1;
      parentOfNode[k] = i;
      if (d.segEnd[seg] > d.segStart[seg]) choose(k, d.segStart[seg], d.segEnd[seg]);
    }
  }
  const parentOf = (/** @type {number} */ i) => {
    const p = parentOfNode[i];
    return p >= 0 && chosen[p] ? p : -1;
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
  for (let k = 0; k < byDepth.order.length; k++) {
    const i = byDepth.order[k];
    const p = parentOf(i);
    const above = p >= 0 ? pathId[p] : -1;
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
  const kids = bucket(nNodes, n, (i) => (chosen[i] ? parentOf(i) : -1));
  const own = new Float64Array(nNodes);
  let sa = new Float64Array(16);
  let sb = new Float64Array(16);
  for (let i = 0; i < nNodes; i++) {
    if (!chosen[i]) continue;
    let k = 0;
    for (let c = kids.off[i]; c < kids.off[i + 1]; c++) {
      const j = kids.order[c];
      const a = Math.max(start[j], start[i]);
      const b = Math.min(end[j], end[i]);
      if (!(b > a)) continue;
      if (k === sa.length) {
        sa = grow(sa);
        sb = grow(sb);
      }
      sa[k] = a;
      sb[k] = b;
      k++;
    }
    own[i] = Math.max(end[i] - start[i] - (k ? unionLength(sa, sb, k) : 0), 0);
  }
  // Rows: names spelled once per path, sorted by path; durations grouped per row for quantiles.
  const nPaths = pathParent.length;
  /** @type {string[]} */
  const text = new Array(nPaths);
  const depthOf = new Int32Array(nPaths);
  for (let id = 0; id < nPaths; id++) {
    // A parent path is always interned before its children: its text and depth are known.
    const name = pathPiece(d.names[pathName[id]] ?? "");
    const up = pathParent[id];
    text[id] = up < 0 ? name : `${text[up]};${name}`;
    depthOf[id] = up < 0 ? 0 : depthOf[up] + 1;
  }
  const sortedIds = Array.from({ length: nPaths }, (_, id) => id).sort((x, y) => (text[x] < text[y] ? -1 : text[x] > text[y] ? 1 : 0));
  const rowOfPath = new Int32Array(nPaths);
  sortedIds.forEach((id, r) => (rowOfPath[id] = r));
  const nodeRow = new Int32Array(nNodes).fill(-1);
  for (let i = 0; i < nNodes; i++) if (chosen[i]) nodeRow[i] = rowOfPath[pathId[i]];
  const perRow = bucket(nNodes, nPaths, (i) => nodeRow[i]);
  const seconds = new Float64Array(m);
  const rows = sortedIds.map((id, r) => {
    const lo = perRow.off[r];
    const hi = perRow.off[r + 1];
    let total = 0;
    let self = 0;
    for (let c = lo; c < hi; c++) {
      const i = perRow.order[c];
      seconds[c] = end[i] - start[i];
      total += seconds[c];
      self += own[i];
    }
    const sorted = seconds.subarray(lo, hi).sort();
    const up = pathParent[id];
    return { path: text[id], name: d.names[pathName[id]] ?? "", depth: depthOf[id], parent: up < 0 ? -1 : rowOfPath[up], count: hi - lo, total, self, p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95) };
  });
  return { rows, spanRow: nodeRow.subarray(0, n), segRow: nodeRow.subarray(n) };
}

/**
 * A name as a piece of a path: a backslash or ";" in it escaped by a backslash,
 * so a path splits back into its names (analysis.flame writes the same).
 * @param {string} name
 */
export function pathPiece(name) {
  return name.replace(/[\\;]/g, (c) => `\\${c}`);
}

/**
 * Counting sort of the span indices into `nKeys` buckets (`keyOf` < 0: left out).
 * @param {number} n
 * @param {number} nKeys
 * @param {(i: number) => number} keyOf
 * @returns {{order: Uint32Array, off: Uint32Array}} bucket k holds order[off[k] .. off[k+1])
 */
function bucket(n, nKeys, keyOf) {
  const keys = new Int32Array(n);
  const off = new Uint32Array(nKeys + 1);
  let total = 0;
  for (let i = 0; i < n; i++) {
    const k = keyOf(i);
    keys[i] = k;
    if (k >= 0) {
      off[k + 1]++;
      total++;
    }
  }
  for (let k = 0; k < nKeys; k++) off[k + 1] += off[k];
  const fill = off.slice(0, nKeys);
  const order = new Uint32Array(total);
  for (let i = 0; i < n; i++) if (keys[i] >= 0) order[fill[keys[i]]++] = i;
  return { order, off };
}

/** @param {Float64Array} a */
function grow(a) {
  const b = new Float64Array(a.length * 2);
  b.set(a);
  return b;
}

/**
 * Length of the union of the first `k` intervals [a[j], b[j]) (b > a).
 * @param {Float64Array} a
 * @param {Float64Array} b
 * @param {number} k
 */
function unionLength(a, b, k) {
  // Insertion sort by start: a span has few children, and they come mostly in order.
  for (let x = 1; x < k; x++) {
    const av = a[x];
    const bv = b[x];
    let y = x - 1;
    while (y >= 0 && a[y] > av) {
      a[y + 1] = a[y];
      b[y + 1] = b[y];
      y--;
    }
    a[y + 1] = av;
    b[y + 1] = bv;
  }
  let total = 0;
  let lo = a[0];
  let hi = b[0];
  for (let x = 1; x < k; x++) {
    if (a[x] > hi) {
      total += hi - lo;
      lo = a[x];
      hi = b[x];
    } else if (b[x] > hi) {
      hi = b[x];
    }
  }
  return total + (hi - lo);
}
