// Culling and level of detail: find the spans of a lane that reach into the
// visible time window, merge runs of sub-pixel spans into one rectangle per
// pixel run (dominant = longest span, with a count), and cluster instant
// events that fall within a few pixels of each other.

/**
 * First index i in [lo, hi) with endMax[i] >= t (endMax is non-decreasing
 * within a lane); hi when none.
 * @param {Float32Array} endMax
 * @param {number} lo
 * @param {number} hi
 * @param {number} t
 */
export function firstReaching(endMax, lo, hi, t) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (endMax[mid] >= t) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * First index i in [lo, hi) with sorted[i] >= t; hi when none.
 * @param {Float32Array} sorted
 * @param {number} lo
 * @param {number} hi
 * @param {number} t
 */
export function lowerBound(sorted, lo, hi, t) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < t) lo = mid + 1;
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
    const k = this.n++;
    this.x0[k] = x0;
    this.x1[k] = x1;
    this.span[k] = span;
    this.count[k] = count;
  }
  grow() {
    const cap = this.x0.length * 2;
    const g = (/** @type {any} */ a) => {
      const b = new a.constructor(cap);
      b.set(a);
      return b;
    };
    this.x0 = g(this.x0);
    this.x1 = g(this.x1);
    this.span = g(this.span);
    this.count = g(this.count);
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
 * @param {Float32Array} start
 * @param {Float32Array} end
 * @param {Float32Array} endMax
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
    const s = start[i];
    if (s > t1) break;
    visited++;
    let e = end[i];
    if (!(e >= s)) e = s;
    if (e < t0) continue;
    if (vis !== null && vis[i] === 0) continue;
    let a = ox + (s - t0) * pxPerSec;
    let b = ox + (e - t0) * pxPerSec;
    if (a < xMin) a = xMin;
    if (b > xMax) b = xMax;
    if (b - a >= minPx) {
      if (runCount > 0) {
        out.push(runA, Math.max(runB, runA + 1), runBest, runCount);
        runCount = 0;
      }
      out.push(a, b, i, 1);
      continue;
    }
    const dur = e - s;
    if (runCount > 0 && a <= runB + 1) {
      if (b > runB) runB = b;
      runCount++;
      if (dur > runBestDur) {
        runBestDur = dur;
        runBest = i;
      }
    } else {
      if (runCount > 0) out.push(runA, Math.max(runB, runA + 1), runBest, runCount);
      runA = a;
      runB = b;
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
      const cap = this.x.length * 2;
      const x2 = new Float32Array(cap);
      x2.set(this.x);
      const f2 = new Int32Array(cap);
      f2.set(this.first);
      const c2 = new Uint32Array(cap);
      c2.set(this.count);
      this.x = x2;
      this.first = f2;
      this.count = c2;
    }
    const k = this.n++;
    this.x[k] = x;
    this.first[k] = first;
    this.count[k] = count;
  }
}

/**
 * Cluster sorted positions: a cluster starts at a position and takes every
 * following position within `gap` px of its first one. The marker sits at the
 * cluster's mean position; `first` is the id of its first member.
 * @param {ArrayLike<number>} xs sorted ascending
 * @param {ArrayLike<number>} ids id of each position
 * @param {number} n
 * @param {number} gap
 * @param {ClusterBuffer} out
 */
export function clusterSorted(xs, ids, n, gap, out) {
  let i = 0;
  while (i < n) {
    const first = xs[i];
    let sum = first;
    let j = i + 1;
    while (j < n && xs[j] - first <= gap) {
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
      const cap = this.xs.length * 2;
      const a = new Float64Array(cap);
      a.set(this.xs);
      const b = new Int32Array(cap);
      b.set(this.ids);
      this.xs = a;
      this.ids = b;
    }
    this.xs[this.n] = x;
    this.ids[this.n] = id;
    this.n++;
  }
  /** Sort the gathered (x, id) pairs by x. */
  sort() {
    const n = this.n;
    let sorted = true;
    for (let i = 1; i < n; i++) {
      if (this.xs[i] < this.xs[i - 1]) {
        sorted = false;
        break;
      }
    }
    if (sorted) return;
    const order = new Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    const xs = this.xs;
    order.sort((a, b) => xs[a] - xs[b] || a - b);
    const nx = new Float64Array(n);
    const ni = new Int32Array(n);
    for (let i = 0; i < n; i++) {
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
 * @param {Float32Array} ts
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
    const t = ts[i];
    if (t > tEnd) break;
    if (!keep(i)) continue;
    scratch.push(sc.x0 + (t - sc.t0) * sc.pxPerSec, i);
  }
}
