"""The moments of a production Airflow that a one-triggerer lab never shows, on the real processes: a triggerer that
stalls past the health threshold and wakes up after its triggers moved to the other triggerer, a graceful triggerer
restart (SIGTERM, then a new process, as on every upgrade), and a Celery worker SIGKILLed while the operator runs in
``execute()``. Each run must succeed with exactly one job or node per attempt, no cancel or delete that nobody asked
for, and nothing left live. The emulator's record is the judge.

The stalled triggerer and the Celery worker need the CeleryExecutor stack (two triggerers, two workers:
``make stack-test STACK_EXECUTOR=celery``); the graceful restart runs on both stacks.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_resilient.compat import TRIGGER_ON_KILL
from airflow_provider_resilient.specs.common import job_labels
from devtools.stack import NativeStack

from .test_ui_actions import history, states_until_done, wait_deferred_and_watched
from .ui import (
    AIRFLOW_MINOR,
    TASK,
    created_per_attempt,
    holder,
    jobs_of,
    live,
    log_text,
    modelarts_job_prefix,
    platform_of,
    ti,
    tpu_attempt_of,
    tries,
    trigger,
    wait_for,
)

pytestmark = pytest.mark.stack
#: ModelArts from Airflow 3.3 (airflow_provider_resilient.compat.MODELARTS_TRIGGER: before it, its operator watches
#: from the worker and the scenarios of a deferred task do not apply).
PLATFORMS = ["stack_vertex", "stack_tpu", *(["stack_modelarts"] if AIRFLOW_MINOR >= (3, 3) else [])]


class Holds:
    """The runs' ``hold_file``s (tests/stack/dags/stack_training.py): each run's training, once done, waits until
    its file exists -- the job stays live through the moment under test however slow the machine, and ends when
    the test says."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def conf(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return {"hold_file": str(self.folder / f"{dag_id}.{run_id}.go")}

    def release(self, runs: list[tuple[str, str]]) -> None:
        for dag_id, run_id in runs:
            Path(self.conf(dag_id, run_id)["hold_file"]).touch()


@pytest.fixture
def holds(tmp_path: Path) -> Holds:
    return Holds(tmp_path)


# ------------------------------------------------------------------ what the stack and the emulator say
def releases_of(stack: NativeStack, dag_id: str, run_id: str) -> list[str]:
    """The cancel / delete calls that reached the run's jobs or nodes, in order (``Method resource``)."""
    if platform_of(dag_id) == "tpu":  # deleted nodes leave the listing: any attempt's node id
        calls = [*stack.emulator_get("/calls?method=DeleteNode"),
                 *stack.emulator_get("/calls?method=DeleteQueuedResource")]
        return [f"{c['method']} {c['resource']}" for c in calls
                if tpu_attempt_of(dag_id, run_id, c["resource"].rsplit("/", 1)[1]) is not None]
    if platform_of(dag_id) == "vertex":
        mine = {job["name"].rsplit("/", 1)[1] for job in jobs_of(stack, dag_id, run_id)}
        calls = stack.emulator_get("/calls?method=CancelCustomJob")
    else:  # ModelArts: the stops that reached its jobs (the call's resource is the bare job id)
        mine = {job["name"] for job in jobs_of(stack, dag_id, run_id)}
        calls = stack.emulator_get("/calls?method=StopTrainingJob")
    return [f"{c['method']} {c['resource']}" for c in calls if c["resource"].rsplit("/", 1)[-1] in mine]


def judged_in(log: str, names: list[str]) -> bool:
    """Whether a trigger's on_kill judged the cancel of its copy watching any of ``names`` (job / node names, or a
    ModelArts job's id) in ``log``: it left it alone (moved) or released it (killed)."""
    return any(name in line and ("alone:" in line or "releasing" in line)
               for line in log.splitlines() for name in names)


def calls_after(stack: NativeStack, method: str, count: int) -> list[dict[str, Any]]:
    """The emulator's ``method`` calls after the first ``count`` (a mark taken with ``len(...)`` earlier)."""
    calls: list[dict[str, Any]] = stack.emulator_get(f"/calls?method={method}")
    return calls[count:]


def outcome(stack: NativeStack, dag_id: str, run_id: str) -> dict[str, Any]:
    """What a run ended with: its task's state, attempts and incidents, the jobs / nodes created per attempt, the
    cancel / delete calls that reached them, and how many are still live (the closing note's figures)."""
    state = states_until_done(stack, dag_id, run_id)[-1]
    attempts = history(stack, dag_id, run_id) if state == "success" else None
    return {"state": state, "attempts": None if attempts is None else len(attempts),
            "incidents": None if attempts is None else [i["failure"]["failure_class"] for a in attempts
                                                        for i in a.get("incidents") or []],
            "creates": created_per_attempt(stack, dag_id, run_id), "releases": releases_of(stack, dag_id, run_id),
            "live": live(stack, dag_id, run_id)}


def assert_one_clean_attempt(dag_id: str, got: dict[str, Any], *, refused_for_quota: bool = False) -> None:
    """The run succeeded in one attempt with no incident, one job / node, nothing live; the only release is the TPU
    node's deletion once the run succeeded (keep_node=False): nobody had reason to cancel or delete more. With
    ``refused_for_quota``, the attempts before the last were creates the platform refused (each an attempt with a
    quota incident that created nothing)."""
    assert got["state"] == "success", f"{dag_id}: {got}"
    expected_incidents = ["quota_exceeded"] * (got["attempts"] - 1) if refused_for_quota else []
    assert got["incidents"] == expected_incidents, f"{dag_id}: {got}"
    assert got["creates"] == {str(got["attempts"]): 1}, f"{dag_id}: {got}"
    assert refused_for_quota or got["attempts"] == 1, f"{dag_id}: {got}"
    assert len(got["releases"]) == (1 if platform_of(dag_id) == "tpu" else 0), f"{dag_id}: {got}"
    assert got["live"] == [], f"{dag_id}: {got}"


def report(what: str, outcomes: dict[str, dict[str, Any]]) -> None:
    """Print each run's figures (before any assertion, so a red run shows them all)."""
    for dag_id, got in outcomes.items():
        print(f"{what}: {dag_id}: {got['state']}, attempts {got['attempts']}, incidents {got['incidents']}, creates "
              f"per attempt {got['creates']}, cancels/deletes {len(got['releases'])} {got['releases']}, "
              f"live after {len(got['live'])}")


# ------------------------------------------------------------------ a stalled triggerer
@pytest.mark.needs_executor("celery")
@pytest.mark.timeout(900)
def test_a_stalled_triggerer_that_wakes_after_its_triggers_moved_cancels_and_deletes_nothing(stack, holds):
    """Both runs' triggers on triggerer A; A stalls (SIGSTOP, as a starved pod or a long pause) until B has taken
    them over and watches them; A wakes (SIGCONT) and cancels its copies -- Airflow 3.3 calls on_kill for that --
    which must release nothing: the task instances are still deferred, on B. Before the fix the CustomJob was
    cancelled (the task failed: "not retried (rule cancelled)") and the TPU node deleted (a second node, resumed
    from the last checkpoint)."""
    first, second = stack.components("triggerer")
    runs = [(dag_id, "stalled_triggerer") for dag_id in PLATFORMS]
    stack.pause_component(second)  # the runs' triggers all go to `first`, the one that will stall
    try:
        for dag_id, run_id in runs:
            trigger(stack, dag_id, run_id, **holds.conf(dag_id, run_id))
        for dag_id, run_id in runs:
            wait_deferred_and_watched(stack, dag_id, run_id)
            wait_for(f"{dag_id}/{run_id} held by {first}", lambda d=dag_id, r=run_id: holder(stack, d, r) == first)
    finally:
        stack.resume_component(second)
    stack.wait_jobs("TriggererJob", count=2)  # B heartbeats again
    watching = {m: len(stack.emulator_get(f"/calls?method={m}"))
                for m in ("ListCustomJobs", "GetNode", "ListTrainingJobs")}
    stalled_at = time.monotonic()
    stack.pause_component(first)
    try:
        for dag_id, run_id in runs:  # past [triggerer] triggerer_health_check_threshold, B takes them
            wait_for(f"{dag_id}/{run_id} taken over by {second}",
                     lambda d=dag_id, r=run_id: holder(stack, d, r) == second)
        # ... and watches them: with A frozen, every new read is B's.
        wait_for("B reads the CustomJobs", lambda: calls_after(stack, "ListCustomJobs", watching["ListCustomJobs"]))
        wait_for("B reads the TPU node", lambda: calls_after(stack, "GetNode", watching["GetNode"]))
        # (a live ModelArts job is read by the shared poller's job search, as a CustomJob by ListCustomJobs)
        wait_for("B reads the ModelArts job", lambda: calls_after(stack, "ListTrainingJobs",
                                                                  watching["ListTrainingJobs"]))
    finally:
        stack.resume_component(first)
    stalled = time.monotonic() - stalled_at
    # A wakes, finds the triggers assigned elsewhere and cancels its copies through the user-action path (the
    # triggerer's line in the task's log, from A's trigger log file). Before Airflow 3.3 triggers have no on_kill:
    # A's cancellation runs none of our code, and the outcome below is all there is to check.
    # The jobs are held until A has judged: released earlier, a job may end and its task succeed before A's on_kill
    # reads the task instance's state, and "success" then reads as a user's Mark success (a release of an ended job:
    # harmless, but not what this scenario checks).
    # A is done with its copy of a trigger once the copy's "trigger completed" is in the task's log (Airflow awaits
    # on_kill before it: triggerer_job_runner.run_trigger). Three ways were seen on the loaded Celery stack of
    # 2026-11-28: A cancels the copy and our on_kill judges it moved (the line below); A cancels it and cancels it
    # again at its next sync while our on_kill is judging -- Airflow swallows that CancelledError; the judgement goes
    # on (triggers.base: a task of its own), its line then in A's own log as the trigger has ended; or the
    # copy's own timer ran out while A was frozen (the TPU trigger's full look is due 300 s after the operator's,
    # backends.tpu_watch.DEFAULT_LOOK_AGAIN_SECONDS) and it fired "look_again" as A woke, before A learned of the
    # move. None of them may release anything: A's log never says it released, and the outcome below is one clean
    # attempt with no cancel or delete.
    # Whenever on_kill ran, the jobs are also held until its judgement's line is in. In the second way it outlives
    # "trigger completed": its line is in the task's log or, once A has closed the trigger's log file, in A's own
    # log. Released before it reads the task instance's state, a job could end and its task succeed first; the
    # judgement then reads a Mark success and stops the ended job (harmless, but a release this scenario must not
    # see: the Celery-stack CI of 2026-11-29 saw a StopTrainingJob after this test).
    if TRIGGER_ON_KILL:
        for dag_id, run_id in runs:
            wait_for(f"{first} is done with its copy of {dag_id}'s trigger",
                     lambda d=dag_id, r=run_id: "trigger completed" in log_text(stack, d, r, 1))
            if "invoking on_kill" in log_text(stack, dag_id, run_id, 1):  # Airflow's line: our on_kill ran
                names = live(stack, dag_id, run_id)
                wait_for(f"{first}'s judgement of its copy of {dag_id}'s trigger",
                         lambda d=dag_id, r=run_id, n=names: judged_in(
                             log_text(stack, d, r, 1) + "\n" + stack.component_log(first), n))
    holds.release(runs)
    outcomes = {dag_id: outcome(stack, dag_id, run_id) for dag_id, run_id in runs}
    report(f"stalled triggerer ({stalled:.0f} s frozen)", outcomes)
    for dag_id, run_id in runs:
        assert_one_clean_attempt(dag_id, outcomes[dag_id])
        if TRIGGER_ON_KILL:
            text = log_text(stack, dag_id, run_id, 1)
            assert "The task was killed" not in text, text  # no on_kill took the moved trigger for a kill
            way = ("judged moved by on_kill" if "the trigger was moved" in text else
                   "cancelled again while on_kill judged" if "invoking on_kill" in text else "ended by itself")
            print(f"{dag_id}: A's copy {way}")


# ------------------------------------------------------------------ a graceful triggerer restart
@pytest.mark.timeout(900)
def test_a_graceful_triggerer_restart_mid_run_releases_nothing(stack, holds):
    """SIGTERM the triggerer(s) holding the runs' triggers, as a rolling upgrade does, then start them again: the
    triggers are cancelled without on_kill and re-created (on the other triggerer, or the new process)."""
    import signal

    runs = [(dag_id, "graceful_restart") for dag_id in PLATFORMS]
    for dag_id, run_id in runs:
        trigger(stack, dag_id, run_id, **holds.conf(dag_id, run_id))
    holders = set()
    for dag_id, run_id in runs:
        wait_deferred_and_watched(stack, dag_id, run_id)
        holders.add(wait_for(f"{dag_id}/{run_id}'s triggerer", lambda d=dag_id, r=run_id: holder(stack, d, r)))
    restarted_at = datetime.now(UTC)
    for name in sorted(holders):
        stack.kill_component(name, signal.SIGTERM, timeout=60)
        stack.start_component(name)
    assert stack.wait_jobs("TriggererJob", started_since=restarted_at, count=len(holders))
    for dag_id, run_id in runs:  # watched again before the jobs end
        wait_deferred_and_watched(stack, dag_id, run_id)
    holds.release(runs)
    outcomes = {dag_id: outcome(stack, dag_id, run_id) for dag_id, run_id in runs}
    report(f"graceful restart of {sorted(holders)}", outcomes)
    for dag_id in outcomes:
        assert_one_clean_attempt(dag_id, outcomes[dag_id])


# ------------------------------------------------------------------ a Celery worker killed in execute()
def quota_outage(stack: NativeStack, dag_id: str, run_id: str) -> int:
    """Creates of the run refused for quota until the test ends the outage: the operator waits in execute()."""
    fault: dict[str, Any] = {"kind": "quota", "times": None,
                             "match": {"labels": job_labels(dag_id, TASK, run_id, -1, None)}}
    if platform_of(dag_id) == "tpu":
        fault["service"] = "tpu"
    if platform_of(dag_id) == "modelarts":  # a create carries no tags yet: the job's name says whose it is
        fault = {**fault, "service": "modelarts", "match": {"display_name": modelarts_job_prefix(dag_id, run_id) + "*"}}
    index: int = stack.emulator_post("/faults", fault)["index"]
    return index


def quota_refused(stack: NativeStack, dag_id: str) -> bool:
    method, refused = {"vertex": ("CreateCustomJob", "RESOURCE_EXHAUSTED"), "tpu": ("CreateNode", "RESOURCE_EXHAUSTED"),
                       "modelarts": ("CreateTrainingJob", "ModelArts.2815")}[platform_of(dag_id)]
    return any(c["code"] == refused for c in stack.emulator_get(f"/calls?method={method}"))


@pytest.mark.needs_executor("celery")
@pytest.mark.timeout(900)
def test_a_celery_worker_sigkilled_while_the_operator_is_in_execute_is_retried_and_reattaches(stack, holds):
    """Four runs, each in execute() on a Celery worker: deferrable ones waiting out a quota refusal (before their
    deferral), polling ones watching their job / node. Every worker running one is SIGKILLed (a lost node) and
    started again; the scheduler fails each try once its heartbeat is [scheduler] task_instance_heartbeat_timeout
    old and retries it; the retry finds the attempt in the task state store and reattaches -- or, for the
    deferrable runs, creates it once the outage is over."""
    import signal

    # Run ids of their own: a platform's runs write checkpoints under gs://resilient-stack/<platform>/<run id>/, and
    # two runs of one directory are refused (they would resume from each other's saves).
    deferred = [(f"{p}_retried", "worker_killed_deferrable") for p in PLATFORMS]
    polling = [(f"{p}_polling_retried", "worker_killed_polling") for p in PLATFORMS]
    outages = {}
    for dag_id, run_id in deferred:
        outages[dag_id] = quota_outage(stack, dag_id, run_id)
    for dag_id, run_id in deferred + polling:
        trigger(stack, dag_id, run_id, **holds.conf(dag_id, run_id))
    for dag_id, _ in deferred:
        wait_for(f"{dag_id} refused for quota", lambda d=dag_id: quota_refused(stack, d))
    for dag_id, run_id in polling:
        wait_for(f"{dag_id} watching its job", lambda d=dag_id, r=run_id: live(stack, d, r))
    workers: set[str] = set()
    for dag_id, run_id in deferred + polling:
        got = ti(stack, dag_id, run_id)
        assert got["state"] == "running" and got["try_number"] == 1, got  # in execute(), not deferred
        workers.add(stack.component_on(got.get("hostname")) or f"unknown host {got.get('hostname')}")
    assert workers <= set(stack.components("celery_worker")), workers
    killed_at = time.monotonic()
    for name in sorted(workers):
        stack.kill_component(name, signal.SIGKILL)
    for name in sorted(workers):
        stack.start_component(name)
    for dag_id, run_id in deferred + polling:  # the dead try is failed for its missing heartbeat, then retried
        wait_for(f"{dag_id}/{run_id} retried", lambda d=dag_id, r=run_id: ti(stack, d, r)["try_number"] == 2)
    found_after = time.monotonic() - killed_at
    for dag_id in outages:
        stack.emulator_post("/faults/end", {"index": outages[dag_id]})
    holds.release(deferred + polling)
    outcomes = {dag_id: outcome(stack, dag_id, run_id) for dag_id, run_id in deferred + polling}
    report(f"Celery workers {sorted(workers)} SIGKILLed, tries retried within {found_after:.0f} s", outcomes)
    for dag_id, run_id in deferred + polling:
        assert [state for _, state in tries(stack, dag_id, run_id)] == ["failed", "success"]
        # The deferrable runs' creates were refused for quota until the outage ended.
        assert_one_clean_attempt(dag_id, outcomes[dag_id], refused_for_quota=(dag_id, run_id) in deferred)


def test_the_stack_runs_the_topology_of_its_executor(stack):
    if stack.executor == "celery":
        assert len(stack.components("triggerer")) == 2 and len(stack.components("celery_worker")) == 2
        assert len(stack.jobs("TriggererJob")) == 2
    else:
        assert stack.components("celery_worker") == [] and len(stack.components("triggerer")) == 1
