// The served page of a live rollout (`slime-trace-viewer live DIR`): the page
// starts with an empty live payload; this poller fetches `live.json` from its
// own server once a second (each answer: the blocks changed since the last one,
// docs/live-view.md) and hands it to the view as the kernel's message would be,
// answers the view's `live_sync` the same way, and asks the server for an
// item's details when it is clicked. Served with `--dumps`, an answer that names
// the step's dump (`handover`) ends the polling and the page goes to the dump's
// page, whose title says it was handed over.

/** @typedef {{url: string, attrs: string, interval_s?: number}} LiveNote where the page's server answers */

/**
 * The details of payload item `index`, from the server.
 * @param {LiveNote} note
 * @param {string} kind
 * @param {number} index
 */
export async function liveAttrs(note, kind, index) {
  const url = new URL(note.attrs, location.href);
  url.searchParams.set("kind", kind);
  url.searchParams.set("index", String(index));
  const response = await fetch(url, { cache: "no-store" });
  const reply = await response.json();
  if (!response.ok || reply.error) throw new Error(reply.error || `HTTP ${response.status}`);
  return reply.detail;
}

/**
 * Where a delta hands the page over to (the step's dump's page on the same
 * server), or null: an answer without one, or one naming another origin.
 * @param {unknown} delta the parsed `live.json` answer
 * @param {string} base the page's address
 * @returns {string|null}
 */
export function handoverTarget(delta, base) {
  const note = /** @type {any} */ (delta)?.handover;
  if (!note || typeof note.url !== "string") return null;
  try {
    const url = new URL(note.url, base);
    return url.origin === new URL(base).origin ? url.href : null;
  } catch {
    return null;
  }
}

/**
 * Poll the server and deliver its deltas to `model`; returns a function that stops.
 * @param {{receive: (content: any, buffers?: any[]) => void}} model
 * @param {LiveNote} note
 * @returns {{stop: () => void, sync: (since: number, epoch: string|null) => void}}
 */
export function followLive(model, note) {
  let since = 0;
  /** @type {string|null} */
  let epoch = null;
  let busy = false;
  /**
   * @param {number} from
   * @param {string|null} of
   */
  const fetchSince = async (from, of) => {
    const url = new URL(note.url, location.href);
    url.searchParams.set("since", String(from));
    if (of) url.searchParams.set("epoch", of);
    try {
      const response = await fetch(url, { cache: "no-store" });
      if (!response.ok) return;
      const delta = await response.json();
      const target = handoverTarget(delta, location.href);
      if (target) {
        clearInterval(timer);
        location.replace(target);
        return;
      }
      since = Math.max(delta.epoch === epoch ? since : 0, delta.seq);
      epoch = delta.epoch;
      model.receive(delta, []);
    } catch {
      // the server may be restarting: the next look tries again
    }
  };
  const look = async () => {
    if (busy) return;
    busy = true;
    await fetchSince(since, epoch);
    busy = false;
  };
  const timer = setInterval(look, 1000 * (note.interval_s ?? 1));
  return {
    stop: () => clearInterval(timer),
    sync: (from, of) => {
      void fetchSince(from, of);
    },
  };
}
