// A payload written by the Python encoder (tests/test_payload_contract.py
// regenerates it and fails when it is stale) decodes to what the frames say.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { decodePayload, nameOf, statusOf, sourceOf, sampleRowId, F_OPEN, F_VIRTUAL, F_ERROR, F_PD_SEGMENT_SPANS, CLIP_REASONS, clipReasonOf, EV_UNMATCHED, LINK_KINDS } from "../src/decode.js";
import { groupMembers, endOf } from "../src/links.js";

const golden = JSON.parse(readFileSync(new URL("./fixtures/golden_payload.json", import.meta.url), "utf8"));
const want = golden.expected;
const d = decodePayload(golden.payload);

/** @param {number} t */
const tolerance = (t) => Math.max(1e-3, Math.abs(t) * 1.2e-7);

/**
 * f4 times relative to t0 (the dumps lie days apart: f4 keeps 24 bits); null = NaN.
 * @param {ArrayLike<number>} got
 * @param {(number|null)[]} exp
 * @param {string} what
 */
function closeTimes(got, exp, what) {
  assert.equal(got.length, exp.length, `${what}: length`);
  for (let i = 0; i < exp.length; i++) {
    const e = exp[i];
    if (e === null) assert.ok(Number.isNaN(got[i]), `${what}[${i}] is NaN`);
    else assert.ok(Math.abs(got[i] - e) <= tolerance(e), `${what}[${i}]: ${got[i]} vs ${e}`);
  }
}

test("golden payload: samples", () => {
  const s = want.samples;
  assert.equal(d.nSamples, s.row.length);
  assert.deepEqual(Array.from({ length: d.nSamples }, (_, i) => sampleRowId(d, i)), s.row);
  assert.deepEqual(Array.from({ length: d.nSamples }, (_, i) => statusOf(d, i)), s.status);
  assert.deepEqual(Array.from({ length: d.nSamples }, (_, i) => sourceOf(d, i)), s.source);
  assert.deepEqual(Array.from(d.smpAttempts), s.attempts);
  closeTimes(d.smpStart, s.start, "smp_start");
  closeTimes(d.smpEnd, s.end, "smp_end");
  assert.ok(d.meta.rollouts.length === 3, "three dumps, three rollout labels");
});

test("golden payload: spans, flags, lanes, parents", () => {
  const s = want.spans;
  assert.equal(d.nSpans, s.name.length);
  assert.deepEqual(Array.from(d.spanSample), s.sample);
  assert.deepEqual(Array.from(d.spanName, (n) => nameOf(d, n)), s.name.map((/** @type {string} */ n) => (n === "" ? "(no name)" : n)));
  closeTimes(d.spanStart, s.start, "span_start");
  closeTimes(d.spanEnd, s.end, "span_end");
  assert.deepEqual(Array.from(d.spanLane), s.lane);
  assert.deepEqual(Array.from(d.spanDepth), s.depth);
  assert.deepEqual(Array.from(d.spanAttempt), s.attempt);
  assert.deepEqual(Array.from(d.spanParent), s.parent);
  assert.deepEqual(Array.from(d.spanFlags, (f) => !!(f & F_OPEN)), s.open);
  assert.deepEqual(Array.from(d.spanFlags, (f) => !!(f & F_VIRTUAL)), s.virtual);
  assert.deepEqual(Array.from(d.spanFlags, (f) => !!(f & F_ERROR)), s.error);
  assert.deepEqual(Array.from(d.spanFlags, (f) => !!(f & F_PD_SEGMENT_SPANS)), s.pd_segment_spans);
  const clip = Array.from(d.spanFlags, (f) => CLIP_REASONS[clipReasonOf(f)] || null);
  assert.deepEqual(clip, s.clip_reason.map((/** @type {string|null} */ r) => (r === null ? null : r.replace(/_/g, " "))));
  // Lane ranges cover every span once, in payload order (no reordering).
  let k = 0;
  for (let slot = 0; slot < d.laneBase[d.nSamples]; slot++) {
    for (let i = d.laneSpanOff[slot]; i < d.laneSpanOff[slot + 1]; i++) assert.equal(i, k++);
  }
  assert.equal(k, d.nSpans);
});

test("golden payload: PD segments", () => {
  const got = Array.from(d.segOrder, (g) => [d.segSpan[g], nameOf(d, d.segName[g]), d.segStart[g], d.segEnd[g]]);
  assert.equal(got.length, want.segments.length);
  got.forEach((g, i) => {
    const e = want.segments[i];
    assert.equal(g[0], e[0]);
    assert.equal(g[1], e[1]);
    assert.ok(Math.abs(/** @type {number} */ (g[2]) - e[2]) <= tolerance(e[2]) && Math.abs(/** @type {number} */ (g[3]) - e[3]) <= tolerance(e[3]), `segment ${i}`);
    assert.ok(d.spanFlags[e[0]] & F_VIRTUAL, "segments belong to virtual spans");
  });
});

test("golden payload: events", () => {
  const e = want.events;
  assert.equal(d.nEvents, e.name.length);
  assert.deepEqual(Array.from(d.evSample), e.sample);
  assert.deepEqual(Array.from(d.evName, (n) => nameOf(d, n)), e.name);
  closeTimes(d.evTs, e.ts, "ev_ts");
  assert.deepEqual(Array.from(d.evKind, (k) => (k === EV_UNMATCHED ? "unmatched_end" : "instant")), e.kind);
  assert.deepEqual(Array.from(d.evLane), e.lane);
  assert.deepEqual(Array.from(d.evParent), e.parent);
});

test("golden payload: links (groups re-hubbed among the shown members, retries)", () => {
  const { pairs, groups } = want.links;
  /** @param {number} v */
  const end = (v) => {
    const e = endOf(d, v);
    return e ? `${e.kind}:${e.index}` : "out of range";
  };
  const got = [];
  for (let k = 0; k < d.nLinks; k++) {
    if (LINK_KINDS[d.linkKind[k]] !== "group") got.push([LINK_KINDS[d.linkKind[k]], end(d.linkFrom[k]), end(d.linkTo[k])]);
  }
  assert.deepEqual(got.sort(), pairs);
  for (const members of groups) {
    for (const m of members) assert.deepEqual(groupMembers(d, m), members);
  }
  const grouped = new Set(groups.flat());
  for (let i = 0; i < d.nSpans; i++) if (!grouped.has(i)) assert.deepEqual(groupMembers(d, i), [], `span ${i} is in no group`);
});
