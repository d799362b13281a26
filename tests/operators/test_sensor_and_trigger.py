"""CustomJobStateSensor and CustomJobTrigger against the emulator (the trigger's loop run with asyncio)."""

from __future__ import annotations

import asyncio

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

from airflow_provider_resilient.clients import vertex_job_client
from airflow_provider_resilient.sensors.vertex_ai import CustomJobStateSensor
from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
PARENT = "projects/test-project/locations/us-central1"


def create(code: str) -> str:
    job = vertex_job_client("us-central1").create_custom_job(parent=PARENT, custom_job={
        "display_name": "watched", "job_spec": {"worker_pool_specs": [{
            "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": "x", "command": ["python", "-c", code]}}]}})
    return str(job.name)


def first_event(trigger: CustomJobTrigger) -> dict:
    async def run() -> dict:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("no event")

    return asyncio.run(run())


def test_trigger_reports_the_terminal_state_with_the_error(resilient_emulator):
    name = create("raise SystemExit(3)")
    event = first_event(CustomJobTrigger(name, poll_interval=0.02))
    assert event["status"] == "terminal"
    assert event["job"]["state"] == "JOB_STATE_FAILED" and event["job"]["started"] is True
    assert "non-zero status of 3" in event["job"]["error_message"]


def test_trigger_reports_an_unreadable_job(resilient_emulator):
    event = first_event(CustomJobTrigger(f"{PARENT}/customJobs/404", poll_interval=0.02))
    assert event["status"] == "error" and "404" in event["message"]


def test_trigger_on_kill_cancels_the_job(resilient_emulator):
    name = create("import time; time.sleep(60)")
    resilient_emulator.wait_for_state(name, ["JOB_STATE_RUNNING"], 30)
    asyncio.run(CustomJobTrigger(name, cancel_on_kill=True).on_kill())
    resilient_emulator.wait_for_state(name, ["JOB_STATE_CANCELLED"], 30)
    asyncio.run(CustomJobTrigger(name, cancel_on_kill=True).on_kill())  # already over: no error


def test_sensor_pokes_until_success_and_fails_on_another_terminal_state(resilient_emulator):
    ok = create("print('ok')")
    sensor = CustomJobStateSensor(task_id="wait", job_name=ok, poke_interval=0.05, deferrable=False)
    resilient_emulator.wait_for_state(ok, ["JOB_STATE_SUCCEEDED"], 30)
    assert sensor.poke({}) is True
    bad = create("raise SystemExit(1)")
    resilient_emulator.wait_for_state(bad, ["JOB_STATE_FAILED"], 30)
    with pytest.raises(AirflowFailException, match="JOB_STATE_FAILED"):
        CustomJobStateSensor(task_id="wait", job_name=bad).poke({})


def test_deferrable_sensor_defers_to_the_trigger_and_completes_from_its_event(resilient_emulator):
    name = create("import time; time.sleep(0.5)")
    sensor = CustomJobStateSensor(task_id="wait", job_name=name, deferrable=True, poll_interval=0.02)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    event = first_event(deferred.value.trigger)
    assert sensor.execute_complete({}, event)["state"] == "JOB_STATE_SUCCEEDED"
