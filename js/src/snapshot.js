// Boot a standalone HTML snapshot: the page inlines this bundle and two
// gzip-compressed, base64-encoded blocks; nothing is fetched, so the page
// works from file:// with the network off.
//   data block:    "STW1" | u32 header length | header JSON | column bytes
//   details block: the details JSON (attributes, sample texts), decoded on
//                  the first click
// The header holds the payload meta (buffers as [offset, length] into the
// column bytes) and the synced state. Keeping the details apart means the
// first paint only inflates the columns, a few percent of the page.

import { createLocalModel } from "./standalone.js";

const MAGIC = "STW1";

/**
 * @typedef {Object} SnapshotHeader
 * @property {{version: number, meta: any, buffers: Record<string, [number, number]>}} payload
 * @property {{view_state?: any, view_range?: number[], selected?: any}} state
 */

/**
 * @typedef {Object} SnapshotDetails
 * @property {Record<string, any[]>} spans    columns indexed by payload span
 * @property {Record<string, any[]>} events   columns indexed by payload event
 * @property {any[]} samples                  summary per payload sample
 * @property {Record<string, (string|null)[]>} sample_texts per field, per payload sample: the
 *   text "show all" shows (null where the summary's preview is all of it)
 * @property {Record<string, any[]>} segments exact PD segments, sorted by owner span
 */

/** @param {string} b64 */
export function base64ToBytes(b64) {
  const native = /** @type {any} */ (Uint8Array).fromBase64;
  if (typeof native === "function") return /** @type {Uint8Array} */ (native(b64));
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** @param {Uint8Array} bytes */
async function gunzip(bytes) {
  const blob = new Blob([/** @type {BlobPart} */ (bytes)]);
  const stream = blob.stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/**
 * Split a decompressed data block into its header and payload.
 * @param {Uint8Array} raw
 */
export function parseBlock(raw) {
  const magic = new TextDecoder().decode(raw.subarray(0, 4));
  if (magic !== MAGIC) throw new Error(`not a slime-trace-widget snapshot block (${magic})`);
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const headerLength = view.getUint32(4, true);
  const base = 8 + headerLength;
  /** @type {SnapshotHeader} */
  const header = JSON.parse(new TextDecoder().decode(raw.subarray(8, base)));
  /** @type {Record<string, DataView>} */
  const buffers = {};
  for (const [name, [offset, length]] of Object.entries(header.payload.buffers)) {
    buffers[name] = new DataView(raw.buffer, raw.byteOffset + base + offset, length);
  }
  return { header, payload: { version: header.payload.version, meta: header.payload.meta, buffers } };
}

/**
 * The detail object the panel expects, assembled from the columnar tables.
 * @param {SnapshotDetails} details
 * @param {any} payload
 * @param {string} kind
 * @param {number} index
 */
export function detailFor(details, payload, kind, index) {
  const table = kind === "event" ? details.events : details.spans;
  const columns = Object.keys(table);
  if (!columns.length || index < 0 || index >= table[columns[0]].length) return null;
  /** @type {Record<string, any>} */
  const out = {};
  for (const column of columns) out[column] = table[column][index];
  const sampleColumn = kind === "event" ? "ev_sample" : "span_sample";
  const sample = payload.buffers[sampleColumn].getUint32(index * 4, true);
  out.sample = details.samples[sample] ?? null;
  if (kind !== "event") out.segments = segmentsOf(details.segments, index);
  return out;
}

/**
 * Sample text `field` of payload sample `sample` as the page holds it, with the
 * whole text's length, for "show all"; null for a sample or field it lacks.
 * @param {SnapshotDetails} details
 * @param {number} sample
 * @param {string} field
 */
export function textFor(details, sample, field) {
  const summary = Number.isInteger(sample) ? details.samples[sample] : undefined;
  const texts = details.sample_texts ?? {};
  if (!summary || typeof field !== "string" || !Object.hasOwn(texts, field)) return null;
  return { text: texts[field][sample] ?? summary[field] ?? null, chars: summary[`${field}_chars`] ?? null };
}

/**
 * Segments owned by span `index` (the owner column is sorted: binary search).
 * @param {Record<string, any[]>} segments
 * @param {number} index
 */
function segmentsOf(segments, index) {
  const owners = segments.owner || [];
  let lo = 0;
  let hi = owners.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (owners[mid] < index) lo = mid + 1;
    else hi = mid;
  }
  const out = [];
  for (let i = lo; i < owners.length && owners[i] === index; i++) {
    out.push({ name: segments.name[i], start: segments.start[i], end: segments.end[i], duration: segments.duration[i] });
  }
  return out;
}

/**
 * Read the page's blocks and render the timeline into `host`.
 * @param {HTMLElement} dataElement element whose text is the base64 data block
 * @param {HTMLElement} detailsElement element whose text is the base64 details block
 * @param {HTMLElement} host
 * @param {(ctx: {model: any, el: HTMLElement}) => () => void} render
 */
export async function bootSnapshot(dataElement, detailsElement, host, render) {
  const raw = await gunzip(base64ToBytes((dataElement.textContent || "").trim()));
  const { header, payload } = parseBlock(raw);
  /** @type {Promise<SnapshotDetails>|null} */
  let details = null;
  const readDetails = () => {
    details ??= gunzip(base64ToBytes((detailsElement.textContent || "").trim()))
      .then((bytes) => JSON.parse(new TextDecoder().decode(bytes)));
    return details;
  };
  const model = createLocalModel(
    { payload, selected: {}, view_range: [], view_state: {}, ...header.state },
    {
      attrs: async (kind, index) => detailFor(await readDetails(), payload, kind, index),
      sampleText: async (sample, field) => textFor(await readDetails(), sample, field),
    },
  );
  return render({ model, el: host });
}
