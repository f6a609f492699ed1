// Row order (the sort over the rows the filter's query keeps), row heights
// (collapsed / expanded), lane positions and the rows visible at a scroll
// offset. Recomputed only when the rows, the sort, the lane height or the
// expanded set changes.

/** @typedef {import("./decode.js").Data} Data */
/** @typedef {"start"|"duration"|"running"|"reward"|"lanes"|"open"} SortKey */
export const SORT_KEYS = /** @type {SortKey[]} */ (["start", "duration", "running", "reward", "lanes", "open"]);
export const SORT_LABELS = /** @type {Record<SortKey, string>} */ ({
  start: "start",
  duration: "duration",
  running: "running for",
  reward: "reward",
  lanes: "lane count",
  open: "open spans",
});

/** Vertical padding above and below the bars of a row, in CSS px. */
export const ROW_PAD = 3;

/**
 * Every payload sample index, in payload order (the rows before the filter's
 * query and the sort).
 * @param {Data} data
 * @returns {Uint32Array}
 */
export function allSamples(data) {
  const all = new Uint32Array(data.nSamples);
  for (let sample = 0; sample < data.nSamples; sample++) all[sample] = sample;
  return all;
}

/**
 * Sort key value of a sample (NaN when missing).
 * @param {Data} data
 * @param {number} sample
 * @param {SortKey} key
 */
export function sortValue(data, sample, key) {
  switch (key) {
    case "duration":
      return data.smpEnd[sample] - data.smpStart[sample];
    case "running": // a live view's clock; a dump's samples have all finished
      return data.liveRunning ? data.liveRunning[sample] : data.smpEnd[sample] - data.smpStart[sample];
    case "reward":
      return data.smpReward[sample];
    case "lanes":
      return data.nLanes[sample];
    case "open":
      return data.smpOpen[sample];
    case "start":
    default:
      return data.smpStart[sample];
  }
}

/**
 * Rows sorted by `key`; missing values (NaN) last in both directions; ties
 * keep payload order. In a comparison view (several rollouts, each aligned to
 * its own start) rows stay grouped by rollout, sorted within each group.
 * @param {Data} data
 * @param {Uint32Array} rows
 * @param {SortKey} key
 * @param {boolean} desc
 * @returns {Uint32Array}
 */
export function sortRows(data, rows, key, desc) {
  const nRows = rows.length;
  const vals = new Float64Array(nRows);
  for (let i = 0; i < nRows; i++) vals[i] = sortValue(data, rows[i], key);
  const order = new Array(nRows);
  for (let i = 0; i < nRows; i++) order[i] = i;
  const sign = desc ? -1 : 1;
  const grouped = data.meta.align === "rollout" && data.meta.rollouts.length > 1;
  order.sort((left, right) => {
    if (grouped) {
      const ga = data.smpRollout[rows[left]];
      const gb = data.smpRollout[rows[right]];
      if (ga !== gb) return ga - gb;
    }
    const va = vals[left];
    const vb = vals[right];
    const na = Number.isNaN(va);
    const nb = Number.isNaN(vb);
    if (na || nb) return na === nb ? rows[left] - rows[right] : na ? 1 : -1;
    if (va !== vb) return va < vb ? -sign : sign;
    return rows[left] - rows[right];
  });
  const out = new Uint32Array(nRows);
  for (let i = 0; i < nRows; i++) out[i] = rows[order[i]];
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
 * @param {Data} data
 * @param {Uint32Array} rows
 * @param {(s: number) => boolean} isExpanded
 * @param {number} laneH
 * @returns {Layout}
 */
export function buildLayout(data, rows, isExpanded, laneH) {
  const nRows = rows.length;
  const expanded = new Uint8Array(nRows);
  const rowTop = new Float64Array(nRows + 1);
  const rowOfSample = new Int32Array(data.nSamples).fill(-1);
  let y = 0;
  for (let row = 0; row < nRows; row++) {
    const sample = rows[row];
    rowOfSample[sample] = row;
    const ex = isExpanded(sample) && data.nLanes[sample] > 1;
    expanded[row] = ex ? 1 : 0;
    rowTop[row] = y;
    y += rowHeight(data, sample, ex, laneH);
  }
  rowTop[nRows] = y;
  return { rows, expanded, rowTop, rowOfSample, laneH, totalHeight: y };
}

/**
 * Height of a row in CSS px.
 * @param {Data} data
 * @param {number} sample
 * @param {boolean} expanded
 * @param {number} laneH
 */
export function rowHeight(data, sample, expanded, laneH) {
  const lanes = expanded ? Math.max(1, data.nLanes[sample]) : 1;
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
 * Vertical extent of a bar (content px): lane `lane` of row `row`, or the
 * whole collapsed row when it is not expanded.
 * @param {Layout} layout
 * @param {number} row
 * @param {number} lane
 * @returns {{y: number, h: number}}
 */
export function barBox(layout, row, lane) {
  const top = layout.rowTop[row] + ROW_PAD;
  const gap = laneGap(layout.laneH);
  if (!layout.expanded[row]) return { y: top, h: layout.laneH - gap };
  return { y: top + lane * layout.laneH, h: layout.laneH - gap };
}

/**
 * The engine band's box in a collapsed row (render/band.js) (content px): from a px under the bar to a
 * px above the row's bottom, 2 to 3 px high.
 * @param {Layout} layout
 * @param {number} row
 * @returns {{y: number, h: number}}
 */
export function bandBox(layout, row) {
  const barBottom = layout.rowTop[row] + ROW_PAD + layout.laneH - laneGap(layout.laneH);
  const rowBottom = layout.rowTop[row + 1];
  const y = barBottom + 1;
  return { y, h: Math.max(1, rowBottom - 1 - y) };
}

/**
 * First row whose bottom is below `y` (content px): binary search on rowTop.
 * @param {Layout} layout
 * @param {number} y
 */
export function rowAtY(layout, y) {
  const nRows = layout.rows.length;
  if (nRows === 0 || y < 0 || y >= layout.totalHeight) return -1;
  let lo = 0;
  let hi = nRows - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (layout.rowTop[mid] <= y) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Rows intersecting the viewport [scrollTop, scrollTop + height): [first, last).
 * @param {Layout} layout
 * @param {number} scrollTop
 * @param {number} height
 * @returns {[number, number]}
 */
export function visibleRows(layout, scrollTop, height) {
  const nRows = layout.rows.length;
  if (nRows === 0 || height <= 0) return [0, 0];
  const top = Math.max(0, scrollTop);
  if (top >= layout.totalHeight) return [nRows, nRows];
  const first = Math.max(0, rowAtY(layout, top));
  let last = first;
  const bottom = scrollTop + height;
  while (last < nRows && layout.rowTop[last] < bottom) last++;
  return [first, last];
}

/**
 * Lane (0-based) under content y within row `row` (0 for collapsed rows).
 * @param {Data} data
 * @param {Layout} layout
 * @param {number} row
 * @param {number} y
 */
export function laneAtY(data, layout, row, y) {
  if (!layout.expanded[row]) return 0;
  const rel = y - layout.rowTop[row] - ROW_PAD;
  const lane = Math.floor(rel / layout.laneH);
  const sample = layout.rows[row];
  return Math.max(0, Math.min(data.nLanes[sample] - 1, lane));
}
