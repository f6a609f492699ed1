// Row backgrounds, shared by the plot and the label gutter: the selected and
// the hovered row, then either the alternating stripes or, with rows coloured
// by fate (the "Colour" control), a tint of each row's fate colour, and a solid
// strip of it at the gutter's left edge. Span colours stay their names', so a
// bar and its label read the same with either colouring.

import { FATES } from "../data/fates.js";
import { fateColor, mix } from "./colors.js";

/** Px of the fate strip at the left edge of the gutter. */
export const STRIP_W = 5;

/**
 * @typedef {Object} FateFills the colours of rows coloured by fate, per fate code (FATES order; a code past them: none)
 * @property {string[]} even row background of even rows
 * @property {string[]} odd row background of odd rows (a shade stronger, so neighbours of one fate stay apart)
 * @property {string[]} strip the gutter's strip
 */

/** @type {WeakMap<object, FateFills>} */
const CACHE = new WeakMap();

/**
 * The fills of fate colouring on `theme` (made once per theme).
 * @param {import("../ui/theme.js").Theme} theme
 * @returns {FateFills}
 */
export function fateFills(theme) {
  let fills = CACHE.get(theme);
  if (fills) return fills;
  const colors = FATES.map(fateColor);
  const [even, odd] = theme.dark ? [0.8, 0.75] : [0.86, 0.81];
  fills = {
    even: colors.map((color) => mix(color, theme.bg, even)),
    odd: colors.map((color) => mix(color, theme.bg, odd)),
    strip: colors,
  };
  CACHE.set(theme, fills);
  return fills;
}

/**
 * @typedef {Object} RowScene what of a frame's scene the row backgrounds read
 * @property {{smpFate: Uint8Array}} d
 * @property {{rows: Uint32Array}} L
 * @property {{stripe: string, selRow: string, hoverRow: string}} theme
 * @property {number} selRow
 * @property {number} hoverRow
 * @property {FateFills|null} [fates] set when rows are coloured by fate
 */

/**
 * The background of row `row`, null for none (the canvas's own).
 * @param {RowScene} scene
 * @param {number} row
 * @returns {string|null}
 */
export function rowFill(scene, row) {
  const { theme } = scene;
  if (row === scene.selRow) return theme.selRow;
  if (row === scene.hoverRow) return theme.hoverRow;
  const fill = scene.fates ? (row % 2 === 1 ? scene.fates.odd : scene.fates.even)[scene.d.smpFate[scene.L.rows[row]]] : undefined;
  return fill ?? (row % 2 === 1 ? theme.stripe : null);
}

/**
 * The strip colour of row `row` when rows are coloured by fate (null: none).
 * @param {RowScene} scene
 * @param {number} row
 */
export function stripFill(scene, row) {
  return scene.fates ? scene.fates.strip[scene.d.smpFate[scene.L.rows[row]]] ?? null : null;
}
