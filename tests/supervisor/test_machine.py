"""The supervisor state machine: every phase x event, every failure class, budgets across reloads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.policy import (
    Attempt,
    Backoff,
    Failure,
    FailureClass,
    Fallback,
    Platform,
    RetryPolicy,
    decide,
    format_history,
    history_table,
)
from airflow_provider_resilient.supervisor import (
    TRANSITIONS,
    EndAttempt,
    Ended,
    Fail,
    IllegalTransition,
    JobFailed,
    JobSucceeded,
    MoveOff,
    Phase,
    RunState,
    Sleep,
    Started,
    Submit,
    SubmitFailed,
    Submitted,
    Succeed,
    Watch,
    WokeUp,
    state_from_json,
    state_to_json,
    step,
)

T0 = 1_800_000_000.0
CRASH = Failure(FailureClass.TRANSIENT_CRASH, Platform.VERTEX_AI, exit_code=139)
USER = Failure(FailureClass.PERMANENT_USER_ERROR, Platform.VERTEX_AI, exit_code=1)
ANY_REASON = "the task was cleared while this attempt ran"


def reload(state: RunState) -> RunState:
    """Through JSON text, as the task state store keeps it."""
    return state_from_json(json.loads(json.dumps(state_to_json(state))))


def running(job: str = "jobs/1", state: RunState | None = None) -> RunState:
    state, action = step(state or RunState(), Started(T0))
    assert action == Submit(1, -1)
    state, action = step(state, Submitted(job, T0 + 1))
    assert action == Watch(job)
    return state


def test_first_start_submits_then_watches_then_succeeds():
    state = running()
    state, action = step(state, JobSucceeded(T0 + 100))
    assert action == Succeed("jobs/1") and state.phase == "succeeded"
    assert state.history[0].ended_at == T0 + 100
    # A cleared successful task reruns nothing.
    again, action = step(reload(state), Started(T0 + 200))
    assert action == Succeed("jobs/1") and again == reload(state)


def test_transient_crash_sleeps_then_resubmits_the_next_attempt():
    state = running()
    state, action = step(state, JobFailed(CRASH, T0 + 50))
    sleep = action
    assert isinstance(sleep, Sleep) and sleep.seconds > 0 and state.phase == "sleeping"
    assert state.wake_at == pytest.approx(T0 + 50 + sleep.seconds)
    state, action = step(state, WokeUp(T0 + 50 + sleep.seconds))
    assert action == Submit(2, -1, "transient_crash")
    state, action = step(state, Submitted("jobs/2", T0 + 90, resumed_from_step=12, resumed_from_uri="gs://b/step_12"))
    assert action == Watch("jobs/2")
    assert [a.resource_name for a in state.history] == ["jobs/1", "jobs/2"]
    assert state.history[1].resumed_from_step == 12


def test_permanent_failure_fails_with_the_attempt_history():
    state, action = step(running(), JobFailed(USER, T0 + 5))
    fail = action
    assert isinstance(fail, Fail) and fail.decision == "fail" and state.phase == "failed"
    assert "attempt 1 jobs/1 from scratch -> permanent_user_error exit 1 -> fail" in fail.message


def test_stockout_with_fallbacks_fails_over_after_a_short_jittered_backoff():
    policy = RetryPolicy(fallbacks=(Fallback(region="europe-west4"),))
    stockout = Failure(FailureClass.CAPACITY_STOCKOUT, Platform.VERTEX_AI, region="us-central1")
    state, action = step(running(), JobFailed(stockout, T0 + 5), policy)
    sleep = action
    assert isinstance(sleep, Sleep) and 5.0 <= sleep.seconds <= 10.0  # failover_backoff: 10 s, jitter 0.5
    assert "failing over to fallback 1/1 (region=europe-west4)" in sleep.reason
    _, action = step(state, WokeUp(state.wake_at), policy)
    assert action == Submit(2, 0, "capacity_stockout")


def test_stockout_with_fallbacks_fails_over_at_once_when_asked():
    policy = RetryPolicy(fallbacks=(Fallback(region="europe-west4"),), failover_backoff=Backoff(initial_seconds=0.0))
    stockout = Failure(FailureClass.CAPACITY_STOCKOUT, Platform.VERTEX_AI, region="us-central1")
    _, action = step(running(), JobFailed(stockout, T0 + 5), policy)
    assert action == Submit(2, 0, "capacity_stockout")


def test_quota_on_the_create_call_records_an_attempt_without_a_job_and_backs_off():
    state, _ = step(RunState(), Started(T0))
    quota = Failure(FailureClass.QUOTA_EXCEEDED, Platform.VERTEX_AI, quota_metric="cpus")
    state, action = step(state, SubmitFailed(quota, T0 + 1))
    assert isinstance(action, Sleep)
    assert state.history[0].resource_name is None
    state, action = step(state, WokeUp(state.wake_at))
    assert action == Submit(2, -1, "quota_exceeded")


@pytest.mark.parametrize("failure_class", list(FailureClass))
def test_every_failure_class_follows_the_policy(failure_class):
    failure = Failure(failure_class, Platform.VERTEX_AI, node_state="TERMINATED")
    state = running()
    expected = decide(state.segment, failure, T0 + 5)
    new_state, action = step(state, JobFailed(failure, T0 + 5))
    if expected.action.is_terminal:
        assert isinstance(action, Fail) and new_state.phase == "failed"
    elif expected.delay_seconds > 0:
        assert isinstance(action, Sleep) and new_state.next_submit.attempt == 2
    else:
        assert action == Submit(2, expected.fallback_index, failure_class.value)
    assert new_state.history[-1].incidents[-1].decision == expected


def test_budgets_continue_across_a_reloaded_state():
    state = running()
    for n in range(3):  # three transient crashes: the budget is 3
        state, action = step(reload(state), JobFailed(CRASH, T0 + 100 * n))
        state, action = step(reload(state), WokeUp(state.wake_at))
        state, _ = step(reload(state), Submitted(f"jobs/{n + 2}", T0 + 100 * n + 50))
    state, action = step(reload(state), JobFailed(CRASH, T0 + 1000))
    assert isinstance(action, Fail) and action.decision == "give_up"


def test_a_task_cleared_after_failure_starts_a_new_segment_with_fresh_budgets():
    state = running()
    state, _ = step(state, JobFailed(USER, T0 + 5))
    state, action = step(reload(state), Started(T0 + 1000))
    assert action == Submit(2, -1) and state.segment_start == 1
    state, _ = step(state, Submitted("jobs/2", T0 + 1001))
    assert len(state.history) == 2 and state.segment == state.history[1:]


@pytest.mark.parametrize(("phase_state", "expected"), [
    ("running", Watch("jobs/1")),
    ("submitting", Submit(1, -1)),
])
def test_a_retried_task_reattaches_instead_of_submitting_again(phase_state, expected):
    state = running() if phase_state == "running" else step(RunState(), Started(T0))[0]
    again, action = step(reload(state), Started(T0 + 60))
    assert action == expected and again == reload(state)


def test_a_retried_task_keeps_sleeping_for_the_rest_of_the_backoff():
    state, action = step(running(), JobFailed(CRASH, T0 + 5))
    total = action.seconds
    _, action = step(reload(state), Started(T0 + 5 + total / 2))
    assert action.seconds == pytest.approx(total / 2)


def test_a_clear_of_a_running_task_ends_its_attempt_then_resumes_with_no_failure_and_fresh_budgets():
    state = running()
    state, _ = step(state, JobFailed(CRASH, T0 + 5))  # one transient crash: 1 of 3 spent
    state, _ = step(state, WokeUp(state.wake_at))
    state, _ = step(state, Submitted("jobs/2", T0 + 60))
    state, action = step(reload(state), Started(T0 + 100, cleared=True))
    assert action == EndAttempt("jobs/2", "the task was cleared while this attempt ran")
    assert state.phase == "ending"
    # The task dies while waiting for the end: the next try ends it again (idempotent), cleared or not.
    assert step(reload(state), Started(T0 + 110))[1] == action
    state, action = step(reload(state), Ended(T0 + 120))
    assert action == Submit(3, -1) and state.segment_start == 2
    ended = state.history[1]
    assert (ended.ended_by, ended.ended_at, ended.incidents) == ("clear", T0 + 120, ())
    state, _ = step(state, Submitted("jobs/3", T0 + 121))
    for n in range(3):  # the new segment has its full transient budget of 3
        state, action = step(reload(state), JobFailed(CRASH, T0 + 200 + 100 * n))
        assert isinstance(action, Sleep), action
        state, _ = step(state, WokeUp(state.wake_at))
        state, _ = step(state, Submitted(f"jobs/{n + 4}", T0 + 250 + 100 * n))
    assert "ended by a Clear" in "\n".join(format_history(state.history))
    assert any("ended by a Clear" in row and "new attempt" in row for row in history_table(state.history))


def test_a_clear_on_the_last_fallback_keeps_the_target_it_ran_on():
    state = RunState(phase="running", job_name="jobs/1", history=(Attempt(1, "jobs/1", fallback_index=1),))
    state, _ = step(state, Started(T0, cleared=True))
    assert step(state, Ended(T0 + 1))[1] == Submit(2, 1)


def test_an_attempt_that_succeeded_before_the_clear_could_end_it_is_the_result():
    state, _ = step(running(), Started(T0 + 100, cleared=True))
    state, action = step(state, Ended(T0 + 101, succeeded=True))
    assert action == Succeed("jobs/1") and state.phase == "succeeded"
    assert state.history[-1].ended_by is None


def test_a_clear_during_a_wait_for_platform_recovery_ends_the_attempt():
    wait = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING")
    state, action = step(running(), JobFailed(wait, T0 + 5))
    assert isinstance(action, Sleep) and state.next_submit is None
    assert step(reload(state), Started(T0 + 6, cleared=True))[1] == EndAttempt("jobs/1", ANY_REASON)


def test_a_clear_during_a_backoff_between_attempts_submits_the_next_one_now():
    state, action = step(running(), JobFailed(CRASH, T0 + 5))
    assert isinstance(action, Sleep) and state.next_submit == Submit(2, -1, "transient_crash")
    state, action = step(reload(state), Started(T0 + 6, cleared=True))
    assert action == Submit(2, -1, "transient_crash") and state.segment_start == 1


@pytest.mark.parametrize(("phase", "expected"), [("failed", Submit(2, -1)), ("succeeded", Succeed("jobs/1"))])
def test_a_clear_of_an_ended_run_behaves_as_before(phase, expected):
    state = RunState(phase=phase, job_name="jobs/1", history=(Attempt(1, "jobs/1", ended_at=T0),))
    assert step(state, Started(T0 + 1, cleared=True))[1] == expected


@pytest.mark.parametrize(("state", "event"), [
    (RunState(phase="running", job_name="j"), Ended(T0)),
    (RunState(phase="ending", job_name="j"), WokeUp(T0)),
    (RunState(phase="ending", job_name="j"), JobSucceeded(T0)),
    (RunState(), JobSucceeded(T0)),
    (RunState(), WokeUp(T0)),
    (RunState(), Submitted("x", T0)),
    (RunState(phase="running", job_name="j"), Submitted("x", T0)),
    (RunState(phase="succeeded", job_name="j"), JobFailed(CRASH, T0)),
    (RunState(phase="failed"), WokeUp(T0)),
])
def test_illegal_events_raise_and_leave_the_state_alone(state, event):
    before = reload(state)
    with pytest.raises(IllegalTransition, match=type(event).__name__):
        step(state, event)
    assert reload(state) == before


failures = st.builds(Failure, failure_class=st.sampled_from(list(FailureClass)),
                     platform=st.just(Platform.VERTEX_AI), exit_code=st.none() | st.integers(0, 255))


@settings(max_examples=100, deadline=None)
@given(outcomes=st.lists(st.none() | failures, min_size=1, max_size=25))
def test_any_run_round_trips_through_json_and_ends_in_order(outcomes):
    state, action = step(RunState(), Started(T0))
    now = T0
    for n, outcome in enumerate(outcomes):
        now += 10
        if isinstance(action, (Fail, Succeed)):
            break
        if isinstance(action, Sleep):
            state, action = step(state, WokeUp(now))
        elif isinstance(action, Submit):
            state, action = step(state, Submitted(f"jobs/{n}", now))
        elif isinstance(action, Watch):
            live = n % 2 == 0  # a TPU node whose workload failed; a hung job (else: ended by the platform)
            state, action = step(state, JobSucceeded(now, live) if outcome is None else
                                 JobFailed(outcome, now, live=live))
        elif isinstance(action, EndAttempt):  # never two attempts at once: the next comes after it ended
            assert state.phase == "ending" and state.next_submit is not None
            state, action = step(state, Ended(now))
        assert reload(state) == state
    numbers = [a.number for a in state.history]
    assert numbers == list(range(1, len(numbers) + 1))


# ------------------------------------------------------------------ the whole table: every phase x event
QUOTA = Failure(FailureClass.QUOTA_EXCEEDED, Platform.VERTEX_AI, message="quota")
ONE = (Attempt(1, "jobs/1", started_at=T0),)
#: A typical state of each phase.
STATES = {
    Phase.NEW: RunState(),
    Phase.SUBMITTING: RunState(phase=Phase.SUBMITTING, next_submit=Submit(1, -1)),
    Phase.RUNNING: RunState(phase=Phase.RUNNING, history=ONE, job_name="jobs/1"),
    Phase.SLEEPING: RunState(phase=Phase.SLEEPING, history=ONE, job_name="jobs/1",
                             next_submit=Submit(2, -1, "transient_crash"), wake_at=T0 + 30),
    Phase.ENDING: RunState(phase=Phase.ENDING, history=ONE, job_name="jobs/1"),
    Phase.SUCCEEDED: RunState(phase=Phase.SUCCEEDED, history=ONE, job_name="jobs/1"),
    Phase.FAILED: RunState(phase=Phase.FAILED, history=ONE, job_name="jobs/1"),
}
#: One event of each type, a minute after T0.
EVENTS = [Started(T0 + 60), Submitted("jobs/2", T0 + 60), SubmitFailed(QUOTA, T0 + 60), JobSucceeded(T0 + 60),
          JobFailed(CRASH, T0 + 60), WokeUp(T0 + 60), Ended(T0 + 60), MoveOff(T0 + 60, "maintenance window ahead")]
#: (phase, event type) -> (phase after, command type) for the legal pairs; every other pair is illegal.
LEGAL = {
    (Phase.NEW, Started): (Phase.SUBMITTING, Submit),
    (Phase.SUBMITTING, Started): (Phase.SUBMITTING, Submit),  # a retried try issues the same Submit
    (Phase.SUBMITTING, Submitted): (Phase.RUNNING, Watch),
    (Phase.SUBMITTING, SubmitFailed): (Phase.SLEEPING, Sleep),  # quota: back off
    (Phase.RUNNING, Started): (Phase.RUNNING, Watch),  # a task retry reattaches
    (Phase.RUNNING, JobSucceeded): (Phase.SUCCEEDED, Succeed),
    (Phase.RUNNING, JobFailed): (Phase.SLEEPING, Sleep),  # a crash: back off, then the next attempt
    (Phase.RUNNING, MoveOff): (Phase.ENDING, EndAttempt),  # off the node before a maintenance window
    (Phase.SLEEPING, Started): (Phase.SLEEPING, Sleep),  # the rest of the backoff
    (Phase.SLEEPING, WokeUp): (Phase.SUBMITTING, Submit),
    (Phase.ENDING, Started): (Phase.ENDING, EndAttempt),  # the try that was ending it died
    (Phase.ENDING, Ended): (Phase.SUBMITTING, Submit),
    (Phase.SUCCEEDED, Started): (Phase.SUCCEEDED, Succeed),
    (Phase.FAILED, Started): (Phase.SUBMITTING, Submit),  # cleared after failure: a new segment
}


def test_the_transition_table_is_exactly_the_legal_pairs():
    assert set(TRANSITIONS) == set(LEGAL)
    assert {phase for phase, _ in TRANSITIONS} == set(Phase)  # no phase is a dead end


@pytest.mark.parametrize("phase", list(Phase), ids=str)
@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_phase_and_event_pair(phase, event):
    state = STATES[phase]
    before = reload(state)
    expected = LEGAL.get((phase, type(event)))
    if expected is None:
        with pytest.raises(IllegalTransition, match=f"{type(event).__name__} is not allowed in phase '{phase}'"):
            step(state, event)
    else:
        after, command = step(state, event)
        assert (after.phase, type(command)) == expected
        assert reload(after) == after  # whatever it became is storable
    assert reload(state) == before  # states are immutable


def test_the_wait_path_looks_at_the_same_attempt_again_after_the_platform_recovers_it():
    """A maintenance event the platform repairs (seed 002: REPAIRING) is waited out: Sleep, then Watch the
    same node -- no new attempt -- across a reload, and the run then succeeds on it."""
    repairing = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING")
    state, command = step(running("nodes/a1"), JobFailed(repairing, T0 + 5))
    assert isinstance(command, Sleep) and state.phase == Phase.SLEEPING and state.next_submit is None
    assert state.wake_at == pytest.approx(T0 + 5 + command.seconds)
    _, again = step(reload(state), Started(T0 + 6))  # a task retry during the wait keeps waiting
    assert isinstance(again, Sleep) and again.seconds == pytest.approx(command.seconds - 1)
    state, command = step(reload(state), WokeUp(state.wake_at))
    assert command == Watch("nodes/a1") and state.phase == Phase.RUNNING and len(state.history) == 1
    state, command = step(reload(state), JobSucceeded(T0 + 900))
    assert command == Succeed("nodes/a1") and state.history[0].incidents[0].failure == repairing


@pytest.mark.parametrize(("state", "event"), [
    (RunState(phase=Phase.RUNNING), Started(T0)),  # running, but no job
    (RunState(phase=Phase.SUBMITTING), Submitted("j", T0)),  # submitting, but nothing to submit
    (RunState(phase=Phase.SLEEPING, wake_at=T0), WokeUp(T0)),  # asleep with nothing to wake for
    (RunState(phase=Phase.ENDING), Ended(T0)),
])
def test_a_state_missing_what_its_phase_implies_is_refused(state, event):
    with pytest.raises(IllegalTransition):
        step(state, event)


def test_a_stored_state_of_the_first_format_reads_back_and_an_unknown_phase_is_named():
    stored = {"phase": "sleeping", "segment_start": 0, "job_name": "jobs/1", "wake_at": T0 + 30,
              "next_submit": {"attempt": 2, "fallback_index": -1, "failure_class": "transient_crash"},
              "history": [{"number": 1, "resource_name": "jobs/1", "fallback_index": -1, "started_at": T0}]}
    state = state_from_json(stored)
    assert state.phase is Phase.SLEEPING and step(state, WokeUp(T0 + 30))[1] == Submit(2, -1, "transient_crash")
    assert state_to_json(state)["phase"] == "sleeping"
    with pytest.raises(ValueError, match="unknown phase 'paused'"):
        state_from_json({**stored, "phase": "paused"})


# ------------------------------------------------------------------ a failed attempt that is still live
HANG = Failure(FailureClass.HANG, Platform.VERTEX_AI, message="no checkpoint progress for 900 s")


def test_a_live_failed_attempt_is_ended_before_the_backoff_and_the_next_attempt():
    """Never two attempts at once, and nothing billed while waiting: the supervisor commands the end."""
    state, action = step(running(), JobFailed(HANG, T0 + 50, live=True))
    assert action == EndAttempt("jobs/1", action.reason) and "hang" in action.reason
    assert state.phase == "ending" and state.next_submit == Submit(2, -1, "hang") and state.wake_at > T0 + 50
    assert state.history[0].incidents[0].failure.failure_class == FailureClass.HANG  # recorded once, now
    # A task retry while it is being ended goes on ending it, keeping the decided next attempt.
    again, repeated = step(reload(state), Started(T0 + 51))
    assert isinstance(repeated, EndAttempt) and again == reload(state)
    ended, action = step(reload(state), Ended(T0 + 52))
    assert isinstance(action, Sleep) and action.seconds == pytest.approx(state.wake_at - (T0 + 52))
    assert ended.phase == "sleeping" and ended.history[0].ended_by is None  # a failure, not a Clear
    _, action = step(ended, WokeUp(state.wake_at))
    assert action == Submit(2, -1, "hang")
    # Ended after the backoff is over already: submit at once.
    late, action = step(reload(state), Ended(state.wake_at + 5))
    assert action == Submit(2, -1, "hang") and late.phase == "submitting" and late.segment_start == 0


def test_a_live_attempt_that_runs_nothing_is_ended_without_waiting_and_replaced_at_once():
    """A preempted TPU node (``JobFailed(stopped=True)``) cannot write beside the next one: its end is requested,
    not waited for, and the preemption budget has no backoff, so the next node follows the Ended at once. A task
    retry while it is being ended ends it again -- waiting this time (the supervisor no longer knows it stopped)."""
    preempted = Failure(FailureClass.PREEMPTION, Platform.TPU, node_state="PREEMPTED")
    state, action = step(running(), JobFailed(preempted, T0 + 50, live=True, stopped=True))
    assert action == EndAttempt("jobs/1", action.reason, wait=False)
    assert state.wake_at is None  # no backoff
    _, after = step(state, Ended(T0 + 50))
    assert after == Submit(2, -1, "preemption")
    _, again = step(reload(state), Started(T0 + 51))
    assert again == EndAttempt("jobs/1", again.reason)  # wait=True: the safe default
    _, running_node = step(running(), JobFailed(preempted, T0 + 50, live=True))
    assert running_node == EndAttempt("jobs/1", running_node.reason)  # not known to have stopped: wait


def test_a_live_attempt_that_finished_before_it_could_be_ended_is_the_result():
    state, _ = step(running(), JobFailed(HANG, T0 + 50, live=True))
    state, action = step(state, Ended(T0 + 52, succeeded=True))
    assert action == Succeed("jobs/1") and state.phase == "succeeded"


def test_a_clear_while_a_failed_attempt_is_ended_becomes_the_clears_ending():
    state, _ = step(running(), JobFailed(HANG, T0 + 50, live=True))
    state, action = step(reload(state), Started(T0 + 51, cleared=True))
    assert action == EndAttempt("jobs/1", ANY_REASON) and state.next_submit is None
    state, action = step(state, Ended(T0 + 52))
    assert action == Submit(2, -1) and state.segment_start == 1 and state.history[0].ended_by == "clear"


def test_a_run_that_stops_ends_what_is_still_live():
    _, action = step(running(), JobFailed(USER, T0 + 5, live=True))
    assert isinstance(action, Fail) and action.end == "jobs/1"
    _, action = step(running(), JobFailed(USER, T0 + 5))
    assert isinstance(action, Fail) and action.end is None  # the platform ended it already
    _, action = step(running(), JobSucceeded(T0 + 5, live=True))
    assert action == Succeed("jobs/1", end=True)
    # A cleared successful run reruns nothing and ends nothing (it was ended when the run stopped).
    done, _ = step(running(), JobSucceeded(T0 + 5, live=True))
    assert step(reload(done), Started(T0 + 9))[1] == Succeed("jobs/1")


def test_a_wait_for_in_place_recovery_keeps_the_live_attempt():
    wait = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING")
    state, action = step(running(), JobFailed(wait, T0 + 5, live=True))
    assert isinstance(action, Sleep) and state.phase == "sleeping" and state.next_submit is None


def test_a_stored_ending_of_the_previous_release_is_a_clears():
    """An ``ending`` state stored before failures could end attempts has no next Submit: it was a Clear's."""
    stored = {"phase": "ending", "history": [{"number": 1, "resource_name": "jobs/1", "fallback_index": -1}],
              "segment_start": 0, "job_name": "jobs/1"}
    state, action = step(state_from_json(stored), Ended(T0))
    assert action == Submit(2, -1) and state.history[0].ended_by == "clear"


# ------------------------------------------------------------------ demoted checkpoints (issue 14)
def resumed(step_: int | None, attempt_state: RunState, job: str, at: float, seen: int | None = None) -> RunState:
    """``attempt_state`` (submitting; running: the first attempt, from scratch) with the attempt created,
    resuming from ``step_``, and -- ``seen`` -- the observer's memory of it: the newest step it saw (None:
    watched, no step yet)."""
    from airflow_provider_resilient.supervisor.observe import ProgressClock, WatchMemory

    state = attempt_state
    if state.phase == "submitting":
        state, _ = step(state, Submitted(job, at, resumed_from_step=step_,
                                         resumed_from_uri=f"gs://b/step_{step_}" if step_ else None))
    return state.observed(WatchMemory(state.job_name, (("checkpoints", ProgressClock(seen, at)),)))


def to_next_submit(state: RunState, failure: Failure, at: float) -> tuple[RunState, Any]:
    """Fail the running attempt with ``failure`` and carry the decision out up to the next Submit."""
    state, action = step(state, JobFailed(failure, at))
    if isinstance(action, Sleep):
        state, action = step(state, WokeUp(at + action.seconds))
    return state, action


def test_a_restore_error_right_after_resuming_demotes_the_step_and_resubmits():
    """A checkpoint that looks complete but will not load: the attempt that resumed from step 18 failed before
    any progress with an unpickling error -- even as a permanent error, the run goes on from an older one."""
    state, _ = to_next_submit(resumed(None, running(), "jobs/1", T0, seen=18), CRASH, T0 + 10)
    state = resumed(18, state, "jobs/2", T0 + 20, seen=None)
    broken = Failure(FailureClass.PERMANENT_USER_ERROR, Platform.TPU, exit_code=1,
                     message="_pickle.UnpicklingError: invalid load key, '\\x00'.")
    state, action = to_next_submit(state, broken, T0 + 30)
    assert isinstance(action, Submit) and action.attempt == 3 and state.demoted == (18,)
    incident = state.history[1].incidents[-1]
    assert incident.failure.failure_class == FailureClass.CHECKPOINT_RESTORE
    assert "step 18 demoted" in incident.failure.message and "UnpicklingError" in incident.failure.message
    assert incident.decision.rule == "checkpoint-restore"
    assert reload(state).demoted == (18,)  # kept with the run state
    assert any("checkpoint_restore" in row for row in history_table(state.history))  # the history says it


def test_twice_in_a_row_from_the_same_step_demotes_it():
    state, _ = to_next_submit(resumed(None, running(), "jobs/1", T0, seen=9), CRASH, T0 + 5)
    state = resumed(9, state, "jobs/2", T0 + 6, seen=None)
    state, action = to_next_submit(state, CRASH, T0 + 10)
    assert state.demoted == () and isinstance(action, Submit)  # once could be bad luck
    state = resumed(9, state, "jobs/3", T0 + 20, seen=9)
    state, action = to_next_submit(state, CRASH, T0 + 30)
    assert state.demoted == (9,) and state.history[-1].incidents[-1].failure.failure_class == "checkpoint_restore"


@pytest.mark.parametrize(("seen", "failure", "why"), [
    (21, USER, "progress past the step: the checkpoint loaded"),
    (None, Failure(FailureClass.CAPACITY_STOCKOUT, Platform.VERTEX_AI), "not the workload's failure"),
    (None, CRASH, "a transient crash once, with no restore error"),
    (None, Failure(FailureClass.HANG, Platform.VERTEX_AI, message="no new checkpoint past step 18 for 1800 s"),
     "a hang once: its message is the observer's, not a restore error"),
])
def test_no_demotion_without_the_signs(seen, failure, why):
    state, _ = to_next_submit(resumed(None, running(), "jobs/1", T0, seen=18), CRASH, T0 + 5)
    state = resumed(18, state, "jobs/2", T0 + 6, seen=seen)
    state, _ = step(state, JobFailed(failure, T0 + 10))
    assert state.demoted == (), why


def test_a_run_from_scratch_is_never_demoted_and_the_budget_bounds_it():
    state, _ = step(resumed(None, running(), "jobs/1", T0, seen=None), JobFailed(USER, T0 + 1))
    assert state.demoted == () and state.phase == "failed"  # a plain user error, as before
    # Each demotion spends the demote_checkpoint budget (2): a third bad checkpoint is a plain failure.
    state, at = running(), T0
    state, _ = to_next_submit(resumed(None, state, "jobs/1", at, seen=30), CRASH, at + 1)
    broken = Failure(FailureClass.PERMANENT_USER_ERROR, Platform.VERTEX_AI, message="corrupt checkpoint")
    for n, start in enumerate((30, 27, 24), start=2):
        state = resumed(start, state, f"jobs/{n}", at + 10 * n, seen=None)
        state, action = to_next_submit(state, broken, at + 10 * n + 1)
    assert state.demoted == (30, 27) and isinstance(action, Fail) and action.decision == "fail"
