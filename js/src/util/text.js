// Lengths of text counted as the kernel counts them.

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
