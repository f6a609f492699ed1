// A live view's columns, kept whole in the renderer and patched by deltas
// (docs/live-view.md). A delta carries, for each sample that moved, its whole
// block (sample columns, spans, PD segments, events) with span pointers counted
// from the block's first span; the renderer replaces those blocks and copies
// every run of unchanged samples in one piece, shifting its pointers by one
// constant. Sample positions never move (new samples come last), so a block
// applied twice, or a delta older than what a view holds, changes nothing.

import { CTORS, toTyped, DEFAULT_DTYPES, CODE_TABLES, SAMPLE_STRINGS } from "../data/decode.js";
import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };

/** @typedef {import("../data/bytes.js").Typed} Typed */
/** @typedef {import("../data/bytes.js").Dtype} Dtype */

/** Item kinds, each with its columns' prefix and the columns that point at spans (the contract's). */
const KINDS = /** @type {Record<string, {prefix: string, pointers: string[]}>} */ (CONTRACT.item_kinds);

/** @param {string} prefix */
const columnsOf = (prefix) => Object.keys(DEFAULT_DTYPES).filter((name) => name.startsWith(prefix));
const SAMPLE_COLUMNS = columnsOf("smp_");
/** @type {Record<string, string[]>} */
const ITEM_COLUMNS = Object.fromEntries(Object.entries(KINDS).map(([kind, item]) => [kind, columnsOf(item.prefix)]));

/**
 * @typedef {Object} LiveState
 * @property {string} epoch whose blocks these are (a feed that starts over on a newer rollout makes a new epoch)
 * @property {number} seq the last delta applied (0: none)
 * @property {number} nSamples
 * @property {Record<string, Typed>} columns every payload column, pointers absolute
 * @property {Record<string, any[]>} samples per-sample strings (the contract's `sample_strings`)
 * @property {Record<string, string[]>} tables the meta's string tables (the contract's `code_tables`)
 * @property {number} t0 epoch seconds of relative time 0
 * @property {number} now the kernel's now when the last delta was made (relative to t0)
 * @property {string} title
 * @property {Record<string, any>} live the delta's `live` part (stall_after, senders, ...)
 */

/**
 * @typedef {Object} LiveDeltaMeta
 * @property {string} [epoch]
 * @property {number} since
 * @property {number} seq
 * @property {number} n_samples
 * @property {number[]} positions ascending
 * @property {{span: number[], seg: number[], ev: number[]}} counts rows per changed block
 * @property {Record<string, any[]>} samples strings per changed block
 * @property {number} t0
 * @property {number} now
 * @property {string} [title]
 * @property {Record<string, any>} [live]
 */

/** @returns {LiveState} */
export function emptyLiveState() {
  /** @type {Record<string, Typed>} */
  const columns = {};
  for (const name of Object.keys(DEFAULT_DTYPES)) columns[name] = new CTORS[/** @type {Dtype} */ (DEFAULT_DTYPES[name])](0);
  return {
    epoch: "",
    seq: 0,
    nSamples: 0,
    columns,
    samples: Object.fromEntries(SAMPLE_STRINGS.map((field) => [field, []])),
    tables: Object.fromEntries(CODE_TABLES.map((table) => [table, []])),
    t0: 0,
    now: 0,
    title: "live rollout",
    live: {},
  };
}

/**
 * Whether `delta` can be applied to `state`: blocks of the same epoch, starting no
 * later than the state's last delta (a delta holds every block changed after its
 * `since`) and ending no earlier (an older answer that arrives late would put older
 * blocks back), or a whole state (since 0) of another epoch.
 * @param {LiveState} state
 * @param {{since: number, seq: number, epoch?: string}} delta
 */
export function applicable(state, delta) {
  if ((delta.epoch ?? "") !== state.epoch) return delta.since === 0;
  return delta.since <= state.seq && delta.seq >= state.seq;
}

/**
 * The state `delta` is applied to: `state`, or an empty one when the delta starts
 * another epoch's blocks.
 * @param {LiveState} state
 * @param {{epoch?: string}} delta
 */
export function baseFor(state, delta) {
  return (delta.epoch ?? "") === state.epoch ? state : emptyLiveState();
}

/**
 * Per-sample row offsets of an item kind (length nSamples + 1).
 * @param {Typed} owner sample of each row (sorted), or for segments the owning span
 * @param {Typed|null} spanSample for segments: the sample of each span
 * @param {number} nSamples
 */
function offsetsOf(owner, spanSample, nSamples) {
  const off = new Uint32Array(nSamples + 1);
  for (let i = 0; i < owner.length; i++) {
    const sample = spanSample ? spanSample[owner[i]] : owner[i];
    if (sample < nSamples) off[sample + 1]++;
  }
  for (let s = 0; s < nSamples; s++) off[s + 1] += off[s];
  return off;
}

/**
 * The state after `delta` (a new state; `state` is left as it was).
 * @param {LiveState} state
 * @param {LiveDeltaMeta} delta
 * @param {Record<string, unknown>} buffers the delta's columns (DataView, ArrayBuffer, typed array or base64)
 * @returns {LiveState}
 */
export function spliceLive(state, delta, buffers) {
  const nOld = state.nSamples;
  const nNew = Math.max(nOld, delta.n_samples);
  // Nothing moved (most polls of a long rollout): the columns stay the very arrays
  // they were, never written to once a state holds them.
  if (delta.positions.length === 0 && nNew === nOld) return { ...state, ...deltaMeta(state, delta) };
  const changed = changedBlocks(delta.positions, nNew);
  /** @type {Splice} */
  const splice = {
    state,
    nOld,
    nNew,
    positions: delta.positions,
    changed,
    offsets: blockOffsets(state, delta, changed),
    incoming: (name) => toTyped(buffers[name] ?? new ArrayBuffer(0), /** @type {Dtype} */ (DEFAULT_DTYPES[name])),
  };
  /** @type {Record<string, Typed>} */
  const columns = {};
  for (const name of SAMPLE_COLUMNS) columns[name] = splicedSampleColumn(splice, name);
  for (const kind of Object.keys(KINDS)) {
    for (const name of ITEM_COLUMNS[kind]) columns[name] = splicedItemColumn(splice, kind, name);
  }
  return { nSamples: nNew, columns, samples: splicedStrings(splice, delta), ...deltaMeta(state, delta) };
}

/**
 * @typedef {Object} Splice what applying one delta reads
 * @property {LiveState} state
 * @property {number} nOld samples before
 * @property {number} nNew samples after
 * @property {number[]} positions the samples whose blocks the delta carries
 * @property {Int32Array} changed per sample, its block in the delta (-1: unchanged)
 * @property {Record<string, BlockOffsets>} offsets per item kind
 * @property {(name: string) => Typed} incoming the delta's column `name`
 */

/**
 * @typedef {Object} BlockOffsets where each sample's rows of one item kind begin
 * @property {Uint32Array} old in the state (nOld + 1)
 * @property {Uint32Array} fresh in the new state (nNew + 1)
 * @property {Uint32Array} delta each changed block in the delta (positions + 1)
 */

/**
 * Per sample, its block's number in the delta, -1 for a sample the delta leaves.
 * @param {number[]} positions
 * @param {number} nNew
 */
function changedBlocks(positions, nNew) {
  const changed = new Int32Array(nNew).fill(-1);
  positions.forEach((position, j) => {
    if (position >= 0 && position < nNew) changed[position] = j;
  });
  return changed;
}

/**
 * Each item kind's offsets: a changed sample takes its block's size from the
 * delta, an unchanged one keeps its old size, a new one the delta does not
 * carry has none.
 * @param {LiveState} state
 * @param {LiveDeltaMeta} delta
 * @param {Int32Array} changed per sample of the new state, its block in the delta (-1: none)
 * @returns {Record<string, BlockOffsets>}
 */
function blockOffsets(state, delta, changed) {
  const nOld = state.nSamples;
  const nNew = changed.length;
  /** @type {Record<string, Uint32Array>} */
  const oldOffsets = {
    span: offsetsOf(state.columns.span_sample, null, nOld),
    ev: offsetsOf(state.columns.ev_sample, null, nOld),
    seg: offsetsOf(state.columns.seg_span, state.columns.span_sample, nOld),
  };
  /** @type {Record<string, BlockOffsets>} */
  const offsets = {};
  for (const kind of Object.keys(KINDS)) {
    const counts = /** @type {any} */ (delta.counts)[kind] ?? [];
    const inDelta = new Uint32Array(delta.positions.length + 1);
    for (let j = 0; j < delta.positions.length; j++) inDelta[j + 1] = inDelta[j] + (counts[j] ?? 0);
    const old = oldOffsets[kind];
    const fresh = new Uint32Array(nNew + 1);
    for (let s = 0; s < nNew; s++) {
      const j = changed[s];
      const size = j >= 0 ? inDelta[j + 1] - inDelta[j] : s < nOld ? old[s + 1] - old[s] : 0;
      fresh[s + 1] = fresh[s] + size;
    }
    offsets[kind] = { old, fresh, delta: inDelta };
  }
  return offsets;
}

/**
 * A sample column: the old values, those of the changed samples replaced.
 * @param {Splice} splice
 * @param {string} name
 */
function splicedSampleColumn(splice, name) {
  const Ctor = CTORS[/** @type {Dtype} */ (DEFAULT_DTYPES[name])];
  const out = new Ctor(splice.nNew);
  out.set(splice.state.columns[name].subarray(0, Math.min(splice.nOld, splice.nNew)));
  const values = splice.incoming(name);
  splice.positions.forEach((position, j) => {
    if (j < values.length) out[position] = values[j];
  });
  return out;
}

/**
 * An item column: each changed sample's block from the delta, its span pointers
 * made absolute; each run of unchanged samples copied in one piece, its pointers
 * shifted by one constant.
 * @param {Splice} splice
 * @param {string} kind
 * @param {string} name
 */
function splicedItemColumn(splice, kind, name) {
  const { nOld, nNew, changed } = splice;
  const offsets = splice.offsets[kind];
  const spans = splice.offsets.span;
  const Ctor = CTORS[/** @type {Dtype} */ (DEFAULT_DTYPES[name])];
  const out = new Ctor(offsets.fresh[nNew]);
  const old = splice.state.columns[name];
  const fresh = splice.incoming(name);
  const isPointer = KINDS[kind].pointers.includes(name);
  /** @type {(from: number, to: number, shift: number) => void} */
  const shiftPointers = (from, to, shift) => {
    if (isPointer && shift !== 0) for (let i = from; i < to; i++) if (out[i] >= 0) out[i] += shift;
  };
  let s = 0;
  while (s < nNew) {
    const j = changed[s];
    if (j >= 0) {
      const lo = offsets.delta[j];
      const hi = offsets.delta[j + 1];
      const at = offsets.fresh[s];
      out.set(fresh.subarray(lo, Math.min(hi, fresh.length)), at);
      shiftPointers(at, at + (hi - lo), spans.fresh[s]);
      s++;
      continue;
    }
    let end = s;
    while (end < nNew && changed[end] < 0) end++;
    const runEnd = Math.min(end, nOld);
    if (runEnd > s) {
      const lo = offsets.old[s];
      const hi = offsets.old[runEnd];
      const at = offsets.fresh[s];
      out.set(old.subarray(lo, hi), at);
      shiftPointers(at, at + (hi - lo), spans.fresh[s] - spans.old[s]);
    }
    s = end;
  }
  return out;
}

/**
 * The per-sample strings: the old ones, those of the changed samples replaced,
 * null for a new sample the delta does not carry.
 * @param {Splice} splice
 * @param {LiveDeltaMeta} delta
 * @returns {Record<string, any[]>}
 */
function splicedStrings(splice, delta) {
  /** @type {Record<string, any[]>} */
  const samples = {};
  for (const field of SAMPLE_STRINGS) {
    const values = splice.state.samples[field].slice(0, splice.nNew);
    while (values.length < splice.nNew) values.push(null);
    const fresh = delta.samples?.[field] ?? [];
    splice.positions.forEach((position, j) => {
      values[position] = fresh[j] ?? null;
    });
    samples[field] = values;
  }
  return samples;
}

/**
 * What a delta says besides its blocks: its sequence number, the code tables, the
 * clock, the title and the live settings (the state's where the delta is silent).
 * @param {LiveState} state
 * @param {LiveDeltaMeta} delta
 */
function deltaMeta(state, delta) {
  /** @type {Record<string, string[]>} */
  const tables = {};
  for (const table of CODE_TABLES) {
    const value = /** @type {any} */ (delta)[table];
    tables[table] = Array.isArray(value) ? value.map(String) : state.tables[table];
  }
  return {
    epoch: delta.epoch ?? state.epoch,
    seq: Math.max(state.seq, delta.seq),
    tables,
    t0: Number.isFinite(delta.t0) ? delta.t0 : state.t0,
    now: Number.isFinite(delta.now) ? delta.now : state.now,
    title: typeof delta.title === "string" ? delta.title : state.title,
    live: delta.live && typeof delta.live === "object" ? delta.live : state.live,
  };
}

/**
 * The payload (docs/payload.md) a live state draws as.
 * @param {LiveState} state
 */
export function livePayload(state) {
  let t1 = state.now;
  const ends = state.columns.smp_end;
  for (let s = 0; s < ends.length; s++) if (ends[s] > t1) t1 = ends[s];
  return {
    version: undefined,
    meta: {
      title: state.title,
      t0: state.t0,
      t1: state.t0 + t1,
      n_samples_total: state.nSamples,
      ...state.tables,
      samples: state.samples,
      columns: { ...DEFAULT_DTYPES },
      attrs_embedded: false,
      align: "global",
      live: state.live,
    },
    // The view grows open spans' ends in place: its own copy of them.
    buffers: { ...state.columns, span_end: state.columns.span_end.slice() },
  };
}
