// The details panel of a selection that a live update keeps: the reply for it is
// shown, and the panel's buttons select items of the payload shown now.

import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeElement } from "../helpers/fake_dom.js";
import { makePayload } from "../helpers/make_payload.js";
import { decodePayload, nameOf } from "../../src/data/decode.js";
import { allSamples, buildLayout } from "../../src/data/layout.js";
import { keepHit } from "../../src/live/keep.js";
import { loadDetails } from "../../src/ui/selection.js";

const FIRST = [
  { sample: 0, start: 0, end: 1, name: "a0", lane: 0, depth: 0 },
  { sample: 1, start: 0, end: 5, name: "parent", lane: 0, depth: 0 },
  { sample: 1, start: 1, end: 2, name: "child", lane: 1, depth: 1, parent: 1 },
];
/** The next live payload: sample 0's block grew by two spans, so sample 1's moved by two. */
const GROWN = [...FIRST,
  { sample: 0, start: 1, end: 2, name: "a0", lane: 0, depth: 0 },
  { sample: 0, start: 2, end: 3, name: "a0", lane: 0, depth: 0 }];

/** @param {any[]} spans */
function shown(spans) {
  const data = decodePayload(makePayload({ samples: [{}, {}], spans }).payload);
  return { data, layout: buildLayout(data, allSamples(data), () => false, 18) };
}

/** An app as loadDetails uses it, whose attribute replies the test sends. */
function fakeApp() {
  /** @type {((reply: any) => void)[]} */
  const replies = [];
  /** @type {any[]} */
  const selected = [];
  let requests = 0;
  const app = {
    shown: shown(FIRST),
    sync: { get: () => ({ meta: {} }) },
    requests: {
      attrs: () => ({ req: ++requests, promise: new Promise((resolve) => replies.push(resolve)) }),
      sampleText: () => ({ promise: new Promise(() => {}) }),
    },
    pointer: { pendingReq: -1, selection: /** @type {any} */ (null) },
    ui: { detailsEl: new FakeElement("div") },
    drawing: { loop: { disposed: false } },
    updateSide() {},
    focusSelection() {},
    /** @param {any} hit */
    select(hit) { selected.push(hit); },
  };
  return { app, replies, selected };
}

test("a kept selection's details arrive, and its buttons pick the spans shown now", async () => {
  const { app, replies, selected } = fakeApp();
  const old = app.shown.data;
  const child = 2;
  const hit = { type: "span", row: 1, sample: 1, span: child, t: 1 };
  app.pointer.selection = hit;
  loadDetails(/** @type {any} */ (app), /** @type {any} */ (hit));
  assert.match(app.ui.detailsEl.textContent, /loading/);

  app.shown = shown(GROWN); // App.replacePayload with live/keep.js's keepHit
  const kept = /** @type {any} */ (keepHit(old, app.shown.data, /** @type {any} */ (hit)));
  app.pointer.selection = kept;
  assert.equal(nameOf(app.shown.data, app.shown.data.spanName[kept.span]), "child");
  assert.notEqual(kept.span, child);

  replies[0]({ req: 1, detail: { start_attrs: { tool: "search" }, end_attrs: {} } });
  await new Promise((resolve) => setTimeout(resolve, 0));
  const text = app.ui.detailsEl.textContent;
  assert.doesNotMatch(text, /loading/);
  assert.match(text, /search/);

  const parentButton = [...app.ui.detailsEl.elements()].find(
    (element) => element.tagName === "BUTTON" && element.textContent === "parent");
  assert.ok(parentButton, "the panel offers the parent");
  parentButton.listeners.click();
  const now = app.shown.data;
  assert.equal(selected.length, 1);
  assert.equal(selected[0].span, now.spanParent[kept.span]);
  assert.equal(nameOf(now, now.spanName[selected[0].span]), "parent");
});
