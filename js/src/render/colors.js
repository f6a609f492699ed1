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

/** Engine phases (the collapsed row's band, the details panel's phase table). */
export const ENGINE_PHASE_COLORS = /** @type {Record<string, string>} */ ({
  queue: "#b9a77f",
  prefill: "#3f7fc4",
  decode: "#3c9e57",
  pd: "#dc9a3c",
  other: "#9aa3ad",
});

/** The engines' load tracks (render/tracks.js). */
export const LOAD_TRACK_COLORS = /** @type {Record<string, string>} */ ({
  running: "#4a7fc1",
  queued: "#e0823d",
  token_usage: "#8763c8",
  throughput: "#2aa3a0",
  retractions: "#d0545a",
});

/** Sample fates (data/fates.js): rows coloured by fate, the ledger bar, the fate legend. */
export const FATE_COLORS = /** @type {Record<string, string>} */ ({
  signal: "#2e9d58",
  no_signal: "#8d99ab",
  filtered: "#8763c8",
  truncated: "#e0912f",
  aborted: "#a8643b",
  failed: "#d0545a",
});

/**
 * Colour of a fate (an unknown one: its name's colour).
 * @param {string} fate
 */
export function fateColor(fate) {
  return Object.hasOwn(FATE_COLORS, fate) ? FATE_COLORS[fate] : colorForName(fate);
}

/**
 * Colour of an engine phase (a phase the renderer does not know: its name's colour).
 * @param {string} phase
 */
export function enginePhaseColor(phase) {
  return Object.hasOwn(ENGINE_PHASE_COLORS, phase) ? ENGINE_PHASE_COLORS[phase] : colorForName(phase);
}

/**
 * Colour of a load track (an unknown track: its name's colour).
 * @param {string} track
 */
export function loadTrackColor(track) {
  return Object.hasOwn(LOAD_TRACK_COLORS, track) ? LOAD_TRACK_COLORS[track] : colorForName(track);
}

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
 * @param {string} text
 * @returns {number}
 */
export function hashString(text) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
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
  const lowerName = name.toLowerCase();
  const decode = /decode|\[d\]/.test(lowerName);
  for (const [re, prefillColor, decodeColor] of PD_SEGMENTS) if (re.test(lowerName)) return decode ? decodeColor : prefillColor;
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
 * @param {string} color
 * @returns {[number, number, number]|null}
 */
export function parseColor(color) {
  const trimmed = color.trim();
  let match = /^#([0-9a-f]{6})$/i.exec(trimmed);
  if (match) {
    const value = parseInt(match[1], 16);
    return [(value >> 16) & 255, (value >> 8) & 255, value & 255];
  }
  match = /^#([0-9a-f]{3})$/i.exec(trimmed);
  if (match) {
    const digits = match[1];
    return [parseInt(digits[0] + digits[0], 16), parseInt(digits[1] + digits[1], 16), parseInt(digits[2] + digits[2], 16)];
  }
  match = /^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)/i.exec(trimmed);
  if (match) return [Number(match[1]), Number(match[2]), Number(match[3])];
  return null;
}

/**
 * Mix colour `from` toward colour `to` by `amount` (0 = from, 1 = to); returns "#rrggbb".
 * @param {string} from
 * @param {string} to
 * @param {number} amount
 */
export function mix(from, to, amount) {
  const pa = parseColor(from) || [128, 128, 128];
  const pb = parseColor(to) || [128, 128, 128];
  const red = Math.round(pa[0] + (pb[0] - pa[0]) * amount);
  const green = Math.round(pa[1] + (pb[1] - pa[1]) * amount);
  const blue = Math.round(pa[2] + (pb[2] - pa[2]) * amount);
  return "#" + ((1 << 24) | (red << 16) | (green << 8) | blue).toString(16).slice(1);
}

/**
 * Relative luminance (0..1) of a colour, for choosing label text colour.
 * @param {string} color
 */
export function luminance(color) {
  const rgb = parseColor(color);
  if (!rgb) return 0.5;
  const linear = (/** @type {number} */ channel) => {
    const srgb = channel / 255;
    return srgb <= 0.03928 ? srgb / 12.92 : Math.pow((srgb + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * linear(rgb[0]) + 0.7152 * linear(rgb[1]) + 0.0722 * linear(rgb[2]);
}

/**
 * Text colour (near-black or white) that reads on background `fill`.
 * @param {string} fill
 */
export function textOn(fill) {
  return luminance(fill) > 0.36 ? "#1b1f24" : "#ffffff";
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
    const nNames = Math.max(1, names.length + 1);
    /** style id of (name * NV + variant) */
    this.styleOf = new Uint16Array(nNames * NV);
    /** @type {string[]} fill colour of each style id */
    this.fills = [];
    /** @type {string[]} label colour on each style id */
    this.text = [];
    /** @type {Map<string, number>} */
    const ids = new Map();
    const dimK = theme.dark ? 0.72 : 0.75;
    for (let i = 0; i < nNames; i++) {
      const name = names[i] ?? `name#${i}`;
      let base = colorForName(name);
      // Very light colours (the wrapper spans) glare on a dark background.
      if (theme.dark && luminance(base) > 0.5) base = mix(base, theme.bg, 0.45);
      const seg = colorForSegment(name);
      const variantFills = [base, mix(base, theme.bg, dimK), seg, mix(seg, theme.bg, dimK), mix(base, theme.bg, 0.5), mix(base, theme.bg, 0.82)];
      for (let variant = 0; variant < NV; variant++) {
        let id = ids.get(variantFills[variant]);
        if (id === undefined) {
          id = this.fills.length;
          ids.set(variantFills[variant], id);
          this.fills.push(variantFills[variant]);
          this.text.push(textOn(variantFills[variant]));
        }
        this.styleOf[i * NV + variant] = id;
      }
    }
    this.nStyles = this.fills.length;
    this.nNames = nNames;
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
