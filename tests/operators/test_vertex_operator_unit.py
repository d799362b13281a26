"""The operator's shell without a scheduler: a dict-backed task state store, the real clients, the emulator.

Covers the task-retry path (the state comes back from the store), both deferral resumptions, and the
checks made before anything is submitted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_resilient.compat import AirflowFailException, TaskDeferred
from airflow_provider_resilient.operators.vertex_ai import STATE_KEY, ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, RetryPolicy

from ..platform_time import MANUAL, PlatformTime, manual

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

    def __init__(self, try_number: int = 1, max_tries: int = 0) -> None:
        self.xcom: dict[str, Any] = {}
        self.try_number, self.max_tries = try_number, max_tries

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


class Killed(BaseException):
    """The worker process dying (not an Exception: nothing in the operator may catch it)."""


def context(store: Store | None = None, ti: TI | None = None) -> dict[str, Any]:
    return {"task_state_store": store or Store(), "ti": ti or TI(), "run_id": "manual__2026-01-01T00:00:00+00:00"}


def operator(code: str = "print('ok')", **kwargs: Any) -> ResilientCustomJobOperator:
    defaults: dict[str, Any] = dict(
        task_id="train", project_id="test-project", region="us-central1", display_name="unit",
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "python:3.11", "command": ["python", "-c", code]}}],
        base_output_dir="gs://unit-bucket/run", deferrable=False, poll_interval=0.05, min_defer_seconds=0.0,
        resilience_policy=RetryPolicy(backoff=Backoff(initial_seconds=0.05, max_seconds=0.1),
                                      failover_backoff=Backoff(initial_seconds=0.05, max_seconds=0.1)))
    defaults.update(kwargs)
    return ResilientCustomJobOperator(**defaults)


def dies_at_poll(n: int) -> Callable[[float], None]:
    """An operator's ``_sleep`` whose ``n``-th call is the worker process dying (:class:`Killed`)."""
    polls: list[float] = []

    def dying_sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == n:
            raise Killed

    return dying_sleep


def runs_until(go: Path) -> str:
    """A replica's code that runs until the file ``go`` exists (the test says when the job may end)."""
    return f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)"


def test_a_retried_task_continues_from_the_task_state_store(resilient_emulator, tmp_path):
    ctx = context()
    first = operator(runs_until(tmp_path / "go"))
    first._sleep = dies_at_poll(3)
    with pytest.raises(Killed):
        first.execute(ctx)
    assert ctx["task_state_store"].data[STATE_KEY]["phase"] == "running"

    second = operator(runs_until(tmp_path / "go"))
    (tmp_path / "go").touch()
    result = second.execute(ctx)
    assert len(resilient_emulator.calls.list("CreateCustomJob")) == 1
    # only before the one create: the attempt's own labels (a lost reply), then other runs' live jobs
    # writing the same checkpoint directory
    assert resilient_emulator.calls.count("ListCustomJobs") == 2
    assert result["state"] == "JOB_STATE_SUCCEEDED" and len(result["attempts"]) == 1
    assert ctx["task_state_store"].data[STATE_KEY]["phase"] == "succeeded"


@pytest.mark.parametrize(("state", "cancelled"), [("up_for_retry", False), ("failed", True)])
def test_a_killed_task_process_cancels_its_job_only_when_its_task_instance_is_over(resilient_emulator, tmp_path,
                                                                                  state, cancelled):
    """Airflow stops a task process whose heartbeats did not reach the API server in time and retries the task:
    the old try's on_kill must leave the job to the next try (up_for_retry), and cancel it when the task instance
    was marked failed."""
    ctx, asked = context(), []
    op = operator(runs_until(tmp_path / "go"))

    def task_states(dag_id: str, run_ids: list[str]) -> dict:
        asked.append((dag_id, run_ids))
        return {run_ids[0]: {"train": state}}

    op.read_task_states = task_states  # what Airflow's API server answers (RuntimeTaskInstance)
    op._sleep = dies_at_poll(3)
    with pytest.raises(Killed):
        op.execute(ctx)
    op.on_kill()
    (tmp_path / "go").touch()
    assert asked == [("adhoc_airflow", [ctx["run_id"]])]
    assert resilient_emulator.calls.count("CancelCustomJob") == int(cancelled)


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


@pytest.mark.parametrize("trigger_cancelled_first", [True, False], ids=["on_kill-cancelled-it", "still-running"])
def test_a_clear_of_a_deferred_task_ends_the_attempt_and_resumes_without_a_failure(resilient_emulator, tmp_path,
                                                                                    trigger_cancelled_first):
    import asyncio

    go = tmp_path / "go"
    code = runs_until(go)
    ctx = context()
    with pytest.raises(TaskDeferred) as deferred:  # try 1 deferred, attempt 1 RUNNING
        operator(code, deferrable=True).execute(ctx)
    job = deferred.value.trigger.job_name
    if trigger_cancelled_first:  # Airflow calls the old trigger's on_kill on a Clear
        asyncio.run(deferred.value.trigger.on_kill())
    # Try 2 is the first after the Clear: max_tries was raised to try_number + retries (retries=0 here).
    cleared = context(ctx["task_state_store"], TI(try_number=2, max_tries=1))
    go.touch()
    result = operator(code).execute(cleared)
    creates = resilient_emulator.calls.list("CreateCustomJob")
    assert len(creates) == 2 and resilient_emulator.calls.count("CancelCustomJob") >= 1
    first, second = result["attempts"]
    assert first["resource_name"] == job and first["ended_by"] == "clear" and not first.get("incidents")
    assert second["resource_name"] != job and result["state"] == "JOB_STATE_SUCCEEDED"
    assert ctx["task_state_store"].data[STATE_KEY]["segment_start"] == 1


def test_an_airflow_retry_of_a_deferred_task_reattaches_instead(resilient_emulator, tmp_path):
    ctx = context()
    with pytest.raises(TaskDeferred):
        operator("print('ok')", deferrable=True, retries=2).execute(ctx)
    retry = context(ctx["task_state_store"], TI(try_number=2, max_tries=2))  # a retry leaves max_tries alone
    result = operator("print('ok')", retries=2).execute(retry)
    assert len(resilient_emulator.calls.list("CreateCustomJob")) == 1
    assert resilient_emulator.calls.count("CancelCustomJob") == 0 and len(result["attempts"]) == 1


@pytest.mark.parametrize("with_event", [True, False], ids=["trigger-event", "no-event"])
def test_deferrable_resumes_from_the_trigger_event_or_by_reading_the_job(resilient_emulator, with_event):
    from airflow_provider_resilient.backends.vertex import job_summary
    from airflow_provider_resilient.hooks.vertex_ai import ResilientVertexAIHook
    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

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
    ({"worker_pool_specs": [{"replica_count": 2, "machine_spec": {"machine_type": "n1-standard-4"},
                             "container_spec": {"image_uri": "x"}}]}, "worker_pool_specs[0].replica_count"),
    ({"worker_pool_specs": [{"replica_count": 1, "container_spec": {"image_uri": "x"}}]},
     "worker_pool_specs[0].machine_spec"),
    ({"worker_pool_specs": [{"replica_count": 1, "machine_spec": {"machine_type": "n1-standard-4"},
                             "container_spec": {"command": ["python"]}}]},
     "worker_pool_specs[0].container_spec.image_uri"),
    ({"worker_pool_specs": [{"replica_count": 1, "machine_spec": {"machine_type": "n1-standard-4"},
                             "container_spec": {"image_uri": "python:3.11"}}]},
     "worker_pool_specs[0].container_spec.command"),
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
    if field.endswith(".command"):  # the fix is in the message
        assert "['python', '-m', 'trainer.task']" in str(info.value) and "python_package_spec" in str(info.value)
    assert resilient_emulator.calls.list() == []


def test_a_python_package_pool_needs_no_command():
    from airflow_provider_resilient.specs.vertex import validate_custom_job

    validate_custom_job(project_id="test-project", region="us-central1", display_name="pkg", worker_pool_specs=[{
        "replica_count": 1, "machine_spec": {"machine_type": "n1-standard-4"},
        "python_package_spec": {"executor_image_uri": "python:3.11", "python_module": "trainer.task",
                                "package_uris": ["gs://b/trainer.tar.gz"]}}],
        base_output_dir="gs://b/run", labels={}, strategy=None, max_wait_duration=None, timeout=None, fallbacks=())


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


#: A hang timeout of platform time (the platform's clock, stepped with the operator's: tests/platform_time.py).
HANG_TIMEOUT = 60.0


@MANUAL
@pytest.mark.parametrize("read_step_logs", [True, False], ids=["logged-steps", "checkpoints"])
def test_a_hung_attempt_is_cancelled_and_resubmitted_from_its_checkpoint(resilient_emulator, read_step_logs):
    from pathlib import Path

    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    resilient_emulator.add_fault({"kind": "hang", "at_step": 20, "match": {"nth": 1}})  # SIGSTOP at step 20
    op = PlatformTime(resilient_emulator).wire(operator(
        hang_timeout=HANG_TIMEOUT, poll_interval=5.0, base_output_dir="gs://unit-bucket/hang",
        read_step_logs=read_step_logs))
    op.worker_pool_specs[0]["container_spec"]["command"] = ["python", workload, "--steps", "40", "--every", "10",
                                                            "--step-seconds", "0.02"]
    ctx = context()
    result = op.execute(ctx)
    first, second = result["attempts"]
    incident = first["incidents"][0]
    assert incident["failure"]["failure_class"] == "hang"
    # The workload prints "step N" lines: Vertex AI ships them to Cloud Logging, and the operator watches them
    # (the fault sees the step-20 save a little late: the frozen workload's last line is a step or so past it).
    expected = "logged step: no progress past step " if read_step_logs else "no new checkpoint past step 20"
    assert expected in incident["failure"]["message"]
    assert incident["decision"]["action"] == "resubmit"
    assert second["resumed_from_step"] == 20 and result["checkpoint"]["step"] == 40
    assert resilient_emulator.vertex.state_name(first["resource_name"]) == "JOB_STATE_CANCELLED"  # not leaked
    goodput = ctx["ti"].xcom["goodput"]
    assert goodput["basis"] == "steps"  # checkpoint steps seen while polling
    # The hang is known only after hang_timeout: that wait is its own bucket, apart from the looks' detection.
    assert goodput["hang_detection"] >= HANG_TIMEOUT and goodput["detection"] < HANG_TIMEOUT
    assert "checkpoints every" in goodput["checkpoint_advice"]["summary"]


#: Vertex AI's restart of a lost replica in place, platform seconds: its VM, its container's start, longer than
#: HANG_TIMEOUT (the restore of a large model takes minutes).
SLOW_RESTART = {"restart_seconds": 5 * HANG_TIMEOUT}


@manual(latencies=SLOW_RESTART)
@pytest.mark.parametrize("restart_timeout", [None, 10 * HANG_TIMEOUT], ids=["hang-timeout-only", "restart-timeout"])
def test_an_in_place_restart_longer_than_hang_timeout_is_waited_for_within_restart_timeout(resilient_emulator,
                                                                                          restart_timeout):
    """The replica's VM is lost at step 20; Vertex AI restarts it in place, 300 s of platform time without a
    logged step while hang_timeout is 60 s. With ``restart_timeout`` the operator reads the service's "The replica
    workerpool0-0 exited" entry beside the steps and waits for the restarted replica: one attempt to the end.
    Without it the restart reads as a hang: the job is cancelled and resubmitted."""
    from pathlib import Path

    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    resilient_emulator.add_fault({"kind": "worker_failure", "at_step": 20, "match": {"nth": 1}})
    op = PlatformTime(resilient_emulator).wire(operator(
        hang_timeout=HANG_TIMEOUT, restart_timeout=restart_timeout, poll_interval=5.0,
        base_output_dir="gs://unit-bucket/slow-restart"))
    op.worker_pool_specs[0]["container_spec"]["command"] = ["python", workload, "--steps", "40", "--every", "10",
                                                            "--step-seconds", "0.02"]
    result = op.execute(context())
    assert result["checkpoint"]["step"] == 40
    if restart_timeout is None:
        incident = result["attempts"][0]["incidents"][0]
        assert incident["failure"]["failure_class"] == "hang", incident
        assert "logged step: no progress past step" in incident["failure"]["message"]
        assert len(result["attempts"]) == 2
    else:
        (attempt,) = result["attempts"]
        assert not attempt.get("incidents"), attempt
        assert resilient_emulator.vertex.runs[attempt["resource_name"]].worker_restarts == {"workerpool0-0": 1}


@MANUAL
def test_a_real_hang_is_judged_by_hang_timeout_not_by_restart_timeout(resilient_emulator):
    """A workload frozen at step 20 (no replica exits): ``restart_timeout`` 600 s does not apply, the hang is
    judged by the 60 s ``hang_timeout`` and the job resubmitted from its checkpoint."""
    from pathlib import Path

    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    resilient_emulator.add_fault({"kind": "hang", "at_step": 20, "match": {"nth": 1}})
    op = PlatformTime(resilient_emulator).wire(operator(
        hang_timeout=HANG_TIMEOUT, restart_timeout=10 * HANG_TIMEOUT, poll_interval=5.0,
        base_output_dir="gs://unit-bucket/real-hang"))
    op.worker_pool_specs[0]["container_spec"]["command"] = ["python", workload, "--steps", "40", "--every", "10",
                                                            "--step-seconds", "0.02"]
    ctx = context()
    result = op.execute(ctx)
    incident = result["attempts"][0]["incidents"][0]
    assert "logged step: no progress past step" in incident["failure"]["message"]
    assert result["attempts"][1]["resumed_from_step"] == 20 and result["checkpoint"]["step"] == 40
    goodput = ctx["ti"].xcom["goodput"]
    assert HANG_TIMEOUT <= goodput["hang_detection"] < 10 * HANG_TIMEOUT, goodput  # platform seconds


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"restart_timeout": 600.0}, r"restart_timeout: needs hang_timeout and read_step_logs=True"),
    ({"restart_timeout": 600.0, "hang_timeout": 60.0, "read_step_logs": False}, r"restart_timeout: needs hang_timeout"),
    ({"restart_timeout": 30.0, "hang_timeout": 60.0}, r"restart_timeout: 30\.0 must be more than hang_timeout"),
    ({"restart_timeout": -1.0, "hang_timeout": 60.0}, r"restart_timeout: "),
])
def test_restart_timeout_is_refused_before_submit_without_what_it_needs(kwargs, message):
    with pytest.raises(AirflowFailException, match=message):
        operator(**kwargs)


def test_an_in_place_restart_of_the_replica_is_named_in_the_ledger(resilient_emulator):
    """The replica's VM is lost at step 20 and Vertex AI restarts the worker in place: the job stays RUNNING, one
    attempt. The operator reads every logged line with its time, the restarted process's ``resuming from step N``
    among them, so the ledger names the restart (``in_place_restart``) instead of leaving it unexplained. (Real
    time: the log lines' times and the checkpoints' are one clock; this waits for about 4 s of training.)"""
    from pathlib import Path

    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    resilient_emulator.add_fault({"kind": "worker_failure", "at_step": 25, "match": {"nth": 1}})
    op = operator(hang_timeout=3.0, poll_interval=0.2, base_output_dir="gs://unit-bucket/in-place")
    op.worker_pool_specs[0]["container_spec"]["command"] = ["python", workload, "--steps", "40", "--every", "10",
                                                            "--step-seconds", "0.1"]
    ctx = context()
    result = op.execute(ctx)
    assert len(result["attempts"]) == 1 and result["checkpoint"]["step"] == 40
    reports = ctx["task_state_store"].data[op.STEPS_KEY]["reports"]
    starts = [r[1] for r in reports if len(r) > 2]  # the two processes' starts, from their log lines
    assert len(starts) == 2 and starts[0] == 0 and starts[1] >= 20  # the second from a save it made before dying
    ledger = ctx["ti"].xcom["goodput"]
    assert ledger["in_place_restart"] > 0
    assert ledger["other"] < ledger["in_place_restart"]


def test_the_ledger_keeps_an_earlier_attempts_progress_that_its_workload_deleted(resilient_emulator):
    """A workload that keeps only its 2 newest saves (Orbax max_to_keep) crashes for good at step 40; by the end
    of the run the saves of steps 10..30 are gone. The operator noted them before the next attempt, so the
    ledger still counts attempt 1's steps as work, not as lost progress."""
    from pathlib import Path

    from airflow_provider_resilient.policy import history_from_json

    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "at_step": 40, "match": {"nth": 1}, "times": 4})
    op = operator(base_output_dir="gs://unit-bucket/rotating", disable_retries=True)
    op.worker_pool_specs[0]["container_spec"]["command"] = ["python", workload, "--steps", "60", "--every", "10",
                                                            "--step-seconds", "0.02", "--keep", "2"]
    ctx = context()
    result = op.execute(ctx)
    assert [a.resumed_from_step for a in history_from_json(result["attempts"])] == [None, 40]
    steps = {report[1] for report in ctx["task_state_store"].data[op.STEPS_KEY]["reports"]}
    assert {30, 40} <= steps  # attempt 1's saves, noted before attempt 2 (only 50 and 60 are left at the end)
    ledger = ctx["ti"].xcom["goodput"]
    assert ledger["basis"] == "steps" and ledger["productive"] > ledger["wasted_progress"]


def test_a_workload_that_logs_its_steps_may_save_less_often_than_the_hang_timeout(resilient_emulator):
    """hang_timeout 2.5 s, a save every 3 s: judged by its checkpoints, the job would be hung before its first
    save; its "step N" lines in Cloud Logging show it progressing, so it runs to the end in one attempt. (The
    workload's progress is real: this waits for 6 s of it.)"""
    from pathlib import Path

    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    op = operator(hang_timeout=2.5, base_output_dir="gs://unit-bucket/logged")
    op.worker_pool_specs[0]["container_spec"]["command"] = ["python", workload, "--steps", "120", "--every", "60",
                                                            "--step-seconds", "0.05"]
    ctx = context()
    result = op.execute(ctx)
    assert len(result["attempts"]) == 1 and not result["attempts"][0].get("incidents")
    assert result["checkpoint"]["step"] == 120
    reads = [c for c in resilient_emulator.calls.list("ListLogEntries") if c.code == "OK"]
    assert 3 <= len(reads) <= 6 * 6 / 2.5 + 6  # one read per hang_timeout / 6 at most, over about 6 s
    reports = ctx["task_state_store"].data[op.STEPS_KEY]["reports"]
    steps = [report[1] for report in reports if len(report) == 2]
    assert len(steps) > 2 and steps == sorted(steps)  # the ledger follows the logged steps, not the two saves
    assert [report[1] for report in reports if len(report) > 2] == [0]  # the one process's start line


def test_hang_timeout_must_exceed_the_poll_interval():
    with pytest.raises(AirflowFailException, match=r"hang_timeout: 0\.01 must be more than poll_interval"):
        operator(hang_timeout=0.01)


@MANUAL
def test_deferred_the_trigger_detects_the_hang_and_the_operator_resubmits(resilient_emulator):
    import asyncio
    from pathlib import Path

    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    resilient_emulator.add_fault({"kind": "hang", "at_step": 20, "match": {"nth": 1}})
    platform = PlatformTime(resilient_emulator)
    ctx = context()

    def deferrable_operator() -> ResilientCustomJobOperator:
        op = operator(deferrable=True, hang_timeout=HANG_TIMEOUT, poll_interval=5.0,
                      base_output_dir="gs://unit-bucket/hang-deferred", restart_timeout=10 * HANG_TIMEOUT)
        op.worker_pool_specs[0]["container_spec"]["command"] = ["python", workload, "--steps", "40", "--every",
                                                                "10", "--step-seconds", "0.02"]
        return platform.wire(op)

    with pytest.raises(TaskDeferred) as deferred:
        deferrable_operator().execute(ctx)
    trigger = deferred.value.trigger
    assert trigger.hang_timeout == HANG_TIMEOUT and trigger.restart_timeout == 10 * HANG_TIMEOUT  # not for a hang
    assert trigger.checkpoint_dir == "gs://unit-bucket/hang-deferred/checkpoints/"
    assert CustomJobTrigger(**trigger.serialize()[1]).serialize() == trigger.serialize()

    def first_event(t: CustomJobTrigger) -> dict:
        """The trigger's first event, as the triggerer runs it: looking every 0.05 s of real time while the
        platform's time passes (tests/platform_time.py)."""
        again = platform.wire(CustomJobTrigger(**{**t.serialize()[1], "poll_interval": 0.05}))

        async def first() -> dict:
            async for event in again.run():
                return event.payload
            raise AssertionError("no event")

        with platform.passing():
            return asyncio.run(asyncio.wait_for(first(), 60))

    event = first_event(trigger)
    # The trigger reads the logged steps too (in a worker thread), and judges by them.
    assert event["status"] == "hang" and "logged step: no progress past step " in event["hang"]
    assert [s[1] for s in event["steps"]][-1] >= 20 and "logged step" in event["watch"]["clocks"]
    hung = ctx["task_state_store"].data[STATE_KEY]["job_name"]
    # The observer's memory travels out in the event and into the run state: a next deferral goes on from it.
    assert event["watch"]["resource"] == hung and event["watch"]["clocks"]["checkpoints"][0] == 20
    # The trigger decides nothing: the hung job still runs until the supervisor commands its end.
    assert [c.method for c in resilient_emulator.calls.list() if c.method == "CancelCustomJob"] == []
    with pytest.raises(TaskDeferred) as deferred:  # decided: end it, then resubmit after the backoff, deferred
        deferrable_operator().execute_complete(ctx, event=event)
    assert resilient_emulator.vertex.state_name(hung) == "JOB_STATE_CANCELLED"  # ended before the backoff
    assert ctx["task_state_store"].data[STATE_KEY]["watch"] == event["watch"]
    if not isinstance(deferred.value.trigger, CustomJobTrigger):  # the rest of the backoff, deferred
        with pytest.raises(TaskDeferred) as deferred:  # woke up: resubmitted from step 20, watching again
            deferrable_operator().execute_complete(ctx, event=None)
    assert ctx["task_state_store"].data[STATE_KEY]["job_name"] != hung
    last = first_event(deferred.value.trigger)
    assert last["status"] == "terminal" and last["job"]["state"] == "JOB_STATE_SUCCEEDED", (
        last, resilient_emulator.job_events(last["job"]["name"]), resilient_emulator.processes(),
        resilient_emulator.replica_log(last["job"]["name"])[-600:])
    result = deferrable_operator().execute_complete(ctx, event=last)
    first, second = result["attempts"]
    assert first["incidents"][0]["failure"]["failure_class"] == "hang"
    assert second["resumed_from_step"] == 20
    assert ctx["ti"].xcom["goodput"]["basis"] == "steps"  # reports of both deferrals, kept in the store
    assert len(ctx["task_state_store"].data["resilient_step_reports"]["reports"]) >= 4


# ---------------------------------------------------------------------------------------------- worker pools
@pytest.mark.parametrize("mixed", [False, True], ids=["all-proto", "proto-and-dict"])
def test_worker_pool_specs_may_be_proto_messages_or_a_mix_with_dicts(resilient_emulator, mixed):
    from google.cloud.aiplatform_v1 import WorkerPoolSpec

    command = ["python", "-c", "print('ok')"]
    chief = WorkerPoolSpec(machine_spec={"machine_type": "n1-standard-4", "accelerator_count": 0},
                           replica_count=1, disk_spec={"boot_disk_size_gb": 100},
                           container_spec={"image_uri": "python:3.11", "command": command})
    workers = {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 2,
               "container_spec": {"image_uri": "python:3.11", "command": command}}
    op = operator(worker_pool_specs=[chief, workers if mixed else WorkerPoolSpec(workers)])
    pools = op._pools()
    assert pools[0]["replica_count"] == 1 and type(pools[0]["replica_count"]) is int  # int64 in the proto
    assert pools[1]["replica_count"] == 2 and pools[0]["disk_spec"] == {"boot_disk_size_gb": 100}
    assert pools[0]["container_spec"] == {"image_uri": "python:3.11", "command": command}  # only fields set

    result = op.execute(context())
    job = resilient_emulator.vertex.runs[result["job_name"]].job
    assert [p.replica_count for p in job.job_spec.worker_pool_specs] == [1, 2]
    assert job.job_spec.worker_pool_specs[0].disk_spec.boot_disk_size_gb == 100
    assert result["state"] == "JOB_STATE_SUCCEEDED"


# ---------------------------------------------------------------------------------------------- queue timeout
#: Seed 003: a job may stay QUEUED/PENDING until capacity frees. The emulator holds every us-central1 job in
#: PENDING (a stockout on every provisioning attempt, retried by the platform without end); other regions
#: provision at once. On the manual clock with the platform's latencies (tests/platform_time.py): the default
#: queue timeout of 30 minutes (seed 004) passes in platform time, and a cancelled job stays CANCELLING for
#: its 5 s, long enough to see an attempt started beside it.
HELD_IN_US_CENTRAL1 = manual(
    platform={"stockout_retries": 1_000_000},
    fault_plan={"faults": [{"kind": "stockout", "match": {"location": "us-central1"}, "times": None}]})
QUEUE_POLL = 60.0  # seconds of platform time between two looks at a held job


@HELD_IN_US_CENTRAL1
def test_a_job_queued_past_the_queue_timeout_is_cancelled_and_the_task_fails_naming_it(resilient_emulator):
    op = PlatformTime(resilient_emulator).wire(operator(poll_interval=QUEUE_POLL))
    with pytest.raises(AirflowFailException) as info:
        op.execute(context())
    message = str(info.value)
    assert "not retried (rule queue-timeout)" in message and "queue timeout" in message
    assert "RetryPolicy.queue_timeout_seconds" in message
    assert resilient_emulator.calls.count("CreateCustomJob") == 1
    (job,) = resilient_emulator.vertex.runs
    assert resilient_emulator.vertex.state_name(job) == "JOB_STATE_CANCELLED"  # ended before the task failed
    held = resilient_emulator.vertex.runs[job].job
    assert (held.end_time - held.create_time).total_seconds() >= 1800  # RetryPolicy.queue_timeout_seconds


@HELD_IN_US_CENTRAL1
def test_a_job_queued_past_the_queue_timeout_fails_over_after_it_ended(resilient_emulator):
    op = PlatformTime(resilient_emulator).wire(operator(fallbacks=[{"region": "europe-west4"}],
                                                        poll_interval=QUEUE_POLL))
    result = op.execute(context())
    first, second = result["attempts"]
    incident = first["incidents"][0]
    assert incident["failure"]["failure_class"] == "queue_timeout"
    assert incident["decision"]["rule"] == "queue-timeout" and incident["decision"]["failed_over"]
    assert second["resource_name"].split("/")[3] == "europe-west4" and result["state"] == "JOB_STATE_SUCCEEDED"
    assert resilient_emulator.vertex.state_name(first["resource_name"]) == "JOB_STATE_CANCELLED"
    # Never two attempts at once: the old job had ended before the next one was created.
    old, new = (resilient_emulator.vertex.runs[a["resource_name"]].job for a in (first, second))
    assert old.end_time <= new.create_time


@HELD_IN_US_CENTRAL1
@pytest.mark.parametrize("shared_poller", [True, False], ids=["shared-poller", "per-job"])
@pytest.mark.parametrize("fallback", [True, False], ids=["fallback", "no-fallback"])
def test_deferred_a_job_queued_past_the_queue_timeout_is_judged_by_the_trigger_ended_by_the_supervisor(
        resilient_emulator, shared_poller, fallback):
    import asyncio

    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

    platform = PlatformTime(resilient_emulator)
    ctx = context()

    def deferrable_operator() -> ResilientCustomJobOperator:
        return platform.wire(operator(deferrable=True, fallbacks=[{"region": "europe-west4"}] if fallback else []))

    def event_of(deferred: TaskDeferred) -> dict:
        """The trigger's first event: it looks every 0.01 s of real time, and a minute of the platform's time
        passes after each look (tests/platform_time.py)."""
        _, kwargs = deferred.trigger.serialize()
        trigger = platform.wire(CustomJobTrigger(**{**kwargs, "shared_poller": shared_poller, "poll_interval": 0.01}))

        async def first() -> dict:
            async for event in trigger.run():
                return event.payload
            raise AssertionError("no event")

        with platform.passing(step=QUEUE_POLL):
            return asyncio.run(asyncio.wait_for(first(), 60))

    with pytest.raises(TaskDeferred) as deferred:
        deferrable_operator().execute(ctx)
    assert deferred.value.trigger.queue_timeout == 1800.0  # RetryPolicy.queue_timeout_seconds, serialised
    held = ctx["task_state_store"].data[STATE_KEY]["job_name"]
    event = event_of(deferred.value)
    assert event["status"] == "queue_timeout" and "longer than the queue timeout" in event["queue_timeout"]
    assert event["timed_out_at"] - resilient_emulator.vertex.runs[held].job.create_time.timestamp() >= 1800
    assert resilient_emulator.calls.count("CancelCustomJob") == 0  # the trigger decides nothing
    if not fallback:
        with pytest.raises(AirflowFailException, match="rule queue-timeout"):
            deferrable_operator().execute_complete(ctx, event=event)
        assert resilient_emulator.vertex.state_name(held) == "JOB_STATE_CANCELLED"
        assert resilient_emulator.calls.count("CreateCustomJob") == 1
        return
    with pytest.raises(TaskDeferred) as deferred:  # cancelled, waited for CANCELLED; then the failover backoff
        deferrable_operator().execute_complete(ctx, event=event)
    assert resilient_emulator.calls.count("CancelCustomJob") == 1
    assert resilient_emulator.vertex.state_name(held) == "JOB_STATE_CANCELLED"
    if not isinstance(deferred.value.trigger, CustomJobTrigger):  # the rest of the backoff, deferred
        assert resilient_emulator.calls.count("CreateCustomJob") == 1
        with pytest.raises(TaskDeferred) as deferred:  # woke up: attempt 2 in europe-west4, watched
            deferrable_operator().execute_complete(ctx, event=None)
    last = event_of(deferred.value)
    assert last["status"] == "terminal" and last["job"]["state"] == "JOB_STATE_SUCCEEDED"
    result = deferrable_operator().execute_complete(ctx, event=last)
    assert [a["resource_name"].split("/")[3] for a in result["attempts"]] == ["us-central1", "europe-west4"]
    assert result["attempts"][0]["incidents"][0]["failure"]["failure_class"] == "queue_timeout"


# ---------------------------------------------------------------------------------------------- links
LINK_KEYS = ("_link_VertexAICustomJobLink", "_link_VertexAICustomJobLogsLink")


def test_links_are_pushed_again_when_a_retried_task_resumes_watching(resilient_emulator, tmp_path):
    ctx = context()
    first = operator(runs_until(tmp_path / "go"))
    first._sleep = lambda _: (_ for _ in ()).throw(Killed)  # dies at its first wait
    with pytest.raises(Killed):
        first.execute(ctx)
    assert all(k in ctx["ti"].xcom for k in LINK_KEYS)
    retry = {**ctx, "ti": TI()}  # Airflow clears a task's XComs at each new try
    (tmp_path / "go").touch()
    result = operator(runs_until(tmp_path / "go")).execute(retry)
    job_id = result["job_name"].rsplit("/", 1)[1]
    assert retry["ti"].xcom[LINK_KEYS[0]].endswith(f"/training/{job_id}/cpu?project=test-project")
    assert job_id in retry["ti"].xcom[LINK_KEYS[1]]


def test_links_are_pushed_when_a_job_of_the_attempt_is_found_by_its_labels(resilient_emulator, tmp_path):
    ctx = context()
    first = operator(runs_until(tmp_path / "go"))
    hook = first._hook()
    create = hook.create_custom_job

    def create_then_die(*args, **kwargs):
        create(*args, **kwargs)
        raise Killed  # the reply never reached the state store

    hook.create_custom_job = create_then_die
    with pytest.raises(Killed):
        first.execute(ctx)
    assert ctx["task_state_store"].data[STATE_KEY]["phase"] == "submitting"
    assert not any(k in ctx["ti"].xcom for k in LINK_KEYS)
    retry = {**ctx, "ti": TI()}
    (tmp_path / "go").touch()
    result = operator(runs_until(tmp_path / "go")).execute(retry)
    assert resilient_emulator.calls.count("CreateCustomJob") == 1
    assert result["job_name"].rsplit("/", 1)[1] in retry["ti"].xcom[LINK_KEYS[0]]


def test_the_cloud_logging_link_queries_the_jobs_ml_job_logs():
    from urllib.parse import unquote

    from airflow_provider_resilient.links.vertex_ai import job_links

    links = job_links("projects/my-project/locations/europe-west4/customJobs/4567")
    assert links[LINK_KEYS[0]] == ("https://console.cloud.google.com/vertex-ai/locations/europe-west4/training/"
                                   "4567/cpu?project=my-project")
    logs = links[LINK_KEYS[1]]
    prefix, suffix = "https://console.cloud.google.com/logs/query;query=", "?project=my-project"
    assert logs.startswith(prefix) and logs.endswith(suffix)
    query = logs[len(prefix):-len(suffix)]
    assert "?" not in query and ";" not in query and " " not in query  # fully escaped
    assert unquote(query) == 'resource.type="ml_job"\nresource.labels.job_id="4567"'


# ---------------------------------------------------------------------------------------------- a cleared store
def test_a_store_cleared_after_success_returns_the_earlier_job_unless_a_rerun_is_asked(resilient_emulator):
    """``[state_store] clear_on_success`` (or the store's retention) emptied the store of a successful task,
    then the task is cleared: its jobs' labels tell what happened."""
    ctx = context()
    done = operator().execute(ctx)
    ctx["task_state_store"].data.clear()
    again = operator().execute(ctx)
    assert again["job_name"] == done["job_name"] and resilient_emulator.calls.count("CreateCustomJob") == 1

    ctx["task_state_store"].data.clear()
    rerun = operator(rerun_after_success=True).execute(ctx)
    assert rerun["job_name"] != done["job_name"] and resilient_emulator.calls.count("CreateCustomJob") == 2
    assert [a["number"] for a in rerun["attempts"]] == [1, 2]
    new = resilient_emulator.vertex.runs[rerun["job_name"]].job
    assert new.labels["resilient-attempt"] == "2"  # never a second job labelled attempt 1


def test_a_store_cleared_after_a_failure_resumes_with_a_new_attempt(resilient_emulator):
    ctx = context()
    with pytest.raises(AirflowFailException):
        operator("raise SystemExit(1)").execute(ctx)
    ctx["task_state_store"].data.clear()
    result = operator().execute(ctx)
    assert [a["number"] for a in result["attempts"]] == [1, 2]
    assert resilient_emulator.vertex.runs[result["job_name"]].job.labels["resilient-attempt"] == "2"


# ---------------------------------------------------------------------------------------------- the job itself
def test_on_kill_in_sync_mode_cancels_the_live_job(resilient_emulator):
    ctx = context()
    op = operator("import time; time.sleep(60)")

    def killed_while_it_runs(_: float) -> None:
        job_name = ctx["task_state_store"].data[STATE_KEY]["job_name"]
        resilient_emulator.wait_for_state(job_name, ["JOB_STATE_RUNNING"], 30)
        op.on_kill()  # what Airflow calls when the task is killed
        raise Killed

    op._sleep = killed_while_it_runs
    with pytest.raises(Killed):
        op.execute(ctx)
    job_name = ctx["task_state_store"].data[STATE_KEY]["job_name"]
    assert resilient_emulator.wait_for_state(job_name, ["JOB_STATE_CANCELLED"], 30) == "JOB_STATE_CANCELLED"
    assert resilient_emulator.processes() == []


def test_created_jobs_carry_the_task_instance_labels_within_the_label_rules(resilient_emulator):
    import hashlib
    import re

    from airflow.sdk import DAG

    dag_id = "Team.ML_" + "Very_Long_Nightly_Training_Pipeline_" * 3  # uppercase, a dot, 116 characters
    with DAG(dag_id, schedule=None):
        op = operator(labels={"team": "ml"})
    ti = TI()
    ti.map_index = 3
    ctx = {**context(), "ti": ti}
    result = op.execute(ctx)
    labels = dict(resilient_emulator.vertex.runs[result["job_name"]].job.labels)
    assert set(labels) == {"team", "airflow-dag", "airflow-task", "airflow-run", "airflow-map-index",
                           "resilient-attempt"}
    for key, value in labels.items():
        assert re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key) and re.fullmatch(r"[a-z0-9_-]{0,63}", value), (key, value)
    assert labels["airflow-dag"].startswith("team-ml_very_long_nightly") and len(labels["airflow-dag"]) == 63
    assert labels["airflow-task"] == "train" and labels["airflow-map-index"] == "3"
    assert labels["airflow-run"] == hashlib.sha256(ctx["run_id"].encode()).hexdigest()[:16]
    assert labels["resilient-attempt"] == "1"


def test_the_second_attempt_is_told_its_number_and_what_ended_the_first(resilient_emulator):
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "match": {"nth": 1}})
    result = operator("import time; time.sleep(1)", disable_retries=True).execute(context())

    def env_of(job_name: str) -> dict[str, str]:
        job = resilient_emulator.vertex.runs[job_name].job
        return {e.name: e.value for e in job.job_spec.worker_pool_specs[0].container_spec.env}

    first, second = (env_of(a["resource_name"]) for a in result["attempts"])
    assert first["RESILIENT_ATTEMPT"] == "1" and "RESILIENT_FAILURE_CLASS" not in first
    assert second["RESILIENT_ATTEMPT"] == "2" and second["RESILIENT_FAILURE_CLASS"] == "transient_crash"
    assert second["RESILIENT_CHECKPOINT_DIR"] == "gs://unit-bucket/run/checkpoints/"


def test_short_backoffs_are_slept_in_the_worker_and_triggers_hold_early_events(resilient_emulator):
    """Airflow 3.3 may fail a task whose trigger fires within seconds of its deferral (apache/airflow#72716):
    a backoff under ``min_defer_seconds`` is slept in the worker, a longer one defers, and the watch trigger
    carries the earliest moment it may fire."""
    from airflow_provider_resilient.compat import TaskDeferred
    from airflow_provider_resilient.supervisor import RunState, Sleep

    op = operator(deferrable=True, min_defer_seconds=10.0)
    slept: list[float] = []
    op._sleep = slept.append
    steps = iter([Sleep(4.0, "short"), Sleep(30.0, "long")])
    deferred: list[Any] = []

    def fake_step(state, event, policy, seed):
        return state, next(steps)

    import airflow_provider_resilient.operators.base as base

    original = base.step
    base.step = fake_step
    try:
        with pytest.raises(TaskDeferred) as raised:
            op._drive(context(), RunState(), None)
    finally:
        base.step = original
    assert slept == [4.0]  # the short one in the worker; the long one deferred
    deferred.append(raised.value.trigger)
    assert type(deferred[0]).__name__ == "DateTimeTrigger"
    with pytest.raises(AirflowFailException, match="min_defer_seconds: -1 must be >= 0 seconds"):
        operator(min_defer_seconds=-1)

    watch = operator(deferrable=True, min_defer_seconds=10.0)
    before = time.time()
    with pytest.raises(TaskDeferred) as raised:
        watch._defer_watch(RunState(), "projects/test-project/locations/us-central1/customJobs/1")
    trigger = raised.value.trigger
    assert before + 10.0 <= trigger.fire_not_before <= time.time() + 10.0
    assert trigger.serialize()[1]["fire_not_before"] == trigger.fire_not_before



def test_a_deferred_watch_hands_the_run_states_observer_memory_to_its_trigger(monkeypatch):
    """The hang clock of an attempt goes on across deferrals: the trigger starts from the stored memory."""
    from airflow_provider_resilient.compat import TaskDeferred

    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", '{"conn_type": "google_cloud_platform"}')

    from airflow_provider_resilient.supervisor import RunState
    from airflow_provider_resilient.supervisor.observe import CHECKPOINTS, ProgressClock, WatchMemory

    name = "projects/test-project/locations/us-central1/customJobs/7"
    memory = WatchMemory(name, ((CHECKPOINTS, ProgressClock(30, 1_800_000_000.0)),))
    with pytest.raises(TaskDeferred) as raised:
        operator(deferrable=True, hang_timeout=60.0)._defer_watch(RunState().observed(memory), name)
    trigger = raised.value.trigger
    assert trigger.serialize()[1]["watch"] == memory.to_json() and trigger._memory == memory


def test_only_torn_checkpoints_start_afresh_loudly_or_fail_when_asked(resilient_emulator, tmp_path, capsys):
    """Issue 13: saves that exist but are all torn are never a silent fresh start."""
    (tmp_path / "step_50").mkdir()
    (tmp_path / "step_50" / "__0_0.distcp").write_text("data, no .metadata")  # a DCP save cut off
    result = operator(checkpoint_dir=str(tmp_path)).execute(context())
    assert result["state"] == "JOB_STATE_SUCCEEDED"
    said = capsys.readouterr().out  # the task's log
    assert "1 torn save(s), the newest" in said and "starting from step 0 (torn_checkpoints='start_fresh')" in said
    refused = r"torn_checkpoints='fail': repair or remove them.*step 50: torn DCP save"
    with pytest.raises(AirflowFailException, match=refused):
        operator(checkpoint_dir=str(tmp_path), torn_checkpoints="fail").execute({**context(), "run_id": "manual__2"})
    assert len(resilient_emulator.calls.list("CreateCustomJob")) == 1  # the failed run created nothing
    with pytest.raises(AirflowFailException, match="torn_checkpoints: 'ignore' is not one of 'start_fresh', 'fail'"):
        operator(torn_checkpoints="ignore")


def test_sensitive_container_env_values_never_reach_the_rendered_fields():
    """Issue 13 item 5: Airflow redacts a dict's sensitive keys, not the ``{"name", "value"}`` shape of a
    container's env; the operator registers those values with the masker when it renders, before Airflow
    serializes the rendered fields (task_runner._serialize_rendered_fields, the UI's view)."""
    from airflow.sdk.execution_time.task_runner import _serialize_rendered_fields

    secret = "hf_" + "Zq8x" * 8
    op = operator()
    op.worker_pool_specs[0]["container_spec"]["env"] = [{"name": "HF_TOKEN", "value": secret},
                                                        {"name": "REGION_HINT", "value": "europe-west4"}]
    op.render_template_fields({})
    rendered = json.dumps(_serialize_rendered_fields(op))
    assert secret not in rendered and "europe-west4" in rendered  # only the sensitive name is hidden


def test_a_run_is_refused_beside_another_runs_live_job_in_its_checkpoint_dir(resilient_emulator):
    """Issue 13 item 4: an orphaned run's job still trains into the checkpoint directory; a new run given the
    same directory would resume from its saves and write beside it. It is refused before any create; a run
    with its own directory goes on."""
    orphan = operator("import time; time.sleep(60)")
    polls = []

    def dying_sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 2:
            raise Killed  # the worker died; nobody retries the task: its job runs on

    orphan._sleep = dying_sleep
    with pytest.raises(Killed):
        orphan.execute(context())
    with pytest.raises(AirflowFailException, match=r"another run writes checkpoint_dir gs://unit-bucket/run/"
                                                   r"checkpoints/: give each run its own"):
        operator().execute({**context(), "run_id": "manual__second"})
    assert len(resilient_emulator.calls.list("CreateCustomJob")) == 1
    result = operator(base_output_dir="gs://unit-bucket/second").execute({**context(), "run_id": "manual__second"})
    assert result["state"] == "JOB_STATE_SUCCEEDED"


def test_the_workloads_own_goodput_events_are_read_when_the_run_ends(resilient_emulator):
    """A workload that records ml-goodput-measurement events under one job name across its two CustomJobs (the
    first exits 139 at step 45, after its step-40 save; the second resumes from 40 and runs steps 41-45 again):
    the run's XCom carries the package's own figures, the redone steps as wasted progress."""
    from pathlib import Path

    pytest.importorskip("ml_goodput_measurement")
    workload = str(Path(__file__).parents[1] / "emulator" / "workloads" / "checkpointing.py")
    op = operator(base_output_dir="gs://unit-bucket/events", disable_retries=True, goodput_job_name="train-events")
    op.worker_pool_specs[0]["container_spec"]["command"] = [
        "python", workload, "--steps", "50", "--every", "10", "--step-seconds", "0.05", "--goodput-job", "train-events",
        "--crash-once-at-step", "45"]
    ctx = context()
    result = op.execute(ctx)
    from airflow_provider_resilient.policy import history_from_json

    assert [a.resumed_from_step for a in history_from_json(result["attempts"])] == [None, 40]
    events = ctx["ti"].xcom["goodput"]["workload_events"]
    assert events["source"] == "ml-goodput-measurement events" and events["logger_name"] == "goodput_train-events"
    assert events["disruptions"] == 1 and events["last_productive_step"] == 49  # steps 0..49, counted from 0
    assert 0 < events["goodput"] < 1
    # Steps 41-45 ran twice (the package sees those whose entries were sent before the exit).
    assert 0 < events["badput_seconds"]["WASTED_PROGRESS_FROM_DISRUPTION"] <= 5 * 0.05 * 2


def test_goodput_events_that_cannot_be_read_leave_the_estimate_and_say_why(resilient_emulator):
    op = operator(base_output_dir="gs://unit-bucket/no-events", goodput_job_name="never-recorded")
    ctx = context()
    op.execute(ctx)
    goodput = ctx["ti"].xcom["goodput"]
    assert goodput["basis"] and "workload_events" not in goodput
    assert "no goodput events of job 'never-recorded'" in goodput["workload_events_error"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"goodput_logger_name": "log"}, "needs goodput_job_name"),
    ({"goodput_job_name": "run", "goodput_logger_name": "a log"}, "not a Cloud Logging log ID"),
    ({"goodput_job_name": " "}, "goodput_job_name: ' ' is not a non-empty string"),
])
def test_bad_goodput_event_names_are_refused_when_the_dag_is_parsed(kwargs, message):
    with pytest.raises(AirflowFailException, match=message):
        operator(**kwargs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"event_topic": "resilient-events", "deferrable": True}, "event_topic: 'resilient-events' is not a Pub/Sub topic"),
])
def test_a_bad_event_topic_is_refused_when_the_dag_is_parsed(kwargs, message):
    with pytest.raises(AirflowFailException, match=message):
        operator(**kwargs)


def test_the_deferred_job_trigger_carries_the_event_topic(resilient_emulator):
    from airflow_provider_resilient.compat import TaskDeferred

    op = operator(deferrable=True, event_topic="projects/unit/topics/resilient-events")
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context())
    assert deferred.value.trigger.serialize()[1]["event_topic"] == "projects/unit/topics/resilient-events"
