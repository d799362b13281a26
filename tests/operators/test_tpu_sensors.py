"""TPU sensors against the emulator: health (seed 004: unhealthy hardware is not waited for), and maintenance
and preemption events read from Cloud Audit Logs (seed 002), poking or deferred.

On stepped time (``tests/tpu_time.py``): a node's creation, a repair and the deferred sensor's wait between
pokes (its ``DateTimeTrigger``) move the emulator's manual clock instead of passing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_provider_resilient.compat import AirflowFailException, TaskDeferred
from airflow_provider_resilient.hooks.tpu import ResilientTPUHook
from airflow_provider_resilient.sensors.tpu import TPUMaintenanceEventSensor, TPUNodeHealthSensor
from airflow_provider_resilient.testing.emulator_clients import tpu_client

from ..tpu_time import STEPPED, PlatformTime

pytestmark = STEPPED
ZONE = "projects/test-project/locations/us-central2-b"
#: The deferred sensors' ``poke_interval``: platform seconds, stepped.
POKE = 30.0


@pytest.fixture
def platform_time(resilient_emulator: Any) -> PlatformTime:
    """The emulator's manual clock, stepped by the test (the sensors read the platform, not its clock)."""
    return PlatformTime(resilient_emulator)


def make_node(node_id: str, platform_time: PlatformTime, *, wait: bool = True) -> str:
    hook = ResilientTPUHook(sleep=platform_time.sleep)
    operation = hook.call(lambda: hook.client().create_node(parent=ZONE, node_id=node_id, node={
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "sleep 60"}}, retry=None))
    if wait:
        hook.wait_operation(operation, 3600)
    return f"{ZONE}/nodes/{node_id}"


def wait_for(name: str, predicate: Any, platform_time: PlatformTime) -> None:
    """Step the platform's time until ``predicate(node)`` holds."""
    platform_time.advance_until(lambda: predicate(tpu_client().get_node(name=name)))


def until_done(sensor: Any, context: dict, platform_time: PlatformTime) -> Any:
    """Resume a deferred sensor as the triggerer would -- its ``DateTimeTrigger`` stepped: the platform's time
    moves on by ``poke_interval`` -- until it returns (bounded: an hour of platform time)."""
    for _ in range(int(3600 / sensor.poke_interval)):
        try:
            return sensor.execute_complete(context, event=datetime.now(tz=UTC))
        except TaskDeferred:
            platform_time.sleep(sensor.poke_interval)
    raise AssertionError("the sensor never fired")


def test_health_sensor_waits_for_ready_and_fails_on_a_terminated_node(resilient_emulator, platform_time):
    name = make_node("healthy", platform_time)
    assert TPUNodeHealthSensor(task_id="h", node_name=name).poke({}) is True
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, "grace_seconds": 5})
    wait_for(name, lambda n: n.state.name == "TERMINATED", platform_time)
    with pytest.raises(AirflowFailException, match="TERMINATED"):
        TPUNodeHealthSensor(task_id="h", node_name=name).poke({})


@pytest.mark.parametrize(("health", "symptoms"), [
    ("TIMEOUT", []), ("UNHEALTHY_TENSORFLOW", []), ("UNHEALTHY_TENSORFLOW", ["LOW_MEMORY"])])
def test_health_sensor_fails_clearly_on_an_unhealthy_node_or_keeps_waiting_when_asked(
        resilient_emulator, platform_time, health, symptoms):
    name = make_node("sick", platform_time)
    resilient_emulator.add_fault({"kind": "unhealthy", "health": health, "symptoms": symptoms})
    wait_for(name, lambda n: n.health.name == health, platform_time)
    with pytest.raises(AirflowFailException) as failed:
        TPUNodeHealthSensor(task_id="h", node_name=name).poke({})
    assert f"is READY (health {health}, symptoms {symptoms})" in str(failed.value)
    assert "unhealthy" in str(failed.value)
    assert TPUNodeHealthSensor(task_id="h", node_name=name, fail_on_unhealthy=False).poke({}) is False


def test_health_sensor_waits_out_a_maintenance_event(resilient_emulator, platform_time):
    name = make_node("repairing", platform_time)
    resilient_emulator.add_fault({"kind": "maintenance", "grace_seconds": 5})
    wait_for(name, lambda n: n.state.name == "REPAIRING", platform_time)
    assert TPUNodeHealthSensor(task_id="h", node_name=name).poke({}) is False  # seed 002: most recover
    wait_for(name, lambda n: n.state.name == "READY", platform_time)  # after the 300 s repair
    assert TPUNodeHealthSensor(task_id="h", node_name=name).poke({}) is True


def test_deferrable_health_sensor_defers_until_the_node_is_ready(resilient_emulator, platform_time):
    name = make_node("booting", platform_time, wait=False)
    sensor = TPUNodeHealthSensor(task_id="h", node_name=name, deferrable=True, poke_interval=POKE)
    with pytest.raises(TaskDeferred) as deferred:  # CREATING: frees the worker slot until the next look
        sensor.execute({})
    assert deferred.value.method_name == "execute_complete"
    assert until_done(sensor, {}, platform_time) is None
    assert tpu_client().get_node(name=name).state.name == "READY"


@pytest.mark.parametrize(("fault", "expected"), [
    ({"kind": "maintenance", "recover": False, "terminate_reason": "Host error"},
     {"method": "tpu.nodes.terminate", "terminate_reason": "Host error", "failure_class": "maintenance_event"}),
    ({"kind": "preemption"},
     {"method": "tpu.nodes.terminate", "terminate_reason": "Spot TPU preempted", "failure_class": "preemption"}),
], ids=["maintenance", "preemption"])
def test_deferred_maintenance_sensor_fires_on_the_audit_entry_with_its_reason(resilient_emulator, platform_time,
                                                                              fault, expected):
    name = make_node("watched", platform_time)
    start = datetime.fromtimestamp(platform_time.now() - 1, tz=UTC).isoformat()
    sensor = TPUMaintenanceEventSensor(task_id="m", project_id="test-project", node_name=name, since=start,
                                       deferrable=True, poke_interval=POKE, lookback_seconds=0)
    with pytest.raises(TaskDeferred):  # nothing yet: frees the worker slot until the next look
        sensor.execute({})
    resilient_emulator.add_fault({**fault, "grace_seconds": 5})
    (event,) = until_done(sensor, {}, platform_time)
    assert event == {**expected, "timestamp": event["timestamp"]}
    assert datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")) >= datetime.fromisoformat(start)


def test_the_audit_hook_reads_the_system_event_and_the_admin_activity_logs(resilient_emulator, platform_time):
    from airflow_provider_resilient.hooks.tpu import AuditLogHook

    name, since = f"{ZONE}/nodes/audited", datetime.fromtimestamp(platform_time.now(), tz=UTC) - timedelta(seconds=5)
    for log, method in [("cloudaudit.googleapis.com%2Fsystem_event", "tpu.nodes.restart"),
                        ("cloudaudit.googleapis.com%2Factivity", "google.cloud.tpu.v2.Tpu.CreateNode"),
                        ("cloudaudit.googleapis.com%2Fdata_access", "google.cloud.tpu.v2.Tpu.GetNode")]:
        resilient_emulator.logging.add_audit_entry("test-project", service_name="tpu.googleapis.com",
                                                   method_name=method, resource_name=name, log=log)
    entries = AuditLogHook().node_events("test-project", name, since)
    assert [e["protoPayload"]["methodName"] for e in entries] == ["tpu.nodes.restart",
                                                                   "google.cloud.tpu.v2.Tpu.CreateNode"]


def test_async_tpu_hook_reads_the_node_and_the_workers_reports(resilient_emulator, platform_time):
    import asyncio

    from airflow_provider_resilient.hooks.tpu import AsyncResilientTPUHook

    name = make_node("async-read", platform_time)
    resilient_emulator.tpu.nodes[name].workers[0].metadata.guest_attributes["resilient/status"] = "running"

    async def read() -> tuple[str, list[dict[str, str]]]:
        hook = AsyncResilientTPUHook()
        try:
            return (await hook.get_node(name)).state.name, await hook.worker_reports(name)
        finally:
            await hook.close()

    state, reports = asyncio.run(read())
    assert state == "READY" and reports == [{"status": "running"}]
