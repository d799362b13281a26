"""The TPU look's judgements (issue 31, "read, then judge"): what the backend read -- a queued resource, nodes,
audit entries, workers' reports, announced maintenance -- judged by the core at explicit times, no emulator, no
clock. The observer is the real one (:func:`~airflow_provider_resilient.supervisor.observe.observe`) over a memory
the test keeps, as the operator does."""

from __future__ import annotations

from typing import Any

from airflow_provider_resilient.policy import Failure, FailureClass, Platform
from airflow_provider_resilient.policy.node_events import classify_audit_entries, dated_node_failure
from airflow_provider_resilient.supervisor import JobFailed, JobSucceeded, MoveOff
from airflow_provider_resilient.supervisor.maintenance import MaintenancePolicy, MaintenanceSettings, Notice
from airflow_provider_resilient.supervisor.observe import Limits, WatchMemory, observe
from airflow_provider_resilient.supervisor.tpu_look import (
    NodeReading,
    QueuedReading,
    judge_nodes,
    judge_queue,
    judge_workers,
    node_failure,
)

NODE = "projects/p/locations/us-central2-b/nodes/train-a1"
QR = "projects/p/locations/us-central2-b/queuedResources/train-a1"
NOW = 1_800_000_000.0


class Observer:
    """The operator's judge: the pure observer over a memory kept between looks."""

    def __init__(self) -> None:
        self.memory = WatchMemory()

    def __call__(self, look: Any, limits: Limits) -> Any:
        self.memory, verdict = observe(self.memory, look, self.now, limits)
        return verdict

    now = NOW


def audit(method: str, reason: str | None, at: float, insert_id: str = "1") -> dict[str, Any]:
    payload: dict[str, Any] = {"methodName": method, "resourceName": NODE}
    if reason:
        payload["metadata"] = {"terminateReason": reason}
    return {"insertId": insert_id, "protoPayload": payload, "severity": "NOTICE", "timestamp": at}


# ------------------------------------------------------------------ stage 1: the queued resource
def test_a_waiting_request_gets_a_deadline_and_times_out_past_it_live():
    judge = Observer()
    waiting = QueuedReading(QR, "WAITING_FOR_RESOURCES", created_at=NOW - 100)
    first = judge_queue(waiting, judge, NOW, 1800.0)
    assert (first.granted, first.result, first.deadline) == (False, None, NOW + 1700)
    judge.now = NOW + 1800
    late = judge_queue(waiting, judge, NOW + 1800, 1800.0)
    assert isinstance(late.result, JobFailed) and late.result.live
    assert late.result.failure.failure_class is FailureClass.QUEUE_TIMEOUT


def test_a_failed_or_suspended_request_is_a_queue_timeout_with_the_apis_reason():
    for state in ("FAILED", "SUSPENDED"):
        judged = judge_queue(QueuedReading(QR, state, NOW - 5, error="no capacity"), Observer(), NOW, 1800.0)
        failure = judged.result.failure
        assert (failure.failure_class, failure.terminate_reason, failure.message) == (
            FailureClass.QUEUE_TIMEOUT, state, "no capacity")


def test_granted_when_active_gone_or_provisioning_past_creating():
    for reading in (QueuedReading(QR, "ACTIVE"), QueuedReading(QR, None),
                    QueuedReading(QR, "PROVISIONING", node_state="READY")):
        assert judge_queue(reading, Observer(), NOW, 1800.0).granted
    still = judge_queue(QueuedReading(QR, "PROVISIONING", NOW - 5, node_state="CREATING"), Observer(), NOW, None)
    assert not still.granted and still.deadline is None  # valid_until: the platform's own limit


# ------------------------------------------------------------------ stage 2: nodes and audit entries
def test_a_node_gone_is_a_maintenance_event_live_only_in_a_group():
    alone = judge_nodes([NodeReading(NODE, None)], [], NOW).result
    assert alone.failure.failure_class is FailureClass.MAINTENANCE_EVENT and alone.failure.node_state == "TERMINATED"
    assert not alone.live
    group = judge_nodes([NodeReading(f"{NODE}-0", "READY"), NodeReading(f"{NODE}-1", None)], [], NOW).result
    assert group.live and group.failure.message.startswith("slice 1 (train-a1-1): ")


def test_an_attempt_whose_nodes_all_run_nothing_is_stopped():
    """``JobFailed.stopped``: every node PREEMPTED, TERMINATED, in repair or gone -- its deletion need not be waited
    for before the next node; a group with a slice still READY (its workers may still write) is not."""
    for state in ("PREEMPTED", "TERMINATED", "REPAIRING"):
        judged = judge_nodes([NodeReading(NODE, state)], [], NOW)
        assert judged.stopped and node_failure(judged.failure, [], NOW, [NODE], 0, judged.stopped).stopped
    entries = classify_audit_entries([audit("tpu.nodes.terminate", "MAINTENANCE", NOW - 300)])
    assert judge_nodes([NodeReading(NODE, "TERMINATED")], entries, NOW).result.stopped
    mixed = judge_nodes([NodeReading(f"{NODE}-0", "READY"), NodeReading(f"{NODE}-1", "PREEMPTED")], [], NOW)
    assert not mixed.stopped
    gone = judge_nodes([NodeReading(f"{NODE}-0", None), NodeReading(f"{NODE}-1", "PREEMPTED")], [], NOW).result
    assert gone.live and gone.stopped
    ready = judge_nodes([NodeReading(f"{NODE}-0", "READY"), NodeReading(f"{NODE}-1", None)], [], NOW).result
    assert ready.live and not ready.stopped
    assert not judge_nodes([NodeReading(NODE, "READY")], entries, NOW).result.stopped  # an event that came and went


def test_a_failed_node_is_dated_by_the_entry_that_names_its_reason():
    entries = classify_audit_entries([audit("tpu.nodes.terminate", "MAINTENANCE", NOW - 300)])
    judged = judge_nodes([NodeReading(NODE, "TERMINATED")], entries, NOW)
    assert judged.result.failure.timestamp == NOW - 300  # the event's time, not the look's
    assert judged.result.failure.terminate_reason == "MAINTENANCE" and judged.result.live


def test_without_a_telling_entry_the_backend_is_asked_to_read_again():
    judged = judge_nodes([NodeReading(NODE, "PREEMPTED")], [], NOW)
    assert judged.failed == 0 and judged.result is None
    late = classify_audit_entries([audit("tpu.nodes.terminate", "PREEMPTED", NOW + 5)])
    event = node_failure(judged.failure, late, NOW, [NODE], 0)
    assert event.failure.timestamp == NOW  # never after the look
    assert event.failure.failure_class is FailureClass.PREEMPTION


def test_an_entry_alone_is_an_event_that_came_and_went_and_a_creating_node_is_not_ready():
    entries = classify_audit_entries([audit("tpu.nodes.restart", None, NOW - 60)])
    assert judge_nodes([NodeReading(NODE, "READY", "HEALTHY")], entries, NOW).result.failure.failure_class is \
        FailureClass.MAINTENANCE_EVENT
    assert judge_nodes([NodeReading(NODE, "CREATING")], [], NOW).ready is False
    assert judge_nodes([NodeReading(NODE, "READY", "HEALTHY")], [], NOW).ready is True


def test_dating_keeps_the_looks_time_for_an_entry_of_another_class():
    failure = Failure(FailureClass.NODE_UNHEALTHY, Platform.TPU, timestamp=NOW)
    told = classify_audit_entries([audit("tpu.nodes.terminate", "MAINTENANCE", NOW - 900)])
    dated = dated_node_failure(failure, told, NOW)
    assert (dated.timestamp, dated.terminate_reason) == (NOW, "MAINTENANCE")


# ------------------------------------------------------------------ stage 3: workers and maintenance
def workers(judge: Observer, reports: list[list[dict[str, str]]], notice: Notice | None = None,
            settings: MaintenanceSettings | None = None, request: str | None = None, hosts: int = 1) -> Any:
    nodes = [NodeReading(f"{NODE}-{i}" if len(reports) > 1 else NODE, "READY", "HEALTHY", workers=hosts,
                         checkpoint_request=request) for i in range(len(reports))]
    settings = settings or MaintenanceSettings()
    return judge_workers(NODE, nodes, reports, [notice] * len(reports), judge,
                         Limits(hang_seconds=600, startup_seconds=300, maintenance=settings), judge.now, settings,
                         "checkpoint_ack")


def test_a_failed_worker_fails_the_attempt_naming_it():
    judged = workers(Observer(), [[{"status": "running", "step": "5", "heartbeat": str(NOW)},
                                   {"status": "failed", "exit_code": "139"}]], hosts=2)
    assert judged.result.failure.failure_class is FailureClass.TRANSIENT_CRASH
    assert judged.result.failure.worker_id == "1"


def test_a_silent_worker_past_the_startup_deadline_and_a_stalled_step_past_the_hang_limit():
    judge = Observer()
    assert workers(judge, [[{"status": "running", "step": "5", "heartbeat": str(NOW)}]], hosts=2).result is None
    judge.now = NOW + 301
    silent = workers(judge, [[{"status": "running", "step": "5", "heartbeat": str(NOW + 300)}]], hosts=2)
    assert silent.result.failure.failure_class is FailureClass.WORKER_SILENT
    judge = Observer()
    workers(judge, [[{"status": "running", "step": "5", "heartbeat": str(NOW)}]])
    judge.now = NOW + 601
    hung = workers(judge, [[{"status": "running", "step": "5", "heartbeat": str(NOW + 600)}]])
    assert hung.result.failure.failure_class is FailureClass.HANG


def test_every_worker_succeeded_is_success_the_node_still_billing():
    judged = workers(Observer(), [[{"status": "succeeded", "exit_code": "0"}], [{"status": "succeeded"}]])
    assert judged.result == JobSucceeded(NOW, live=True)


def test_a_look_alike_step_is_no_progress():
    judge = Observer()
    workers(judge, [[{"status": "running", "step": "²", "heartbeat": str(NOW)}]])
    assert judge.memory.clocks == () or all(c.step is None for _, c in judge.memory.clocks)


def test_before_a_window_a_checkpoint_is_asked_for_then_the_run_moves():
    notice = Notice("SCHEDULED", "PENDING", window_start=NOW + 500, window_end=NOW + 4000)
    settings = MaintenanceSettings(MaintenancePolicy.MOVE, lead_seconds=600.0, move_seconds=60.0)
    running = [[{"status": "running", "step": "5", "heartbeat": str(NOW)}]]
    asked = workers(Observer(), running, notice, settings)
    assert asked.request == notice.token and asked.result is None and asked.notice == notice
    acked = [[{"status": "running", "step": "6", "heartbeat": str(NOW), "checkpoint_ack": notice.token}]]
    moved = workers(Observer(), acked, notice, settings, request=notice.token)
    assert isinstance(moved.result, MoveOff) and moved.request is None


def test_only_a_quota_refusal_is_created_again_after_the_old_node_is_deleted():
    from airflow_provider_resilient.supervisor.tpu_look import create_after_deletion

    assert create_after_deletion(Failure(FailureClass.QUOTA_EXCEEDED, Platform.TPU))
    assert not create_after_deletion(Failure(FailureClass.CAPACITY_STOCKOUT, Platform.TPU))
