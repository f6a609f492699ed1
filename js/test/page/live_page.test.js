import { test } from "node:test";
import assert from "node:assert/strict";
import { handoverTarget } from "../../src/page/live_page.js";

const base = "http://127.0.0.1:9998/live.html";

test("handoverTarget: the dump's page on the same server", () => {
  assert.equal(handoverTarget({ seq: 3, handover: { url: "dump.html", dump: "r.pt" } }, base),
    "http://127.0.0.1:9998/dump.html");
});

test("handoverTarget: nothing without a handover, or to another origin", () => {
  for (const delta of [{ seq: 3 }, null, "text", { handover: {} }, { handover: { url: 5 } },
    { handover: { url: "https://elsewhere.example/x.html" } },
    { handover: { url: "//elsewhere.example/x.html" } }]) {
    assert.equal(handoverTarget(delta, base), null, JSON.stringify(delta));
  }
});
