"""The pure observer: queue timeout, hang clocks, heartbeats, audit de-duplication, step progress, and its
memory through JSON -- the rules every shell (Vertex operator, its trigger, TPU operator) now shares."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.policy import FailureClass, Platform
from airflow_provider_resilient.supervisor import RunState, state_from_json, state_to_json
from airflow_provider_resilient.supervisor.observe import (
    AUDIT_IDS_KEPT,
    CHECKPOINTS,
    LOGGED,
    RESTARTING,
    Limits,
    Look,
    ProgressClock,
    WatchMemory,
    observe,
    worker_key,
)

T0 = 1_800_000_000.0
JOB = "projects/p/locations/us-central1/customJobs/1"
NODE = "projects/p/locations/us-central2-b/nodes/n-a1"


def reload(memory: WatchMemory) -> WatchMemory:
    return WatchMemory.from_json(json.loads(json.dumps(memory.to_json())))


def running(step: int | None) -> Look:
    return Look(JOB, Platform.VERTEX_AI, "JOB_STATE_RUNNING", T0, progress={CHECKPOINTS: step})


def test_a_job_queued_past_the_limit_is_a_queue_timeout_naming_the_limit():
    queued = Look(JOB, Platform.VERTEX_AI, "JOB_STATE_QUEUED", queued_since=T0)
    _, verdict = observe(WatchMemory(), queued, T0 + 1800, Limits(queue_seconds=1800))
    assert verdict.failure is None  # not past it yet
    _, verdict = observe(WatchMemory(), queued, T0 + 1801, Limits(queue_seconds=1800))
    assert verdict.failure.failure_class is FailureClass.QUEUE_TIMEOUT
    assert verdict.failure.terminate_reason == "QUEUED"
    assert "RetryPolicy.queue_timeout_seconds" in verdict.failure.message
    _, verdict = observe(WatchMemory(), queued, T0 + 9999, Limits())
    assert verdict.failure is None  # no limit: never


def test_a_checkpoint_clock_starts_at_the_first_look_and_a_stall_past_the_hang_timeout_is_a_hang():
    limits = Limits(hang_seconds=60)
    memory, verdict = observe(WatchMemory(), running(None), T0, limits)
    assert verdict.failure is None and verdict.progressed == ((CHECKPOINTS, 0, T0),)  # dates the start
    memory, verdict = observe(reload(memory), running(10), T0 + 50, limits)
    assert verdict.progressed == ((CHECKPOINTS, 10, T0 + 50),)
    memory, verdict = observe(reload(memory), running(10), T0 + 110, limits)
    assert verdict.failure is None and verdict.progressed == ()  # 60 s exactly is not past it
    _, verdict = observe(reload(memory), running(10), T0 + 111, limits)
    assert verdict.failure.failure_class is FailureClass.HANG and verdict.failure.timestamp == T0 + 50
    assert verdict.failure.message == "no new checkpoint past step 10 for 61 s (hang_timeout 60 s)"


def test_a_key_not_looked_at_is_not_judged_and_keeps_its_clock():
    memory, _ = observe(WatchMemory(), running(10), T0, Limits(hang_seconds=60))
    unlooked = Look(JOB, Platform.VERTEX_AI, "JOB_STATE_RUNNING", T0)  # the listing failed this time
    memory, verdict = observe(memory, unlooked, T0 + 500, Limits(hang_seconds=60))
    assert verdict.failure is None and memory.clock(CHECKPOINTS) == ProgressClock(10, T0)


def test_tpu_workers_stall_by_their_step_or_their_runner_heartbeat_and_are_named():
    limits = Limits(hang_seconds=100)
    look = Look(NODE, Platform.TPU, "READY", progress={worker_key(0): 5, worker_key(1): 5},
                heartbeats={worker_key(0): T0, worker_key(1): T0})
    memory, verdict = observe(WatchMemory(), look, T0, limits)
    assert verdict.failure is None and [k for k, _, _ in verdict.progressed] == ["worker 0", "worker 1"]
    moved = Look(NODE, Platform.TPU, "READY", progress={worker_key(0): 6, worker_key(1): 5},
                 heartbeats={worker_key(0): T0 + 150, worker_key(1): T0 + 150})
    _, verdict = observe(memory, moved, T0 + 150, limits)
    assert verdict.failure.worker_id == "1" and verdict.failure.platform is Platform.TPU
    assert verdict.failure.message.startswith("worker 1: no progress past step 5 for 150 s")
    silent = Look(NODE, Platform.TPU, "READY", heartbeats={worker_key(0): T0 + 150, worker_key(1): T0 + 10})
    _, verdict = observe(memory, silent, T0 + 150, limits)
    assert verdict.failure.message == "worker 1: no heartbeat for 140 s" and verdict.failure.timestamp == T0 + 10


def tpu(at: float, node: str = NODE, **steps: int) -> Look:
    """A look at ``node`` at ``at`` whose workers 0 and 1 run (a heartbeat just now); ``steps``: ``w0=5`` --
    worker 0 at step 5."""
    return Look(node, Platform.TPU, "READY", progress={worker_key(int(k[1:])): v for k, v in steps.items()},
                heartbeats={worker_key(0): at - 1, worker_key(1): at - 1})


def test_a_worker_that_has_logged_steps_is_hung_on_the_next_node_before_its_first_step():
    # TPU benchmark seed 15: a hang struck before the workload's first step, and the run waited to the horizon
    # (a worker's clock started with its first step, and the runner kept heartbeating).
    limits = Limits(hang_seconds=100)
    memory, _ = observe(WatchMemory(), tpu(T0, w0=5), T0, limits)  # worker 0 logs steps, worker 1 never does
    assert memory.stepping == ("worker 0",)
    next_node = NODE.replace("n-a1", "n-a2")
    memory, verdict = observe(reload(memory), tpu(T0 + 500, next_node), T0 + 500, limits)  # restoring: no step yet
    assert verdict.failure is None and verdict.progressed == ()  # no step: nothing for the ledger
    assert memory.clock("worker 0") == ProgressClock(None, T0 + 500) and memory.clock("worker 1") is None
    _, verdict = observe(reload(memory), tpu(T0 + 600, next_node), T0 + 600, limits)
    assert verdict.failure is None  # 100 s exactly is not past it
    _, verdict = observe(reload(memory), tpu(T0 + 601, next_node), T0 + 601, limits)
    assert verdict.failure.failure_class is FailureClass.HANG and verdict.failure.worker_id == "0"
    assert verdict.failure.timestamp == T0 + 500
    assert verdict.failure.message == "worker 0: running 101 s without logging a step (hang_timeout 100 s)"
    stepped, verdict = observe(reload(memory), tpu(T0 + 550, next_node, w0=6), T0 + 550, limits)
    assert verdict.progressed == (("worker 0", 6, T0 + 550),)
    assert stepped.clock("worker 0") == ProgressClock(6, T0 + 550)


def test_a_workload_that_never_logs_a_step_is_judged_by_its_heartbeat_unless_steps_are_expected():
    memory, _ = observe(WatchMemory(), tpu(T0), T0, Limits(hang_seconds=100))
    _, verdict = observe(memory, tpu(T0 + 10_000), T0 + 10_000, Limits(hang_seconds=100))
    assert verdict.failure is None and memory.stepping == () and memory.clocks == ()
    expected = Limits(hang_seconds=100, expect_steps=True)  # declared: the first attempt is judged too
    memory, _ = observe(WatchMemory(), tpu(T0), T0, expected)
    _, verdict = observe(memory, tpu(T0 + 101, w1=1), T0 + 101, expected)
    assert verdict.failure.worker_id == "0" and "without logging a step" in verdict.failure.message
    _, verdict = observe(memory, tpu(T0 + 101), T0 + 101, Limits(hang_seconds=None, expect_steps=True))
    assert verdict.failure is None  # no hang_timeout: never


def test_once_a_job_has_logged_a_step_its_logged_steps_and_not_its_checkpoints_are_its_progress():
    limits = Limits(hang_seconds=40)  # shorter than the checkpoint interval: only logged steps can keep up

    def job(checkpoint: int | None, logged: int | None, name: str = JOB) -> Look:
        return Look(name, Platform.VERTEX_AI, "JOB_STATE_RUNNING", T0, progress={CHECKPOINTS: checkpoint,
                                                                                  LOGGED: logged})

    memory, verdict = observe(WatchMemory(), job(None, None), T0, limits)  # nothing logged: checkpoints judge
    _, verdict = observe(memory, job(None, None), T0 + 41, limits)
    assert verdict.failure.message == "no new checkpoint past no checkpoint for 41 s (hang_timeout 40 s)"
    memory, verdict = observe(memory, job(None, 5), T0 + 30, limits)
    assert verdict.progressed == ((LOGGED, 5, T0 + 30),) and memory.stepping == (LOGGED,)
    memory, verdict = observe(reload(memory), job(None, 9), T0 + 60, limits)
    assert verdict.failure is None  # no checkpoint for 60 s, but the steps move
    _, verdict = observe(reload(memory), job(None, 9), T0 + 101, limits)
    assert verdict.failure.message == "logged step: no progress past step 9 for 41 s (hang_timeout 40 s)"
    retried = JOB.replace("/1", "/2")  # the next attempt: no step logged yet (restoring), then none at all
    memory, verdict = observe(reload(memory), job(5, None, retried), T0 + 200, limits)
    assert verdict.failure is None and memory.clock(LOGGED) == ProgressClock(None, T0 + 200)
    _, verdict = observe(reload(memory), job(5, None, retried), T0 + 241, limits)
    assert verdict.failure.message == "logged step: running 41 s without logging a step (hang_timeout 40 s)"


def test_an_in_place_restart_is_judged_by_restart_timeout_until_a_step_is_logged_after_the_replicas_exit():
    limits = Limits(hang_seconds=60, restart_seconds=300)  # a few step times; a restore that takes minutes

    def job(logged: int | None, lines: tuple[tuple[float, int, bool], ...] = (),
            exits: tuple[float, ...] = ()) -> Look:
        return Look(JOB, Platform.VERTEX_AI, "JOB_STATE_RUNNING", T0, progress={LOGGED: logged}, step_lines=lines,
                    restarts=exits)

    memory, _ = observe(WatchMemory(), job(9, ((T0, 9, False),)), T0, limits)
    # the replica was lost at T0 + 5; the look at T0 + 30 reads its exit: the restart clock starts then
    memory, verdict = observe(reload(memory), job(9, exits=(T0 + 5,)), T0 + 30, limits)
    assert verdict.failure is None and memory.clock(RESTARTING) == ProgressClock(None, T0 + 30)
    _, verdict = observe(reload(memory), job(9), T0 + 200, limits)
    assert verdict.failure is None  # 200 s without a step: a hang by hang_timeout, not while restarting
    # restored at T0 + 240 ("start step 6", not a step), a second exit before any step: the clock is not restarted
    memory, verdict = observe(reload(memory), job(9, ((T0 + 240, 6, True),), (T0 + 250,)), T0 + 260, limits)
    assert memory.clock(RESTARTING) == ProgressClock(None, T0 + 30)
    _, verdict = observe(reload(memory), job(9), T0 + 331, limits)
    assert verdict.failure.failure_class is FailureClass.HANG and verdict.failure.timestamp == T0 + 30
    assert verdict.failure.message == ("restarting: no step logged in the 301 s since a restart was read "
                                       "(restart_timeout 300 s)")
    # a step logged after the restart's start ends the restart clock: hang_timeout judges again, from that step
    memory, verdict = observe(reload(memory), job(7, ((T0 + 300, 7, False),)), T0 + 310, limits)
    assert verdict.failure is None and memory.clock(RESTARTING) is None
    _, verdict = observe(reload(memory), job(7), T0 + 371, limits)
    assert verdict.failure.message == "logged step: no progress past step 7 for 61 s (hang_timeout 60 s)"
    # an exit read beside an older step line still starts the clock; one older than the read's step does not
    memory, _ = observe(reload(memory), job(8, ((T0 + 380, 8, False),), (T0 + 385,)), T0 + 390, limits)
    assert memory.clock(RESTARTING) == ProgressClock(None, T0 + 390)
    memory, _ = observe(reload(memory), job(9, ((T0 + 400, 9, False),), (T0 + 395,)), T0 + 410, limits)
    assert memory.clock(RESTARTING) is None
    # the next attempt's start (its container, its restore: no step yet) has the same allowance
    retried = Look(JOB.replace("/1", "/2"), Platform.VERTEX_AI, "JOB_STATE_RUNNING", T0, progress={LOGGED: None})
    memory, _ = observe(reload(memory), retried, T0 + 500, limits)
    _, verdict = observe(reload(memory), retried, T0 + 800, limits)
    assert verdict.failure is None
    _, verdict = observe(reload(memory), retried, T0 + 801, limits)
    assert verdict.failure.message == "logged step: running 301 s without logging a step (restart_timeout 300 s)"


def test_without_restart_timeout_a_replicas_exit_changes_nothing():
    limits = Limits(hang_seconds=60)
    look = Look(JOB, Platform.VERTEX_AI, "JOB_STATE_RUNNING", T0, progress={LOGGED: 9})
    memory, _ = observe(WatchMemory(), look, T0, limits)
    exited = Look(JOB, Platform.VERTEX_AI, "JOB_STATE_RUNNING", T0, progress={LOGGED: 9}, restarts=(T0 + 5,))
    memory, _ = observe(memory, exited, T0 + 30, limits)
    assert memory.clock(RESTARTING) is None
    _, verdict = observe(memory, look, T0 + 61, limits)
    assert verdict.failure.message == "logged step: no progress past step 9 for 61 s (hang_timeout 60 s)"


def test_a_new_attempt_starts_its_clocks_afresh_and_audit_entries_count_once():
    memory, _ = observe(WatchMemory(), running(10), T0, Limits(hang_seconds=60))
    memory, verdict = observe(memory, Look(NODE, Platform.TPU, audit_ids=["a", "b", "a"]), T0 + 1, Limits())
    assert memory.resource == NODE and memory.clocks == () and verdict.fresh_audit == ("a", "b")
    memory, verdict = observe(reload(memory), Look(NODE, Platform.TPU, audit_ids=["b", "c"]), T0 + 2, Limits())
    assert verdict.fresh_audit == ("c",) and memory.audit_seen == ("a", "b", "c")
    ids = [str(i) for i in range(AUDIT_IDS_KEPT + 10)]
    memory, _ = observe(memory, Look(NODE, Platform.TPU, audit_ids=ids), T0 + 3, Limits())
    assert len(memory.audit_seen) == AUDIT_IDS_KEPT and memory.audit_seen[-1] == ids[-1]


def test_the_memory_travels_in_the_run_state_and_unreadable_parts_are_dropped():
    memory, _ = observe(WatchMemory(), running(None), T0, Limits())
    memory, _ = observe(memory, Look(JOB, audit_ids=["x"]), T0, Limits())
    state = state_from_json(json.loads(json.dumps(state_to_json(RunState().observed(memory)))))
    assert state.watch == memory and state.watch.clock(CHECKPOINTS) == ProgressClock(None, T0)
    assert "watch" not in state_to_json(RunState())  # nothing stored for nothing seen
    odd = WatchMemory.from_json({"resource": JOB, "clocks": {"checkpoints": "x", "worker 0": [3, T0]},
                                 "audit_seen": "y", "stepping": 3})
    assert odd == WatchMemory(JOB, (("worker 0", ProgressClock(3, T0)),), ())
    assert WatchMemory.from_json(None) == WatchMemory.from_json([1]) == WatchMemory()


steps = st.lists(st.tuples(st.floats(0, 500), st.none() | st.integers(0, 50)), min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(looks=steps, hang=st.floats(1, 300))
def test_a_hang_is_declared_exactly_when_a_step_stood_still_longer_than_the_timeout(looks, hang):
    memory, now, last_change, last_step = WatchMemory(), T0, None, object()
    for gap, step in looks:
        now += gap
        memory, verdict = observe(reload(memory), running(step), now, Limits(hang_seconds=hang))
        if step != last_step:
            last_change, last_step = now, step
        stalled = now - last_change > hang
        assert (verdict.failure is not None) == stalled
        if stalled:
            assert verdict.failure.timestamp == pytest.approx(last_change)


def test_a_silent_worker_is_judged_by_its_own_clock_and_speaking_stops_it():
    limits = Limits(startup_seconds=100)
    look = Look(NODE, Platform.TPU, "READY", silent=[worker_key(1)])
    memory, verdict = observe(WatchMemory(), look, T0, limits)
    assert verdict.failure is None and memory.clock("silent worker 1") == ProgressClock(None, T0)
    audit_only = Look(NODE, Platform.TPU, audit_ids=["a"])  # workers not looked at: the clock goes on
    memory, _ = observe(reload(memory), audit_only, T0 + 50, limits)
    _, verdict = observe(memory, look, T0 + 101, limits)
    assert verdict.failure.failure_class is FailureClass.WORKER_SILENT and verdict.failure.worker_id == "1"
    assert verdict.failure.timestamp == T0 and "startup_timeout 100 s" in verdict.failure.message
    spoke, _ = observe(memory, Look(NODE, Platform.TPU, "READY", silent=[]), T0 + 60, limits)
    assert spoke.clock("silent worker 1") is None
    _, verdict = observe(spoke, look, T0 + 200, limits)
    assert verdict.failure is None  # silent again from T0 + 200: a new clock


def test_a_start_line_read_before_the_first_logged_step_is_still_reported_to_the_ledger():
    """A read that falls between a process's ``resuming from step 0`` and its first ``step`` line finds the start
    line alone: the job has no logged step yet (the ledger's lead is still its checkpoints), but the start is the
    process's, and losing it left the ledger one start short (a restart then read as steps going back)."""
    from airflow_provider_resilient.supervisor.observe import ledger_steps

    now = 1_800_000_000.0
    look = Look("jobs/1", Platform.VERTEX_AI, "JOB_STATE_RUNNING", progress={LOGGED: None},
                step_lines=((now - 1, 0, True),))
    memory, verdict = observe(WatchMemory(), look, now, Limits(hang_seconds=60))
    assert LOGGED not in memory.stepping
    assert ledger_steps(verdict, memory, look) == [(now - 1, 0, True)]
    steps = Look("jobs/1", Platform.VERTEX_AI, "JOB_STATE_RUNNING", progress={LOGGED: 3},
                 step_lines=((now, 3, False),))
    memory, verdict = observe(memory, steps, now + 1, Limits(hang_seconds=60))
    assert ledger_steps(verdict, memory, steps) == [(now, 3, False)]
