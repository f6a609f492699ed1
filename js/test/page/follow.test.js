import { test } from "node:test";
import assert from "node:assert/strict";
import { newerState, takeKeptView } from "../../src/page/follow.js";

test("newerState: only a later whole version counts", () => {
  const shown = { version: 1, run: "a" };
  assert.deepEqual(newerState(shown, { version: 2, dumps: 3, run: "a" }), { version: 2, run: "a", dumps: 3 });
  assert.deepEqual(newerState(shown, { version: 5 }), { version: 5, run: "a", dumps: 0 });
  for (const state of [{ version: 1, dumps: 9, run: "a" }, { version: 0 }, { version: "2" }, { version: 2.5 },
    null, "text", 7, [], {}]) {
    assert.equal(newerState(shown, state), null, JSON.stringify(state));
  }
});

test("newerState: another run is news whatever its version", () => {
  // The command started again counts from 1: a tab of the earlier run at version 4 updates.
  const shown = { version: 4, run: "earlier" };
  assert.deepEqual(newerState(shown, { version: 2, dumps: 5, run: "later" }), { version: 2, run: "later", dumps: 5 });
  assert.equal(newerState({ version: 2, run: "later" }, { version: 2, dumps: 5, run: "later" }), null);
  assert.equal(newerState({ version: 4 }, { version: 2, dumps: 5, run: "later" }), null, "a page of no run: versions only");
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
