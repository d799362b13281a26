"""One test per row of DESIGN.md's retry rules table, fed with the seeds' exact texts.

Each row: the raw observation goes through the real classifier, then the loop of ``sim.run`` applies
the default policy until it stops; we assert the class, the rule, the sequence of actions and the
budget at which it gives up.
"""

from __future__ import annotations

import pytest

from airflow_provider_resilient.policy import (
    DEFAULT_POLICY,
    Attempt,
    DecisionAction,
    Failure,
    FailureClass,
    Fallback,
    Platform,
    RetryPolicy,
    classify_ai_platform_job,
    classify_create_error,
    classify_exit_status,
    classify_queue_wait,
    classify_tpu_audit_entry,
    classify_tpu_node,
    classify_vertex_job,
    decide,
)
from airflow_provider_resilient.worker import PREFLIGHT_EXIT_CODE

from .sim import repeat, run

R = DecisionAction.RESUBMIT
W = DecisionAction.WAIT
RN = DecisionAction.RECREATE_NODE
RW = DecisionAction.RESTART_WORKERS
FAIL = DecisionAction.FAIL
GIVE_UP = DecisionAction.GIVE_UP

# Seed 003 / REFERENCE.md, verbatim.
EXIT_139 = "The replica workerpool0-0 exited with a non-zero status of 139. Termination reason: Error."
OOM = "The replica workerpool0-0 ran out of memory and exited with a non-zero status of 137."
STOCKOUT = "Resources are insufficient in region: us-central1. Try a different region or use a different accelerator."
INTERNAL = "Internal error occurred for the current attempt."
QUOTA = ("The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_cpus")
START_ERROR = "The replica workerpool0-0 exited with a non-zero status of 127. Termination reason: StartError."
LEGACY_EXIT_1 = "The replica master 0 exited with a non-zero status of 1."


def vertex_failed(message: str, code: int = 3) -> Failure:
    failure = classify_vertex_job("JOB_STATE_FAILED", code, message)
    assert failure is not None
    return failure


def actions(decisions):
    return [d.action for d in decisions]


@pytest.mark.parametrize("code", [6, 134, 11, 139])
def test_transient_user_code_crash_is_resubmitted_three_times_then_given_up(code):
    message = f"The replica workerpool0-0 exited with a non-zero status of {code}. Termination reason: Error."
    failure = vertex_failed(message)
    assert failure.failure_class == FailureClass.TRANSIENT_CRASH
    assert failure.exit_code == code and failure.worker_id == "workerpool0-0"
    decisions, history = run(repeat(failure))
    assert actions(decisions) == [R, R, R, GIVE_UP]
    assert {d.rule for d in decisions} == {"transient-crash"}
    assert [d.budget_used for d in decisions[:3]] == [1, 2, 3]
    assert len(history) == 4  # three resubmissions, each a new attempt


def test_permanent_user_code_error_fails_at_once():
    failure = vertex_failed("The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error.")
    assert failure.failure_class == FailureClass.PERMANENT_USER_ERROR
    decisions, _ = run(repeat(failure))
    assert actions(decisions) == [FAIL]
    assert decisions[0].rule == "permanent-user-error"
    assert "exit 1" in decisions[0].reason


def test_out_of_memory_fails_without_retry():
    failure = vertex_failed(OOM)
    assert failure.failure_class == FailureClass.OUT_OF_MEMORY
    assert failure.exit_code == 137 and failure.worker_id == "workerpool0-0"
    decisions, _ = run(repeat(failure))
    assert actions(decisions) == [FAIL]
    assert decisions[0].rule == "out-of-memory"


def test_out_of_memory_climbs_a_machine_type_ladder_when_fallbacks_name_it():
    policy = RetryPolicy(fallbacks=(
        Fallback(machine_type="n1-highmem-16", on=frozenset({FailureClass.OUT_OF_MEMORY})),
        Fallback(machine_type="n1-highmem-32", on=frozenset({FailureClass.OUT_OF_MEMORY})),
    ))
    decisions, history = run(repeat(vertex_failed(OOM)), policy)
    assert actions(decisions) == [R, R, FAIL]
    assert [d.fallback_index for d in decisions[:2]] == [0, 1]
    assert [a.fallback_index for a in history] == [-1, 0, 1]


def test_capacity_stockout_backs_off_three_times_then_gives_up():
    failure = vertex_failed(STOCKOUT)
    assert failure.failure_class == FailureClass.CAPACITY_STOCKOUT
    assert failure.region == "us-central1"
    decisions, _ = run(repeat(failure))
    assert actions(decisions) == [R, R, R, GIVE_UP]
    delays = [d.delay_seconds for d in decisions[:3]]
    assert delays[0] >= 120 * 0.75 and delays[1] > delays[0] * 1.2 and delays[2] > delays[1] * 1.2


def test_capacity_stockout_fails_over_along_fallbacks_before_using_its_budget():
    policy = RetryPolicy(fallbacks=(Fallback(region="europe-west4"), Fallback(region="asia-east1")))
    decisions, history = run(repeat(vertex_failed(STOCKOUT)), policy)
    assert actions(decisions) == [R, R, R, R, R, GIVE_UP]
    assert [d.failed_over for d in decisions] == [True, True, False, False, False, False]
    assert [a.fallback_index for a in history] == [-1, 0, 1, 1, 1, 1]


def test_resource_exhausted_on_create_is_a_stockout():
    failure = classify_create_error(8, "The zone does not have enough resources available to fulfil the request.")
    assert failure.failure_class == FailureClass.CAPACITY_STOCKOUT
    assert decide((Attempt(1),), failure, 0.0).rule == "capacity-stockout"


def test_quota_exceeded_at_submit_waits_up_to_the_queue_timeout_then_names_the_metric():
    failure = classify_create_error(429, QUOTA)
    assert failure.failure_class == FailureClass.QUOTA_EXCEEDED
    assert failure.quota_metric == "aiplatform.googleapis.com/custom_model_training_cpus"
    decisions, _ = run(repeat(failure), step_seconds=60.0)
    assert decisions[-1].action == GIVE_UP
    assert all(d.action == R for d in decisions[:-1]) and len(decisions) > 3
    assert "quota aiplatform.googleapis.com/custom_model_training_cpus" in decisions[-1].reason
    # Time, not count, ends it: the streak lasted at least the 30 min queue timeout (seed 004).
    assert decisions[-1].decided_at - decisions[0].decided_at >= DEFAULT_POLICY.queue_timeout_seconds


@pytest.mark.parametrize("code", [126, 127, 128])
def test_container_failed_to_start_fails_without_retry(code):
    failure = classify_exit_status(code, platform=Platform.VERTEX_AI)
    assert failure is not None and failure.failure_class == FailureClass.CONTAINER_START_ERROR
    start_error = vertex_failed(START_ERROR)
    assert start_error.failure_class == FailureClass.CONTAINER_START_ERROR
    assert start_error.terminate_reason == "StartError"
    for f in (failure, start_error):
        decisions, _ = run(repeat(f))
        assert actions(decisions) == [FAIL]
        assert decisions[0].rule == "container-start-error"


def test_internal_error_is_resubmitted_twice_three_attempts_in_total():
    failure = vertex_failed(INTERNAL, code=13)
    assert failure.failure_class == FailureClass.INTERNAL_ERROR
    decisions, history = run(repeat(failure))
    assert actions(decisions) == [R, R, GIVE_UP]
    assert len(history) == 3


def test_tpu_worker_failure_restarts_in_place_five_times_then_retries_the_job_three_times():
    failure = classify_exit_status(137, worker_id="1")
    assert failure is not None and failure.failure_class == FailureClass.WORKER_FAILURE
    decisions, history = run(repeat(failure))
    expected = ([RW] * 5 + [R]) * 3 + [RW] * 5 + [GIVE_UP]
    assert actions(decisions) == expected
    assert len(history) == 4  # the first attempt and three job retries
    assert decisions[5].rule == "worker-job-retry" and decisions[-1].rule == "worker-job-retry"


def test_tpu_worker_restart_counts_are_per_worker():
    def worker(i: str) -> Failure:
        failure = classify_exit_status(-9, worker_id=i)
        assert failure is not None
        return failure

    decisions, _ = run([worker("0")] * 5 + [worker("1")] * 5 + [worker("0")])
    assert actions(decisions) == [RW] * 10 + [R]


def test_tpu_worker_restarts_reported_by_the_runner_count_against_the_budget():
    failure = classify_exit_status(143, worker_id="0", worker_restarts=5)
    assert failure is not None
    assert decide((Attempt(1),), failure, 0.0).action == R


def test_vertex_worker_failure_is_a_job_retry():
    # On Vertex AI the platform already restarted the worker in place (seed 003).
    failure = vertex_failed(
        "The replica workerpool1-0 exited with a non-zero status of 137. Termination reason: Error.")
    assert failure.failure_class == FailureClass.WORKER_FAILURE
    decisions, _ = run(repeat(failure))
    assert actions(decisions) == [R, R, R, GIVE_UP]


def test_maintenance_event_that_recovers_is_waited_out():
    repairing = classify_tpu_node("REPAIRING", "UNHEALTHY_MAINTENANCE",
                                  health_description="The TPU had a maintenance event at 2022-01-26T03:44:36Z")
    assert repairing is not None and repairing.failure_class == FailureClass.MAINTENANCE_EVENT
    decisions, history = run([repairing] * 3)
    assert actions(decisions) == [W, W, W]
    assert len(history) == 1  # nothing was resubmitted


def test_maintenance_event_not_back_in_time_recreates_the_node():
    repairing = classify_tpu_node(6, 5)
    assert repairing is not None
    decisions, _ = run(repeat(repairing), step_seconds=60.0)
    first_recreate = actions(decisions).index(RN)
    assert set(actions(decisions)[:first_recreate]) == {W}
    waited = decisions[first_recreate].decided_at - decisions[0].decided_at
    assert waited >= 900  # the maintenance_wait budget
    assert decisions[first_recreate].rule == "maintenance-recreate"


def test_maintenance_terminate_recreates_the_node_three_times_then_gives_up():
    entry = {
        "logName": "projects/p/logs/cloudaudit.googleapis.com%2Fsystem_event",
        "severity": "NOTICE",
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "serviceName": "tpu.googleapis.com",
            "methodName": "tpu.nodes.terminate",
            "resourceName": "projects/p/locations/us-central2-b/nodes/train-node",
            "metadata": {"terminateReason": "Maintenance event without auto-recovery"},
        },
    }
    failure = classify_tpu_audit_entry(entry)
    assert failure is not None and failure.failure_class == FailureClass.MAINTENANCE_EVENT
    assert failure.node_state == "TERMINATED"
    assert failure.terminate_reason == "Maintenance event without auto-recovery"
    decisions, history = run(repeat(failure))
    assert actions(decisions) == [RN, RN, RN, GIVE_UP]
    assert {d.rule for d in decisions} == {"maintenance-terminated"}
    assert len(history) == 4


def test_maintenance_restart_entry_waits():
    entry = {"protoPayload": {"methodName": "tpu.nodes.restart",
                              "resourceName": "projects/p/locations/z/nodes/n"}}
    failure = classify_tpu_audit_entry(entry)
    assert failure is not None and failure.node_state == "RESTARTING"
    assert decide((Attempt(1),), failure, 0.0).action == W


def test_spot_preemption_recreates_three_times():
    failure = classify_tpu_node("PREEMPTED")
    assert failure is not None and failure.failure_class == FailureClass.PREEMPTION
    decisions, _ = run(repeat(failure))
    assert actions(decisions) == [RN, RN, RN, GIVE_UP]
    assert decisions[0].rule == "preemption"


def test_preflight_failure_isolates_the_node_three_times_by_default():
    failure = classify_exit_status(PREFLIGHT_EXIT_CODE, worker_id="0")
    assert failure is not None and failure.failure_class == FailureClass.PREFLIGHT_FAILURE
    decisions, _ = run(repeat(failure))
    assert actions(decisions) == [RN, RN, RN, GIVE_UP]
    one = RetryPolicy.from_counts(preflight_retries=1)
    assert actions(run(repeat(failure), one)[0]) == [RN, GIVE_UP]


def test_queue_timeout_fails_with_a_clear_message_or_fails_over():
    expired = classify_vertex_job("JOB_STATE_EXPIRED", None, None, started=False)
    assert expired is not None and expired.failure_class == FailureClass.QUEUE_TIMEOUT
    decisions, _ = run(repeat(expired))
    assert actions(decisions) == [FAIL]
    assert "queue_timeout" in decisions[0].reason
    policy = RetryPolicy(fallbacks=(Fallback(strategy="SPOT"),))
    decisions, _ = run(repeat(expired), policy)
    assert actions(decisions) == [R, FAIL]
    assert decisions[0].failed_over and decisions[0].fallback_index == 0


def test_a_job_queued_past_the_queue_timeout_is_a_queue_timeout():
    """Seed 003: a job may stay JOB_STATE_QUEUED until quota frees; seed 004: 30 min, then it exits."""
    created = 1_800_000_000.0
    limit = DEFAULT_POLICY.queue_timeout_seconds
    assert limit == 1800.0
    for state in ("JOB_STATE_QUEUED", "JOB_STATE_PENDING"):
        assert classify_queue_wait(state, created, created + limit, limit) is None
        waited = classify_queue_wait(state, created, created + 31 * 60, limit, resource="jobs/7")
        assert waited is not None and waited.failure_class == FailureClass.QUEUE_TIMEOUT
        assert "jobs/7 waited 1860 s in" in waited.message and "queue timeout of 1800 s" in waited.message
    assert classify_queue_wait("JOB_STATE_RUNNING", created, created + 7200, limit) is None
    tpu = classify_queue_wait("WAITING_FOR_RESOURCES", created, created + 7200, limit, platform=Platform.TPU)
    assert tpu is not None and tpu.failure_class == FailureClass.QUEUE_TIMEOUT and tpu.platform == Platform.TPU
    assert classify_queue_wait("ACTIVE", created, created + 7200, limit, platform=Platform.TPU) is None
    assert classify_queue_wait("JOB_STATE_QUEUED", None, created, limit) is None
    # Then the rule: fail with the message, or move to the next fallback.
    assert actions(run(repeat(waited))[0]) == [FAIL]
    assert actions(run(repeat(waited), RetryPolicy(fallbacks=(Fallback(region="europe-west4"),)))[0]) == [R, FAIL]


def test_hang_is_a_transient_crash_sharing_its_budget():
    hang = Failure(FailureClass.HANG, Platform.VERTEX_AI, message="no heartbeat for 1800 s")
    crash = vertex_failed(EXIT_139)
    decisions, _ = run([crash, hang, crash, hang])
    assert actions(decisions) == [R, R, R, GIVE_UP]
    assert {d.budget for d in decisions} == {"transient_crash"}


def test_cancelled_by_user_is_never_retried():
    failure = classify_vertex_job("JOB_STATE_CANCELLED")
    assert failure is not None and failure.failure_class == FailureClass.CANCELLED
    decisions, _ = run(repeat(failure))
    assert actions(decisions) == [FAIL]


def test_unknown_failure_takes_the_documented_default_one_retry():
    failure = vertex_failed("Something nobody has seen before.", code=0)
    assert failure.failure_class == FailureClass.UNKNOWN
    decisions, _ = run(repeat(failure))
    assert actions(decisions) == [R, GIVE_UP]
    assert decisions[0].rule == "unknown"


def test_legacy_ai_platform_error_messages_classify_like_vertex():
    failure = classify_ai_platform_job("FAILED", LEGACY_EXIT_1)
    assert failure is not None
    assert failure.failure_class == FailureClass.PERMANENT_USER_ERROR
    assert failure.worker_id == "master 0" and failure.platform == Platform.AI_PLATFORM
    crash = classify_ai_platform_job("FAILED", "The replica master 0 exited with a non-zero status of 139.")
    assert crash is not None and crash.failure_class == FailureClass.TRANSIENT_CRASH
    internal = classify_ai_platform_job("FAILED", INTERNAL)
    assert internal is not None and internal.failure_class == FailureClass.INTERNAL_ERROR


def test_budgets_continue_across_a_reloaded_history():
    """A task retry reloads the history from the task state store: the count goes on, not afresh."""
    from airflow_provider_resilient.policy import history_from_json, history_to_json

    crash = vertex_failed(EXIT_139)
    decisions, history = run([crash, crash])
    assert actions(decisions) == [R, R]
    reloaded = history_from_json(history_to_json(history))
    assert reloaded == history
    more, _ = run(repeat(crash), history=reloaded)
    assert actions(more) == [R, GIVE_UP]
    assert more[0].budget_used == 3


def test_budgets_count_failures_since_training_last_moved_forward():
    """A long run that keeps checkpointing between failures never spends its budget; three failures in a
    row without a newer checkpoint than before still give up (seed 003's count)."""
    crash = vertex_failed(EXIT_139)
    # Each new attempt resumes from a newer checkpoint: ten crashes, all retried.
    decisions, _ = run([crash] * 10, resume_steps=[100 * (i + 1) for i in range(10)])
    assert actions(decisions) == [R] * 10
    assert {d.budget_used for d in decisions} == {1}
    # Progress, then the same checkpoint again and again: the count runs from the last progress. Twice in a
    # row from one step demotes that step (checkpoint-restore, issue 14: it may not load), and the next attempt
    # resumes from the one before it -- 200, then 100 -- within the demote_checkpoint budget (2).
    decisions, history = run(repeat(crash), resume_steps=[100, 200, 200, 100, 100, 100, 100])
    assert [(d.action, d.rule, d.budget_used) for d in decisions] == [
        (R, "transient-crash", 1), (R, "transient-crash", 1), (R, "transient-crash", 1),
        (R, "checkpoint-restore", 1), (R, "transient-crash", 2), (R, "checkpoint-restore", 2),
        (R, "transient-crash", 3), (GIVE_UP, "transient-crash", 3)]
    assert [a.resumed_from_step for a in history] == [None, 100, 200, 200, 100, 100, 100, 100]


def test_a_per_run_budget_ignores_progress():
    from dataclasses import replace

    from airflow_provider_resilient.policy import DEFAULT_BUDGETS

    policy = RetryPolicy(budgets={"transient_crash": replace(DEFAULT_BUDGETS["transient_crash"],
                                                             reset_on_progress=False)})
    decisions, _ = run(repeat(vertex_failed(EXIT_139)), policy, resume_steps=[100, 200, 300, 400])
    assert actions(decisions) == [R, R, R, GIVE_UP]
