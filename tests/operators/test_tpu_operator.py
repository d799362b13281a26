"""ResilientTPUWorkloadOperator against the emulated Cloud TPU (seed 002): maintenance waited out or
re-created, crashes restarted in place then re-created, permanent errors failing, stockouts walking the
fallbacks, kills and reattaches -- each asserting the decisions of the attempt history and the emulator's
call record -- and never a node or queued resource left behind.

The platform's time is stepped (``tests/tpu_time.py``): the emulator runs on a manual clock with the real
platform's latencies, and the operator's waits -- polls, backoffs, maintenance waits, node creations and
deletions -- move it on instead of passing; only the workloads run in real time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.compat import AirflowFailException, TaskDeferred
from airflow_provider_resilient.hooks.tpu import ResilientTPUHook
from airflow_provider_resilient.operators.tpu import STATE_KEY, ResilientTPUWorkloadOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy
from airflow_provider_resilient.specs.tpu import node_id_for
from airflow_provider_resilient.testing.emulator_clients import tpu_client

from ..tpu_time import STEPPED, PlatformTime, stepped_emulator
from .test_vertex_operator_unit import TI, Store

pytestmark = STEPPED
WORKLOAD = Path(__file__).resolve().parents[2] / "dags" / "workloads" / "train_digits.py"
#: Platform seconds (stepped, never waited for): the policy's own default backoff, 30 s doubling to 10 min.
BACKOFF = Backoff()
POLICY = RetryPolicy(backoff=BACKOFF, failover_backoff=BACKOFF,
                     budgets={"maintenance_wait": Budget(max_seconds=1800, backoff=BACKOFF),
                              "quota_wait": Budget(max_seconds=1800, backoff=BACKOFF),
                              "stockout": Budget(max_retries=3, backoff=BACKOFF)})
#: For the tests that run on real time (the emulator's wall clock, latencies x 0.002): real seconds.
FAST = Backoff(initial_seconds=0.05, max_seconds=0.2)
FAST_POLICY = RetryPolicy(backoff=FAST, failover_backoff=FAST,
                          budgets={"maintenance_wait": Budget(max_seconds=30, backoff=FAST),
                                   "quota_wait": Budget(max_seconds=30, backoff=FAST),
                                   "stockout": Budget(max_retries=3, backoff=FAST)})
REAL_TIME = pytest.mark.resilient_emulator(time_scale=0.002)
PROJECT = "test-project"
ZONE = f"projects/{PROJECT}/locations/us-central2-b"
TIMEOUT = 60.0  # seconds: a bound on every wait for the emulator or a trigger, never a measured time
#: Platform seconds a workload may go without a new step: 30 looks of the operator (``poll_interval`` 1 s).
HANG = 30.0
#: For a test whose looks are minutes apart (a queue timeout, a maintenance notice): no hang or start-up deadline
#: that a few looks could pass while a workload's interpreter starts in real time (the defaults, 30 min, are 1800
#: looks of 1 s -- a minute and more of real time -- but only 30 looks of 60 s).
PATIENT: dict[str, Any] = {"hang_timeout": 86400.0, "startup_timeout": 86400.0}
RUN_ID = "manual__2026-01-01T00:00:00+00:00"
#: The node ids of attempts 1 and 2 (``node_id_for``: DAG, task and a hash of the run).
A1, A2, A3 = (node_id_for(None, "adhoc_airflow", "train", RUN_ID, -1, n) for n in (1, 2, 3))


@pytest.fixture
def platform_time(resilient_emulator: Any) -> PlatformTime:
    """The emulator's manual clock and the code under test's clock and sleep, as one time."""
    return PlatformTime(resilient_emulator)


class Killed(BaseException):
    """The worker process dying (not an Exception: nothing in the operator may catch it)."""


def context(store: Store | None = None) -> dict[str, Any]:
    return {"task_state_store": store or Store(), "ti": TI(), "run_id": RUN_ID}


#: A fallback to another zone: Cloud TPU offers v4 in us-central2-b only ("TPU regions and zones"), so it changes the
#: accelerator type too, to a one-host v3 that europe-west4-a offers (and runs the same runtime version).
EUROPE = {"zone": "europe-west4-a", "accelerator_type": "v3-8"}


def operator(command: str, **kwargs: Any) -> ResilientTPUWorkloadOperator:
    """The operator under test; its ``poll_interval`` and ``resilience_policy`` are platform seconds (the tests
    on real time pass their own)."""
    defaults: dict[str, Any] = dict(
        task_id="train", project_id=PROJECT, zone="us-central2-b", accelerator_type="v4-8",
        runtime_version="tpu-ubuntu2204-base", command=command, checkpoint_dir="gs://tpu-ckpt/run/checkpoints",
        checkpoint_marker="COMMITTED", poll_interval=1.0, resilience_policy=POLICY, max_worker_restarts=2,
        min_defer_seconds=0.0, heartbeat_seconds=0.1)
    defaults.update(kwargs)
    return ResilientTPUWorkloadOperator(**defaults)


#: A workload that reports step 1 and runs until a fault strikes it on the first node, and ends at once on the
#: next one. Its faults strike ``at_step: 1`` (``STRIKES_WHEN_IT_RUNS``): never before the workload runs, never
#: after it ended, so a scenario never depends on how fast this machine is.
FIRST_ATTEMPT_RUNS_UNTIL_STRUCK = 'if [ "$RESILIENT_ATTEMPT" = 1 ]; then echo "step 1"; sleep 120; fi'
STRIKES_WHEN_IT_RUNS = {"at_step": 1}


def runs_until_struck_once(mark: Path, step: int = 1) -> str:
    """A workload that, on its first run anywhere, marks ``mark``, reports step ``step`` and runs until a fault
    (``at_step``) strikes it; every later run -- restarted in place, after a repair on the same node or on a new
    node -- ends at once."""
    return f'if [ ! -e {mark} ]; then touch {mark}; echo "step {step}"; sleep 120; fi'


def train(epochs: int = 12) -> str:
    return (f"{sys.executable} {WORKLOAD} --epochs {epochs} --checkpoint-every 3 --epoch-seconds 0.05 "
            '--checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"')


def steps(count: int, seconds: float = 0.1) -> str:
    """A workload printing ``step i`` lines (the runner reports them) every ``seconds``, then exiting 0."""
    return (f"{sys.executable} -c 'import time\nfor i in range({count}): print(\"step\", i, flush=True); "
            f"time.sleep({seconds})'")


#: A workload that prints three steps and ends at once (a shell: no interpreter to start, so a look never finds
#: it running without a step for long -- what a short ``hang_timeout`` needs of the attempts that do not hang).
THREE_STEPS = 'echo "step 1"; echo "step 2"; echo "step 3"'


def only_in_attempt(attempt: int, failing: str, then: str = "echo ok") -> str:
    """``failing`` in attempt ``attempt`` (``$RESILIENT_ATTEMPT``), ``then`` in the others."""
    return f'if [ "$RESILIENT_ATTEMPT" = {attempt} ]; then {failing}; else {then}; fi'


def nodes_left(emulator: Any = None) -> list[str]:
    return [n.name for n in tpu_client().list_nodes(parent=ZONE)]


def queued_left() -> list[str]:
    return [q.name for q in tpu_client().list_queued_resources(parent=ZONE)]


def ready(node: str | None) -> bool:
    """Whether ``node`` exists and is READY."""
    return bool(node) and any(n.name == node and n.state.name == "READY" for n in tpu_client().list_nodes(parent=ZONE))


def decisions(result: dict) -> list[tuple[str, str]]:
    return [(i["failure"]["failure_class"], i["decision"]["action"]) for a in result["attempts"]
            for i in a.get("incidents", [])]


def stored_decisions(ctx: dict) -> list[tuple[str, str]]:
    return decisions({"attempts": ctx["task_state_store"].data[STATE_KEY]["history"]})


def created(emulator: Any) -> list[str]:
    """Node ids of the CreateNode calls answered OK, in order."""
    return [c.resource.rsplit("/", 1)[1] for c in emulator.calls.list("CreateNode") if c.code == "OK"]


def deleted(emulator: Any) -> list[str]:
    return [c.resource.rsplit("/", 1)[1] for c in emulator.calls.list("DeleteNode")]


def delete_kept(name: str, platform_time: PlatformTime) -> None:
    """Delete a node the run kept (``keep_node``), the platform's time stepped through the deletion."""
    ResilientTPUHook(sleep=platform_time.sleep).delete_node(name)


#: Platform seconds between a task's deferral and its trigger's first look (the triggerer picks new triggers up
#: within seconds). Without it, a trigger that fires at its first look would bring a stepped task back at the same
#: instant, again and again: a queued resource's node that is CREATING is news to the trigger (a node where the
#: operator's baseline saw none yet) but not to the operator's look (the request is not granted until the node is
#: READY) -- an Airflow deployment goes round that loop once per deferral's trip until the node is up.
TRIGGER_START_SECONDS = 5.0


async def first_event(trigger: Any) -> Any:
    async for fired in trigger.run():
        return fired.payload
    raise AssertionError("the trigger ended without an event")


def stepped(op: Any) -> bool:
    """Whether operator ``op`` runs on a stepped time of a test's (its ``_sleep`` is not ``time.sleep``)."""
    return op is not None and getattr(op, "_sleep", time.sleep) is not time.sleep


def fire(trigger: Any, platform_time: PlatformTime | None, deferred_by: Any = None) -> Any:
    """The payload of ``trigger``'s first event, its loop run as the triggerer does. On stepped time the
    trigger waits on the platform's time, and a backoff's ``DateTimeTrigger`` (which waits on the wall clock)
    is stepped to its moment instead of being run -- also when the operator that deferred (``deferred_by``) runs on
    a stepped time of its own (its ``_sleep`` is not ``time.sleep``: the moment is on its clock)."""
    from airflow.providers.standard.triggers.temporal import DateTimeTrigger

    if isinstance(trigger, DateTimeTrigger):
        if platform_time is not None:
            platform_time.sleep(trigger.moment.timestamp() - platform_time.now())
            return trigger.moment
        if stepped(deferred_by):
            deferred_by._sleep(max(0.0, trigger.moment.timestamp() - deferred_by._clock()))
            return trigger.moment
    if platform_time is not None:
        platform_time.drive(trigger)
    elif stepped(deferred_by) and hasattr(trigger, "_clock"):
        trigger._clock = deferred_by._clock  # the times the operator gave it (fire_not_before) are on that clock
    return asyncio.run(asyncio.wait_for(first_event(trigger), TIMEOUT))


def run_deferred(make: Callable[[], ResilientTPUWorkloadOperator], ctx: dict, *,
                 kill_at: int | None = None, max_deferrals: int = 200, events: list | None = None,
                 resume_with: dict | None = None, platform_time: PlatformTime | None = None,
                 between: Callable[[], None] | None = None) -> Any:
    """Run a deferrable operator as Airflow does: after each deferral the trigger -- re-created from its
    ``serialize()``, as the triggerer does -- runs in an event loop of its own, and a *fresh* operator
    continues with its event. With ``kill_at=n`` a user kills the task at its n-th deferral (0-based): the
    trigger's ``on_kill`` runs and ``Killed`` is raised. ``events`` collects the triggers' payloads.
    ``resume_with``: the task deferred already, and a fresh operator starts with this trigger event.
    ``platform_time``: the operators and triggers run on that stepped time (None: the real clock); each
    deferral's trip through the triggerer takes :data:`TRIGGER_START_SECONDS` of it.
    ``between``: called after each deferral, before its trigger runs."""
    def made() -> ResilientTPUWorkloadOperator:
        return platform_time.drive(make()) if platform_time is not None else make()

    op = made()
    resume: Callable[[], Any] = lambda: op.execute(ctx)  # noqa: E731
    if resume_with is not None:
        resume = lambda: op.execute_complete(ctx, resume_with)  # noqa: E731
    for n in range(max_deferrals):
        try:
            return resume()
        except TaskDeferred as deferred:
            assert deferred.method_name == "execute_complete"
            classpath, kwargs = deferred.trigger.serialize()
            trigger = type(deferred.trigger)(**kwargs)
            assert trigger.serialize() == (classpath, kwargs)
            if between is not None:
                between()
            if platform_time is not None:
                platform_time.sleep(TRIGGER_START_SECONDS)
            if n == kill_at:
                # on_kill's own hook waits on the wall clock: the platform moves on meanwhile.
                with platform_time.moving() if platform_time is not None else contextlib.nullcontext():
                    asyncio.run(asyncio.wait_for(trigger.on_kill(), TIMEOUT))
                raise Killed from None
            event = fire(trigger, platform_time, deferred_by=op)
            if events is not None:
                events.append(event)
            op = made()
            resume = lambda op=op, event=event: op.execute_complete(ctx, event)  # noqa: E731
    raise AssertionError(f"still deferring after {max_deferrals} deferrals")


def wait_until(condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Poll the emulator until ``condition()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# ------------------------------------------------------------------ maintenance (seed 002)
def test_a_maintenance_event_that_recovers_is_waited_out_on_the_same_node(resilient_emulator, platform_time,
                                                                         tmp_path):
    resilient_emulator.add_fault({"kind": "maintenance", **STRIKES_WHEN_IT_RUNS, "grace_seconds": 5})
    result = platform_time.drive(operator(runs_until_struck_once(tmp_path / "struck"))).execute(context())
    assert {d for d in decisions(result)} == {("maintenance_event", "wait")}
    assert len(result["attempts"]) == 1
    assert created(resilient_emulator) == [A1] == deleted(resilient_emulator)
    assert nodes_left() == [] and resilient_emulator.tpu.processes() == []


def test_a_terminated_node_is_re_created_and_resumes_from_the_checkpoint(resilient_emulator, platform_time):
    resilient_emulator.storage.create_bucket("tpu-ckpt")
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, "at_step": 6, "grace_seconds": 5,
                                  "match": {"nth": 1}})
    ctx = context()
    result = platform_time.drive(operator(train(9))).execute(ctx)
    assert decisions(result) == [("maintenance_event", "recreate_node")]
    attempts = result["attempts"]
    assert len(attempts) == 2 and attempts[1]["resumed_from_step"] >= 3
    terminate = attempts[0]["incidents"][0]["failure"]
    assert terminate["node_state"] == "TERMINATED"
    assert terminate["terminate_reason"] == "Maintenance event without automatic recovery"
    # Dated by the audit entry that reports the event, not by the look that saw the node TERMINATED: a look
    # late by a triggerer outage would otherwise count the time in between as lost work, not as detection.
    from datetime import UTC, datetime

    from airflow_provider_resilient.hooks.tpu import AuditLogHook
    from airflow_provider_resilient.policy.classify import classify_tpu_audit_entry

    (entry,) = [e for e in AuditLogHook().node_events(PROJECT, f"{ZONE}/nodes/{A1}", datetime.fromtimestamp(0, tz=UTC))
                if e["protoPayload"]["methodName"] == "tpu.nodes.terminate"]
    assert terminate["timestamp"] == classify_tpu_audit_entry(entry).timestamp
    assert terminate["timestamp"] <= attempts[0]["incidents"][0]["decision"]["decided_at"]
    assert result["checkpoint"]["step"] == 9
    # (The goodput ledger of such a run -- from steps, some wasted, some recovery -- is checked on real time, where
    # the checkpoints' times and the run's share a clock: test_tpu_trigger's polled-and-deferred ledger test.)
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
    assert nodes_left() == [] and resilient_emulator.tpu.processes() == []
    assert ctx["task_state_store"].data[STATE_KEY]["phase"] == "succeeded"


def test_a_failed_node_is_deleted_before_the_backoff_and_the_next_node(resilient_emulator, platform_time):
    """Nothing bills while the run waits, never two nodes at once: a node whose workload failed (its VM still
    runs) is ended by the supervisor's EndAttempt -- and gone -- before the backoff and the next CreateNode; the
    shell only carries it out."""
    slow = Backoff(initial_seconds=600.0, max_seconds=600.0, jitter=0.0)
    op = operator(only_in_attempt(1, "kill -SEGV $$"), max_worker_restarts=1, resilience_policy=RetryPolicy(
        backoff=slow, budgets={"transient_crash": Budget(max_retries=2, backoff=slow)}))
    during_backoff: list[tuple[list[str], list[str]]] = []

    def sleep(seconds: float) -> None:  # the backoff is recorded, then stepped as every wait
        if seconds > 60:
            during_backoff.append((nodes_left(), deleted(resilient_emulator)))
        platform_time.sleep(seconds)

    platform_time.drive(op)._sleep = sleep
    result = op.execute(context())
    assert decisions(result) == [("transient_crash", "resubmit")]
    assert during_backoff == [([], [A1])]  # A1 already gone when the wait began; A2 not created yet
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)


def test_a_terminated_node_is_replaced_while_it_is_deleted(resilient_emulator, platform_time):
    """A node that runs nothing (TERMINATED by a maintenance event) cannot write beside the next one once its
    deletion is requested: the supervisor ends it without waiting (``EndAttempt(wait=False)``), the next node's
    create overlaps the deletion -- no backoff either (``recreate_node``) -- and the old node is gone before the
    new attempt is looked at."""
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, **STRIKES_WHEN_IT_RUNS,
                                  "grace_seconds": 5, "match": {"nth": 1}})
    result = platform_time.drive(operator(FIRST_ATTEMPT_RUNS_UNTIL_STRUCK)).execute(context())
    assert decisions(result) == [("maintenance_event", "recreate_node")]
    calls = resilient_emulator.calls.list()
    delete_a1 = next(c for c in calls if c.method == "DeleteNode" and c.resource.endswith(A1))
    create_a2 = next(c for c in calls if c.method == "CreateNode" and c.resource.endswith(A2))
    assert delete_a1.time <= create_a2.time < delete_a1.time + 30  # a deletion takes 30 s: A1 was still DELETING
    gone = next(c for c in calls if c.method == "GetNode" and c.resource.endswith(A1) and c.code == "NOT_FOUND"
                and c.time >= delete_a1.time)
    watched = next(c for c in calls if c.method == "GetGuestAttributes" and c.resource.endswith(A2))
    assert gone.time <= watched.time
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
    assert nodes_left() == []


def test_a_create_refused_for_quota_while_the_old_node_is_deleted_waits_for_it_and_creates_again(
        resilient_emulator, platform_time):
    """The node being deleted may still count against the project's TPU quota: a create refused for quota then
    waits for the deletion and is made once more -- what waiting for the end would have done -- instead of
    spending the quota_wait backoff."""
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, **STRIKES_WHEN_IT_RUNS,
                                  "grace_seconds": 5, "match": {"nth": 1}})
    resilient_emulator.add_fault({"kind": "quota", "service": "tpu", "times": 1, "match": {"nth": 2},
                                  "quota_metric": "tpu.googleapis.com/TPUV4sPerProjectPerZone"})
    result = platform_time.drive(operator(FIRST_ATTEMPT_RUNS_UNTIL_STRUCK)).execute(context())
    assert decisions(result) == [("maintenance_event", "recreate_node")]  # no quota_exceeded incident
    creates = [c for c in resilient_emulator.calls.list("CreateNode") if c.resource.endswith(A2)]
    assert [c.code for c in creates] == ["RESOURCE_EXHAUSTED", "OK"]
    gone = next(c for c in resilient_emulator.calls.list("GetNode") if c.resource.endswith(A1)
                and c.code == "NOT_FOUND" and c.time >= creates[0].time)
    assert creates[0].time <= gone.time <= creates[1].time
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
    assert nodes_left() == []


def test_a_node_stuck_in_repair_past_the_maintenance_wait_is_re_created(resilient_emulator, platform_time):
    resilient_emulator.add_fault({"kind": "maintenance", **STRIKES_WHEN_IT_RUNS, "grace_seconds": 5,
                                  "match": {"nth": 1}})
    # The repair takes 300 s (Latencies.tpu_repair_seconds); the run waits 2 minutes for it, then moves on.
    policy = RetryPolicy(backoff=BACKOFF, budgets={"maintenance_wait": Budget(max_seconds=120, backoff=BACKOFF)})
    result = platform_time.drive(operator(FIRST_ATTEMPT_RUNS_UNTIL_STRUCK, resilience_policy=policy)).execute(context())
    found = decisions(result)
    assert found[-1] == ("maintenance_event", "recreate_node") and set(found[:-1]) == {("maintenance_event", "wait")}
    recreate = result["attempts"][0]["incidents"][-1]["decision"]
    assert recreate["rule"] == "maintenance-recreate"
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
    assert nodes_left() == []


@pytest.mark.parametrize("weigh", [True, False])
def test_a_repair_is_waited_for_as_long_as_the_run_s_new_node_took_then_re_created(
        resilient_emulator, platform_time, tmp_path, weigh):
    """Attempt 1 is preempted: its new node (backoff, deletion, create) is the run's measure of a new node. Attempt
    2's node then goes into a 300 s repair: weighed (the default), the run waits that measure and re-creates the
    node; with ``weigh_repairs=False`` the maintenance_wait budget (30 min) waits the repair out on the same node."""
    resilient_emulator.add_fault({"kind": "preemption", **STRIKES_WHEN_IT_RUNS, "grace_seconds": 5,
                                  "match": {"nth": 1}})
    resilient_emulator.add_fault({"kind": "maintenance", **STRIKES_WHEN_IT_RUNS, "grace_seconds": 5,
                                  "match": {"nth": 2}})
    marks = tmp_path / "struck"
    command = (f'if [ "$RESILIENT_ATTEMPT" -le 2 ] && [ ! -e {marks}-$RESILIENT_ATTEMPT ]; then '
               f'touch {marks}-$RESILIENT_ATTEMPT; echo "step 1"; sleep 120; fi')
    policy = RetryPolicy(backoff=BACKOFF, failover_backoff=BACKOFF, weigh_repairs=weigh,
                         budgets={"maintenance_wait": Budget(max_seconds=1800, backoff=BACKOFF)})
    result = platform_time.drive(operator(command, resilience_policy=policy)).execute(context())
    found = decisions(result)
    assert found[0] == ("preemption", "recreate_node")
    assert {"maintenance_event"} == {cls for cls, _ in found[1:]}
    if weigh:
        assert found[-1] == ("maintenance_event", "recreate_node")
        assert set(found[1:-1]) == {("maintenance_event", "wait")}
        recreate = result["attempts"][1]["incidents"][-1]["decision"]
        assert recreate["rule"] == "maintenance-recreate"
        assert "no repair seen yet" in recreate["reason"] and "a new node took" in recreate["reason"]
        assert created(resilient_emulator) == [A1, A2, A3] == deleted(resilient_emulator)
    else:
        assert set(found[1:]) == {("maintenance_event", "wait")}
        assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
    assert nodes_left() == []


# ------------------------------------------------------------------ workers
def test_a_crash_is_restarted_in_place_by_the_runner(resilient_emulator, platform_time, tmp_path):
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "worker": 0, "at_step": 3})
    result = platform_time.drive(operator(runs_until_struck_once(tmp_path / "struck", step=3))).execute(context())
    assert decisions(result) == [] and len(result["attempts"]) == 1  # the runner absorbed it: no new node
    assert created(resilient_emulator) == [A1]
    (log,) = (resilient_emulator.work_dir / "tpu").rglob("worker-0.log")
    assert "exit status 139 is transient_crash: restart 1 of 2" in log.read_text()


@pytest.mark.parametrize(("signal", "expected"), [
    ("SEGV", ("transient_crash", "resubmit")),  # exit 139: the transient-crash rule (seed 003)
    ("KILL", ("worker_failure", "resubmit")),  # exit 137: worker-restart budget = the runner's cap, then a retry
])
def test_a_worker_crashing_beyond_the_restart_cap_gets_a_new_node(resilient_emulator, platform_time, signal,
                                                                   expected):
    op = operator(only_in_attempt(1, f"kill -{signal} $$"), max_worker_restarts=1)
    result = platform_time.drive(op).execute(context())
    assert decisions(result) == [expected]  # one look decides: no RESTART_WORKERS the runner cannot carry out
    failure = result["attempts"][0]["incidents"][0]["failure"]
    assert failure["exit_code"] == {"SEGV": 139, "KILL": 137}[signal] and failure["worker_restarts"] == 1
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
    assert nodes_left() == []


def test_a_worker_whose_runner_never_reports_is_silent_past_the_startup_timeout_and_its_node_released(
        resilient_emulator, platform_time):
    """Issue 13: a setup script that breaks PATH keeps the runner from ever starting; the node is READY and
    nothing reports. Past ``startup_timeout`` the worker is WORKER_SILENT: a new node, twice, then the run
    fails -- and no node is left."""
    op = operator(steps(3), setup_script="export PATH=/nonexistent", startup_timeout=10.0)
    with pytest.raises(AirflowFailException, match="silent-worker") as failed:
        platform_time.drive(op).execute(ctx := context())
    assert "no report from its runner" in str(failed.value)
    assert stored_decisions(ctx) == [("worker_silent", "recreate_node")] * 2 + [("worker_silent", "give_up")]
    assert len(created(resilient_emulator)) == 3 and created(resilient_emulator) == deleted(resilient_emulator)
    assert nodes_left() == []


def test_a_permanent_exit_code_fails_without_re_creating(resilient_emulator, platform_time):
    with pytest.raises(AirflowFailException, match="permanent-user-error") as failed:
        platform_time.drive(operator("exit 3")).execute(ctx := context())
    assert "exit 3" in str(failed.value)
    assert stored_decisions(ctx) == [("permanent_user_error", "fail")]
    assert created(resilient_emulator) == [A1] == deleted(resilient_emulator)
    assert nodes_left() == []


class RecordingStore(Store):
    """A task state store that keeps a copy of every run state written."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[dict[str, Any]] = []

    def set(self, key: str, value: Any, **kwargs: Any) -> None:
        super().set(key, value, **kwargs)
        if key == STATE_KEY:
            self.written.append(json.loads(json.dumps(value)))


@dataclass(frozen=True)
class Run:
    """What one run left: the operator's result, every run state it wrote, the nodes created and deleted, the
    processes left, the nodes left."""

    result: dict[str, Any]
    store: RecordingStore
    created: list[str]
    deleted: list[str]
    processes: list[int]
    left: list[str]


def hang_command(first: str) -> str:
    """Attempt 1 runs ``first``; attempt 2 runs without logging a step, as a restore or a first collective that
    never ends; attempt 3 logs 3 steps and ends."""
    return f'case "$RESILIENT_ATTEMPT" in 1) {first};; 2) sleep 120;; *) {THREE_STEPS};; esac'


@pytest.fixture(scope="module")
def hung_twice() -> Iterator[Run]:
    """One run for the tests of both hangs: attempt 1 logs steps 1 and 2, then the fault freezes it (SIGSTOP);
    attempt 2 hangs before its first step; attempt 3 ends (:func:`hang_command`)."""
    with stepped_emulator() as emulator:
        emulator.add_fault({"kind": "hang", "at_step": 2, "match": {"nth": 1}})
        store = RecordingStore()
        op = operator(hang_command('echo "step 1"; echo "step 2"; sleep 120'), hang_timeout=HANG)
        result = PlatformTime(emulator).drive(op).execute(context(store))
        yield Run(result, store, created(emulator), deleted(emulator), emulator.tpu.processes(), nodes_left())


def test_a_hung_workload_is_detected_by_its_stalled_step(hung_twice):
    first = hung_twice.result["attempts"][0]
    assert decisions({"attempts": [first]}) == [("hang", "resubmit")]
    assert "no progress past step 2" in first["incidents"][0]["failure"]["message"]
    # The observer's memory lives in the run state: what it saw of A1 before its verdict was persisted.
    seen = [w["watch"] for w in hung_twice.store.written if w.get("watch", {}).get("resource") == f"{ZONE}/nodes/{A1}"]
    assert any(list(w.get("clocks", {})) == ["worker 0"] for w in seen)
    assert hung_twice.created[:2] == [A1, A2] and hung_twice.deleted[:1] == [A1]  # A1 ended before A2 began


HUNG_BEFORE_A_STEP = "without logging a step (hang_timeout 30 s)"


def test_a_workload_hung_before_its_first_step_is_detected_once_it_logged_steps(hung_twice):
    # TPU benchmark seed 15: a hang before the workload's first step was never seen (the runner kept
    # heartbeating, and a worker's step clock started with its first step). Attempt 2 logs no step; attempt 1
    # logged steps (until the fault froze it), so the run is known to log them.
    result = hung_twice.result
    assert decisions(result) == [("hang", "resubmit")] * 2 and len(result["attempts"]) == 3
    message = result["attempts"][1]["incidents"][0]["failure"]["message"]
    assert message.startswith("worker 0: running") and message.endswith(HUNG_BEFORE_A_STEP)
    assert hung_twice.created == [A1, A2, A3] == hung_twice.deleted
    assert hung_twice.left == [] and hung_twice.processes == []


def test_the_worker_watchdog_restarts_a_hung_command_in_place_on_the_same_node(resilient_emulator, platform_time):
    """With ``worker_hang_timeout`` the runner aborts the command the hang froze (no step line for 10 s of the VM's
    clock after step 2) and restarts it in place; the restarted command ends. One node, no hang for the provider to
    judge -- without the watchdog the same fault costs a new node (``hung_twice`` above)."""
    resilient_emulator.add_fault({"kind": "hang", "at_step": 2, "match": {"nth": 1}})
    command = (f'if [ "$RESILIENT_WORKER_RESTARTS" = 0 ]; then echo "step 1"; echo "step 2"; sleep 120; '
               f'else {THREE_STEPS}; fi')
    op = operator(command, hang_timeout=HANG, worker_hang_timeout=10.0)
    result = platform_time.drive(op).execute(context())
    assert result["state"] == "SUCCEEDED"
    assert decisions(result) == [] and len(result["attempts"]) == 1
    assert created(resilient_emulator) == [A1]
    log = (resilient_emulator.work_dir / "tpu" / A1 / "worker-0.log").read_text(errors="replace")
    assert re.search(r"hang: no step line for 1\d\.\d s after step 2 \(restarts so far: 0\)", log)
    assert "restart 1 of 2" in log and re.findall(r"^step \d+$", log, re.M) == ["step 1", "step 2"] * 2 + ["step 3"]


def test_the_worker_watchdog_must_be_shorter_than_hang_timeout():
    with pytest.raises(AirflowFailException, match=r"worker_hang_timeout: 30.0 must be less than hang_timeout"):
        operator("true", hang_timeout=HANG, worker_hang_timeout=30.0)
    assert "--hang-seconds" not in operator("true")._runner_args("v4-8")
    # watched from the first step line on; with expect_steps from the start (hang_timeout for start-up and restore)
    assert operator("true", worker_hang_timeout=60.0)._runner_args("v4-8")[-2:] == ["--hang-seconds", "60.0"]
    assert operator("true", worker_hang_timeout=60.0, expect_steps=True)._runner_args("v4-8")[-4:] == [
        "--hang-seconds", "60.0", "--start-seconds", "1800.0"]


def test_a_workload_declared_to_log_steps_is_detected_hung_before_its_first_step(resilient_emulator, platform_time):
    # With expect_steps declared, attempt 1 -- which never logged a step -- is judged before its first step too.
    op = operator(hang_command("sleep 120"), hang_timeout=HANG, expect_steps=True)
    result = platform_time.drive(op).execute(context())
    assert decisions(result) == [("hang", "resubmit")] * 2 and len(result["attempts"]) == 3
    messages = [a["incidents"][0]["failure"]["message"] for a in result["attempts"][:2]]
    assert all(m.startswith("worker 0: running") and m.endswith(HUNG_BEFORE_A_STEP) for m in messages)
    assert created(resilient_emulator) == [A1, A2, A3] == deleted(resilient_emulator)


# ------------------------------------------------------------------ node failures
@pytest.mark.parametrize(("fault", "expected"), [
    ({"kind": "preemption", "grace_seconds": 5}, ("preemption", "recreate_node")),
    ({"kind": "unhealthy", "health": "TIMEOUT"}, ("node_unhealthy", "recreate_node")),
    ({"kind": "unhealthy", "health": "UNHEALTHY_TENSORFLOW", "symptoms": ["LOW_MEMORY"]},
     ("node_unhealthy", "recreate_node")),
], ids=["preempted", "timeout", "unhealthy-tensorflow-with-symptoms"])
def test_preempted_or_unhealthy_nodes_are_re_created(resilient_emulator, platform_time, fault, expected):
    resilient_emulator.add_fault({**fault, **STRIKES_WHEN_IT_RUNS, "match": {"nth": 1}})
    result = platform_time.drive(operator(FIRST_ATTEMPT_RUNS_UNTIL_STRUCK)).execute(context())
    assert decisions(result) == [expected] and len(result["attempts"]) == 2
    failure = result["attempts"][0]["incidents"][0]["failure"]
    if fault["kind"] == "unhealthy":
        assert failure["node_health"] == fault["health"] and list(failure["symptoms"]) == fault.get("symptoms", [])
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
    assert nodes_left() == []


@pytest.mark.parametrize("on_notice", [True, False], ids=["checkpoint-on-notice", "without"])
def test_a_preempted_spot_node_saves_on_its_notice_and_the_next_node_resumes_there(resilient_emulator, platform_time,
                                                                                   on_notice):
    """A Spot node's preemption notice is a SIGTERM some seconds before the machine stops: with
    ``checkpoint_on_notice`` (default) the runner asks the demo workload -- which saves only every 100 steps and has
    no SIGTERM handler -- for a checkpoint, it saves at its next step, and the new node resumes from there; without,
    the SIGTERM ends it unsaved and the new node starts from step 0."""
    resilient_emulator.add_fault({"kind": "preemption", "grace_seconds": 30, "at_step": 4, "match": {"nth": 1}})
    command = (f"{sys.executable} {WORKLOAD} --epochs 12 --checkpoint-every 100 --epoch-seconds 0.05 "
               '--checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"')
    op = operator(command, spot=True, checkpoint_on_notice=on_notice, **PATIENT)
    result = platform_time.drive(op).execute(context())
    assert decisions(result) == [("preemption", "recreate_node")]
    resumed = result["attempts"][1].get("resumed_from_step")  # left out when None
    log = (resilient_emulator.work_dir / "tpu" / A1 / "worker-0.log").read_text(errors="replace")
    if on_notice:
        assert resumed is not None and resumed >= 4, log
    else:
        assert resumed is None, log
    assert result["checkpoint"]["step"] == 12
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)


@REAL_TIME  # the advice relates the saves' own times (the storage emulator's real clock) to the step reports'
@pytest.mark.parametrize("on_notice", [True, False], ids=["checkpoint-on-notice", "without"])
def test_a_preemption_a_save_on_notice_covered_counts_as_covered_in_the_checkpoint_advice(resilient_emulator, capfd,
                                                                                          on_notice):
    """The run's checkpoint advice (and the interval it hands the next attempt) tells the interruptions a save
    covered from the step reports and the saves: the workload saves every 3 epochs; preempted at epoch 5, it saves
    there on the notice (covered), or without ``checkpoint_on_notice`` loses the epochs past its save of epoch 3
    (the runner reports the epoch every heartbeat, 0.1 s: at most one epoch behind)."""
    resilient_emulator.add_fault({"kind": "preemption", "grace_seconds": 1, "at_step": 5, "match": {"nth": 1}})
    command = (f"{sys.executable} {WORKLOAD} --epochs 8 --checkpoint-every 3 --epoch-seconds 0.2 "
               '--checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"')
    ctx = context()
    op = operator(command, spot=True, checkpoint_on_notice=on_notice, resilience_policy=FAST_POLICY,
                  poll_interval=0.05, **PATIENT)
    result = op.execute(ctx)
    assert decisions(result) == [("preemption", "recreate_node")]
    advice = ctx["ti"].xcom["goodput"]["checkpoint_advice"]
    assert (advice["interruptions"], advice["covered"]) == (1, 1 if on_notice else 0), advice
    assert ("1 of them covered by a save" in advice["summary"]) is on_notice
    # The interval handed to attempt 2 (with two saves seen: the periodic one and the one on notice) says so too.
    captured = capfd.readouterr()  # the task's log, wherever the Airflow version's logging writes it
    handed = [line for line in (captured.out + captured.err).splitlines() if "Attempt 2: checkpoint every" in line]
    assert [("1 interruption(s), 1 covered by a save" in line) for line in handed] == ([True] if on_notice else []), \
        handed


# ------------------------------------------------------------------ capacity
def test_a_stockout_falls_back_to_another_zone(resilient_emulator, platform_time):
    resilient_emulator.add_fault({"kind": "stockout"})
    result = platform_time.drive(operator("echo ok", fallbacks=[EUROPE])).execute(context())
    assert "europe-west4-a" in result["node_name"]
    assert decisions(result) == [("capacity_stockout", "recreate_node")]
    assert [(c.resource.split("/")[3], c.code) for c in resilient_emulator.calls.list("CreateNode")] == [
        ("us-central2-b", "OK"), ("europe-west4-a", "OK")]  # the stockout fails the operation, not the call


def test_a_stockout_falls_back_to_another_accelerator_type(resilient_emulator, platform_time):
    resilient_emulator.add_fault({"kind": "stockout", "match": {"nth": 1}})
    op = operator("echo ok", fallbacks=[{"accelerator_type": "v4-16"}], keep_node=True)
    result = platform_time.drive(op).execute(context())
    assert decisions(result) == [("capacity_stockout", "recreate_node")]
    assert result["attempts"][1]["fallback_index"] == 0
    assert [c.resource.split("/")[3] for c in resilient_emulator.calls.list("CreateNode")] == ["us-central2-b"] * 2
    assert tpu_client().get_node(name=result["node_name"]).accelerator_type == "v4-16"
    assert nodes_left() == [result["node_name"]]  # keep_node: the last one, nothing else
    delete_kept(result["node_name"], platform_time)
    assert nodes_left() == []


def test_resource_exhausted_on_the_create_call_goes_to_the_policy_at_once(resilient_emulator, platform_time):
    """The emulator fails CreateNode's operation on a stockout, never the call; Google may refuse the call
    itself with RESOURCE_EXHAUSTED. The hook must hand that to the policy (creating=True), not retry it."""
    from google.api_core import exceptions as gexc

    op = platform_time.drive(operator("echo ok", fallbacks=[EUROPE]))
    hook, made, waits = op._tpu(), [], []

    def sleep(seconds: float) -> None:  # the hook's waits: a retry of the refused call would wait here first
        waits.append(list(made))
        platform_time.sleep(seconds)

    hook._sleep = sleep
    real = hook.client().create_node

    def create_node(**kwargs: Any) -> Any:
        made.append(kwargs["parent"])
        if len(made) == 1:
            raise gexc.ResourceExhausted("There is no more capacity in the zone \"us-central2-b\"")
        return real(**kwargs)

    hook.client().create_node = create_node
    result = op.execute(context())
    assert made == [ZONE, ZONE.replace("us-central2-b", "europe-west4-a")]
    assert [w for w in waits if w == [ZONE]] == []  # nothing waited in the hook after the refusal
    assert decisions(result) == [("capacity_stockout", "recreate_node")]
    assert [c.resource.split("/")[3] for c in resilient_emulator.calls.list("CreateNode")] == ["europe-west4-a"]
    assert nodes_left() == []


def test_the_hook_waits_for_an_operation_through_its_sleep_within_the_timeout():
    """A long-running operation is polled after each pause of the hook's ``sleep`` (api_core's cadence without
    its jitter: 1 s growing 1.5 times), so a test's stepped time reaches the wait; ``timeout`` seconds of pauses
    end it."""
    from concurrent.futures import TimeoutError as FutureTimeout
    from types import SimpleNamespace

    class Operation:
        def __init__(self, polls_to_done: int | None) -> None:
            self.polls, self.polls_to_done = 0, polls_to_done
            self.operation = SimpleNamespace(name="operations/1")

        def done(self) -> bool:
            self.polls += 1
            return self.polls == self.polls_to_done

        def result(self) -> str:
            return "node"

    pauses: list[float] = []
    hook = ResilientTPUHook(sleep=pauses.append)
    assert hook.wait_operation(Operation(1), 10.0) == "node" and pauses == []  # done at the first look
    assert hook.wait_operation(Operation(3), 10.0) == "node" and pauses == [1.0, 1.5]
    pauses.clear()
    with pytest.raises(FutureTimeout, match="operations/1 did not complete within 10 s"):
        hook.wait_operation(Operation(None), 10.0)
    assert pauses == [1.0, 1.5, 2.25, 3.375, 1.875]  # 10 s of pauses in all
    pauses.clear()
    hook.wait_operation(Operation(30), 3600.0)  # a create of minutes: the pauses grow to 5 s, no more
    assert pauses[:6] == [1.0, 1.5, 2.25, 3.375, 5.0, 5.0] and max(pauses) == 5.0


def test_a_queued_resource_without_valid_until_is_ended_by_the_queue_timeout(resilient_emulator, platform_time):
    """Seed 004: queuing past the limit ends the attempt even when the request itself never expires."""
    resilient_emulator.add_fault({"kind": "never_provision", "match": {"nth": 1}})
    policy = RetryPolicy(backoff=BACKOFF, failover_backoff=BACKOFF, queue_timeout_seconds=1800)  # seed 004: 30 min
    op = operator("echo ok", queued_resource=True, resilience_policy=policy, fallbacks=[EUROPE],
                  poll_interval=60.0, **PATIENT)
    result = platform_time.drive(op).execute(context())
    assert decisions(result) == [("queue_timeout", "recreate_node")]
    failure = result["attempts"][0]["incidents"][0]["failure"]
    assert "longer than the queue timeout" in failure["message"]
    assert [c.resource.split("/")[3] for c in resilient_emulator.calls.list("CreateQueuedResource")] == [
        "us-central2-b", "europe-west4-a"]
    assert resilient_emulator.calls.count("DeleteQueuedResource") >= 1 and queued_left() == []


def test_a_queued_resource_never_provisioned_fails_over_to_another_zone(resilient_emulator, platform_time):
    resilient_emulator.add_fault({"kind": "never_provision", "match": {"nth": 1}})
    op = operator("echo ok", valid_until_duration=600, fallbacks=[EUROPE], poll_interval=60.0,
                  **PATIENT)
    result = platform_time.drive(op).execute(context())
    assert decisions(result) == [("queue_timeout", "recreate_node")]
    assert "europe-west4-a" in result["node_name"]
    assert [c.resource.split("/")[3] for c in resilient_emulator.calls.list("CreateQueuedResource")] == [
        "us-central2-b", "europe-west4-a"]
    assert queued_left() == [] and nodes_left() == []


@pytest.mark.parametrize("provisioned", [False, True], ids=["never-provisioned", "granted"])
def test_a_deferred_wait_for_a_queued_resource_is_watched_in_the_trigger(resilient_emulator, platform_time,
                                                                         provisioned):
    """No loop in the operator: the wait for capacity is the watch's. Deferred, the trigger watches the request
    (a node that does not exist yet is no news) and brings the task back when the request is granted, or at
    its queue timeout -- which the operator judges, deletes the request for and fails over."""
    if not provisioned:
        resilient_emulator.add_fault({"kind": "never_provision", "match": {"nth": 1}})
    policy = RetryPolicy(backoff=BACKOFF, failover_backoff=BACKOFF, queue_timeout_seconds=1800)
    events: list[dict] = []
    ctx = context()
    result = run_deferred(lambda: operator("echo ok", queued_resource=True, deferrable=True, resilience_policy=policy,
                                           fallbacks=[EUROPE], poll_interval=60.0, **PATIENT), ctx,
                          events=events, platform_time=platform_time)
    watched = [e["status"] for e in events if isinstance(e, dict)]  # a backoff's DateTimeTrigger fires a time
    assert watched and "gone" not in watched  # the node not existing yet is waited for, not news
    zones = [c.resource.split("/")[3] for c in resilient_emulator.calls.list("CreateQueuedResource")]
    if provisioned:
        assert decisions(result) == [] and zones == ["us-central2-b"]
    else:
        assert decisions(result) == [("queue_timeout", "recreate_node")]
        assert zones == ["us-central2-b", "europe-west4-a"]
        assert "longer than the queue timeout" in result["attempts"][0]["incidents"][0]["failure"]["message"]
    assert result["state"] == "SUCCEEDED" and queued_left() == [] and nodes_left() == []


# ------------------------------------------------------------------ kills, reattach, keep_node
def test_a_killed_task_deletes_its_node(resilient_emulator, platform_time):
    op = platform_time.drive(operator("sleep 60"))

    def kill_while_watching(seconds: float) -> None:
        if ready(op._live_node):
            with platform_time.moving():  # on_kill's own hook waits on the wall clock
                op.on_kill()
            raise Killed
        platform_time.sleep(seconds)

    op._sleep = kill_while_watching
    with pytest.raises(Killed):
        op.execute(context())
    assert deleted(resilient_emulator) == [A1]
    assert nodes_left() == [] and resilient_emulator.tpu.processes() == []


def test_a_task_killed_while_its_queued_resource_waits_deletes_it_by_name(resilient_emulator, platform_time):
    resilient_emulator.add_fault({"kind": "never_provision"})
    op = platform_time.drive(operator("sleep 60", queued_resource=True))
    waiting = []

    def kill_while_queued(seconds: float) -> None:
        qr = tpu_client().get_queued_resource(name=f"{ZONE}/queuedResources/{A1}")
        waiting.append(qr.state.state.name)
        if qr.state.state.name == "WAITING_FOR_RESOURCES":
            with platform_time.moving():
                op.on_kill()
            raise Killed
        platform_time.sleep(seconds)

    op._sleep = kill_while_queued
    with pytest.raises(Killed):
        op.execute(context())
    assert waiting[-1] == "WAITING_FOR_RESOURCES"
    assert [c.resource for c in resilient_emulator.calls.list("DeleteQueuedResource")] == [
        f"{ZONE}/queuedResources/{A1}"]
    assert queued_left() == [] and nodes_left() == []


def test_a_retried_task_reattaches_to_its_node_instead_of_creating_another(resilient_emulator, platform_time,
                                                                           tmp_path):
    ctx = context()
    go = tmp_path / "go"
    command = f"while [ ! -e {go} ]; do sleep 0.05; done"  # runs until the test lets it end
    first = platform_time.drive(operator(command))

    def worker_dies(seconds: float) -> None:  # once a look saw the node running
        if ready(first._live_node):
            raise Killed
        platform_time.sleep(seconds)

    first._sleep = worker_dies
    with pytest.raises(Killed):
        first.execute(ctx)
    assert ctx["task_state_store"].data[STATE_KEY]["phase"] == "running" and nodes_left()
    go.touch()
    result = platform_time.drive(operator(command)).execute(ctx)  # Airflow's retry: a new process, the same store
    assert len(result["attempts"]) == 1 and decisions(result) == []
    assert created(resilient_emulator) == [A1] == deleted(resilient_emulator)
    assert resilient_emulator.calls.count("CreateNode") == 1 and nodes_left() == []


def test_a_retried_task_whose_store_is_empty_reattaches_to_its_node_found_by_its_labels(resilient_emulator,
                                                                                       platform_time, tmp_path):
    """Airflow 3.1 and 3.2 have no task state store: the run's state lives in the try's XComs, which a new try
    starts without. The retry finds the run's live node (attempt 2's: attempt 1's node was preempted and
    deleted) by the task instance's labels and watches it: no attempt 1 node again beside it."""
    go = tmp_path / "go"
    command = only_in_attempt(1, 'echo "step 1"; sleep 120', then=f"while [ ! -e {go} ]; do sleep 0.05; done")
    resilient_emulator.add_fault({"kind": "preemption", "grace_seconds": 5, **STRIKES_WHEN_IT_RUNS,
                                  "match": {"nth": 1}})
    first = platform_time.drive(operator(command))

    def worker_dies(seconds: float) -> None:  # once a look saw attempt 2's node running
        if first._live_node and first._live_node.endswith(A2) and ready(first._live_node):
            raise Killed
        platform_time.sleep(seconds)

    first._sleep = worker_dies
    with pytest.raises(Killed):
        first.execute(context())
    go.touch()
    result = platform_time.drive(operator(command)).execute(context())  # a new try: an empty store
    assert result["attempts"][0].get("resource_name") is None  # attempt 1's node is gone: no detail
    assert result["attempts"][-1]["resource_name"].endswith(A2) and decisions(result) == []
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator) and nodes_left() == []


@pytest.mark.parametrize("trigger_deleted_first", [True, False], ids=["on_kill-deleted-it", "still-running"])
def test_a_clear_of_a_deferred_task_re_creates_the_node_without_an_incident(resilient_emulator, platform_time,
                                                                          tmp_path, trigger_deleted_first):
    ctx, go = context(), tmp_path / "go"
    command = f"while [ ! -e {go} ]; do sleep 0.05; done"  # runs until the test lets it end
    with pytest.raises(TaskDeferred) as deferred:  # try 1 deferred, watching attempt 1's node
        platform_time.drive(operator(command, deferrable=True)).execute(ctx)
    assert created(resilient_emulator) == [A1]
    if trigger_deleted_first:  # Airflow calls the old trigger's on_kill on a Clear
        with platform_time.moving():
            asyncio.run(asyncio.wait_for(deferred.value.trigger.on_kill(), TIMEOUT))
    go.touch()
    cleared = {**context(ctx["task_state_store"]), "ti": TI(try_number=2, max_tries=1)}  # first try after a Clear
    result = platform_time.drive(operator(command)).execute(cleared)
    assert created(resilient_emulator) == [A1, A2] and nodes_left() == []
    first, _ = result["attempts"]
    assert first["ended_by"] == "clear" and not first.get("incidents") and decisions(result) == []
    assert ctx["task_state_store"].data[STATE_KEY]["segment_start"] == 1


def test_keep_node_keeps_the_last_node_and_links_point_at_it(resilient_emulator, platform_time):
    ctx = context()
    result = platform_time.drive(operator("echo ok", keep_node=True)).execute(ctx)
    assert nodes_left() == [result["node_name"]] and deleted(resilient_emulator) == []
    node = result["node_name"].rsplit("/", 1)[1]
    assert ctx["ti"].xcom["_link_TPUNodeLink"].endswith(f"/us-central2-b/{node}?project=test-project")
    assert "tpu.nodes.terminate" in unquote(ctx["ti"].xcom["_link_TPUAuditLogLink"])


# ------------------------------------------------------------------ arguments
@pytest.mark.parametrize(("command", "kwargs", "field"), [
    ("echo ok", {"zone": "us-central2"}, "zone"), ("echo ok", {"accelerator_type": "v4-12"}, "accelerator_type"),
    ("echo ok", {"accelerator_type": "v4-8000000"}, "accelerator_type"),  # issue 13: no million-VM slice
    ("", {}, "command"), ("echo ok", {"tpu_node_id": "Bad_Id"}, "tpu_node_id"),
    # Issue 13: an env key is pasted into the startup script; it must be a shell identifier, not code.
    ("echo ok", {"env": {"X=1; touch /tmp/pwned; Y": "v"}}, re.escape("env['X=1; touch /tmp/pwned; Y']")),
    ("echo ok", {"env": {"MY-VAR": "v"}}, re.escape("env['MY-VAR']")),
    ("echo ok", {"env": {"HF_TOKEN": 12345}}, re.escape("env['HF_TOKEN']")),
    ("echo ok", {"labels": {"team": 5}}, re.escape("labels['team']")),
    ("echo ok", {"heartbeat_seconds": 0}, "heartbeat_seconds"), ("echo ok", {"hang_timeout": -1}, "hang_timeout"),
    ("echo ok", {"expect_steps": "yes"}, "expect_steps")])
def test_bad_arguments_fail_before_any_node_exists(resilient_emulator, command, kwargs, field):
    kwargs = {**kwargs, "env": {**kwargs.get("env", {}), "SECRET": "hunter2"}}
    with pytest.raises(AirflowFailException, match=f"{field}:") as failed:
        operator(command, **kwargs).execute(context())
    assert resilient_emulator.calls.list() == []
    assert "hunter2" not in str(failed.value) and "12345" not in str(failed.value)  # no value in the message


def test_the_worker_restart_budget_is_the_runners_cap():
    assert operator("x", max_worker_restarts=1).resilience_policy.budget("worker_restarts").max_retries == 1
    default = operator("x", max_worker_restarts=None, resilience_policy=None)
    assert default.max_worker_restarts == 5 == default.resilience_policy.budget("worker_restarts").max_retries
    own = RetryPolicy.from_counts(worker_restarts=3)
    assert operator("x", max_worker_restarts=None, resilience_policy=own).max_worker_restarts == 3
    with pytest.raises(ValueError, match=r"max_worker_restarts: 2 differs .*\(3\)"):
        operator("x", max_worker_restarts=2, resilience_policy=own)
    with pytest.raises(AirflowFailException, match="max_worker_restarts: -1: give a whole number >= 0"):
        operator("x", max_worker_restarts=-1)


# ------------------------------------------------------------------ property
FAULTS = st.sampled_from([  # no fault time: whenever a fault strikes, no node may be left
    {"kind": "maintenance", "grace_seconds": 5},
    {"kind": "maintenance", "recover": False, "grace_seconds": 5},
    {"kind": "preemption", "grace_seconds": 5},
    {"kind": "unhealthy"},
    {"kind": "stockout"},
    {"kind": "crash", "exit_code": 139},
    {"kind": "hang", "at_step": 1},
    {"kind": "never_provision"},
])


HANG_FAULT = {"kind": "hang", "at_step": 1}
TERMINATED = {"kind": "maintenance", "recover": False, "grace_seconds": 5}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# The deferred kills that matter most, always tried: while watching a queued node; around the re-create
# of a terminated node (its backoff waits in the non-watching trigger); with keep_node. (A kill while a
# queued resource waits for capacity has a test of its own.)
@example(plan=[], failing=False, queued=True, keep_node=False, ending="kill-deferred", kill_at=0)
@example(plan=[TERMINATED], failing=False, queued=False, keep_node=False, ending="kill-deferred", kill_at=1)
@example(plan=[HANG_FAULT], failing=False, queued=False, keep_node=True, ending="kill-deferred", kill_at=0)
@given(plan=st.lists(FAULTS, max_size=3), failing=st.booleans(), queued=st.booleans(), keep_node=st.booleans(),
       ending=st.sampled_from(["run", "kill", "kill-deferred"]), kill_at=st.integers(0, 3))
def test_no_node_is_left_whatever_happens(resilient_emulator, platform_time, plan, failing, queued, keep_node,
                                          ending, kill_at):
    """Property (bounded): however the task ends -- success, failure, a kill while it runs (at any of its waits:
    a poll, a backoff, the wait for a node's creation or deletion), or a user's kill while it is deferred (the
    trigger's on_kill) -- no node or queued resource it created remains, unless ``keep_node``: then at most its
    last one does, and it can be deleted."""
    resilient_emulator.reset()
    for fault in plan:
        resilient_emulator.add_fault(fault)
    policy = RetryPolicy(backoff=BACKOFF, failover_backoff=BACKOFF,
                         budgets={"maintenance_wait": Budget(max_seconds=120, backoff=BACKOFF),
                                  "stockout": Budget(max_retries=2, backoff=BACKOFF)})
    command = "exit 1" if failing else steps(5, 0.05)

    def make() -> ResilientTPUWorkloadOperator:
        return operator(command, resilience_policy=policy, hang_timeout=HANG, keep_node=keep_node,
                        valid_until_duration=60 if queued else None, deferrable=ending == "kill-deferred")

    result, outcome = None, "succeeded"
    try:
        if ending == "kill-deferred":
            result = run_deferred(make, context(), kill_at=kill_at, platform_time=platform_time)
        else:
            op, sleeps = platform_time.drive(make()), []

            def sleep(seconds: float) -> None:
                sleeps.append(seconds)
                if ending == "kill" and len(sleeps) > kill_at:
                    with platform_time.moving():  # on_kill's own hook waits on the wall clock
                        op.on_kill()
                    raise Killed
                platform_time.sleep(seconds)

            op._sleep = sleep
            result = op.execute(context())
    except AirflowFailException:  # a failed task must clean up too ...
        outcome = "failed"
    except Killed:  # ... and a killed one
        outcome = "killed"
    event(f"{ending}: {outcome}{' (queued)' if queued else ''}{' keep_node' if keep_node else ''}")
    platform_time.advance_until(lambda: all(n.state.name != "DELETING" for n in tpu_client().list_nodes(parent=ZONE)))
    left, queued_resources = nodes_left(), queued_left()
    if not keep_node:
        assert left == [] and queued_resources == []
        return
    assert len(left) <= 1 and len(queued_resources) <= 1  # the last node only: earlier ones were deleted
    if result is not None:
        assert left == [result["node_name"]]
    hook = ResilientTPUHook(sleep=platform_time.sleep)
    for name in queued_resources:
        hook.delete_queued_resource(name)
    for name in left:
        hook.delete_node(name)  # (gone with its queued resource: fine)
    platform_time.advance_until(lambda: nodes_left() == [] and queued_left() == [])


def test_a_quota_refusal_of_create_node_waits_for_quota_then_creates(resilient_emulator, platform_time):
    """Seed 003 / DESIGN's quota row: a 429 on the create call itself is QUOTA_EXCEEDED, waited out with
    backoff (quota frees as other work ends) in the same zone, not failed over or retried in the hook."""
    resilient_emulator.add_fault({"kind": "quota", "service": "tpu", "times": 2,
                                  "quota_metric": "tpu.googleapis.com/TPUV4sPerProjectPerZone"})
    result = platform_time.drive(operator("echo ok", fallbacks=[EUROPE])).execute(context())
    assert decisions(result)[:2] == [("quota_exceeded", "resubmit")] * 2  # no node was made: submit again
    failure = result["attempts"][0]["incidents"][0]["failure"]
    assert failure["quota_metric"] == "tpu.googleapis.com/TPUV4sPerProjectPerZone"
    zones = [c.resource.split("/")[3] for c in resilient_emulator.calls.list("CreateNode")]
    assert zones == ["us-central2-b"] * 3  # two refused, one created; no failover for quota
    assert nodes_left() == []


# ------------------------------------------------------------------ secrets
HF_SECRET = "projects/test-project/secrets/hf-token"


def test_a_secret_reaches_the_workload_from_secret_manager_and_never_the_nodes_metadata(resilient_emulator,
                                                                                       platform_time):
    """Issue 13 item 5: ``secret_env`` names a Secret Manager secret; the worker runner reads it on the VM with
    the node's token. The node's metadata (startup script included) and the worker's log never hold it."""
    import hashlib

    secret = "hf_" + "Zq8x" * 8
    resilient_emulator.add_secret(HF_SECRET, secret)
    digest = hashlib.sha256(secret.encode()).hexdigest()
    check = (f"python3 -c \"import hashlib, os, sys; ok = hashlib.sha256(os.environ['HF_TOKEN'].encode())"
             f".hexdigest() == '{digest}'; print('secret-ok' if ok else 'secret-wrong'); sys.exit(0 if ok else 3)\"")
    op = operator(check, secret_env={"HF_TOKEN": HF_SECRET}, keep_node=True)
    result = platform_time.drive(op).execute(context())
    assert result["state"] == "SUCCEEDED"
    node = tpu_client().get_node(name=result["node_name"])
    assert HF_SECRET in node.metadata["startup-script"] and all(secret not in v for v in node.metadata.values())
    log = (resilient_emulator.work_dir / "tpu" / A1 / "worker-0.log").read_text()
    assert "secret-ok" in log and secret not in log
    assert resilient_emulator.secrets.accessed == [f"{HF_SECRET}/versions/1"]
    delete_kept(result["node_name"], platform_time)


def test_a_secret_that_cannot_be_read_fails_the_run_naming_it(resilient_emulator, platform_time):
    with pytest.raises(AirflowFailException, match="permanent_user_error"):
        platform_time.drive(operator("echo never", secret_env={"HF_TOKEN": HF_SECRET})).execute(ctx := context())
    assert stored_decisions(ctx) == [("permanent_user_error", "fail")]  # a new node would not find it either
    log = (resilient_emulator.work_dir / "tpu" / A1 / "worker-0.log").read_text()
    assert f"cannot read {HF_SECRET}/versions/latest for HF_TOKEN: HTTP 404" in log and "never" not in log
    assert nodes_left() == []


@pytest.mark.parametrize(("secret_env", "field"), [
    ({"HF TOKEN": HF_SECRET}, "secret_env['HF TOKEN']"),
    ({"HF_TOKEN": "hf_plaintext_value"}, "secret_env['HF_TOKEN']"),
    ({"MODE": HF_SECRET}, "secret_env['MODE']"),  # also in env
    ("HF_TOKEN=x", "secret_env"),
])
def test_bad_secret_env_is_refused_without_showing_its_value(secret_env, field):
    with pytest.raises(AirflowFailException) as refused:
        operator("echo", env={"MODE": "train"}, secret_env=secret_env)
    assert f"{field}:" in str(refused.value)


# ------------------------------------------------------------------ a checkpoint that will not load (issue 14)
def test_a_checkpoint_that_looks_complete_but_will_not_load_is_demoted(resilient_emulator, platform_time):
    """The newest checkpoint (step 6, COMMITTED) is corrupted after its marker was written: the attempt that
    resumes from it dies while loading it (an UnpicklingError: exit 1, which alone would be a user's error). The
    supervisor demotes step 6 -- recorded in the run state, never chosen again -- and the next attempt resumes
    from step 3, then trains to the end."""
    from airflow_provider_resilient.specs.common import ENV_DEMOTED_STEPS

    resilient_emulator.storage.create_bucket("tpu-ckpt")
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, "at_step": 7, "grace_seconds": 5,
                                  "match": {"nth": 1}})
    storage = resilient_emulator.storage_filesystem()
    corrupted: list[str] = []
    # No save on the event's notice: it would be newer than step 6, the checkpoint this scenario corrupts.
    op = platform_time.drive(operator(train(12), checkpoint_on_notice=False))

    def sleep(seconds: float) -> None:  # the backoff after attempt 1: the newest save goes bad
        newest = "tpu-ckpt/run/checkpoints/step_6"
        if not corrupted and storage.exists(f"{newest}/COMMITTED"):
            storage.pipe_file(f"{newest}/model.pkl", b"\x00 not a pickle")
            corrupted.append(newest)
        platform_time.sleep(seconds)

    op._sleep = sleep  # type: ignore[method-assign]
    ctx = context()
    result = op.execute(ctx)
    assert corrupted, "attempt 1 never saved step 6"
    attempts = result["attempts"]
    assert [a.get("resumed_from_step") for a in attempts] == [None, 6, 3]
    assert decisions(result) == [("maintenance_event", "recreate_node"), ("checkpoint_restore", "resubmit")]
    assert "step 6 demoted" in attempts[1]["incidents"][0]["failure"]["message"]
    assert ctx["task_state_store"].data[STATE_KEY]["demoted"] == [6]
    assert result["checkpoint"]["step"] == 12
    log = (resilient_emulator.work_dir / "tpu" / A3 / "worker-0.log").read_text()
    assert f"{ENV_DEMOTED_STEPS}" not in log and "skipping demoted checkpoint" in log  # the workload skipped it too
    assert created(resilient_emulator) == [A1, A2, A3] == deleted(resilient_emulator) and nodes_left() == []
