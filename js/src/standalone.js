// A local stand-in for the anywidget model, so an HTML snapshot (or the dev
// harness) can call the same `render` with no kernel: get / set / on / off /
// save_changes / send over in-memory state, answering "attrs", "sample_text"
// and "query_attrs" requests from data embedded in the page.

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
  /** @type {Map<string, Set<(...args: any[]) => void>>} */
  const handlers = new Map();
  /** @type {Record<string, any>} */
  let dirty = {};

  /**
   * @param {string} event
   * @param {...any} args
   */
  const emit = (event, ...args) => {
    const hs = handlers.get(event);
    if (!hs) return;
    for (const handler of [...hs]) {
      try {
        handler(...args);
      } catch (err) {
        console.error(`slime-trace-widget: handler for ${event} failed`, err);
      }
    }
  };

  /**
   * @param {string} kind
   * @param {number} index
   */
  const attrsFor = async (kind, index) => {
    const src = opts.attrs;
    if (!src) return null;
    if (typeof src === "function") return await src(kind, index);
    const table = kind === "event" ? src.event : src.span;
    if (!table) return null;
    const attrs = Array.isArray(table) ? table[index] : table[String(index)];
    return attrs === undefined ? null : attrs;
  };

  /**
   * Emit `head` plus what `answer` resolves to, asynchronously like a kernel
   * would; when `answer` throws, `head` plus `failed` and the error.
   * @param {Record<string, any>} head
   * @param {() => Promise<Record<string, any>>} answer
   * @param {Record<string, any>} failed
   */
  const replyLater = (head, answer, failed) => {
    setTimeout(async () => {
      let body;
      try {
        body = await answer();
      } catch (err) {
        body = { ...failed, error: String(err) };
      }
      emit("msg:custom", { ...head, ...body }, []);
    }, 0);
  };

  const model = {
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
        emit(`change:${key}`, value);
        emit("change", { [key]: value });
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
      let hs = handlers.get(event);
      if (!hs) {
        hs = new Set();
        handlers.set(event, hs);
      }
      hs.add(cb);
    },
    /**
     * @param {string|null} [event]
     * @param {((...args: any[]) => void)|null} [cb]
     */
    off(event, cb) {
      if (!event) {
        if (!cb) handlers.clear();
        else for (const hs of handlers.values()) hs.delete(cb);
        return;
      }
      const hs = handlers.get(event);
      if (!hs) return;
      if (cb) hs.delete(cb);
      else hs.clear();
    },
    /** @param {any} msg */
    send(msg) {
      if (opts.onSend) opts.onSend(msg);
      if (!msg || typeof msg !== "object") return;
      if (msg.type === "attrs") {
        replyLater({ type: "attrs", req: msg.req, kind: msg.kind, index: msg.index }, async () => {
          const detail = await attrsFor(msg.kind, msg.index);
          return detail === null ? { detail, error: "attributes are not embedded in this page" } : { detail };
        }, { detail: null });
      } else if (msg.type === "sample_text") {
        replyLater({ type: "sample_text", req: msg.req, sample: msg.sample, field: msg.field }, async () => {
          const found = opts.sampleText ? await opts.sampleText(msg.sample, msg.field) : null;
          return found ?? { text: null, chars: null, error: "this text is not embedded in this page" };
        }, { text: null, chars: null });
      } else if (msg.type === "query_attrs") {
        replyLater({ type: "query_attrs", req: msg.req }, async () => {
          if (!opts.queryAttrs) throw new Error("attributes are not embedded in this page");
          return await opts.queryAttrs(msg.terms);
        }, {});
      }
    },
    attrsFor,
    /**
     * Deliver a message as the kernel would (a live page's poller, page/live_page.js).
     * @param {any} content
     * @param {any[]} [buffers]
     */
    receive(content, buffers = []) {
      emit("msg:custom", content, buffers);
    },
  };
  return model;
}
