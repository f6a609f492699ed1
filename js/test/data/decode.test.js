import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { decodePayload, toTyped, sampleLabel, detailSpanForSegment, nameOf, statusOf, sourceOf, sampleRowId, LAST_PACKED_ATTEMPT, F_OPEN, F_VIRTUAL, F_ERROR, F_PD_DETAIL, F_PD_SEGMENT_SPANS, CLIP_REASONS, clipReasonOf, EV_UNMATCHED, LINK_KINDS, LK_SPANS, LK_VIRTUAL, PD_PREFILL, PD_DECODE } from "../../src/data/decode.js";
import { groupMembers, endOf } from "../../src/data/links.js";
import { makePayload } from "../helpers/make_payload.js";
import { FATES, finishMarkers, ledgerSegments } from "../../src/data/fates.js";

function small(opts = {}) {
  return makePayload({
    samples: [{ source: "math", reward: 1 }, { source: "deepsearch", reward: 0.5, label: "x" }, {}],
    spans: [
      { sample: 0, start: 0, end: 10, name: "generate_and_rm", lane: 0, depth: 0 },
      { sample: 0, start: 1, end: 4, name: "sglang_generate", lane: 1, depth: 1, parent: 0 },
      { sample: 0, start: 5, end: 9, name: "tool_call", lane: 1, depth: 1, parent: 0 },
      { sample: 1, start: 2, end: 8, name: "generate_and_rm", lane: 0, depth: 0 },
      { sample: 1, start: 3, end: 3.5, name: "sglang_generate", lane: 1, depth: 1, parent: 3 },
    ],
    events: [
      { sample: 0, ts: 4.5, name: "tool_parse", lane: 1, parent: 0 },
      { sample: 1, ts: 7, name: "tool_call", lane: 0, kind: 1 },
    ],
    ...opts,
  });
}

test("toTyped accepts DataView, ArrayBuffer, Uint8Array, base64, arrays", () => {
  const f = new Float32Array([1.5, -2, NaN]);
  const bytes = new Uint8Array(f.buffer);
  for (const input of [new DataView(f.buffer), f.buffer, new Uint8Array(bytes), Buffer.from(bytes).toString("base64"), [1.5, -2, null]]) {
    const out = toTyped(input, "f4");
    assert.ok(out instanceof Float32Array);
    assert.equal(out.length, 3);
    assert.equal(out[0], 1.5);
    assert.equal(out[1], -2);
    assert.ok(Number.isNaN(out[2]));
  }
});

test("toTyped copies unaligned views and keeps aligned ones zero-copy", () => {
  const big = new ArrayBuffer(64);
  const src = new Uint32Array([7, 8, 9]);
  new Uint8Array(big, 3, 12).set(new Uint8Array(src.buffer));
  const dv = new DataView(big, 3, 12);
  const out = toTyped(dv, "u4");
  assert.deepEqual(Array.from(out), [7, 8, 9]);
  assert.notEqual(out.buffer, big);
  const aligned = toTyped(new DataView(big, 8, 8), "u4");
  assert.equal(aligned.buffer, big);
  const i4 = new Int32Array([-5, 6]);
  const big2 = new ArrayBuffer(20);
  new Uint8Array(big2, 1, 8).set(new Uint8Array(i4.buffer));
  assert.deepEqual(Array.from(toTyped(new DataView(big2, 1, 8), "i4")), [-5, 6]);
  const f8 = new Float64Array([Math.PI]);
  const big3 = new ArrayBuffer(16);
  new Uint8Array(big3, 5, 8).set(new Uint8Array(f8.buffer));
  assert.equal(toTyped(new DataView(big3, 5, 8), "f8")[0], Math.PI);
});

for (const mode of ["aligned", "unaligned", "arraybuffer", "uint8", "base64"]) {
  test(`decodePayload columns (${mode})`, () => {
    const { payload } = small(mode === "unaligned" ? { unaligned: true } : mode === "aligned" ? {} : { as: mode });
    const d = decodePayload(payload);
    assert.equal(d.nSamples, 3);
    assert.equal(d.nSpans, 5);
    assert.equal(d.nEvents, 2);
    assert.deepEqual(Array.from(d.spanOff), [0, 3, 5, 5]);
    assert.deepEqual(Array.from(d.evOff), [0, 1, 2, 2]);
    assert.deepEqual(Array.from(d.nLanes), [2, 2, 0]);
    assert.deepEqual(Array.from(d.laneBase), [0, 2, 4, 4]);
    assert.deepEqual(Array.from(d.laneSpanOff), [0, 1, 3, 4, 5]);
    assert.deepEqual(Array.from(d.laneEvOff), [0, 0, 1, 2, 2]);
    assert.equal(d.smpReward[1], 0.5);
    assert.ok(Number.isNaN(d.smpReward[2]));
    assert.equal(d.spanParent[1], 0);
    assert.equal(d.names[d.spanName[2]], "tool_call");
    assert.equal(d.globalStart, 0);
    assert.equal(d.globalEnd, 10);
    assert.equal(d.laneKind[0], LK_SPANS);
  });
}

test("running max of ends per lane", () => {
  const { payload } = makePayload({
    samples: [{}],
    spans: [
      { sample: 0, start: 0, end: 100, name: "a" },
      { sample: 0, start: 1, end: 2, name: "b" },
      { sample: 0, start: 3, end: 200, name: "c" },
      { sample: 0, start: 0, end: 1, name: "d", lane: 1 },
    ],
  });
  const d = decodePayload(payload);
  assert.deepEqual(Array.from(d.spanEndMax), [100, 100, 200, 1]);
});

// Two samples five days apart, each with a 0.5 s and a 3 ms span and an event: the
// spread of a combined view of two dumps (or of one stray clock in a dump).
const FAR = 5 * 86400 + 0.123456;
function farApart() {
  return makePayload({
    samples: [{ base: 0.25 }, { base: FAR }],
    spans: [
      { sample: 0, start: 0.25, end: 0.75, name: "step" },
      { sample: 0, start: 1.25, end: 1.253, name: "pd", lane: 1 },
      { sample: 1, start: FAR, end: FAR + 0.5, name: "step" },
      { sample: 1, start: FAR + 1, end: FAR + 1.003, name: "pd", lane: 1 },
    ],
    segs: [{ span: 3, start: FAR + 1.001, end: FAR + 1.002, name: "decode_forward" }],
    events: [{ sample: 1, ts: FAR + 0.75, name: "mark" }],
  });
}

test("item times count from their sample's base: exact durations however far apart the samples lie", () => {
  const { payload } = farApart();
  // what travels is small float32 offsets; float32 of FAR itself would be off by 16 ms
  assert.ok(Math.abs(Math.fround(FAR) - FAR) > 1e-3);
  const d = decodePayload(payload);
  assert.ok(d.spanStart instanceof Float64Array && d.evTs instanceof Float64Array && d.segStart instanceof Float64Array);
  const close = (/** @type {number} */ got, /** @type {number} */ want, /** @type {string} */ what) => assert.ok(Math.abs(got - want) <= 1e-6 * Math.max(1, Math.abs(want - FAR)), `${what}: ${got} vs ${want}`);
  close(d.spanStart[2], FAR, "start");
  close(d.spanEnd[1] - d.spanStart[1], 0.003, "3 ms in the first sample");
  close(d.spanEnd[2] - d.spanStart[2], 0.5, "0.5 s in the far sample");
  close(d.spanEnd[3] - d.spanStart[3], 0.003, "3 ms in the far sample");
  close(d.segEnd[0] - d.segStart[0], 0.001, "a segment in the far sample");
  close(d.segStart[0], FAR + 1.001, "segment start");
  close(d.evTs[0], FAR + 0.75, "event");
  assert.equal(d.smpBase[1], FAR);
  assert.ok(d.spanEndMax instanceof Float64Array);
});

test("a payload without smp_base (an older encoder) reads its times from t0", () => {
  const { payload } = small();
  delete payload.buffers.smp_base;
  delete payload.meta.columns.smp_base;
  // older payloads sent their sample times as float32: meta.columns says so
  payload.meta.columns.smp_start = "f4";
  payload.buffers.smp_start = new DataView(Float32Array.from([0, 2, NaN]).buffer);
  const d = decodePayload(payload);
  assert.deepEqual(Array.from(d.smpBase), [0, 0, 0]);
  assert.ok(d.smpStart instanceof Float64Array);
  assert.deepEqual(Array.from(d.smpStart.subarray(0, 2)), [0, 2]);
  assert.deepEqual(Array.from(d.spanStart), [0, 1, 5, 2, 3]);
  assert.deepEqual(Array.from(d.evTs), [4.5, 7]);
});

test("an item of no sample, or a segment of no span, counts from 0", () => {
  const { payload } = farApart();
  const spanSample = new Uint32Array([0, 0, 1, 7]);
  payload.buffers.span_sample = new DataView(spanSample.buffer);
  payload.buffers.seg_span = new DataView(new Uint32Array([9]).buffer);
  const d = decodePayload(payload);
  assert.ok(Math.abs(d.spanEnd[3] - d.spanStart[3] - 0.003) < 1e-6);
  assert.ok(Math.abs(d.spanStart[3] - 1) < 1e-6, "offset from 0, not from another sample's base");
  assert.ok(Math.abs(d.segStart[0] - 1.001) < 1e-6);
});

test("the loader's warnings: positive counts by kind, nothing else", () => {
  const { payload } = small({ meta: { warnings: { bad_ts: 2, parent_cycle: 1, zero: 0, text: "3", nan: NaN } } });
  const d = decodePayload(payload);
  assert.deepEqual({ ...d.meta.warnings }, { bad_ts: 2, parent_cycle: 1 });
  assert.deepEqual({ ...decodePayload(small().payload).meta.warnings }, {});
  assert.deepEqual({ ...decodePayload(small({ meta: { warnings: [1, 2] } }).payload).meta.warnings }, {});
});

test("empty and missing payloads decode to nothing", () => {
  for (const p of [null, undefined, {}, { meta: {}, buffers: {} }]) {
    const d = decodePayload(p);
    assert.equal(d.nSamples, 0);
    assert.equal(d.nSpans, 0);
    assert.ok(d.globalEnd > d.globalStart);
  }
});

test("unsorted spans are left in payload order with a warning (the encoder sorts)", () => {
  const { payload } = makePayload({
    samples: [{}, {}],
    spans: [
      { sample: 1, start: 5, end: 6, name: "x" },
      { sample: 0, start: 2, end: 3, name: "y", parent: 2 },
      { sample: 0, start: 1, end: 4, name: "z" },
    ],
    sort: false,
  });
  /** @type {string[]} */
  const warnings = [];
  const warn = console.warn;
  console.warn = (/** @type {string} */ m) => warnings.push(m);
  try {
    const d = decodePayload(payload);
    // payload index i is span i: selection and attribute requests use it as is.
    assert.deepEqual(Array.from(d.spanSample), [1, 0, 0]);
    assert.equal(d.names[d.spanName[1]], "y");
    assert.equal(d.spanParent[1], 2);
  } finally {
    console.warn = warn;
  }
  assert.equal(warnings.length, 1);
  assert.match(warnings[0], /not sorted/);
});

test("a virtual span's phase is its lane suffix, whatever its name says", () => {
  const { payload, spanNew } = makePayload({
    samples: [{}],
    spans: [
      { sample: 0, start: 0, end: 10, name: "decode_step", lane: 0, depth: 0 },
      { sample: 0, start: 0, end: 4, name: "decode_step [P]", lane: 1, depth: 1, flags: F_VIRTUAL, parent: 0 },
      { sample: 0, start: 4, end: 10, name: "decode_step [D]", lane: 2, depth: 1, flags: F_VIRTUAL, parent: 0 },
      { sample: 0, start: 0, end: 10, name: "prefill [d]", lane: 3, depth: 1, flags: F_VIRTUAL, parent: 0 },
    ],
  });
  const d = decodePayload(payload);
  assert.deepEqual([1, 2, 3].map((k) => d.spanPd[spanNew[k]]), [PD_PREFILL, PD_DECODE, PD_DECODE]);
});

test("labels, PD phases, segments and detail-span matching", () => {
  const { payload, spanNew } = makePayload({
    samples: [{ source: "deepsearch", sample_index: 76 }],
    spans: [
      { sample: 0, start: 0, end: 10, name: "sglang_generate", lane: 0, depth: 0 },
      { sample: 0, start: 0, end: 4, name: "[P]", lane: 1, depth: 1, flags: F_VIRTUAL, parent: 0 },
      { sample: 0, start: 4, end: 10, name: "[D]", lane: 2, depth: 1, flags: F_VIRTUAL, parent: 0 },
      { sample: 0, start: 0, end: 4, name: "sglang_pd_prefill", lane: 1, depth: 1, flags: F_PD_DETAIL, parent: 0 },
      { sample: 0, start: 1, end: 4, name: "sglang_pd_prefill_forward", lane: 1, depth: 2, flags: F_PD_DETAIL, parent: 3 },
    ],
    segs: [
      { span: 1, start: 1, end: 4, name: "prefill_forward" },
      { span: 1, start: 0, end: 1, name: "prefill_bootstrap_queue" },
      { span: 2, start: 4, end: 10, name: "decode_forward" },
    ],
  });
  const d = decodePayload(payload);
  assert.equal(sampleLabel(d, 0), "#76 | deepsearch");
  const p = spanNew[1];
  const dd = spanNew[2];
  assert.equal(d.spanPd[p], PD_PREFILL);
  assert.equal(d.spanPd[dd], PD_DECODE);
  assert.ok(d.hasPd);
  const segsOfP = Array.from(d.segOrder.subarray(d.spanSegOff[p], d.spanSegOff[p + 1]));
  assert.deepEqual(segsOfP.map((g) => d.segStart[g]), [0, 1]);
  assert.equal(detailSpanForSegment(d, 0), spanNew[4]);
  // No detail span for the decode segment: falls back to the virtual span.
  assert.equal(detailSpanForSegment(d, 2), dd);
  assert.ok(d.laneKind[d.laneBase[0] + 1] & LK_VIRTUAL);
});

test("row label adds rollout when several and handles null ids", () => {
  const { payload } = makePayload({
    samples: [{ sample_index: null, row: 9, rollout: 1, source: "s" }],
    meta: { rollouts: ["rollout 0", "rollout 1"] },
  });
  const d = decodePayload(payload);
  assert.equal(sampleLabel(d, 0), "row 9 | s | rollout 1");
});

// A payload written by the Python encoder (tests/test_payload_contract.py
// regenerates it and fails when it is stale) decodes to what the frames say.

const golden = JSON.parse(readFileSync(new URL("../fixtures/golden_payload.json", import.meta.url), "utf8"));
const want = golden.expected;
const d = decodePayload(golden.payload);

/**
 * How far a decoded time may be from the frames' (rounded to 1 us in the fixture): the
 * dumps lie days apart, but each item travels as float32 seconds from its sample's
 * float64 base, so it keeps float32's precision over its sample, a few microseconds.
 * @param {number} _t
 */
const tolerance = (_t) => 2e-5;

/**
 * Times relative to t0; null = NaN.
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
  assert.deepEqual({ ...d.meta.warnings }, want.warnings);
  assert.ok(d.hasFates);
  assert.deepEqual(Array.from(d.smpFate, (code) => FATES[code]), s.fate);
});

test("golden payload: the ledger per rollout and the 90%-finished instants (signal_ledger, tail_price)", () => {
  const entries = d.meta.ledger.entries;
  assert.deepEqual(entries.map((entry) => entry.rollout), want.ledger.map((/** @type {any} */ exp) => exp.rollout));
  entries.forEach((entry, k) => {
    const exp = want.ledger[k];
    assert.deepEqual(entry.samples, exp.samples);
    entry.seconds.forEach((seconds, fate) => assert.ok(Math.abs(seconds - exp.seconds[fate]) < 1e-6, `seconds ${k} ${FATES[fate]}`));
    assert.ok(Math.abs(entry.finished90 - exp.finished_90) < 1e-6);
    // the bar's parts are the fates with time, as wide as their seconds
    const total = exp.seconds.reduce((/** @type {number} */ sum, /** @type {number} */ value) => sum + value, 0);
    for (const seg of ledgerSegments(entry)) assert.ok(Math.abs(seg.to - seg.from - exp.seconds[seg.fate] / total) < 1e-6);
  });
  const markers = finishMarkers(d.meta.ledger, d.meta.t0);
  assert.equal(markers.length, want.ledger.length);
  markers.forEach((marker, k) => assert.ok(Math.abs(marker.time - want.ledger[k].marker_time) < 1e-5, `marker ${k}: ${marker.time} vs ${want.ledger[k].marker_time}`));
});

test("golden payload: spans, flags, lanes, parents", () => {
  const s = want.spans;
  assert.equal(d.nSpans, s.name.length);
  assert.deepEqual(Array.from(d.spanSample), s.sample);
  assert.deepEqual(Array.from(d.spanName, (n) => nameOf(d, n)), s.name.map((/** @type {string} */ n) => (n === "" ? "(no name)" : n)));
  closeTimes(d.spanStart, s.start, "span_start");
  closeTimes(d.spanEnd, s.end, "span_end");
  // durations to a few microseconds (float32 over a sample of half a minute), though the
  // dumps lie days apart (float32 from t0 would be 62 ms apart there)
  s.duration.forEach((/** @type {number|null} */ exp, /** @type {number} */ i) => {
    if (exp === null) return;
    const got = d.spanEnd[i] - d.spanStart[i];
    assert.ok(Math.abs(got - exp) <= 8e-6, `duration ${i}: ${got} vs ${exp}`);
  });
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

test("golden payload: engine load (the scrape before the frames' time kept, the one after left out)", () => {
  const { engines, series } = want.load;
  assert.deepEqual(d.meta.load_engines, engines);
  assert.deepEqual(d.load.engines, engines);
  assert.equal(d.load.series.length, series.length);
  d.load.series.forEach((got, i) => {
    const exp = series[i];
    assert.equal(d.load.engines[got.engine], exp.engine);
    assert.equal(got.track, exp.track);
    closeTimes(got.ts, exp.ts, `load ts ${exp.engine} ${exp.track}`);
    assert.deepEqual(Array.from(got.value), exp.value);
  });
});

test("a row label isolates a source holding bidirectional controls, and only that", () => {
  const { payload } = makePayload({
    samples: [{ source: "\u202eevil", sample_index: 1 }, { source: "plain", sample_index: 2 }],
    spans: [],
  });
  const d = decodePayload(payload);
  assert.equal(sampleLabel(d, 0), "#1 | \u2068\u202eevil\u2069");
  assert.equal(sampleLabel(d, 1), "#2 | plain");
});

test("attempts past the last packed one are offered as that one, and later", () => {
  const past = small({ samples: [{ attempts: 300 }, {}, {}], spans: [{ sample: 0, start: 0, end: 1, name: "a", attempt: 255 }] });
  const pastData = decodePayload(past.payload);
  assert.equal(LAST_PACKED_ATTEMPT, 255);
  assert.equal(pastData.maxAttempt, 255);
  assert.equal(pastData.attemptsPastLast, true);
  const within = decodePayload(small({ samples: [{ attempts: 3 }, {}, {}] }).payload);
  assert.equal(within.maxAttempt, 2);
  assert.equal(within.attemptsPastLast, false);
});

test("a dump of one instant lasts 0 s, though its drawn range is widened", () => {
  const instant = decodePayload(small({ samples: [{ start: 3, end: 3 }], spans: [{ sample: 0, start: 3, end: 3, name: "a" }], events: [] }).payload);
  assert.equal(instant.timesEnd - instant.timesStart, 0);
  assert.equal(instant.globalEnd - instant.globalStart, 1);
  const spread = decodePayload(small().payload);
  assert.equal(spread.timesStart, spread.globalStart);
  assert.equal(spread.timesEnd, spread.globalEnd);
  assert.ok(spread.timesEnd - spread.timesStart > 0);
});
