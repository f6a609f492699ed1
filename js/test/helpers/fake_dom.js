// A document just large enough for the panels to render into under node: elements
// that keep their children, text, attributes and listeners, so a test can read what a
// panel shows and click its buttons. Installed as globalThis.document on import.

class FakeText {
  /** @param {string} text */
  constructor(text) {
    this.text = String(text);
  }

  get textContent() {
    return this.text;
  }
}

export class FakeElement {
  /** @param {string} tag */
  constructor(tag) {
    this.tagName = tag.toUpperCase();
    /** @type {(FakeElement|FakeText)[]} */
    this.children = [];
    /** @type {Record<string, string>} */
    this.attributes = {};
    /** @type {Record<string, Function>} */
    this.listeners = {};
    /** @type {Record<string, string>} */
    this.style = {};
    /** @type {Record<string, string>} */
    this.dataset = {};
    this.className = "";
    this.title = "";
    const classes = new Set();
    this.classList = {
      add: (/** @type {string[]} */ ...names) => names.forEach((name) => classes.add(name)),
      remove: (/** @type {string[]} */ ...names) => names.forEach((name) => classes.delete(name)),
      toggle: (/** @type {string} */ name, /** @type {boolean|undefined} */ on) => {
        const wanted = on === undefined ? !classes.has(name) : on;
        if (wanted) classes.add(name);
        else classes.delete(name);
        return wanted;
      },
      contains: (/** @type {string} */ name) => classes.has(name),
    };
  }

  /** @param {FakeElement|FakeText} child */
  appendChild(child) {
    this.children.push(child);
    return child;
  }

  /** @param {(FakeElement|FakeText|string)[]} children */
  append(...children) {
    for (const child of children) this.appendChild(typeof child === "string" ? new FakeText(child) : child);
  }

  /** @param {(FakeElement|FakeText|string)[]} children */
  replaceChildren(...children) {
    this.children = [];
    this.append(...children);
  }

  /** @param {string} type @param {Function} listener */
  addEventListener(type, listener) {
    this.listeners[type] = listener;
  }

  removeEventListener() {}

  remove() {}

  /** @param {string} name @param {string} value */
  setAttribute(name, value) {
    this.attributes[name] = String(value);
  }

  /** @param {string} name */
  getAttribute(name) {
    return this.attributes[name] ?? null;
  }

  getBoundingClientRect() {
    return { left: 0, top: 0, right: 0, bottom: 0, width: 0, height: 0 };
  }

  set textContent(text) {
    this.children = [new FakeText(text)];
  }

  /** @returns {string} */
  get textContent() {
    return this.children.map((child) => child.textContent).join("");
  }

  /** This element and every element inside it, in document order. */
  *elements() {
    yield this;
    for (const child of this.children) if (child instanceof FakeElement) yield* child.elements();
  }
}

/** @type {any} */ (globalThis).document = {
  createElement: (/** @type {string} */ tag) => new FakeElement(tag),
  createTextNode: (/** @type {string} */ text) => new FakeText(text),
};
