// Pointer and keyboard interaction on the timeline canvas: drag to pan,
// wheel to zoom at the pointer (wheel over the labels scrolls), shift-drag to
// select a time range, click to set the cursor and select, click a row label
// to expand it; W/S zoom, A/D pan (held keys animate), F focus, Esc clear,
// "/" filter. Keys act only while the widget has the focus.

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
  const k = pinch ? 0.01 : 0.0022;
  return Math.exp(Math.max(-1, Math.min(1, px * k)));
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
      [canvas, "pointerdown", (e) => this.down(e), false],
      [canvas, "pointermove", (e) => this.move(e), false],
      [canvas, "pointerup", (e) => this.up(e), false],
      [canvas, "pointercancel", () => this.cancel(), false],
      [canvas, "pointerleave", () => this.leave(), false],
      [canvas, "wheel", (e) => this.wheel(e), { passive: false }],
      [root, "keydown", (e) => this.keydown(e), false],
      [root, "keyup", (e) => this.keyup(e), false],
      [root, "focusout", () => this.keys.clear(), false],
    ];
    for (const [t, n, f, o] of this.listeners) t.addEventListener(n, f, o);
  }

  dispose() {
    for (const [t, n, f, o] of this.listeners) t.removeEventListener(n, f, o);
    cancelAnimationFrame(this.raf);
  }

  /** @param {PointerEvent} e */
  pos(e) {
    const r = this.canvas.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  }

  /** @param {PointerEvent} e */
  down(e) {
    if (e.button !== 0) return;
    const { x, y } = this.pos(e);
    const g = this.host.geometry();
    // Take the keyboard focus without scrolling the notebook.
    if (document.activeElement !== this.root) this.root.focus({ preventScroll: true });
    const mode = x < g.gutter ? "label" : e.shiftKey ? "brush" : "pan";
    const t0 = g.t0 + ((x - g.plotX) * (g.t1 - g.t0)) / Math.max(g.plotW, 1);
    this.press = { x, y, lastX: x, mode, t0, moved: false, id: e.pointerId };
    try {
      this.canvas.setPointerCapture(e.pointerId);
    } catch {
      /* capture is optional */
    }
    e.preventDefault();
  }

  /** @param {PointerEvent} e */
  move(e) {
    const { x, y } = this.pos(e);
    this.pointerX = x;
    const p = this.press;
    if (!p) {
      this.host.hover(this.host.hit(x, y), e.clientX, e.clientY, x, y);
      return;
    }
    if (!p.moved && Math.hypot(x - p.x, y - p.y) > CLICK_SLOP) p.moved = true;
    if (!p.moved) return;
    if (p.mode === "pan") {
      this.host.panPx(x - p.lastX);
      p.lastX = x;
      this.canvas.style.cursor = "grabbing";
      this.host.hover(null, 0, 0, x, y);
    } else if (p.mode === "brush") {
      const g = this.host.geometry();
      const t = g.t0 + ((x - g.plotX) * (g.t1 - g.t0)) / Math.max(g.plotW, 1);
      this.host.brush([p.t0, t], false);
    }
  }

  /** @param {PointerEvent} e */
  up(e) {
    const p = this.press;
    this.press = null;
    this.canvas.style.cursor = "";
    if (!p) return;
    const { x, y } = this.pos(e);
    if (p.moved) {
      if (p.mode === "brush") {
        const g = this.host.geometry();
        const t = g.t0 + ((x - g.plotX) * (g.t1 - g.t0)) / Math.max(g.plotW, 1);
        this.host.brush([p.t0, t], true);
      } else if (p.mode === "pan") {
        this.host.userView();
      }
      return;
    }
    const h = this.host.hit(x, y);
    if (!h) return;
    if (h.type === "label") {
      this.host.toggleRow(h.row);
      return;
    }
    if (h.type === "axis") {
      this.host.setCursor(h.t);
      return;
    }
    this.host.setCursor(h.t);
    this.host.select(h.type === "span" || h.type === "segment" || h.type === "event" ? h : null);
  }

  cancel() {
    this.press = null;
    this.canvas.style.cursor = "";
  }

  leave() {
    this.pointerX = -1;
    if (!this.press) this.host.hover(null, 0, 0, -1, -1);
  }

  /** @param {WheelEvent} e */
  wheel(e) {
    const { x } = this.pos(/** @type {any} */ (e));
    const g = this.host.geometry();
    if (x < g.gutter && !e.ctrlKey) return; // let the rows scroll natively
    e.preventDefault();
    const horizontal = Math.abs(e.deltaX) > Math.abs(e.deltaY);
    if (horizontal || e.shiftKey) {
      const d = horizontal ? e.deltaX : e.deltaY;
      const px = e.deltaMode === 1 ? d * 16 : e.deltaMode === 2 ? d * 400 : d;
      this.host.panPx(-px);
    } else if (e.altKey) {
      this.host.scrollBy(e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY);
      return;
    } else {
      this.host.zoomAt(Math.max(g.plotX, Math.min(g.plotX + g.plotW, x)), wheelZoomFactor(e.deltaY, e.deltaMode, e.ctrlKey));
    }
    this.host.userView();
  }

  /** @param {KeyboardEvent} e */
  keydown(e) {
    const t = /** @type {HTMLElement|null} */ (e.target);
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    // The widget owns plain letter keys while it has the focus: a notebook's
    // command-mode shortcuts (a, b, x, d d, ...) must not act on its cell.
    if (e.key.length === 1) e.stopPropagation();
    const k = e.key.toLowerCase();
    if (k === "w" || k === "s" || k === "a" || k === "d") {
      e.preventDefault();
      e.stopPropagation();
      if (!this.keys.has(k)) {
        this.keys.add(k);
        // One immediate step so a tap always does something.
        this.step(k, 0.12);
        if (!this.raf) {
          this.lastFrame = performance.now();
          this.raf = requestAnimationFrame((now) => this.animate(now));
        }
      }
      return;
    }
    if (k === "f") {
      e.preventDefault();
      e.stopPropagation();
      this.host.focusSelection();
    } else if (k === "escape") {
      e.preventDefault();
      e.stopPropagation();
      this.host.escape();
    } else if (k === "/") {
      e.preventDefault();
      e.stopPropagation();
      this.host.focusFilter();
    } else if (k === "pagedown" || k === "pageup") {
      e.preventDefault();
      this.host.scrollBy((k === "pagedown" ? 1 : -1) * (this.host.geometry().height - this.host.geometry().axisH) * 0.9);
    }
  }

  /** @param {KeyboardEvent} e */
  keyup(e) {
    const k = e.key.toLowerCase();
    if (this.keys.delete(k) && this.keys.size === 0) this.host.userView();
  }

  /**
   * Apply `dt` seconds of a held key.
   * @param {string} k
   * @param {number} dt
   */
  step(k, dt) {
    const g = this.host.geometry();
    const cx = this.pointerX >= g.plotX && this.pointerX <= g.plotX + g.plotW ? this.pointerX : g.plotX + g.plotW / 2;
    if (k === "w") this.host.zoomAt(cx, Math.exp(-dt * 3));
    else if (k === "s") this.host.zoomAt(cx, Math.exp(dt * 3));
    else if (k === "a") this.host.panPx(dt * g.plotW * 1.2);
    else if (k === "d") this.host.panPx(-dt * g.plotW * 1.2);
  }

  /** @param {number} now */
  animate(now) {
    const dt = Math.min(0.05, (now - this.lastFrame) / 1000);
    this.lastFrame = now;
    if (this.keys.size === 0) {
      this.raf = 0;
      return;
    }
    for (const k of this.keys) this.step(k, dt);
    this.raf = requestAnimationFrame((n) => this.animate(n));
  }
}
