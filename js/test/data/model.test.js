import { test } from "node:test";
import assert from "node:assert/strict";
import { createLocalModel } from "../../src/standalone.js";
import { Sync, Requests } from "../../src/data/model.js";
import { makePayload } from "../helpers/make_payload.js";

const wait = (ms) => new Promise((r) => setTimeout(r, ms));

test("local model: get/set/on/off/save_changes", () => {
  const { payload } = makePayload({ samples: [{}] });
  const saved = [];
  const m = createLocalModel(payload, { onSave: (c) => saved.push(c) });
  assert.equal(m.get("payload"), payload);
  assert.deepEqual(m.get("selected"), {});
  let seen = 0;
  const h = () => seen++;
  m.on("change:view_range", h);
  m.set("view_range", [1, 2]);
  assert.equal(seen, 1);
  m.save_changes();
  assert.deepEqual(saved, [{ view_range: [1, 2] }]);
  m.off("change:view_range", h);
  m.set("view_range", [3, 4]);
  assert.equal(seen, 1);
  const m2 = createLocalModel({ payload, view_state: { sort: "reward" } });
  assert.equal(m2.get("view_state").sort, "reward");
});

test("local model: off by event, by callback, or all; a throwing handler spares the rest", async () => {
  const m = createLocalModel({});
  const calls = [];
  const a = () => calls.push("a");
  const b = () => calls.push("b");
  const boom = () => { throw new Error("handler broke"); };
  const logged = [];
  const realError = console.error;
  console.error = (...args) => logged.push(args.join(" "));
  try {
    m.on("change:x", boom);
    m.on("change:x", a);
    m.on("change:y", a);
    m.on("change:y", b);
    m.set("x", 1);
    assert.deepEqual(calls, ["a"]);
    assert.equal(logged.length, 1);
    assert.match(logged[0], /handler for change:x failed/);
    m.off(null, a); // a from every event
    m.set("x", 2);
    m.set("y", 2);
    assert.deepEqual(calls, ["a", "b"]);
    m.off("change:y"); // every callback of one event
    m.set("y", 3);
    assert.deepEqual(calls, ["a", "b"]);
    m.on("change:y", b);
    m.off(); // everything
    m.set("x", 3);
    m.set("y", 4);
    assert.deepEqual(calls, ["a", "b"]);
    // query_attrs: answered by the page's function, or an error reply without one.
    const answered = createLocalModel({}, { queryAttrs: async (terms) => ({ rows: terms.length }) });
    const bare = createLocalModel({});
    const replies = [];
    for (const model of [answered, bare]) {
      model.on("msg:custom", (msg) => replies.push(msg));
      model.send({ type: "query_attrs", req: 4, terms: [1, 2], view: "v1" });
      model.send({ type: "unknown", req: 5 });
    }
    await wait(20);
    // each reply repeats the keys the contract names for its type, as the kernel's do
    assert.deepEqual(replies, [
      { type: "query_attrs", req: 4, view: "v1", rows: 2 },
      { type: "query_attrs", req: 4, view: "v1", error: "Error: attributes are not embedded in this page" },
    ]);
  } finally {
    console.error = realError;
  }
});

test("local model answers attrs requests from an embedded map or a function", async () => {
  const m = createLocalModel({ payload: null }, { attrs: { span: { 3: { name: "x" } }, event: [{ name: "e0" }] } });
  const replies = [];
  m.on("msg:custom", (msg) => replies.push(msg));
  m.send({ type: "attrs", kind: "span", index: 3, req: 7 });
  m.send({ type: "attrs", kind: "event", index: 0, req: 8 });
  m.send({ type: "attrs", kind: "span", index: 99, req: 9 });
  m.send({ type: "other" });
  await wait(10);
  assert.deepEqual(replies.find((r) => r.req === 7).detail, { name: "x" });
  assert.deepEqual(replies.find((r) => r.req === 8).detail, { name: "e0" });
  const miss = replies.find((r) => r.req === 9);
  assert.equal(miss.detail, null);
  assert.ok(miss.error);
  assert.equal(replies.length, 3);
  const f = createLocalModel({}, { attrs: async (kind, i) => ({ kind, i }) });
  const out = [];
  f.on("msg:custom", (msg) => out.push(msg));
  f.send({ type: "attrs", kind: "span", index: 5, req: 1 });
  await wait(10);
  assert.deepEqual(out[0].detail, { kind: "span", i: 5 });
});

test("Requests resolves by req, ignores other replies, times out", async () => {
  const m = createLocalModel({}, { attrs: (kind, i) => ({ i }) });
  const c = new Requests(m, 200);
  const a = c.attrs("span", 1);
  const b = c.attrs("span", 2);
  assert.notEqual(a.req, b.req);
  const [ra, rb] = await Promise.all([a.promise, b.promise]);
  assert.equal(ra.detail.i, 1);
  assert.equal(rb.detail.i, 2);
  // A model that never answers: the request times out.
  const silent = createLocalModel({});
  silent.send = () => {};
  const c2 = new Requests(silent, 30);
  await assert.rejects(c2.attrs("span", 1).promise, /no reply/);
  c.dispose();
  c2.dispose();
});

test("local model answers sample_text requests; a reply of another type is not a match", async () => {
  const texts = { 0: { prompt: { text: "P".repeat(50), chars: 80 } } };
  const m = createLocalModel({}, {
    sampleText: (sample, field) => texts[sample]?.[field] ?? null,
    attrs: () => ({ name: "x" }),
  });
  const c = new Requests(m, 200);
  const hit = await c.sampleText(0, "prompt").promise;
  assert.deepEqual(hit, { type: "sample_text", req: hit.req, sample: 0, field: "prompt", view: null, text: "P".repeat(50), chars: 80 });
  // A request naming its view has it echoed, as the kernel's reply does.
  const named = await c.sampleText(0, "prompt", "7").promise;
  assert.equal(named.view, "7");
  const miss = await c.sampleText(3, "response").promise;
  assert.equal(miss.text, null);
  assert.match(miss.error, /not embedded/);
  // A page without sample texts, and one whose source throws, still answer.
  const bare = await new Requests(createLocalModel({})).sampleText(0, "prompt").promise;
  assert.match(bare.error, /not embedded/);
  const broken = createLocalModel({}, { sampleText: () => { throw new Error("boom"); } });
  const failed = await new Requests(broken).sampleText(0, "prompt").promise;
  assert.equal(failed.text, null);
  assert.match(failed.error, /boom/);
  // An "attrs" reply that happens to carry a sample_text request's req is not its answer.
  const slow = createLocalModel({});
  slow.send = () => {};
  const waiting = new Requests(slow, 40);
  const { req, promise } = waiting.sampleText(0, "prompt");
  waiting.onMsg({ type: "attrs", req, detail: {} });
  await assert.rejects(promise, /no reply/);
  c.dispose();
  waiting.dispose();
});

test("Sync: debounced writes, the writing flag guards echoes", async () => {
  const m = createLocalModel({});
  const s = new Sync(m);
  const seen = [];
  m.on("change:view_range", () => seen.push([s.writing, m.get("view_range")]));
  s.setLater("view_range", () => [1, 2], 20);
  s.setLater("view_range", () => [3, 4], 20);
  await wait(40);
  assert.deepEqual(seen, [[true, [3, 4]]]);
  s.setNow("selected", { kind: "span", index: 1 });
  assert.deepEqual(m.get("selected"), { kind: "span", index: 1 });
  s.setLater("view_state", () => ({ a: 1 }), 1000);
  s.flush();
  assert.deepEqual(m.get("view_state"), { a: 1 });
});

test("local model refuses an attrs request of a kind neither span nor event", async () => {
  const m = createLocalModel({ payload: null }, { attrs: { span: [{ name: "s0" }], event: [{ name: "e0" }] } });
  /** @type {any[]} */
  const replies = [];
  m.on("msg:custom", (msg) => replies.push(msg));
  m.send({ type: "attrs", kind: "seg", index: 0, req: 1 });
  m.send({ type: "attrs", index: 0, req: 2 });
  const deadline = Date.now() + 30_000;
  while (replies.length < 2 && Date.now() < deadline) await wait(1);
  const bySeg = replies.find((r) => r.req === 1);
  assert.equal(bySeg.detail, null);
  assert.equal(bySeg.error, 'kind must be "span" or "event", not "seg"');
  assert.equal(replies.find((r) => r.req === 2).error, 'kind must be "span" or "event", not none');
});
