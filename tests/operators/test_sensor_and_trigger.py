"""CustomJobStateSensor and CustomJobTrigger against the emulator (the trigger's loop run with asyncio)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_provider_resilient.compat import AirflowFailException, TaskDeferred
from airflow_provider_resilient.sensors.vertex_ai import CustomJobStateSensor
from airflow_provider_resilient.testing.emulator_clients import vertex_job_client
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


def test_a_transient_unavailable_while_a_trigger_polls_alone_does_not_end_it(resilient_emulator, recorded_sleeps):
    """The hook's retries wait its backoff (recorded, not waited: ``recorded_sleeps``) and the trigger goes on."""
    name = create("print('ok')")
    resilient_emulator.add_fault({"kind": "unavailable", "calls": "get", "match": {"nth": 1}, "times": 2})
    event = first_event(CustomJobTrigger(name, poll_interval=0.02, shared_poller=False))
    assert event["status"] == "terminal" and event["job"]["state"] == "JOB_STATE_SUCCEEDED"
    codes = [c.code for c in resilient_emulator.calls.list("GetCustomJob")]
    assert codes[:3] == ["UNAVAILABLE", "UNAVAILABLE", "OK"]  # retried by the hook, not reported
    backoffs = [w for w in recorded_sleeps if w != 0.02]  # the trigger's own waits are its poll_interval
    assert len(backoffs) == 2 and 1 <= backoffs[0] <= 2 <= backoffs[1] <= 3  # exponential, jittered
    assert resilient_emulator.calls.count("ListCustomJobs") == 0  # polled alone


def test_trigger_on_kill_closes_the_channels_it_cancelled_through(resilient_emulator, monkeypatch):
    """The kill runs in a worker thread with a hook of its own (the triggerer lives long: it must not keep
    a channel per kill)."""
    from airflow_provider_resilient.hooks.vertex_ai import ResilientVertexAIHook

    name = create("import time; time.sleep(60)")
    closed = []
    real_close = ResilientVertexAIHook.close

    def close(self) -> None:
        closed.append(sorted(self._clients))
        real_close(self)

    monkeypatch.setattr(ResilientVertexAIHook, "close", close)
    asyncio.run(CustomJobTrigger(name, cancel_on_kill=True).on_kill())
    assert resilient_emulator.wait_for_state(name, ["JOB_STATE_CANCELLED"], 30) == "JOB_STATE_CANCELLED"
    assert closed == [["us-central1"]]  # the one client the cancel made, closed


def test_trigger_on_kill_gives_up_within_the_triggerers_on_kill_timeout(monkeypatch):
    """``[triggerer] on_kill_timeout`` (Airflow 3.3, default 30 s) bounds on_kill: a cancel call that never
    answers is abandoned within its share (its retries are bounded by it too), and the event loop goes on."""
    import threading

    monkeypatch.setenv("AIRFLOW__TRIGGERER__ON_KILL_TIMEOUT", "1")
    answer = threading.Event()
    made = []

    class NeverAnswers:
        def __init__(self, *args: Any, api_retry_seconds: float, **kwargs: Any) -> None:
            self.api_retry_seconds = api_retry_seconds
            self.closed = threading.Event()
            made.append(self)

        def cancel_job(self, name: str) -> None:
            answer.wait(60)

        def close(self) -> None:
            self.closed.set()

    trigger = CustomJobTrigger(f"{PARENT}/customJobs/1", cancel_on_kill=True)
    monkeypatch.setattr("airflow_provider_resilient.hooks.vertex_ai.ResilientVertexAIHook", NeverAnswers)
    loop = asyncio.new_event_loop()  # not asyncio.run: it would wait for the abandoned thread at its end
    try:
        loop.run_until_complete(asyncio.wait_for(trigger.on_kill(), 10))  # a bound on the test, not a measure
    finally:
        answer.set()
        loop.close()
    (hook,) = made
    assert hook.api_retry_seconds == pytest.approx(0.8)  # retries stop within the share
    assert hook.closed.wait(10)  # closed once the call returned


def test_the_watch_trigger_holds_an_early_event_until_fire_not_before(resilient_emulator, recorded_sleeps):
    """``fire_not_before`` (operators.base.DEFAULT_MIN_DEFER_SECONDS): a job that ended at once is reported
    only once that moment has come, so Airflow's stale executor event cannot fail the resumed try."""
    name = create("print('quick')")
    resilient_emulator.wait_for_state(name, ["JOB_STATE_SUCCEEDED"], 30)
    waits = recorded_sleeps
    trigger = CustomJobTrigger(name, poll_interval=0.05, shared_poller=False, fire_not_before=1_000.0 + 7.5)
    trigger._clock = lambda: 1_000.0
    event = first_event(trigger)
    assert event["status"] == "terminal" and waits[-1] == 7.5
    unguarded = CustomJobTrigger(name, poll_interval=0.05, shared_poller=False)
    waits.clear()
    assert first_event(unguarded)["status"] == "terminal" and 7.5 not in waits
