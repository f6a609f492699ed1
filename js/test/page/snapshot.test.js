import { test } from "node:test";
import assert from "node:assert/strict";
import { textFor } from "../../src/page/snapshot.js";

function details() {
  return {
    spans: {},
    events: {},
    segments: {},
    samples: [
      { prompt: "P".repeat(10), prompt_chars: 50, label: "4", label_chars: 1, response: null, response_chars: null },
      { prompt: "short", prompt_chars: 5, label: null, label_chars: null },
    ],
    sample_texts: { prompt: ["P".repeat(30), null], label: [null, null], response: [null, null] },
  };
}

test("textFor: the embedded cut, else the summary's preview when that is the whole text", () => {
  const d = details();
  assert.deepEqual(textFor(d, 0, "prompt"), { text: "P".repeat(30), chars: 50 });
  assert.deepEqual(textFor(d, 1, "prompt"), { text: "short", chars: 5 });
  assert.deepEqual(textFor(d, 0, "label"), { text: "4", chars: 1 });
  assert.deepEqual(textFor(d, 0, "response"), { text: null, chars: null });
});

test("textFor: null for a sample or field the page does not hold", () => {
  const d = details();
  for (const [sample, field] of [[2, "prompt"], [-1, "prompt"], [0.5, "prompt"], [0, "metadata"], [0, "__proto__"], [0, "constructor"], [0, 7]]) {
    assert.equal(textFor(d, /** @type {any} */ (sample), /** @type {any} */ (field)), null, `${sample} ${String(field)}`);
  }
  const old = { ...details(), sample_texts: undefined }; // a page written before sample texts
  assert.equal(textFor(/** @type {any} */ (old), 0, "prompt"), null);
});
