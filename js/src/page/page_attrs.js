// Attribute tables embedded in a snapshot page, column by column (written by
// slime_trace_widget/view/page/page_attrs.py; the format is described there): numbers
// and texts as bytes in the details block, referred to by name. A row's
// attributes are put together when its item is clicked, from columns
// decoded once on first use. A query's attribute terms are evaluated here
// over whole columns (attrTermHits), as the kernel does in query.py. The
// items' own fields (a span's name, ids, times...) come in the same columns
// (itemRow, itemField), a none there reading as null.

import { attrHolds, glob } from "../data/query.js";

/**
 * @typedef {Object} PageAttrColumn
 * @property {string} key
 * @property {"f64"|"i64"|"bool"|"text"|"json"} kind
 * @property {string} [valid]    bitmap, bit i set where row i has the key
 * @property {string} [values]   numbers (f64, i64, bool)
 * @property {string} [codes]    int32 dictionary indexes (text, json)
 * @property {string} [offsets]  int32 offsets of the dictionary's texts in `data`
 * @property {string} [data]     UTF-8 of the dictionary's texts
 */

/**
 * @typedef {Object} PageAttrTable
 * @property {number} rows
 * @property {PageAttrColumn[]} columns
 * @property {Record<string, string[]>} nones     per row: keys whose value was None
 * @property {Record<string, Record<string, any>>} overflow per row: keys past the column cap
 */

/**
 * @typedef {Object} PageItemTable  every field of every item: a cleared valid bit is a null
 * @property {number} rows
 * @property {PageAttrColumn[]} columns
 */

/** @typedef {{valid: Uint8Array|null, read: (row: number) => any}} DecodedColumn */

/** @type {WeakMap<PageAttrColumn, DecodedColumn>} */
const decoded = new WeakMap();

/** @typedef {Record<string, DataView>} Buffers the details block's byte strings by name */

const utf8 = new TextDecoder();

/**
 * Buffer `name` as bytes (empty when the block lacks it).
 * @param {Buffers} buffers
 * @param {string|undefined} name
 */
function bytesOf(buffers, name) {
  const view = name !== undefined && Object.hasOwn(buffers, name) ? buffers[name] : null;
  return view ? new Uint8Array(view.buffer, view.byteOffset, view.byteLength) : new Uint8Array(0);
}

/**
 * Buffer `name` as a typed array of `Kind`, copied when it is not aligned for it.
 * @template T
 * @param {Buffers} buffers
 * @param {string|undefined} name
 * @param {{new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): T, BYTES_PER_ELEMENT: number}} Kind
 * @returns {T}
 */
function typed(buffers, name, Kind) {
  const bytes = bytesOf(buffers, name);
  const size = Kind.BYTES_PER_ELEMENT;
  const count = Math.floor(bytes.length / size);
  if (bytes.byteOffset % size === 0) return new Kind(bytes.buffer, bytes.byteOffset, count);
  return new Kind(bytes.slice(0, count * size).buffer, 0, count);
}

/**
 * A float as the kernel sends it: JSON has no NaN or infinities, so they are text.
 * @param {number} value
 */
function finiteOrText(value) {
  if (Number.isFinite(value)) return value;
  if (Number.isNaN(value)) return "NaN";
  return value > 0 ? "Infinity" : "-Infinity";
}

const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * An int as the kernel sends it (values.exact_in_browser): a number, or its digits
 * past Number.MAX_SAFE_INTEGER, which a number would show with other digits.
 * @param {bigint} value
 */
function exactInt(value) {
  return value > SAFE || value < -SAFE ? value.toString() : Number(value);
}

/**
 * @param {PageAttrColumn} column
 * @param {Buffers} buffers
 * @returns {DecodedColumn}
 */
function decode(column, buffers) {
  const known = decoded.get(column);
  if (known) return known;
  const valid = column.valid !== undefined ? bytesOf(buffers, column.valid) : null;
  /** @type {(row: number) => any} */
  let read;
  if (column.kind === "f64") {
    const values = typed(buffers, column.values, Float64Array);
    read = (row) => (row < values.length ? finiteOrText(values[row]) : undefined);
  } else if (column.kind === "i64") {
    const values = typed(buffers, column.values, BigInt64Array);
    read = (row) => (row < values.length ? exactInt(values[row]) : undefined);
  } else if (column.kind === "bool") {
    const values = bytesOf(buffers, column.values);
    read = (row) => (row < values.length ? values[row] !== 0 : undefined);
  } else {
    const codes = typed(buffers, column.codes, Int32Array);
    const offsets = typed(buffers, column.offsets, Int32Array);
    const data = bytesOf(buffers, column.data);
    const parse = column.kind === "json";
    /** @type {Map<number, any>} */
    const texts = new Map();
    read = (row) => {
      const code = row < codes.length ? codes[row] : -1;
      if (code < 0 || code + 1 >= offsets.length) return undefined;
      if (!texts.has(code)) {
        const text = utf8.decode(data.subarray(offsets[code], offsets[code + 1]));
        texts.set(code, parse ? JSON.parse(text) : text);
      }
      return texts.get(code);
    };
  }
  const out = { valid, read };
  decoded.set(column, out);
  return out;
}

/**
 * The attributes of row `row` as the kernel would send them: `{}` for a row
 * without any, keys in column order, then keys whose value was None, then the
 * keys past the column cap. Null for a row the table does not have.
 * @param {PageAttrTable|undefined} table
 * @param {number} row
 * @param {Buffers} buffers
 * @returns {Record<string, any>|null}
 */
export function attrRow(table, row, buffers) {
  if (!table || !Number.isInteger(row) || row < 0 || row >= table.rows) return null;
  /** @type {Record<string, any>} */
  const out = {};
  const put = (/** @type {string} */ key, /** @type {any} */ value) => {
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  };
  for (const column of table.columns) {
    const { valid, read } = decode(column, buffers);
    if (valid && !((valid[row >> 3] >> (row & 7)) & 1)) continue;
    const value = read(row);
    if (value !== undefined) put(column.key, value);
  }
  const name = String(row);
  if (Object.hasOwn(table.nones ?? {}, name)) for (const key of table.nones[name]) put(key, null);
  if (Object.hasOwn(table.overflow ?? {}, name)) {
    for (const [key, value] of Object.entries(table.overflow[name])) put(key, value);
  }
  return out;
}

/**
 * Column `column` of an item table as a reader of rows: its value, or null where
 * the row has none.
 * @param {PageItemTable} table
 * @param {PageAttrColumn} column
 * @param {Buffers} buffers
 * @returns {(row: number) => any}
 */
function itemReader(table, column, buffers) {
  const { valid, read } = decode(column, buffers);
  const rows = table.rows;
  return (row) => {
    if (!Number.isInteger(row) || row < 0 || row >= rows) return null;
    if (valid && !((valid[row >> 3] >> (row & 7)) & 1)) return null;
    return read(row) ?? null;
  };
}

/**
 * Field `key` of an item table as a reader of rows (null throughout when the
 * table lacks the field).
 * @param {PageItemTable|undefined} table
 * @param {string} key
 * @param {Buffers} buffers
 * @returns {(row: number) => any}
 */
export function itemField(table, key, buffers) {
  const column = table?.columns.find((candidate) => candidate.key === key);
  return table && column ? itemReader(table, column, buffers) : () => null;
}

/**
 * Every field of item `row` as the kernel's reply has it (null for a none), in
 * column order; null for a row the table does not have.
 * @param {PageItemTable|undefined} table
 * @param {number} row
 * @param {Buffers} buffers
 * @returns {Record<string, any>|null}
 */
export function itemRow(table, row, buffers) {
  if (!table || !Number.isInteger(row) || row < 0 || row >= table.rows) return null;
  /** @type {Record<string, any>} */
  const out = {};
  for (const column of table.columns) {
    const value = itemReader(table, column, buffers)(row);
    Object.defineProperty(out, column.key, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * A column's values as a query compares them: numbers (NaN and infinities
 * kept), bools, and texts as stored (JSON not parsed); undefined where the row
 * lacks the key. A text column also gives each row's dictionary code (-1
 * without one) and a code's text, so a term is tested once per code.
 * @param {PageAttrColumn} column
 * @param {Buffers} buffers
 * @returns {{kind: "number"|"bool", read: (row: number) => any} | {kind: "text", codes: number, code: (row: number) => number, text: (code: number) => string}}
 */
function queryReader(column, buffers) {
  const valid = column.valid !== undefined ? bytesOf(buffers, column.valid) : null;
  const has = (/** @type {number} */ row) => !valid || ((valid[row >> 3] >> (row & 7)) & 1) === 1;
  if (column.kind === "f64" || column.kind === "i64") {
    const values = column.kind === "f64" ? typed(buffers, column.values, Float64Array) : typed(buffers, column.values, BigInt64Array);
    return { kind: "number", read: (row) => (row < values.length && has(row) ? Number(values[row]) : undefined) };
  }
  if (column.kind === "bool") {
    const values = bytesOf(buffers, column.values);
    return { kind: "bool", read: (row) => (row < values.length && has(row) ? values[row] !== 0 : undefined) };
  }
  const codes = typed(buffers, column.codes, Int32Array);
  const offsets = typed(buffers, column.offsets, Int32Array);
  const data = bytesOf(buffers, column.data);
  const count = Math.max(0, offsets.length - 1);
  return {
    kind: "text",
    codes: count,
    code: (row) => {
      const code = row < codes.length && has(row) ? codes[row] : -1;
      return code >= 0 && code < count ? code : -1;
    },
    text: (code) => utf8.decode(data.subarray(offsets[code], offsets[code + 1])),
  };
}

/**
 * Per row of the first table, whether every attribute term holds, reading a
 * key from the first table that has it for that row (a span's end attributes,
 * then its start ones: end over start, as frames' `attr.<key>`). Keys past the
 * column cap are not searched (as in Python). A text is tested once per
 * dictionary entry, not once per row.
 * @param {(PageAttrTable|undefined)[]} tables
 * @param {number} rowCount rows
 * @param {import("../data/query.js").Term[]} terms attribute terms (attr, has)
 * @param {Buffers} buffers
 */
export function attrTermHits(tables, rowCount, terms, buffers) {
  const out = new Uint8Array(rowCount).fill(1);
  for (const term of terms) {
    const key = /** @type {string} */ (term.key);
    const pattern = term.kind === "attr" && (term.op === "=" || term.op === "!=") ? glob(String(term.value)) : null;
    /** Per reader, whether the term holds (before neg) for a row: undefined where the key is absent. */
    const tests = tables.flatMap((table) =>
      (table?.columns ?? [])
        .filter((column) => column.key === key)
        .map((column) => {
          const reader = queryReader(column, buffers);
          if (reader.kind !== "text") {
            const kind = reader.kind;
            return (/** @type {number} */ row) => {
              const value = reader.read(row);
              return value === undefined ? undefined : attrHolds(term, pattern, kind, value);
            };
          }
          const known = new Int8Array(reader.codes).fill(-1); // per code: unknown, no, yes
          return (/** @type {number} */ row) => {
            const code = reader.code(row);
            if (code < 0) return undefined;
            if (known[code] < 0) known[code] = attrHolds(term, pattern, "text", reader.text(code)) ? 1 : 0;
            return known[code] === 1;
          };
        }),
    );
    for (let row = 0; row < rowCount; row++) {
      if (!out[row]) continue;
      let hit = false;
      for (const test of tests) {
        const holds = test(row);
        if (holds === undefined) continue;
        hit = holds;
        break;
      }
      if (hit === term.neg) out[row] = 0;
    }
  }
  return out;
}
