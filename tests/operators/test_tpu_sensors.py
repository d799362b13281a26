"""TPU sensors against the emulator: health, and maintenance events read from Cloud Audit Logs."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

from airflow_provider_resilient.clients import tpu_client
from airflow_provider_resilient.sensors.tpu import TPUMaintenanceEventSensor, TPUNodeHealthSensor

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
ZONE = "projects/test-project/locations/us-central2-b"


def make_node(node_id: str) -> str:
    operation = tpu_client().create_node(parent=ZONE, node_id=node_id, node={
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "sleep 60"}})
    return str(operation.result(timeout=30).name)


def test_health_sensor_waits_for_ready_and_fails_on_a_terminated_node(resilient_emulator):
    name = make_node("healthy")
    assert TPUNodeHealthSensor(task_id="h", node_name=name).poke({}) is True
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, "grace_seconds": 0.05})
    deadline = time.monotonic() + 30
    while tpu_client().get_node(name=name).state.name != "TERMINATED" and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(AirflowFailException, match="TERMINATED"):
        TPUNodeHealthSensor(task_id="h", node_name=name).poke({})


def test_maintenance_sensor_fires_on_the_audit_entry_with_its_reason(resilient_emulator):
    name = make_node("watched")
    start = datetime.now(tz=UTC).isoformat()
    sensor = TPUMaintenanceEventSensor(task_id="m", project_id="test-project", node_name=name, since=start,
                                       deferrable=True, poke_interval=0.05)
    with pytest.raises(TaskDeferred):  # nothing yet: frees the worker slot until the next look
        sensor.execute({})
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, "grace_seconds": 0.05,
                                  "terminate_reason": "Host error"})
    deadline = time.monotonic() + 30
    result = sensor.poke({})
    while not result.is_done and time.monotonic() < deadline:
        time.sleep(0.05)
        result = sensor.poke({})
    (event,) = result.xcom_value
    assert event == {"method": "tpu.nodes.terminate", "terminate_reason": "Host error",
                     "timestamp": event["timestamp"], "failure_class": "maintenance_event"}


def test_async_tpu_hook_reads_the_node_and_the_workers_reports(resilient_emulator):
    import asyncio

    from airflow_provider_resilient.hooks.tpu import AsyncResilientTPUHook

    name = make_node("async-read")
    resilient_emulator.tpu.nodes[name].workers[0].metadata.guest_attributes["resilient/status"] = "running"

    async def read() -> tuple[str, list[dict[str, str]]]:
        hook = AsyncResilientTPUHook()
        return (await hook.get_node(name)).state.name, await hook.worker_reports(name)

    state, reports = asyncio.run(read())
    assert state == "READY" and reports == [{"status": "running"}]
