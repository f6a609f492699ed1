// Lengths of text counted as the kernel counts them; order as Python compares text;
// dump text isolated for drawing beside other text.

/**
 * Length of `text` in code points, the unit Python counts text lengths and
 * positions in (a character outside the BMP is one code point but two UTF-16
 * units). A lone surrogate counts as one.
 * @param {string} text
 */
export function codePointLength(text) {
  let pairs = 0;
  for (let i = 0; i + 1 < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0xd800 || code > 0xdbff) continue;
    const next = text.charCodeAt(i + 1);
    if (next >= 0xdc00 && next <= 0xdfff) {
      pairs++;
      i++;
    }
  }
  return text.length - pairs;
}

/**
 * Order of `left` and `right` by code point, as Python compares text (negative,
 * zero or positive). JavaScript's `<` compares UTF-16 units, which puts a
 * character outside the BMP (a surrogate pair, from 0xD800) before one from
 * 0xE000 to 0xFFFF; only there do the two orders differ, so at the first unit
 * that differs those two ranges are swapped before comparing.
 * @param {string} left
 * @param {string} right
 */
export function compareCodePoints(left, right) {
  const shared = Math.min(left.length, right.length);
  for (let i = 0; i < shared; i++) {
    const a = left.charCodeAt(i);
    const b = right.charCodeAt(i);
    if (a !== b) return codePointRank(a) - codePointRank(b);
  }
  return left.length - right.length;
}

/** A UTF-16 unit's place in code point order: surrogates after 0xE000-0xFFFF. */
function codePointRank(/** @type {number} */ unit) {
  if (unit < 0xd800) return unit;
  return unit < 0xe000 ? unit + 0x2000 : unit - 0x800;
}

/** Bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069). */
const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/;

/**
 * `text` as one isolated run (U+2068 ... U+2069) when it holds bidirectional controls,
 * else as it is: a right-to-left override in one span name would otherwise reverse the
 * names and words drawn after it on a canvas, which no CSS isolation reaches.
 * @param {string} text
 */
export function bidiIsolated(text) {
  return BIDI_CONTROLS.test(text) ? `\u2068${text}\u2069` : text;
}
