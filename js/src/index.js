// anywidget entry: `render` draws one view of the timeline; `createLocalModel`
// lets an HTML snapshot (no kernel) call the same `render`.

import "./styles.css";
import { App } from "./app.js";
import { createLocalModel } from "./standalone.js";
import { bootSnapshot } from "./snapshot.js";

/**
 * @param {{ model: import("./model.js").AnyModel, el: HTMLElement }} ctx
 * @returns {() => void} cleanup
 */
function render({ model, el }) {
  const t0 = performance.now();
  let app = /** @type {App|null} */ (null);
  try {
    app = new App(model, el, t0);
  } catch (err) {
    console.error("slime-trace-widget: render failed", err);
    const box = document.createElement("div");
    box.className = "stw-root stw-error";
    box.textContent = `slime-trace-widget could not render: ${err instanceof Error ? err.message : String(err)}`;
    el.appendChild(box);
    return () => box.remove();
  }
  return () => app?.dispose();
}

export { createLocalModel, render, bootSnapshot };
export default { render };
