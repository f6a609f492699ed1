// Canvas colours read from CSS (JupyterLab theme variables with plain-page
// fallbacks, see styles.css), re-read when the JupyterLab theme changes.

import { luminance, mix } from "./colors.js";

/**
 * @typedef {Object} Theme
 * @property {string} bg
 * @property {string} bg1
 * @property {string} bg2
 * @property {string} fg0
 * @property {string} fg1
 * @property {string} fg2
 * @property {string} border1
 * @property {string} border2
 * @property {string} brand
 * @property {string} font
 * @property {string} mono
 * @property {string} error
 * @property {string} cursor
 * @property {string} stripe alternate row background
 * @property {string} selRow selected row background
 * @property {string} hoverRow hovered row background
 * @property {boolean} dark
 */

/** @param {string} v @param {string} fb */
const or = (v, fb) => (v && v.trim() ? v.trim() : fb);

/** @type {CanvasRenderingContext2D|null|undefined} */
let probe;

/**
 * Normalise any CSS colour ("white", "hsl(...)", "#abc") to the canvas's
 * canonical "#rrggbb" / "rgba(...)" form so it can be parsed and mixed.
 * @param {string} c
 * @param {string} fb
 */
export function normColor(c, fb) {
  if (probe === undefined) {
    try {
      probe = typeof document !== "undefined" ? document.createElement("canvas").getContext("2d") : null;
    } catch {
      probe = null;
    }
  }
  if (!probe) return c || fb;
  probe.fillStyle = fb;
  probe.fillStyle = c;
  return String(probe.fillStyle);
}

/**
 * Read the theme from the computed custom properties of `el`.
 * @param {HTMLElement} el
 * @returns {Theme}
 */
export function readTheme(el) {
  const cs = getComputedStyle(el);
  const raw = (/** @type {string} */ name, /** @type {string} */ fb) => or(cs.getPropertyValue(name), fb);
  const v = (/** @type {string} */ name, /** @type {string} */ fb) => normColor(raw(name, fb), fb);
  const bg = solid(v("--stw-bg", "#ffffff"), "#ffffff");
  const dark = luminance(bg) < 0.35;
  const fg0 = v("--stw-fg0", dark ? "#ffffff" : "#111111");
  const fg1 = v("--stw-fg1", dark ? "#e6e6e6" : "#222222");
  const fg2 = v("--stw-fg2", dark ? "#a8a8a8" : "#666666");
  const brand = v("--stw-brand", "#1976d2");
  return {
    bg,
    bg1: solid(v("--stw-bg1", bg), bg),
    bg2: solid(v("--stw-bg2", dark ? "#2a2a2a" : "#eeeeee"), bg),
    fg0,
    fg1,
    fg2,
    border1: v("--stw-border1", dark ? "#555555" : "#bdbdbd"),
    border2: v("--stw-border2", dark ? "#3a3a3a" : "#e0e0e0"),
    brand,
    font: raw("--stw-font", "system-ui, sans-serif"),
    mono: raw("--stw-mono", "monospace"),
    error: dark ? "#ff6b6b" : "#d32f2f",
    cursor: dark ? "#ff5252" : "#d32f2f",
    stripe: mix(bg, dark ? "#ffffff" : "#000000", dark ? 0.035 : 0.022),
    selRow: mix(bg, solid(brand, "#1976d2"), dark ? 0.22 : 0.12),
    hoverRow: mix(bg, dark ? "#ffffff" : "#000000", dark ? 0.07 : 0.045),
    dark,
  };
}

/**
 * Transparent or unparseable backgrounds fall back to `fb`.
 * @param {string} c
 * @param {string} fb
 */
function solid(c, fb) {
  const s = c.trim();
  if (!s || s === "transparent" || /rgba\([^)]*,\s*0(\.0*)?\)$/.test(s)) return fb;
  return s;
}

/**
 * Watch JupyterLab theme switches (body[data-jp-theme-light]) and the OS
 * colour scheme (plain pages); returns a function that stops watching.
 * @param {() => void} onChange
 */
export function watchTheme(onChange) {
  /** @type {(() => void)[]} */
  const stops = [];
  if (typeof MutationObserver !== "undefined" && typeof document !== "undefined" && document.body) {
    const mo = new MutationObserver(() => onChange());
    mo.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name"] });
    stops.push(() => mo.disconnect());
  }
  if (typeof matchMedia !== "undefined") {
    const mq = matchMedia("(prefers-color-scheme: dark)");
    const h = () => onChange();
    mq.addEventListener?.("change", h);
    stops.push(() => mq.removeEventListener?.("change", h));
  }
  return () => stops.forEach((f) => f());
}
