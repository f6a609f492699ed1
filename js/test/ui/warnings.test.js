import { test } from "node:test";
import assert from "node:assert/strict";
import { warningsText, WARNINGS_ABOUT } from "../../src/ui/warnings.js";

test("the notice counts the loader's warnings and lists them, most first", () => {
  const text = warningsText({ parent_cycle: 1, bad_ts: 2, duplicate_span_id: 2, end_before_start: 1 });
  assert.ok(text);
  assert.equal(text.summary, "⚠ 6 load warnings");
  assert.deepEqual(text.lines, ["bad_ts: 2", "duplicate_span_id: 2", "end_before_start: 1", "parent_cycle: 1"]);
  assert.equal(text.title, [WARNINGS_ABOUT, ...text.lines].join("\n"));
});

test("one warning is one; thousands are grouped", () => {
  assert.equal(warningsText({ bad_ts: 1 })?.summary, "⚠ 1 load warning");
  assert.equal(warningsText({ bad_ts: 12345 })?.summary, "⚠ 12,345 load warnings");
  assert.deepEqual(warningsText({ bad_ts: 12345 })?.lines, ["bad_ts: 12,345"]);
});

test("no warnings, no notice", () => {
  assert.equal(warningsText({}), null);
  assert.equal(warningsText({ bad_ts: 0, other: NaN }), null);
});

test("kinds from the payload are kept as they are (shown as text)", () => {
  const kind = "<img src=x onerror=alert(1)>";
  assert.deepEqual(warningsText({ [kind]: 3 })?.lines, [`${kind}: 3`]);
});
