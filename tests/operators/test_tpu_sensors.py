"""TPU sensors against the emulator: health (seed 004: unhealthy hardware is not waited for), and maintenance
and preemption events read from Cloud Audit Logs (seed 002), poking or deferred."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

from airflow_provider_resilient.clients import tpu_client
from airflow_provider_resilient.sensors.tpu import TPUMaintenanceEventSensor, TPUNodeHealthSensor

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
ZONE = "projects/test-project/locations/us-central2-b"
TIMEOUT = 30.0  # seconds: a bound on every wait, never a measured time


def make_node(node_id: str, *, wait: bool = True) -> str:
    operation = tpu_client().create_node(parent=ZONE, node_id=node_id, node={
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "sleep 60"}})
    if wait:
        operation.result(timeout=TIMEOUT)
    return f"{ZONE}/nodes/{node_id}"


def wait_for(name: str, predicate: Any) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate(tpu_client().get_node(name=name)):
        assert time.monotonic() < deadline, f"{name} never got there"
        time.sleep(0.02)


def until_done(sensor: Any, context: dict) -> Any:
    """Resume a deferred sensor as the triggerer would, until it returns (bounded by TIMEOUT)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            return sensor.execute_complete(context, event=datetime.now(tz=UTC))
        except TaskDeferred:
            assert time.monotonic() < deadline, "the sensor never fired"
            time.sleep(0.05)


def test_health_sensor_waits_for_ready_and_fails_on_a_terminated_node(resilient_emulator):
    name = make_node("healthy")
    assert TPUNodeHealthSensor(task_id="h", node_name=name).poke({}) is True
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, "grace_seconds": 0.05})
    wait_for(name, lambda n: n.state.name == "TERMINATED")
    with pytest.raises(AirflowFailException, match="TERMINATED"):
        TPUNodeHealthSensor(task_id="h", node_name=name).poke({})


@pytest.mark.parametrize(("health", "symptoms"), [
    ("TIMEOUT", []), ("UNHEALTHY_TENSORFLOW", []), ("UNHEALTHY_TENSORFLOW", ["LOW_MEMORY"])])
def test_health_sensor_fails_clearly_on_an_unhealthy_node_or_keeps_waiting_when_asked(
        resilient_emulator, health, symptoms):
    name = make_node("sick")
    resilient_emulator.add_fault({"kind": "unhealthy", "health": health, "symptoms": symptoms})
    wait_for(name, lambda n: n.health.name == health)
    with pytest.raises(AirflowFailException) as failed:
        TPUNodeHealthSensor(task_id="h", node_name=name).poke({})
    assert f"is READY (health {health}, symptoms {symptoms})" in str(failed.value)
    assert "unhealthy" in str(failed.value)
    assert TPUNodeHealthSensor(task_id="h", node_name=name, fail_on_unhealthy=False).poke({}) is False


def test_health_sensor_waits_out_a_maintenance_event(resilient_emulator):
    name = make_node("repairing")
    resilient_emulator.add_fault({"kind": "maintenance", "grace_seconds": 0.05})
    wait_for(name, lambda n: n.state.name == "REPAIRING")
    assert TPUNodeHealthSensor(task_id="h", node_name=name).poke({}) is False  # seed 002: most recover
    wait_for(name, lambda n: n.state.name == "READY")
    assert TPUNodeHealthSensor(task_id="h", node_name=name).poke({}) is True


def test_deferrable_health_sensor_defers_until_the_node_is_ready(resilient_emulator):
    name = make_node("booting", wait=False)
    sensor = TPUNodeHealthSensor(task_id="h", node_name=name, deferrable=True, poke_interval=0.05)
    with pytest.raises(TaskDeferred) as deferred:  # CREATING: frees the worker slot until the next look
        sensor.execute({})
    assert deferred.value.method_name == "execute_complete"
    assert until_done(sensor, {}) is None
    assert tpu_client().get_node(name=name).state.name == "READY"


@pytest.mark.parametrize(("fault", "expected"), [
    ({"kind": "maintenance", "recover": False, "terminate_reason": "Host error"},
     {"method": "tpu.nodes.terminate", "terminate_reason": "Host error", "failure_class": "maintenance_event"}),
    ({"kind": "preemption"},
     {"method": "tpu.nodes.terminate", "terminate_reason": "Spot TPU preempted", "failure_class": "preemption"}),
], ids=["maintenance", "preemption"])
def test_deferred_maintenance_sensor_fires_on_the_audit_entry_with_its_reason(resilient_emulator, fault, expected):
    name = make_node("watched")
    start = (datetime.now(tz=UTC) - timedelta(seconds=1)).isoformat()
    sensor = TPUMaintenanceEventSensor(task_id="m", project_id="test-project", node_name=name, since=start,
                                       deferrable=True, poke_interval=0.05, lookback_seconds=0)
    with pytest.raises(TaskDeferred):  # nothing yet: frees the worker slot until the next look
        sensor.execute({})
    resilient_emulator.add_fault({**fault, "grace_seconds": 0.05})
    (event,) = until_done(sensor, {})
    assert event == {**expected, "timestamp": event["timestamp"]}
    assert datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")) >= datetime.fromisoformat(start)


def test_the_audit_hook_reads_the_system_event_and_the_admin_activity_logs(resilient_emulator):
    from airflow_provider_resilient.hooks.tpu import AuditLogHook

    name, since = f"{ZONE}/nodes/audited", datetime.now(tz=UTC) - timedelta(seconds=5)
    for log, method in [("cloudaudit.googleapis.com%2Fsystem_event", "tpu.nodes.restart"),
                        ("cloudaudit.googleapis.com%2Factivity", "google.cloud.tpu.v2.Tpu.CreateNode"),
                        ("cloudaudit.googleapis.com%2Fdata_access", "google.cloud.tpu.v2.Tpu.GetNode")]:
        resilient_emulator.logging.add_audit_entry("test-project", service_name="tpu.googleapis.com",
                                                   method_name=method, resource_name=name, log=log)
    entries = AuditLogHook().node_events("test-project", name, since)
    assert [e["protoPayload"]["methodName"] for e in entries] == ["tpu.nodes.restart",
                                                                   "google.cloud.tpu.v2.Tpu.CreateNode"]


def test_async_tpu_hook_reads_the_node_and_the_workers_reports(resilient_emulator):
    import asyncio

    from airflow_provider_resilient.hooks.tpu import AsyncResilientTPUHook

    name = make_node("async-read")
    resilient_emulator.tpu.nodes[name].workers[0].metadata.guest_attributes["resilient/status"] = "running"

    async def read() -> tuple[str, list[dict[str, str]]]:
        hook = AsyncResilientTPUHook()
        try:
            return (await hook.get_node(name)).state.name, await hook.worker_reports(name)
        finally:
            await hook.close()

    state, reports = asyncio.run(read())
    assert state == "READY" and reports == [{"status": "running"}]
