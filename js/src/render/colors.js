// Stable colours for span, event and PD segment names.
//
// A name's colour depends on the name only (a hash into a palette, with a few
// well-known slime names pinned), so the same name has the same colour in every
// widget, snapshot and filtered view.

/** Distinct, mid-lightness colours that read on light and dark backgrounds. */
export const PALETTE = [
  "#4a7fc1", // blue
  "#e0823d", // orange
  "#45a05a", // green
  "#d0545a", // red
  "#8763c8", // violet
  "#2aa3a0", // teal
  "#c9a232", // mustard
  "#d263a2", // pink
  "#7f9a35", // olive
  "#5b6fd6", // indigo
  "#a8643b", // sienna
  "#3199d4", // sky
  "#9b7f6a", // taupe
  "#b94fbf", // magenta
  "#5aa88a", // sea green
  "#c77b7b", // rose
];

/** Well-known slime span names, pinned so the common picture is familiar. */
const PINNED = /** @type {Record<string, string>} */ ({
  generate_and_rm_group: "#c9d1db",
  generate_and_rm: "#98afc6",
  generate_with_tool: "#45a05a",
  sglang_generate: "#a7b244",
  generate: "#a7b244",
  tool_call: "#5b48c2",
  tool_execution: "#23a39b",
  reward_model: "#e0823d",
  rm: "#e0823d",
  group_reward_model: "#c9a232",
  group_rm: "#c9a232",
  attempt_start: "#d0545a",
  "[P]": "#4a7fc1",
  "[D]": "#45a05a",
});

/** PD segment colours by phase keyword (checked in order). */
const PD_SEGMENTS = /** @type {[RegExp, string, string][]} */ ([
  // pattern, prefill colour, decode colour
  [/bootstrap_queue/, "#b9a77f", "#b9a77f"],
  [/transfer_queue/, "#e8b463", "#e8b463"],
  [/alloc_wait|alloc_waiting/, "#9e8f80", "#9e8f80"],
  [/prealloc/, "#c7a46b", "#c7a46b"],
  [/bootstrap/, "#8a7553", "#8a7553"],
  [/transfer/, "#dc9a3c", "#dc9a3c"],
  [/forward/, "#3f7fc4", "#3c9e57"],
]);

/**
 * FNV-1a 32-bit hash of a string (UTF-16 code units).
 * @param {string} s
 * @returns {number}
 */
export function hashString(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * Colour of a span or event name: pinned names first, then PD segment
 * keywords for `sglang_pd_*` names, then a hash into the palette.
 * @param {string} name
 * @returns {string}
 */
export function colorForName(name) {
  // Own keys only: a span named "constructor" or "__proto__" must not find
  // Object.prototype's members in the table.
  const pinned = Object.hasOwn(PINNED, name) ? PINNED[name] : undefined;
  if (pinned) return pinned;
  if (/^(sglang_)?pd_|prefill|decode/.test(name)) {
    const seg = segmentColor(name);
    if (seg) return seg;
  }
  return PALETTE[hashString(name) % PALETTE.length];
}

/**
 * Colour of a PD segment name such as `prefill_forward` or
 * `sglang_pd_decode_transfer`; null when no phase keyword matches.
 * @param {string} name
 * @returns {string|null}
 */
export function segmentColor(name) {
  const n = name.toLowerCase();
  const decode = /decode|\[d\]/.test(n);
  for (const [re, p, d] of PD_SEGMENTS) if (re.test(n)) return decode ? d : p;
  return null;
}

/**
 * Colour of a PD segment (falls back to the name hash).
 * @param {string} name
 */
export function colorForSegment(name) {
  return segmentColor(name) || PALETTE[hashString(name) % PALETTE.length];
}

/**
 * Parse "#rrggbb" / "#rgb" / "rgb(r, g, b)" to [r, g, b] (0-255); null if not parseable.
 * @param {string} c
 * @returns {[number, number, number]|null}
 */
export function parseColor(c) {
  const s = c.trim();
  let m = /^#([0-9a-f]{6})$/i.exec(s);
  if (m) {
    const v = parseInt(m[1], 16);
    return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
  }
  m = /^#([0-9a-f]{3})$/i.exec(s);
  if (m) {
    const t = m[1];
    return [parseInt(t[0] + t[0], 16), parseInt(t[1] + t[1], 16), parseInt(t[2] + t[2], 16)];
  }
  m = /^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)/i.exec(s);
  if (m) return [Number(m[1]), Number(m[2]), Number(m[3])];
  return null;
}

/**
 * Mix colour `a` toward colour `b` by `t` (0 = a, 1 = b); returns "#rrggbb".
 * @param {string} a
 * @param {string} b
 * @param {number} t
 */
export function mix(a, b, t) {
  const pa = parseColor(a) || [128, 128, 128];
  const pb = parseColor(b) || [128, 128, 128];
  const r = Math.round(pa[0] + (pb[0] - pa[0]) * t);
  const g = Math.round(pa[1] + (pb[1] - pa[1]) * t);
  const bl = Math.round(pa[2] + (pb[2] - pa[2]) * t);
  return "#" + ((1 << 24) | (r << 16) | (g << 8) | bl).toString(16).slice(1);
}

/**
 * Relative luminance (0..1) of a colour, for choosing label text colour.
 * @param {string} c
 */
export function luminance(c) {
  const p = parseColor(c);
  if (!p) return 0.5;
  const f = (/** @type {number} */ v) => {
    const x = v / 255;
    return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * f(p[0]) + 0.7152 * f(p[1]) + 0.0722 * f(p[2]);
}

/**
 * Text colour (near-black or white) that reads on background `c`.
 * @param {string} c
 */
export function textOn(c) {
  return luminance(c) > 0.36 ? "#1b1f24" : "#ffffff";
}

/** @typedef {import("../ui/theme.js").Theme} Theme */

/** Style variants per name (ColorTable). */
export const V_SPAN = 0;
export const V_SPAN_DIM = 1;
export const V_SEG = 2;
export const V_SEG_DIM = 3;
export const V_OPEN = 4;
export const V_OPEN_DIM = 5;
const NV = 6;

/**
 * Fill colours of every (name, variant), rebuilt per payload and theme.
 * Rectangles are batched by style id: one id per distinct fill colour, so a
 * payload with thousands of names still has a few hundred batches at most.
 */
export class ColorTable {
  /**
   * @param {string[]} names
   * @param {Theme} theme
   */
  constructor(names, theme) {
    const n = Math.max(1, names.length + 1);
    /** style id of (name * NV + variant) */
    this.styleOf = new Uint16Array(n * NV);
    /** @type {string[]} fill colour of each style id */
    this.fills = [];
    /** @type {string[]} label colour on each style id */
    this.text = [];
    /** @type {Map<string, number>} */
    const ids = new Map();
    const dimK = theme.dark ? 0.72 : 0.75;
    for (let i = 0; i < n; i++) {
      const name = names[i] ?? `name#${i}`;
      let base = colorForName(name);
      // Very light colours (the wrapper spans) glare on a dark background.
      if (theme.dark && luminance(base) > 0.5) base = mix(base, theme.bg, 0.45);
      const seg = colorForSegment(name);
      const f = [base, mix(base, theme.bg, dimK), seg, mix(seg, theme.bg, dimK), mix(base, theme.bg, 0.5), mix(base, theme.bg, 0.82)];
      for (let v = 0; v < NV; v++) {
        let id = ids.get(f[v]);
        if (id === undefined) {
          id = this.fills.length;
          ids.set(f[v], id);
          this.fills.push(f[v]);
          this.text.push(textOn(f[v]));
        }
        this.styleOf[i * NV + v] = id;
      }
    }
    this.nStyles = this.fills.length;
    this.nNames = n;
  }
  /**
   * Style id of a name index and variant.
   * @param {number} name
   * @param {number} variant
   */
  style(name, variant) {
    return this.styleOf[Math.min(name, this.nNames - 1) * NV + variant];
  }
  /** @param {number} name */
  base(name) {
    return this.fills[this.style(name, V_SPAN)];
  }
}
