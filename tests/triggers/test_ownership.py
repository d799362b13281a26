"""A trigger's ``on_kill`` releases its job or node only when its task instance was really acted on.

Airflow 3.3's triggerer calls ``on_kill`` both for a person's Mark failed / Mark success / Clear and when a
triggerer whose heartbeat lapsed wakes up and cancels a trigger that moved to another triggerer meanwhile. The
pure rule (``supervisor.reconcile.judge_trigger_cancel``) tells them apart by the task instance's state; the
triggers read it from Airflow (``triggers.ownership``). Here the state is given by the test (the real reading
goes through the triggerer's supervisor, which the stack tests run), the job and the node are the emulator's.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_resilient.compat import TRIGGER_ON_KILL
from airflow_provider_resilient.supervisor.reconcile import (
    FINISHED_STATES,
    GONE,
    OWNED_STATES,
    UNKNOWN,
    Owner,
    judge_task_kill,
    judge_trigger_cancel,
    owner_states,
)
from airflow_provider_resilient.testing.emulator_clients import tpu_client, vertex_job_client
from airflow_provider_resilient.triggers import ownership
from airflow_provider_resilient.triggers.tpu import TPUNodeTrigger
from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

PARENT = "projects/test-project/locations/us-central1"
ZONE = "projects/test-project/locations/us-central2-b"
TI = SimpleNamespace(dag_id="train_dag", task_id="train", run_id="manual__1", map_index=-1, try_number=1)
MAPPED_TI = SimpleNamespace(dag_id="train_dag", task_id="train", run_id="manual__1", map_index=3, try_number=1)


# ------------------------------------------------------------------ the pure rule
@pytest.mark.parametrize("state", sorted(OWNED_STATES))
def test_a_task_that_still_owns_its_resource_is_not_killed(state):
    judgement = judge_trigger_cancel(state)
    assert judgement.kill is False and state in judgement.why and "moved" in judgement.why


@pytest.mark.parametrize("state", [*sorted(FINISHED_STATES), None, "restarting", GONE])
def test_a_marked_cleared_or_deleted_task_instance_is_a_kill(state):
    assert judge_trigger_cancel(state).kill is True


@pytest.mark.parametrize(("state", "kill"), [
    ("running", True), ("up_for_retry", False), ("up_for_reschedule", False), ("queued", False),
    ("scheduled", False), ("deferred", False), (UNKNOWN, False), ("failed", True), ("success", True), (None, True),
    ("restarting", True), (GONE, True)])
def test_a_task_process_stopped_releases_only_when_its_task_instance_is_over(state, kill):
    """The worker-side rule (an operator's on_kill): a try taken for dead and retried keeps its job for the next
    try; this try ending by itself (running: its execution_timeout) or a person's action releases it."""
    assert judge_task_kill(state).kill is kill


def test_an_unreadable_state_keeps_the_resource_for_the_reconciler():
    judgement = judge_trigger_cancel(UNKNOWN)
    assert judgement.kill is False and "reconciler" in judgement.why


def test_owner_states_reads_mapped_keys_and_vanished_runs():
    plain, mapped, gone = Owner("d", "t", "r1"), Owner("d", "t", "r1", 3), Owner("d", "t", "deleted")
    asked: list[tuple[str, list[str]]] = []

    def answer(dag_id: str, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        asked.append((dag_id, run_ids))
        return {"r1": {"t": "deferred", "t_3": "failed"}}

    assert owner_states({plain, mapped, gone}, answer) == {plain: "deferred", mapped: "failed", gone: GONE}
    assert asked == [("d", ["deleted", "r1"])]  # one call per DAG


# ------------------------------------------------------------------ reading the state
def test_the_owner_is_the_task_instance_the_triggerer_set():
    t = CustomJobTrigger(f"{PARENT}/customJobs/1")
    assert ownership.owner_of(t) is None  # not run by a triggerer
    t.task_instance = MAPPED_TI
    assert ownership.owner_of(t) == Owner("train_dag", "train", "manual__1", 3)


def test_a_failed_read_is_unknown_and_a_direct_call_is_a_kill():
    def broken(dag_id: str, run_ids: list[str]) -> dict[str, Any]:
        raise ConnectionError("api-server down")

    t = CustomJobTrigger(f"{PARENT}/customJobs/1")
    assert asyncio.run(ownership.judge_cancel(t, broken)).kill is True  # no task instance: called directly
    t.task_instance = TI
    assert asyncio.run(ownership.task_instance_state(ownership.owner_of(t), broken)) == UNKNOWN
    assert asyncio.run(ownership.judge_cancel(t, broken)).kill is False


def test_outside_a_triggerer_the_task_sdk_has_no_supervisor_to_ask():
    """The real reading (``RuntimeTaskInstance.get_task_states``) needs the triggerer's supervisor; without one
    the state is unknown and nothing is released -- never a raw error out of on_kill."""
    t = CustomJobTrigger(f"{PARENT}/customJobs/1")
    t.task_instance = TI
    assert asyncio.run(ownership.judge_cancel(t)).kill is False


# ------------------------------------------------------------------ the triggers' on_kill, against the emulator
def states_answering(state: str | None) -> Any:
    def answer(dag_id: str, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        return {TI.run_id: {TI.task_id: state}}

    return answer


def running_job(emulator: Any) -> str:
    job = vertex_job_client("us-central1").create_custom_job(parent=PARENT, custom_job={
        "display_name": "watched", "job_spec": {"worker_pool_specs": [{
            "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": "x", "command": ["python", "-c", "import time; time.sleep(120)"]}}]}})
    emulator.wait_for_state(job.name, ["JOB_STATE_RUNNING"], 60)
    return str(job.name)


@pytest.mark.resilient_emulator(time_scale=0.002)
@pytest.mark.parametrize("state", ["deferred", "running", "up_for_retry"])
def test_a_vertex_trigger_moved_to_another_triggerer_cancels_nothing(resilient_emulator, monkeypatch, state):
    name = running_job(resilient_emulator)
    monkeypatch.setattr(ownership, "airflow_task_states", states_answering(state))
    t = CustomJobTrigger(name, cancel_on_kill=True)
    t.task_instance = TI
    asyncio.run(t.on_kill())
    assert resilient_emulator.calls.list("CancelCustomJob") == []
    assert vertex_job_client("us-central1").get_custom_job(name=name).state.name == "JOB_STATE_RUNNING"


@pytest.mark.resilient_emulator(time_scale=0.002)
@pytest.mark.parametrize("state", ["failed", "success", None, GONE])
def test_a_vertex_trigger_whose_task_was_marked_or_cleared_cancels_its_job(resilient_emulator, monkeypatch, state):
    name = running_job(resilient_emulator)
    answer = (lambda dag_id, run_ids: {}) if state == GONE else states_answering(state)
    monkeypatch.setattr(ownership, "airflow_task_states", answer)
    t = CustomJobTrigger(name, cancel_on_kill=True)
    t.task_instance = TI
    asyncio.run(t.on_kill())
    assert [c.resource for c in resilient_emulator.calls.list("CancelCustomJob")] == [name]
    resilient_emulator.wait_for_state(name, ["JOB_STATE_CANCELLED"], 60)


@pytest.mark.resilient_emulator(time_scale=0.002)
@pytest.mark.parametrize(("state", "deleted"), [("deferred", False), ("queued", False), ("failed", True)])
def test_a_tpu_trigger_deletes_its_node_only_for_a_killed_task(resilient_emulator, monkeypatch, state, deleted):
    node = tpu_client().create_node(parent=ZONE, node_id=f"owned-{state}", node={
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "sleep 120"}}).result(timeout=60).name
    monkeypatch.setattr(ownership, "airflow_task_states", states_answering(state))
    t = TPUNodeTrigger(node, look_again_at=0, poll_interval=0.05)
    t.task_instance = TI
    asyncio.run(asyncio.wait_for(t.on_kill(), 60))
    assert [c.resource for c in resilient_emulator.calls.list("DeleteNode")] == ([node] if deleted else [])


# ------------------------------------------------------------------ under Airflow's own TriggerRunner
@pytest.mark.skipif(not TRIGGER_ON_KILL, reason="the triggerer calls on_kill from Airflow 3.3")
@pytest.mark.resilient_emulator(time_scale=0.002)
def test_a_kill_goes_on_when_the_triggerer_cancels_its_on_kill_again(resilient_emulator, monkeypatch):
    """Airflow's ``TriggerRunner`` (its own ``run_trigger`` and ``cancel_triggers``) cancels a trigger again at each
    sync until it has ended -- its supervisor sends the id in ``to_cancel`` every time -- and swallows the
    ``CancelledError`` that reaches ``on_kill`` ("on_kill() was itself cancelled"). A Mark failed whose ``on_kill``
    was still reading the task instance's state at the next sync then cancelled nothing: the job ran on until the
    reconciler's next run. The kill now goes on to its end after the second cancel."""
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    name = running_job(resilient_emulator)
    reading, answer = threading.Event(), threading.Event()

    def marked_failed_read_slowly(dag_id: str, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        reading.set()
        assert answer.wait(60)
        return {TI.run_id: {TI.task_id: "failed"}}

    monkeypatch.setattr(ownership, "airflow_task_states", marked_failed_read_slowly)
    t = CustomJobTrigger(name, cancel_on_kill=True)
    t.task_instance = SimpleNamespace(**vars(TI), id="0190d8b4-0000-7000-8000-000000000001", context_carrier=None)
    watching = asyncio.Event()
    run = t.run

    async def run_and_say_so() -> Any:
        watching.set()
        async for event in run():
            yield event

    t.run = run_and_say_so  # type: ignore[method-assign]

    async def mark_failed_with_two_syncs() -> None:
        runner = TriggerRunner()
        task = asyncio.create_task(runner.run_trigger(1, t))
        runner.triggers[1] = {"task": task, "name": "CustomJobTrigger", "events": 0, "is_watcher": False}
        await watching.wait()
        runner.to_cancel.append(1)  # the sync after the Mark failed
        await runner.cancel_triggers()
        assert await asyncio.to_thread(reading.wait, 60)  # on_kill is reading the task instance's state
        runner.to_cancel.append(1)  # the next sync: the trigger has not ended, so it is cancelled again
        await runner.cancel_triggers()
        with pytest.raises(asyncio.CancelledError):
            await task
        answer.set()
        still_running = asyncio.all_tasks() - {asyncio.current_task()}  # the kill, if it went on
        await asyncio.wait_for(asyncio.gather(*still_running), 60)

    asyncio.run(mark_failed_with_two_syncs())
    assert [c.resource for c in resilient_emulator.calls.list("CancelCustomJob")] == [name]
    resilient_emulator.wait_for_state(name, ["JOB_STATE_CANCELLED"], 60)
