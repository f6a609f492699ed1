// Pointer and keyboard interaction on the timeline canvas: drag to pan,
// wheel to zoom at the pointer (wheel over the labels scrolls), shift-drag to
// select a time range, click to set the cursor and select, click a row label
// to expand it; W/S zoom, A/D pan (held keys animate), F focus, Esc clear,
// "/" filter. Keys act only while the widget has the focus.

import { isItem } from "../render/hit.js";

/** @typedef {import("../render/hit.js").Hit} Hit */
/** @typedef {import("../render/hit.js").Geo} Geo */

/**
 * @typedef {Object} InteractHost
 * @property {() => Geo} geometry
 * @property {(x: number, y: number) => Hit|null} hit
 * @property {(dxPx: number) => void} panPx
 * @property {(x: number, factor: number) => void} zoomAt
 * @property {(t: number) => void} setCursor
 * @property {(h: Hit|null) => void} select
 * @property {(row: number) => void} toggleRow
 * @property {(h: Hit|null, clientX: number, clientY: number, x: number, y: number) => void} hover
 * @property {(range: [number, number]|null, final: boolean) => void} brush
 * @property {() => void} focusSelection
 * @property {() => void} escape
 * @property {() => void} focusFilter
 * @property {(dy: number) => void} scrollBy
 * @property {() => void} userView called after user pan/zoom (to sync view_range)
 */

/** Pixels a press may move and still count as a click. */
export const CLICK_SLOP = 4;

/**
 * Zoom factor for a wheel event: >1 zooms out, <1 zooms in.
 * @param {number} deltaY
 * @param {number} deltaMode 0 px, 1 lines, 2 pages
 * @param {boolean} pinch ctrl+wheel (trackpad pinch)
 */
export function wheelZoomFactor(deltaY, deltaMode, pinch) {
  const px = deltaMode === 1 ? deltaY * 16 : deltaMode === 2 ? deltaY * 400 : deltaY;
  const scale = pinch ? 0.01 : 0.0022;
  return Math.exp(Math.max(-1, Math.min(1, px * scale)));
}

export class Interaction {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {HTMLElement} root element that takes keyboard focus
   * @param {InteractHost} host
   */
  constructor(canvas, root, host) {
    this.canvas = canvas;
    this.root = root;
    this.host = host;
    /** @type {{x: number, y: number, lastX: number, mode: "pan"|"brush"|"label", t0: number, moved: boolean, id: number}|null} */
    this.press = null;
    /** @type {Set<string>} */
    this.keys = new Set();
    this.raf = 0;
    this.lastFrame = 0;
    this.pointerX = -1;

    /** @type {[EventTarget, string, (e: any) => void, AddEventListenerOptions|boolean][]} */
    this.listeners = [
      [canvas, "pointerdown", (event) => this.down(event), false],
      [canvas, "pointermove", (event) => this.move(event), false],
      [canvas, "pointerup", (event) => this.up(event), false],
      [canvas, "pointercancel", () => this.cancel(), false],
      [canvas, "pointerleave", () => this.leave(), false],
      [canvas, "wheel", (event) => this.wheel(event), { passive: false }],
      [root, "keydown", (event) => this.keydown(event), false],
      [root, "keyup", (event) => this.keyup(event), false],
      [root, "focusout", () => this.keys.clear(), false],
    ];
    for (const [target, type, listener, options] of this.listeners) target.addEventListener(type, listener, options);
  }

  dispose() {
    for (const [target, type, listener, options] of this.listeners) target.removeEventListener(type, listener, options);
    cancelAnimationFrame(this.raf);
  }

  /** @param {PointerEvent} event */
  pos(event) {
    const rect = this.canvas.getBoundingClientRect();
    return { x: event.clientX - rect.left, y: event.clientY - rect.top };
  }

  /** @param {PointerEvent} event */
  down(event) {
    if (event.button !== 0) return;
    const { x, y } = this.pos(event);
    const geometry = this.host.geometry();
    // Take the keyboard focus without scrolling the notebook.
    if (document.activeElement !== this.root) this.root.focus({ preventScroll: true });
    const mode = x < geometry.gutter ? "label" : event.shiftKey ? "brush" : "pan";
    const t0 = geometry.t0 + ((x - geometry.plotX) * (geometry.t1 - geometry.t0)) / Math.max(geometry.plotW, 1);
    this.press = { x, y, lastX: x, mode, t0, moved: false, id: event.pointerId };
    try {
      this.canvas.setPointerCapture(event.pointerId);
    } catch {
      /* capture is optional */
    }
    event.preventDefault();
  }

  /** @param {PointerEvent} event */
  move(event) {
    const { x, y } = this.pos(event);
    this.pointerX = x;
    const press = this.press;
    if (!press) {
      this.host.hover(this.host.hit(x, y), event.clientX, event.clientY, x, y);
      return;
    }
    if (!press.moved && Math.hypot(x - press.x, y - press.y) > CLICK_SLOP) press.moved = true;
    if (!press.moved) return;
    if (press.mode === "pan") {
      this.host.panPx(x - press.lastX);
      press.lastX = x;
      this.canvas.style.cursor = "grabbing";
      this.host.hover(null, 0, 0, x, y);
    } else if (press.mode === "brush") {
      const geometry = this.host.geometry();
      const time = geometry.t0 + ((x - geometry.plotX) * (geometry.t1 - geometry.t0)) / Math.max(geometry.plotW, 1);
      this.host.brush([press.t0, time], false);
    }
  }

  /** @param {PointerEvent} event */
  up(event) {
    const press = this.press;
    this.press = null;
    this.canvas.style.cursor = "";
    if (!press) return;
    const { x, y } = this.pos(event);
    if (press.moved) {
      if (press.mode === "brush") {
        const geometry = this.host.geometry();
        const time = geometry.t0 + ((x - geometry.plotX) * (geometry.t1 - geometry.t0)) / Math.max(geometry.plotW, 1);
        this.host.brush([press.t0, time], true);
      } else if (press.mode === "pan") {
        this.host.userView();
      }
      return;
    }
    const hit = this.host.hit(x, y);
    if (!hit) return;
    if (hit.type === "label") {
      this.host.toggleRow(hit.row);
      return;
    }
    if (hit.type === "axis") {
      this.host.setCursor(hit.t);
      return;
    }
    this.host.setCursor(hit.t);
    this.host.select(isItem(hit) ? hit : null);
  }

  cancel() {
    this.press = null;
    this.canvas.style.cursor = "";
  }

  leave() {
    this.pointerX = -1;
    if (!this.press) this.host.hover(null, 0, 0, -1, -1);
  }

  /** @param {WheelEvent} event */
  wheel(event) {
    const { x } = this.pos(/** @type {any} */ (event));
    const geometry = this.host.geometry();
    if (x < geometry.gutter && !event.ctrlKey) return; // let the rows scroll natively
    event.preventDefault();
    const horizontal = Math.abs(event.deltaX) > Math.abs(event.deltaY);
    if (horizontal || event.shiftKey) {
      const delta = horizontal ? event.deltaX : event.deltaY;
      const px = event.deltaMode === 1 ? delta * 16 : event.deltaMode === 2 ? delta * 400 : delta;
      this.host.panPx(-px);
    } else if (event.altKey) {
      this.host.scrollBy(event.deltaMode === 1 ? event.deltaY * 16 : event.deltaY);
      return;
    } else {
      this.host.zoomAt(Math.max(geometry.plotX, Math.min(geometry.plotX + geometry.plotW, x)), wheelZoomFactor(event.deltaY, event.deltaMode, event.ctrlKey));
    }
    this.host.userView();
  }

  /** @param {KeyboardEvent} event */
  keydown(event) {
    const target = /** @type {HTMLElement|null} */ (event.target);
    if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    // The widget owns plain letter keys while it has the focus: a notebook's
    // command-mode shortcuts (a, b, x, d d, ...) must not act on its cell.
    if (event.key.length === 1) event.stopPropagation();
    const key = event.key.toLowerCase();
    if (key === "w" || key === "s" || key === "a" || key === "d") {
      event.preventDefault();
      event.stopPropagation();
      if (!this.keys.has(key)) {
        this.keys.add(key);
        // One immediate step so a tap always does something.
        this.step(key, 0.12);
        if (!this.raf) {
          this.lastFrame = performance.now();
          this.raf = requestAnimationFrame((now) => this.animate(now));
        }
      }
      return;
    }
    if (key === "f") {
      event.preventDefault();
      event.stopPropagation();
      this.host.focusSelection();
    } else if (key === "escape") {
      event.preventDefault();
      event.stopPropagation();
      this.host.escape();
    } else if (key === "/") {
      event.preventDefault();
      event.stopPropagation();
      this.host.focusFilter();
    } else if (key === "pagedown" || key === "pageup") {
      event.preventDefault();
      this.host.scrollBy((key === "pagedown" ? 1 : -1) * (this.host.geometry().height - this.host.geometry().axisH) * 0.9);
    }
  }

  /** @param {KeyboardEvent} event */
  keyup(event) {
    const key = event.key.toLowerCase();
    if (this.keys.delete(key) && this.keys.size === 0) this.host.userView();
  }

  /**
   * Apply `dt` seconds of a held key.
   * @param {string} key
   * @param {number} dt
   */
  step(key, dt) {
    const geometry = this.host.geometry();
    const cx = this.pointerX >= geometry.plotX && this.pointerX <= geometry.plotX + geometry.plotW ? this.pointerX : geometry.plotX + geometry.plotW / 2;
    if (key === "w") this.host.zoomAt(cx, Math.exp(-dt * 3));
    else if (key === "s") this.host.zoomAt(cx, Math.exp(dt * 3));
    else if (key === "a") this.host.panPx(dt * geometry.plotW * 1.2);
    else if (key === "d") this.host.panPx(-dt * geometry.plotW * 1.2);
  }

  /** @param {number} now */
  animate(now) {
    const dt = Math.min(0.05, (now - this.lastFrame) / 1000);
    this.lastFrame = now;
    if (this.keys.size === 0) {
      this.raf = 0;
      return;
    }
    for (const key of this.keys) this.step(key, dt);
    this.raf = requestAnimationFrame((timestamp) => this.animate(timestamp));
  }
}
