// The timeline never paints at a width of 0: it skips the frame, retries on
// the next ones, and paints at the real width once it is back.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Sizer, MIN_WIDTH, RETRY_FRAMES, viewportHeight, MAX_VIEWPORT_H, MIN_VIEWPORT_H, OVERVIEW_H, AXIS_H } from "../../src/render/sizing.js";

/** A sizer over a width the test sets, counting the frames it asks for. */
function fake(retryFrames = RETRY_FRAMES) {
  const box = { width: 1200, asked: 0 };
  const sizer = new Sizer(
    () => box.width,
    () => box.asked++,
    retryFrames,
  );
  return { box, sizer };
}

test("a zero width skips the frame and asks for another; the width that comes back is painted at", () => {
  const { box, sizer } = fake();
  assert.equal(sizer.frameWidth(), 1200);
  box.width = 0; // a theme CSS swap, or a hidden tab
  assert.equal(sizer.frameWidth(), 0, "the frame is skipped");
  assert.equal(box.asked, 1, "another frame is asked for");
  assert.equal(sizer.skipped, 1);
  assert.equal(sizer.current(), 1200, "geometry between frames keeps the last width, never 800");
  box.width = 1180; // back, with no resize reported
  assert.equal(sizer.frameWidth(), 1180);
  assert.equal(box.asked, 1, "no more frames once painted");
  assert.equal(sizer.width, 1180);
});

test("retries end after a while, and start again after the next painted frame", () => {
  const { box, sizer } = fake(3);
  sizer.frameWidth();
  box.width = 0;
  for (let i = 0; i < 10; i++) assert.equal(sizer.frameWidth(), 0);
  assert.equal(box.asked, 3, "a long absence is left to the resize observer");
  assert.equal(sizer.skipped, 10);
  box.width = 900; // the resize observer asks for a frame
  assert.equal(sizer.frameWidth(), 900);
  box.width = 0;
  sizer.frameWidth();
  assert.equal(box.asked, 4, "a new absence is retried again");
});

test("before the first paint and when narrow", () => {
  const { box, sizer } = fake();
  box.width = 0;
  assert.equal(sizer.frameWidth(), 0);
  assert.equal(sizer.width, 0);
  assert.equal(sizer.current(), MIN_WIDTH);
  box.width = 50;
  assert.equal(sizer.frameWidth(), MIN_WIDTH);
  box.width = 640;
  assert.equal(sizer.current(), 640, "geometry follows the live width");
});

test("viewportHeight: what the rows need, within bounds and the height trait", () => {
  assert.equal(viewportHeight(100, undefined), AXIS_H + 102);
  assert.equal(viewportHeight(10, undefined), MIN_VIEWPORT_H);
  assert.equal(viewportHeight(5000, undefined), MAX_VIEWPORT_H);
  assert.equal(viewportHeight(5000, 900), 900 - OVERVIEW_H);
  assert.equal(viewportHeight(5000, 50), MIN_VIEWPORT_H);
  assert.equal(viewportHeight(5000, "x"), MAX_VIEWPORT_H);
});

test("viewportHeight: the load tracks above the rows come on top, or out of the height trait", () => {
  const head = AXIS_H + 100;
  assert.equal(viewportHeight(100, undefined, head), head + 102);
  assert.equal(viewportHeight(5000, undefined, head), MAX_VIEWPORT_H + 100);
  assert.equal(viewportHeight(10, undefined, head), MIN_VIEWPORT_H + 100);
  assert.equal(viewportHeight(5000, 900, head), 900 - OVERVIEW_H, "the trait bounds the whole timeline");
});
