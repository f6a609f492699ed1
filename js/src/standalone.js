// A local stand-in for the anywidget model, so an HTML snapshot (or the dev
// harness) can call the same `render` with no kernel: get / set / on / off /
// save_changes / send over in-memory state, answering "attrs", "sample_text"
// and "query_attrs" requests from data embedded in the page.

import CONTRACT from "../../slime_trace_widget/view/payload_contract.json" with { type: "json" };

/**
 * Attributes embedded in a page: `{"span": {"<index>": detail, ...},
 * "event": {...}}` (objects keyed by payload index, or arrays indexed by it),
 * or a function `(kind, index) => detail` (may return a promise).
 * @typedef {{span?: Record<string, any>|any[], event?: Record<string, any>|any[]} | ((kind: string, index: number) => any)} AttrsSource
 */

/**
 * Sample texts embedded in a page: `(sample, field) => {text, chars}` for a
 * payload sample index, or null when the page does not hold that text (may
 * return a promise).
 * @typedef {(sample: number, field: string) => ({text: string|null, chars: number|null} | null | Promise<{text: string|null, chars: number|null} | null>)} SampleTextSource
 */

/**
 * @typedef {Object} LocalModelOptions
 * @property {AttrsSource} [attrs]
 * @property {SampleTextSource} [sampleText]
 * @property {(terms: any[]) => Promise<Record<string, any>>} [queryAttrs] a "query_attrs" reply's body (docs/payload.md)
 * @property {(changes: Record<string, any>) => void} [onSave] called by save_changes with the keys set since the last save
 * @property {(msg: any) => void} [onSend] called with every message the renderer sends
 */

/** Callbacks by event name; one that throws is logged and the others still run. */
class Handlers {
  constructor() {
    /** @type {Map<string, Set<(...args: any[]) => void>>} */
    this.byEvent = new Map();
  }

  /**
   * @param {string} event
   * @param {(...args: any[]) => void} cb
   */
  on(event, cb) {
    let handlers = this.byEvent.get(event);
    if (!handlers) {
      handlers = new Set();
      this.byEvent.set(event, handlers);
    }
    handlers.add(cb);
  }

  /**
   * Without `event`, `cb` from every event (all callbacks without `cb` either);
   * with it, `cb` from that event (all of its callbacks without `cb`).
   * @param {string|null} [event]
   * @param {((...args: any[]) => void)|null} [cb]
   */
  off(event, cb) {
    if (!event) {
      if (!cb) this.byEvent.clear();
      else for (const handlers of this.byEvent.values()) handlers.delete(cb);
      return;
    }
    const handlers = this.byEvent.get(event);
    if (!handlers) return;
    if (cb) handlers.delete(cb);
    else handlers.clear();
  }

  /**
   * @param {string} event
   * @param {...any} args
   */
  emit(event, ...args) {
    const handlers = this.byEvent.get(event);
    if (!handlers) return;
    for (const handler of [...handlers]) {
      try {
        handler(...args);
      } catch (err) {
        console.error(`slime-trace-widget: handler for ${event} failed`, err);
      }
    }
  }
}

/**
 * The attributes of a span or event that `source` embeds, or null.
 * @param {AttrsSource|undefined} source
 * @returns {(kind: string, index: number) => Promise<any>}
 */
function embeddedAttrs(source) {
  return async (kind, index) => {
    if (!source) return null;
    if (typeof source === "function") return await source(kind, index);
    const table = kind === "event" ? source.event : source.span;
    if (!table) return null;
    const attrs = Array.isArray(table) ? table[index] : table[String(index)];
    return attrs === undefined ? null : attrs;
  };
}

/**
 * @typedef {Object} Reply how a page answers one request of the renderer
 * @property {Record<string, any>} head what the reply repeats of the request
 * @property {() => Promise<Record<string, any>>} answer the rest of the reply
 * @property {Record<string, any>} failed the rest when `answer` throws (with its error)
 */

/**
 * What a reply repeats of request `msg`: its type, `req` and the keys the
 * contract names for its type (`request_echoes`), as the kernel's replies do.
 * @param {any} msg
 * @returns {Record<string, any>}
 */
function headOf(msg) {
  const echoed = /** @type {Record<string, string[]>} */ (CONTRACT.request_echoes)[msg.type] ?? [];
  return { type: msg.type, req: msg.req, ...Object.fromEntries(echoed.map((key) => [key, msg[key] ?? null])) };
}

/**
 * The reply to an "attrs", "sample_text" or "query_attrs" request from what the page
 * embeds; null for any other message.
 * @param {any} msg
 * @param {LocalModelOptions} opts
 * @param {(kind: string, index: number) => Promise<any>} attrsFor
 * @returns {Reply|null}
 */
function replyTo(msg, opts, attrsFor) {
  if (!msg || typeof msg !== "object") return null;
  if (msg.type === "attrs") {
    return {
      head: headOf(msg),
      answer: async () => {
        if (msg.kind !== "span" && msg.kind !== "event") return { detail: null, error: `kind must be "span" or "event", not ${JSON.stringify(msg.kind) ?? "none"}` };
        const detail = await attrsFor(msg.kind, msg.index);
        return detail === null ? { detail, error: "attributes are not embedded in this page" } : { detail };
      },
      failed: { detail: null },
    };
  }
  if (msg.type === "sample_text") {
    return {
      head: headOf(msg),
      answer: async () => {
        const found = opts.sampleText ? await opts.sampleText(msg.sample, msg.field) : null;
        return found ?? { text: null, chars: null, error: "this text is not embedded in this page" };
      },
      failed: { text: null, chars: null },
    };
  }
  if (msg.type === "query_attrs") {
    return {
      head: headOf(msg),
      answer: async () => {
        if (!opts.queryAttrs) throw new Error("attributes are not embedded in this page");
        return await opts.queryAttrs(msg.terms);
      },
      failed: {},
    };
  }
  return null;
}

/**
 * Emit `reply` as a custom message, asynchronously like a kernel would.
 * @param {Handlers} handlers
 * @param {Reply} reply
 */
function sendLater(handlers, reply) {
  setTimeout(async () => {
    let body;
    try {
      body = await reply.answer();
    } catch (err) {
      body = { ...reply.failed, error: String(err) };
    }
    handlers.emit("msg:custom", { ...reply.head, ...body }, []);
  }, 0);
}

/**
 * Create a model over `state`. `state` is either a payload
 * (`{version, meta, buffers}`) or an object of trait values
 * `{payload, selected, view_range, view_state}`.
 * @param {any} state
 * @param {LocalModelOptions} [opts]
 * @returns {import("./data/model.js").AnyModel & {attrsFor: (kind: string, index: number) => Promise<any>, receive: (content: any, buffers?: any[]) => void}}
 */
export function createLocalModel(state, opts = {}) {
  const isPayload = state && typeof state === "object" && "buffers" in state && "meta" in state;
  /** @type {Record<string, any>} */
  const values = {
    payload: null,
    selected: {},
    view_range: [],
    view_state: {},
    ...(isPayload ? { payload: state } : state || {}),
  };
  const handlers = new Handlers();
  /** @type {Record<string, any>} */
  let dirty = {};
  const attrsFor = embeddedAttrs(opts.attrs);
  return {
    /** @param {string} key */
    get(key) {
      return values[key];
    },
    /**
     * @param {string} key
     * @param {any} value
     */
    set(key, value) {
      const old = values[key];
      values[key] = value;
      dirty[key] = value;
      if (old !== value) {
        handlers.emit(`change:${key}`, value);
        handlers.emit("change", { [key]: value });
      }
    },
    save_changes() {
      const changes = dirty;
      dirty = {};
      if (opts.onSave && Object.keys(changes).length) opts.onSave(changes);
    },
    /**
     * @param {string} event
     * @param {(...args: any[]) => void} cb
     */
    on(event, cb) {
      handlers.on(event, cb);
    },
    /**
     * @param {string|null} [event]
     * @param {((...args: any[]) => void)|null} [cb]
     */
    off(event, cb) {
      handlers.off(event, cb);
    },
    /** @param {any} msg */
    send(msg) {
      if (opts.onSend) opts.onSend(msg);
      const reply = replyTo(msg, opts, attrsFor);
      if (reply) sendLater(handlers, reply);
    },
    attrsFor,
    /**
     * Deliver a message as the kernel would (a live page's poller, page/live_page.js).
     * @param {any} content
     * @param {any[]} [buffers]
     */
    receive(content, buffers = []) {
      handlers.emit("msg:custom", content, buffers);
    },
  };
}
