// Small helpers over the anywidget model: debounced writes of synced state
// (with a guard so our own writes are not mistaken for kernel changes), and
// requests answered over custom messages keyed by `req` (attributes, sample texts,
// the filter's attribute terms).

/**
 * The part of the anywidget model interface the renderer uses.
 * @typedef {Object} AnyModel
 * @property {(key: string) => any} get
 * @property {(key: string, value: any) => void} set
 * @property {() => void} save_changes
 * @property {(event: string, cb: (...args: any[]) => void) => void} on
 * @property {(event?: string | null, cb?: ((...args: any[]) => void) | null) => void} off
 * @property {(content: any, callbacks?: any, buffers?: any[]) => void} send
 */

export class Sync {
  /** @param {AnyModel} model */
  constructor(model) {
    this.model = model;
    /** True while this view is writing, so change handlers can ignore the echo. */
    this.writing = false;
    /** @type {Map<string, ReturnType<typeof setTimeout>>} */
    this.timers = new Map();
    /** @type {Map<string, () => any>} */
    this.pending = new Map();
  }

  /** @param {string} key */
  get(key) {
    try {
      return this.model.get(key);
    } catch {
      return undefined;
    }
  }

  /**
   * Write now and save.
   * @param {string} key
   * @param {any} value
   */
  setNow(key, value) {
    const timer = this.timers.get(key);
    if (timer !== undefined) clearTimeout(timer);
    this.timers.delete(key);
    this.pending.delete(key);
    this.write(key, value);
  }

  /**
   * Write after `ms` of quiet; the value is computed when the timer fires.
   * @param {string} key
   * @param {() => any} valueFn
   * @param {number} ms
   */
  setLater(key, valueFn, ms) {
    const timer = this.timers.get(key);
    if (timer !== undefined) clearTimeout(timer);
    this.pending.set(key, valueFn);
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        const fn = this.pending.get(key);
        this.pending.delete(key);
        if (fn) this.write(key, fn());
      }, ms),
    );
  }

  /** Write every pending value now (used on cleanup). */
  flush() {
    for (const [key, fn] of this.pending) {
      const timer = this.timers.get(key);
      if (timer !== undefined) clearTimeout(timer);
      this.write(key, fn());
    }
    this.timers.clear();
    this.pending.clear();
  }

  /** Drop pending writes. */
  cancel() {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.pending.clear();
  }

  /**
   * @param {string} key
   * @param {any} value
   */
  write(key, value) {
    this.writing = true;
    try {
      this.model.set(key, value);
      this.model.save_changes();
    } catch (err) {
      console.warn(`slime-trace-widget: could not sync ${key}`, err);
    } finally {
      this.writing = false;
    }
  }
}

/**
 * @typedef {Object} AttrsReply
 * @property {string} type
 * @property {number} req
 * @property {string} kind
 * @property {number} index
 * @property {Record<string, any>|null} [detail]
 * @property {string} [error]
 */

/**
 * @typedef {Object} SampleTextReply
 * @property {string} type
 * @property {number} req
 * @property {number} sample payload sample index
 * @property {string} field
 * @property {string|null} [text] the text, cut where the kernel or page stops
 * @property {number|null} [chars] the whole text's length, in code points
 * @property {string} [error]
 */

let reqCounter = Math.floor(Math.random() * 1e6) * 1000;

/**
 * Ask the kernel (or a snapshot's local model) for what it keeps back from the
 * payload: an item's attributes, a sample's whole text. Replies are matched to
 * requests by `req` and type, since every view of a widget hears every reply.
 */
export class Requests {
  /**
   * @param {AnyModel} model
   * @param {number} [timeoutMs]
   */
  constructor(model, timeoutMs = 20000) {
    this.model = model;
    this.timeoutMs = timeoutMs;
    /** @type {Map<number, {type: string, resolve: (r: any) => void, reject: (e: Error) => void, timer: ReturnType<typeof setTimeout>}>} */
    this.waiting = new Map();
    /** @param {any} msg */
    this.onMsg = (msg) => {
      if (!msg || typeof msg !== "object") return;
      const waiter = this.waiting.get(msg.req);
      if (!waiter || waiter.type !== msg.type) return; // another view's request, or already timed out
      clearTimeout(waiter.timer);
      this.waiting.delete(msg.req);
      waiter.resolve(msg);
    };
    model.on("msg:custom", this.onMsg);
  }

  /**
   * @param {"span"|"event"} kind
   * @param {number} index payload index
   * @param {string} [view] the payload's `meta.view_id`: the kernel refuses the request
   *   once another view is shown, whose index would name another item
   * @returns {{req: number, promise: Promise<AttrsReply>}}
   */
  attrs(kind, index, view) {
    return this.ask(view === undefined ? { type: "attrs", kind, index } : { type: "attrs", kind, index, view });
  }

  /**
   * @param {number} sample payload sample index
   * @param {string} field "prompt", "response", "label" or "metadata"
   * @param {string} [view] the payload's `meta.view_id`, as for attrs
   * @returns {{req: number, promise: Promise<SampleTextReply>}}
   */
  sampleText(sample, field, view) {
    return this.ask(view === undefined ? { type: "sample_text", sample, field } : { type: "sample_text", sample, field, view });
  }

  /**
   * Send `content` with a fresh `req`; the promise settles with the reply, or
   * fails when none comes within the timeout.
   * @param {{type: string} & Record<string, any>} content
   * @returns {{req: number, promise: Promise<any>}}
   */
  ask(content) {
    const req = ++reqCounter;
    const promise = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(req);
        reject(new Error("no reply from the kernel (is it running?)"));
      }, this.timeoutMs);
      this.waiting.set(req, { type: content.type, resolve, reject, timer });
      try {
        this.model.send({ ...content, req });
      } catch (err) {
        clearTimeout(timer);
        this.waiting.delete(req);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
    return { req, promise };
  }

  dispose() {
    for (const waiter of this.waiting.values()) clearTimeout(waiter.timer);
    this.waiting.clear();
    this.model.off("msg:custom", this.onMsg);
  }
}
