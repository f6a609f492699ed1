import { test } from "node:test";
import assert from "node:assert/strict";
import { codePointLength, textNote } from "../../src/panels/values.js";

test("codePointLength counts a character outside the BMP once", () => {
  assert.equal(codePointLength(""), 0);
  assert.equal(codePointLength("abc"), 3);
  assert.equal(codePointLength("a😀b"), 3); // the emoji is two UTF-16 units
  assert.equal(codePointLength("😀".repeat(1000)), 1000);
  assert.equal(codePointLength("é中"), 2);
});

test("textNote says how much of a cut text is shown, nothing for a whole one", () => {
  assert.equal(textNote("x".repeat(2000), 123456), "first 2,000 of 123,456 characters, 121,456 left out");
  assert.equal(textNote("😀".repeat(3), 5), "first 3 of 5 characters, 2 left out");
  assert.equal(textNote("abc", 3), "");
  assert.equal(textNote("", 0), "");
  assert.equal(textNote("abc", null), ""); // the length is unknown until the kernel answers
  assert.equal(textNote("abc", undefined), "");
});
