// Flame table of payload spans, the same answer as analysis.flame: one row per
// name path from the root (names joined by ";"), with count, total and self
// seconds (self: duration minus the union of the children's intervals clipped
// to the span, never below zero) and p50/p95 of the durations; optionally over
// a window, spans clipped to it. Pure: the icicle view (icicle.js) draws it.
// Parents and children are taken among the chosen spans only, as in Python.

/** @typedef {import("./decode.js").Data} Data */

/**
 * @typedef {Object} FlameRow
 * @property {string} path
 * @property {string} name
 * @property {number} depth
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
 */

/**
 * Quantile with linear interpolation (pandas' default) of ascending values.
 * @param {number[]} sorted
 * @param {number} q
 */
export function quantile(sorted, q) {
  const pos = q * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

/**
 * Length of the union of intervals [a, b) (b > a), given as flat pairs.
 * @param {number[]} pairs
 */
function unionLength(pairs) {
  const n = pairs.length / 2;
  const order = Array.from({ length: n }, (_, k) => k).sort((x, y) => pairs[2 * x] - pairs[2 * y]);
  let total = 0;
  let a = NaN;
  let b = NaN;
  for (const k of order) {
    const s = pairs[2 * k];
    const e = pairs[2 * k + 1];
    if (!(s <= b)) {
      if (b > a) total += b - a;
      a = s;
      b = e;
    } else if (e > b) {
      b = e;
    }
  }
  if (b > a) total += b - a;
  return total;
}

/**
 * The flame table of the spans with `include[i]` set (all when null), clipped
 * to `window` ([a, b] in payload seconds) when given: spans outside it drop.
 * @param {Data} d
 * @param {Uint8Array|null} include
 * @param {[number, number]|null} [window]
 * @returns {Flame}
 */
export function flameOf(d, include, window = null) {
  const n = d.nSpans;
  const start = new Float64Array(n);
  const end = new Float64Array(n);
  const chosen = new Uint8Array(n);
  /** @type {number[]} */
  const list = [];
  for (let i = 0; i < n; i++) {
    if (include && !include[i]) continue;
    let a = d.spanStart[i];
    let b = d.spanEnd[i];
    if (window) {
      a = Math.max(a, window[0]);
      b = Math.min(b, window[1]);
      if (!(b > a)) continue;
    }
    start[i] = a;
    end[i] = b;
    chosen[i] = 1;
    list.push(i);
  }
  // Children's intervals clipped to their parent, per parent.
  /** @type {Map<number, number[]>} */
  const covers = new Map();
  for (const i of list) {
    const p = d.spanParent[i];
    if (p < 0 || !chosen[p]) continue;
    const a = Math.max(start[i], start[p]);
    const b = Math.min(end[i], end[p]);
    if (!(b > a)) continue;
    const pairs = covers.get(p);
    if (pairs) pairs.push(a, b);
    else covers.set(p, [a, b]);
  }
  // Name paths, parents first (a span is deeper than its parent).
  const byDepth = list.slice().sort((x, y) => d.spanDepth[x] - d.spanDepth[y]);
  /** @type {Map<number, string>} */
  const pathOf = new Map();
  for (const i of byDepth) {
    const p = d.spanParent[i];
    const name = d.names[d.spanName[i]] ?? "";
    const prefix = p >= 0 && chosen[p] ? pathOf.get(p) : undefined;
    pathOf.set(i, prefix === undefined ? name : `${prefix};${name}`);
  }
  /** @type {Map<string, {seconds: number[], self: number, spans: number[]}>} */
  const groups = new Map();
  for (const i of list) {
    const path = /** @type {string} */ (pathOf.get(i));
    const seconds = end[i] - start[i];
    const pairs = covers.get(i);
    const own = Math.max(seconds - (pairs ? unionLength(pairs) : 0), 0);
    let g = groups.get(path);
    if (!g) groups.set(path, (g = { seconds: [], self: 0, spans: [] }));
    g.seconds.push(seconds);
    g.self += own;
    g.spans.push(i);
  }
  const paths = [...groups.keys()].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  const spanRow = new Int32Array(n).fill(-1);
  const rows = paths.map((path, r) => {
    const g = /** @type {{seconds: number[], self: number, spans: number[]}} */ (groups.get(path));
    for (const i of g.spans) spanRow[i] = r;
    let total = 0;
    for (const s of g.seconds) total += s;
    const sorted = g.seconds.slice().sort((x, y) => x - y);
    const cut = path.lastIndexOf(";");
    return {
      path,
      name: cut < 0 ? path : path.slice(cut + 1),
      depth: path.split(";").length - 1,
      count: g.seconds.length,
      total,
      self: g.self,
      p50: quantile(sorted, 0.5),
      p95: quantile(sorted, 0.95),
    };
  });
  return { rows, spanRow };
}
