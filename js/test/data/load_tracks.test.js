// The engines' load tracks (load_tracks.js): decoding the load columns into series,
// the value at an instant (step-wise), summing across engines (max for KV token
// usage), the series drawn per mode, labels and values as shown.

import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload } from "../../src/data/decode.js";
import { decodeLoad, valueAt, lastAtOrBefore, combineSeries, drawnSeries, trackMax, seriesLabel, formatLoadValue, LOAD_TRACKS } from "../../src/data/load_tracks.js";
import { tracksLayout, tracksHeight, MAX_TRACKS_H, TRACKS_PAD } from "../../src/render/tracks.js";
import { makePayload } from "../helpers/make_payload.js";

/** Two engines: running (a: 3 then 5 from t=2; b: 4 from t=1), token usage (a 0.5, b 0.75). */
const LOAD = [
  { engine: 0, track: "running", ts: 0, value: 3 },
  { engine: 0, track: "running", ts: 2, value: 5 },
  { engine: 0, track: "running", ts: 4, value: 5 },
  { engine: 0, track: "token_usage", ts: 0, value: 0.5 },
  { engine: 1, track: "running", ts: 1, value: 4 },
  { engine: 1, track: "running", ts: 3, value: 4 },
  { engine: 1, track: "token_usage", ts: 1, value: 0.75 },
  { engine: 1, track: "token_usage", ts: 3, value: 0.25 },
];

/**
 * @param {any[]} load
 * @param {string[]} [engines]
 */
function decoded(load, engines = ["engine-a", "engine-b"]) {
  return decodePayload(makePayload({ samples: [{ start: 0, end: 5 }], load, meta: { load_engines: engines } }).payload);
}

test("the load columns decode into one series per engine and track, times sorted", () => {
  const load = decoded(LOAD).load;
  assert.deepEqual(load.engines, ["engine-a", "engine-b"]);
  assert.equal(load.n, LOAD.length);
  assert.deepEqual(load.series.map((s) => [s.engine, s.track, Array.from(s.ts), Array.from(s.value)]), [
    [0, "running", [0, 2, 4], [3, 5, 5]],
    [0, "token_usage", [0], [0.5]],
    [1, "running", [1, 3], [4, 4]],
    [1, "token_usage", [1, 3], [0.75, 0.25]],
  ]);
  // out of order within a series (another producer): sorted, not dropped
  const shuffled = decoded([LOAD[2], LOAD[0], LOAD[1]]).load;
  assert.deepEqual(Array.from(shuffled.series[0].ts), [0, 2, 4]);
  assert.deepEqual(Array.from(shuffled.series[0].value), [3, 5, 5]);
});

test("no load: no series, and the tracks take no room", () => {
  const load = decoded([], []).load;
  assert.equal(load.series.length, 0);
  assert.equal(tracksHeight(load, false), 0);
  assert.equal(tracksHeight(load, true), 0);
  assert.equal(decodeLoad({}, {}, []).series.length, 0, "a payload without the columns");
});

test("a series reads the last scrape at or before an instant (NaN before the first)", () => {
  const [a] = decoded(LOAD).load.series;
  assert.ok(Number.isNaN(valueAt(a, -0.5)));
  assert.equal(valueAt(a, 0), 3);
  assert.equal(valueAt(a, 1.999), 3);
  assert.equal(valueAt(a, 2), 5);
  assert.equal(valueAt(a, 100), 5, "the last scrape holds after it");
  assert.equal(lastAtOrBefore(a.ts, 3), 1);
  assert.equal(lastAtOrBefore(a.ts, -1), -1);
});

test("summed: running adds the engines' steps, token usage takes the fullest engine", () => {
  const load = decoded(LOAD).load;
  const [running, usage] = drawnSeries(load, false);
  assert.equal(running.engine, -1);
  assert.deepEqual(Array.from(running.ts), [0, 1, 2, 3, 4]);
  assert.deepEqual(Array.from(running.value), [3, 7, 9, 9, 9]);
  assert.equal(valueAt(running, 2.5), 9);
  assert.equal(valueAt(running, 0.5), 3, "engine-b counts from its first scrape on");
  assert.deepEqual(Array.from(usage.value), [0.5, 0.75, 0.5]);
  assert.equal(valueAt(usage, 3.5), 0.5, "max of 0.5 (a) and 0.25 (b)");
  assert.equal(drawnSeries(load, false)[0], running, "computed once per payload");
});

test("combineSeries: scrapes at the same instant make one point", () => {
  const series = (/** @type {number[]} */ ts, /** @type {number[]} */ value) => ({ engine: 0, track: "queued", ts: Float64Array.from(ts), value: Float64Array.from(value) });
  const sum = combineSeries([series([0, 1], [1, 2]), series([0, 1], [10, 20])], "queued", "sum");
  assert.deepEqual(Array.from(sum.ts), [0, 1]);
  assert.deepEqual(Array.from(sum.value), [11, 22]);
  const max = combineSeries([series([0, 1], [1, 2]), series([0, 1], [10, 0])], "queued", "max");
  assert.deepEqual(Array.from(max.value), [10, 2]);
});

test("per engine: a series per engine, grouped by track; the switch changes the count", () => {
  const load = decoded(LOAD).load;
  const split = drawnSeries(load, true);
  assert.deepEqual(split.map((s) => seriesLabel(load, s)), ["running · engine-a", "running · engine-b", "KV tokens · engine-a", "KV tokens · engine-b"]);
  assert.deepEqual(drawnSeries(load, false).map((s) => seriesLabel(load, s)), ["running", "KV tokens"]);
  assert.equal(tracksLayout(load, true).series.length, 4);
  assert.equal(tracksLayout(load, false).series.length, 2);
  assert.ok(tracksHeight(load, true) > tracksHeight(load, false));
  assert.equal(trackMax(split, "running"), 5, "engines of a track share a scale");
});

test("many engines: the tracks stay within their height, the rest counted", () => {
  const load = [];
  for (let engine = 0; engine < 40; engine++) for (const track of LOAD_TRACKS) load.push({ engine, track, ts: 0, value: engine });
  const many = decoded(load, Array.from({ length: 40 }, (_, i) => `e${i}`)).load;
  const layout = tracksLayout(many, true);
  assert.ok(layout.height <= MAX_TRACKS_H);
  assert.equal(layout.series.length + layout.hidden, 200);
  assert.ok(layout.hidden > 0 && layout.series.length * layout.trackH + 2 * TRACKS_PAD < layout.height, "a row left for the note");
  assert.equal(tracksLayout(many, false).hidden, 0);
});

test("values as the gutter shows them", () => {
  assert.equal(formatLoadValue("token_usage", 0.75), "75%");
  assert.equal(formatLoadValue("token_usage", 0.051), "5.1%");
  assert.equal(formatLoadValue("running", 12), "12");
  assert.equal(formatLoadValue("throughput", 2500), "2,500");
  assert.equal(formatLoadValue("throughput", 12.345), "12.3");
  assert.equal(formatLoadValue("retractions", NaN), "—");
});
