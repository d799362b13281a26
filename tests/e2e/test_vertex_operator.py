"""ResilientCustomJobOperator end to end: real Airflow, real clients, the emulator, injected faults."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
SLEEP_THEN_OK = "import time; time.sleep(1.5); print('done')"


def creates(emulator) -> list[tuple[str, str]]:
    return [(c.resource.rsplit("/", 1)[1], c.code) for c in emulator.calls.list("CreateCustomJob")]


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_permanent_error_fails_at_once_without_resubmitting(run_dag, emulator, deferrable):
    result = run_dag({"code": "raise SystemExit(1)", "deferrable": deferrable})
    assert result.returncode != 0
    assert len(emulator.calls.list("CreateCustomJob")) == 1
    assert "not retried (rule permanent-user-error)" in result.log
    assert "exited with a non-zero status of 1" in result.log


@pytest.mark.parametrize("calls", ["get", "list"])
def test_transient_unavailable_while_polling_does_not_fail_the_task(run_dag, emulator, calls):
    """Sync polling reads the job with GetCustomJob; the deferred trigger's shared poller lists the jobs."""
    emulator.add_fault({"kind": "unavailable", "calls": calls, "match": {"nth": 2}, "times": 3})
    result = run_dag({"code": SLEEP_THEN_OK, "deferrable": calls == "list"})
    assert result.returncode == 0, result.log[-3000:]
    codes = [c.code for c in emulator.calls.list("GetCustomJob" if calls == "get" else "ListCustomJobs")]
    assert codes.count("UNAVAILABLE") == 3 and codes[-1] == "OK"
    assert len(emulator.calls.list("CreateCustomJob")) == 1


def test_a_stockout_fails_over_to_the_next_fallback_region(run_dag, emulator):
    emulator.add_fault({"kind": "stockout", "times": 4, "match": {"nth": 1}})
    result = run_dag({"code": "print('ok')", "fallbacks": [{"region": "europe-west4"}], "deferrable": False})
    assert result.returncode == 0, result.log[-3000:]
    regions = [c.resource.split("/")[3] for c in emulator.calls.list("CreateCustomJob")]
    assert regions == ["us-central1", "europe-west4"]
    assert "failing over to fallback 1/1 (region=europe-west4)" in result.log


def test_a_quota_refusal_on_create_waits_and_retries(run_dag, emulator):
    emulator.add_fault({"kind": "quota", "times": 2})
    result = run_dag({"code": "print('ok')", "deferrable": False})
    assert result.returncode == 0, result.log[-3000:]
    assert [c.code for c in emulator.calls.list("CreateCustomJob")] == ["RESOURCE_EXHAUSTED"] * 2 + ["OK"]
    assert "quota aiplatform.googleapis.com/custom_model_training_cpus" in result.log


def test_reattach_after_the_task_process_is_killed(airflow_env, emulator, tmp_path):
    """Kill the worker with SIGKILL while its job runs; running the same DagRun again watches the same job:
    one CreateCustomJob for the attempt, and the run completes.

    ``dag.test()`` deletes and re-creates a DagRun it runs again, so the task state store of the first run
    is gone (its rows belong to the deleted run): the job is found by its labels. The task state store
    path of a real task retry is covered in tests/operators/test_vertex_operator_unit.py
    (``test_a_retried_task_continues_from_the_task_state_store``). The job runs until the test lets it
    end, once the second run watches it, so nothing depends on how fast Airflow starts here.
    """
    go = tmp_path / "go"
    code = f"import pathlib, time\nwhile not pathlib.Path({str(go)!r}).exists(): time.sleep(0.05)\nprint('done')"
    env = {**airflow_env, **emulator.env(),
           "RESILIENT_E2E": json.dumps({"code": code, "deferrable": False, "poll_interval": 0.3})}
    command = [sys.executable, str(HERE / "dag_test_fixed_run.py"), str(HERE / "dags" / "e2e_vertex.py"),
               "e2e_vertex", "2026-02-02"]
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 120
    while not emulator.processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert emulator.processes(), "the job never started"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    (job,) = emulator.vertex.runs
    assert emulator.vertex.runs[job].job.state.name == "JOB_STATE_RUNNING"  # the job outlived its watcher

    gets_before = emulator.calls.count("GetCustomJob")
    second = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while emulator.calls.count("GetCustomJob") <= gets_before and second.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()  # the second run polls the job: let it end
    log, _ = second.communicate(timeout=300)
    assert second.returncode == 0, log[-3000:]
    assert len(emulator.calls.list("CreateCustomJob")) == 1
    assert "Attempt 1 already exists as" in log and "watching it instead of creating another" in log
    assert emulator.vertex.runs[job].job.state.name == "JOB_STATE_SUCCEEDED"


#: Seed 003: a job may stay QUEUED/PENDING until capacity frees. With this emulator configuration and the
#: fault below, every us-central1 job stays PENDING (each provisioning attempt stocks out and the platform
#: retries without end); other regions provision at once.
HELD_IN_US_CENTRAL1 = {"platform": {"stockout_retries": 1_000_000},
                       "latencies": {"queued_seconds": 0.0, "provisioning_seconds": 0.0}}


@pytest.mark.parametrize("emulator", [HELD_IN_US_CENTRAL1], indirect=True, ids=["held-in-us-central1"])
@pytest.mark.parametrize(("deferrable", "fallback"), [(True, True), (False, False)],
                         ids=["deferrable-fallback", "sync-no-fallback"])
def test_a_job_queued_past_the_queue_timeout_is_cancelled_then_fails_over_or_fails(run_dag, emulator, deferrable,
                                                                                   fallback):
    """Seed 004: queuing over the limit ends the attempt (here 2 s instead of 30 min); the held job is
    cancelled, and once it has ended the task fails over to the fallback region or fails naming the limit.

    The other two pairings of mode and fallback, and both trigger paths, run against the emulator without
    Airflow in tests/operators/test_vertex_operator_unit.py (``queue_timeout`` tests, with an injected clock).
    """
    emulator.add_fault({"kind": "stockout", "match": {"location": "us-central1"}, "times": None})
    result = run_dag({"code": "print('ok')", "deferrable": deferrable, "queue_timeout_seconds": 2.0,
                      "fallbacks": [{"region": "europe-west4"}] if fallback else []})
    jobs = sorted(emulator.vertex.runs, key=lambda n: int(n.rsplit("/", 1)[1]))
    held = emulator.vertex.runs[jobs[0]].job
    assert held.state.name == "JOB_STATE_CANCELLED", emulator.job_events(jobs[0])[-3:]
    assert "longer than the queue timeout of 2 s" in result.log
    assert emulator.calls.count("CancelCustomJob") == 1
    if fallback:
        assert result.returncode == 0, result.log[-3000:]
        assert [n.split("/")[3] for n in jobs] == ["us-central1", "europe-west4"]
        assert "failing over to fallback 1/1 (region=europe-west4)" in result.log
        assert held.end_time <= emulator.vertex.runs[jobs[1]].job.create_time  # never two at once
    else:
        assert result.returncode != 0
        assert len(jobs) == 1 and "not retried (rule queue-timeout)" in result.log
