import { test } from "node:test";
import assert from "node:assert/strict";
import { bidiIsolated, codePointLength, compareCodePoints } from "../../src/util/text.js";

test("codePointLength counts a character outside the BMP once", () => {
  assert.equal(codePointLength(""), 0);
  assert.equal(codePointLength("abc"), 3);
  assert.equal(codePointLength("a😀b"), 3); // the emoji is two UTF-16 units
  assert.equal(codePointLength("😀".repeat(1000)), 1000);
  assert.equal(codePointLength("é中"), 2);
  assert.equal(codePointLength("a\ud800b\udc00"), 4); // lone surrogates count one each, as in Python
});

test("compareCodePoints orders text as Python does, not by UTF-16 units", () => {
  // Python: sorted(["😀", "\uff01", "a", "\ue000", "\ud7ff", "ab", ""])
  const python = ["", "a", "ab", "\ud7ff", "\ue000", "\uff01", "😀"];
  const shuffled = ["😀", "\uff01", "a", "\ue000", "\ud7ff", "ab", ""];
  assert.deepEqual([...shuffled].sort(compareCodePoints), python);
  assert.notDeepEqual([...shuffled].sort(), python); // UTF-16 order puts the emoji first of the four
  assert.equal(compareCodePoints("x😀", "x😁") < 0, true);
  assert.equal(compareCodePoints("same", "same"), 0);
  assert.equal(compareCodePoints("中", "\uff01") < 0, true);
});

test("bidiIsolated wraps only text holding embeddings, overrides or isolates", () => {
  assert.equal(bidiIsolated("tool_call"), "tool_call");
  assert.equal(bidiIsolated("שלום"), "שלום"); // right-to-left letters alone reorder nothing else
  for (const control of ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]) {
    assert.equal(bidiIsolated(`a${control}b`), `\u2068a${control}b\u2069`);
  }
});
