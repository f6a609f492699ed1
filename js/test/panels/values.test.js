import { test } from "node:test";
import assert from "node:assert/strict";
import { textNote } from "../../src/panels/values.js";

test("textNote says how much of a cut text is shown, nothing for a whole one", () => {
  assert.equal(textNote("x".repeat(2000), 123456), "first 2,000 of 123,456 characters, 121,456 left out");
  assert.equal(textNote("😀".repeat(3), 5), "first 3 of 5 characters, 2 left out");
  assert.equal(textNote("abc", 3), "");
  assert.equal(textNote("", 0), "");
  assert.equal(textNote("abc", null), ""); // the length is unknown until the kernel answers
  assert.equal(textNote("abc", undefined), "");
});
