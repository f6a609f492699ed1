// Critical path of one sample over the payload's spans: the same walk as
// analysis._critical_positions (from the sample's end, the span that finished
// last, then the last to finish before it started, recursively into each
// chosen span's children), so the widget and `analysis.critical_path` agree.
// Which spans count is `measuredSpans`: a [P]/[D] virtual span stands for its
// phase only while the real `sglang_pd_*` span it mirrors is not in the
// payload (the default payload leaves those out), so a phase counts once;
// when its flag says its segments mirror real spans, they are its children.
// The panel that shows it is panels/critical_panel.js.

import { F_PD_DETAIL, F_PD_SEGMENT_SPANS, F_VIRTUAL, nameOf } from "./decode.js";

/** @typedef {import("./decode.js").Data} Data */

/** Prefix of the real PD span names (schema.PD_SPAN_PREFIX). */
const PD_PREFIX = "sglang_pd_";
/** Seconds: a child ending exactly with its parent is still inside it (as in analysis.py). */
const EPSILON = 1e-9;

/** @type {WeakMap<Data, Uint8Array>} */
const measuredCache = new WeakMap();

/**
 * Per span, 1 when it carries its own time (analysis.measured_spans): not a
 * PD-detail span, and not a virtual span whose real `sglang_pd_*` twin (same
 * parent and interval) is in the payload too.
 * @param {Data} d
 * @returns {Uint8Array}
 */
export function measuredSpans(d) {
  const cached = measuredCache.get(d);
  if (cached) return cached;
  const out = new Uint8Array(d.nSpans);
  const realPd = d.names.map((n) => n.startsWith(PD_PREFIX));
  /** @type {Set<string>} */
  const twins = new Set();
  const key = (/** @type {number} */ i) => `${d.spanParent[i]}:${d.spanStart[i]}:${d.spanEnd[i]}`;
  for (let i = 0; i < d.nSpans; i++) {
    const fl = d.spanFlags[i];
    if (fl & F_PD_DETAIL) continue;
    out[i] = 1;
    if (!(fl & F_VIRTUAL) && realPd[d.spanName[i]] && d.spanParent[i] >= 0) twins.add(key(i));
  }
  if (twins.size) {
    for (let i = 0; i < d.nSpans; i++) if (d.spanFlags[i] & F_VIRTUAL && twins.has(key(i))) out[i] = 0;
  }
  measuredCache.set(d, out);
  return out;
}

/**
 * @typedef {Object} CriticalStep
 * @property {number} span payload span index (of a segment step: the virtual span owning it)
 * @property {number} seg payload segment index, -1 for a span step
 * @property {number} critical seconds it holds the path itself (its time on the path minus its children's)
 */

/**
 * Whether span `i`'s PD segments stand for real spans (F_PD_SEGMENT_SPANS):
 * then, as in Python where the real `sglang_pd_*` segment spans are the
 * phase's children, they are its children here.
 * @param {Data} d
 * @param {number} i
 */
export function segmentsAreChildren(d, i) {
  return (d.spanFlags[i] & (F_VIRTUAL | F_PD_SEGMENT_SPANS)) === (F_VIRTUAL | F_PD_SEGMENT_SPANS);
}

/**
 * The critical path of payload sample `s`, in time order (start, then depth).
 * Nodes of the walk are spans (index i) and, under a measured span whose
 * segments are children (`segmentsAreChildren`), its segments (nSpans + seg).
 * @param {Data} d
 * @param {number} s
 * @returns {CriticalStep[]}
 */
export function criticalPath(d, s) {
  const measured = measuredSpans(d);
  const lo = d.spanOff[s];
  const hi = d.spanOff[s + 1];
  const n = d.nSpans;
  const startOf = (/** @type {number} */ k) => (k < n ? d.spanStart[k] : d.segStart[k - n]);
  const endOf = (/** @type {number} */ k) => (k < n ? d.spanEnd[k] : d.segEnd[k - n]);
  const depthOf = (/** @type {number} */ k) => (k < n ? d.spanDepth[k] : d.spanDepth[d.segSpan[k - n]] + 1);
  /** @type {Map<number, number[]>} */
  const children = new Map();
  const addChild = (/** @type {number} */ p, /** @type {number} */ k) => {
    const kids = children.get(p);
    if (kids) kids.push(k);
    else children.set(p, [k]);
  };
  /** @type {number[]} */
  const roots = [];
  let last = -Infinity;
  for (let i = lo; i < hi; i++) {
    if (!measured[i]) continue;
    const p = d.spanParent[i];
    if (p >= lo && p < hi && measured[p]) addChild(p, i);
    else roots.push(i);
    if (d.spanEnd[i] > last) last = d.spanEnd[i];
    if (segmentsAreChildren(d, i)) {
      for (let c = d.spanSegOff[i]; c < d.spanSegOff[i + 1]; c++) addChild(i, n + d.segOrder[c]);
    }
  }
  /** @type {CriticalStep[]} */
  const path = [];
  /** @type {number[]} */
  const nodes = [];
  const latestFirst = (/** @type {number[]} */ pool) => pool.slice().sort((a, b) => endOf(b) - endOf(a) || startOf(a) - startOf(b));
  // The walk with an explicit stack (a crafted chain thousands deep must not
  // exhaust the JS stack). A frame: the node (-1 for the sample), its children
  // latest end first, the next one to look at, the limit, and the time its own
  // path covers so far.
  /** @type {{node: number, kids: number[], next: number, limit: number, covered: number}[]} */
  const stack = roots.length ? [{ node: -1, kids: latestFirst(roots), next: 0, limit: last, covered: 0 }] : [];
  while (stack.length) {
    const top = stack[stack.length - 1];
    let chosen = -1;
    while (top.next < top.kids.length) {
      const k = top.kids[top.next++];
      if (endOf(k) <= top.limit + EPSILON) {
        chosen = k; // else still running here: not what the path waited for
        break;
      }
    }
    if (chosen >= 0) {
      stack.push({ node: chosen, kids: latestFirst(children.get(chosen) || []), next: 0, limit: endOf(chosen), covered: 0 });
      continue;
    }
    stack.pop();
    if (top.node < 0) break;
    const length = Math.max(endOf(top.node) - startOf(top.node), 0);
    const k = top.node;
    nodes.push(k);
    path.push(k < n ? { span: k, seg: -1, critical: Math.max(length - top.covered, 0) } : { span: d.segSpan[k - n], seg: k - n, critical: Math.max(length - top.covered, 0) });
    const parent = stack[stack.length - 1];
    parent.covered += length;
    parent.limit = startOf(k);
  }
  const order = nodes.map((_, j) => j).sort((a, b) => startOf(nodes[a]) - startOf(nodes[b]) || depthOf(nodes[a]) - depthOf(nodes[b]));
  return order.map((j) => path[j]);
}

/**
 * Start time of a step (its segment's when it is one).
 * @param {Data} d
 * @param {CriticalStep} step
 */
export function stepStart(d, step) {
  return step.seg >= 0 ? d.segStart[step.seg] : d.spanStart[step.span];
}

/**
 * Name of a step: its segment's name, or its span's.
 * @param {Data} d
 * @param {CriticalStep} step
 */
export function stepName(d, step) {
  return nameOf(d, step.seg >= 0 ? d.segName[step.seg] : d.spanName[step.span]);
}

/** Steps the side panel lists at most: a DOM row each. */
export const MAX_LISTED = 200;

/**
 * The steps the panel lists: all of them, or the `max` holding the most
 * critical seconds, still in time order.
 * @param {CriticalStep[]} path
 * @param {number} max
 */
export function listedSteps(path, max) {
  if (path.length <= max) return path;
  const keep = new Set(
    path
      .map((step, k) => [step.critical, k])
      .sort((a, b) => b[0] - a[0] || a[1] - b[1])
      .slice(0, max)
      .map(([, k]) => k),
  );
  return path.filter((_, k) => keep.has(k));
}

/**
 * The sample's end-to-end latency (seconds), the denominator of each step's share.
 * @param {Data} d
 * @param {number} s
 */
export function sampleLatency(d, s) {
  const t = d.smpEnd[s] - d.smpStart[s];
  return Number.isFinite(t) && t > 0 ? t : 0;
}
