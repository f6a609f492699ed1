// What a live rollout's samples are doing now: running or finished, for how
// long, stragglers (running longer than the finished samples' p90) and stalled
// samples (an open span and no record for `stallAfter` seconds, with the span
// they are stuck in). Pure functions of the decoded columns and the time now.

import { F_OPEN, F_ENGINE, CLIP_SHIFT } from "../data/decode.js";
import { quantile } from "../data/quantile.js";

/** Clip code of an open span drawn to its row's last timestamp (nothing after it says it ended). */
const CLIP_ROW_END = 1;

/**
 * @typedef {Object} LiveStatus
 * @property {number} now seconds relative to t0
 * @property {Uint8Array} running 1 while a span of the sample grows (growingSpans)
 * @property {Float32Array} runningFor seconds since the sample started (running), its duration (finished)
 * @property {Uint8Array} straggler 1: running longer than p90
 * @property {Uint8Array} stalled 1: running, and no record for stallAfter seconds
 * @property {Int32Array} stuckSpan the open span a running sample is in (its deepest, latest), -1 for none
 * @property {Float32Array} quietFor seconds since the sample's last record
 * @property {number} p90 the finished samples' p90 duration (NaN when none finished)
 * @property {number} nRunning
 * @property {number} nStragglers
 * @property {number} nStalled
 */

/**
 * Whether span `i` grows with the clock: open and drawn to its row's last record
 * (an open span clipped by a later sibling or a closed ancestor has evidently
 * stopped, and keeps its clipped end). Engine spans are the engine's, never open here.
 * @param {import("../data/decode.js").Data} data
 * @param {number} i
 */
function grows(data, i) {
  const flags = data.spanFlags[i];
  return (flags & F_OPEN) !== 0 && !(flags & F_ENGINE) && ((flags >> CLIP_SHIFT) & 3) === CLIP_ROW_END;
}

/**
 * The spans that grow with the clock (`grows`).
 * @param {import("../data/decode.js").Data} data
 * @returns {Uint32Array}
 */
export function growingSpans(data) {
  const out = [];
  for (let i = 0; i < data.nSpans; i++) if (grows(data, i)) out.push(i);
  return Uint32Array.from(out);
}

/**
 * The samples' live status at `now`.
 * @param {import("../data/decode.js").Data} data its `smpEnd` is each sample's last record
 * @param {number} now relative seconds
 * @param {number} stallAfter seconds
 * @returns {LiveStatus}
 */
export function liveStatus(data, now, stallAfter) {
  const lastRecord = data.smpEnd;
  const n = data.nSamples;
  const running = new Uint8Array(n);
  const runningFor = new Float32Array(n);
  const straggler = new Uint8Array(n);
  const stalled = new Uint8Array(n);
  const stuckSpan = new Int32Array(n).fill(-1);
  const quietFor = new Float32Array(n);
  const finished = [];
  for (let s = 0; s < n; s++) {
    const start = data.smpStart[s];
    quietFor[s] = now - lastRecord[s];
    // Running while a span grows: one left open under an ancestor that ended (an aborted
    // generation) has stopped, and so has its sample once nothing else is open.
    let best = -1;
    for (let i = data.spanOff[s]; i < data.spanOff[s + 1]; i++) {
      if (!grows(data, i)) continue;
      if (best < 0 || data.spanDepth[i] > data.spanDepth[best] || (data.spanDepth[i] === data.spanDepth[best] && data.spanStart[i] >= data.spanStart[best])) best = i;
    }
    if (best >= 0) {
      running[s] = 1;
      runningFor[s] = now - start;
      stuckSpan[s] = best;
    } else {
      runningFor[s] = lastRecord[s] - start;
      if (Number.isFinite(runningFor[s])) finished.push(runningFor[s]);
    }
  }
  finished.sort((a, b) => a - b);
  const p90 = quantile(finished, 0.9);
  let nRunning = 0;
  let nStragglers = 0;
  let nStalled = 0;
  for (let s = 0; s < n; s++) {
    if (!running[s]) continue;
    nRunning++;
    if (runningFor[s] > p90) {
      straggler[s] = 1;
      nStragglers++;
    }
    if (quietFor[s] > stallAfter) {
      stalled[s] = 1;
      nStalled++;
    }
  }
  return { now, running, runningFor, straggler, stalled, stuckSpan, quietFor, p90, nRunning, nStragglers, nStalled };
}

/**
 * Grow the growing spans to `now`: their ends, their lanes' running max ends
 * (which culling reads) and the data's end. Returns whether anything moved.
 * @param {import("../data/decode.js").Data} data
 * @param {Uint32Array} growing from growingSpans
 * @param {number} now relative seconds
 */
export function growTo(data, growing, now) {
  let moved = false;
  for (const i of growing) {
    if (!(now > data.spanEnd[i])) continue;
    data.spanEnd[i] = now;
    moved = true;
    const sample = data.spanSample[i];
    const slot = data.laneBase[sample] + data.spanLane[i];
    const laneEnd = data.laneSpanOff[slot + 1];
    for (let j = i; j < laneEnd; j++) if (data.spanEndMax[j] < now) data.spanEndMax[j] = now;
  }
  if (now > data.globalEnd) {
    data.globalEnd = now;
    moved = true;
  }
  if (now > data.timesEnd) data.timesEnd = now;
  return moved;
}
