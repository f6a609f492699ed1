// Payloads whose binary buffers did not arrive. Colab's widget manager can
// drop a widget's binary buffers, and other hosts hand them over in forms that
// may not decode; the renderer would then draw empty rows. A view that finds
// the buffers missing or undecodable asks the kernel for an inline copy
// (`{"type": "payload_inline"}`, answered with the whole payload, each buffer
// as base64 text, since binary message buffers may be lost too) and draws
// that. `WholePayload` hands the renderer a model whose `payload` is always
// the drawable one.

import { CTORS, DEFAULT_DTYPES } from "../data/decode.js";
import { Requests } from "../data/model.js";

/** @typedef {import("../data/model.js").AnyModel} AnyModel */

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Bytes a buffer holds, or -1 when it is not one the decoder reads (a
 * placeholder object, text that is not base64).
 * @param {unknown} buf
 */
function byteLength(buf) {
  if (buf instanceof ArrayBuffer || ArrayBuffer.isView(buf)) return buf.byteLength;
  if (typeof buf === "string") {
    if (buf.length % 4 !== 0 || !BASE64.test(buf)) return -1;
    return (buf.length / 4) * 3 - (buf.endsWith("==") ? 2 : buf.endsWith("=") ? 1 : 0);
  }
  return -1;
}

/**
 * Names of the columns `payload` declares (meta.columns) whose buffer is not
 * usable: missing, not bytes or base64 text, not a whole number of elements,
 * or, for a per-sample column, not one element per sample. Empty when the
 * payload can be drawn as it is (also for no payload at all).
 * @param {any} payload
 * @returns {string[]}
 */
export function lostBuffers(payload) {
  if (!payload || typeof payload !== "object" || !payload.meta || typeof payload.meta !== "object") return [];
  const meta = payload.meta;
  const columns = /** @type {Record<string, string>} */ (meta.columns && typeof meta.columns === "object" ? meta.columns : DEFAULT_DTYPES);
  const buffers = payload.buffers && typeof payload.buffers === "object" ? payload.buffers : {};
  const rows = Array.isArray(meta.samples?.row) ? meta.samples.row.length : -1;
  const lost = [];
  for (const [name, dtype] of Object.entries(columns)) {
    const size = CTORS[/** @type {keyof typeof CTORS} */ (dtype)]?.BYTES_PER_ELEMENT ?? 1;
    const buf = buffers[name];
    if (Array.isArray(buf)) continue; // plain numbers, as a test or another producer may send
    const byteCount = byteLength(buf);
    if (byteCount < 0 || byteCount % size !== 0 || (name.startsWith("smp_") && rows >= 0 && byteCount !== rows * size)) lost.push(name);
  }
  return lost;
}

/**
 * A model for the renderer whose `payload` is drawable: the host's when its
 * buffers arrived, else the kernel's inline copy. `ready(model)` is called
 * once the first payload can be drawn (at once when nothing was lost); a
 * later payload with lost buffers is announced (`change:payload`) when its
 * copy arrives. Without a copy (no kernel, no answer) the payload is drawn as
 * it came.
 */
export class WholePayload {
  /**
   * @param {AnyModel} model the host's model
   * @param {(model: AnyModel) => void} ready
   * @param {number} [timeoutMs] how long to wait for the kernel's copy
   */
  constructor(model, ready, timeoutMs = 60000) {
    this.host = model;
    this.requests = new Requests(model, timeoutMs);
    /** @type {Set<(...args: any[]) => void>} */
    this.listeners = new Set();
    /** @type {((model: AnyModel) => void)|null} */
    this.ready = ready;
    this.disposed = false;
    /** The payload views draw. */
    this.payload = undefined;
    const host = model;
    /** @type {AnyModel} */
    this.model = {
      get: (key) => (key === "payload" ? this.payload : host.get(key)),
      set: (key, value) => host.set(key, value),
      save_changes: () => host.save_changes(),
      send: (content, callbacks, buffers) => host.send(content, callbacks, buffers),
      on: (event, cb) => (event === "change:payload" ? this.listeners.add(cb) : host.on(event, cb)),
      off: (event, cb) => {
        if (event === "change:payload") {
          if (cb) this.listeners.delete(cb);
          else this.listeners.clear();
        } else host.off(event, cb);
      },
    };
    this.onChange = () => this.take(host.get("payload"));
    host.on("change:payload", this.onChange);
    this.take(host.get("payload"));
  }

  /** True until the first payload can be drawn. */
  get pending() {
    return this.ready !== null;
  }

  /** @param {any} payload the host's payload, just received */
  take(payload) {
    const lost = lostBuffers(payload);
    if (lost.length === 0) {
      this.show(payload);
      return;
    }
    console.warn(`slime-trace-widget: ${lost.length} payload buffers did not arrive (${lost.slice(0, 3).join(", ")}…); asking the kernel for an inline copy`);
    this.requests.ask({ type: "payload_inline" }).promise.then(
      (reply) => {
        if (this.disposed || this.host.get("payload") !== payload) return; // a newer payload took over
        const copy = reply && reply.payload;
        if (copy && typeof copy === "object" && lostBuffers(copy).length === 0) this.show(copy);
        else this.fail(payload, reply && reply.error ? String(reply.error) : "the copy is incomplete too");
      },
      (err) => {
        if (!this.disposed && this.host.get("payload") === payload) this.fail(payload, String(err && err.message ? err.message : err));
      },
    );
  }

  /**
   * @param {any} payload
   * @param {string} why
   */
  fail(payload, why) {
    console.warn(`slime-trace-widget: no inline copy of the payload (${why}); drawing what arrived`);
    this.show(payload);
  }

  /** @param {any} payload */
  show(payload) {
    this.payload = payload;
    const ready = this.ready;
    if (ready) {
      this.ready = null;
      ready(this.model);
      return;
    }
    for (const cb of [...this.listeners]) cb();
  }

  dispose() {
    this.disposed = true;
    this.host.off("change:payload", this.onChange);
    this.requests.dispose();
    this.listeners.clear();
  }
}
