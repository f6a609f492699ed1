// Boot a standalone HTML snapshot: the page inlines this bundle and two
// gzip-compressed, base64-encoded blocks; nothing is fetched, so the page
// works from file:// with the network off.
//   data block:    "STW1" | u32 header length | header JSON | column bytes
//   details block: "STW1" | u32 header length | details JSON (sample
//                  summaries and texts; item fields and attribute tables as
//                  columns, as in page_attrs.js) | the columns' bytes;
//                  inflated on the first click, or
//                  when the filter first has an attribute term
// The header holds the payload meta (buffers as [offset, length] into the
// column bytes) and the synced state. Keeping the details apart means the
// first paint only inflates the columns, a few percent of the page.

import { base64ToBytes } from "../data/bytes.js";
import { followUpdates, takeKeptView } from "./follow.js";
import { attrRow, attrTermHits, itemField, itemRow } from "./page_attrs.js";
import { createLocalModel } from "../standalone.js";
import { followLive, liveAttrs } from "./live_page.js";

const MAGIC = "STW1";

/**
 * @typedef {Object} SnapshotHeader
 * @property {{version: number, meta: any, buffers: Record<string, [number, number]>}} payload
 * @property {{view_state?: any, view_range?: number[], selected?: any}} state
 */

/**
 * @typedef {Object} SnapshotDetails
 * @property {import("./page_attrs.js").PageItemTable} spans  fields per payload span
 * @property {import("./page_attrs.js").PageItemTable} events fields per payload event
 * @property {any[]} samples                  summary per payload sample
 * @property {Record<string, (string|null)[]>} sample_texts per field, per payload sample: the
 *   text "show all" shows (null where the summary's preview is all of it)
 * @property {import("./page_attrs.js").PageItemTable} segments exact PD segments, sorted by
 *   owner (the payload span they belong to)
 * @property {import("./page_attrs.js").PageAttrTable} [span_start_attrs] per payload span
 * @property {import("./page_attrs.js").PageAttrTable} [span_end_attrs]   per payload span
 * @property {import("./page_attrs.js").PageAttrTable} [event_attrs]      per payload event
 * @property {import("./page_attrs.js").Buffers} views the columns' byte strings
 */

/** @param {Uint8Array} bytes */
async function gunzip(bytes) {
  const blob = new Blob([/** @type {BlobPart} */ (bytes)]);
  const stream = blob.stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/**
 * A decompressed block's JSON header and the bytes after it.
 * @param {Uint8Array} raw
 */
function splitBlock(raw) {
  const magic = new TextDecoder().decode(raw.subarray(0, 4));
  if (magic !== MAGIC) throw new Error(`not a slime-trace-widget snapshot block (${magic})`);
  const headerLength = new DataView(raw.buffer, raw.byteOffset, raw.byteLength).getUint32(4, true);
  const base = 8 + headerLength;
  return { header: JSON.parse(new TextDecoder().decode(raw.subarray(8, base))), body: raw.subarray(base) };
}

/**
 * Views of the named byte strings of a block's body.
 * @param {Uint8Array} body
 * @param {Record<string, [number, number]>} places offset and length of each
 */
function viewsOf(body, places) {
  /** @type {Record<string, DataView>} */
  const views = {};
  for (const [name, [offset, length]] of Object.entries(places)) {
    if (offset < 0 || length < 0 || offset + length > body.length) throw new Error(`snapshot buffer ${name} is out of range`);
    views[name] = new DataView(body.buffer, body.byteOffset + offset, length);
  }
  return views;
}

/**
 * Split a decompressed data block into its header and payload.
 * @param {Uint8Array} raw
 */
export function parseBlock(raw) {
  const { header, body } = splitBlock(raw);
  /** @type {SnapshotHeader} */
  const typedHeader = header;
  const buffers = viewsOf(body, typedHeader.payload.buffers);
  return { header: typedHeader, payload: { version: typedHeader.payload.version, meta: typedHeader.payload.meta, buffers } };
}

/**
 * The details tables of a decompressed details block, with its byte strings.
 * @param {Uint8Array} raw
 * @returns {SnapshotDetails}
 */
export function parseDetails(raw) {
  const { header, body } = splitBlock(raw);
  return { ...header, views: viewsOf(body, header.buffers ?? {}) };
}

/**
 * The detail object the panel expects, assembled from the columnar tables.
 * @param {SnapshotDetails} details
 * @param {any} payload
 * @param {string} kind
 * @param {number} index
 */
export function detailFor(details, payload, kind, index) {
  const out = itemRow(kind === "event" ? details.events : details.spans, index, details.views);
  if (!out) return null;
  if (kind === "event") {
    out.attrs = attrRow(details.event_attrs, index, details.views);
  } else {
    out.start_attrs = attrRow(details.span_start_attrs, index, details.views);
    out.end_attrs = attrRow(details.span_end_attrs, index, details.views);
  }
  const sampleColumn = kind === "event" ? "ev_sample" : "span_sample";
  const sample = payload.buffers[sampleColumn].getUint32(index * 4, true);
  out.sample = details.samples[sample] ?? null;
  if (kind !== "event") out.segments = segmentsOf(details.segments, index, details.views);
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
 * @param {import("./page_attrs.js").PageItemTable|undefined} segments
 * @param {number} index
 * @param {import("./page_attrs.js").Buffers} views
 */
function segmentsOf(segments, index, views) {
  const owner = itemField(segments, "owner", views);
  const count = segments?.rows ?? 0;
  let lo = 0;
  let hi = count;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (owner(mid) < index) lo = mid + 1;
    else hi = mid;
  }
  const [name, start, end, duration] = ["name", "start", "end", "duration"].map((key) => itemField(segments, key, views));
  const out = [];
  for (let i = lo; i < count && owner(i) === index; i++) {
    out.push({ name: name(i), start: start(i), end: end(i), duration: duration(i) });
  }
  return out;
}

/**
 * The body of a "query_attrs" reply, from the embedded attribute tables: per
 * payload span and event, whether every attribute term holds, as bitmaps
 * (bytes here, base64 from the kernel; query.js reads both).
 * @param {SnapshotDetails} details
 * @param {any} payload
 * @param {import("../data/query.js").Term[]} terms
 */
export function queryAttrsFor(details, payload, terms) {
  const nSpans = payload.buffers.span_sample.byteLength / 4;
  const nEvents = payload.buffers.ev_sample.byteLength / 4;
  const spans = attrTermHits([details.span_end_attrs, details.span_start_attrs], nSpans, terms, details.views);
  const events = attrTermHits([details.event_attrs], nEvents, terms, details.views);
  return { n_spans: nSpans, n_events: nEvents, spans: packBits(spans), events: packBits(events) };
}

/**
 * One bit per item, least significant first (numpy packbits, bitorder="little").
 * @param {Uint8Array} flags
 */
function packBits(flags) {
  const out = new Uint8Array(Math.ceil(flags.length / 8));
  for (let i = 0; i < flags.length; i++) if (flags[i]) out[i >> 3] |= 1 << (i & 7);
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
      .then(parseDetails);
    return details;
  };
  const follow = /** @type {any} */ (header).source?.follow;
  const live = /** @type {import("./live_page.js").LiveNote|undefined} */ (/** @type {any} */ (header).source?.live);
  const kept = follow ? takeKeptView(globalThis.sessionStorage) : null;
  /** @type {ReturnType<typeof followLive>|null} */
  let liveFollow = null;
  const model = createLocalModel(
    { payload, selected: {}, view_range: [], view_state: {}, ...header.state, ...kept },
    {
      attrs: live ? (kind, index) => liveAttrs(live, kind, index) : async (kind, index) => detailFor(await readDetails(), payload, kind, index),
      sampleText: async (sample, field) => textFor(await readDetails(), sample, field),
      queryAttrs: async (terms) => queryAttrsFor(await readDetails(), payload, terms),
      onSend: (msg) => {
        if (msg?.type === "live_sync") liveFollow?.sync(msg.since, msg.epoch);
      },
    },
  );
  if (live) liveFollow = followLive(model, live);
  const cleanup = render({ model, el: host }); // a live view asks for its blocks (live_sync)
  if (follow) followUpdates(host, follow, model);
  return () => {
    liveFollow?.stop();
    cleanup();
  };
}
