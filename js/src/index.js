// anywidget entry: the default export's `render` draws one view of the
// timeline (anywidget deprecates a `render` exported by name). The HTML
// snapshot page imports the same bundle: `bootSnapshot` and `createLocalModel`
// are named exports for it, and it renders through the default export too.

import "./styles.css";
import { App } from "./ui/app.js";
import { createLocalModel } from "./standalone.js";
import { bootSnapshot } from "./page/snapshot.js";
import { WholePayload } from "./page/inline.js";
import { announceView, newViewId } from "./ui/presence.js";

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
 * Draw the timeline into `el`: at once, or, when the payload's binary buffers
 * were lost on the way (inline.js), once the kernel's inline copy is here.
 * @param {{ model: import("./data/model.js").AnyModel, el: HTMLElement }} ctx
 * @returns {() => void} cleanup
 */
function render({ model, el }) {
  const t0 = performance.now();
  const closeView = announceView(model, newViewId());
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
    closeView();
  };
}

export { createLocalModel, bootSnapshot };
export default { render };
