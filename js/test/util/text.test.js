import { test } from "node:test";
import assert from "node:assert/strict";
import { codePointLength } from "../../src/util/text.js";

test("codePointLength counts a character outside the BMP once", () => {
  assert.equal(codePointLength(""), 0);
  assert.equal(codePointLength("abc"), 3);
  assert.equal(codePointLength("a😀b"), 3); // the emoji is two UTF-16 units
  assert.equal(codePointLength("😀".repeat(1000)), 1000);
  assert.equal(codePointLength("é中"), 2);
  assert.equal(codePointLength("a\ud800b\udc00"), 4); // lone surrogates count one each, as in Python
});
