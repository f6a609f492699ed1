// Synthetic but realistic payload columns for the dev harness and benchmarks:
// hundreds of samples overlapping in time, groups of 8 with a group span and
// a group reward model, nested spans (generate_and_rm_group > generate_and_rm
// > sglang_generate / tool_call > tool_execution), multi-turn agentic rows
// with 5-60 turns, PD virtual [P]/[D] lanes with segments and the PD-detail
// spans they stand for, open spans, unmatched ends, instant events and
// clusters of them, retries (attempts 0-2), errors, a few hostile strings.

import { rng, COLUMNS } from "../test/helpers/make_payload.js";
import { F_OPEN, F_VIRTUAL, F_ERROR, F_PD_DETAIL, CLIP_REASONS, CLIP_SHIFT } from "../src/data/decode.js";

const CLIP_ROW_END = CLIP_REASONS.indexOf("row end") << CLIP_SHIFT;

const PREFILL = ["bootstrap_queue", "bootstrap", "alloc_wait", "forward", "transfer_queue"];
const DECODE = ["prealloc", "bootstrap", "alloc_wait", "transfer", "forward"];

/**
 * @param {{spans?: number, seed?: number}} opt
 */
export function generate(opt = {}) {
  const target = opt.spans ?? 250000;
  const r = rng(opt.seed ?? 7);
  /** @type {string[]} */
  const names = [];
  const nameIdx = new Map();
  const nm = (/** @type {string} */ n) => {
    let i = nameIdx.get(n);
    if (i === undefined) {
      i = names.length;
      names.push(n);
      nameIdx.set(n, i);
    }
    return i;
  };
  const statuses = ["completed", "truncated", "aborted", "failed"];
  const sources = ["deepsearch_with_tool", "math_dapo", "code_agent", "<img src=x onerror=alert(1)>"];
  /** @type {Record<string, number[]>} */
  const c = {};
  for (const k of Object.keys(COLUMNS)) c[k] = [];
  const samples = { row: /** @type {number[]} */ ([]), sample_index: /** @type {(number|null)[]} */ ([]), group_index: /** @type {(number|null)[]} */ ([]), trace_id: /** @type {(string|null)[]} */ ([]), label: /** @type {(string|null)[]} */ ([]) };

  // Estimate the number of groups so that samples overlap: starts spread over
  // a window that grows with the count (a rollout step of ~10-20 minutes).
  const estSpansPerSample = 260;
  const estSamples = Math.max(16, Math.ceil(target / estSpansPerSample));
  const startWindow = 60 + Math.min(600, estSamples * 0.12);
  const exp = (/** @type {number} */ mean) => -Math.log(1 - r()) * mean;
  const uni = (/** @type {number} */ a, /** @type {number} */ b) => a + r() * (b - a);

  let sampleIdx = 0;
  let group = 0;
  let totalSpans = 0;
  while (totalSpans < target) {
    const groupSize = 8;
    const gStart = r() * startWindow;
    const kindRoll = r();
    const kind = kindRoll < 0.7 ? "agent" : kindRoll < 0.9 ? "math" : "code";
    const source = kind === "agent" ? 0 : kind === "math" ? 1 : 2;
    /** @type {any[]} */
    const members = [];
    for (let m = 0; m < groupSize; m++) members.push(buildSample(kind, gStart + r() * 0.5));
    const gEnd0 = Math.max(...members.map((x) => x.end));
    const rmDur = kind === "math" ? uni(0.2, 1.5) : uni(1, 6);
    const gEnd = gEnd0 + 0.05 + rmDur;
    for (let m = 0; m < groupSize; m++) {
      const smp = members[m];
      // Group spans, identical in every member (as trace_span(group, ...) writes them).
      const root = smp.add(gStart, gEnd, "generate_and_rm_group", 0, 0, 0, -1);
      smp.spans[smp.gar].parent = root;
      smp.add(gEnd0 + 0.05, gEnd, "group_reward_model", 1, 1, 0, root);
      smp.end = gEnd;
      emit(smp, m, source);
      if (totalSpans >= target) break;
    }
    group++;
  }

  /**
   * @param {string} kind
   * @param {number} t0
   */
  function buildSample(kind, t0) {
    /** @type {{start: number, end: number, name: string, lane: number, depth: number, flags: number, attempt: number, parent: number}[]} */
    const spans = [];
    /** @type {{span: number, start: number, end: number, name: string}[]} */
    const segs = [];
    /** @type {{ts: number, name: string, lane: number, kind: number, attempt: number, parent: number}[]} */
    const events = [];
    const smp = {
      spans,
      segs,
      events,
      end: t0,
      gar: -1,
      status: 0,
      attempts: 1,
      reward: NaN,
      label: /** @type {string|null} */ (null),
      /**
       * @param {number} a
       * @param {number} b
       * @param {string} name
       * @param {number} lane
       * @param {number} depth
       * @param {number} flags
       * @param {number} parent
       * @param {number} [attempt]
       */
      add(a, b, name, lane, depth, flags, parent, attempt = 0) {
        spans.push({ start: a, end: b, name, lane, depth, flags, attempt, parent });
        return spans.length - 1;
      },
    };
    const pd = kind === "math" || r() < 0.4;
    const turns = kind === "math" ? 1 : Math.round(5 + Math.pow(r(), 1.6) * 55);
    const retryAt = r() < 0.1 ? Math.floor(r() * turns) : -1;
    const retry2 = retryAt >= 0 && r() < 0.25;
    const openRow = r() < 0.03;
    const gar = smp.add(t0, t0, "generate_and_rm", 1, 1, 0, -1);
    smp.gar = gar;
    let t = t0 + uni(0.01, 0.2);
    let attempt = 0;
    for (let k = 0; k < turns; k++) {
      if (k === retryAt) {
        attempt = 1;
        events.push({ ts: t, name: "attempt_start", lane: 1, kind: 0, attempt, parent: gar });
        t += uni(0.2, 2);
      }
      if (retry2 && k === retryAt + 1) {
        attempt = 2;
        events.push({ ts: t, name: "attempt_start", lane: 1, kind: 0, attempt, parent: gar });
        t += uni(0.2, 2);
      }
      // Generation.
      const gen = kind === "math" ? uni(3, 40) : uni(0.6, 6) * (r() < 0.05 ? 5 : 1);
      const g = smp.add(t, t + gen, "sglang_generate", 2, 2, 0, gar, attempt);
      if (pd) addPd(smp, g, t, gen, attempt, kind === "math" ? 3 : 4);
      if (r() < 0.15) {
        // A burst of instant events within a few ms: drawn as one cluster.
        const n = 3 + Math.floor(r() * 5);
        const at = t + gen * r();
        for (let q = 0; q < n; q++) events.push({ ts: at + q * 0.003, name: "kv_cache_evict", lane: 2, kind: 0, attempt, parent: g });
      }
      t += gen + uni(0.005, 0.05);
      if (kind === "math") {
        smp.add(t, t + uni(0.2, 1.2), "reward_model", 2, 2, 0, gar, attempt);
        t += 1.3;
        break;
      }
      if (k === turns - 1 && !openRow) break;
      // Tool call with its execution.
      const tool = exp(kind === "code" ? 6 : 3) + 0.2;
      const last = k === turns - 1;
      const tc = smp.add(t, t + tool, "tool_call", 2, 2, last ? F_OPEN | CLIP_ROW_END : 0, gar, attempt);
      if (r() < 0.25) events.push({ ts: t + 0.01, name: "tool_parse", lane: 2, kind: 0, attempt, parent: tc });
      const err = r() < (kind === "code" ? 0.08 : 0.02);
      smp.add(t + 0.03, t + tool - 0.02, kind === "code" && r() < 0.3 ? "sandbox_exec" : "tool_execution", 3, 3, (last ? F_OPEN | CLIP_ROW_END : 0) | (err ? F_ERROR : 0), tc, attempt);
      if (err) events.push({ ts: t + tool - 0.02, name: "tool_error", lane: 3, kind: 0, attempt, parent: tc });
      t += tool + uni(0.005, 0.08);
      if (last) break;
    }
    if (r() < 0.02) events.push({ ts: t0 + (t - t0) * r(), name: "tool_call", lane: 2, kind: 1, attempt: 0, parent: gar });
    if (r() < 0.01) smp.add(t0 + 0.5, t0 + 0.9, "custom_step<script>alert(1)</script>", 2, 2, 0, gar, 0);
    spans[gar].end = openRow ? t : t + 0.02;
    if (openRow) spans[gar].flags = F_OPEN | CLIP_ROW_END;
    events.push({ ts: t, name: "response_done", lane: 1, kind: 0, attempt, parent: gar });
    smp.end = t + 0.02;
    smp.attempts = attempt + 1;
    smp.status = openRow ? 2 : r() < 0.08 ? 1 : r() < 0.02 ? 3 : 0;
    smp.reward = r() < 0.03 ? NaN : kind === "math" ? (r() < 0.6 ? 1 : 0) : Math.round(r() * 100) / 100;
    smp.label = r() < 0.5 ? ["Paris", "42", "def solve(): return sorted(xs)", "The answer is \\boxed{7}", "東京"][Math.floor(r() * 5)] : null;
    return smp;
  }

  /**
   * PD: virtual [P]/[D] spans (lanes 4/5) with segments, and the detail spans.
   * @param {any} smp
   * @param {number} g
   * @param {number} t
   * @param {number} gen
   * @param {number} attempt
   * @param {number} lane lane of [P]; [D] goes below it
   */
  function addPd(smp, g, t, gen, attempt, lane) {
    const pTotal = Math.min(gen * uni(0.05, 0.25), 3);
    const pv = smp.add(t, t + pTotal, "[P]", lane, 3, F_VIRTUAL, g, attempt);
    const pd = smp.add(t, t + pTotal, "sglang_pd_prefill", lane, 3, F_PD_DETAIL, g, attempt);
    const pw = PREFILL.map((n) => (n === "forward" ? uni(4, 8) : uni(0.2, 1.5)));
    const psum = pw.reduce((a, b) => a + b, 0);
    let u = t;
    PREFILL.forEach((n, q) => {
      const dur = (pw[q] / psum) * pTotal;
      smp.segs.push({ span: pv, start: u, end: u + dur, name: `prefill_${n}` });
      smp.add(u, u + dur, `sglang_pd_prefill_${n}`, lane, 4, F_PD_DETAIL, pd, attempt);
      u += dur;
    });
    const dStart = t + pTotal;
    const dTotal = gen - pTotal;
    const dv = smp.add(dStart, dStart + dTotal, "[D]", lane + 1, 3, F_VIRTUAL, g, attempt);
    const dd = smp.add(dStart, dStart + dTotal, "sglang_pd_decode", lane + 1, 3, F_PD_DETAIL, g, attempt);
    const dw = DECODE.map((n) => (n === "forward" ? uni(10, 20) : uni(0.1, 1)));
    const dsum = dw.reduce((a, b) => a + b, 0);
    u = dStart;
    DECODE.forEach((n, q) => {
      const dur = (dw[q] / dsum) * dTotal;
      smp.segs.push({ span: dv, start: u, end: u + dur, name: `decode_${n}` });
      smp.add(u, u + dur, `sglang_pd_decode_${n}`, lane + 1, 4, F_PD_DETAIL, dd, attempt);
      u += dur;
    });
    smp.events.push({ ts: t + gen, name: "sglang_pd_summary", lane: 2, kind: 0, attempt, parent: g });
  }

  /**
   * Append one sample's rows to the columns (spans sorted by lane, start).
   * @param {any} smp
   * @param {number} member
   * @param {number} source
   */
  function emit(smp, member, source) {
    const s = sampleIdx++;
    const order = smp.spans.map((/** @type {any} */ _, /** @type {number} */ i) => i);
    order.sort((/** @type {number} */ a, /** @type {number} */ b) => smp.spans[a].lane - smp.spans[b].lane || smp.spans[a].start - smp.spans[b].start || a - b);
    const base = c.span_sample.length;
    const newIdx = new Int32Array(order.length);
    order.forEach((/** @type {number} */ orig, /** @type {number} */ k) => (newIdx[orig] = base + k));
    let lanes = 0;
    let open = 0;
    let lo = Infinity;
    for (const orig of order) {
      const sp = smp.spans[orig];
      c.span_sample.push(s);
      c.span_start.push(sp.start);
      c.span_end.push(sp.end);
      c.span_name.push(nm(sp.name));
      c.span_lane.push(sp.lane);
      c.span_depth.push(sp.depth);
      c.span_flags.push(sp.flags);
      c.span_attempt.push(sp.attempt);
      c.span_parent.push(sp.parent >= 0 ? newIdx[sp.parent] : -1);
      lanes = Math.max(lanes, sp.lane + 1);
      if (sp.flags & F_OPEN) open++;
      lo = Math.min(lo, sp.start);
    }
    for (const sg of smp.segs) {
      c.seg_span.push(newIdx[sg.span]);
      c.seg_start.push(sg.start);
      c.seg_end.push(sg.end);
      c.seg_name.push(nm(sg.name));
    }
    const evs = smp.events.slice().sort((/** @type {any} */ a, /** @type {any} */ b) => a.lane - b.lane || a.ts - b.ts);
    for (const ev of evs) {
      c.ev_sample.push(s);
      c.ev_ts.push(ev.ts);
      c.ev_name.push(nm(ev.name));
      c.ev_lane.push(ev.lane);
      c.ev_kind.push(ev.kind);
      c.ev_attempt.push(ev.attempt);
      c.ev_parent.push(ev.parent >= 0 ? newIdx[ev.parent] : -1);
    }
    c.smp_start.push(lo);
    c.smp_end.push(smp.end);
    c.smp_reward.push(smp.reward);
    c.smp_status.push(smp.status);
    c.smp_source.push(s === 3 ? 3 : source);
    c.smp_rollout.push(0);
    c.smp_attempts.push(smp.attempts);
    c.smp_lanes.push(lanes);
    c.smp_open.push(open);
    c.smp_offset.push(0);
    c.smp_base.push(0); // item times as generated: from t0
    samples.row.push(s);
    samples.sample_index.push(s);
    samples.group_index.push(group);
    samples.trace_id.push(hex(s * 2654435761 + member));
    samples.label.push(s === 5 ? "<img src=x onerror=alert(1)>" : smp.label);
    totalSpans += order.length;
  }

  let tMax = 0;
  for (const v of c.smp_end) if (v > tMax) tMax = v;
  const meta = {
    title: "rollout_12.pt (synthetic)",
    t0: 1750000000,
    t1: 1750000000 + tMax,
    n_samples_total: sampleIdx,
    names,
    statuses,
    sources,
    rollouts: ["rollout 12"],
    samples,
    attrs_embedded: true,
    align: "global",
  };
  return { meta, cols: c };
}

/** @param {number} n */
function hex(n) {
  let h = (n >>> 0).toString(16).padStart(8, "0");
  h += ((n * 7919) >>> 0).toString(16).padStart(8, "0");
  return h + h.split("").reverse().join("");
}
