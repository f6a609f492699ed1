import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_VIRTUAL, F_PD_DETAIL, PD_PREFILL, PD_DECODE } from "../../src/data/decode.js";
import { pdBreakdown, pdFromDetail, renderDetails } from "../../src/panels/panel.js";
import { activeHistogram } from "../../src/panels/overview.js";
import { legendInfo } from "../../src/panels/legend.js";
import { makePayload } from "../helpers/make_payload.js";
import { FakeElement } from "../helpers/fake_dom.js";

function pdData() {
  return makePayload({
    samples: [{}, {}],
    spans: [
      { sample: 0, start: 0, end: 10, name: "sglang_generate", lane: 0, depth: 0 },
      { sample: 0, start: 0, end: 4, name: "[P]", lane: 1, depth: 1, flags: F_VIRTUAL, parent: 0 },
      { sample: 0, start: 4, end: 10, name: "[D]", lane: 2, depth: 1, flags: F_VIRTUAL, parent: 0 },
      { sample: 0, start: 0, end: 4, name: "sglang_pd_prefill", lane: 1, depth: 1, flags: F_PD_DETAIL, parent: 0 },
      { sample: 1, start: 5, end: 20, name: "tool_call", lane: 0, depth: 0, flags: 1 },
    ],
    segs: [
      { span: 1, start: 0, end: 1, name: "prefill_bootstrap_queue" },
      { span: 1, start: 1, end: 4, name: "prefill_forward" },
      { span: 2, start: 4, end: 10, name: "decode_forward" },
    ],
    events: [
      { sample: 0, ts: 3, name: "tick" },
      { sample: 1, ts: 6, name: "tool_call", kind: 1 },
    ],
  });
}

test("PD breakdown from the generation span, a virtual span, or a detail span", () => {
  const { payload, spanNew } = pdData();
  const d = decodePayload(payload);
  const want = [
    { phase: "P", name: "prefill_bootstrap_queue", dur: 1 },
    { phase: "P", name: "prefill_forward", dur: 3 },
    { phase: "D", name: "decode_forward", dur: 6 },
  ];
  assert.deepEqual(pdBreakdown(d, spanNew[0]), want);
  assert.deepEqual(pdBreakdown(d, spanNew[1]), want);
  assert.deepEqual(pdBreakdown(d, spanNew[2]), want);
  assert.deepEqual(pdBreakdown(d, spanNew[3]), want);
  assert.deepEqual(pdBreakdown(d, spanNew[4]), []);
});

test("the kernel's PD segments take their span's phase, whatever their names say", () => {
  const segments = [
    { name: "bootstrap", start: 1, end: 3 },
    { name: "prefill_transfer", duration: 0.5 },
    { name: "decode?", start: 2 },
  ];
  assert.deepEqual(pdFromDetail(segments, "D"), [
    { phase: "D", name: "bootstrap", dur: 2 },
    { phase: "D", name: "prefill_transfer", dur: 0.5 },
  ]);
  assert.deepEqual(pdFromDetail([{ name: "decode_forward", duration: 1 }], "P"), [{ phase: "P", name: "decode_forward", dur: 1 }]);
  assert.equal(pdFromDetail([], "P"), null);
});

test("active-sample histogram vs brute force", () => {
  const samples = [];
  const spans = [];
  for (let s = 0; s < 30; s++) {
    samples.push({});
    const a = (s * 7) % 50;
    spans.push({ sample: s, start: a, end: a + 5 + (s % 11) * 3, name: "x" });
  }
  samples.push({ start: NaN, end: NaN });
  const d = decodePayload(makePayload({ samples, spans }).payload);
  const rows = Uint32Array.from({ length: d.nSamples }, (_, i) => i);
  const bins = 37;
  const lo = d.globalStart;
  const hi = d.globalEnd;
  const h = activeHistogram(d, rows, lo, hi, bins);
  for (let b = 0; b < bins; b++) {
    const a = lo + ((hi - lo) * b) / bins;
    const z = lo + ((hi - lo) * (b + 1)) / bins;
    let n = 0;
    for (let s = 0; s < 30; s++) {
      const i0 = Math.min(bins - 1, Math.floor(((d.smpStart[s] - lo) / (hi - lo)) * bins));
      const i1 = Math.min(bins - 1, Math.floor(((d.smpEnd[s] - lo) / (hi - lo)) * bins));
      if (i0 <= b && b <= i1) n++;
    }
    assert.equal(h[b], n, `bin ${b} [${a}, ${z})`);
  }
});

test("legend lists drawable span names by use, PD segments in pipeline order, events", () => {
  const d = decodePayload(pdData().payload);
  const info = legendInfo(d);
  const names = (xs) => xs.map((x) => d.names[x.name]);
  assert.deepEqual(names(info.spans).sort(), ["sglang_generate", "tool_call"]);
  assert.deepEqual(names(info.segments), ["prefill_bootstrap_queue", "prefill_forward", "decode_forward"]);
  assert.deepEqual(names(info.events), ["tick"]);
  assert.ok(info.hasOpen && info.hasUnmatched && !info.hasError);
});

test("legend orders PD segments as the spans record them: decode transfers before it forwards", () => {
  // slime's steps (schema.PD_SEGMENTS): prefill bootstrap_queue, bootstrap, alloc_wait,
  // forward, transfer_queue; decode prealloc, bootstrap, alloc_wait, transfer, forward.
  // The first sample lacks decode's alloc_wait and prefill's bootstrap, so it names
  // transfer before alloc_wait; the third lacks forward. The order is what the spans
  // agree on: a step one span lacks moves no other.
  const prefill = ["bootstrap_queue", "bootstrap", "alloc_wait", "forward", "transfer_queue"];
  const decode = ["prealloc", "bootstrap", "alloc_wait", "transfer", "forward"];
  const spans = [];
  const segs = [];
  const missing = [["decode_alloc_wait", "prefill_bootstrap"], [], ["decode_forward"]];
  for (const sample of [0, 1, 2]) {
    const base = spans.length;
    spans.push({ sample, start: 0, end: 10, name: "sglang_generate", lane: 0, depth: 0 });
    spans.push({ sample, start: 0, end: 5, name: "[P]", lane: 1, depth: 1, flags: F_VIRTUAL, parent: base });
    spans.push({ sample, start: 5, end: 10, name: "[D]", lane: 2, depth: 1, flags: F_VIRTUAL, parent: base });
    for (const [span, phase, steps] of [[base + 2, "decode", decode], [base + 1, "prefill", prefill]]) {
      steps.forEach((step, at) => {
        if (missing[sample].includes(`${phase}_${step}`)) return;
        const start = (phase === "decode" ? 5 : 0) + at;
        segs.push({ span, start, end: start + 1, name: `sglang_pd_${phase}_${step}` });
      });
    }
  }
  const d = decodePayload(makePayload({ samples: [{}, {}, {}], spans, segs }).payload);
  const { segments } = legendInfo(d);
  assert.deepEqual(segments.map((x) => d.names[x.name]), [...prefill.map((step) => `sglang_pd_prefill_${step}`),
    ...decode.map((step) => `sglang_pd_decode_${step}`)]);
  // each name's phase is its spans', not a word of the name
  assert.deepEqual(segments.map((x) => x.phase), [...prefill.map(() => PD_PREFILL), ...decode.map(() => PD_DECODE)]);
});

test("a PD segment's legend phase is its span's, whatever its name says", () => {
  const spans = [
    { sample: 0, start: 0, end: 10, name: "sglang_generate", lane: 0, depth: 0 },
    { sample: 0, start: 0, end: 5, name: "sglang_generate [P]", lane: 1, depth: 1, flags: F_VIRTUAL, parent: 0 },
    { sample: 0, start: 5, end: 10, name: "sglang_generate [D]", lane: 2, depth: 1, flags: F_VIRTUAL, parent: 0 },
  ];
  const segs = [
    { span: 1, start: 0, end: 5, name: "decode_cache_warmup" },
    { span: 2, start: 5, end: 10, name: "transfer_kv" },
  ];
  const d = decodePayload(makePayload({ samples: [{}], spans, segs }).payload);
  const phases = Object.fromEntries(legendInfo(d).segments.map((x) => [d.names[x.name], x.phase]));
  assert.deepEqual(phases, { decode_cache_warmup: PD_PREFILL, transfer_kv: PD_DECODE });
});

// The details panel's timing rows: a closed span's duration is its recorded one (the
// payload's, then the kernel's exact one once its details arrive), not the difference
// of the payload's float32 offsets and drawn end.

const ACTIONS = {
  close() {}, focus() {}, selectSpan() {}, selectEvent() {},
  sampleText: () => new Promise(() => {}),
};

/**
 * The panel's text for span 1 of a sample, given the kernel's `detail`.
 * @param {{start: number, end: number, dur?: number}} span
 * @param {any} detail
 */
function timingText(span, detail) {
  const data = decodePayload(makePayload({
    samples: [{}],
    spans: [{ sample: 0, start: 0, end: 7300, name: "episode", lane: 0, depth: 0 },
      { sample: 0, ...span, name: "tool", lane: 1, depth: 1, parent: 0 }],
  }).payload);
  const host = new FakeElement("div");
  const hit = { type: "span", row: 0, sample: 0, span: 1, t: span.start };
  renderDetails(/** @type {any} */ (host), data, /** @type {any} */ (hit), 1,
    detail ? { status: "ok", detail } : { status: "loading", detail: null }, /** @type {any} */ (ACTIONS));
  return host.textContent;
}

test("a short span far into its sample shows its recorded duration", () => {
  const span = { start: 7000, end: 7000.0003 }; // float32 offsets: 488 µs apart
  assert.match(timingText(span, null), /duration300 µs/);
  assert.match(timingText({ ...span, dur: NaN }, { duration: 0.0003, state: "closed" }), /duration300 µs/);
});

test("an end recorded before its start shows its negative duration", () => {
  assert.match(timingText({ start: 5, end: 5, dur: -2 }, null), /duration-2.00 s/);
  assert.match(timingText({ start: 5, end: 5, dur: NaN }, { duration: -2, state: "closed" }), /duration-2.00 s/);
});
