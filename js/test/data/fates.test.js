import { test } from "node:test";
import assert from "node:assert/strict";
import { FATES, FATE_NONE, decodeLedger, fateCounts, hasFates, ledgerSegments, formatShare, finishMarkers, placeMarkers, finishLabel, formatSeconds } from "../../src/data/fates.js";
import { decodePayload } from "../../src/data/decode.js";
import { makePayload } from "../helpers/make_payload.js";

const RAW = {
  rollout: [1, 0],
  samples: [
    [3, 1, 0, 2, 0, 0],
    [1, 0, 0, 0, 0, 1],
  ],
  seconds: [
    [30, 10, 0, 60, 0, 0],
    [5, 0, 0, 0, 0, 5],
  ],
  shares: [
    [0.3, 0.1, 0, 0.6, 0, 0],
    [0.5, 0, 0, 0, 0, 0.5],
  ],
  finished_50: [10, 2],
  finished_90: [40, 4.5],
  finished_99: [50, 5],
  step_s: [55, 5],
  finished_90_at: [1000 + 40, 900 + 4.5],
  offset: [100, 0],
};

test("the fates are the contract's six, and 255 means none", () => {
  assert.deepEqual(FATES, ["signal", "no_signal", "filtered", "truncated", "aborted", "failed"]);
  assert.equal(FATE_NONE, 255);
});

test("decodeLedger reads entries in rollout order and drops what is malformed", () => {
  const ledger = decodeLedger(RAW, 2);
  assert.deepEqual(ledger.entries.map((entry) => entry.rollout), [0, 1]);
  const [first, second] = ledger.entries;
  assert.deepEqual(first.seconds, [5, 0, 0, 0, 0, 5]);
  assert.deepEqual(second.samples, [3, 1, 0, 2, 0, 0]);
  assert.equal(second.finished90, 40);
  assert.equal(second.finished90At, 1040);
  assert.equal(second.offset, 100);
  assert.equal(second.stepS, 55);
  // a rollout index past meta.rollouts, junk numbers, a null instant
  const odd = decodeLedger({ rollout: [0, 7, "x"], seconds: [[1, "a", -2, null, 3]], finished_90_at: [null] }, 2);
  assert.equal(odd.entries.length, 1);
  assert.deepEqual(odd.entries[0].seconds, [1, 0, 0, 0, 3, 0]);
  assert.ok(Number.isNaN(odd.entries[0].finished90At));
  for (const junk of [null, undefined, 3, "ledger", { rollout: "no" }]) assert.deepEqual(decodeLedger(junk, 2).entries, []);
});

test("fateCounts counts the rows given, samples with no fate last", () => {
  const fates = new Uint8Array([0, 3, 3, 1, FATE_NONE, 5]);
  assert.deepEqual(fateCounts(fates, [0, 1, 2, 3, 4, 5]), [1, 1, 0, 2, 0, 1, 1]);
  assert.deepEqual(fateCounts(fates, new Uint32Array([1, 2])), [0, 0, 0, 2, 0, 0, 0]);
  assert.ok(hasFates(fates));
  assert.ok(!hasFates(new Uint8Array([FATE_NONE, FATE_NONE])));
  assert.ok(!hasFates(new Uint8Array(0)));
});

test("ledgerSegments: one segment per fate with time, as wide as its seconds, labelled with its share", () => {
  const entry = decodeLedger(RAW, 2).entries[1];
  const segments = ledgerSegments(entry);
  assert.deepEqual(segments.map((seg) => FATES[seg.fate]), ["signal", "no_signal", "truncated"]);
  assert.deepEqual(segments.map((seg) => [seg.from, seg.to]), [[0, 0.3], [0.3, 0.4], [0.4, 1]]);
  assert.deepEqual(segments.map((seg) => seg.label), ["signal 30%", "no signal 10%", "truncated 60%"]);
  assert.deepEqual(segments.map((seg) => [seg.seconds, seg.samples]), [[30, 3], [10, 1], [60, 2]]);
  // widths add up to the whole bar, in order, without gaps
  for (let k = 1; k < segments.length; k++) assert.equal(segments[k].from, segments[k - 1].to);
  // no time at all: no segments; shares missing: computed from the seconds
  assert.deepEqual(ledgerSegments({ ...entry, seconds: [0, 0, 0, 0, 0, 0] }), []);
  const computed = ledgerSegments({ ...entry, shares: [0, 0, 0, 0, 0, 0] });
  assert.deepEqual(computed.map((seg) => seg.share), [0.3, 0.1, 0.6]);
});

test("formatShare and formatSeconds", () => {
  assert.equal(formatShare(0.4234), "42%");
  assert.equal(formatShare(0.035), "3.5%");
  assert.equal(formatShare(0.05), "5%");
  assert.equal(formatShare(0.0004), "<0.1%");
  assert.equal(formatShare(0), "0%");
  assert.equal(formatSeconds(12.345), "12.3 s");
  assert.equal(formatSeconds(4.5), "4.50 s");
  assert.equal(formatSeconds(1234.4), "1,234 s");
  assert.equal(formatSeconds(NaN), "? s");
});

test("finishMarkers put each rollout's instant on the renderer's axis (t0 and its offset taken out)", () => {
  const ledger = decodeLedger(RAW, 2);
  const markers = finishMarkers(ledger, 800);
  assert.deepEqual(markers, [
    { rollout: 0, time: 104.5, seconds: 4.5 },
    { rollout: 1, time: 1040 - 800 - 100, seconds: 40 },
  ]);
  const unknown = decodeLedger({ ...RAW, finished_90_at: [null, 904.5] }, 2);
  assert.deepEqual(finishMarkers(unknown, 800).map((marker) => marker.rollout), [0]);
});

test("placeMarkers: x on the axis, labels kept clear of each other and inside the plot", () => {
  const axis = { plotX: 100, plotW: 1000, t0: 0, t1: 200 };
  const measure = (/** @type {string} */ text) => text.length * 6 + 10;
  const one = placeMarkers([{ rollout: 0, time: 50, seconds: 12.25 }], axis, measure, ["rollout 0"]);
  assert.equal(one.length, 1);
  assert.equal(one[0].x, 350);
  assert.equal(one[0].text, "90% finished at 12.3 s");
  assert.equal(one[0].labelX, 354);
  // near the right edge the label goes left of the flag
  const edge = placeMarkers([{ rollout: 0, time: 199, seconds: 1 }], axis, measure);
  assert.ok(edge[0].labelX + edge[0].labelW <= edge[0].x);
  // two close markers: both drawn, the second's label left out; several rollouts are named
  const two = placeMarkers([{ rollout: 1, time: 52, seconds: 3 }, { rollout: 0, time: 50, seconds: 2 }], axis, measure, ["rollout 0", "rollout 1"]);
  assert.deepEqual(two.map((item) => item.marker.rollout), [0, 1]);
  assert.equal(two[0].text, "rollout 0: 90% finished at 2.00 s");
  assert.ok(Number.isFinite(two[0].labelX) && Number.isNaN(two[1].labelX));
  // outside the window: not placed
  assert.deepEqual(placeMarkers([{ rollout: 0, time: 250, seconds: 1 }], axis, measure), []);
  assert.equal(finishLabel({ rollout: 0, time: 0, seconds: 90 }), "90% finished at 90.0 s");
});

test("decodePayload reads smp_fate and meta.ledger; a payload without them has no fates", () => {
  const { payload } = makePayload({ samples: [{}, {}, {}], spans: [{ sample: 0, start: 0, end: 1, name: "a" }] });
  const bare = decodePayload(payload);
  assert.equal(bare.hasFates, false);
  assert.deepEqual(Array.from(bare.smpFate), [FATE_NONE, FATE_NONE, FATE_NONE]);
  assert.deepEqual(bare.meta.ledger.entries, []);
  const { payload: withFates } = makePayload({
    samples: [{ fate: 3 }, { fate: 0 }, { fate: 5 }],
    meta: { rollouts: ["rollout 0", "rollout 1"], ledger: RAW },
  });
  const data = decodePayload(withFates);
  assert.equal(data.hasFates, true);
  assert.deepEqual(Array.from(data.smpFate), [3, 0, 5]);
  assert.deepEqual(data.meta.ledger.entries.map((entry) => entry.rollout), [0, 1]);
});
