"""Classifier details beyond the rules table: enum forms, signals, TPU symptoms, audit entries, odd input."""

from __future__ import annotations

import enum

import pytest

from airflow_provider_resilient.policy import (
    FailureClass,
    Platform,
    classify_create_error,
    classify_error_message,
    classify_exit_status,
    classify_tpu_audit_entry,
    classify_tpu_node,
    classify_vertex_job,
    classify_worker_report,
)
from airflow_provider_resilient.policy.classify import exit_code_signal, vertex_state_name

FC = FailureClass


class FakeJobState(enum.IntEnum):
    """Shaped like proto-plus ``JobState`` (an IntEnum with the JOB_STATE_ prefix)."""

    JOB_STATE_RUNNING = 3
    JOB_STATE_FAILED = 5


@pytest.mark.parametrize("state", ["JOB_STATE_FAILED", "FAILED", "failed", 5, FakeJobState.JOB_STATE_FAILED])
def test_vertex_state_accepts_enum_name_and_number(state):
    assert vertex_state_name(state) == "FAILED"


@pytest.mark.parametrize("state", ["JOB_STATE_SUCCEEDED", "JOB_STATE_RUNNING", "JOB_STATE_QUEUED",
                                   "JOB_STATE_PENDING", "JOB_STATE_PAUSED", "JOB_STATE_CANCELLING",
                                   "JOB_STATE_PARTIALLY_SUCCEEDED", FakeJobState.JOB_STATE_RUNNING])
def test_vertex_non_failure_states_are_not_failures(state):
    assert classify_vertex_job(state, None, None) is None


def test_vertex_expired_after_running_is_a_timeout_the_user_must_raise():
    failure = classify_vertex_job("JOB_STATE_EXPIRED", started=True)
    assert failure is not None and failure.failure_class == FC.PERMANENT_USER_ERROR
    assert "scheduling.timeout" in failure.message


def test_vertex_unexpected_state_is_unknown_not_an_error():
    failure = classify_vertex_job("JOB_STATE_FROBNICATED", 0, "")
    assert failure is not None and failure.failure_class == FC.UNKNOWN


@pytest.mark.parametrize(("code", "signal", "cls"), [
    (0, None, None),
    (1, None, FC.PERMANENT_USER_ERROR),
    (2, None, FC.PERMANENT_USER_ERROR),
    (6, 6, FC.TRANSIENT_CRASH),
    (11, 11, FC.TRANSIENT_CRASH),
    (134, 6, FC.TRANSIENT_CRASH),
    (139, 11, FC.TRANSIENT_CRASH),
    (-6, 6, FC.TRANSIENT_CRASH),
    (-11, 11, FC.TRANSIENT_CRASH),
    (137, 9, FC.WORKER_FAILURE),
    (-9, 9, FC.WORKER_FAILURE),
    (143, 15, FC.WORKER_FAILURE),
    (-15, 15, FC.WORKER_FAILURE),
    (126, None, FC.CONTAINER_START_ERROR),
    (127, None, FC.CONTAINER_START_ERROR),
    (128, None, FC.CONTAINER_START_ERROR),
    (78, None, FC.PREFLIGHT_FAILURE),
    (255, None, FC.PERMANENT_USER_ERROR),
    (130, 2, FC.PERMANENT_USER_ERROR),  # SIGINT: someone pressed Ctrl-C in the workload
])
def test_exit_status_classes(code, signal, cls):
    assert exit_code_signal(code) == signal
    failure = classify_exit_status(code)
    assert (failure.failure_class if failure else None) == cls
    if failure:
        assert failure.signal == signal


def test_explicit_signal_overrides_a_missing_exit_code():
    failure = classify_exit_status(None, signal=11)
    assert failure is not None and failure.failure_class == FC.TRANSIENT_CRASH


def test_oom_message_without_replica_still_classifies():
    failure = classify_error_message("Worker pod ran out of memory.")
    assert failure.failure_class == FC.OUT_OF_MEMORY and failure.exit_code is None


def test_stockout_message_from_the_japanese_seed_variant():
    # Seed 003 (ja) quotes an older English text with a different second sentence.
    text = ("Resources are insufficient in region: europe-west4. Try a different region. If you use K80, "
            "consider using P100 or V100 instead.")
    failure = classify_error_message(text)
    assert failure.failure_class == FC.CAPACITY_STOCKOUT and failure.region == "europe-west4"


@pytest.mark.parametrize(("code", "message", "cls"), [
    (8, "Quota exceeded for quota metric 'Custom model training Nvidia L4 GPUs per region'", FC.QUOTA_EXCEEDED),
    (429, "Too many requests", FC.CAPACITY_STOCKOUT),
    (3, "List of found errors: 1.Field: job_spec.worker_pool_specs[0].machine_spec.machine_type",
     FC.PERMANENT_USER_ERROR),
    (400, "bad request", FC.PERMANENT_USER_ERROR),
    (403, "Permission 'aiplatform.customJobs.create' denied", FC.PERMANENT_USER_ERROR),
    (13, "internal", FC.INTERNAL_ERROR),
    (14, "The service is currently unavailable.", FC.INTERNAL_ERROR),
    (503, "unavailable", FC.INTERNAL_ERROR),
    (6, "node already exists", FC.UNKNOWN),
    (None, "There is no more capacity in the zone \"us-central2-b\"", FC.CAPACITY_STOCKOUT),
])
def test_create_errors(code, message, cls):
    assert classify_create_error(code, message).failure_class == cls


def test_quota_metric_is_parsed_from_the_quota_message_forms():
    one = classify_create_error(429, "Quota exceeded for quota metric 'Custom model training CPUs' and limit 'x'")
    assert one.quota_metric == "Custom model training CPUs"


@pytest.mark.parametrize(("state", "health", "symptoms", "cls"), [
    ("READY", "HEALTHY", (), None),
    ("READY", None, (), None),
    ("CREATING", None, (), None),
    ("READY", "UNHEALTHY_MAINTENANCE", (), FC.MAINTENANCE_EVENT),
    ("REPAIRING", None, (), FC.MAINTENANCE_EVENT),
    ("RESTARTING", None, (), FC.MAINTENANCE_EVENT),
    ("TERMINATED", None, (), FC.MAINTENANCE_EVENT),
    ("PREEMPTED", None, (), FC.PREEMPTION),
    ("READY", "TIMEOUT", (), FC.NODE_UNHEALTHY),
    ("READY", "UNHEALTHY_TENSORFLOW", (), FC.NODE_UNHEALTHY),
    ("READY", "HEALTHY", ("MESH_BUILD_FAIL",), FC.NODE_UNHEALTHY),
    ("READY", "HEALTHY", ({"symptom_type": 5},), FC.OUT_OF_MEMORY),
    ("READY", "HEALTHY", ("PROJECT_ABUSE",), FC.PERMANENT_USER_ERROR),
    ("STOPPED", None, (), FC.CANCELLED),
    ("DELETING", None, (), FC.CANCELLED),
    (16, None, (), FC.UNKNOWN),
    (12, 1, (), FC.MAINTENANCE_EVENT),
])
def test_tpu_node_classes(state, health, symptoms, cls):
    failure = classify_tpu_node(state, health, symptoms)
    assert (failure.failure_class if failure else None) == cls


def test_tpu_audit_preemption_and_stockout_entries():
    preempt = classify_tpu_audit_entry({"proto_payload": {"method_name": "tpu.nodes.terminate",
                                                          "metadata": {"terminate_reason": "Spot VM preempted"}}})
    assert preempt is not None and preempt.failure_class == FC.PREEMPTION
    stockout = classify_tpu_audit_entry({
        "severity": "ERROR",
        "protoPayload": {"methodName": "google.cloud.tpu.v2.Tpu.CreateNode",
                         "resourceName": "projects/p/locations/us-central2-b/nodes/n",
                         "status": {"code": 8, "message": "There is no more capacity in the zone"}},
    })
    assert stockout is not None and stockout.failure_class == FC.CAPACITY_STOCKOUT
    assert stockout.platform == Platform.TPU


@pytest.mark.parametrize("entry", [
    {}, {"protoPayload": None}, {"protoPayload": "text"}, {"protoPayload": {"methodName": "tpu.nodes.get"}},
    {"protoPayload": {"methodName": "google.cloud.tpu.v2.Tpu.CreateNode"}, "severity": "INFO"},
])
def test_irrelevant_audit_entries_are_ignored(entry):
    assert classify_tpu_audit_entry(entry) is None


# -- a TPU worker runner's report (guest attributes) ------------------------------------------------------------
@pytest.mark.parametrize("report, cls, says", [
    ({"status": "preflight"}, None, None),
    ({"status": "running", "step": "40"}, None, None),
    ({"status": "restarting", "restarts": "2"}, None, None),
    ({"status": "succeeded", "exit_code": "0"}, None, None),
    # the workload's device check failed while it ran (seed 004): a new node, whatever the exit says
    ({"status": "running", "hardware": "faulty: 3 of 4 TPU chips"}, FailureClass.NODE_UNHEALTHY,
     "slice 1 worker 2 hardware check failed: 3 of 4 TPU chips"),
    ({"status": "failed", "exit_code": "139", "hardware": "faulty: chip 2"}, FailureClass.NODE_UNHEALTHY, "chip 2"),
    # out of in-place restarts: the exit status decides
    ({"status": "failed", "exit_code": "139", "restarts": "5"}, FailureClass.TRANSIENT_CRASH, "failed with exit 139"),
    ({"status": "failed", "exit_code": "1", "error": "ValueError: bad flag"}, FailureClass.PERMANENT_USER_ERROR,
     "exit 1: ValueError: bad flag"),
    ({"status": "failed"}, FailureClass.PERMANENT_USER_ERROR, "failed with exit 1"),  # no code: not a success
    # the pre-check's verdict, with or without the hardware it found
    ({"status": "preflight_failed", "exit_code": "78", "preflight": "tpu-check: 3 of 4 chips"},
     FailureClass.PREFLIGHT_FAILURE, "preflight tpu-check: 3 of 4 chips"),
    ({"status": "preflight_failed", "exit_code": "78", "hardware": "faulty: 3 of 4 chips"},
     FailureClass.PREFLIGHT_FAILURE, "preflight_failed with exit 78"),
])
def test_a_worker_report_is_classified(report, cls, says):
    failure = classify_worker_report(report, worker_id="6", label="slice 1 worker 2", timestamp=5.0)
    if cls is None:
        assert failure is None
        return
    assert failure is not None and failure.failure_class == cls and failure.platform == Platform.TPU
    assert failure.worker_id == "6" and failure.timestamp == 5.0 and says in failure.message


def test_a_fault_the_precheck_found_is_its_verdict_at_every_moment_of_its_reports():
    """A failed device pre-check is written one guest attribute at a time, in the runner's order
    (``Runner._preflight`` then ``Runner._finish``): status, the failed item, ``hardware`` faulty, the exit code
    and its class, and only then ``status=preflight_failed``. A look at any moment of that sequence gives no
    failure yet or PREFLIGHT_FAILURE -- never NODE_UNHEALTHY, which made a failed pre-check a new node outside the
    preflight budget (once in CI, at a look before the last write)."""
    writes = [("status", "preflight"), ("preflight", "failed: item tpu: 3 of 4 chips"),
              ("hardware", "faulty: tpu: 3 of 4 chips"), ("exit_code", "78"), ("failure_class", "preflight_failure"),
              ("status", "preflight_failed")]
    report: dict[str, str] = {}
    seen = []
    for key, value in writes:
        report[key] = value
        failure = classify_worker_report(dict(report), worker_id="0")
        seen.append(None if failure is None else failure.failure_class)
    assert seen == [None, None, None, None, None, FailureClass.PREFLIGHT_FAILURE]
