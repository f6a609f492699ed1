// Critical path over payload spans (critical.js) on hand-built payloads whose
// answer is known, and on the payloads of tests/answers/test_views_fixture.py,
// where it must equal analysis.critical_path.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { decodePayload, F_OPEN, F_VIRTUAL, F_PD_DETAIL, F_PD_SEGMENT_SPANS } from "../../src/data/decode.js";
import { criticalPath, measuredSpans, sampleLatency, listedSteps, stepName, stepStart } from "../../src/data/critical.js";
import { makePayload } from "../helpers/make_payload.js";

const close = (/** @type {number} */ a, /** @type {number} */ b, tol = 1e-4) => Math.abs(a - b) <= tol;

/**
 * Names and exclusive seconds of sample `s`'s path.
 * @param {any} d
 * @param {number} s
 */
function named(d, s) {
  return criticalPath(d, s).map((p) => [d.names[d.spanName[p.span]], Math.round(p.critical * 1e4) / 1e4]);
}

// The agent of tests/answers/test_critical_and_flame.py, as the default payload
// sends it: PD phases as virtual [P]/[D] spans under generate.
const AGENT = [
  { sample: 0, start: 0, end: 10, name: "rollout", depth: 0 },
  { sample: 0, start: 0, end: 4, name: "generate", depth: 1, parent: 0 },
  { sample: 0, start: 0, end: 1, name: "generate [P]", depth: 2, parent: 1, flags: F_VIRTUAL, lane: 2 },
  { sample: 0, start: 1, end: 4, name: "generate [D]", depth: 2, parent: 1, flags: F_VIRTUAL, lane: 3 },
  { sample: 0, start: 1, end: 3, name: "log", depth: 1, parent: 0, lane: 1 },
  { sample: 0, start: 4, end: 7, name: "tool", depth: 1, parent: 0, lane: 1 },
  { sample: 0, start: 4, end: 9, name: "tool", depth: 1, parent: 0, lane: 4 },
  { sample: 0, start: 9, end: 10, name: "reward", depth: 1, parent: 0, lane: 1 },
];

test("concurrent children: the one that finished last holds the path, the earlier ones are off it", () => {
  const d = decodePayload(makePayload({ samples: [{}], spans: AGENT }).payload);
  assert.deepEqual(named(d, 0), [
    ["rollout", 0],
    ["generate", 0],
    ["generate [P]", 1],
    ["generate [D]", 3],
    ["tool", 5],
    ["reward", 1],
  ]);
  const path = criticalPath(d, 0);
  const total = path.reduce((a, p) => a + p.critical, 0);
  assert.ok(close(total, sampleLatency(d, 0)), "the exclusive seconds add up to the latency");
  // The tool that ended at 7 (concurrent with the one ending at 9) is not on it.
  assert.ok(!path.some((p) => d.spanEnd[p.span] === 7));
});

test("overlapping top-level spans: the one still running when the last started holds the time before", () => {
  const spans = [
    { sample: 0, start: 0, end: 3.7, name: "tool", depth: 0 },
    { sample: 0, start: 1.6, end: 6.5, name: "reward", depth: 0, lane: 1 },
    { sample: 0, start: 7, end: 8, name: "log", depth: 0 },
    { sample: 0, start: 7.5, end: 9, name: "setup", depth: 0, lane: 1 },
  ];
  const d = decodePayload(makePayload({ samples: [{}], spans }).payload);
  assert.deepEqual(named(d, 0), [
    ["tool", 1.6],
    ["reward", 4.9],
    ["log", 0.5],
    ["setup", 1.5],
  ]);
  const total = criticalPath(d, 0).reduce((a, p) => a + p.critical, 0);
  assert.ok(close(total, sampleLatency(d, 0) - 0.5), "the latency less the half second no span ran");
});

test("a child running when its parent ended holds the time up to a later sibling", () => {
  const spans = [
    { sample: 0, start: 0, end: 3, name: "parent", depth: 0 },
    { sample: 0, start: 2, end: 6, name: "mid", depth: 1, parent: 0, lane: 1 },
    { sample: 0, start: 5, end: 8, name: "late", depth: 1, parent: 0, lane: 2 },
  ];
  const d = decodePayload(makePayload({ samples: [{}], spans }).payload);
  assert.deepEqual(named(d, 0), [
    ["parent", 2],
    ["mid", 3],
    ["late", 3],
  ]);
});

test("a child outliving its parent holds the time past the parent's end", () => {
  // rollout 0-5 > generate 0-4 > (tool 1-2, reward 3-9): the reward decides the sample's end.
  const d = decodePayload(
    makePayload({
      samples: [{}],
      spans: [
        { sample: 0, start: 0, end: 5, name: "rollout", depth: 0 },
        { sample: 0, start: 0, end: 4, name: "generate", depth: 1, parent: 0 },
        { sample: 0, start: 1, end: 2, name: "tool", depth: 2, parent: 1 },
        { sample: 0, start: 3, end: 9, name: "reward", depth: 2, parent: 1, lane: 3 },
      ],
    }).payload,
  );
  assert.deepEqual(named(d, 0), [
    ["rollout", 0],
    ["generate", 2],
    ["tool", 1],
    ["reward", 6],
  ]);
  assert.ok(close(criticalPath(d, 0).reduce((a, p) => a + p.critical, 0), 9), "the path explains the 9 s the sample took");
});

test("a child outliving its parent by less than one instant is no gap (vocabularies.json)", () => {
  // rollout 0-20 > (generate 0-17 > decode 5-17.0005, reward 17-20): the decode step's end
  // was stamped after the generation's, within one instant of the reward's start.
  const d = decodePayload(
    makePayload({
      samples: [{}],
      spans: [
        { sample: 0, start: 0, end: 20, name: "rollout", depth: 0 },
        { sample: 0, start: 0, end: 17, name: "generate", depth: 1, parent: 0 },
        { sample: 0, start: 5, end: 17.0005, name: "decode", depth: 2, parent: 1 },
        { sample: 0, start: 17, end: 20, name: "reward", depth: 1, parent: 0, lane: 1 },
      ],
    }).payload,
  );
  const held = Object.fromEntries(named(d, 0));
  assert.equal(held.rollout, 0, "the rollout did nothing itself");
  assert.ok(close(held.generate + held.decode, 17, 1e-3));
  assert.equal(held.reward, 3);
});

test("an open span counts to its display end; a retry follows the failed attempt", () => {
  const d = decodePayload(
    makePayload({
      samples: [{}],
      spans: [
        { sample: 0, start: 0, end: 2, name: "generate", attempt: 0 },
        { sample: 0, start: 2, end: 6, name: "generate", attempt: 1, flags: F_OPEN },
        { sample: 0, start: 2.5, end: 3, name: "tool", attempt: 1, parent: 1, depth: 1, lane: 1 },
        { sample: 0, start: 3, end: 5, name: "tool", attempt: 1, parent: 1, depth: 1, lane: 1 },
        { sample: 0, start: 1, end: 5.5, name: "log", lane: 2 },
      ],
    }).payload,
  );
  assert.deepEqual(named(d, 0), [
    ["generate", 2],
    ["generate", 1.5],
    ["tool", 0.5],
    ["tool", 2],
  ]);
});

test("a [P]/[D] span counts once: its real sglang_pd_* twin in the payload replaces it", () => {
  // Both sent (a span filter selected the real spans): the virtual twins drop out.
  const spans = [
    { sample: 0, start: 0, end: 4, name: "generate" },
    { sample: 0, start: 0, end: 1, name: "sglang_pd_prefill", parent: 0, depth: 1, lane: 1 },
    { sample: 0, start: 1, end: 4, name: "sglang_pd_decode", parent: 0, depth: 1, lane: 1 },
    { sample: 0, start: 0, end: 1, name: "generate [P]", parent: 0, depth: 1, lane: 2, flags: F_VIRTUAL },
    { sample: 0, start: 1, end: 4, name: "generate [D]", parent: 0, depth: 1, lane: 3, flags: F_VIRTUAL },
    // Attribute form under another generation: no real twin, the virtual span counts.
    { sample: 0, start: 4, end: 6, name: "generate", lane: 0 },
    { sample: 0, start: 4, end: 5, name: "generate [P]", parent: 5, depth: 1, lane: 2, flags: F_VIRTUAL },
    { sample: 0, start: 5, end: 6, name: "generate [D]", parent: 5, depth: 1, lane: 3, flags: F_VIRTUAL },
  ];
  const d = decodePayload(makePayload({ samples: [{}], spans }).payload);
  assert.deepEqual(named(d, 0), [
    ["generate", 0],
    ["sglang_pd_prefill", 1],
    ["sglang_pd_decode", 3],
    ["generate", 0],
    ["generate [P]", 1],
    ["generate [D]", 1],
  ]);
  const m = measuredSpans(d);
  assert.equal([...m].filter(Boolean).length, 6);
  // A producer's PD-detail spans are drawn through the virtual lanes and never count.
  const detail = spans.map((s) => (s.name.startsWith("sglang_pd_") ? { ...s, flags: F_PD_DETAIL } : s));
  const d2 = decodePayload(makePayload({ samples: [{}], spans: detail }).payload);
  assert.deepEqual(named(d2, 0).map((p) => p[0]), ["generate", "generate [P]", "generate [D]", "generate", "generate [P]", "generate [D]"]);
});

// A generation whose phases have segments: prefill 0-1 (bootstrap 0-0.25,
// forward 0.5-1), decode 1-4 (transfer 1-1.5, forward 1.5-3, then 1 s of its own);
// a tool 4-5 after it.
/** @param {number} flags the virtual spans' flags */
function pdWithSegments(flags) {
  return decodePayload(
    makePayload({
      samples: [{}],
      spans: [
        { sample: 0, start: 0, end: 4, name: "generate" },
        { sample: 0, start: 0, end: 1, name: "generate [P]", parent: 0, depth: 1, lane: 2, flags },
        { sample: 0, start: 1, end: 4, name: "generate [D]", parent: 0, depth: 1, lane: 3, flags },
        { sample: 0, start: 4, end: 5, name: "tool", lane: 1 },
      ],
      segs: [
        { span: 1, start: 0, end: 0.25, name: "prefill_bootstrap" },
        { span: 1, start: 0.5, end: 1, name: "prefill_forward" },
        { span: 2, start: 1, end: 1.5, name: "decode_transfer" },
        { span: 2, start: 1.5, end: 3, name: "decode_forward" },
      ],
    }).payload,
  );
}

test("child form (F_PD_SEGMENT_SPANS): a phase's segments are its children on the path", () => {
  const d = pdWithSegments(F_VIRTUAL | F_PD_SEGMENT_SPANS);
  const path = criticalPath(d, 0);
  assert.deepEqual(
    path.map((p) => [stepName(d, p), Math.round(p.critical * 1e4) / 1e4]),
    [
      ["generate", 0],
      ["generate [P]", 0.25],
      ["prefill_bootstrap", 0.25],
      ["prefill_forward", 0.5],
      ["generate [D]", 1],
      ["decode_transfer", 0.5],
      ["decode_forward", 1.5],
      ["tool", 1],
    ],
  );
  assert.ok(close(path.reduce((a, p) => a + p.critical, 0), 5), "segment steps take their time from their phase, not on top of it");
  const forward = path.find((p) => stepName(d, p) === "prefill_forward");
  assert.ok(forward && forward.seg >= 0 && d.names[d.spanName[forward.span]] === "generate [P]" && d.segSpan[forward.seg] === forward.span && stepStart(d, forward) === 0.5, "a segment step names its owning span and its segment");
  assert.ok(path.filter((p) => p.seg < 0).every((p) => stepName(d, p) === d.names[d.spanName[p.span]]));
});

test("attribute form (no flag): a phase holds all its time, its segments are drawn only", () => {
  const d = pdWithSegments(F_VIRTUAL);
  const path = criticalPath(d, 0);
  assert.deepEqual(named(d, 0), [
    ["generate", 0],
    ["generate [P]", 1],
    ["generate [D]", 3],
    ["tool", 1],
  ]);
  assert.ok(path.every((p) => p.seg === -1));
});

test("samples are independent and an empty sample has no path", () => {
  const spans = [...AGENT, ...AGENT.map((s) => ({ ...s, sample: 2, parent: s.parent === undefined ? undefined : s.parent + AGENT.length }))];
  const d = decodePayload(makePayload({ samples: [{}, {}, {}], spans }).payload);
  assert.deepEqual(criticalPath(d, 1), []);
  assert.deepEqual(named(d, 2), named(d, 0));
});

const fixture = JSON.parse(readFileSync(new URL("../fixtures/critical_flame.json", import.meta.url), "utf8"));

for (const c of fixture.cases) {
  test(`equals analysis.critical_path: ${c.name}`, () => {
    const d = decodePayload(c.payload);
    for (const want of c.critical) {
      const got = criticalPath(d, want.sample);
      // Each step [span, segment (-1: none), seconds]; a segment step names its virtual span.
      assert.deepEqual(got.map((p) => [p.span, p.seg]), want.path.map((/** @type {number[]} */ p) => [p[0], p[1]]), `sample ${want.sample}: steps`);
      got.forEach((p, k) => assert.ok(close(p.critical, want.path[k][2]), `sample ${want.sample} step ${k}: ${p.critical} vs ${want.path[k][2]}`));
    }
  });
}

test("a chain thousands of spans deep walks without exhausting the stack", () => {
  // Span k covers [k, 2N - k], nested in span k - 1: each holds 2 s of its own, the innermost 2 s.
  const N = 20000;
  const spans = [];
  for (let k = 0; k < N; k++) spans.push({ sample: 0, start: k, end: 2 * N - k, name: "nest", depth: Math.min(k, 255), parent: k - 1, lane: Math.min(k, 255) });
  const d = decodePayload(makePayload({ samples: [{}], spans }).payload);
  const path = criticalPath(d, 0);
  assert.equal(path.length, N);
  assert.ok(path.every((p) => close(p.critical, 2, 1e-2)));
});

test("the side panel lists the steps holding the most time, in time order", () => {
  const path = [5, 1, 9, 3, 7].map((c, k) => ({ span: k, critical: c }));
  assert.deepEqual(listedSteps(path, 3).map((p) => p.span), [0, 2, 4]);
  assert.equal(listedSteps(path, 10), path);
});
