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
