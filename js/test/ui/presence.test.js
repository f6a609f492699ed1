// A drawn view's messages to the kernel: opened, alive at the model's interval
// (following its changes), closed; the contract's interval where the model has none.

import { test } from "node:test";
import assert from "node:assert/strict";
import { aliveSeconds, announceView, newViewId } from "../../src/ui/presence.js";
import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };

/** A model holding `state`, keeping what it sends and its change listeners. */
function fakeModel(state = {}) {
  /** @type {Map<string, Set<Function>>} */
  const listeners = new Map();
  return {
    sent: /** @type {any[]} */ ([]),
    get: (/** @type {string} */ key) => state[key],
    set(/** @type {string} */ key, /** @type {any} */ value) {
      state[key] = value;
      for (const listener of listeners.get(`change:${key}`) ?? []) listener(value);
    },
    save_changes() {},
    on(/** @type {string} */ event, /** @type {Function} */ listener) {
      if (!listeners.has(event)) listeners.set(event, new Set());
      listeners.get(event)?.add(listener);
    },
    off(/** @type {string} */ event, /** @type {Function} */ listener) {
      listeners.get(event)?.delete(listener);
    },
    send(/** @type {any} */ content) {
      this.sent.push(content);
    },
    listening: (/** @type {string} */ event) => listeners.get(event)?.size ?? 0,
  };
}

/** Timers a test fires by hand: each running interval with its period. */
function manualTimers() {
  /** @type {Map<number, {callback: () => void, ms: number}>} */
  const running = new Map();
  let next = 0;
  return {
    running,
    every: (/** @type {() => void} */ callback, /** @type {number} */ ms) => {
      running.set(++next, { callback, ms });
      return next;
    },
    stop: (/** @type {unknown} */ handle) => running.delete(/** @type {number} */ (handle)),
    fire: () => [...running.values()].forEach((timer) => timer.callback()),
  };
}

test("a view says opened, alive at its model's interval, then closed", () => {
  const model = fakeModel({ view_alive_seconds: 0.25 });
  const timers = manualTimers();
  const close = announceView(model, "v1", timers);
  assert.deepEqual(model.sent, [{ type: "view_opened", view: "v1" }]);
  assert.deepEqual([...timers.running.values()].map((timer) => timer.ms), [250]);
  timers.fire();
  timers.fire();
  assert.deepEqual(model.sent.slice(1), [{ type: "view_alive", view: "v1" }, { type: "view_alive", view: "v1" }]);
  close();
  assert.equal(timers.running.size, 0);
  assert.equal(model.listening("change:view_alive_seconds"), 0);
  assert.deepEqual(model.sent.at(-1), { type: "view_closed", view: "v1" });
  timers.fire();
  assert.equal(model.sent.length, 4, "nothing after closed");
});

test("a changed interval replaces the running one", () => {
  const model = fakeModel({ view_alive_seconds: 20 });
  const timers = manualTimers();
  const close = announceView(model, "v2", timers);
  model.set("view_alive_seconds", 0.5);
  assert.deepEqual([...timers.running.values()].map((timer) => timer.ms), [500]);
  timers.fire();
  assert.deepEqual(model.sent.at(-1), { type: "view_alive", view: "v2" });
  close();
  assert.equal(timers.running.size, 0);
});

test("without a usable interval in the model, the contract's", () => {
  for (const value of [undefined, null, 0, -1, NaN, "soon"]) {
    assert.equal(aliveSeconds(fakeModel({ view_alive_seconds: value })), CONTRACT.views.alive_every_seconds);
  }
  assert.equal(aliveSeconds(fakeModel({ view_alive_seconds: 3 })), 3);
});

test("a model that cannot send any more does not break the view", () => {
  const model = fakeModel();
  model.send = () => {
    throw new Error("comm closed");
  };
  const timers = manualTimers();
  const close = announceView(model, "v3", timers);
  timers.fire();
  close();
  assert.equal(timers.running.size, 0);
});

test("view ids differ", () => {
  const ids = new Set(Array.from({ length: 100 }, () => newViewId()));
  assert.equal(ids.size, 100);
});
