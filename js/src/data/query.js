// The filter box's query grammar (docs/query.md), the same parser as
// slime_trace_widget/answers/query.py term for term, reading the same tables of
// fields, operators and units (slime_trace_widget/answers/query_grammar.json;
// test/fixtures/query_cases.json holds the cases both must agree on), evaluated over the decoded payload into
// the masks App.setMasks lays over the timeline. Attributes are not in the
// payload: attribute terms go to a resolver (the kernel, or a snapshot's
// embedded tables) and the picture changes only when its answer is in; an
// answer to an older query is dropped.

import { F_OPEN, F_ERROR, F_PD_DETAIL, statusOf, sourceOf } from "./decode.js";
import { formatNumber } from "../util/format.js";
import { base64ToBytes } from "./bytes.js";
import { codePointLength } from "../util/text.js";
import GRAMMAR from "../../../slime_trace_widget/answers/query_grammar.json" with { type: "json" };

/** @typedef {import("./decode.js").Data} Data */

/**
 * One parsed term; `neg` negates it. Kinds: text (bare word), name, status,
 * source (value), attempt / duration (op, value), is (value), has (key),
 * attr (key, op, value: text for = and !=, a number otherwise).
 * @typedef {{kind: string, neg: boolean, value?: any, op?: string, key?: string}} Term
 */

/** @typedef {{message: string, pos: number}} QueryProblem */

/** Per payload span and event: whether every attribute term holds. */
/** @typedef {{spans: Uint8Array, events: Uint8Array}} AttrHits */

export { GRAMMAR };

const SPACE = GRAMMAR.space;
const ATTR_PREFIX = GRAMMAR.attr_prefix;
const COLON_FIELDS = GRAMMAR.colon_fields;
const COMPARED_FIELDS = GRAMMAR.compared_fields;
const IS_VALUES = GRAMMAR.is_values;
const EQUALITY = GRAMMAR.equality_operators;
/** Every operator, longest first, so ">=" is read before ">". */
const OPERATORS = [...EQUALITY, ...GRAMMAR.order_operators].sort((first, second) => second.length - first.length);
/** @type {Record<string, number[]>} seconds per unit as (multiply, divide), as in Python */
const UNITS = GRAMMAR.units;
const UNIT_NAMES = Object.keys(UNITS);
const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;
const DURATION = new RegExp(`^(\\d+(?:\\.\\d*)?|\\.\\d+)(${UNIT_NAMES.join("|")})?$`);
const WHOLE = /^\d+$/;
export const SAMPLE_KINDS = GRAMMAR.sample_kinds;
export const ATTR_KINDS = GRAMMAR.attr_kinds;
const SPAN_ONLY_KINDS = GRAMMAR.span_only_kinds;

/**
 * How the renderer reads each sample column a bare word may search: its value, or
 * null / undefined when it has none.
 * @type {Record<string, (data: Data, sample: number) => string | number | null | undefined>}
 */
const SAMPLE_FIELD_READERS = {
  sample_index: (data, sample) => data.meta.samples.sample_index[sample],
  source: sourceOf,
  status: statusOf,
  label: (data, sample) => data.meta.samples.label[sample],
  trace_id: (data, sample) => data.meta.samples.trace_id[sample],
};
/** @type {Record<string, string>} what a column's searched text starts with (#12) */
const BARE_WORD_MARKS = GRAMMAR.bare_word_marks;
/**
 * The grammar's bare_word_fields in order, each with its reader and mark; a field
 * the renderer cannot read fails here, at load, rather than go unsearched.
 */
const BARE_WORD_READERS = GRAMMAR.bare_word_fields.map((field) => {
  if (!Object.hasOwn(SAMPLE_FIELD_READERS, field)) {
    throw new Error(`query grammar: a bare word searches ${JSON.stringify(field)},`
      + " which the renderer cannot read");
  }
  return { read: SAMPLE_FIELD_READERS[field], mark: BARE_WORD_MARKS[field] ?? "" };
});

/** Every Greek small final sigma (a global pattern), which foldCase writes as the medial one. */
const FINAL_SIGMA = /\u03c2/g;
const SIGMA = "\u03c3";

/**
 * `text` as the query compares names, statuses, sources and bare words: lower-cased by
 * Unicode's full mapping (`toLowerCase`: "İ" becomes "i̇"), then every final sigma "ς"
 * written as "σ"; query.fold_case in Python is the same fold, and the shared cases'
 * `fold` list pins both. Lower-casing alone writes "Σ" as "ς" at a word's end and "σ"
 * inside one, so `name:οδοσ` missed "ΟΔΟΣ" and `name:ΟΔΟΣ*` missed "ΟΔΟΣΟΣ"; with one
 * sigma a text's fold is its pieces' folds joined, so a glob's pieces and a bare word
 * fold as the text around them does.
 * @param {string} text
 */
export function foldCase(text) {
  return text.toLowerCase().replace(FINAL_SIGMA, SIGMA);
}

/**
 * `a, b or c` (`a, b and c` with `conjunction` "and"): how an error message lists
 * what would have done, and the help what a bare word searches.
 * @param {string[]} options
 * @param {string} [conjunction]
 */
function inWords(options, conjunction = "or") {
  return `${options.slice(0, -1).join(", ")} ${conjunction} ${options[options.length - 1]}`;
}

export class QueryError extends Error {
  /**
   * @param {string} message
   * @param {number} pos 0-based, in code points as Python counts (an emoji is one
   *   character), not UTF-16 indices; the filter box shows it only in the message
   */
  constructor(message, pos) {
    super(`${message} (at character ${pos + 1})`);
    this.problem = message;
    this.pos = pos;
  }
}

/**
 * Whitespace-separated tokens as position (in code points), characters and which
 * were quoted (per UTF-16 unit of the characters, as `word` is indexed).
 * @param {string} text
 * @returns {{pos: number, word: string, quoted: boolean[]}[]}
 */
function tokens(text) {
  const out = [];
  let unitsCounted = 0;
  let pointsCounted = 0;
  /**
   * The code point position of UTF-16 index `unit`, counted on from the last one
   * asked (they are asked in increasing order, so the text is counted once).
   * @param {number} unit
   */
  const pointAt = (unit) => {
    pointsCounted += codePointLength(text.slice(unitsCounted, unit));
    unitsCounted = unit;
    return pointsCounted;
  };
  let i = 0;
  const length = text.length;
  while (i < length) {
    if (SPACE.includes(text[i])) {
      i++;
      continue;
    }
    const pos = i;
    let word = "";
    /** @type {boolean[]} */
    const quoted = [];
    let openAt = -1;
    while (i < length && (openAt >= 0 || !SPACE.includes(text[i]))) {
      const character = text[i];
      if (character === '"') {
        openAt = openAt >= 0 ? -1 : i;
      } else if (openAt >= 0 && character === "\\" && i + 1 < length && '"\\'.includes(text[i + 1])) {
        i++;
        word += text[i];
        quoted.push(true);
      } else {
        word += character;
        quoted.push(openAt >= 0);
      }
      i++;
    }
    if (openAt >= 0) throw new QueryError("unclosed quote", pointAt(openAt));
    out.push({ pos: pointAt(pos), word, quoted });
  }
  return out;
}

/**
 * The first operator of the grammar written unquoted, the longest at its place.
 * @param {string} word
 * @param {boolean[]} quoted
 * @returns {[number, string]}
 */
function operator(word, quoted) {
  for (let i = 0; i < word.length; i++) {
    if (quoted[i]) continue;
    for (const op of OPERATORS) {
      if (word.startsWith(op, i) && !quoted.slice(i, i + op.length).includes(true)) return [i, op];
    }
  }
  return [-1, ""];
}

/**
 * @param {number} pos
 * @param {string} word
 * @param {boolean[]} quoted
 * @returns {Term}
 */
function term(pos, word, quoted) {
  const neg = word.startsWith("-") && !quoted[0];
  if (neg) {
    word = word.slice(1);
    quoted = quoted.slice(1);
    if (!word) throw new QueryError('"-" needs a term after it', pos);
  }
  let colon = -1;
  for (let i = 0; i < word.length; i++) {
    if (word[i] === ":" && !quoted[i]) {
      colon = i;
      break;
    }
  }
  const [at, op] = operator(word, quoted);
  const field = colon > 0 ? word.slice(0, colon).toLowerCase() : "";
  if (COLON_FIELDS.includes(field) && (at < 0 || colon < at)) return { kind: field, neg, ...fieldValue(pos, field, "=", word.slice(colon + 1)) };
  if (at < 0) return { kind: "text", neg, value: foldCase(word) };
  let key = word.slice(0, at);
  const value = word.slice(at + op.length);
  if (!key) throw new QueryError(`"${op}" needs a key before it`, pos);
  if (!value) throw new QueryError(`"${key}${op}" needs a value after it`, pos);
  if (COMPARED_FIELDS.includes(key.toLowerCase())) return { kind: key.toLowerCase(), neg, ...fieldValue(pos, key.toLowerCase(), op, value) };
  key = attrKey(key);
  if (EQUALITY.includes(op)) return { kind: "attr", neg, key, op, value };
  if (!NUMBER.test(value)) throw new QueryError(`"${op}" needs a number, not "${value}"`, pos);
  return { kind: "attr", neg, key, op, value: Number(value) };
}

/**
 * @param {number} pos
 * @param {string} field
 * @param {string} op
 * @param {string} value
 */
function fieldValue(pos, field, op, value) {
  if (field === "attempt") {
    if (!WHOLE.test(value)) throw new QueryError(`attempt needs a whole number, not "${value}"`, pos);
    return { op, value: Number(value) };
  }
  if (field === "duration") {
    const found = DURATION.exec(value);
    if (!found) throw new QueryError(`bad duration "${value}" (a number, then ${inWords(UNIT_NAMES)})`, pos);
    const [times, per] = UNITS[found[2] || GRAMMAR.default_unit];
    return { op, value: (Number(found[1]) * times) / per };
  }
  if (!value) throw new QueryError(`${field}: needs a value`, pos);
  if (field === "is") {
    if (!IS_VALUES.includes(value.toLowerCase())) throw new QueryError(`unknown is: value "${value}" (${inWords(IS_VALUES.map((known) => `is:${known}`))})`, pos);
    return { value: value.toLowerCase() };
  }
  if (field === "has") return { key: attrKey(value) };
  return { value: foldCase(value) };
}

/**
 * `attr.duration` is the attribute `duration`, not the field.
 * @param {string} key
 */
function attrKey(key) {
  return key.startsWith(ATTR_PREFIX) && key.length > ATTR_PREFIX.length ? key.slice(ATTR_PREFIX.length) : key;
}

/**
 * The terms of `text` (all must hold); throws QueryError.
 * @param {string} text
 * @returns {Term[]}
 */
export function parseQuery(text) {
  return tokens(text || "").map((token) => term(token.pos, token.word, token.quoted));
}

/**
 * A glob as a test: `*` matches any text (runs of them as one), everything
 * else itself, and the whole text must match. Linear, with no regular
 * expression to backtrack: the text before the first `*` is a prefix, the
 * text after the last a suffix, and the pieces between are found left to
 * right, each at its leftmost place after the one before, never overlapping
 * (query.glob in Python is the same algorithm).
 * @param {string} pattern
 * @returns {(text: string) => boolean}
 */
export function glob(pattern) {
  if (!pattern.includes("*")) return (text) => text === pattern;
  const pieces = pattern.split("*");
  const first = /** @type {string} */ (pieces[0]);
  const last = /** @type {string} */ (pieces[pieces.length - 1]);
  const middle = pieces.slice(1, -1).filter((piece) => piece);
  return (text) => {
    const end = text.length - last.length;
    if (end < first.length || !text.startsWith(first) || !text.endsWith(last)) return false;
    let at = first.length;
    for (const piece of middle) {
      const found = text.indexOf(piece, at);
      if (found < 0 || found + piece.length > end) return false;
      at = found + piece.length;
    }
    return true;
  };
}

/**
 * @param {number} left
 * @param {string} op
 * @param {number} right
 */
export function compare(left, op, right) {
  switch (op) {
    case "=":
      return left === right;
    case "!=":
      return !Number.isNaN(left) && left !== right;
    case ">":
      return left > right;
    case ">=":
      return left >= right;
    case "<":
      return left < right;
    default:
      return left <= right;
  }
}

/**
 * Whether an attribute term (attr or has, before `neg`) holds for one value:
 * absent keys never match; `=` compares numbers as numbers, bools as
 * true/false, text exactly with `*` globs; `!=` needs the key present.
 * @param {Term} queryTerm
 * @param {((text: string) => boolean)|null} pattern glob of queryTerm.value for text
 * @param {"number"|"bool"|"text"} kind
 * @param {any} value undefined when the key is absent
 */
export function attrHolds(queryTerm, pattern, kind, value) {
  if (value === undefined || value === null) return false;
  if (queryTerm.kind === "has") return true;
  const op = /** @type {string} */ (queryTerm.op);
  let equal;
  if (kind === "number") {
    if (!EQUALITY.includes(op)) return compare(value, op, queryTerm.value);
    equal = NUMBER.test(queryTerm.value) && value === Number(queryTerm.value);
  } else if (!EQUALITY.includes(op)) {
    return false;
  } else if (kind === "bool") {
    const want = String(queryTerm.value).toLowerCase();
    equal = (want === "true" && value === true) || (want === "false" && value === false);
  } else {
    equal = /** @type {(text: string) => boolean} */ (pattern)(String(value));
  }
  return op === "=" ? equal : !equal;
}

/** @type {WeakMap<Data, string[]>} */
const textCache = new WeakMap();

/**
 * What a bare word is searched in, case-folded (foldCase): the grammar's
 * bare_word_fields of each sample in their order, each as text after its mark
 * (#index), a missing value as "", joined by "\u0001" (query.sample_text in Python).
 * @param {Data} data
 */
export function sampleTexts(data) {
  let out = textCache.get(data);
  if (out) return out;
  out = [];
  for (let sample = 0; sample < data.nSamples; sample++) {
    const texts = BARE_WORD_READERS.map(({ read, mark }) => {
      const value = read(data, sample);
      return value === null || value === undefined ? "" : `${mark}${value}`;
    });
    out.push(foldCase(texts.join("\u0001")));
  }
  textCache.set(data, out);
  return out;
}

/**
 * Per entry of a string table, whether its case-folded text (foldCase) matches a glob.
 * @param {string[]} table
 * @param {string} pattern
 */
function tableHits(table, pattern) {
  const matches = glob(pattern);
  return Uint8Array.from(table, (entry) => (matches(foldCase(entry ?? "")) ? 1 : 0));
}

/**
 * @typedef {Object} QueryResult
 * @property {Uint8Array|null} keep per payload span (null: no item term)
 * @property {Uint8Array|null} evKeep per payload event
 * @property {Uint8Array|null} rowKeep per payload sample (null: no term at all)
 * @property {number} spans matching spans in kept rows
 * @property {number} events matching events in kept rows
 * @property {number} rows kept samples
 * @property {boolean} itemTerms
 */

/**
 * Evaluate `terms` over the payload; `attr` is the resolver's answer for the
 * attribute terms (required when there are any).
 * @param {Data} data
 * @param {Term[]} terms
 * @param {AttrHits|null} attr
 * @returns {QueryResult}
 */
export function evaluate(data, terms, attr) {
  const rowKeep = new Uint8Array(data.nSamples).fill(1);
  const texts = terms.some((queryTerm) => queryTerm.kind === "text") ? sampleTexts(data) : [];
  for (const queryTerm of terms) {
    if (!SAMPLE_KINDS.includes(queryTerm.kind)) continue;
    const codes = queryTerm.kind === "status" ? data.smpStatus : data.smpSource;
    const hits = queryTerm.kind === "text" ? null : tableHits(queryTerm.kind === "status" ? data.meta.statuses : data.meta.sources, queryTerm.value);
    const empty = queryTerm.kind === "text" ? false : glob(queryTerm.value)(""); // a sample without one
    for (let sample = 0; sample < data.nSamples; sample++) {
      const matched = hits ? (codes[sample] < hits.length ? hits[codes[sample]] === 1 : empty) : texts[sample].includes(queryTerm.value);
      if (matched === queryTerm.neg) rowKeep[sample] = 0;
    }
  }
  const items = terms.filter((queryTerm) => !SAMPLE_KINDS.includes(queryTerm.kind));
  if (items.some((queryTerm) => ATTR_KINDS.includes(queryTerm.kind)) && !attr) throw new Error("attribute terms need the resolver's answer");
  if (!items.length) {
    let rows = 0;
    for (let sample = 0; sample < data.nSamples; sample++) rows += rowKeep[sample];
    let spans = 0;
    let events = 0;
    for (let i = 0; i < data.nSpans; i++) if (rowKeep[data.spanSample[i]] && !(data.spanFlags[i] & F_PD_DETAIL)) spans++;
    for (let i = 0; i < data.nEvents; i++) if (rowKeep[data.evSample[i]]) events++;
    return { keep: null, evKeep: null, rowKeep: terms.length ? rowKeep : null, spans, events, rows, itemTerms: false };
  }
  // One tight pass per term over every item (term by term, not item by item:
  // each loop does one kind of test, which keeps 1M spans to tens of ms).
  const keep = new Uint8Array(data.nSpans);
  for (let i = 0; i < data.nSpans; i++) keep[i] = rowKeep[data.spanSample[i]] && (!attr || attr.spans[i]) ? 1 : 0;
  const evKeep = new Uint8Array(data.nEvents);
  const spanOnly = items.some((queryTerm) => SPAN_ONLY_KINDS.includes(queryTerm.kind));
  if (!spanOnly) for (let i = 0; i < data.nEvents; i++) evKeep[i] = rowKeep[data.evSample[i]] && (!attr || attr.events[i]) ? 1 : 0;
  for (const queryTerm of items) {
    const want = queryTerm.neg ? 0 : 1;
    const op = /** @type {string} */ (queryTerm.op);
    if (queryTerm.kind === "name") {
      const hits = tableHits(data.names, queryTerm.value);
      for (let i = 0; i < data.nSpans; i++) if (keep[i] && hits[data.spanName[i]] !== want) keep[i] = 0;
      for (let i = 0; i < data.nEvents; i++) if (evKeep[i] && hits[data.evName[i]] !== want) evKeep[i] = 0;
    } else if (queryTerm.kind === "attempt") {
      for (let i = 0; i < data.nSpans; i++) if (keep[i] && +compare(data.spanAttempt[i], op, queryTerm.value) !== want) keep[i] = 0;
      for (let i = 0; i < data.nEvents; i++) if (evKeep[i] && +compare(data.evAttempt[i], op, queryTerm.value) !== want) evKeep[i] = 0;
    } else if (queryTerm.kind === "duration") {
      // The payload's durations are float32: compared with the term's value as float32, a
      // span of exactly 2 s is `duration=2s` here as in the kernel's query.
      const seconds = Math.fround(/** @type {number} */ (queryTerm.value));
      for (let i = 0; i < data.nSpans; i++) if (keep[i] && +(!(data.spanFlags[i] & F_OPEN) && compare(data.spanDur[i], op, seconds)) !== want) keep[i] = 0;
    } else if (queryTerm.kind === "is") {
      const flag = queryTerm.value === "error" ? F_ERROR : F_OPEN;
      for (let i = 0; i < data.nSpans; i++) if (keep[i] && +((data.spanFlags[i] & flag) !== 0) !== want) keep[i] = 0;
    } // attribute terms: already in `attr`
  }
  const hasItem = new Uint8Array(data.nSamples);
  let spans = 0;
  let events = 0;
  for (let i = 0; i < data.nSpans; i++) {
    if (!keep[i] || data.spanFlags[i] & F_PD_DETAIL) continue;
    spans++;
    hasItem[data.spanSample[i]] = 1;
  }
  for (let i = 0; i < data.nEvents; i++) {
    if (!evKeep[i]) continue;
    events++;
    hasItem[data.evSample[i]] = 1;
  }
  let rows = 0;
  for (let sample = 0; sample < data.nSamples; sample++) {
    if (!hasItem[sample]) rowKeep[sample] = 0;
    rows += rowKeep[sample];
  }
  return { keep, evKeep, rowKeep, spans, events, rows, itemTerms: true };
}

/**
 * The header line for a result: "1,204 spans in 37 of 128 samples match".
 * @param {QueryResult} result
 * @param {number} total samples in the frames (the header's "of M samples")
 */
export function matchSummary(result, total) {
  const of = `${formatNumber(result.rows)} of ${formatNumber(total)} samples match`;
  if (!result.itemTerms) return of;
  const plural = (/** @type {number} */ count, /** @type {string} */ word) => `${formatNumber(count)} ${word}${count === 1 ? "" : "s"}`;
  const items = result.events ? `${plural(result.spans, "span")}, ${plural(result.events, "event")}` : plural(result.spans, "span");
  return `${items} in ${of}`;
}

/**
 * The filter box's help, written from the grammar's tables so that a field, an
 * operator or a unit added there is listed here too.
 * @param {typeof GRAMMAR} grammar
 */
export function queryHelp(grammar = GRAMMAR) {
  const compared = new Set(grammar.compared_fields);
  const valued = grammar.colon_fields.filter((name) => name !== "is" && name !== "has")
    .map((name) => `${name}:${compared.has(name) ? "N" : "VALUE"}`).join("  ");
  const [firstOrder] = grammar.order_operators;
  const comparisons = grammar.compared_fields.map((name) => `${name}${firstOrder}N`).join("  ");
  const units = Object.keys(grammar.units).join(" ");
  const is = grammar.is_values.map((value) => `is:${value}`).join("  ");
  const attrs = [...grammar.equality_operators.map((op) => `key${op}value`), `key${firstOrder}5`, "has:key"].join("  ");
  const marks = /** @type {Record<string, string>} */ (grammar.bare_word_marks);
  const searched = grammar.bare_word_fields
    .map((name) => `${marks[name] ?? ""}${name.replace(/_/g, " ")}`);
  return [
    "Terms separated by spaces must all hold; -term negates; \"quote values\" with spaces; * is a wildcard.",
    `${valued}  ${comparisons} (${grammar.order_operators.join(" ")}; a time takes a unit, ${grammar.default_unit} if none: 2${grammar.default_unit}, 150ms; ${units})`,
    `${is}  ${attrs} (span and event attributes)`,
    `a bare word searches ${inWords(searched, "and")}`,
  ].join("\n");
}

/**
 * Resolves attribute terms for the current payload (the kernel, or the page).
 * @typedef {(terms: Term[], d: Data) => Promise<AttrHits>} AttrResolver
 */

/**
 * What the filter box shows next to it: nothing, "matching…", or a problem.
 * @typedef {{state: "idle"|"pending"|"error", text: string}} QueryStatus
 */

/**
 * Runs the filter box's query: parses it, evaluates it (asking the resolver
 * for attribute terms), and hands the masks and counts to the app. A bad
 * query leaves the last good filter applied; an answer that arrives after a
 * newer query (or a new payload) is dropped.
 */
export class QueryFilter {
  /**
   * @param {{data: () => Data, apply: (r: QueryResult|null) => void, status: (s: QueryStatus) => void, resolve: AttrResolver}} host
   */
  constructor(host) {
    this.host = host;
    this.gen = 0;
    /** @type {QueryResult|null} the result applied now */
    this.result = null;
    /** @type {Data|null} the payload `result` is for */
    this.data = null;
    /** @type {QueryStatus} */
    this.status = { state: "idle", text: "" };
  }

  /**
   * @param {string} text
   */
  run(text) {
    const gen = ++this.gen;
    const data = this.host.data();
    if (data !== this.data) this.result = null; // a new payload: the app dropped the old masks
    this.data = data;
    /** @type {Term[]} */
    let terms;
    try {
      terms = parseQuery(text);
    } catch (err) {
      if (!(err instanceof QueryError)) throw err;
      this.setStatus("error", err.message);
      return;
    }
    if (!terms.length && !this.result) {
      this.setStatus("idle", ""); // nothing to lift: spare the app a refilter
      return;
    }
    const attrTerms = terms.filter((queryTerm) => ATTR_KINDS.includes(queryTerm.kind));
    if (!attrTerms.length) {
      this.apply(evaluate(data, terms, null), terms);
      return;
    }
    this.setStatus("pending", "matching…");
    this.host.resolve(attrTerms, data).then(
      (hits) => {
        if (gen !== this.gen || data !== this.host.data()) return;
        if (hits.spans.length < data.nSpans || hits.events.length < data.nEvents) {
          this.setStatus("error", "the attribute answer does not fit this view");
          return;
        }
        this.apply(evaluate(data, terms, hits), terms);
      },
      (err) => {
        if (gen === this.gen) this.setStatus("error", `attributes: ${err instanceof Error ? err.message : String(err)}`);
      },
    );
  }

  /**
   * @param {QueryResult} result
   * @param {Term[]} terms
   */
  apply(result, terms) {
    this.result = terms.length ? result : null;
    this.setStatus("idle", "");
    this.host.apply(this.result);
  }

  /**
   * @param {"idle"|"pending"|"error"} state
   * @param {string} text
   */
  setStatus(state, text) {
    this.status = { state, text };
    this.host.status(this.status);
  }
}

/**
 * Unpack a little-endian bitmap (numpy packbits, bitorder="little") to one byte per item.
 * @param {Uint8Array} bits
 * @param {number} count
 */
export function unpackBits(bits, count) {
  const out = new Uint8Array(count);
  for (let i = 0; i < count && i >> 3 < bits.length; i++) out[i] = (bits[i >> 3] >> (i & 7)) & 1;
  return out;
}

/** @type {Record<string, [string, number][]>} */
const BEYOND_MAX = {
  ">": [],
  ">=": [[">", Number.MAX_VALUE]],
  "<": [["<=", Number.MAX_VALUE]],
  "<=": [["<=", Number.MAX_VALUE], [">", Number.MAX_VALUE]],
};
/** @type {Record<string, [string, number][]>} */
const BELOW_MIN = {
  "<": [],
  "<=": [["<", -Number.MAX_VALUE]],
  ">": [[">=", -Number.MAX_VALUE]],
  ">=": [[">=", -Number.MAX_VALUE], ["<", -Number.MAX_VALUE]],
};

/**
 * A comparison with an infinite value (`x>1e999` parses to Infinity, in
 * Python too) as comparisons with finite ones that mean the same: JSON has no
 * infinities (JSON.stringify sends null, which the kernel refuses) and the
 * kernel wants a number. The term holds, before `neg`, where any of the
 * returned terms holds; nowhere when there are none. Null for any other term.
 * @param {Term} queryTerm
 * @returns {Term[]|null}
 */
export function finiteStandIns(queryTerm) {
  if (queryTerm.kind !== "attr" || typeof queryTerm.value !== "number" || Number.isFinite(queryTerm.value)) return null;
  const table = Number.isNaN(queryTerm.value) ? {} : queryTerm.value > 0 ? BEYOND_MAX : BELOW_MIN;
  const pairs = table[/** @type {string} */ (queryTerm.op)] ?? [];
  return pairs.map(([op, value]) => ({ kind: "attr", neg: false, key: queryTerm.key, op, value }));
}

/**
 * The attribute resolver: "query_attrs" requests (docs/payload.md), which
 * the kernel answers, or a snapshot page's local model from its tables. The
 * request carries the payload's `meta.view_id` as `view` when it has one, and
 * a kernel's reply for another view is refused; a page (attrs_embedded)
 * answers from its own tables, so its replies need none.
 * @param {import("./model.js").Requests} requests
 * @param {(d: Data) => unknown} [viewOf] the view id of the payload `d` was decoded from
 * @returns {AttrResolver}
 */
export function resolverFor(requests, viewOf = () => undefined) {
  /** @param {string|Uint8Array|undefined} packed base64 (the kernel) or bytes (a page) */
  const bytes = (packed) => (typeof packed === "string" ? base64ToBytes(packed) : packed);
  /**
   * @param {Term[]} terms
   * @param {Data} data
   */
  const ask = async (terms, data) => {
    const view = viewOf(data);
    const known = view !== undefined && view !== null;
    const reply = await requests.ask(known ? { type: "query_attrs", terms, view } : { type: "query_attrs", terms }).promise;
    const spans = bytes(reply.spans);
    const events = bytes(reply.events);
    if (reply.error || !spans || !events) throw new Error(reply.error || "no answer");
    if (reply.n_spans !== data.nSpans || reply.n_events !== data.nEvents || (known && !data.meta.attrs_embedded && reply.view !== view)) throw new Error("the answer is for another view");
    return { spans: unpackBits(spans, data.nSpans), events: unpackBits(events, data.nEvents) };
  };
  return async (terms, data) => {
    const plain = terms.filter((queryTerm) => !finiteStandIns(queryTerm));
    const [all, ...infinite] = await Promise.all([
      plain.length ? ask(plain, data) : { spans: new Uint8Array(data.nSpans).fill(1), events: new Uint8Array(data.nEvents).fill(1) },
      ...terms.filter((queryTerm) => finiteStandIns(queryTerm)).map(async (queryTerm) => {
        const anyOf = await Promise.all(/** @type {Term[]} */ (finiteStandIns(queryTerm)).map((standIn) => ask([standIn], data)));
        return { t: queryTerm, anyOf };
      }),
    ]);
    for (const { t: queryTerm, anyOf } of infinite) {
      for (const key of /** @type {const} */ (["spans", "events"])) {
        const out = all[key];
        for (let i = 0; i < out.length; i++) {
          if (!out[i]) continue;
          const hit = anyOf.some((hits) => hits[key][i] === 1);
          if (hit === queryTerm.neg) out[i] = 0;
        }
      }
    }
    return all;
  };
}
