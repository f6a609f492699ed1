// The query grammar on the cases Python shares (fixtures/query_cases.json),
// evaluated over the payload Python wrote for the cases' trace, with the
// attribute terms answered from the attribute tables a snapshot embeds
// (fixtures/query_trace.json, written by tests/answers/test_query.py).

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { decodePayload } from "../../src/data/decode.js";
import { parseQuery, evaluate, matchSummary, QueryError, QueryFilter, unpackBits, resolverFor, finiteStandIns, glob, foldCase, ATTR_KINDS, GRAMMAR, queryHelp, sampleTexts } from "../../src/data/query.js";
import { attrTermHits } from "../../src/page/page_attrs.js";
import { base64ToBytes } from "../../src/data/bytes.js";
import { createLocalModel } from "../../src/standalone.js";
import { queryAttrsFor } from "../../src/page/snapshot.js";
import { Requests } from "../../src/data/model.js";
import { makePayload } from "../helpers/make_payload.js";

const cases = JSON.parse(readFileSync(new URL("../fixtures/query_cases.json", import.meta.url), "utf8"));
const trace = JSON.parse(readFileSync(new URL("../fixtures/query_trace.json", import.meta.url), "utf8"));
const d = decodePayload(trace.payload);
/** @type {Record<string, DataView>} */
const views = {};
for (const [name, b64] of Object.entries(trace.attr_buffers)) {
  const bytes = base64ToBytes(/** @type {string} */ (b64));
  views[name] = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** @param {import("../../src/data/query.js").Term[]} terms */
function pageHits(terms) {
  const a = trace.attrs;
  return {
    spans: attrTermHits([a.span_end_attrs, a.span_start_attrs], d.nSpans, terms, views),
    events: attrTermHits([a.event_attrs], d.nEvents, terms, views),
  };
}

/** @param {string} text */
function run(text) {
  const terms = parseQuery(text);
  const attr = terms.filter((t) => ATTR_KINDS.includes(t.kind));
  return evaluate(d, terms, attr.length ? pageHits(attr) : null);
}

for (const c of cases.parse) {
  test(`parse: ${JSON.stringify(c.text)}`, () => {
    if (c.error) {
      assert.throws(
        () => parseQuery(c.text),
        (err) => err instanceof QueryError && err.problem === c.error.message && err.pos === c.error.pos && err.message.includes(`at character ${c.error.pos + 1}`),
      );
    } else {
      assert.deepEqual(parseQuery(c.text), c.terms);
    }
  });
}

for (const c of cases.evaluate) {
  test(`evaluate: ${JSON.stringify(c.query)}`, () => {
    const r = run(c.query);
    const rows = r.rowKeep ?? new Uint8Array(d.nSamples).fill(1);
    assert.deepEqual(trace.samples.filter((_, s) => rows[s]).sort((a, b) => a - b), c.samples);
    assert.equal(r.rows, c.samples.length);
    assert.equal(r.itemTerms, c.items ?? true);
    if (c.items === false) {
      assert.equal(r.keep, null);
      assert.equal(r.evKeep, null);
      return;
    }
    const keep = /** @type {Uint8Array} */ (r.keep);
    const evKeep = /** @type {Uint8Array} */ (r.evKeep);
    assert.deepEqual(trace.spans.filter((_, i) => keep[i]).sort(), [...c.spans].sort());
    assert.deepEqual(trace.events.filter((_, i) => evKeep[i]).sort(), [...c.events].sort());
    assert.equal(r.spans, c.spans.length);
    assert.equal(r.events, c.events.length);
  });
}

test("the header line counts what matched", () => {
  assert.equal(matchSummary(run("name:tool*"), d.nSamples), "3 spans, 1 event in 2 of 4 samples match");
  assert.equal(matchSummary(run("is:error"), d.nSamples), "1 span in 1 of 4 samples match");
  assert.equal(matchSummary(run("status:failed"), d.nSamples), "1 of 4 samples match");
});

test("bitmaps unpack in numpy's little bit order", () => {
  assert.deepEqual(Array.from(unpackBits(Uint8Array.from([0b00000101, 0b1]), 10)), [1, 0, 1, 0, 0, 0, 0, 0, 1, 0]);
  assert.deepEqual(Array.from(unpackBits(new Uint8Array(0), 3)), [0, 0, 0]);
});

/** A resolver whose answers the test hands out, in any order. */
function manualResolver() {
  /** @type {{terms: any[], resolve: (h: any) => void, reject: (e: Error) => void}[]} */
  const asked = [];
  /** @type {import("../../src/data/query.js").AttrResolver} */
  const resolve = (terms) => new Promise((res, rej) => asked.push({ terms, resolve: res, reject: rej }));
  return { asked, resolve };
}

function filterHost() {
  const { asked, resolve } = manualResolver();
  /** @type {any[]} */
  const applied = [];
  /** @type {any[]} */
  const statuses = [];
  const f = new QueryFilter({ data: () => d, apply: (r) => applied.push(r), status: (s) => statuses.push(s), resolve });
  return { f, asked, applied, statuses };
}

test("an attribute query waits for its answer; an older answer is dropped", async () => {
  const { f, asked, applied, statuses } = filterHost();
  f.run("tool=python");
  assert.equal(applied.length, 0);
  assert.equal(statuses.at(-1).state, "pending");
  assert.equal(statuses.at(-1).text, "matching…");
  f.run("has:group_size");
  asked[1].resolve(pageHits(asked[1].terms));
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(applied.length, 1);
  assert.deepEqual(trace.spans.filter((_, i) => applied[0].keep[i]).sort(), ["0:grp", "1:grp"]);
  asked[0].resolve(pageHits(asked[0].terms)); // the first query's answer, late
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(applied.length, 1);
  assert.equal(f.status.state, "idle");
});

test("a bad query says why and keeps the last good filter", () => {
  const { f, applied, statuses } = filterHost();
  f.run("name:tool");
  assert.equal(applied.length, 1);
  const good = f.result;
  f.run('name:tool is:"nope');
  assert.equal(applied.length, 1);
  assert.equal(f.result, good);
  assert.equal(statuses.at(-1).state, "error");
  assert.match(statuses.at(-1).text, /unclosed quote \(at character 14\)/);
  f.run("");
  assert.equal(applied.at(-1), null);
  assert.equal(f.result, null);
  f.run("  ");
  assert.equal(applied.length, 2, "no filter before, none after: nothing to apply");
});

test("the filter box counts an emoji before an error as one character, as Python does", () => {
  const { f, statuses } = filterHost();
  f.run('name:"\u{1F600}" is:"nope');
  // name:"😀" is 8 characters (9 UTF-16 units), then a space and is: the quote is the 13th
  assert.equal(statuses.at(-1).state, "error");
  assert.match(statuses.at(-1).text, /unclosed quote \(at character 13\)/);
});

test("a failed resolver shows a message and changes nothing", async () => {
  const { f, asked, applied } = filterHost();
  f.run("k=v");
  asked[0].reject(new Error("no reply from the kernel (is it running?)"));
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(applied.length, 0);
  assert.equal(f.status.state, "error");
  assert.match(f.status.text, /no reply from the kernel/);
});

/** A kernel stand-in: what the resolver sent, and a hand for its next reply. */
function fakeKernel() {
  /** @type {any[]} */
  const sent = [];
  /** @type {(msg: any) => void} */
  let deliver = () => {};
  const requests = {
    ask: (/** @type {any} */ content) => {
      sent.push(content);
      return { req: 1, promise: new Promise((res) => (deliver = res)) };
    },
  };
  return { sent, requests, deliver: (/** @type {any} */ msg) => deliver(msg) };
}

test("the kernel resolver sends query_attrs and reads its bitmaps", async () => {
  const { sent, requests, deliver } = fakeKernel();
  const resolve = resolverFor(/** @type {any} */ (requests));
  const terms = parseQuery("tool=python");
  const answer = resolve(terms, d);
  const bits = new Uint8Array(Math.ceil(d.nSpans / 8));
  bits[0] = 1;
  const b64 = (/** @type {Uint8Array} */ b) => Buffer.from(b).toString("base64");
  deliver({ type: "query_attrs", req: 1, n_spans: d.nSpans, n_events: d.nEvents, spans: b64(bits), events: b64(new Uint8Array(Math.ceil(d.nEvents / 8))) });
  const hits = await answer;
  assert.deepEqual(sent, [{ type: "query_attrs", terms }], "no view id in the payload: none sent");
  assert.equal(hits.spans.length, d.nSpans);
  assert.equal(hits.spans[0], 1);
  assert.equal(hits.spans.reduce((a, b) => a + b, 0), 1);
  const stale = resolve(terms, d);
  deliver({ type: "query_attrs", req: 1, n_spans: d.nSpans + 1, n_events: d.nEvents, spans: "", events: "" });
  await assert.rejects(stale, /another view/);
  const failed = resolve(terms, d);
  deliver({ type: "query_attrs", req: 1, error: "ValueError: bad" });
  await assert.rejects(failed, /ValueError: bad/);
});

test("a snapshot page answers query_attrs from its tables, through its local model", async () => {
  const details = { ...trace.attrs, views };
  const sizes = { buffers: { span_sample: { byteLength: d.nSpans * 4 }, ev_sample: { byteLength: d.nEvents * 4 } } };
  const model = createLocalModel(trace.payload, { queryAttrs: async (terms) => queryAttrsFor(/** @type {any} */ (details), sizes, terms) });
  const requests = new Requests(model);
  const resolve = resolverFor(requests);
  for (const text of ["tool=python", "has:group_size -turn>5", "score>0.5 tags=*a*"]) {
    const terms = parseQuery(text);
    const hits = await resolve(terms, d);
    const want = pageHits(terms);
    assert.deepEqual(Array.from(hits.spans), Array.from(want.spans), text);
    assert.deepEqual(Array.from(hits.events), Array.from(want.events), text);
  }
  const bare = new Requests(createLocalModel(trace.payload));
  await assert.rejects(resolverFor(bare)(parseQuery("k=v"), d), /not embedded in this page/);
  requests.dispose();
  bare.dispose();
});

/** @param {number} n */
const bitsOf = (n) => Buffer.from(new Uint8Array(Math.ceil(n / 8))).toString("base64");

test("the request carries the payload's view id; a reply for another view is refused", async () => {
  const { sent, requests, deliver } = fakeKernel();
  const resolve = resolverFor(/** @type {any} */ (requests), (x) => (x === d ? "v7" : undefined));
  const terms = parseQuery("tool=python");
  const body = { type: "query_attrs", req: 1, n_spans: d.nSpans, n_events: d.nEvents, spans: bitsOf(d.nSpans), events: bitsOf(d.nEvents) };
  const stale = resolve(terms, d);
  assert.deepEqual(sent.at(-1), { type: "query_attrs", terms, view: "v7" });
  deliver({ ...body, view: "v6" }); // same counts, another payload
  await assert.rejects(stale, /another view/);
  const bare = resolve(terms, d);
  deliver(body);
  await assert.rejects(bare, /another view/, "a kernel that knows views echoes it");
  const ok = resolve(terms, d);
  deliver({ ...body, view: "v7" });
  assert.equal((await ok).spans.length, d.nSpans);
  // A snapshot page answers from its own tables, without echoing a view.
  const page = { ...d, meta: { ...d.meta, attrs_embedded: true } };
  const local = resolverFor(/** @type {any} */ (requests), () => "v7")(terms, page);
  deliver(body);
  assert.equal((await local).spans.length, d.nSpans);
});

// Python's query.fold_case folds alike: the shared cases (final sigma, dotted capital I, astral letters).
for (const c of cases.fold) {
  test(`fold: ${JSON.stringify(c.text)}`, () => {
    assert.equal(foldCase(c.text), c.folded);
  });
}

// Python's query.glob is the same algorithm: the shared cases (a long pathological pair among them).
for (const c of cases.glob ?? []) {
  test(`glob: ${JSON.stringify(c.pattern).slice(0, 40)} vs ${JSON.stringify(c.text).slice(0, 40)}`, { timeout: 120000 }, () => {
    assert.equal(glob(c.pattern)(c.text), c.match);
  });
}

test("globs match in linear time: prefix, suffix, pieces left to right", { timeout: 120000 }, () => {
  /** @type {[string, string, boolean][]} */
  const cases = [
    ["abc", "abc", true],
    ["abc", "abd", false],
    ["", "", true],
    ["", "a", false],
    ["*", "", true],
    ["*", "anything", true],
    ["**", "", true],
    ["a**b", "ab", true],
    ["a**b", "axyb", true],
    ["ab*ba", "aba", false],
    ["ab*ba", "abba", true],
    ["a*a", "a", false],
    ["a*a", "aa", true],
    ["*a*b*", "xbxa", false],
    ["*a*b*", "xaxb", true],
    ["*aa*aa", "aaa", false],
    ["*aa*aa", "aaaa", true],
    ["a.c", "abc", false],
    ["a.c", "a.c", true],
    ["(x)", "(x)", true],
    ["(x)*", "x", false],
    ["[", "[", true],
    ["\\", "\\", true],
    ["a\\*", "a\\b", true],
    ["^$", "^$", true],
    ["a*", "a\nb", true],
  ];
  for (const [pattern, text, want] of cases) assert.equal(glob(pattern)(text), want, `${JSON.stringify(pattern)} vs ${JSON.stringify(text)}`);
  // A regular expression backtracks for ages on this (O(n^5) tries); the matcher scans the text a few times.
  const text = "a".repeat(20000);
  assert.equal(glob("*a*a*a*a*a*b")(text), false);
  assert.equal(glob("*a*a*a*a*a*")(text), true);
});

test("page attribute terms test a text once per dictionary entry, not per row", () => {
  const texts = ["python", "bash"];
  const data = new TextEncoder().encode(texts.join(""));
  const rows = 1000;
  const codes = Int32Array.from({ length: rows }, (_, i) => i % 2);
  const offsets = Int32Array.from([0, 6, 10]);
  const view = (/** @type {ArrayBufferView} */ a) => new DataView(a.buffer, a.byteOffset, a.byteLength);
  const buffers = { c: view(codes), o: view(offsets), t: view(data) };
  const table = { rows, columns: [{ key: "tool", kind: /** @type {const} */ ("text"), codes: "c", offsets: "o", data: "t" }], nones: {}, overflow: {} };
  let reads = 0;
  const term = { kind: "attr", neg: false, key: "tool", value: "py*", get op() {
    reads++;
    return "=";
  } };
  const hits = attrTermHits([table], rows, [term], buffers);
  assert.deepEqual(Array.from(hits.subarray(0, 4)), [1, 0, 1, 0]);
  assert.equal(hits.reduce((a, b) => a + b, 0), rows / 2);
  assert.ok(reads <= 10, `the term was read ${reads} times for ${rows} rows of 2 texts`);
});

test("an infinite comparison goes to the kernel as finite ones that mean the same", async () => {
  const values = [-Infinity, -Number.MAX_VALUE, -1, 0, 1, Number.MAX_VALUE, Infinity, NaN];
  for (const op of [">", ">=", "<", "<="]) {
    for (const target of [Infinity, -Infinity]) {
      const t = { kind: "attr", neg: false, key: "x", op, value: target };
      const standIns = /** @type {import("../../src/data/query.js").Term[]} */ (finiteStandIns(t));
      assert.deepEqual(JSON.parse(JSON.stringify(standIns)), standIns, "JSON carries them as they are");
      for (const x of values) {
        const want = attrHoldsNumber(op, x, target);
        const got = standIns.some((s) => attrHoldsNumber(/** @type {string} */ (s.op), x, s.value));
        assert.equal(got, want, `${x} ${op} ${target}`);
      }
    }
  }
  assert.equal(finiteStandIns({ kind: "attr", neg: false, key: "x", op: ">", value: 1e308 }), null);
  assert.equal(finiteStandIns({ kind: "attr", neg: false, key: "x", op: "=", value: "1e999" }), null);
  // Through the page's tables (which take Infinity as is), the same answer as evaluating directly.
  const details = { ...trace.attrs, views };
  const sizes = { buffers: { span_sample: { byteLength: d.nSpans * 4 }, ev_sample: { byteLength: d.nEvents * 4 } } };
  /** @type {any[]} */
  const asked = [];
  const model = createLocalModel(trace.payload, {
    queryAttrs: async (terms) => {
      asked.push(JSON.parse(JSON.stringify(terms))); // as the kernel would receive them
      return queryAttrsFor(/** @type {any} */ (details), sizes, asked.at(-1));
    },
  });
  const requests = new Requests(model);
  const resolve = resolverFor(requests);
  for (const text of ["score>1e999", "score<1e999", "-score<=1e999 has:score", "score>=-1e999 tool=python", "turn>-1e999", "-turn<-1e999"]) {
    const terms = parseQuery(text);
    const hits = await resolve(terms, d);
    const want = pageHits(terms);
    assert.deepEqual(Array.from(hits.spans), Array.from(want.spans), text);
    assert.deepEqual(Array.from(hits.events), Array.from(want.events), text);
  }
  assert.ok(asked.every((terms) => terms.every((/** @type {any} */ t) => t.kind !== "attr" || t.op === "=" || t.op === "!=" || Number.isFinite(t.value))), "no null or infinity sent");
  requests.dispose();
});

/**
 * @param {string} op
 * @param {number} x
 * @param {number} y
 */
function attrHoldsNumber(op, x, y) {
  return op === ">" ? x > y : op === ">=" ? x >= y : op === "<" ? x < y : x <= y;
}

test("bare words search id, source, status, label and trace id, case-insensitive (the old text filter's cases)", () => {
  const samples = [
    { sample_index: 10, source: "math", status: "completed", label: "Paris", trace_id: "aaa111" },
    { sample_index: 11, source: "deepsearch_with_tool", status: "failed", label: null, trace_id: "bbb222" },
    { sample_index: 12, source: "math", status: "truncated", label: "<img src=x onerror=alert(1)>", trace_id: "ccc333" },
    { sample_index: 113, source: "code", status: "completed", label: "Berlin", trace_id: "ddd444" },
  ];
  const spans = samples.map((_, i) => ({ sample: i, start: i, end: i + 1, name: "a" }));
  const p = decodePayload(makePayload({ samples, spans }).payload);
  const rows = (/** @type {string} */ text) => {
    const keep = evaluate(p, parseQuery(text), null).rowKeep;
    return keep ? Array.from(keep.keys()).filter((s) => keep[s]) : [0, 1, 2, 3];
  };
  assert.deepEqual(rows(""), [0, 1, 2, 3]);
  assert.deepEqual(rows("MATH"), [0, 2]);
  assert.deepEqual(rows("#11"), [1, 3]);
  assert.deepEqual(rows("failed"), [1]);
  assert.deepEqual(rows("paris"), [0]);
  assert.deepEqual(rows("ccc3"), [2]);
  assert.deepEqual(rows("onerror"), [2]);
  assert.deepEqual(rows("  berlin "), [3]);
  assert.deepEqual(rows("zzz"), []);
});

/**
 * query.js loaded afresh with the grammar's bare_word_fields set to `fields` for its
 * load (the JSON module is shared, so the change is undone before returning).
 * @param {string[]} fields
 */
async function queryWithBareWordFields(fields) {
  const before = GRAMMAR.bare_word_fields;
  GRAMMAR.bare_word_fields = fields;
  try {
    return await import(`../../src/data/query.js?bare_word_fields=${fields.join(",")}`);
  } finally {
    GRAMMAR.bare_word_fields = before;
  }
}

test("a bare word searches the grammar's bare_word_fields, in the grammar's order", async () => {
  // every field holds a text of its own (the index a number: the payload carries it so)
  const samples = [{ sample_index: 7, source: "SourceText", status: "StatusText",
    label: "LabelText", trace_id: "TraceText" }];
  const text = { sample_index: "7", source: "sourcetext", status: "statustext", label: "labeltext",
    trace_id: "tracetext" };
  const spans = [{ sample: 0, start: 0, end: 1, name: "a" }];
  const data = decodePayload(makePayload({ samples, spans }).payload);
  /** @param {string[]} fields */
  const searched = (fields) => fields
    .map((field) => `${GRAMMAR.bare_word_marks[field] ?? ""}${text[field]}`).join("\u0001");
  assert.deepEqual(Object.keys(text).sort(), [...GRAMMAR.bare_word_fields].sort(), "every field");
  assert.deepEqual(sampleTexts(data), [searched(GRAMMAR.bare_word_fields)]);
  // the order comes from the grammar, not a list of the renderer's own
  const reordered = [...GRAMMAR.bare_word_fields].reverse();
  const fresh = await queryWithBareWordFields(reordered);
  assert.deepEqual(fresh.sampleTexts(data), [searched(reordered)]);
  // a field the renderer cannot read fails at load instead of going unsearched
  await assert.rejects(queryWithBareWordFields([...GRAMMAR.bare_word_fields, "prompt"]),
    /bare word searches "prompt"/);
});

test("the filter box's help lists every field, operator, unit and is: value of the grammar", () => {
  const help = queryHelp();
  const words = help.split(/[\s;(),]+/);
  for (const name of GRAMMAR.colon_fields) assert.ok(help.includes(`${name}:`), name);
  for (const name of GRAMMAR.compared_fields) assert.ok(words.includes(`${name}>N`), name);
  assert.ok(words.includes("attempt:N") && words.includes("name:VALUE"));
  assert.ok(help.includes(`(${GRAMMAR.order_operators.join(" ")};`));
  for (const op of GRAMMAR.equality_operators) assert.ok(words.includes(`key${op}value`), op);
  for (const unit of Object.keys(GRAMMAR.units)) assert.ok(words.includes(unit), unit);
  for (const value of GRAMMAR.is_values) assert.ok(words.includes(`is:${value}`), value);
  const searched = help.slice(help.indexOf("a bare word searches"));
  for (const name of GRAMMAR.bare_word_fields) {
    assert.ok(searched.includes(name.replace(/_/g, " ")), name);
  }
  const grown = { ...GRAMMAR, colon_fields: [...GRAMMAR.colon_fields, "engine"],
    compared_fields: [...GRAMMAR.compared_fields, "tokens"], units: { ...GRAMMAR.units, d: [86400, 1] },
    bare_word_fields: [...GRAMMAR.bare_word_fields].reverse() };
  const grownWords = queryHelp(grown).split(/[\s;(),]+/);
  assert.ok(grownWords.includes("engine:VALUE") && grownWords.includes("tokens>N") && grownWords.includes("d"));
  // the bare word fields in the grammar's order: here, its last two first
  const [last, nextToLast] = GRAMMAR.bare_word_fields.map((name) => name.replace(/_/g, " "))
    .reverse();
  assert.ok(queryHelp(grown).includes(`searches ${last}, ${nextToLast},`), queryHelp(grown));
});

test("duration terms read the recorded duration, as the kernel's query does", () => {
  // Drawn ends never precede starts, and offsets 2 h into a sample lose digits: a span
  // whose end was recorded 2 s before its start, and one of 300 µs at 7,000 s.
  const { payload } = makePayload({
    samples: [{}],
    spans: [{ sample: 0, start: 5, end: 5, dur: -2, name: "backwards", lane: 0, depth: 0 },
      { sample: 0, start: 7000, end: 7000.0003, name: "tool", lane: 1, depth: 0 }],
  });
  const data = decodePayload(payload);
  const kept = (/** @type {string} */ text) => {
    const keep = /** @type {Uint8Array} */ (evaluate(data, parseQuery(text), null).keep);
    return [...keep].flatMap((on, i) => (on ? [data.names[data.spanName[i]]] : []));
  };
  assert.deepEqual(kept("duration<0"), ["backwards"]);
  assert.deepEqual(kept("duration<=300us"), ["backwards", "tool"]);
  assert.deepEqual(kept("duration>=0"), ["tool"]);
});
