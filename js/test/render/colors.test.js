import { test } from "node:test";
import assert from "node:assert/strict";
import { colorForName, colorForSegment, hashString, PALETTE, mix, parseColor, textOn } from "../../src/render/colors.js";

test("colours are stable per name and valid", () => {
  const names = ["sglang_generate", "tool_call", "my_custom_step", "reward_model", "x", "日本語", "<img src=x>"];
  for (const n of names) {
    assert.equal(colorForName(n), colorForName(n));
    assert.match(colorForName(n), /^#[0-9a-f]{6}$/i);
  }
  assert.equal(hashString("abc"), hashString("abc"));
  assert.notEqual(hashString("abc"), hashString("abd"));
});

test("unknown names spread over the palette", () => {
  const used = new Set();
  for (let i = 0; i < 200; i++) used.add(colorForName(`custom_span_${i}`));
  assert.ok(used.size >= PALETTE.length - 2, `only ${used.size} colours used`);
});

test("well-known names keep distinct colours", () => {
  const known = ["generate_and_rm_group", "generate_and_rm", "sglang_generate", "tool_call", "tool_execution", "reward_model"];
  assert.equal(new Set(known.map(colorForName)).size, known.length);
});

test("PD segments colour by phase", () => {
  assert.notEqual(colorForSegment("prefill_forward"), colorForSegment("decode_forward"));
  assert.equal(colorForSegment("prefill_transfer_queue"), colorForSegment("sglang_pd_prefill_transfer_queue"));
  assert.notEqual(colorForSegment("prefill_bootstrap"), colorForSegment("prefill_bootstrap_queue"));
  assert.equal(colorForName("sglang_pd_decode_forward"), colorForSegment("decode_forward"));
});

test("colour helpers", () => {
  assert.deepEqual(parseColor("#ff0000"), [255, 0, 0]);
  assert.deepEqual(parseColor("#f00"), [255, 0, 0]);
  assert.deepEqual(parseColor("rgba(1, 2, 3, 0.5)"), [1, 2, 3]);
  assert.equal(mix("#000000", "#ffffff", 0.5), "#808080");
  assert.equal(textOn("#ffffff"), "#1b1f24");
  assert.equal(textOn("#000000"), "#ffffff");
});

test("ColorTable batches by distinct fill, not by name", async () => {
  const { ColorTable } = await import("../../src/render/colors.js");
  const names = Array.from({ length: 5000 }, (_, i) => `span_${i}`);
  const theme = { bg: "#ffffff", dark: false };
  const t = new ColorTable(names, /** @type {any} */ (theme));
  assert.ok(t.nStyles < 300, `${t.nStyles} styles`);
  assert.equal(t.base(0), colorForName("span_0"));
  assert.equal(t.fills[t.style(123, 0)], colorForName("span_123"));
  assert.notEqual(t.style(1, 0), t.style(1, 1));
});

test("names that are Object.prototype members get ordinary palette colours", () => {
  for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"]) {
    const colour = colorForName(name);
    assert.equal(typeof colour, "string");
    assert.equal(colour, colorForName(name));
    assert.ok(!colour.includes("function"), `${name} -> ${colour}`);
  }
});
