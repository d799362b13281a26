"""The supervisor state machine: every phase x event, every failure class, budgets across reloads."""

from __future__ import annotations

import json

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
    EndAttempt,
    Ended,
    Fail,
    IllegalTransition,
    JobFailed,
    JobSucceeded,
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
    state, actions = step(state or RunState(), Started(T0))
    assert actions == [Submit(1, -1)]
    state, actions = step(state, Submitted(job, T0 + 1))
    assert actions == [Watch(job)]
    return state


def test_first_start_submits_then_watches_then_succeeds():
    state = running()
    state, actions = step(state, JobSucceeded(T0 + 100))
    assert actions == [Succeed("jobs/1")] and state.phase == "succeeded"
    assert state.history[0].ended_at == T0 + 100
    # A cleared successful task reruns nothing.
    again, actions = step(reload(state), Started(T0 + 200))
    assert actions == [Succeed("jobs/1")] and again == reload(state)


def test_transient_crash_sleeps_then_resubmits_the_next_attempt():
    state = running()
    state, actions = step(state, JobFailed(CRASH, T0 + 50))
    (sleep,) = actions
    assert isinstance(sleep, Sleep) and sleep.seconds > 0 and state.phase == "sleeping"
    assert state.wake_at == pytest.approx(T0 + 50 + sleep.seconds)
    state, actions = step(state, WokeUp(T0 + 50 + sleep.seconds))
    assert actions == [Submit(2, -1, "transient_crash")]
    state, actions = step(state, Submitted("jobs/2", T0 + 90, resumed_from_step=12, resumed_from_uri="gs://b/step_12"))
    assert actions == [Watch("jobs/2")]
    assert [a.resource_name for a in state.history] == ["jobs/1", "jobs/2"]
    assert state.history[1].resumed_from_step == 12


def test_permanent_failure_fails_with_the_attempt_history():
    state, actions = step(running(), JobFailed(USER, T0 + 5))
    (fail,) = actions
    assert isinstance(fail, Fail) and fail.decision == "fail" and state.phase == "failed"
    assert "attempt 1 jobs/1 from scratch -> permanent_user_error exit 1 -> fail" in fail.message


def test_stockout_with_fallbacks_fails_over_after_a_short_jittered_backoff():
    policy = RetryPolicy(fallbacks=(Fallback(region="europe-west4"),))
    stockout = Failure(FailureClass.CAPACITY_STOCKOUT, Platform.VERTEX_AI, region="us-central1")
    state, actions = step(running(), JobFailed(stockout, T0 + 5), policy)
    (sleep,) = actions
    assert isinstance(sleep, Sleep) and 5.0 <= sleep.seconds <= 10.0  # failover_backoff: 10 s, jitter 0.5
    assert "failing over to fallback 1/1 (region=europe-west4)" in sleep.reason
    _, actions = step(state, WokeUp(state.wake_at), policy)
    assert actions == [Submit(2, 0, "capacity_stockout")]


def test_stockout_with_fallbacks_fails_over_at_once_when_asked():
    policy = RetryPolicy(fallbacks=(Fallback(region="europe-west4"),), failover_backoff=Backoff(initial_seconds=0.0))
    stockout = Failure(FailureClass.CAPACITY_STOCKOUT, Platform.VERTEX_AI, region="us-central1")
    _, actions = step(running(), JobFailed(stockout, T0 + 5), policy)
    assert actions == [Submit(2, 0, "capacity_stockout")]


def test_quota_on_the_create_call_records_an_attempt_without_a_job_and_backs_off():
    state, _ = step(RunState(), Started(T0))
    quota = Failure(FailureClass.QUOTA_EXCEEDED, Platform.VERTEX_AI, quota_metric="cpus")
    state, actions = step(state, SubmitFailed(quota, T0 + 1))
    assert isinstance(actions[0], Sleep)
    assert state.history[0].resource_name is None
    state, actions = step(state, WokeUp(state.wake_at))
    assert actions == [Submit(2, -1, "quota_exceeded")]


@pytest.mark.parametrize("failure_class", list(FailureClass))
def test_every_failure_class_follows_the_policy(failure_class):
    failure = Failure(failure_class, Platform.VERTEX_AI, node_state="TERMINATED")
    state = running()
    expected = decide(state.segment, failure, T0 + 5)
    new_state, actions = step(state, JobFailed(failure, T0 + 5))
    if expected.action.is_terminal:
        assert isinstance(actions[0], Fail) and new_state.phase == "failed"
    elif expected.delay_seconds > 0:
        assert isinstance(actions[0], Sleep) and new_state.next_submit.attempt == 2
    else:
        assert actions == [Submit(2, expected.fallback_index, failure_class.value)]
    assert new_state.history[-1].incidents[-1].decision == expected


def test_budgets_continue_across_a_reloaded_state():
    state = running()
    for n in range(3):  # three transient crashes: the budget is 3
        state, actions = step(reload(state), JobFailed(CRASH, T0 + 100 * n))
        state, actions = step(reload(state), WokeUp(state.wake_at))
        state, _ = step(reload(state), Submitted(f"jobs/{n + 2}", T0 + 100 * n + 50))
    state, actions = step(reload(state), JobFailed(CRASH, T0 + 1000))
    assert isinstance(actions[0], Fail) and actions[0].decision == "give_up"


def test_a_task_cleared_after_failure_starts_a_new_segment_with_fresh_budgets():
    state = running()
    state, _ = step(state, JobFailed(USER, T0 + 5))
    state, actions = step(reload(state), Started(T0 + 1000))
    assert actions == [Submit(2, -1)] and state.segment_start == 1
    state, _ = step(state, Submitted("jobs/2", T0 + 1001))
    assert len(state.history) == 2 and state.segment == state.history[1:]


@pytest.mark.parametrize(("phase_state", "expected"), [
    ("running", [Watch("jobs/1")]),
    ("submitting", [Submit(1, -1)]),
])
def test_a_retried_task_reattaches_instead_of_submitting_again(phase_state, expected):
    state = running() if phase_state == "running" else step(RunState(), Started(T0))[0]
    again, actions = step(reload(state), Started(T0 + 60))
    assert actions == expected and again == reload(state)


def test_a_retried_task_keeps_sleeping_for_the_rest_of_the_backoff():
    state, actions = step(running(), JobFailed(CRASH, T0 + 5))
    total = actions[0].seconds
    _, actions = step(reload(state), Started(T0 + 5 + total / 2))
    assert actions[0].seconds == pytest.approx(total / 2)


def test_a_clear_of_a_running_task_ends_its_attempt_then_resumes_with_no_failure_and_fresh_budgets():
    state = running()
    state, _ = step(state, JobFailed(CRASH, T0 + 5))  # one transient crash: 1 of 3 spent
    state, _ = step(state, WokeUp(state.wake_at))
    state, _ = step(state, Submitted("jobs/2", T0 + 60))
    state, actions = step(reload(state), Started(T0 + 100, cleared=True))
    assert actions == [EndAttempt("jobs/2", "the task was cleared while this attempt ran")]
    assert state.phase == "ending"
    # The task dies while waiting for the end: the next try ends it again (idempotent), cleared or not.
    assert step(reload(state), Started(T0 + 110))[1] == actions
    state, actions = step(reload(state), Ended(T0 + 120))
    assert actions == [Submit(3, -1)] and state.segment_start == 2
    ended = state.history[1]
    assert (ended.ended_by, ended.ended_at, ended.incidents) == ("clear", T0 + 120, ())
    state, _ = step(state, Submitted("jobs/3", T0 + 121))
    for n in range(3):  # the new segment has its full transient budget of 3
        state, actions = step(reload(state), JobFailed(CRASH, T0 + 200 + 100 * n))
        assert isinstance(actions[0], Sleep), actions
        state, _ = step(state, WokeUp(state.wake_at))
        state, _ = step(state, Submitted(f"jobs/{n + 4}", T0 + 250 + 100 * n))
    assert "ended by a Clear" in "\n".join(format_history(state.history))
    assert any("ended by a Clear" in row and "new attempt" in row for row in history_table(state.history))


def test_a_clear_on_the_last_fallback_keeps_the_target_it_ran_on():
    state = RunState(phase="running", job_name="jobs/1", history=(Attempt(1, "jobs/1", fallback_index=1),))
    state, _ = step(state, Started(T0, cleared=True))
    assert step(state, Ended(T0 + 1))[1] == [Submit(2, 1)]


def test_an_attempt_that_succeeded_before_the_clear_could_end_it_is_the_result():
    state, _ = step(running(), Started(T0 + 100, cleared=True))
    state, actions = step(state, Ended(T0 + 101, succeeded=True))
    assert actions == [Succeed("jobs/1")] and state.phase == "succeeded"
    assert state.history[-1].ended_by is None


def test_a_clear_during_a_wait_for_platform_recovery_ends_the_attempt():
    wait = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING")
    state, actions = step(running(), JobFailed(wait, T0 + 5))
    assert isinstance(actions[0], Sleep) and state.next_submit is None
    assert step(reload(state), Started(T0 + 6, cleared=True))[1] == [EndAttempt("jobs/1", ANY_REASON)]


def test_a_clear_during_a_backoff_between_attempts_submits_the_next_one_now():
    state, actions = step(running(), JobFailed(CRASH, T0 + 5))
    assert isinstance(actions[0], Sleep) and state.next_submit == Submit(2, -1, "transient_crash")
    state, actions = step(reload(state), Started(T0 + 6, cleared=True))
    assert actions == [Submit(2, -1, "transient_crash")] and state.segment_start == 1


@pytest.mark.parametrize(("phase", "expected"), [("failed", [Submit(2, -1)]), ("succeeded", [Succeed("jobs/1")])])
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
    state, actions = step(RunState(), Started(T0))
    now = T0
    for n, outcome in enumerate(outcomes):
        now += 10
        action = actions[0]
        if isinstance(action, (Fail, Succeed)):
            break
        if isinstance(action, Sleep):
            state, actions = step(state, WokeUp(now))
        elif isinstance(action, Submit):
            state, actions = step(state, Submitted(f"jobs/{n}", now))
        elif isinstance(action, Watch):
            state, actions = step(state, JobSucceeded(now) if outcome is None else JobFailed(outcome, now))
        assert reload(state) == state
    numbers = [a.number for a in state.history]
    assert numbers == list(range(1, len(numbers) + 1))
