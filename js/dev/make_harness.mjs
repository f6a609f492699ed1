#!/usr/bin/env node
// Write a self-contained HTML page (bundle + CSS + generated payload inlined,
// nothing fetched) for trying the widget in a browser and for the Playwright
// checks: node dev/make_harness.mjs --spans 250000 [--seed 7] [--out FILE]
// [--state '{"sort":"duration"}'] [--range 10,60]
// Build the bundle first (npm run build).

import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { generate } from "./gen_payload.mjs";
import { packBuffers } from "../test/helpers/make_payload.js";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
/** @param {string} name @param {string} [fb] */
const arg = (name, fb) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fb;
};
const spans = Number(arg("spans", "250000"));
const seed = Number(arg("seed", "7"));
const out = resolve(arg("out", resolve(here, "../../test-artifacts", `harness_${spans}.html`)));
const state = arg("state");
const range = arg("range");

const t = Date.now();
const { meta, cols } = generate({ spans, seed });
const { buffers, columns } = packBuffers(cols, { as: "base64" });
const data = {
  payload: { version: 1, meta: { ...meta, columns }, buffers },
  view_state: state ? JSON.parse(state) : {},
  view_range: range ? range.split(",").map(Number) : [],
};
const bundle = readFileSync(resolve(here, "../../slime_trace_widget/view/static/widget.js"));
const css = readFileSync(resolve(here, "../../slime_trace_widget/view/static/widget.css"), "utf8");
const template = readFileSync(resolve(here, "harness.html"), "utf8");
// JSON inside <script>: escape "<" so no "</script" or "<!--" can appear.
const json = JSON.stringify(data).replace(/</g, "\\u003c");
const html = template
  .split("/*__STW_CSS__*/").join(css.replace(/<\/style/gi, "<\\/style"))
  .split("__STW_BUNDLE_B64__").join(bundle.toString("base64"))
  .split("__STW_DATA__").join(json);
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, html);
const nSpans = cols.span_sample.length;
console.log(`${out}: ${meta.samples.row.length} samples, ${nSpans} spans, ${cols.seg_span.length} segments, ${cols.ev_sample.length} events, ${(html.length / 1e6).toFixed(1)} MB, ${Date.now() - t} ms`);
