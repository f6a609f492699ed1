// Flame table (flame.js) and icicle layout (icicle.js) on hand-built payloads
// whose answer is known, and on the payloads of tests/answers/test_views_fixture.py,
// where the table must equal analysis.flame (whole time and a window).

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { decodePayload, F_VIRTUAL, F_PD_SEGMENT_SPANS } from "../../src/data/decode.js";
import { flameOf } from "../../src/data/flame.js";
import { quantile } from "../../src/data/quantile.js";
import { measuredSpans } from "../../src/data/critical.js";
import { icicleLayout, frameAt, ROW_H } from "../../src/panels/icicle.js";
import { makePayload } from "../helpers/make_payload.js";

const close = (/** @type {number} */ a, /** @type {number} */ b, tol = 1e-4) => Math.abs(a - b) <= tol;

/** @param {number} sample */
const agent = (sample) => [
  { sample, start: 0, end: 10, name: "rollout" },
  { sample, start: 0, end: 4, name: "generate", depth: 1, parent: 0 },
  { sample, start: 0, end: 1, name: "generate [P]", depth: 2, parent: 1, flags: F_VIRTUAL, lane: 2 },
  { sample, start: 1, end: 4, name: "generate [D]", depth: 2, parent: 1, flags: F_VIRTUAL, lane: 3 },
  { sample, start: 4, end: 7, name: "tool", depth: 1, parent: 0, lane: 1 },
  { sample, start: 4, end: 9, name: "tool", depth: 1, parent: 0, lane: 4 },
  { sample, start: 9, end: 10, name: "reward", depth: 1, parent: 0, lane: 1 },
];

/** Two agents (the second's parents shifted to its own spans). */
function twoAgents() {
  const a = agent(0);
  const b = agent(1).map((s) => ({ ...s, parent: s.parent === undefined ? undefined : s.parent + a.length }));
  return decodePayload(makePayload({ samples: [{}, {}], spans: [...a, ...b] }).payload);
}

/** @param {import("../../src/data/flame.js").Flame} f */
const byPath = (f) => Object.fromEntries(f.rows.map((r) => [r.path, r]));

test("paths, counts, totals; self never below zero with concurrent children", () => {
  const d = twoAgents();
  const t = byPath(flameOf(d, measuredSpans(d)));
  assert.deepEqual(Object.keys(t), ["rollout", "rollout;generate", "rollout;generate;generate [D]", "rollout;generate;generate [P]", "rollout;reward", "rollout;tool"]);
  assert.equal(t.rollout.count, 2);
  assert.ok(close(t.rollout.total, 20));
  assert.equal(t.rollout.self, 0); // children cover 0-10 (the tools overlap)
  assert.equal(t["rollout;tool"].count, 4);
  assert.ok(close(t["rollout;tool"].total, 16));
  assert.ok(close(t["rollout;tool"].p50, 4) && close(t["rollout;tool"].p95, 5));
  assert.ok(close(t["rollout;generate;generate [D]"].p50, 3));
  assert.equal(t["rollout;generate"].self, 0);
  assert.deepEqual(new Set(Object.values(t).map((r) => r.depth)), new Set([0, 1, 2]));
});

test("a window clips spans to it and drops those outside", () => {
  const d = twoAgents();
  const t = byPath(flameOf(d, measuredSpans(d), [5, 8]));
  assert.ok(close(t["rollout;tool"].total, 2 * (2 + 3)));
  assert.equal(t.rollout.self, 0);
  assert.ok(!("rollout;reward" in t) && !("rollout;generate" in t));
});

test("only included spans count; a span whose parent is left out starts its own path", () => {
  const d = twoAgents();
  const include = new Uint8Array(d.nSpans);
  for (let i = 0; i < d.nSpans; i++) include[i] = d.spanSample[i] === 1 && d.names[d.spanName[i]] !== "rollout" ? 1 : 0;
  const f = flameOf(d, include);
  const t = byPath(f);
  assert.equal(t.tool.count, 2);
  assert.ok(!("rollout" in t));
  // spanRow maps every counted span to its row, the others to -1.
  for (let i = 0; i < d.nSpans; i++) assert.equal(f.spanRow[i] >= 0, include[i] === 1);
  assert.equal(f.rows[f.spanRow[d.spanOff[1] + 1]].path, "generate");
});

test("an open span counts to its display end; quantiles interpolate as pandas does", () => {
  assert.equal(quantile([1, 2, 3, 4], 0.5), 2.5);
  assert.ok(close(quantile([1, 2, 3, 4], 0.95), 3.85));
  const d = decodePayload(makePayload({ samples: [{}], spans: [{ sample: 0, start: 2, end: 6, name: "generate", flags: 1 }] }).payload);
  assert.equal(flameOf(d, null).rows[0].total, 4);
});

/**
 * Two generations whose prefill 0-1 has segments bootstrap 0-0.25 and forward
 * 0.5-1 (the second's forward 0.5-0.9), decode 1-4 none.
 * @param {number} flags the virtual spans' flags
 */
function pdWithSegments(flags) {
  const spans = [];
  const segs = [];
  for (const [sample, forwardEnd] of [[0, 1], [1, 0.9]]) {
    const base = spans.length;
    spans.push(
      { sample, start: 0, end: 4, name: "generate" },
      { sample, start: 0, end: 1, name: "generate [P]", parent: base, depth: 1, lane: 2, flags },
      { sample, start: 1, end: 4, name: "generate [D]", parent: base, depth: 1, lane: 3, flags },
    );
    segs.push({ span: base + 1, start: 0, end: 0.25, name: "prefill_bootstrap" }, { span: base + 1, start: 0.5, end: forwardEnd, name: "prefill_forward" });
  }
  return decodePayload(makePayload({ samples: [{}, {}], spans, segs }).payload);
}

test("child form (F_PD_SEGMENT_SPANS): a frame per segment name under its phase, the phase's self the rest", () => {
  const d = pdWithSegments(F_VIRTUAL | F_PD_SEGMENT_SPANS);
  const f = flameOf(d, measuredSpans(d));
  const t = byPath(f);
  assert.deepEqual(Object.keys(t), ["generate", "generate;generate [D]", "generate;generate [P]", "generate;generate [P];prefill_bootstrap", "generate;generate [P];prefill_forward"]);
  assert.ok(close(t["generate;generate [P]"].total, 2));
  assert.ok(close(t["generate;generate [P]"].self, 0.25 + 0.35), "the phase's self: its length minus its segments");
  const fwd = t["generate;generate [P];prefill_forward"];
  assert.equal(fwd.count, 2);
  assert.ok(close(fwd.total, 0.9) && close(fwd.self, 0.9) && close(fwd.p50, 0.45));
  assert.equal(fwd.depth, 2);
  assert.equal(f.rows[fwd.parent].path, "generate;generate [P]");
  assert.ok(close(t["generate;generate [D]"].self, 6));
  // segRow: each segment's frame; a window clips segments as it clips spans.
  for (let g = 0; g < d.nSegs; g++) assert.equal(f.rows[f.segRow[g]].name, d.names[d.segName[g]]);
  const w = byPath(flameOf(d, measuredSpans(d), [0.2, 0.7]));
  assert.ok(close(w["generate;generate [P];prefill_bootstrap"].total, 0.1) && close(w["generate;generate [P];prefill_forward"].total, 0.4));
  assert.ok(close(w["generate;generate [P]"].self, 2 * 0.25));
  // A phase left out leaves its segments out too.
  const include = measuredSpans(d).slice();
  for (let i = 0; i < d.nSpans; i++) if (d.names[d.spanName[i]] === "generate [P]") include[i] = 0;
  assert.ok(!Object.keys(byPath(flameOf(d, include))).some((p) => p.includes("prefill_")));
});

test("attribute form (no flag): the phase keeps all its time, no segment frames", () => {
  const d = pdWithSegments(F_VIRTUAL);
  const f = flameOf(d, measuredSpans(d));
  const t = byPath(f);
  assert.deepEqual(Object.keys(t), ["generate", "generate;generate [D]", "generate;generate [P]"]);
  assert.ok(close(t["generate;generate [P]"].self, 2));
  assert.ok(f.segRow.every((r) => r === -1));
});

test("many children on interleaved lanes: self time as with few", () => {
  // Children arrive lane by lane, two interleaved sorted runs: past 64 the union is
  // taken through a sorted index (insertion sort moved about k*k/4 of them).
  for (const n of [10, 1000]) {
    const spans = [{ sample: 0, start: 0, end: n + 1, name: "turns" }];
    for (let k = 0; k < n; k++) {
      spans.push({ sample: 0, start: k, end: k + 1.5, name: "tool_call", depth: 1, parent: 0, lane: 1 + (k % 2) });
    }
    spans.sort((a, b) => (a.lane ?? 0) - (b.lane ?? 0) || a.start - b.start);
    const data = decodePayload(makePayload({ samples: [{}], spans }).payload);
    const rows = flameOf(data, measuredSpans(data)).rows;
    const root = rows.find((row) => row.path === "turns");
    assert.ok(root && close(root.self, 0.5), `n=${n}: root self ${root?.self}`);
  }
});

test("icicle: roots by total, children inside their parent, overlapping children fit", () => {
  const d = twoAgents();
  const f = flameOf(d, measuredSpans(d));
  const lay = icicleLayout(f.rows, 1000);
  const t = byPath(f);
  const k = (/** @type {string} */ p) => f.rows.indexOf(t[p]);
  assert.equal(lay.depth, 3);
  assert.equal(lay.w[k("rollout")], 1000);
  // generate 8 s, tools 16 s, reward 2 s under a 20 s parent: 26 s of children squeezed into it.
  const kids = ["rollout;generate", "rollout;reward", "rollout;tool"].map(k);
  assert.ok(close(kids.reduce((a, c) => a + lay.w[c], 0), 1000));
  assert.ok(close(lay.w[k("rollout;tool")] / lay.w[k("rollout;generate")], 2));
  for (const c of kids) assert.ok(lay.x[c] >= 0 && lay.x[c] + lay.w[c] <= 1000 + 1e-6);
  const gen = k("rollout;generate");
  assert.equal(frameAt(f.rows, lay, lay.x[gen] + 1, ROW_H + 1), gen);
  assert.equal(frameAt(f.rows, lay, 5, 1), k("rollout"));
  assert.equal(frameAt(f.rows, lay, 5, 10 * ROW_H), -1);
});

const fixture = JSON.parse(readFileSync(new URL("../fixtures/critical_flame.json", import.meta.url), "utf8"));

/**
 * @param {import("../../src/data/flame.js").FlameRow[]} got
 * @param {any[]} want
 * @param {string} what
 */
function sameTable(got, want, what) {
  const w = Object.fromEntries(want.map((r) => [r.path, r]));
  assert.deepEqual(got.map((r) => r.path).sort(), Object.keys(w).sort(), `${what}: paths`);
  for (const r of got) {
    const e = w[r.path];
    assert.equal(r.count, e.count, `${what} ${r.path}: count`);
    for (const key of /** @type {const} */ (["total", "self", "p50", "p95"])) assert.ok(close(r[key], e[key]), `${what} ${r.path}: ${key} ${r[key]} vs ${e[key]}`);
  }
}

for (const c of fixture.cases) {
  test(`equals analysis.flame: ${c.name}`, () => {
    const d = decodePayload(c.payload);
    sameTable(flameOf(d, measuredSpans(d)).rows, c.flame, "all time");
    sameTable(flameOf(d, measuredSpans(d), c.window).rows, c.flame_window, "window");
  });
}

test("a name holding ';' or a backslash stays one frame: escaped in the path, depth and parent carried", () => {
  const d = decodePayload(
    makePayload({
      samples: [{}],
      spans: [
        { sample: 0, start: 0, end: 4, name: "a;b" },
        { sample: 0, start: 1, end: 2, name: "c\\d", depth: 1, parent: 0 },
      ],
    }).payload,
  );
  const f = flameOf(d, null);
  const t = byPath(f);
  assert.deepEqual(Object.keys(t).sort(), ["a\\;b", "a\\;b;c\\\\d"]);
  assert.equal(t["a\\;b"].depth, 0);
  assert.equal(t["a\\;b"].name, "a;b");
  assert.equal(t["a\\;b;c\\\\d"].depth, 1);
  assert.equal(t["a\\;b;c\\\\d"].parent, f.rows.indexOf(t["a\\;b"]));
  const lay = icicleLayout(f.rows, 100);
  assert.equal(lay.depth, 2, "the child is drawn under its parent, not beside it");
});

test("a path thousands of frames deep lays out without exhausting the stack", () => {
  // Rows as the table gives them: each the only child of the one before.
  const N = 20000;
  const rows = Array.from({ length: N }, (_, k) => ({ path: `p${k}`, name: "n", depth: k, parent: k - 1, count: 1, total: N - k, self: 1, p50: 1, p95: 1 }));
  const lay = icicleLayout(rows, 1000);
  assert.equal(lay.depth, N);
  assert.ok(lay.w[N - 1] > 0);
});

test("rows sort by code point as Python's flame does: an emoji after U+FF01", () => {
  const spans = ["😀", "\uff01", "中", "z"].map((name, sample) => ({ sample, start: 0, end: 1, name }));
  const d = decodePayload(makePayload({ samples: [{}, {}, {}, {}], spans }).payload);
  const rows = flameOf(d, measuredSpans(d)).rows;
  // Python: sorted(["😀", "\uff01", "中", "z"])
  assert.deepEqual(rows.map((r) => r.path), ["z", "中", "\uff01", "😀"]);
});

// A window that holds a child but none of the parent it outlived: the child keeps
// its path, as analysis.flame keeps it (tests/answers/test_flame_window.py, same
// spans and figures), and the frames above it are as wide as it.

/** rollout 0-5 > generate 0-4 > (tool 1-2, reward 3-9): the reward outlives both. */
function outliving() {
  const spans = [
    { sample: 0, start: 0, end: 5, name: "rollout" },
    { sample: 0, start: 0, end: 4, name: "generate", depth: 1, parent: 0, lane: 1 },
    { sample: 0, start: 1, end: 2, name: "tool", depth: 2, parent: 1, lane: 2 },
    { sample: 0, start: 3, end: 9, name: "reward", depth: 2, parent: 1, lane: 2 },
  ];
  return decodePayload(makePayload({ samples: [{}], spans }).payload);
}

/**
 * @param {import("../../src/data/decode.js").Data} d
 * @param {[number, number]|null} window
 */
const windowed = (d, window) => byPath(flameOf(d, measuredSpans(d), window));

test("a window holding only the outliving child keeps it under its parents", () => {
  const d = outliving();
  const t = windowed(d, [6, 9]);
  assert.deepEqual(Object.keys(t), ["rollout", "rollout;generate", "rollout;generate;reward"]);
  assert.equal(t["rollout;generate;reward"].count, 1);
  assert.ok(close(t["rollout;generate;reward"].total, 3) && close(t["rollout;generate;reward"].self, 3));
  for (const path of ["rollout", "rollout;generate"]) {
    assert.equal(t[path].count, 0, path);
    assert.equal(t[path].total, 0, path);
    assert.ok(Number.isNaN(t[path].p50) && Number.isNaN(t[path].p95), path);
  }
  const f = flameOf(d, measuredSpans(d), [6, 9]);
  assert.deepEqual(Array.from(f.spanRow).map((row) => (row < 0 ? null : f.rows[row].path)), [null, null, null, "rollout;generate;reward"]);
});

test("a window holding part of the grandparent: the outliving child is no root beside it", () => {
  const t = windowed(outliving(), [4.5, 9]);
  assert.deepEqual(Object.keys(t), ["rollout", "rollout;generate", "rollout;generate;reward"]);
  assert.ok(close(t.rollout.total, 0.5) && t.rollout.count === 1);
  assert.equal(t["rollout;generate"].count, 0);
  assert.ok(close(t["rollout;generate;reward"].total, 4.5));
});

test("windows that split the time add up, path by path, to the total without one", () => {
  const d = outliving();
  const [early, late] = [windowed(d, [0, 6]), windowed(d, [6, 9])];
  for (const [path, row] of Object.entries(windowed(d, null))) {
    assert.ok(close((early[path]?.total ?? 0) + (late[path]?.total ?? 0), row.total), path);
  }
});

test("icicle: the frames above an outliving child the window holds alone are as wide as it", () => {
  const d = outliving();
  const f = flameOf(d, measuredSpans(d), [6, 9]);
  const lay = icicleLayout(f.rows, 1000);
  assert.equal(lay.depth, 3);
  for (let row = 0; row < f.rows.length; row++) assert.ok(close(lay.w[row], 1000), f.rows[row].path);
});
