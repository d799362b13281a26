"""The operator's shell without a scheduler: a dict-backed task state store, the real clients, the emulator.

Covers the task-retry path (the state comes back from the store), both deferral resumptions, and the
checks made before anything is submitted.
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

from airflow_provider_resilient.operators.vertex_ai import STATE_KEY, ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, RetryPolicy

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)


class Store:
    """Shaped like Airflow's TaskStateStoreAccessor (JSON values, no None)."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def set(self, key: str, value: Any, **_: Any) -> None:
        assert value is not None
        self.data[key] = value


class TI:
    map_index = -1

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


class Killed(BaseException):
    """The worker process dying (not an Exception: nothing in the operator may catch it)."""


def context(store: Store | None = None) -> dict[str, Any]:
    return {"task_state_store": store or Store(), "ti": TI(), "run_id": "manual__2026-01-01T00:00:00+00:00"}


def operator(code: str = "print('ok')", **kwargs: Any) -> ResilientCustomJobOperator:
    defaults: dict[str, Any] = dict(
        task_id="train", project_id="test-project", region="us-central1", display_name="unit",
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "python:3.11", "command": ["python", "-c", code]}}],
        base_output_dir="gs://unit-bucket/run", deferrable=False, poll_interval=0.05,
        resilience_policy=RetryPolicy(backoff=Backoff(initial_seconds=0.05, max_seconds=0.1)))
    defaults.update(kwargs)
    return ResilientCustomJobOperator(**defaults)


def test_a_retried_task_continues_from_the_task_state_store(resilient_emulator):
    ctx = context()
    first = operator("import time; time.sleep(2)")
    polls = []

    def dying_sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 3:
            raise Killed

    first._sleep = dying_sleep
    with pytest.raises(Killed):
        first.execute(ctx)
    assert ctx["task_state_store"].data[STATE_KEY]["phase"] == "running"

    second = operator("import time; time.sleep(2)")
    result = second.execute(ctx)
    assert len(resilient_emulator.calls.list("CreateCustomJob")) == 1
    assert resilient_emulator.calls.count("ListCustomJobs") == 1  # only before the one create
    assert result["state"] == "JOB_STATE_SUCCEEDED" and len(result["attempts"]) == 1
    assert ctx["task_state_store"].data[STATE_KEY]["phase"] == "succeeded"


def test_a_cleared_successful_task_reruns_nothing_unless_asked(resilient_emulator):
    ctx = context()
    operator().execute(ctx)
    again = operator().execute(ctx)
    assert again["job_name"] and len(resilient_emulator.calls.list("CreateCustomJob")) == 1
    operator(rerun_after_success=True).execute(ctx)
    assert len(resilient_emulator.calls.list("CreateCustomJob")) == 2


def test_a_cleared_failed_task_resumes_with_fresh_budgets(resilient_emulator):
    ctx = context()
    with pytest.raises(AirflowFailException, match="permanent-user-error"):
        operator("raise SystemExit(1)").execute(ctx)
    result = operator().execute(ctx)  # the user fixed the code and cleared the task
    assert [a["number"] for a in result["attempts"]] == [1, 2]
    assert ctx["task_state_store"].data[STATE_KEY]["segment_start"] == 1


@pytest.mark.parametrize("with_event", [True, False], ids=["trigger-event", "no-event"])
def test_deferrable_resumes_from_the_trigger_event_or_by_reading_the_job(resilient_emulator, with_event):
    from airflow_provider_resilient.hooks.vertex_ai import ResilientVertexAIHook
    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger, job_summary

    ctx = context()
    op = operator(deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(ctx)
    trigger = deferred.value.trigger
    assert isinstance(trigger, CustomJobTrigger) and deferred.value.method_name == "execute_complete"
    classpath, kwargs = trigger.serialize()
    assert CustomJobTrigger(**kwargs).serialize() == (classpath, kwargs)
    job_name = ctx["task_state_store"].data[STATE_KEY]["job_name"]
    resilient_emulator.wait_for_state(job_name, ["JOB_STATE_SUCCEEDED"], 30)
    event = {"status": "terminal", "job": job_summary(ResilientVertexAIHook().get_custom_job(job_name))}
    result = operator(deferrable=True).execute_complete(ctx, event=event if with_event else None)
    assert result["job_name"] == job_name
    assert ctx["ti"].xcom["_link_VertexAICustomJobLink"].endswith(f"{job_name.rsplit('/', 1)[1]}/cpu?project="
                                                                  "test-project")


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"region": "US Central"}, "region"),
    ({"project_id": "P"}, "project_id"),
    ({"worker_pool_specs": []}, "worker_pool_specs"),
    ({"worker_pool_specs": [{"replica_count": 2, "machine_spec": {"machine_type": "n1"},
                             "container_spec": {"image_uri": "x"}}]}, "worker_pool_specs[0].replica_count"),
    ({"worker_pool_specs": [{"replica_count": 1, "container_spec": {"image_uri": "x"}}]},
     "worker_pool_specs[0].machine_spec.machine_type"),
    ({"worker_pool_specs": [{"replica_count": 1, "machine_spec": {"machine_type": "n1"},
                             "container_spec": {"command": ["python"]}}]},
     "worker_pool_specs[0].container_spec.image_uri"),
    ({"labels": {"Team": "ml"}}, "labels['Team']"),
    ({"labels": {"team": "x" * 64}}, "labels['team']"),
    ({"labels": {"resilient-attempt": "1"}}, "labels['resilient-attempt']"),
    ({"strategy": "CHEAP"}, "scheduling.strategy"),
    ({"max_wait_duration": 60}, "scheduling.max_wait_duration"),
    ({"base_output_dir": "/tmp/out"}, "base_output_dir"),
    ({"base_output_dir": None}, "checkpoint_dir"),
    ({"fallbacks": [{"region": "Europe"}]}, "fallbacks[0].region"),
])
def test_bad_arguments_fail_before_anything_is_submitted(resilient_emulator, kwargs, field):
    with pytest.raises(AirflowFailException) as info:
        operator(**kwargs).execute(context())
    assert f"{field}:" in str(info.value)
    assert resilient_emulator.calls.list() == []


def test_the_operator_module_imports_no_google_library():
    import subprocess
    import sys

    code = ("import sys, airflow_provider_resilient.operators.vertex_ai, airflow_provider_resilient.sensors.vertex_ai,"
            " airflow_provider_resilient.operators.tpu, airflow_provider_resilient.sensors.tpu;"
            "bad = [m for m in sys.modules if m.startswith(('google.cloud.', 'google.api_core', 'grpc'))];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(("map_index", "expected"), [(None, -1), (-1, -1), (0, 0), (3, 3)])
def test_map_index_zero_is_kept_apart_from_unmapped(map_index, expected):
    ti = TI()
    ti.map_index = map_index
    assert ResilientCustomJobOperator._map_index({"ti": ti}) == expected


def test_a_hung_attempt_is_cancelled_and_resubmitted_from_its_checkpoint(resilient_emulator):
    from pathlib import Path

    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    resilient_emulator.add_fault({"kind": "hang", "at_step": 20, "match": {"nth": 1}})  # SIGSTOP at step 20
    op = operator(hang_timeout=4.0, base_output_dir="gs://unit-bucket/hang")
    op.worker_pool_specs[0]["container_spec"]["command"] = ["python", workload, "--steps", "60", "--every", "10",
                                                            "--step-seconds", "0.02"]
    ctx = context()
    result = op.execute(ctx)
    first, second = result["attempts"]
    incident = first["incidents"][0]
    assert incident["failure"]["failure_class"] == "hang"
    assert "no new checkpoint past step 20" in incident["failure"]["message"]
    assert incident["decision"]["action"] == "resubmit"
    assert second["resumed_from_step"] == 20 and result["checkpoint"]["step"] == 60
    hung = resilient_emulator.wait_for_state(first["resource_name"], ["JOB_STATE_CANCELLED"], 30)
    assert hung == "JOB_STATE_CANCELLED"  # not leaked
    goodput = ctx["ti"].xcom["goodput"]
    assert goodput["basis"] == "steps"  # checkpoint steps seen while polling
    assert goodput["detection"] >= 4.0  # the hang is known only after hang_timeout
    assert "checkpoints every" in goodput["checkpoint_advice"]["summary"]


def test_hang_timeout_must_exceed_the_poll_interval():
    with pytest.raises(ValueError, match="hang_timeout"):
        operator(hang_timeout=0.01)


def test_deferred_the_trigger_detects_the_hang_and_the_operator_resubmits(resilient_emulator):
    import asyncio
    from pathlib import Path

    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    resilient_emulator.add_fault({"kind": "hang", "at_step": 20, "match": {"nth": 1}})
    ctx = context()

    def deferrable_operator() -> ResilientCustomJobOperator:
        op = operator(deferrable=True, hang_timeout=4.0, base_output_dir="gs://unit-bucket/hang-deferred")
        op.worker_pool_specs[0]["container_spec"]["command"] = ["python", workload, "--steps", "40", "--every",
                                                                "10", "--step-seconds", "0.02"]
        return op

    with pytest.raises(TaskDeferred) as deferred:
        deferrable_operator().execute(ctx)
    trigger = deferred.value.trigger
    assert trigger.hang_timeout == 4.0 and trigger.checkpoint_dir == "gs://unit-bucket/hang-deferred/checkpoints/"
    assert CustomJobTrigger(**trigger.serialize()[1]).serialize() == trigger.serialize()

    async def first_event(t: CustomJobTrigger) -> dict:
        async for event in t.run():
            return event.payload
        raise AssertionError("no event")

    event = asyncio.run(first_event(trigger))
    assert event["status"] == "hang" and "no new checkpoint past step 20" in event["hang"]
    assert [s for _, s in event["steps"]][-1] == 20
    hung = ctx["task_state_store"].data[STATE_KEY]["job_name"]
    assert resilient_emulator.wait_for_state(hung, ["JOB_STATE_CANCELLED"], 30) == "JOB_STATE_CANCELLED"
    with pytest.raises(TaskDeferred) as deferred:  # decided: resubmit after the backoff, deferred
        deferrable_operator().execute_complete(ctx, event=event)
    assert not isinstance(deferred.value.trigger, CustomJobTrigger)  # the backoff's DateTimeTrigger
    with pytest.raises(TaskDeferred) as deferred:  # woke up: resubmitted from step 20, watching again
        deferrable_operator().execute_complete(ctx, event=None)
    assert ctx["task_state_store"].data[STATE_KEY]["job_name"] != hung
    last = asyncio.run(first_event(deferred.value.trigger))
    assert last["status"] == "terminal" and last["job"]["state"] == "JOB_STATE_SUCCEEDED"
    result = deferrable_operator().execute_complete(ctx, event=last)
    first, second = result["attempts"]
    assert first["incidents"][0]["failure"]["failure_class"] == "hang"
    assert second["resumed_from_step"] == 20
    assert ctx["ti"].xcom["goodput"]["basis"] == "steps"  # reports of both deferrals, kept in the store
    assert len(ctx["task_state_store"].data["resilient_step_reports"]) >= 4
