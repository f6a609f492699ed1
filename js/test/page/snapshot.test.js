import { test } from "node:test";
import assert from "node:assert/strict";
import { detailFor, textFor } from "../../src/page/snapshot.js";

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

/**
 * A table of item fields as page_attrs.py writes one: each column's bytes in `views`.
 * @param {Record<string, {kind: "f64"|"i64"|"text", values: number[]|(string|null)[]}>} fields
 */
function itemTable(fields) {
  /** @type {Record<string, DataView>} */
  const views = {};
  const put = (/** @type {ArrayBufferView} */ data) => {
    const name = String(Object.keys(views).length);
    views[name] = new DataView(data.buffer, data.byteOffset, data.byteLength);
    return name;
  };
  const columns = Object.entries(fields).map(([key, { kind, values }]) => {
    const valid = new Uint8Array(Math.ceil(values.length / 8));
    values.forEach((value, row) => { if (value !== null) valid[row >> 3] |= 1 << (row & 7); });
    if (kind === "text") {
      const distinct = [...new Set(values.filter((value) => value !== null))];
      const codes = Int32Array.from(values, (value) => (value === null ? -1 : distinct.indexOf(/** @type {string} */ (value))));
      const encoded = distinct.map((text) => new TextEncoder().encode(/** @type {string} */ (text)));
      const offsets = new Int32Array(encoded.length + 1);
      encoded.forEach((bytes, i) => { offsets[i + 1] = offsets[i] + bytes.length; });
      const data = new Uint8Array(offsets[encoded.length]);
      encoded.forEach((bytes, i) => data.set(bytes, offsets[i]));
      return { key, kind, valid: put(valid), codes: put(codes), offsets: put(offsets), data: put(data) };
    }
    const numbers = values.map((value) => Number(value ?? 0));
    const array = kind === "f64" ? Float64Array.from(numbers) : BigInt64Array.from(numbers.map(BigInt));
    return { key, kind, valid: put(valid), values: put(array) };
  });
  return { table: { rows: Object.values(fields)[0].values.length, columns }, views };
}

test("detailFor: a span's fields with nulls, and its segments found by owner", () => {
  const spans = itemTable({
    name: { kind: "text", values: ["generate", "tool", "generate [P]"] },
    end: { kind: "f64", values: [2.5, null, 4] },
  });
  const segments = itemTable({
    owner: { kind: "i64", values: [0, 2, 2, 2] },
    name: { kind: "text", values: ["queue", "queue", "forward", "transfer"] },
    start: { kind: "f64", values: [1, 3, 3.5, null] },
  });
  const sample = new DataView(new Uint32Array([0, 0, 1]).buffer);
  const payload = { buffers: { span_sample: sample } };
  // Both tables' byte strings share one set of names in a real block: offset the segments'.
  const views = { ...spans.views };
  const renamed = segments.table.columns.map((column) => {
    /** @type {Record<string, any>} */
    const out = { ...column };
    for (const part of ["valid", "values", "codes", "offsets", "data"]) {
      if (out[part] !== undefined) { views[`s${out[part]}`] = segments.views[out[part]]; out[part] = `s${out[part]}`; }
    }
    return out;
  });
  const details = /** @type {any} */ ({
    spans: spans.table, events: { rows: 0, columns: [] }, segments: { rows: 4, columns: renamed },
    samples: [{ row: 0 }, { row: 1 }], sample_texts: {}, views,
  });
  const open = detailFor(details, payload, "span", 1);
  assert.equal(open?.name, "tool");
  assert.equal(open?.end, null);
  assert.deepEqual(open?.segments, []);
  assert.deepEqual(detailFor(details, payload, "span", 2)?.segments, [
    { name: "queue", start: 3, end: null, duration: null },
    { name: "forward", start: 3.5, end: null, duration: null },
    { name: "transfer", start: null, end: null, duration: null },
  ]);
  assert.deepEqual(detailFor(details, payload, "span", 2)?.sample, { row: 1 });
  assert.equal(detailFor(details, payload, "span", 3), null);
  assert.equal(detailFor(details, payload, "event", 0), null);
});
