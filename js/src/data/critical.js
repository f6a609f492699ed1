// Critical path of one sample over the payload's spans: the same walk as
// answers/critical.py's `_critical_walk` (from the sample's end, the span that
// finished last, then the last to finish before it started, recursively into
// each chosen span's children), so the widget and `analysis.critical_path`
// agree. A span finishes when it and every span under it have ended: a child
// that outlives its parent is what the sample waited for, so the path goes
// through the parent into it.
// Which spans count is `measuredSpans`: a [P]/[D] virtual span stands for its
// phase only while the real `sglang_pd_*` span it mirrors is not in the
// payload (the default payload leaves those out), so a phase counts once;
// when its flag says its segments mirror real spans, they are its children.
// The panel that shows it is panels/critical_panel.js.

import { F_PD_DETAIL, F_PD_SEGMENT_SPANS, F_VIRTUAL, PD_SPAN_PREFIX, nameOf } from "./decode.js";
import VOCABULARIES from "../../../slime_trace_widget/vocabularies.json" with { type: "json" };

/** @typedef {import("./decode.js").Data} Data */

/**
 * Seconds: two times closer than this are one instant (vocabularies.json, as in
 * answers/critical.py): a child ending with its parent is still inside it, and a
 * span finishing within one instant of a limit finished by it.
 */
const EPSILON = VOCABULARIES.same_instant_seconds;

/** @type {WeakMap<Data, Uint8Array>} */
const measuredCache = new WeakMap();

/**
 * Per span, 1 when it carries its own time (analysis.measured_spans): not a
 * PD-detail span, and not a virtual span whose real `sglang_pd_*` twin (same
 * parent and interval) is in the payload too.
 * @param {Data} data
 * @returns {Uint8Array}
 */
export function measuredSpans(data) {
  const cached = measuredCache.get(data);
  if (cached) return cached;
  const out = new Uint8Array(data.nSpans);
  const realPd = data.names.map((name) => name.startsWith(PD_SPAN_PREFIX));
  /** @type {Set<string>} */
  const twins = new Set();
  const key = (/** @type {number} */ span) => `${data.spanParent[span]}:${data.spanStart[span]}:${data.spanEnd[span]}`;
  for (let i = 0; i < data.nSpans; i++) {
    const fl = data.spanFlags[i];
    if (fl & F_PD_DETAIL) continue;
    out[i] = 1;
    if (!(fl & F_VIRTUAL) && realPd[data.spanName[i]] && data.spanParent[i] >= 0) twins.add(key(i));
  }
  if (twins.size) {
    for (let i = 0; i < data.nSpans; i++) if (data.spanFlags[i] & F_VIRTUAL && twins.has(key(i))) out[i] = 0;
  }
  measuredCache.set(data, out);
  return out;
}

/**
 * @typedef {Object} CriticalStep
 * @property {number} span payload span index (of a segment step: the virtual span owning it)
 * @property {number} seg payload segment index, -1 for a span step
 * @property {number} critical seconds it holds the path itself (its time on the path minus its children's)
 */

/**
 * Whether span `span`'s PD segments stand for real spans (F_PD_SEGMENT_SPANS):
 * then, as in Python where the real `sglang_pd_*` segment spans are the
 * phase's children, they are its children here.
 * @param {Data} data
 * @param {number} span
 */
export function segmentsAreChildren(data, span) {
  return (data.spanFlags[span] & (F_VIRTUAL | F_PD_SEGMENT_SPANS)) === (F_VIRTUAL | F_PD_SEGMENT_SPANS);
}

/** @typedef {{node: number, kids: number[], next: number, limit: number, own: number, left: Frame[], leftAt: number, passed: number[]}} Frame a node of the walk (criticalPath) */

/**
 * The critical path of payload sample `sample`, in time order (start, then depth).
 * Nodes of the walk are spans (index i) and, under a measured span whose
 * segments are children (`segmentsAreChildren`), its segments (nSpans + seg).
 * @param {Data} data
 * @param {number} sample
 * @returns {CriticalStep[]}
 */
export function criticalPath(data, sample) {
  const measured = measuredSpans(data);
  const lo = data.spanOff[sample];
  const hi = data.spanOff[sample + 1];
  const nSpans = data.nSpans;
  const startOf = (/** @type {number} */ node) => (node < nSpans ? data.spanStart[node] : data.segStart[node - nSpans]);
  const endOf = (/** @type {number} */ node) => (node < nSpans ? data.spanEnd[node] : data.segEnd[node - nSpans]);
  const depthOf = (/** @type {number} */ node) => (node < nSpans ? data.spanDepth[node] : data.spanDepth[data.segSpan[node - nSpans]] + 1);
  /** @type {Map<number, number[]>} */
  const children = new Map();
  const addChild = (/** @type {number} */ parent, /** @type {number} */ child) => {
    const kids = children.get(parent);
    if (kids) kids.push(child);
    else children.set(parent, [child]);
  };
  /** @type {number[]} */
  const roots = [];
  let last = -Infinity;
  for (let i = lo; i < hi; i++) {
    if (!measured[i]) continue;
    const parent = data.spanParent[i];
    if (parent >= lo && parent < hi && measured[parent]) addChild(parent, i);
    else roots.push(i);
    if (data.spanEnd[i] > last) last = data.spanEnd[i];
    if (segmentsAreChildren(data, i)) {
      for (let position = data.spanSegOff[i]; position < data.spanSegOff[i + 1]; position++) addChild(i, nSpans + data.segOrder[position]);
    }
  }
  const finishes = finishTimes(roots, children, endOf);
  const finishOf = (/** @type {number} */ node) => /** @type {number} */ (finishes.get(node));
  /** @type {CriticalStep[]} */
  const path = [];
  /** @type {number[]} */
  const nodes = [];
  const latestFirst = (/** @type {number[]} */ pool) => pool.slice().sort((left, right) => finishOf(right) - finishOf(left) || startOf(left) - startOf(right));
  // The walk back in time, as critical.py's `_walk_one`: in a node, whatever ran
  // latest up to the limit comes first (the child that finished latest by it, a
  // child left earlier, or the node's own interval, whose seconds are its own); a
  // child wins a tie with its parent. A node with nothing that ran just before the
  // limit (a child started after its parent had ended) is left: its parent goes on
  // from the limit, so a sibling that ran in between is on the path, and takes it
  // up again at the latest time it has left. An explicit stack: a crafted chain
  // thousands deep must not exhaust the JS stack. A frame: the node (-1 for the
  // sample), its children latest finish first, the next one to look at, the
  // limit, its own seconds, the frames left in it and, once left, the latest
  // time it still has; and the children passed over, still running at a limit
  // (positions in kids, a heap: latest start first): when nothing else of the node
  // ran just before a later limit, the one running then is entered, clipped to it.
  /** @type {(node: number, limit: number) => Frame} */
  const frameOf = (node, limit) => ({ node, kids: latestFirst(node < 0 ? roots : children.get(node) || []), next: 0, limit, own: 0, left: [], leftAt: 0, passed: [] });
  /** @type {Frame[]} */
  const stack = roots.length ? [frameOf(-1, last)] : [];
  while (stack.length) {
    const top = stack[stack.length - 1];
    const limit = top.limit;
    while (top.next < top.kids.length && finishOf(top.kids[top.next]) > limit + EPSILON) pushPassed(top, top.next++, startOf); // still running here: passed over
    const childTop = top.next < top.kids.length ? Math.min(finishOf(top.kids[top.next]), limit) : -Infinity;
    /** @type {Frame | null} */
    let resumed = null;
    for (const frame of top.left) if (!resumed || frame.leftAt > resumed.leftAt) resumed = frame;
    const leftTop = resumed ? Math.min(resumed.leftAt, limit) : -Infinity;
    let ownTop = top.node >= 0 ? Math.min(endOf(top.node), limit) : -Infinity;
    if (top.node >= 0 && ownTop <= startOf(top.node)) ownTop = -Infinity;
    const nextTop = Math.max(childTop, leftTop);
    const latest = Math.max(nextTop, ownTop);
    const running = latest < limit - EPSILON ? runningAt(top, limit, startOf) : -1;
    if (running >= 0) {
      // Passed over, and the only thing of the node that ran just before the limit.
      stack.push(frameOf(running, limit));
    } else if (latest === -Infinity) {
      // Nothing left in this node.
      stack.pop();
      if (top.node < 0) break;
      const node = top.node;
      nodes.push(node);
      path.push(node < nSpans ? { span: node, seg: -1, critical: top.own } : { span: data.segSpan[node - nSpans], seg: node - nSpans, critical: top.own });
      stack[stack.length - 1].limit = limit;
    } else if (latest < limit - EPSILON && stack.length > 1) {
      // Nothing of it ran just before the limit: left in its parent.
      stack.pop();
      top.leftAt = latest;
      stack[stack.length - 1].left.push(top);
      stack[stack.length - 1].limit = limit;
    } else if (nextTop >= ownTop - EPSILON) {
      top.limit = nextTop;
      if (resumed && leftTop >= childTop) {
        top.left.splice(top.left.indexOf(resumed), 1);
        resumed.limit = leftTop;
        stack.push(resumed);
      } else {
        stack.push(frameOf(top.kids[top.next++], childTop));
      }
    } else {
      // Its own interval ran latest, down to the next thing or its start.
      const low = Math.max(nextTop, startOf(top.node));
      top.own += ownTop - low;
      top.limit = low;
    }
  }
  const order = nodes.map((_, j) => j).sort((left, right) => startOf(nodes[left]) - startOf(nodes[right]) || depthOf(nodes[left]) - depthOf(nodes[right]));
  return order.map((j) => path[j]);
}

/**
 * Whether passed child at `left` comes off the heap before the one at `right`: the
 * later start first, then the one passed over first (critical.py's heap order).
 * @param {Frame} frame
 * @param {number} left
 * @param {number} right
 * @param {(node: number) => number} startOf
 */
function before(frame, left, right, startOf) {
  const a = startOf(frame.kids[left]);
  const b = startOf(frame.kids[right]);
  return a > b || (a === b && left < right);
}

/**
 * Put child position `position` of `frame` on its heap of children passed over.
 * @param {Frame} frame
 * @param {number} position
 * @param {(node: number) => number} startOf
 */
function pushPassed(frame, position, startOf) {
  const heap = frame.passed;
  let at = heap.length;
  heap.push(position);
  while (at > 0) {
    const up = (at - 1) >> 1;
    if (!before(frame, heap[at], heap[up], startOf)) break;
    [heap[at], heap[up]] = [heap[up], heap[at]];
    at = up;
  }
}

/**
 * The child of `frame` passed over that started latest before `limit` (running
 * then), taken off its heap; -1 when there is none. Those that started at or after
 * the limit never run at a later, lower one: they are dropped.
 * @param {Frame} frame
 * @param {number} limit
 * @param {(node: number) => number} startOf
 */
function runningAt(frame, limit, startOf) {
  const heap = frame.passed;
  while (heap.length) {
    const child = frame.kids[heap[0]];
    const last = /** @type {number} */ (heap.pop());
    if (heap.length) {
      heap[0] = last;
      let at = 0;
      for (;;) {
        const left = 2 * at + 1;
        const right = left + 1;
        let first = at;
        if (left < heap.length && before(frame, heap[left], heap[first], startOf)) first = left;
        if (right < heap.length && before(frame, heap[right], heap[first], startOf)) first = right;
        if (first === at) break;
        [heap[at], heap[first]] = [heap[first], heap[at]];
        at = first;
      }
    }
    if (startOf(child) < limit - EPSILON) return child;
  }
  return -1;
}

/**
 * Per node under `roots`, when it and every node under it had ended: the
 * latest end in its subtree. Children are visited before their parent with an
 * explicit stack, as deep chains need.
 * @param {number[]} roots
 * @param {Map<number, number[]>} children
 * @param {(node: number) => number} endOf
 * @returns {Map<number, number>}
 */
function finishTimes(roots, children, endOf) {
  /** @type {Map<number, number>} */
  const finishes = new Map();
  /** @type {number[]} */
  const preorder = [];
  const pending = roots.slice();
  while (pending.length) {
    const node = /** @type {number} */ (pending.pop());
    preorder.push(node);
    for (const kid of children.get(node) || []) pending.push(kid);
  }
  for (let k = preorder.length - 1; k >= 0; k--) {
    const node = preorder[k];
    let finish = endOf(node);
    for (const kid of children.get(node) || []) finish = Math.max(finish, /** @type {number} */ (finishes.get(kid)));
    finishes.set(node, finish);
  }
  return finishes;
}

/**
 * Start time of a step (its segment's when it is one).
 * @param {Data} data
 * @param {CriticalStep} step
 */
export function stepStart(data, step) {
  return step.seg >= 0 ? data.segStart[step.seg] : data.spanStart[step.span];
}

/**
 * Name of a step: its segment's name, or its span's.
 * @param {Data} data
 * @param {CriticalStep} step
 */
export function stepName(data, step) {
  return nameOf(data, step.seg >= 0 ? data.segName[step.seg] : data.spanName[step.span]);
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
      .map((step, index) => [step.critical, index])
      .sort((left, right) => right[0] - left[0] || left[1] - right[1])
      .slice(0, max)
      .map(([, index]) => index),
  );
  return path.filter((_, index) => keep.has(index));
}

/**
 * The sample's end-to-end latency (seconds), the denominator of each step's share.
 * @param {Data} data
 * @param {number} sample
 */
export function sampleLatency(data, sample) {
  const latency = data.smpEnd[sample] - data.smpStart[sample];
  return Number.isFinite(latency) && latency > 0 ? latency : 0;
}
