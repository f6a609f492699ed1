// anywidget entry: the default export's `render` draws one view of the
// timeline (anywidget deprecates a `render` exported by name). The HTML
// snapshot page imports the same bundle: `bootSnapshot` and `createLocalModel`
// are named exports for it, and it renders through the default export too.

import "./styles.css";
import { App } from "./ui/app.js";
import { createLocalModel } from "./standalone.js";
import { bootSnapshot } from "./page/snapshot.js";
import { WholePayload } from "./page/inline.js";

/**
 * Build the view, or show why it could not be built.
 * @param {import("./data/model.js").AnyModel} model
 * @param {HTMLElement} el
 * @param {number} t0 performance.now() when render() was called
 * @returns {() => void} cleanup
 */
function mount(model, el, t0) {
  try {
    const app = new App(model, el, t0);
    return () => app.dispose();
  } catch (err) {
    console.error("slime-trace-widget: render failed", err);
    const box = document.createElement("div");
    box.className = "stw-root stw-error";
    box.textContent = `slime-trace-widget could not render: ${err instanceof Error ? err.message : String(err)}`;
    el.appendChild(box);
    return () => box.remove();
  }
}

/**
 * Tell the kernel a view of the widget opened or closed (docs/payload.md, "Views"):
 * a widget that no view shows any more stops following its folder. A model whose
 * comm is gone (the widget closed) cannot be told, and needs not be.
 * @param {import("./data/model.js").AnyModel} model
 * @param {"view_opened"|"view_closed"} type
 * @param {string} view
 */
function tellViews(model, type, view) {
  try {
    model.send({ type, view });
  } catch (err) {
    console.debug("slime-trace-widget: could not send", type, err);
  }
}

/** An id for one view of a widget, unique among its views. */
function newViewId() {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * Draw the timeline into `el`: at once, or, when the payload's binary buffers
 * were lost on the way (inline.js), once the kernel's inline copy is here.
 * @param {{ model: import("./data/model.js").AnyModel, el: HTMLElement }} ctx
 * @returns {() => void} cleanup
 */
function render({ model, el }) {
  const t0 = performance.now();
  const view = newViewId();
  tellViews(model, "view_opened", view);
  /** @type {HTMLElement|null} */
  let waiting = null;
  let cleanup = () => {};
  const whole = new WholePayload(model, (drawableModel) => {
    waiting?.remove();
    cleanup = mount(drawableModel, el, t0);
  });
  if (whole.pending) {
    waiting = el.appendChild(document.createElement("div"));
    waiting.className = "stw-waiting";
    waiting.textContent = "slime-trace-widget: the trace's data did not arrive whole; loading a copy from the kernel…";
  }
  return () => {
    whole.dispose();
    waiting?.remove();
    cleanup();
    tellViews(model, "view_closed", view);
  };
}

export { createLocalModel, bootSnapshot };
export default { render };
