// Lost buffers (Colab drops binary buffers, other hosts hand over text that
// does not decode): the view asks the kernel for an inline copy and draws it.
// A fake model plays the host and the kernel.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { lostBuffers, WholePayload } from "../../src/page/inline.js";
import { decodePayload } from "../../src/data/decode.js";
import { makePayload } from "../helpers/make_payload.js";

const golden = JSON.parse(readFileSync(new URL("../fixtures/golden_payload.json", import.meta.url), "utf8"));
/** The encoder's payload as the kernel holds it (buffers as base64, as the inline reply carries them). */
const whole = golden.payload;
const wait = (ms = 0) => new Promise((r) => setTimeout(r, ms));

/** @param {any} payload @param {Record<string, any>} buffers */
const withBuffers = (payload, buffers) => ({ ...payload, buffers });

/**
 * A host model whose payload trait is `payload`, and a kernel behind `send`
 * answering `payload_inline` with `answer()` (undefined: no answer).
 * @param {any} payload
 * @param {() => any} answer
 */
function fakeModel(payload, answer) {
  /** @type {Map<string, Set<Function>>} */
  const handlers = new Map();
  const emit = (/** @type {string} */ event, /** @type {any[]} */ ...args) => [...(handlers.get(event) || [])].forEach((h) => h(...args));
  const values = { payload, selected: {} };
  const sent = [];
  const model = {
    sent,
    values,
    get: (/** @type {string} */ k) => values[k],
    set: (/** @type {string} */ k, /** @type {any} */ v) => {
      values[k] = v;
    },
    save_changes() {},
    on: (/** @type {string} */ e, /** @type {Function} */ h) => {
      if (!handlers.has(e)) handlers.set(e, new Set());
      handlers.get(e).add(h);
    },
    off: (/** @type {string} */ e, /** @type {Function} */ h) => handlers.get(e)?.delete(h),
    send(/** @type {any} */ msg) {
      sent.push(msg);
      if (msg.type !== "payload_inline") return;
      const body = answer();
      if (body !== undefined) setTimeout(() => emit("msg:custom", { type: "payload_inline", req: msg.req, ...body }, []), 1);
    },
    /** The kernel sets a new payload. */
    change(/** @type {any} */ p) {
      values.payload = p;
      emit("change:payload");
    },
    handlers,
  };
  return model;
}

/** @param {any} a @param {any} b */
function sameData(a, b) {
  const x = decodePayload(a);
  const y = decodePayload(b);
  assert.equal(x.nSamples, y.nSamples);
  assert.equal(x.nSpans, y.nSpans);
  assert.equal(x.nEvents, y.nEvents);
  assert.equal(x.nSegs, y.nSegs);
  assert.deepEqual([...x.spanStart], [...y.spanStart]);
  assert.deepEqual([...x.smpEnd], [...y.smpEnd]);
  assert.deepEqual([...x.evName], [...y.evName]);
}

test("lostBuffers: whole payloads in every form a host delivers are usable", () => {
  assert.deepEqual(lostBuffers(whole), []); // base64 text (marimo, the inline copy)
  for (const as of ["dataview", "arraybuffer", "uint8", "base64"]) {
    const { payload } = makePayload({ samples: [{}, {}], spans: [{ sample: 1, start: 0, end: 2 }], as });
    assert.deepEqual(lostBuffers(payload), [], as);
  }
  const { payload } = makePayload({ samples: [{}], unaligned: true });
  assert.deepEqual(lostBuffers(payload), []);
  assert.deepEqual(lostBuffers(undefined), []);
  assert.deepEqual(lostBuffers({}), []); // the trait before the kernel sets it
  const empty = makePayload({ samples: [] }).payload;
  assert.deepEqual(lostBuffers(empty), []); // an empty dump: zero-length buffers are whole
});

test("lostBuffers: missing, placeholder, undecodable or short buffers are lost", () => {
  const columns = Object.keys(whole.meta.columns);
  assert.deepEqual(lostBuffers(withBuffers(whole, {})), columns); // Colab: the binary parts never came
  assert.deepEqual(lostBuffers({ ...whole, buffers: undefined }), columns);
  const some = { ...whole.buffers };
  delete some.span_start;
  some.ev_ts = {}; // a placeholder object
  some.seg_end = "http://127.0.0.1:1/blob/abc"; // a URL where the bytes should be
  some.span_parent = "AAAAAAA="; // 5 bytes: not whole i4 elements
  some.smp_reward = "AAAAAAAAAAA="; // 8 bytes: one f8, the dump has 7 samples
  assert.deepEqual(lostBuffers(withBuffers(whole, some)).sort(), ["ev_ts", "seg_end", "smp_reward", "span_parent", "span_start"]);
});

test("a payload without buffers is drawn from the kernel's inline copy", async () => {
  const model = fakeModel(withBuffers(whole, {}), () => ({ payload: whole }));
  /** @type {any} */
  let drawn = null;
  const w = new WholePayload(model, (m) => {
    drawn = m;
  });
  assert.equal(w.pending, true);
  assert.equal(drawn, null, "nothing is drawn from the empty payload");
  assert.deepEqual(model.sent.map((m) => m.type), ["payload_inline"]);
  await wait(10);
  assert.ok(drawn);
  assert.equal(w.pending, false);
  sameData(drawn.get("payload"), whole);
  assert.equal(decodePayload(drawn.get("payload")).nSamples, whole.meta.samples.row.length);
  // everything else passes through to the host's model
  drawn.set("selected", { kind: "span", index: 1 });
  assert.deepEqual(model.values.selected, { kind: "span", index: 1 });
  w.dispose();
});

test("a whole payload is drawn at once, without asking", () => {
  const model = fakeModel(whole, () => assert.fail("asked"));
  let drawn = null;
  new WholePayload(model, (m) => {
    drawn = m;
  });
  assert.ok(drawn);
  assert.equal(drawn.get("payload"), whole);
  assert.deepEqual(model.sent, []);
});

test("a later payload that loses its buffers is announced when its copy arrives; stale copies are dropped", async () => {
  const small = makePayload({ samples: [{}, {}], spans: [{ sample: 0, start: 0, end: 1 }], as: "base64" }).payload;
  let copy = whole;
  const model = fakeModel(small, () => ({ payload: copy }));
  /** @type {any} */
  let view = null;
  const w = new WholePayload(model, (m) => {
    view = m;
  });
  let changes = 0;
  view.on("change:payload", () => changes++);
  model.change(withBuffers(whole, {}));
  assert.equal(changes, 0, "the lost payload is not announced");
  assert.equal(view.get("payload"), small, "the view keeps drawing the last whole payload");
  await wait(10);
  assert.equal(changes, 1);
  sameData(view.get("payload"), whole);
  // a reply that comes after a newer payload is dropped
  model.change(withBuffers(small, {}));
  model.change(small);
  assert.equal(changes, 2);
  copy = whole;
  await wait(10);
  assert.equal(changes, 2);
  assert.equal(view.get("payload"), small);
  w.dispose();
  assert.equal(model.handlers.get("change:payload").size, 0);
  assert.equal(model.handlers.get("msg:custom").size, 0);
});

test("no copy (an error, an incomplete copy, no answer): the payload is drawn as it came", async () => {
  const lost = withBuffers(whole, {});
  for (const answer of [() => ({ error: "KeyError: x" }), () => ({ payload: lost }), () => undefined]) {
    const model = fakeModel(lost, answer);
    /** @type {any} */
    let drawn = null;
    const warn = console.warn;
    console.warn = () => {};
    try {
      new WholePayload(
        model,
        (m) => {
          drawn = m;
        },
        50,
      );
      await wait(80);
    } finally {
      console.warn = warn;
    }
    assert.ok(drawn);
    assert.equal(drawn.get("payload"), lost);
  }
});
