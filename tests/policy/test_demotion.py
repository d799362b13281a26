"""The checkpoint-demotion rule (``policy/demotion.py``) on explicit values: no supervisor, no emulator."""

from __future__ import annotations

import pytest

from airflow_provider_resilient.policy import (
    Attempt,
    Budget,
    Decision,
    DecisionAction,
    Failure,
    FailureClass,
    Incident,
    Platform,
    RetryPolicy,
    decide,
)
from airflow_provider_resilient.policy.demotion import (
    WORKLOAD_FAILURES,
    checkpoint_to_demote,
    demoted_failure,
    demotions_spent,
)

CRASH = Failure(FailureClass.TRANSIENT_CRASH, Platform.VERTEX_AI, exit_code=139)
USER = Failure(FailureClass.PERMANENT_USER_ERROR, Platform.TPU, exit_code=1)
UNPICKLE = Failure(FailureClass.PERMANENT_USER_ERROR, Platform.TPU, exit_code=1,
                   message="_pickle.UnpicklingError: invalid load key, '\\x00'.")
HANG = Failure(FailureClass.HANG, Platform.VERTEX_AI, message="no new checkpoint past step 18 for 1800 s")


@pytest.mark.parametrize("failure", [UNPICKLE, Failure(FailureClass.TRANSIENT_CRASH, Platform.VERTEX_AI,
                                                       message="EOFError: Ran out of input"),
                                     Failure(FailureClass.UNKNOWN, Platform.TPU, message="Orbax restore failed")])
def test_a_restore_error_without_progress_demotes_the_resume_step(failure):
    assert checkpoint_to_demote(failure, 18, ()) == 18  # watched, no step seen
    assert checkpoint_to_demote(failure, 18, None) == 18  # not watched: the message says it
    assert checkpoint_to_demote(failure, 18, (18, 12)) == 18  # steps up to the resume point are no progress


def test_progress_past_the_step_means_it_loaded():
    assert checkpoint_to_demote(UNPICKLE, 18, (19,)) is None
    assert checkpoint_to_demote(USER, 18, (18, 21)) is None


def test_a_permanent_error_demotes_only_when_the_attempt_was_watched():
    assert checkpoint_to_demote(USER, 18, ()) == 18  # a traceback right after loading
    assert checkpoint_to_demote(USER, 18, None) is None  # its progress unknown: a plain user error


def test_twice_in_a_row_from_the_same_step():
    assert checkpoint_to_demote(CRASH, 9, None) is None  # once could be bad luck
    assert checkpoint_to_demote(CRASH, 9, None, resumed_before=9, failed_before=FailureClass.TRANSIENT_CRASH) == 9
    assert checkpoint_to_demote(HANG, 9, (9,), resumed_before=9, failed_before=FailureClass.HANG) == 9
    # The attempt before resumed from another step, failed otherwise, or recorded no failure: not "again".
    assert checkpoint_to_demote(CRASH, 9, None, resumed_before=6, failed_before=FailureClass.TRANSIENT_CRASH) is None
    assert checkpoint_to_demote(CRASH, 9, None, resumed_before=9, failed_before=FailureClass.PREEMPTION) is None
    assert checkpoint_to_demote(CRASH, 9, None, resumed_before=9, failed_before=None) is None
    assert checkpoint_to_demote(CRASH, 9, None, resumed_before=9,
                                failed_before=FailureClass.CHECKPOINT_RESTORE) is None  # already a demotion


def test_a_hang_is_not_a_restore_error_by_its_message():
    """A hang's message is the observer's ("no new checkpoint ..."), not the workload's words."""
    assert checkpoint_to_demote(HANG, 18, ()) is None


@pytest.mark.parametrize("failure_class", sorted(set(FailureClass) - WORKLOAD_FAILURES))
def test_only_the_workloads_own_failures_demote(failure_class):
    failure = Failure(failure_class, Platform.TPU, message="checkpoint restore failed")
    assert checkpoint_to_demote(failure, 18, (), resumed_before=18, failed_before=FailureClass.TRANSIENT_CRASH) is None


def test_nothing_to_demote_from_scratch_or_twice():
    assert checkpoint_to_demote(UNPICKLE, None, ()) is None
    assert checkpoint_to_demote(UNPICKLE, 18, (), demoted=(18,)) is None
    assert checkpoint_to_demote(UNPICKLE, 15, (), demoted=(18,)) == 15


def test_the_demote_checkpoint_budget_bounds_the_demotions_of_a_segment():
    assert checkpoint_to_demote(UNPICKLE, 18, (), spent=1) == 18
    assert checkpoint_to_demote(UNPICKLE, 18, (), spent=2) is None  # the default budget: 2
    none = RetryPolicy(budgets={"demote_checkpoint": Budget(max_retries=0, reset_on_progress=False)})
    assert checkpoint_to_demote(UNPICKLE, 18, (), policy=none) is None
    more = RetryPolicy(budgets={"demote_checkpoint": Budget(max_retries=5, reset_on_progress=False)})
    assert checkpoint_to_demote(UNPICKLE, 18, (), spent=4, policy=more) == 18


def test_the_demoted_failure_and_what_it_spends():
    failure = demoted_failure(UNPICKLE, 18)
    assert failure.failure_class == FailureClass.CHECKPOINT_RESTORE and failure.exit_code == 1
    assert failure.message.startswith("step 18 demoted: it looks complete but will not load")
    assert "permanent_user_error: _pickle.UnpicklingError" in failure.message
    decision = decide((Attempt(1, "jobs/1", -1, started_at=0.0, resumed_from_step=18),), failure, 10.0)
    assert decision.action == DecisionAction.RESUBMIT and decision.rule == "checkpoint-restore"
    spent = Incident(failure, decision)
    other = Incident(CRASH, Decision(DecisionAction.RESUBMIT, "transient-crash", "retry"))
    segment = (Attempt(1, "jobs/1", -1, incidents=(other,)), Attempt(2, "jobs/2", -1, incidents=(spent,)),
               Attempt(3, "jobs/3", -1, incidents=(spent, other)))
    assert demotions_spent(segment) == 2 and demotions_spent(()) == 0
