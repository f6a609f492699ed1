import { test } from "node:test";
import assert from "node:assert/strict";
import { fateFills, rowFill, stripFill } from "../../src/render/fate_rows.js";
import { FATE_COLORS, mix } from "../../src/render/colors.js";
import { FATES, FATE_NONE } from "../../src/data/fates.js";

const THEME = { dark: false, bg: "#ffffff", stripe: "#f7f7f7", selRow: "#e0ecf9", hoverRow: "#f0f0f0" };

/** Rows 0..3 show samples 2, 0, 1, 3 with fates truncated, signal, none, failed. */
function scene(fates) {
  return { d: { smpFate: new Uint8Array([0, FATE_NONE, 3, 5]) }, L: { rows: new Uint32Array([2, 0, 1, 3]) }, theme: THEME, selRow: -1, hoverRow: -1, fates };
}

test("fateFills: a tint of each fate's colour, odd rows a shade stronger, the strip solid", () => {
  const fills = fateFills(THEME);
  assert.equal(fateFills(THEME), fills, "made once per theme");
  assert.deepEqual(fills.strip, FATES.map((fate) => FATE_COLORS[fate]));
  assert.equal(fills.even[0], mix(FATE_COLORS.signal, "#ffffff", 0.86));
  assert.equal(fills.odd[0], mix(FATE_COLORS.signal, "#ffffff", 0.81));
  assert.notEqual(fateFills({ ...THEME, dark: true, bg: "#1e1f22" }).even[0], fills.even[0]);
});

test("rowFill: by span the stripes; by fate each row's fate tint; selection and hover win", () => {
  const plain = scene(null);
  assert.deepEqual([0, 1, 2, 3].map((row) => rowFill(plain, row)), [null, THEME.stripe, null, THEME.stripe]);
  assert.deepEqual([0, 1, 2, 3].map((row) => stripFill(plain, row)), [null, null, null, null]);
  const fills = fateFills(THEME);
  const byFate = scene(fills);
  // row 2 shows a sample with no fate: it keeps the plain background
  assert.deepEqual([0, 1, 2, 3].map((row) => rowFill(byFate, row)), [fills.even[3], fills.odd[0], null, fills.odd[5]]);
  assert.deepEqual([0, 1, 2, 3].map((row) => stripFill(byFate, row)), [FATE_COLORS.truncated, FATE_COLORS.signal, null, FATE_COLORS.failed]);
  assert.equal(rowFill({ ...byFate, selRow: 1 }, 1), THEME.selRow);
  assert.equal(rowFill({ ...byFate, hoverRow: 3 }, 3), THEME.hoverRow);
});
