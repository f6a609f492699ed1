// Canvas colours read from CSS (host theme variables with plain-page
// fallbacks, see theme.css), and the scheme they follow: the root's
// `data-stw-theme` is the one the host states (JupyterLab, Notebook 7, VS
// Code, marimo, Colab), the OS's only when it states none. Both are re-read
// when the host or the OS switches theme live.

import { luminance, mix } from "../render/colors.js";

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

/** @param {string} value @param {string} fb */
const or = (value, fb) => (value && value.trim() ? value.trim() : fb);

/** @type {CanvasRenderingContext2D|null|undefined} */
let probe;

/**
 * Normalise any CSS colour ("white", "hsl(...)", "#abc") to the canvas's
 * canonical "#rrggbb" / "rgba(...)" form so it can be parsed and mixed.
 * @param {string} color
 * @param {string} fb
 */
export function normColor(color, fb) {
  if (probe === undefined) {
    try {
      probe = typeof document !== "undefined" ? document.createElement("canvas").getContext("2d") : null;
    } catch {
      probe = null;
    }
  }
  if (!probe) return color || fb;
  probe.fillStyle = fb;
  probe.fillStyle = color;
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
  const color = (/** @type {string} */ name, /** @type {string} */ fb) => normColor(raw(name, fb), fb);
  const bg = solid(color("--stw-bg", "#ffffff"), "#ffffff");
  const dark = luminance(bg) < 0.35;
  const fg0 = color("--stw-fg0", dark ? "#ffffff" : "#111111");
  const fg1 = color("--stw-fg1", dark ? "#e6e6e6" : "#222222");
  const fg2 = color("--stw-fg2", dark ? "#a8a8a8" : "#666666");
  const brand = color("--stw-brand", "#1976d2");
  return {
    bg,
    bg1: solid(color("--stw-bg1", bg), bg),
    bg2: solid(color("--stw-bg2", dark ? "#2a2a2a" : "#eeeeee"), bg),
    fg0,
    fg1,
    fg2,
    border1: color("--stw-border1", dark ? "#555555" : "#bdbdbd"),
    border2: color("--stw-border2", dark ? "#3a3a3a" : "#e0e0e0"),
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
 * @param {string} color
 * @param {string} fb
 */
function solid(color, fb) {
  const trimmed = color.trim();
  if (!trimmed || trimmed === "transparent" || /rgba\([^)]*,\s*0(\.0*)?\)$/.test(trimmed)) return fb;
  return trimmed;
}

/** @typedef {"light"|"dark"} Scheme */

/** VS Code webview body classes (and `data-vscode-theme-kind` values); a light high-contrast body also has `vscode-high-contrast`. */
const VSCODE = /** @type {[string, Scheme][]} */ ([
  ["vscode-high-contrast-light", "light"],
  ["vscode-high-contrast", "dark"],
  ["vscode-dark", "dark"],
  ["vscode-light", "light"],
]);
/** Attributes whose value "dark"/"light" marks a scheme (marimo's data-theme, Colab's theme on <html>). */
const MARK_ATTRS = ["data-theme", "data-mode", "theme"];
const DARK_CLASSES = ["dark", "dark-theme", "dark-mode"];
const LIGHT_CLASSES = ["light", "light-theme", "light-mode"];
/** Every attribute a host switches its theme with. */
const WATCHED = ["class", "data-jp-theme-light", "data-jp-theme-name", "data-vscode-theme-kind", "data-vscode-theme-name", ...MARK_ATTRS];

/**
 * The element above `element`, through shadow roots (marimo renders widgets in one).
 * @param {Element} element
 * @returns {Element|null}
 */
function parentOf(element) {
  if (element.parentElement) return element.parentElement;
  const parent = /** @type {any} */ (element.parentNode);
  return parent && parent.host ? parent.host : null;
}

/**
 * The scheme an element marks by class or attribute, or null.
 * @param {Element} element
 * @returns {Scheme|null}
 */
function markOf(element) {
  for (const attr of MARK_ATTRS) {
    const value = element.getAttribute(attr);
    if (value === "dark" || value === "light") return value;
  }
  if (DARK_CLASSES.some((cls) => element.classList.contains(cls))) return "dark";
  if (LIGHT_CLASSES.some((cls) => element.classList.contains(cls))) return "light";
  return null;
}

/**
 * A `color-scheme` value that names one scheme only ("dark", "only light"); null for "normal" or "light dark".
 * @param {string} value
 * @returns {Scheme|null}
 */
export function schemeOfColorScheme(value) {
  const words = String(value || "").split(/\s+/);
  const dark = words.includes("dark");
  if (dark === words.includes("light")) return null;
  return dark ? "dark" : "light";
}

/**
 * The scheme the host page states for the widget at `el`, or null when it
 * states none. In order: JupyterLab and Notebook 7 (`data-jp-theme-light` on
 * body), VS Code (body classes), the nearest ancestor marked dark or light
 * (marimo's `.dark` / `data-theme`, Colab's `theme` on <html>), then the
 * `color-scheme` <html> computes to.
 * @param {Element} el
 * @returns {Scheme|null}
 */
export function hostScheme(el) {
  const doc = el.ownerDocument;
  const html = doc.documentElement;
  const body = doc.body;
  const jp = body?.getAttribute("data-jp-theme-light");
  if (jp === "true" || jp === "false") return jp === "true" ? "light" : "dark";
  if (body) {
    const kind = body.getAttribute("data-vscode-theme-kind");
    for (const [name, scheme] of VSCODE) if (kind === name || body.classList.contains(name)) return scheme;
  }
  // Before the view is attached its ancestors are not yet body and <html>: look at them too.
  for (let ancestor = parentOf(el); ancestor; ancestor = parentOf(ancestor)) {
    const scheme = markOf(ancestor);
    if (scheme) return scheme;
  }
  const marked = (body && markOf(body)) || markOf(html);
  if (marked) return marked;
  return typeof getComputedStyle === "function" ? schemeOfColorScheme(getComputedStyle(html).colorScheme) : null;
}

/**
 * Mark `root` with the scheme to draw in (`data-stw-theme`, read by
 * theme.css): the host's, else the OS's; then read its colours.
 * @param {HTMLElement} root
 * @returns {Theme}
 */
export function hostTheme(root) {
  const os = typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches;
  root.dataset.stwTheme = hostScheme(root) ?? (os ? "dark" : "light");
  return readTheme(root);
}

/**
 * What a theme switch changes: the scheme, and the theme's name where the host gives one.
 * @param {Element} root
 */
function themeKey(root) {
  const body = root.ownerDocument.body;
  return [hostScheme(root), body?.getAttribute("data-jp-theme-name"), body?.getAttribute("data-vscode-theme-name")].join("|");
}

/**
 * Call `onChange` when the host switches theme: attributes and classes on
 * <html> (and its style, where VS Code puts its variables), <body> and the
 * widget's ancestors (observed once `root` is attached), and the OS scheme.
 * Class changes that leave the theme as it was (a cell getting focus) are
 * ignored. Returns a function that stops watching.
 * @param {HTMLElement} root
 * @param {() => void} onChange
 */
export function watchTheme(root, onChange) {
  /** @type {(() => void)[]} */
  const stops = [];
  const doc = root.ownerDocument;
  let key = themeKey(root);
  const check = () => {
    const newKey = themeKey(root);
    if (newKey === key) return;
    key = newKey;
    onChange();
  };
  if (typeof MutationObserver !== "undefined") {
    const mo = new MutationObserver(check);
    mo.observe(doc.documentElement, { attributes: true, attributeFilter: [...WATCHED, "style"] });
    if (doc.body) mo.observe(doc.body, { attributes: true, attributeFilter: WATCHED });
    let raf = 0;
    let tries = 600;
    const attach = () => {
      raf = 0;
      if (!root.isConnected) {
        if (tries-- > 0) raf = requestAnimationFrame(attach);
        return;
      }
      for (let ancestor = parentOf(root); ancestor && ancestor !== doc.body && ancestor !== doc.documentElement; ancestor = parentOf(ancestor)) {
        mo.observe(ancestor, { attributes: true, attributeFilter: WATCHED });
      }
      check();
    };
    attach();
    stops.push(() => {
      cancelAnimationFrame(raf);
      mo.disconnect();
    });
  }
  if (typeof matchMedia !== "undefined") {
    const mq = matchMedia("(prefers-color-scheme: dark)");
    const listener = () => onChange();
    mq.addEventListener?.("change", listener);
    stops.push(() => mq.removeEventListener?.("change", listener));
  }
  return () => stops.forEach((stop) => stop());
}
