"""TPUNodeTrigger against the emulator (real async TPU client, the trigger's loop run with asyncio) and the
deferrable ResilientTPUWorkloadOperator driven through it, each resume in a fresh operator as Airflow does.
Waits are bounded by timeouts, never guessed sleeps."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from airflow_provider_resilient.clients import tpu_client
from airflow_provider_resilient.get_provider_info import get_provider_info
from airflow_provider_resilient.hooks.tpu import ResilientTPUHook
from airflow_provider_resilient.operators.tpu import PROGRESS_KEY, STATE_KEY
from airflow_provider_resilient.triggers.tpu import TPUNodeTrigger, look_again_seconds

from ..operators.test_tpu_operator import (
    A1,
    A2,
    TIMEOUT,
    ZONE,
    Killed,
    context,
    created,
    decisions,
    deleted,
    first_event,
    nodes_left,
    operator,
    queued_left,
    run_deferred,
    steps,
    wait_until,
)

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)


def make_node(node_id: str, script: str = "sleep 60", accelerator_type: str = "v4-8") -> str:
    operation = tpu_client().create_node(parent=ZONE, node_id=node_id, node={
        "accelerator_type": accelerator_type, "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": script}})
    return str(operation.result(timeout=TIMEOUT).name)


def make_queued_node(resource_id: str) -> tuple[str, str]:
    """A queued resource whose node is READY: ``(queued resource name, node name)``."""
    hook = ResilientTPUHook()
    qr = hook.create_queued_resource("test-project", "us-central2-b", resource_id, {
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "sleep 60"}}, spot=False, valid_until_seconds=None)
    wait_until(lambda: hook.get_queued_resource(qr.name).state.state.name == "ACTIVE")
    return qr.name, f"{ZONE}/nodes/{resource_id}"


def trigger(node_name: str, *, after: float = TIMEOUT, **kwargs: Any) -> TPUNodeTrigger:
    return TPUNodeTrigger(node_name, look_again_at=time.time() + after, poll_interval=0.05, **kwargs)


def event_of(t: TPUNodeTrigger) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(asyncio.wait_for(first_event(t), TIMEOUT))
    return result


# ------------------------------------------------------------------ the operator through the trigger
def test_a_deferred_run_completes_through_the_trigger(resilient_emulator, tmp_path):
    ctx, triggers, go = context(), [], tmp_path / "go"

    def make() -> Any:  # 2 workers that finish once the task has deferred
        op = operator(f"while [ ! -e {go} ]; do sleep 0.05; done", accelerator_type="v4-16", deferrable=True)
        defer = op.defer

        def spy(*, trigger: Any, method_name: str, **kwargs: Any) -> None:
            triggers.append(trigger)
            go.touch()
            defer(trigger=trigger, method_name=method_name, **kwargs)

        op.defer = spy  # type: ignore[method-assign]
        return op

    result = run_deferred(make, ctx)
    assert decisions(result) == [] and len(result["attempts"]) == 1
    assert triggers and all(isinstance(t, TPUNodeTrigger) and t.watch_node for t in triggers)
    first = triggers[0].baseline  # what the first look saw, for the trigger to compare with
    assert first["state"] == "READY" and len(first["workers"]) == 2
    assert {w["status"] for w in first["workers"]} <= {"", "preflight", "running"}
    assert created(resilient_emulator) == [A1] == deleted(resilient_emulator)
    assert nodes_left() == [] and ctx["task_state_store"].data[STATE_KEY]["phase"] == "succeeded"


def test_hang_detection_keeps_its_step_memory_across_deferrals(resilient_emulator):
    """Each resume is a new operator: the step each worker was last seen at, and since when, must come from
    the task state store, or no look ever sees a step stalled for ``hang_timeout``."""
    resilient_emulator.add_fault({"kind": "hang", "at_step": 2, "match": {"nth": 1}})  # once it reported a step
    ctx = context()
    result = run_deferred(lambda: operator(steps(8), deferrable=True, hang_timeout=1.0), ctx, max_deferrals=40)
    assert decisions(result) == [("hang", "resubmit")]
    assert "no progress past step" in result["attempts"][0]["incidents"][0]["failure"]["message"]
    assert list(ctx["task_state_store"].data[PROGRESS_KEY]) == [f"{ZONE}/nodes/{A2}#0"]
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)


def test_the_look_again_interval_follows_the_hang_timeout():
    assert look_again_seconds(30, 1800) == 300  # at most 5 minutes between full looks
    assert look_again_seconds(30, 240) == 120  # a hang is found within 1.5 x hang_timeout
    assert look_again_seconds(30, 20) == 30  # never more often than the polls


# ------------------------------------------------------------------ what the trigger reports
def test_the_trigger_fires_when_the_node_leaves_ready_and_serializes_what_it_needs(resilient_emulator):
    name = make_node("watched")
    t = trigger(name, baseline={"state": "READY", "health": "HEALTHY", "symptoms": [], "workers": []})
    classpath, kwargs = t.serialize()
    assert classpath == "airflow_provider_resilient.triggers.tpu.TPUNodeTrigger"
    assert TPUNodeTrigger(**kwargs).serialize() == (classpath, kwargs)
    resilient_emulator.add_fault({"kind": "preemption", "grace_seconds": 0.05})
    event = event_of(t)
    assert event["status"] == "changed" and "PREEMPTED" in event["message"] and event["node_name"] == name


def test_the_trigger_fires_on_a_workers_end_and_on_a_new_restart(resilient_emulator):
    name = make_node("reports")
    attributes = resilient_emulator.tpu.nodes[name].workers[0].metadata.guest_attributes
    attributes.update({"resilient/status": "running", "resilient/restarts": "0"})
    baseline = {"state": "READY", "health": "HEALTHY", "symptoms": [],
                "workers": [{"status": "running", "restarts": "0"}]}
    attributes["resilient/restarts"] = "1"
    assert "restarted in place" in event_of(trigger(name, baseline=baseline))["message"]
    attributes.update({"resilient/status": "failed", "resilient/exit_code": "3"})
    event = event_of(trigger(name, baseline={**baseline, "workers": [{"status": "running", "restarts": "1"}]}))
    assert event["status"] == "changed" and event["message"] == "worker 0 is failed (exit code 3)"


def test_a_quiet_node_brings_the_operator_back_after_the_look_again_interval(resilient_emulator):
    name = make_node("quiet")
    baseline = {"state": "READY", "health": "HEALTHY", "symptoms": [], "workers": [{"status": "", "restarts": "0"}]}
    assert event_of(trigger(name, after=0.3, baseline=baseline))["status"] == "look_again"
    assert event_of(trigger(name, after=0.1, watch_node=False))["status"] == "timer"
    tpu_client().delete_node(name=name).result(timeout=TIMEOUT)
    assert event_of(trigger(name))["status"] == "gone"


# ------------------------------------------------------------------ on_kill
def test_on_kill_deletes_the_node_and_its_queued_resource(resilient_emulator):
    qr, name = make_queued_node("killed")
    asyncio.run(asyncio.wait_for(trigger(name, queued_resource=qr).on_kill(), TIMEOUT))
    assert [c.resource for c in resilient_emulator.calls.list("DeleteQueuedResource")] == [qr]
    assert [c.resource for c in resilient_emulator.calls.list("DeleteNode")] == [name]
    wait_until(lambda: nodes_left() == [] and queued_left() == [])
    assert resilient_emulator.tpu.processes() == []


def test_on_kill_with_keep_node_keeps_them(resilient_emulator):
    qr, name = make_queued_node("kept")
    asyncio.run(asyncio.wait_for(trigger(name, queued_resource=qr, keep_node=True).on_kill(), TIMEOUT))
    assert resilient_emulator.calls.list("DeleteQueuedResource") == resilient_emulator.calls.list("DeleteNode") == []
    assert nodes_left() == [name] and queued_left() == [qr]


def test_on_kill_ends_within_its_budget_when_the_api_is_unreachable():
    t = TPUNodeTrigger(f"{ZONE}/nodes/x", look_again_at=0, emulator="127.0.0.1:9", kill_timeout_seconds=0.5)
    asyncio.run(asyncio.wait_for(t.on_kill(), 10))  # retries stop at kill_timeout_seconds: no error, no hang


def test_a_user_kill_while_deferred_deletes_the_operators_node(resilient_emulator):
    with pytest.raises(Killed):
        run_deferred(lambda: operator("sleep 60", deferrable=True, queued_resource=True), context(), kill_at=0)
    assert [c.resource.rsplit("/", 1)[1] for c in resilient_emulator.calls.list("DeleteQueuedResource")] == [A1]
    wait_until(lambda: nodes_left() == [] and queued_left() == [])


def test_the_trigger_is_registered_with_the_provider():
    modules = [m for t in get_provider_info()["triggers"] for m in t["python-modules"]]
    assert "airflow_provider_resilient.triggers.tpu" in modules


def test_a_watching_trigger_holds_an_early_event_until_fire_not_before(resilient_emulator, recorded_sleeps):
    """``fire_not_before`` (operators.base.DEFAULT_MIN_DEFER_SECONDS): an event found at once is held back
    until that moment, so Airflow's stale executor event cannot fail the resumed try."""
    waits = recorded_sleeps
    gone = f"{ZONE}/nodes/never-made"
    start = time.time()
    assert event_of(trigger(gone, fire_not_before=start + 3600.0))["status"] == "gone"
    assert 3500.0 < waits[-1] <= 3600.0
    waits.clear()
    assert event_of(trigger(gone))["status"] == "gone" and not [w for w in waits if w > 1.0]
    assert trigger(gone, fire_not_before=12.5).serialize()[1]["fire_not_before"] == 12.5
