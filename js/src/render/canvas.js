// Shared by the timeline and the overview strip: a canvas whose backing store
// follows its CSS size × devicePixelRatio, so lines stay crisp on HiDPI screens.

/**
 * Size `canvas` to `w`×`h` CSS pixels at `dpr`, touching the backing store
 * only when it changes (resizing it clears the canvas and costs a realloc).
 * @param {HTMLCanvasElement} canvas
 * @param {number} w
 * @param {number} h
 * @param {number} dpr
 */
export function sizeCanvas(canvas, w, h, dpr) {
  const pw = Math.max(1, Math.round(w * dpr));
  const ph = Math.max(1, Math.round(h * dpr));
  if (canvas.width !== pw) canvas.width = pw;
  if (canvas.height !== ph) canvas.height = ph;
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
}

/**
 * Rounded rectangle path (works where ctx.roundRect is missing).
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} x
 * @param {number} y
 * @param {number} w
 * @param {number} h
 * @param {number} r
 */
export function roundRect(ctx, x, y, w, h, r) {
  const rr = Math.min(r, w / 2, h / 2);
  ctx.moveTo(x + rr, y);
  ctx.arcTo(x + w, y, x + w, y + h, rr);
  ctx.arcTo(x + w, y + h, x, y + h, rr);
  ctx.arcTo(x, y + h, x, y, rr);
  ctx.arcTo(x, y, x + w, y, rr);
  ctx.closePath();
}
