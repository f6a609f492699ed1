// Which scheme the host states, from the marks each front end puts on the
// page (a minimal fake DOM: attributes, classes, parents, shadow roots).

import { test } from "node:test";
import assert from "node:assert/strict";
import { hostScheme, schemeOfColorScheme } from "../../src/ui/theme.js";

/**
 * @param {{attrs?: Record<string, string>, classes?: string[]}} [o]
 * @returns {any}
 */
function node(o = {}) {
  const attrs = { ...(o.attrs || {}) };
  const classes = new Set(o.classes || []);
  return {
    parentElement: null,
    parentNode: null,
    ownerDocument: null,
    getAttribute: (/** @type {string} */ a) => (a in attrs ? attrs[a] : null),
    classList: { contains: (/** @type {string} */ c) => classes.has(c) },
  };
}

/**
 * A page: html > body > ...chain > root; `shadowAt` puts a shadow root
 * between chain[shadowAt] and the next node.
 * @param {{html?: any, body?: any, chain?: any[], shadowAt?: number}} [o]
 */
function page(o = {}) {
  const html = o.html || node();
  const body = o.body || node();
  const chain = [html, body, ...(o.chain || []), node()];
  const doc = { documentElement: html, body };
  chain.forEach((n, i) => {
    n.ownerDocument = doc;
    if (i === 0) return;
    const parent = chain[i - 1];
    if (o.shadowAt !== undefined && i - 1 === o.shadowAt + 2) n.parentNode = { host: parent };
    else {
      n.parentElement = parent;
      n.parentNode = parent;
    }
  });
  return chain[chain.length - 1];
}

test("JupyterLab and Notebook 7: body[data-jp-theme-light] wins over everything else", () => {
  assert.equal(hostScheme(page({ body: node({ attrs: { "data-jp-theme-light": "false" } }) })), "dark");
  assert.equal(hostScheme(page({ body: node({ attrs: { "data-jp-theme-light": "true" }, classes: ["dark"] }) })), "light");
});

test("VS Code: body classes or data-vscode-theme-kind; light high contrast is light", () => {
  assert.equal(hostScheme(page({ body: node({ classes: ["vscode-dark"] }) })), "dark");
  assert.equal(hostScheme(page({ body: node({ classes: ["vscode-light"] }) })), "light");
  assert.equal(hostScheme(page({ body: node({ classes: ["vscode-high-contrast"] }) })), "dark");
  assert.equal(hostScheme(page({ body: node({ classes: ["vscode-high-contrast", "vscode-high-contrast-light"] }) })), "light");
  assert.equal(hostScheme(page({ body: node({ attrs: { "data-vscode-theme-kind": "vscode-dark" } }) })), "dark");
});

test("marimo: the nearest marked ancestor, through a shadow root", () => {
  assert.equal(hostScheme(page({ body: node({ classes: ["dark", "dark-theme"], attrs: { "data-theme": "dark" } }) })), "dark");
  assert.equal(hostScheme(page({ body: node({ classes: ["light", "light-theme"] }) })), "light");
  const shadowed = page({ body: node({ classes: ["dark"] }), chain: [node(), node({ attrs: { "data-theme": "light" } }), node()], shadowAt: 1 });
  assert.equal(hostScheme(shadowed), "light");
  assert.equal(hostScheme(page({ chain: [node({ classes: ["dark"] }), node()], shadowAt: 0 })), "dark");
});

test("Colab: theme on <html>; otherwise nothing is stated", () => {
  assert.equal(hostScheme(page({ html: node({ attrs: { theme: "dark" } }) })), "dark");
  assert.equal(hostScheme(page({ html: node({ attrs: { theme: "light" } }) })), "light");
  assert.equal(hostScheme(page()), null); // no getComputedStyle here: the OS decides
});

test("a root not yet attached still sees body and <html>", () => {
  const html = node({ attrs: { theme: "dark" } });
  const body = node({ classes: ["dark"] });
  page({ html, body });
  const detached = node();
  detached.ownerDocument = { documentElement: html, body };
  assert.equal(hostScheme(detached), "dark");
});

test("color-scheme values that name one scheme", () => {
  assert.equal(schemeOfColorScheme("dark"), "dark");
  assert.equal(schemeOfColorScheme("only light"), "light");
  assert.equal(schemeOfColorScheme("light dark"), null);
  assert.equal(schemeOfColorScheme("normal"), null);
  assert.equal(schemeOfColorScheme(""), null);
});
