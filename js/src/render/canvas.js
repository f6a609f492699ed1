// Shared by the timeline and the overview strip: a canvas whose backing store
// follows its CSS size × devicePixelRatio, so lines stay crisp on HiDPI screens.

/**
 * Size `canvas` to `width`×`height` CSS pixels at `dpr`, touching the backing store
 * only when it changes (resizing it clears the canvas and costs a realloc).
 * @param {HTMLCanvasElement} canvas
 * @param {number} width
 * @param {number} height
 * @param {number} dpr
 */
export function sizeCanvas(canvas, width, height, dpr) {
  const pw = Math.max(1, Math.round(width * dpr));
  const ph = Math.max(1, Math.round(height * dpr));
  if (canvas.width !== pw) canvas.width = pw;
  if (canvas.height !== ph) canvas.height = ph;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
}

/**
 * Rounded rectangle path (works where ctx.roundRect is missing).
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} x
 * @param {number} y
 * @param {number} width
 * @param {number} height
 * @param {number} radius
 */
export function roundRect(ctx, x, y, width, height, radius) {
  const rr = Math.min(radius, width / 2, height / 2);
  ctx.moveTo(x + rr, y);
  ctx.arcTo(x + width, y, x + width, y + height, rr);
  ctx.arcTo(x + width, y + height, x, y + height, rr);
  ctx.arcTo(x, y + height, x, y, rr);
  ctx.arcTo(x, y, x + width, y, rr);
  ctx.closePath();
}
