// The browser tests' entry into a page: bundled on its own (tests/support/browser.py)
// and run before any page script, it gives every element a `stwDebug` getter that
// answers with the hook table (view_hooks.js) of the view whose root it is, and
// undefined on any other element or before the view exists. One table per view, so
// what a caller stores on it stays.

import { viewHooks } from "./view_hooks.js";

/** @typedef {import("../../src/ui/app.js").App} App */

/** @type {WeakMap<App, ReturnType<typeof viewHooks>>} */
const hooksOfView = new WeakMap();

Object.defineProperty(Element.prototype, "stwDebug", {
  configurable: true,
  /** @this {Element & {stwApp?: App}} */
  get() {
    const app = this.stwApp;
    if (!app) return undefined;
    let hooks = hooksOfView.get(app);
    if (!hooks) {
      hooks = viewHooks(app);
      hooksOfView.set(app, hooks);
    }
    return hooks;
  },
});
