import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { emptyLiveState, spliceLive, livePayload, applicable, baseFor } from "../../src/live/splice.js";
import { deltaBuffers } from "../../src/live/live_view.js";
import { decodePayload } from "../../src/data/decode.js";

const FIXTURE = JSON.parse(readFileSync(new URL("../fixtures/live_deltas.json", import.meta.url), "utf8"));

/** @param {any} state @param {any} delta */
const apply = (state, delta) => spliceLive(state, delta, deltaBuffers(delta));

/** @param {any} state */
function plain(state) {
  return {
    n: state.nSamples,
    columns: Object.fromEntries(Object.entries(state.columns).map(([name, values]) => [name, Array.from(/** @type {any} */ (values))])),
    samples: state.samples,
    tables: state.tables,
  };
}

test("deltas applied one after another hold what the whole state holds", () => {
  let state = emptyLiveState();
  for (const delta of FIXTURE.deltas) {
    assert.ok(applicable(state, delta));
    state = apply(state, delta);
  }
  const whole = apply(emptyLiveState(), FIXTURE.whole);
  assert.deepEqual(plain(state), plain(whole));
  assert.equal(state.seq, FIXTURE.whole.seq);
});

test("a delta applied twice, or one older than the state, changes nothing", () => {
  let state = emptyLiveState();
  for (const delta of FIXTURE.deltas) state = apply(state, delta);
  const again = apply(state, FIXTURE.deltas[FIXTURE.deltas.length - 1]);
  assert.deepEqual(plain(again), plain(state));
  const resent = apply(state, FIXTURE.whole);
  assert.deepEqual(plain(resent), plain(state));
});

test("a poll where nothing moved keeps the columns and takes the clock", () => {
  let state = emptyLiveState();
  for (const delta of FIXTURE.deltas) state = apply(state, delta);
  const quiet = {
    epoch: state.epoch, since: state.seq, seq: state.seq + 1, n_samples: state.nSamples,
    positions: [], counts: { span: [], seg: [], ev: [] }, samples: {}, buffers: {},
    t0: state.t0, now: state.now + 5, live: { ...state.live, following: false },
  };
  assert.ok(applicable(state, quiet));
  const next = apply(state, quiet);
  for (const name of Object.keys(state.columns)) assert.equal(next.columns[name], state.columns[name], name);
  assert.equal(next.samples, state.samples);
  assert.equal(next.seq, state.seq + 1);
  assert.equal(next.now, state.now + 5);
  assert.equal(next.live.following, false);
  assert.deepEqual(plain(next), plain(state));
  // What comes after it lands as it would have without it.
  const resent = apply(next, { ...FIXTURE.whole, seq: next.seq });
  assert.deepEqual(plain(resent), plain(apply(emptyLiveState(), FIXTURE.whole)));
});

test("a poll that only adds samples still makes room for them", () => {
  const state = apply(emptyLiveState(), FIXTURE.deltas[0]);
  const grown = apply(state, {
    epoch: state.epoch, since: state.seq, seq: state.seq + 1, n_samples: state.nSamples + 2,
    positions: [], counts: { span: [], seg: [], ev: [] }, samples: {}, buffers: {},
  });
  assert.equal(grown.nSamples, state.nSamples + 2);
  for (const name of Object.keys(state.columns)) {
    if (name.startsWith("smp_")) assert.equal(grown.columns[name].length, state.nSamples + 2, name);
  }
  assert.equal(grown.samples.row.length, state.nSamples + 2);
});

test("a delta that starts after the state's last one is refused", () => {
  const state = apply(emptyLiveState(), FIXTURE.deltas[0]);
  assert.equal(applicable(state, FIXTURE.deltas[2]), false);
  assert.equal(applicable(state, FIXTURE.deltas[1]), true);
});

test("an older answer that arrives after a newer one is refused", () => {
  let state = emptyLiveState();
  for (const delta of FIXTURE.deltas) state = apply(state, delta);
  const older = FIXTURE.deltas[FIXTURE.deltas.length - 2];
  assert.ok(older.seq < state.seq);
  assert.equal(applicable(state, older), false);
  assert.equal(applicable(state, { ...FIXTURE.whole, seq: state.seq - 1 }), false);
  assert.equal(applicable(state, FIXTURE.deltas[FIXTURE.deltas.length - 1]), true);
});

test("the state decodes as a payload: pointers inside their own sample, spans sorted", () => {
  let state = emptyLiveState();
  for (const delta of FIXTURE.deltas) state = apply(state, delta);
  const data = decodePayload(livePayload(state));
  assert.equal(data.nSamples, 3);
  assert.ok(data.nSpans > 0 && data.nEvents > 0 && data.nSegs > 0);
  for (let i = 0; i < data.nSpans; i++) {
    const parent = data.spanParent[i];
    if (parent >= 0) assert.equal(data.spanSample[parent], data.spanSample[i]);
    if (i > 0) assert.ok(data.spanSample[i] >= data.spanSample[i - 1]);
  }
  for (let i = 0; i < data.nSegs; i++) assert.ok(data.segSpan[i] < data.nSpans);
  for (let i = 0; i < data.nEvents; i++) {
    const parent = data.evParent[i];
    if (parent >= 0) assert.equal(data.spanSample[parent], data.evSample[i]);
  }
  // the late event went to the second sample, and the others' blocks were only moved
  const late = data.names.indexOf("late_mark");
  assert.ok(late >= 0);
  const hits = Array.from(data.evName.keys()).filter((i) => data.evName[i] === late);
  assert.deepEqual(hits.map((i) => data.evSample[i]), [1]);
});

test("the view grows its own copy of span ends, not the state's", () => {
  const state = apply(emptyLiveState(), FIXTURE.whole);
  const payload = livePayload(state);
  assert.notEqual(payload.buffers.span_end, state.columns.span_end);
  assert.deepEqual(Array.from(payload.buffers.span_end), Array.from(state.columns.span_end));
});

test("binary buffers of a widget message are matched to their names", () => {
  const bytes = new Uint8Array([1, 2, 3, 4]);
  const out = deltaBuffers({ buffer_names: ["smp_status", "smp_fate"] }, [bytes, new DataView(bytes.buffer)]);
  assert.deepEqual(Object.keys(out), ["smp_status", "smp_fate"]);
});

test("a whole state of another epoch starts over; a part of one is refused", () => {
  const state = apply(emptyLiveState(), FIXTURE.whole);
  const other = { ...FIXTURE.deltas[3], epoch: "next rollout" };
  assert.equal(applicable(state, other), false);
  assert.equal(applicable(state, { ...FIXTURE.deltas[0], epoch: "next rollout" }), true, "since 0");
  const fresh = baseFor(state, { epoch: "next rollout" });
  assert.equal(fresh.nSamples, 0);
  assert.equal(baseFor(state, FIXTURE.deltas[3]), state);
});
