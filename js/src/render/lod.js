// Culling and level of detail: find the spans of a lane that reach into the
// visible time window, merge runs of sub-pixel spans into one rectangle per
// pixel run (dominant = longest span, with a count), and cluster instant
// events that fall within a few pixels of each other.

import { grown } from "../util/arrays.js";

/**
 * First index i in [lo, hi) with endMax[i] >= time (endMax is non-decreasing
 * within a lane); hi when none.
 * @param {ArrayLike<number>} endMax
 * @param {number} lo
 * @param {number} hi
 * @param {number} time
 */
export function firstReaching(endMax, lo, hi, time) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (endMax[mid] >= time) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * First index i in [lo, hi) with sorted[i] >= value; hi when none.
 * @param {ArrayLike<number>} sorted
 * @param {number} lo
 * @param {number} hi
 * @param {number} value
 */
export function lowerBound(sorted, lo, hi, value) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Growable output of merged runs (one rectangle each). */
export class RunBuffer {
  constructor(cap = 4096) {
    this.x0 = new Float32Array(cap);
    this.x1 = new Float32Array(cap);
    this.span = new Int32Array(cap);
    this.count = new Uint32Array(cap);
    this.n = 0;
  }
  reset() {
    this.n = 0;
  }
  /**
   * @param {number} x0
   * @param {number} x1
   * @param {number} span
   * @param {number} count
   */
  push(x0, x1, span, count) {
    if (this.n === this.x0.length) this.grow();
    const index = this.n++;
    this.x0[index] = x0;
    this.x1[index] = x1;
    this.span[index] = span;
    this.count[index] = count;
  }
  grow() {
    this.x0 = grown(this.x0);
    this.x1 = grown(this.x1);
    this.span = grown(this.span);
    this.count = grown(this.count);
  }
}

/**
 * @typedef {Object} TimeScale
 * @property {number} t0 visible window start (s)
 * @property {number} t1 visible window end (s)
 * @property {number} pxPerSec
 * @property {number} x0 x of time t0 (CSS px)
 */

/**
 * Merge the visible spans of one lane [lo, hi) into runs. Spans at least
 * `minPx` wide are emitted alone; narrower neighbours that touch within a
 * pixel are merged into one run that keeps the longest span as its
 * representative and counts the merged spans.
 * @param {ArrayLike<number>} start
 * @param {ArrayLike<number>} end
 * @param {ArrayLike<number>} endMax
 * @param {Uint8Array|null} vis per-span visibility (0 hidden) or null for all
 * @param {number} lo
 * @param {number} hi
 * @param {TimeScale} sc
 * @param {RunBuffer} out
 * @param {number} [minPx]
 * @returns {number} spans looked at
 */
export function mergeLane(start, end, endMax, vis, lo, hi, sc, out, minPx = 1) {
  const { t0, t1, pxPerSec, x0: ox } = sc;
  const xMin = ox - 2;
  const xMax = ox + (t1 - t0) * pxPerSec + 2;
  let i = firstReaching(endMax, lo, hi, t0);
  let runA = 0;
  let runB = -Infinity;
  let runBest = -1;
  let runBestDur = -1;
  let runCount = 0;
  let visited = 0;
  for (; i < hi; i++) {
    const spanStart = start[i];
    if (spanStart > t1) break;
    visited++;
    let spanEnd = end[i];
    if (!(spanEnd >= spanStart)) spanEnd = spanStart;
    if (spanEnd < t0) continue;
    if (vis !== null && vis[i] === 0) continue;
    let left = ox + (spanStart - t0) * pxPerSec;
    let right = ox + (spanEnd - t0) * pxPerSec;
    if (left < xMin) left = xMin;
    if (right > xMax) right = xMax;
    if (right - left >= minPx) {
      if (runCount > 0) {
        out.push(runA, Math.max(runB, runA + 1), runBest, runCount);
        runCount = 0;
      }
      out.push(left, right, i, 1);
      continue;
    }
    const dur = spanEnd - spanStart;
    if (runCount > 0 && left <= runB + 1) {
      if (right > runB) runB = right;
      runCount++;
      if (dur > runBestDur) {
        runBestDur = dur;
        runBest = i;
      }
    } else {
      if (runCount > 0) out.push(runA, Math.max(runB, runA + 1), runBest, runCount);
      runA = left;
      runB = right;
      runBest = i;
      runBestDur = dur;
      runCount = 1;
    }
  }
  if (runCount > 0) out.push(runA, Math.max(runB, runA + 1), runBest, runCount);
  return visited;
}

/** Growable output of event clusters (one marker each). */
export class ClusterBuffer {
  constructor(cap = 1024) {
    this.x = new Float32Array(cap);
    this.first = new Int32Array(cap);
    this.count = new Uint32Array(cap);
    this.n = 0;
  }
  reset() {
    this.n = 0;
  }
  /**
   * @param {number} x
   * @param {number} first
   * @param {number} count
   */
  push(x, first, count) {
    if (this.n === this.x.length) {
      this.x = grown(this.x);
      this.first = grown(this.first);
      this.count = grown(this.count);
    }
    const index = this.n++;
    this.x[index] = x;
    this.first[index] = first;
    this.count[index] = count;
  }
}

/**
 * Cluster sorted positions: a cluster starts at a position and takes every
 * following position within `gap` px of its first one. The marker sits at the
 * cluster's mean position; `first` is the id of its first member.
 * @param {ArrayLike<number>} xs sorted ascending
 * @param {ArrayLike<number>} ids id of each position
 * @param {number} count
 * @param {number} gap
 * @param {ClusterBuffer} out
 */
export function clusterSorted(xs, ids, count, gap, out) {
  let i = 0;
  while (i < count) {
    const first = xs[i];
    let sum = first;
    let j = i + 1;
    while (j < count && xs[j] - first <= gap) {
      sum += xs[j];
      j++;
    }
    out.push(sum / (j - i), ids[i], j - i);
    i = j;
  }
}

/** Scratch space for gathering a row's events before clustering. */
export class EventScratch {
  constructor(cap = 1024) {
    this.xs = new Float64Array(cap);
    this.ids = new Int32Array(cap);
    this.n = 0;
  }
  reset() {
    this.n = 0;
  }
  /**
   * @param {number} x
   * @param {number} id
   */
  push(x, id) {
    if (this.n === this.xs.length) {
      this.xs = grown(this.xs);
      this.ids = grown(this.ids);
    }
    this.xs[this.n] = x;
    this.ids[this.n] = id;
    this.n++;
  }
  /** Sort the gathered (x, id) pairs by x. */
  sort() {
    const count = this.n;
    let sorted = true;
    for (let i = 1; i < count; i++) {
      if (this.xs[i] < this.xs[i - 1]) {
        sorted = false;
        break;
      }
    }
    if (sorted) return;
    const order = new Array(count);
    for (let i = 0; i < count; i++) order[i] = i;
    const xs = this.xs;
    order.sort((left, right) => xs[left] - xs[right] || left - right);
    const nx = new Float64Array(count);
    const ni = new Int32Array(count);
    for (let i = 0; i < count; i++) {
      nx[i] = xs[order[i]];
      ni[i] = this.ids[order[i]];
    }
    this.xs.set(nx);
    this.ids.set(ni);
  }
}

/**
 * Gather the visible events of one lane [lo, hi) (sorted by time) into
 * `scratch`, keeping those `keep(i)` accepts.
 * @param {ArrayLike<number>} ts
 * @param {number} lo
 * @param {number} hi
 * @param {TimeScale} sc
 * @param {number} marginPx
 * @param {(i: number) => boolean} keep
 * @param {EventScratch} scratch
 */
export function gatherEvents(ts, lo, hi, sc, marginPx, keep, scratch) {
  const margin = marginPx / sc.pxPerSec;
  let i = lowerBound(ts, lo, hi, sc.t0 - margin);
  const tEnd = sc.t1 + margin;
  for (; i < hi; i++) {
    const time = ts[i];
    if (time > tEnd) break;
    if (!keep(i)) continue;
    scratch.push(sc.x0 + (time - sc.t0) * sc.pxPerSec, i);
  }
}
