"""The study across attempts (:mod:`airflow_provider_resilient.supervisor.study`): what is kept, what is owed,
what a tuning job's end means, and the best trial -- pure functions, tested without a platform."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.policy import FailureClass
from airflow_provider_resilient.supervisor.study import (
    Study,
    TrialRecord,
    best_trial,
    classify_trial,
    grid_points,
    outcome,
    owed,
    study_summary,
    trial_key,
)

RATES = [0.0003, 0.001, 0.003, 0.01]
LR = {"parameter_id": "learning_rate", "discrete_value_spec": {"values": RATES}}
UNITS = {"parameter_id": "units", "integer_value_spec": {"min_value": 1, "max_value": 3}}
CRASH = "The replica workerpool0-0 exited with a non-zero status of 139. Termination reason: Error."
BUG = "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error."


def study(**kw: Any) -> Study:
    return Study(**{"metric_id": "accuracy", "goal": "MAXIMIZE", "max_trial_count": 4, "algorithm": "GRID_SEARCH",
                    "parameters": (LR,), **kw})


def trial(attempt: int, tid: int, state: str = "SUCCEEDED", metric: float | None = 0.9, reason: str | None = None,
          **params: Any) -> TrialRecord:
    return TrialRecord(attempt, f"job-{attempt}", str(tid), tuple(params.items()), state,
                       metric if state == "SUCCEEDED" else None,
                       classify_trial(reason) if state == "INFEASIBLE" else None, 0.0, 10.0)


def test_trial_keys_read_as_the_parameters_and_match_a_workloads_float_flag():
    assert trial_key({"learning_rate": 0.001}) == "learning_rate=0.001"
    assert trial_key({"units": 64.0, "learning_rate": float("0.0003")}) == "learning_rate=0.0003,units=64"
    assert trial_key({"optimizer": "adam w/ decay"}).startswith("sha256-")  # not a safe directory name


def test_a_one_parameter_grid_is_narrowed_to_exactly_the_points_not_kept():
    trials = [trial(1, 1, learning_rate=0.0003), trial(1, 2, "INFEASIBLE", reason=CRASH, learning_rate=0.001),
              trial(1, 3, learning_rate=0.003)]
    share = owed(study(), trials)
    assert share.max_trial_count == 2 and share.kept == 2 and share.rerun_keys == ()
    assert share.parameters[0]["discrete_value_spec"]["values"] == [0.001, 0.01]


def test_a_two_parameter_grid_that_cannot_be_cut_exactly_says_which_kept_points_may_run_again():
    s = study(max_trial_count=12, parameters=(LR, UNITS))
    trials = [trial(1, 1, learning_rate=0.0003, units=1)]
    share = owed(s, trials)
    assert share.rerun_keys == ("learning_rate=0.0003,units=1",)
    assert share.max_trial_count == 12  # 11 owed + the kept point the narrowed grid still holds
    whole_row = [trial(1, n + 1, learning_rate=0.0003, units=u) for n, u in enumerate((1, 2, 3))]
    share = owed(s, whole_row)
    assert share.rerun_keys == () and share.max_trial_count == 9
    assert share.parameters[0]["discrete_value_spec"]["values"] == RATES[1:]
    assert share.parameters[1]["discrete_value_spec"]["values"] == [1.0, 2.0, 3.0]  # an integer range, as values


def test_permanent_failures_are_kept_and_spend_the_failed_trial_limit_transient_ones_do_not():
    s = study(max_failed_trial_count=2)
    trials = [trial(1, 1, "INFEASIBLE", reason=BUG, learning_rate=0.0003),
              trial(1, 2, "INFEASIBLE", reason=CRASH, learning_rate=0.001)]
    share = owed(s, trials)
    assert share.max_trial_count == 3 and share.max_failed_trial_count == 1
    failure = outcome(s, trials, 1, "JOB_STATE_FAILED", None, 20.0)
    assert failure is not None and failure.failure_class is FailureClass.TRANSIENT_CRASH
    assert "trial 2 (learning_rate=0.001) failed" in failure.message and "3 trial(s) owed" in failure.message
    trials.append(trial(2, 1, "INFEASIBLE", reason=BUG, learning_rate=0.001))
    failure = outcome(s, trials, 2, "JOB_STATE_FAILED", None, 30.0)
    assert failure is not None and failure.failure_class is FailureClass.PERMANENT_USER_ERROR
    assert "reaching max_failed_trial_count 2" in failure.message


def test_a_job_that_succeeded_short_of_a_trial_that_crashed_owes_it_and_a_complete_study_is_a_success():
    s = study()
    trials = [trial(1, n + 1, learning_rate=r) for n, r in enumerate(RATES[:3])]
    trials.append(trial(1, 4, "INFEASIBLE", reason=CRASH, learning_rate=0.01))
    failure = outcome(s, trials, 1, "JOB_STATE_SUCCEEDED", None, 40.0)
    assert failure is not None and failure.failure_class is FailureClass.TRANSIENT_CRASH
    assert failure.timestamp == 10.0  # when the trial ended: detection counts from there
    trials.append(trial(2, 1, learning_rate=0.01, metric=0.97))
    assert outcome(s, trials, 2, "JOB_STATE_SUCCEEDED", None, 50.0) is None
    summary = study_summary(s, trials)
    assert summary["best_trial"]["parameters"] == {"learning_rate": 0.01} and summary["trials_rerun"] == 0
    assert summary["trials_run"] == 5 and summary["trial_seconds"] == {"kept": 40.0, "lost": 10.0, "goodput": 0.8}


def test_a_cancelled_jobs_stopped_trial_is_owed_and_the_jobs_own_failure_decides():
    from airflow_provider_resilient.policy import Failure, Platform

    stopped = trial(1, 1, "INFEASIBLE", reason="The trial was stopped because its HyperparameterTuningJob was "
                                               "cancelled.", learning_rate=0.0003)
    assert stopped.failure is not None and stopped.failure.failure_class is FailureClass.CANCELLED
    assert not stopped.kept
    cancelled = Failure(FailureClass.CANCELLED, Platform.VERTEX_AI, message="CANCELED")
    assert outcome(study(), [stopped], 1, "JOB_STATE_CANCELLED", cancelled, 5.0) is cancelled


def test_the_best_trial_follows_the_goal_across_attempts():
    trials = [trial(1, 1, metric=0.5, learning_rate=0.0003), trial(2, 1, metric=0.2, learning_rate=0.001)]
    best = best_trial(study(), trials)
    assert best is not None and best.attempt == 1
    best = best_trial(study(goal="MINIMIZE"), trials)
    assert best is not None and best.attempt == 2
    assert best_trial(study(), [trial(1, 1, "INFEASIBLE", reason=CRASH, learning_rate=0.01)]) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(RATES), st.sampled_from(["SUCCEEDED", "INFEASIBLE", "ACTIVE"]),
                          st.sampled_from([CRASH, BUG, "Internal error occurred for the current attempt."])),
                max_size=6),
       st.integers(min_value=1, max_value=4))
def test_owed_never_asks_for_a_kept_grid_point_and_kept_plus_owed_is_the_study(history, count):
    s = study(max_trial_count=count)
    trials = [trial(1, n + 1, state, reason=reason, learning_rate=rate)
              for n, (rate, state, reason) in enumerate(history)]
    share = owed(s, trials)
    kept = {t.key for t in trials if t.kept}
    points = grid_points(share.parameters) or []
    if share.kept and share.max_trial_count:  # (nothing owed: the study is complete, its spec unchanged)
        assert not kept & {trial_key(p) for p in points}
    assert share.max_trial_count == max(0, min(count - share.kept, len(points)))


@pytest.mark.parametrize("reason", [None, "", "a message no rule knows"])
def test_a_trial_without_a_known_reason_is_still_classified(reason):
    assert classify_trial(reason).failure_class is not None
