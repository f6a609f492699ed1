"""``install`` as Ray's ``worker_process_setup_hook``: a local Ray (2 CPUs, loopback)
whose workers stream what their tasks and actors record, with no call in their code."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live_sink import attributes

ROOT = Path(__file__).resolve().parents[2]
HOOK = "slime_trace_widget.tracing.live.install"


@pytest.fixture
def ray_streaming(sink) -> Iterator:
    ray = pytest.importorskip("ray")
    runtime_env = {
        "worker_process_setup_hook": HOOK,
        "env_vars": {"SLIME_TRACE_LIVE": sink.endpoint,
                     "PYTHONPATH": os.pathsep.join(filter(None, [
                         str(ROOT), os.environ.get("PYTHONPATH", "")]))},
    }
    for attempt in range(5):  # Ray gives its node 30 s to start: a busy machine may need more
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     _node_ip_address="127.0.0.1", runtime_env=runtime_env)
            break
        except Exception:
            ray.shutdown()
            if attempt == 4:
                raise
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_workers_stream_through_the_setup_hook(ray_streaming, sink) -> None:
    ray = ray_streaming

    @ray.remote
    def rollout_task(index: int) -> tuple[int, list]:
        from slime_trace_widget.tracing import live, trace_event, trace_span

        sample = {"index": index, "group_index": 0}
        with trace_span(sample, "generate_and_rm", {"turn": 0}):
            trace_event(sample, "tool_result", {"chars": 5})
        stream = live.current_stream()
        assert stream is not None and stream.enabled  # installed by the hook, not here
        return os.getpid(), sample["trace"]["events"]

    @ray.remote
    class RolloutActor:
        def run(self) -> tuple[int, list]:
            from slime_trace_widget.tracing import live, trace_event

            live.set_rollout(4)
            sample = {"index": 100, "group_index": 9}
            trace_event(sample, "actor_event")
            return os.getpid(), sample["trace"]["events"]

    results = ray.get([rollout_task.remote(i) for i in range(3)], timeout=300)
    actor = RolloutActor.remote()
    actor_pid, actor_records = ray.get(actor.run.remote(), timeout=300)
    expected = sum(len(records) for _, records in results) + len(actor_records)
    sink.wait_for(lambda s: len(s.records()) >= expected)
    arrived = sink.records()
    bodies = sorted((body["sample_id"], body["name"], body["type"]) for _, body in arrived)
    recorded = sorted((r["sample_id"], r["name"], r["type"])
                      for _, records in results for r in records)
    assert bodies == sorted([*recorded, (100, "actor_event", "event")])
    pids = {attributes(request.resource_logs[0].resource)["process.pid"]
            for request in sink.taken()}
    assert {pid for pid, _ in results} | {actor_pid} <= pids
    assert os.getpid() not in pids  # the driver did not install it
    actor_attrs = next(attrs for attrs, body in arrived if body["name"] == "actor_event")
    assert actor_attrs["slime.rollout_id"] == 4
