import { test } from "node:test";
import assert from "node:assert/strict";
import { newerState, takeKeptView } from "../../src/page/follow.js";

test("newerState: only a later whole version counts", () => {
  assert.deepEqual(newerState(1, { version: 2, dumps: 3 }), { version: 2, dumps: 3 });
  assert.deepEqual(newerState(1, { version: 5 }), { version: 5, dumps: 0 });
  for (const state of [{ version: 1, dumps: 9 }, { version: 0 }, { version: "2" }, { version: 2.5 },
    null, "text", 7, [], {}]) {
    assert.equal(newerState(1, state), null, JSON.stringify(state));
  }
});

test("takeKeptView: the saved view once, nothing on damage", () => {
  const store = new Map();
  const storage = /** @type {any} */ ({
    getItem: (k) => store.get(k) ?? null, removeItem: (k) => store.delete(k),
  });
  store.set("stw-follow-view", JSON.stringify({ view_range: [1, 2] }));
  assert.deepEqual(takeKeptView(storage), { view_range: [1, 2] });
  assert.equal(takeKeptView(storage), null);
  store.set("stw-follow-view", "{not json");
  assert.equal(takeKeptView(storage), null);
  assert.equal(takeKeptView(undefined), null);
});
