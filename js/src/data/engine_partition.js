// The engine phases' partition of wall time, as pieces: the one rule of
// answers/engine.py (`phase_seconds`, what `analysis.engine_breakdown` counts per
// sample), which the details panel sums (data/engine.js) and the engine band of a
// collapsed row draws (render/band.js), so the picture is the figures. Every instant
// in which some engine slice of the requests runs (within the span each request
// hangs under) is in one piece, of one phase:
//
// 1. Nesting first: a slice's own time is its interval less its child slices' (a
//    child's time is the child's, whatever its phase). The unsliced wait after a
//    `retract` event, from the event to the next child slice of the slice that holds
//    it, counts as queue.
// 2. Where own times of several slices overlap (the two halves of a PD request, the
//    tokenizer beside the scheduler), the instant is the first phase of the priority
//    (vocabularies.json engine_phase_priority, read by the kernel too).
// 3. Request spans and KV sender spans hold slices and have no time of their own: a
//    request's time that none of its slices covers is in no piece (no phase, nothing
//    drawn).
//
// A slice's phase is its band code (`data.spanBand`, engine_lanes.js: the phase whose
// names list it in `meta.engine_phases`, else "other"); a higher code comes first in
// the priority.

import { F_ENGINE } from "./decode.js";
import { isHolderSpan, isRequestSpan } from "./engine_lanes.js";

/** @typedef {import("./decode.js").Data} Data */

/** The engine's event that puts a request back in the queue (answers/engine.py RETRACT_EVENT). */
export const RETRACT_EVENT = "retract";
const QUEUE = "queue";
const OTHER_CODE = 1;

/**
 * Disjoint pieces in time order, each of one phase: what each instant counts in.
 * @typedef {Object} PhasePieces
 * @property {Float64Array} start
 * @property {Float64Array} end
 * @property {Uint8Array} code band code (1 + index in `data.bandPhases`)
 * @property {Int32Array} span the slice whose own time the piece is (for a
 *   retraction's wait, the slice it lies in): its visibility is the piece's
 * @property {number} n
 */

/**
 * The partition of the time the slices under `requests` cover, as pieces.
 * @param {Data} data
 * @param {number[]} requests request spans of one sample
 * @returns {PhasePieces}
 */
export function phasePieces(data, requests) {
  if (!requests.length) return emptyPieces();
  const queue = data.bandPhases.indexOf(QUEUE) + 1 || OTHER_CODE;
  return partition(ownIntervals(slicesOf(data, requests, queue)));
}

/** @type {WeakMap<Data, (PhasePieces|undefined)[]>} */
const SAMPLE_PIECES = new WeakMap();

/**
 * The pieces of all the engine requests of `sample` (what engine_breakdown counts for
 * it), made when first asked for and kept with the data: the band asks every frame.
 * @param {Data} data
 * @param {number} sample
 * @returns {PhasePieces}
 */
export function samplePieces(data, sample) {
  let cache = SAMPLE_PIECES.get(data);
  if (!cache) SAMPLE_PIECES.set(data, (cache = new Array(data.nSamples)));
  let pieces = cache[sample];
  if (!pieces) {
    /** @type {number[]} */
    const requests = [];
    if (data.hasEngine && sample >= 0 && sample < data.nSamples) {
      for (let i = data.spanOff[sample]; i < data.spanOff[sample + 1]; i++) if (isRequestSpan(data, i)) requests.push(i);
    }
    pieces = phasePieces(data, requests);
    cache[sample] = pieces;
  }
  return pieces;
}

/**
 * Seconds per band code of pieces (index 0 unused).
 * @param {Data} data
 * @param {PhasePieces} pieces
 * @returns {Float64Array}
 */
export function secondsByCode(data, pieces) {
  const out = new Float64Array(data.bandPhases.length + 1);
  for (let i = 0; i < pieces.n; i++) out[pieces.code[i]] += pieces.end[i] - pieces.start[i];
  return out;
}

/** @returns {PhasePieces} */
function emptyPieces() {
  return { start: new Float64Array(0), end: new Float64Array(0), code: new Uint8Array(0), span: new Int32Array(0), n: 0 };
}

/**
 * @typedef {Object} Slices
 * @property {number[]} start
 * @property {number[]} end
 * @property {number[]} code band code
 * @property {number[]} span the slice's span (a wait: the slice it lies in)
 * @property {number[]} parent index of the slice it nests in, -1 none
 * @property {number[]} low its window: the span outside the engine its request hangs under
 * @property {number[]} high
 */

/**
 * The slices under `requests` (their engine spans but holders), each with its
 * phase, the slice it nests in and its window; then the unsliced wait after each
 * retraction, as a queue slice in the slice it interrupted.
 * @param {Data} data
 * @param {number[]} requests of one sample
 * @param {number} queue the band code of a retraction's wait
 * @returns {Slices}
 */
function slicesOf(data, requests, queue) {
  const sample = data.spanSample[requests[0]];
  const first = data.spanOff[sample];
  const last = data.spanOff[sample + 1];
  /** @type {Map<number, number[]>} */
  const children = new Map();
  for (let i = first; i < last; i++) {
    const parent = data.spanParent[i];
    if (!(data.spanFlags[i] & F_ENGINE) || parent < first || parent >= last) continue;
    const list = children.get(parent);
    if (list) list.push(i);
    else children.set(parent, [i]);
  }
  /** @type {Slices} */
  const out = { start: [], end: [], code: [], span: [], parent: [], low: [], high: [] };
  /** @type {Map<number, number>} span -> slice */
  const sliceOf = new Map();
  const seen = new Set(requests);
  for (const request of requests) {
    const [low, high] = windowOf(data, request);
    const stack = [request];
    while (stack.length) {
      const holder = /** @type {number} */ (stack.pop());
      for (const child of children.get(holder) ?? []) {
        if (seen.has(child)) continue; // a cycle in a hostile payload
        seen.add(child);
        stack.push(child);
        if (isHolderSpan(data, child)) continue;
        sliceOf.set(child, out.start.length);
        out.start.push(data.spanStart[child]);
        out.end.push(data.spanEnd[child]);
        out.code.push(data.spanBand[child] || OTHER_CODE);
        out.span.push(child);
        out.parent.push(-1);
        out.low.push(low);
        out.high.push(high);
      }
    }
  }
  for (const [span, slice] of sliceOf) out.parent[slice] = sliceOf.get(data.spanParent[span]) ?? -1;
  for (const wait of requeueWaits(data, out, sliceOf, sample)) {
    out.start.push(wait.start);
    out.end.push(wait.end);
    out.code.push(queue);
    out.span.push(out.span[wait.slice]);
    out.parent.push(wait.slice);
    out.low.push(out.low[wait.slice]);
    out.high.push(out.high[wait.slice]);
  }
  return out;
}

/**
 * The window of a request's slices: the span outside the engine it hangs under
 * (its start, and its end when known), else no bound.
 * @param {Data} data
 * @param {number} request
 * @returns {[number, number]}
 */
function windowOf(data, request) {
  const owner = data.spanParent[request];
  if (!(owner >= 0 && owner < data.nSpans) || data.spanFlags[owner] & F_ENGINE) return [-Infinity, Infinity];
  const start = data.spanStart[owner];
  const end = data.spanEnd[owner];
  return [Number.isNaN(start) ? -Infinity : start, Number.isFinite(end) ? end : Infinity];
}

/**
 * SGLang writes no slice for the wait of a retracted request until it runs again:
 * it lies inside the slice the request was put back from, from the `retract` event
 * to that slice's next child. Each such wait with the slice it lies in.
 * @param {Data} data
 * @param {Slices} slices
 * @param {Map<number, number>} sliceOf span -> slice
 * @param {number} sample
 * @returns {{start: number, end: number, slice: number}[]}
 */
function requeueWaits(data, slices, sliceOf, sample) {
  /** @type {{start: number, end: number, slice: number}[]} */
  const out = [];
  const retract = data.names.indexOf(RETRACT_EVENT);
  if (retract < 0) return out;
  for (let ev = data.evOff[sample]; ev < data.evOff[sample + 1]; ev++) {
    if (data.evName[ev] !== retract) continue;
    const slice = sliceOf.get(data.evParent[ev]);
    const ts = data.evTs[ev];
    if (slice === undefined || !Number.isFinite(ts)) continue;
    let next = Infinity;
    for (let child = 0; child < slices.start.length; child++) {
      const start = slices.start[child];
      if (slices.parent[child] === slice && start >= ts && start < next) next = start;
    }
    if (next < Infinity) out.push({ start: ts, end: next, slice });
  }
  return out;
}

/** @typedef {{start: number, end: number, code: number, span: number}} Piece */

/**
 * Each slice's own time as pieces: its interval less the union of its child
 * slices' (each clipped to it), clipped to its window. A slice whose start or end
 * is unknown has none, and its children nest in nothing.
 * @param {Slices} slices
 * @returns {Piece[]}
 */
function ownIntervals(slices) {
  const { start, end, low, high } = slices;
  const n = start.length;
  const finite = (/** @type {number} */ i) => Number.isFinite(start[i]) && Number.isFinite(end[i]);
  /** @type {[number, number][][]} */
  const inner = Array.from({ length: n }, () => []);
  for (let i = 0; i < n; i++) {
    const parent = slices.parent[i];
    if (parent < 0 || !finite(i) || !finite(parent)) continue;
    const from = Math.max(start[i], start[parent]);
    const to = Math.min(end[i], end[parent]);
    if (to > from) inner[parent].push([from, to]);
  }
  /** @type {Piece[]} */
  const out = [];
  for (let i = 0; i < n; i++) {
    if (!finite(i)) continue;
    const add = (/** @type {number} */ from, /** @type {number} */ to) => {
      const clippedFrom = Math.max(from, low[i]);
      const clippedTo = Math.min(to, high[i]);
      if (clippedTo > clippedFrom) out.push({ start: clippedFrom, end: clippedTo, code: slices.code[i], span: slices.span[i] });
    };
    let from = start[i];
    for (const [childFrom, childTo] of inner[i].sort((a, b) => a[0] - b[0])) {
      if (childFrom > from) add(from, childFrom);
      from = Math.max(from, childTo);
    }
    add(from, end[i]);
  }
  return out;
}

/**
 * The union of the own times as disjoint pieces in time order: each instant in the
 * highest band code among the own times holding it (the first in the priority), of
 * the earliest begun of those; neighbours of one code and slice joined.
 * @param {Piece[]} own
 * @returns {PhasePieces}
 */
function partition(own) {
  /** @type {[number, number, number][]} time, +1 start / -1 end, own piece */
  const points = [];
  own.forEach((piece, index) => points.push([piece.start, 1, index], [piece.end, -1, index]));
  points.sort((a, b) => a[0] - b[0]);
  /** @type {Map<number, Set<number>>} code -> own pieces holding the instant, begun first first */
  const holding = new Map();
  const out = { start: /** @type {number[]} */ ([]), end: /** @type {number[]} */ ([]), code: /** @type {number[]} */ ([]), span: /** @type {number[]} */ ([]) };
  for (let k = 0; k < points.length; k++) {
    const [at, step, index] = points[k];
    const code = own[index].code;
    let set = holding.get(code);
    if (!set) holding.set(code, (set = new Set()));
    if (step > 0) set.add(index);
    else set.delete(index);
    const next = k + 1 < points.length ? points[k + 1][0] : at;
    if (!(next > at)) continue;
    let top = 0;
    for (const [held, pieces] of holding) if (pieces.size && held > top) top = held;
    if (!top) continue;
    const span = own[/** @type {number} */ (holding.get(top)?.values().next().value)].span;
    const last = out.start.length - 1;
    if (last >= 0 && out.end[last] === at && out.code[last] === top && out.span[last] === span) out.end[last] = next;
    else {
      out.start.push(at);
      out.end.push(next);
      out.code.push(top);
      out.span.push(span);
    }
  }
  return { start: Float64Array.from(out.start), end: Float64Array.from(out.end), code: Uint8Array.from(out.code), span: Int32Array.from(out.span), n: out.start.length };
}
