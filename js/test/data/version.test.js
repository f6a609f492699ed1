import { test } from "node:test";
import assert from "node:assert/strict";
import { versionWarning } from "../../src/data/version.js";

test("a payload of another version is said to be older or newer, as it is", () => {
  // An old payload (a notebook saved before an upgrade) was called "newer".
  assert.match(versionWarning(0, 1), /payload version 0 is older than this renderer's \(re-run/);
  assert.match(versionWarning(2, 1), /payload version 2 is newer than this renderer's \(1\)/);
  assert.match(versionWarning("x", 1), /payload version x is not one this renderer knows/);
});
