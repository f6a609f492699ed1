// Row order (the sort over the rows the filter's query keeps), row heights
// (collapsed / expanded), lane positions and the rows visible at a scroll
// offset. Recomputed only when the rows, the sort, the lane height or the
// expanded set changes.

/** @typedef {import("./decode.js").Data} Data */
/** @typedef {"start"|"duration"|"reward"|"lanes"|"open"} SortKey */
export const SORT_KEYS = /** @type {SortKey[]} */ (["start", "duration", "reward", "lanes", "open"]);
export const SORT_LABELS = /** @type {Record<SortKey, string>} */ ({
  start: "start",
  duration: "duration",
  reward: "reward",
  lanes: "lane count",
  open: "open spans",
});

/** Vertical padding above and below the bars of a row, in CSS px. */
export const ROW_PAD = 3;

/**
 * Every payload sample index, in payload order (the rows before the filter's
 * query and the sort).
 * @param {Data} d
 * @returns {Uint32Array}
 */
export function allSamples(d) {
  const all = new Uint32Array(d.nSamples);
  for (let s = 0; s < d.nSamples; s++) all[s] = s;
  return all;
}

/**
 * Sort key value of a sample (NaN when missing).
 * @param {Data} d
 * @param {number} s
 * @param {SortKey} key
 */
export function sortValue(d, s, key) {
  switch (key) {
    case "duration":
      return d.smpEnd[s] - d.smpStart[s];
    case "reward":
      return d.smpReward[s];
    case "lanes":
      return d.nLanes[s];
    case "open":
      return d.smpOpen[s];
    case "start":
    default:
      return d.smpStart[s];
  }
}

/**
 * Rows sorted by `key`; missing values (NaN) last in both directions; ties
 * keep payload order. In a comparison view (several rollouts, each aligned to
 * its own start) rows stay grouped by rollout, sorted within each group.
 * @param {Data} d
 * @param {Uint32Array} rows
 * @param {SortKey} key
 * @param {boolean} desc
 * @returns {Uint32Array}
 */
export function sortRows(d, rows, key, desc) {
  const n = rows.length;
  const vals = new Float64Array(n);
  for (let i = 0; i < n; i++) vals[i] = sortValue(d, rows[i], key);
  const order = new Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  const sign = desc ? -1 : 1;
  const grouped = d.meta.align === "rollout" && d.meta.rollouts.length > 1;
  order.sort((a, b) => {
    if (grouped) {
      const ga = d.smpRollout[rows[a]];
      const gb = d.smpRollout[rows[b]];
      if (ga !== gb) return ga - gb;
    }
    const va = vals[a];
    const vb = vals[b];
    const na = Number.isNaN(va);
    const nb = Number.isNaN(vb);
    if (na || nb) return na === nb ? rows[a] - rows[b] : na ? 1 : -1;
    if (va !== vb) return va < vb ? -sign : sign;
    return rows[a] - rows[b];
  });
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i++) out[i] = rows[order[i]];
  return out;
}

/**
 * @typedef {Object} Layout
 * @property {Uint32Array} rows payload sample index of each row
 * @property {Uint8Array} expanded 1 when the row is expanded
 * @property {Float64Array} rowTop top of each row (content px), length rows+1
 * @property {Int32Array} rowOfSample row of each payload sample, -1 when filtered out
 * @property {number} laneH
 * @property {number} totalHeight
 */

/**
 * Row heights and positions.
 * @param {Data} d
 * @param {Uint32Array} rows
 * @param {(s: number) => boolean} isExpanded
 * @param {number} laneH
 * @returns {Layout}
 */
export function buildLayout(d, rows, isExpanded, laneH) {
  const n = rows.length;
  const expanded = new Uint8Array(n);
  const rowTop = new Float64Array(n + 1);
  const rowOfSample = new Int32Array(d.nSamples).fill(-1);
  let y = 0;
  for (let r = 0; r < n; r++) {
    const s = rows[r];
    rowOfSample[s] = r;
    const ex = isExpanded(s) && d.nLanes[s] > 1;
    expanded[r] = ex ? 1 : 0;
    rowTop[r] = y;
    y += rowHeight(d, s, ex, laneH);
  }
  rowTop[n] = y;
  return { rows, expanded, rowTop, rowOfSample, laneH, totalHeight: y };
}

/**
 * Height of a row in CSS px.
 * @param {Data} d
 * @param {number} s
 * @param {boolean} expanded
 * @param {number} laneH
 */
export function rowHeight(d, s, expanded, laneH) {
  const lanes = expanded ? Math.max(1, d.nLanes[s]) : 1;
  return lanes * laneH + 2 * ROW_PAD;
}

/**
 * Gap between stacked lanes in px.
 * @param {number} laneH
 */
export function laneGap(laneH) {
  return laneH >= 12 ? 2 : 1;
}

/**
 * Vertical extent of a bar (content px): lane `lane` of row `r`, or the
 * whole collapsed row when it is not expanded.
 * @param {Layout} L
 * @param {number} r
 * @param {number} lane
 * @returns {{y: number, h: number}}
 */
export function barBox(L, r, lane) {
  const top = L.rowTop[r] + ROW_PAD;
  const g = laneGap(L.laneH);
  if (!L.expanded[r]) return { y: top, h: L.laneH - g };
  return { y: top + lane * L.laneH, h: L.laneH - g };
}

/**
 * First row whose bottom is below `y` (content px): binary search on rowTop.
 * @param {Layout} L
 * @param {number} y
 */
export function rowAtY(L, y) {
  const n = L.rows.length;
  if (n === 0 || y < 0 || y >= L.totalHeight) return -1;
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (L.rowTop[mid] <= y) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Rows intersecting the viewport [scrollTop, scrollTop + height): [first, last).
 * @param {Layout} L
 * @param {number} scrollTop
 * @param {number} height
 * @returns {[number, number]}
 */
export function visibleRows(L, scrollTop, height) {
  const n = L.rows.length;
  if (n === 0 || height <= 0) return [0, 0];
  const top = Math.max(0, scrollTop);
  if (top >= L.totalHeight) return [n, n];
  const first = Math.max(0, rowAtY(L, top));
  let last = first;
  const bottom = scrollTop + height;
  while (last < n && L.rowTop[last] < bottom) last++;
  return [first, last];
}

/**
 * Lane (0-based) under content y within row r (0 for collapsed rows).
 * @param {Data} d
 * @param {Layout} L
 * @param {number} r
 * @param {number} y
 */
export function laneAtY(d, L, r, y) {
  if (!L.expanded[r]) return 0;
  const rel = y - L.rowTop[r] - ROW_PAD;
  const lane = Math.floor(rel / L.laneH);
  const s = L.rows[r];
  return Math.max(0, Math.min(d.nLanes[s] - 1, lane));
}
