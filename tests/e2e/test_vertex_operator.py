"""ResilientCustomJobOperator end to end: real Airflow, real clients, the emulator, injected faults.

An Airflow start costs about 9 s, a scenario 1-8 s: the scenarios that are independent of one another run as
the independent tasks of four ``dag.test()`` runs (module-scoped fixtures, each under the suite's 30 s a test),
each in its own region (or, for the two queue-timeout tasks in us-central1, by its task's label) so that its
faults and its calls are its own, and each test checks the facts of one scenario. The reattach scenario's second
run is the first of them: its first, a process of its own with only that task, is killed with SIGKILL while its job
runs (the process boundary is its point).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig

from .conftest import TaskRuns, e2e_env, run_tasks

#: One xdist worker runs the module (with ``--dist loadgroup``), so each module-scoped run happens once.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e_vertex")]

HERE = Path(__file__).parent
SLEEP_THEN_OK = "import time; time.sleep(0.5); print('done')"  # the replica's own code (real work)


#: The scenarios of one run: task id -> the DAG's settings. A region per scenario: a fault matches its location,
#: and its calls are told apart by the resource they name.
SCENARIOS = {
    "permanent_sync": {"code": "raise SystemExit(1)", "deferrable": False, "region": "us-east1"},
    "permanent_deferrable": {"code": "raise SystemExit(1)", "deferrable": True, "region": "us-east4"},
    # Sync polling reads the job with GetCustomJob; the deferred trigger's shared poller lists the jobs.
    "unavailable_get": {"code": SLEEP_THEN_OK, "deferrable": False, "region": "us-west1"},
    "unavailable_list": {"code": SLEEP_THEN_OK, "deferrable": True, "region": "us-west2"},
    # A stockout that fails the job: the platform does not retry it (every us-central1 job is held by endless
    # platform retries of its stockouts, for the queue timeouts below).
    "stockout": {"code": "print('ok')", "fallbacks": [{"region": "europe-west4"}], "deferrable": False,
                 "region": "us-south1", "disable_retries": True},
    "quota": {"code": "print('ok')", "deferrable": False, "region": "asia-east1"},
    # Seed 004: queuing over the limit ends the attempt (here 2 s instead of 30 min). Both in us-central1.
    "queued_deferrable_fallback": {"code": "print('ok')", "deferrable": True, "queue_timeout_seconds": 2.0,
                                   "fallbacks": [{"region": "europe-west4"}]},
    "queued_sync_no_fallback": {"code": "print('ok')", "deferrable": False, "queue_timeout_seconds": 2.0},
}
#: Transient errors in a row while a job is watched: each is retried by the hook after its backoff (1 s, then 2 s).
UNAVAILABLE_IN_A_ROW = 2
FAULTS = [
    {"kind": "unavailable", "calls": "get", "match": {"nth": 2, "location": "us-west1"}, "times": UNAVAILABLE_IN_A_ROW},
    {"kind": "unavailable", "calls": "list", "match": {"nth": 2, "location": "us-west2"},
     "times": UNAVAILABLE_IN_A_ROW},
    {"kind": "stockout", "match": {"nth": 1, "location": "us-south1"}},
    {"kind": "quota", "times": 2, "match": {"location": "asia-east1"}},
    # Seed 003: a job may stay QUEUED/PENDING until capacity frees. With HELD_IN_US_CENTRAL1, every us-central1 job
    # stays PENDING (each provisioning attempt stocks out and the platform retries without end); other regions
    # provision at once.
    {"kind": "stockout", "match": {"location": "us-central1"}, "times": None},
]
HELD_IN_US_CENTRAL1 = {"platform": {"stockout_retries": 1_000_000},
                       "latencies": {"queued_seconds": 0.0, "provisioning_seconds": 0.0}}
FAILED = {"permanent_sync", "permanent_deferrable", "queued_sync_no_fallback"}


DAY = "2026-03-03"  # the reattach DagRun's logical date (and run_after): both reattach runs are this DagRun
#: The runs' scenarios: the reattach run's (beside the reattach task), the transient errors' and the waits' (the
#: queue timeouts, on an emulator that holds us-central1's jobs, and a stockout's failover).
#: The reattach run is the reattach task alone, in both its processes: Airflow 3.1 and 3.2 keep the tasks a DAG run
#: was created with, so the run's second process cannot bring tasks of its own.
TRANSIENT_RUN = ("unavailable_get", "unavailable_list", "quota")
PERMANENT_RUN = ("permanent_sync", "permanent_deferrable")
WAITING_RUN = ("queued_deferrable_fallback", "queued_sync_no_fallback", "stockout")


def runs_until(go: Path) -> str:
    """A replica's code that runs until the file ``go`` exists (the test says when the job may end)."""
    return f"import pathlib, time\nwhile not pathlib.Path({str(go)!r}).exists(): time.sleep(0.05)\nprint('done')"


def killed_while_its_job_runs(airflow_env: dict[str, str], emulator: Emulator, tasks: dict) -> str:
    """Run the DagRun of ``tasks`` in a process of its own and SIGKILL it once a replica runs; the job's name."""
    env, dag_id = e2e_env(airflow_env, emulator, tasks)
    command = [sys.executable, str(HERE / "dag_test_fixed_run.py"), str(HERE / "dags" / "e2e_vertex.py"), dag_id, DAY]
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    def running() -> list[str]:  # the reattach task's job, once its replica runs (other runs go on beside it)
        return [n for n, r in list(emulator.vertex.runs.items())
                if r.job.labels.get("airflow-task") == "reattach" and r.job.state.name == "JOB_STATE_RUNNING"]

    deadline = time.monotonic() + 120
    while not running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(), "the job never started"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    (job,) = running()
    return job


def released_once_watched(emulator: Emulator, job: str, go: Path) -> threading.Thread:
    """A thread that lets ``job`` end (``go``) once someone reads it again with GetCustomJob."""
    def gets() -> int:
        return sum(1 for c in emulator.calls.list("GetCustomJob") if c.resource == job)

    before = gets()

    def release() -> None:
        deadline = time.monotonic() + 300
        while gets() <= before and time.monotonic() < deadline:
            time.sleep(0.05)
        go.touch()

    thread = threading.Thread(target=release, name="release-reattached-job", daemon=True)
    thread.start()
    return thread


def faults_of(tasks: tuple[str, ...]) -> list[dict]:
    """The faults of :data:`FAULTS` that strike ``tasks`` (by their regions; us-central1's hold for the queue
    timeouts)."""
    regions = {SCENARIOS[t].get("region", "us-central1") for t in tasks}
    return [f for f in FAULTS if f["match"]["location"] in regions]


@pytest.fixture(scope="module")
def reattach_run(airflow_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[TaskRuns, Emulator, str]]:
    """The reattach task's first run, killed while its job runs; then the same DAG run again. Yields the run, the
    emulator and the state of the reattach job right after its watcher died."""
    go = tmp_path_factory.mktemp("reattach") / "go"
    reattach = {"code": runs_until(go), "deferrable": False, "region": "us-east5"}
    with Emulator(config=EmulatorConfig(time_scale=0.002)) as emulator:
        job = killed_while_its_job_runs(airflow_env, emulator, {"reattach": reattach})
        after_kill = emulator.vertex.state_name(job)
        releaser = released_once_watched(emulator, job, go)
        runs = run_tasks(airflow_env, emulator, {"reattach": reattach}, day=DAY)
        go.touch()  # whatever happened, the job ends
        releaser.join(timeout=5)
        yield runs, emulator, after_kill


def scenarios_run(airflow_env: dict[str, str], tasks: tuple[str, ...], day: str, **config: object
                  ) -> Iterator[tuple[TaskRuns, Emulator]]:
    """One DAG run of the scenarios ``tasks`` with their faults, on an emulator of its own (``config``: more
    EmulatorConfig fields)."""
    with Emulator(config=EmulatorConfig(time_scale=0.002, **config)) as emulator:
        for fault in faults_of(tasks):
            emulator.add_fault(fault)
        yield run_tasks(airflow_env, emulator, {t: SCENARIOS[t] for t in tasks}, day=day), emulator


@pytest.fixture(scope="module")
def transient_run(airflow_env: dict[str, str]) -> Iterator[tuple[TaskRuns, Emulator]]:
    yield from scenarios_run(airflow_env, TRANSIENT_RUN, "2026-03-04")


@pytest.fixture(scope="module")
def permanent_run(airflow_env: dict[str, str]) -> Iterator[tuple[TaskRuns, Emulator]]:
    yield from scenarios_run(airflow_env, PERMANENT_RUN, "2026-03-06")


@pytest.fixture(scope="module")
def waiting_run(airflow_env: dict[str, str]) -> Iterator[tuple[TaskRuns, Emulator]]:
    yield from scenarios_run(airflow_env, WAITING_RUN, "2026-03-05", **HELD_IN_US_CENTRAL1)


def jobs_of(emulator: Emulator, task: str) -> list[str]:
    """The jobs the task ``task`` created (its ``airflow-task`` label), oldest first."""
    return sorted((n for n, r in emulator.vertex.runs.items() if r.job.labels["airflow-task"] == task),
                  key=lambda n: int(n.rsplit("/", 1)[1]))


def calls_in(emulator: Emulator, method: str, region: str) -> list[str]:
    """The status codes of ``method`` calls that named a resource in ``region``, in order."""
    return [c.code for c in emulator.calls.list(method) if f"/locations/{region}" in c.resource]


@pytest.mark.parametrize("task", ["permanent_sync", "permanent_deferrable"])
def test_permanent_error_fails_at_once_without_resubmitting(permanent_run, task):
    runs, emulator = permanent_run
    assert runs.states[task] == "failed"
    assert calls_in(emulator, "CreateCustomJob", SCENARIOS[task]["region"]) == ["OK"]
    log = runs.task_log(task)
    assert "not retried (rule permanent-user-error)" in log
    assert "exited with a non-zero status of 1" in log


@pytest.mark.parametrize(("task", "method"), [("unavailable_get", "GetCustomJob"),
                                              ("unavailable_list", "ListCustomJobs")], ids=["get", "list"])
def test_transient_unavailable_while_polling_does_not_fail_the_task(transient_run, task, method):
    """Sync polling reads the job with GetCustomJob; the deferred trigger's shared poller lists the jobs."""
    runs, emulator = transient_run
    region = SCENARIOS[task]["region"]
    assert runs.states[task] == "success", runs.task_log(task)[-3000:]
    codes = calls_in(emulator, method, region)
    assert codes.count("UNAVAILABLE") == UNAVAILABLE_IN_A_ROW and codes[-1] == "OK"
    assert calls_in(emulator, "CreateCustomJob", region) == ["OK"]


def test_a_stockout_fails_over_to_the_next_fallback_region(waiting_run):
    runs, emulator = waiting_run
    assert runs.states["stockout"] == "success", runs.task_log("stockout")[-3000:]
    assert [n.split("/")[3] for n in jobs_of(emulator, "stockout")] == ["us-south1", "europe-west4"]
    assert emulator.vertex.runs[jobs_of(emulator, "stockout")[0]].job.error.message.startswith(
        "Resources are insufficient in region: us-south1")
    assert "failing over to fallback 1/1 (region=europe-west4)" in runs.task_log("stockout")


def test_a_quota_refusal_on_create_waits_and_retries(transient_run):
    runs, emulator = transient_run
    assert runs.states["quota"] == "success", runs.task_log("quota")[-3000:]
    assert calls_in(emulator, "CreateCustomJob", "asia-east1") == ["RESOURCE_EXHAUSTED"] * 2 + ["OK"]
    assert "quota aiplatform.googleapis.com/custom_model_training_cpus" in runs.task_log("quota")


def test_the_scenarios_ran_as_independent_tasks_of_one_run(reattach_run, transient_run, permanent_run, waiting_run):
    """Each run's own verdict: failed, for its failed tasks only."""
    for runs, tasks in ((reattach_run[0], {"reattach"}), (transient_run[0], set(TRANSIENT_RUN)),
                        (permanent_run[0], set(PERMANENT_RUN)),
                        (waiting_run[0], set(WAITING_RUN))):
        assert set(runs.states) == tasks and (runs.returncode != 0) == bool(FAILED & tasks)
        assert {t for t, state in runs.states.items() if state != "success"} == FAILED & tasks


def test_reattach_after_the_task_process_is_killed(reattach_run):
    """Kill the worker with SIGKILL while its job runs; running the same DagRun again watches the same job:
    one CreateCustomJob for the attempt, and the run completes.

    ``dag.test()`` deletes and re-creates a DagRun it runs again, so the task state store of the first run
    is gone (its rows belong to the deleted run): the job is found by its labels. The task state store
    path of a real task retry is covered in tests/operators/test_vertex_operator_unit.py
    (``test_a_retried_task_continues_from_the_task_state_store``). The job runs until the test lets it
    end, once the second run watches it, so nothing depends on how fast Airflow starts here.
    """
    runs, emulator, after_kill = reattach_run
    assert after_kill == "JOB_STATE_RUNNING"  # the job outlived its watcher
    log = runs.task_log("reattach")
    assert runs.states["reattach"] == "success", log[-3000:]
    assert calls_in(emulator, "CreateCustomJob", "us-east5") == ["OK"]
    assert "Attempt 1 already exists as" in log and "watching it instead of creating another" in log
    (job,) = jobs_of(emulator, "reattach")
    assert emulator.vertex.state_name(job) == "JOB_STATE_SUCCEEDED"


@pytest.mark.parametrize("task", ["queued_deferrable_fallback", "queued_sync_no_fallback"],
                         ids=["deferrable-fallback", "sync-no-fallback"])
def test_a_job_queued_past_the_queue_timeout_is_cancelled_then_fails_over_or_fails(waiting_run, task):
    """Seed 004: queuing over the limit ends the attempt (here 2 s instead of 30 min); the held job is
    cancelled, and once it has ended the task fails over to the fallback region or fails naming the limit.

    The other two pairings of mode and fallback, and both trigger paths, run against the emulator without
    Airflow in tests/operators/test_vertex_operator_unit.py (``queue_timeout`` tests, with an injected clock).
    """
    runs, emulator = waiting_run
    jobs = jobs_of(emulator, task)
    held = emulator.vertex.runs[jobs[0]].job
    assert held.state.name == "JOB_STATE_CANCELLED", emulator.job_events(jobs[0])[-3:]
    log = runs.task_log(task)
    assert "longer than the queue timeout of 2 s" in log
    assert [c.resource for c in emulator.calls.list("CancelCustomJob")].count(jobs[0]) == 1
    if SCENARIOS[task].get("fallbacks"):
        assert runs.states[task] == "success", log[-3000:]
        assert [n.split("/")[3] for n in jobs] == ["us-central1", "europe-west4"]
        assert "failing over to fallback 1/1 (region=europe-west4)" in log
        assert held.end_time <= emulator.vertex.runs[jobs[1]].job.create_time  # never two at once
    else:
        assert runs.states[task] == "failed"
        assert len(jobs) == 1 and "not retried (rule queue-timeout)" in log
