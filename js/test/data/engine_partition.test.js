// The partition of engine time (engine_partition.js) on hand-built payloads: the
// waits of many retractions in several slices, each to the next child slice of the
// slice it interrupted; and what the band shows under a visibility (`shownPieces`),
// the unfiltered pieces when every slice is shown, a kept request's slices' time when
// a query keeps the request and none of its slices; and the window of a request under
// a generation span still open, which its drawn end does not cut.

import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_OPEN } from "../../src/data/decode.js";
import { phasePieces, samplePieces, secondsByCode, shownPieces } from "../../src/data/engine_partition.js";
import { spanVisibility } from "../../src/data/filters.js";
import { evaluate, parseQuery } from "../../src/data/query.js";
import { engineTree } from "../helpers/engine_spans.js";
import { makePayload } from "../helpers/make_payload.js";

const PHASES = { queue: ["prefill_waiting"], prefill: ["prefill_forward"], decode: ["decode_forward"], pd: [] };
const ALL = { showOpen: true, showEvents: true, showUnmatched: true, attempt: -1, attemptMode: /** @type {"filter"} */ ("filter"), highlightName: -1 };

/**
 * @param {import("../../src/data/decode.js").Data} d
 * @param {import("../../src/data/engine_partition.js").PhasePieces} pieces
 */
function said(d, pieces) {
  return Array.from({ length: pieces.n }, (_, i) => [pieces.start[i], pieces.end[i], d.bandPhases[pieces.code[i] - 1]]);
}

test("retractions: each wait runs from its event to the next child slice of the slice it interrupted", () => {
  // the re-runs listed out of time order; the last retraction in the first
  // decode_forward has no re-run after it, so no wait
  const spans = engineTree(`
    sglang_generate          0    300
      sglang request         0    200   lane 1
        decode_forward       0    100   lane 2
          prefill_forward    50   52    lane 3
          prefill_forward    10   12    lane 3
          prefill_forward    30   32    lane 3
        decode_forward       100  200   lane 2
          prefill_forward    150  160   lane 3
  `);
  const events = [60, 40, 5, 20].map((ts) => ({ sample: 0, ts, name: "retract", lane: 2, parent: 2 }));
  events.push({ sample: 0, ts: 120, name: "retract", lane: 2, parent: 6 });
  const d = decodePayload(makePayload({ samples: [{}], spans, events, meta: { engine_phases: PHASES } }).payload);
  assert.deepEqual(said(d, samplePieces(d, 0)), [
    [0, 5, "decode"], [5, 10, "queue"], [10, 12, "prefill"], [12, 20, "decode"], [20, 30, "queue"], [30, 32, "prefill"],
    [32, 40, "decode"], [40, 50, "queue"], [50, 52, "prefill"], [52, 120, "decode"], [120, 150, "queue"], [150, 160, "prefill"],
    [160, 200, "decode"],
  ]);
});

test("shownPieces: all shown, the pieces the figures count; a wait hidden and dimmed with its slice", () => {
  const spans = engineTree(`
    sglang_generate          0    10
      sglang request         0    10    lane 1
        decode_forward       0    10    lane 2
          prefill_forward    6    7     lane 3
  `);
  const events = [{ sample: 0, ts: 4, name: "retract", lane: 2, parent: 2 }];
  const d = decodePayload(makePayload({ samples: [{}], spans, events, meta: { engine_phases: PHASES } }).payload);
  const vis = spanVisibility(d, ALL);
  const all = shownPieces(d, 0, vis);
  assert.deepEqual(said(d, all), said(d, samplePieces(d, 0)));
  assert.equal(all.start, samplePieces(d, 0).start, "the kept pieces themselves");
  assert.deepEqual([...all.dim], [0, 0, 0, 0]);
  const outer = d.spanParent[d.spanParent.findIndex((_, i) => d.names[d.spanName[i]] === "prefill_forward")];
  vis[outer] = 2;
  const dimmed = shownPieces(d, 0, vis);
  assert.deepEqual(said(d, dimmed), [[0, 4, "decode"], [4, 6, "queue"], [6, 7, "prefill"], [7, 10, "decode"]]);
  assert.deepEqual([...dimmed.dim], [1, 1, 0, 1]);
  vis[outer] = 0;
  const hidden = shownPieces(d, 0, vis);
  assert.deepEqual(said(d, hidden), [[6, 7, "prefill"]]);
  assert.deepEqual([...hidden.dim], [0]);
});

/** A PD request's two halves, the prefill half's KV transfer under its sender. */
const PD_PAIR = `
    sglang_generate                 0   60
      sglang prefill request        10  30   lane 1
        prefill_waiting             10  14   lane 2
        prefill_forward             14  24   lane 2
        sglang kv sender            24  28   lane 3
          mooncake_send             24  28   lane 4
      sglang decode request         10  58   lane 5
        decode_bootstrap            10  28   lane 6
        decode_loop                 30  58   lane 6
`;

/**
 * The band of sample 0 under a query typed in the filter box, with `focus` dimming
 * what it leaves out: [from, to, phase, "faint"?] per piece.
 * @param {string} query
 * @param {Uint8Array|null} [focus]
 */
function bandUnder(query, focus = null) {
  const phases = { ...PHASES, decode: ["decode_loop"], pd: ["decode_bootstrap", "mooncake_send"] };
  const d = decodePayload(makePayload({ samples: [{}], spans: engineTree(PD_PAIR), meta: { engine_phases: phases } }).payload);
  const { keep } = evaluate(d, parseQuery(query), null);
  const pieces = shownPieces(d, 0, spanVisibility(d, { ...ALL, keep, focus }));
  return said(d, pieces).map((piece, i) => (pieces.dim[i] ? [...piece, "faint"] : piece));
}

test("shownPieces: a kept request whose slices the query hides shows their time, as the figures count it", () => {
  // requests hold no time of their own: a kept one's time is its slices'
  assert.deepEqual(bandUnder('name:"sglang prefill request"'), [[10, 14, "queue"], [14, 24, "prefill"], [24, 28, "pd"]]);
  assert.deepEqual(bandUnder('name:"sglang decode request"'), [[10, 28, "pd"], [30, 58, "decode"]]);
  // a kept sender stands for its own slices only
  assert.deepEqual(bandUnder('name:"sglang kv sender"'), [[24, 28, "pd"]]);
  // dimmed by a focus, it shows faint
  assert.deepEqual(bandUnder('name:"sglang kv sender"', new Uint8Array(9)), [[24, 28, "pd", "faint"]]);
});

test("shownPieces: a hidden slice under nested senders takes its nearest kept holder's visibility", () => {
  const tree = `
    sglang_generate                 0   60
      sglang prefill request        10  30   lane 1
        prefill_forward             10  20   lane 2
        sglang kv sender            20  30   lane 3
          mooncake_send             20  24   lane 4
          sglang kv sender          24  30   lane 5
            mooncake_send           24  30   lane 6
  `;
  const phases = { ...PHASES, pd: ["mooncake_send"] };
  const d = decodePayload(makePayload({ samples: [{}], spans: engineTree(tree), meta: { engine_phases: phases } }).payload);
  const nameOf = (/** @type {number} */ i) => d.names[d.spanName[i]];
  const [request] = [...Array(d.nSpans).keys()].filter((i) => nameOf(i) === "sglang prefill request");
  const [outer, inner] = [...Array(d.nSpans).keys()].filter((i) => nameOf(i) === "sglang kv sender");
  /** @param {Record<number, number>} kept @returns {any[]} */
  const band = (kept) => {
    const vis = new Uint8Array(d.nSpans);
    for (const [span, visibility] of Object.entries(kept)) vis[Number(span)] = visibility;
    const pieces = shownPieces(d, 0, vis);
    return said(d, pieces).map((piece, i) => (pieces.dim[i] ? [...piece, "faint"] : piece));
  };
  // the request alone stands for every slice beneath it, through both senders
  assert.deepEqual(band({ [request]: 1 }), [[10, 20, "prefill"], [20, 30, "pd"]]);
  // the inner sender, kept dimmed, is nearer its slice than the request
  assert.deepEqual(band({ [request]: 1, [inner]: 2 }), [[10, 20, "prefill"], [20, 24, "pd"], [24, 30, "pd", "faint"]]);
  // a sender with a slice drawn stands for none: its hidden slice goes as when no holder is kept
  assert.deepEqual(band({ [outer]: 1, [inner + 1]: 1 }), [[24, 30, "pd"]]);
});

test("shownPieces: a kept request with slices still shown does not bring back the ones hidden", () => {
  // prefill_forward's time goes to the slice that ran beside it, decode_bootstrap
  assert.deepEqual(bandUnder("-name:prefill_forward"), [[10, 14, "queue"], [14, 28, "pd"], [30, 58, "decode"]]);
});

/** A request 1-9 s and its slices, under a generation 0-4 s (its drawn end, when open). */
const UNDER_GENERATION = `
    sglang_generate          0    4
      sglang request         1    9    lane 1
        prefill_waiting      1    1.5  lane 2
        prefill_forward      1.5  2.5  lane 2
        decode_forward       3    9    lane 2
`;

/**
 * The pieces of sample 0 built from UNDER_GENERATION, its generation open or not.
 * @param {boolean} open
 */
function underGeneration(open) {
  const spans = engineTree(UNDER_GENERATION);
  if (open) spans[0].flags = F_OPEN;
  const d = decodePayload(makePayload({ samples: [{}], spans, meta: { engine_phases: PHASES } }).payload);
  assert.equal(!!(d.spanFlags[0] & F_OPEN), open);
  assert.equal(d.spanEnd[0], 4, "an open span travels with its drawn end");
  return { d, pieces: samplePieces(d, 0) };
}

test("an open generation's drawn end cuts none of its requests' time; a closed one's end does", () => {
  // as engine_breakdown: an open span's end is unknown (NaN in the frames), so its
  // window clips nothing after its start
  const open = underGeneration(true);
  assert.deepEqual(said(open.d, open.pieces), [[1, 1.5, "queue"], [1.5, 2.5, "prefill"], [3, 9, "decode"]]);
  const seconds = secondsByCode(open.d, open.pieces);
  const of = (/** @type {string} */ phase) => seconds[open.d.bandPhases.indexOf(phase) + 1];
  assert.deepEqual([of("queue"), of("prefill"), of("decode")], [0.5, 1, 6]);
  // the details panel's figures for the request are the band's
  const request = [...Array(open.d.nSpans).keys()].find((i) => open.d.names[open.d.spanName[i]] === "sglang request");
  assert.deepEqual(said(open.d, phasePieces(open.d, [/** @type {number} */ (request)])), said(open.d, open.pieces));
  const closed = underGeneration(false);
  assert.deepEqual(said(closed.d, closed.pieces), [[1, 1.5, "queue"], [1.5, 2.5, "prefill"], [3, 4, "decode"]]);
});

test("an open generation still clips its requests' time before its start", () => {
  const spans = engineTree(`
    sglang_generate          2    4
      sglang request         1    9    lane 1
        prefill_waiting      1    3    lane 2
        decode_forward       3    9    lane 2
  `);
  spans[0].flags = F_OPEN;
  const d = decodePayload(makePayload({ samples: [{}], spans, meta: { engine_phases: PHASES } }).payload);
  assert.deepEqual(said(d, samplePieces(d, 0)), [[2, 3, "queue"], [3, 9, "decode"]]);
});
