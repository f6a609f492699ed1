// A view's own state: expanded rows by id (a set of exceptions under
// expand-all), and the `view_state` value round trip.

import { test } from "node:test";
import assert from "node:assert/strict";
import { ViewState, highlightIn, restoreViewState, viewStateOf } from "../../src/ui/viewstate.js";

test("toggling a row records it as expanded, or as collapsed under expand-all", () => {
  const state = new ViewState();
  state.toggleExpanded(7);
  assert.equal(state.isExpanded(7), true);
  assert.deepEqual([...state.expanded], [7]);
  state.settings.expandAll = true;
  assert.equal(state.isExpanded(3), true);
  state.toggleExpanded(3);
  assert.equal(state.isExpanded(3), false);
  assert.deepEqual([...state.collapsed], [3]);
});

test("a saved view_state restores into a fresh state; bad values are ignored", () => {
  const saved = new ViewState();
  saved.settings.sort = "duration";
  saved.highlight = 1;
  saved.toggleExpanded(4);
  const value = viewStateOf(saved, ["gen", "tool"], { t0: 1, t1: 2 }, NaN, 10);
  const restored = new ViewState();
  restoreViewState(restored, { ...value, lane_height: "tall" }, ["gen", "tool"]);
  assert.equal(restored.settings.sort, "duration");
  assert.equal(restored.settings.laneH, 18);
  assert.equal(restored.highlight, 1);
  assert.deepEqual([...restored.expanded], [4]);
});

test("the highlight follows its name into a new payload's name table", () => {
  // show() builds the names anew: index 1 was "beta" and is "gamma" now.
  assert.equal(highlightIn(1, ["alpha", "beta", "gamma"], ["alpha", "gamma", "beta"]), 2);
  assert.equal(highlightIn(1, ["alpha", "beta"], ["alpha", "gamma"]), -1);
  assert.equal(highlightIn(-1, ["alpha"], ["alpha"]), -1);
  assert.equal(highlightIn(5, ["alpha"], ["alpha"]), -1);
});
