import { test } from "node:test";
import assert from "node:assert/strict";
import { absentLines, lossLines, totalLost } from "../../src/live/banner.js";

test("a silent process of an earlier rollout is a notice, not a loss of this one", () => {
  const live = {
    senders: [{ sender: "gpu-1:411", received: 40, dropped: 0, lost: 0, silent: false, closed: false }],
    absent: [{ sender: "gpu-2:77", last_rollout: 5, quiet_s: 125 }],
  };
  assert.deepEqual(lossLines(live.senders), []); // nothing turns the border red
  assert.equal(totalLost(live.senders), 0);
  const lines = absentLines(live.absent);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /^gpu-2:77: silent for 2m 5.0s since rollout 5, nothing sent to this one/);
  assert.deepEqual(absentLines(/** @type {any} */ (undefined)), []);
});
