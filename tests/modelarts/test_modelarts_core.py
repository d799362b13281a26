"""ModelArts' rows of the core: how a training job's phase, exit code, events and fault scenario are classified
(``policy.classify_modelarts_job``), how an API refusal is (``classify_modelarts_error``), and what a job summary
means to the supervisor (``supervisor.vertex_look.job_event``'s ModelArts reading)."""

from __future__ import annotations

import pytest

from airflow_provider_resilient.policy import FailureClass, Platform, classify_modelarts_error, classify_modelarts_job
from airflow_provider_resilient.supervisor import JobFailed, JobSucceeded
from airflow_provider_resilient.supervisor.vertex_look import job_event

FC = FailureClass


@pytest.mark.parametrize("phase", ["Creating", "Pending", "Running", "Terminating", "Completed"])
def test_a_phase_that_is_no_failure(phase: str) -> None:
    assert classify_modelarts_job(phase) is None


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"phase": "Terminated"}, FC.CANCELLED),
    ({"phase": "Abnormal"}, FC.INTERNAL_ERROR),
    ({"phase": "Failed", "exit_code": 139}, FC.TRANSIENT_CRASH),
    ({"phase": "Failed", "exit_code": 1, "message": "[worker-0] Training finished. Exit code 1."},
     FC.PERMANENT_USER_ERROR),
    ({"phase": "Failed", "exit_code": 1, "fault_scenario": "node_fault"}, FC.NODE_UNHEALTHY),
    ({"phase": "Failed", "fault_scenario": "chip_fault"}, FC.NODE_UNHEALTHY),
    ({"phase": "Failed", "fault_scenario": "job_hanged"}, FC.HANG),
    ({"phase": "Failed", "exit_code": 137, "message": "[worker-0] hardware fault | Training job failed."},
     FC.NODE_UNHEALTHY),
    ({"phase": "Failed", "message": "[worker-0] [Duration: 3s] Pre-check failed. Error: item disk-size shm"},
     FC.PREFLIGHT_FAILURE),
    ({"phase": "Failed", "message": "Failed to be queued"}, FC.QUEUE_TIMEOUT),
    ({"phase": "Failed", "message": "The re-issued job queued for 1800 s and exceeded the 30-minute limit"},
     FC.QUEUE_TIMEOUT),
    ({"phase": "Failed", "message": "The system detects that your training job may be suspended"}, FC.HANG),
    ({"phase": "Failed", "exit_code": 137, "message": "CUDA out of memory. Tried to allocate 2.00 GiB"},
     FC.OUT_OF_MEMORY),
    ({"phase": "Failed", "secondary_phase": "CreateFailed"}, FC.INTERNAL_ERROR),
    ({"phase": "Failed", "secondary_phase": "Lost"}, FC.WORKER_FAILURE),
    ({"phase": "Failed"}, FC.UNKNOWN),
    ({"phase": "Exploded"}, FC.UNKNOWN),
])
def test_a_failed_job_is_classified_by_its_fault_then_its_text_then_its_exit_code(kwargs: dict, expected: FC) -> None:
    failure = classify_modelarts_job(kwargs.pop("phase"), **kwargs)
    assert failure is not None and failure.failure_class is expected and failure.platform is Platform.MODELARTS


@pytest.mark.parametrize(("status", "code", "text", "expected"), [
    (400, "ModelArts.2815", "Exceed quota limit of resource(gpu).", FC.QUOTA_EXCEEDED),
    (400, "ModelArts.4992", "Resources sold out.", FC.CAPACITY_STOCKOUT),
    (400, "ModelArts.3976", "No resources are available for the selected specification.", FC.CAPACITY_STOCKOUT),
    (400, "ModelArts.2781", "Flavor (modelarts.vm.cpu.99u) not found.", FC.PERMANENT_USER_ERROR),
    (403, "ModelArts.0206", "Invalid AK/SK.", FC.PERMANENT_USER_ERROR),
    (500, "ModelArts.2950", "Unknown error.", FC.INTERNAL_ERROR),
    (503, "APIG.0201", "Backend unavailable", FC.INTERNAL_ERROR),
    (400, "ModelArts.9999", "Invalid parameter(spec.resource.node_count).", FC.PERMANENT_USER_ERROR),
])
def test_an_api_refusal_is_classified_by_its_code_then_its_status(status: int, code: str, text: str,
                                                                    expected: FC) -> None:
    failure = classify_modelarts_error(status, code, text, timestamp=5.0)
    assert failure.failure_class is expected
    assert failure.message.startswith(code)


def _summary(**overrides: object) -> dict:
    return {"platform": "modelarts", "name": "modelarts/cn-north-4/p/j1", "state": "Running",
            "secondary_phase": "Running", "error_code": None, "error_message": "", "fault_scenario": None,
            "reissues": 0, "started": True, "create_time": 100.0, "end_time": None, **overrides}


def test_job_event_reads_a_modelarts_summary_by_its_platform() -> None:
    assert isinstance(job_event(_summary(state="Completed", end_time=150.0), 160.0), JobSucceeded)
    failed = job_event(_summary(state="Failed", error_code=139, end_time=150.0), 160.0)
    assert isinstance(failed, JobFailed) and failed.failure.failure_class is FC.TRANSIENT_CRASH
    assert failed.failure.timestamp == 150.0 and not failed.live  # dated when the platform ended it
    hung = job_event(_summary(hang="no new checkpoint for 600 s", hang_since=120.0), 160.0)
    assert isinstance(hung, JobFailed) and hung.live and hung.failure.platform is Platform.MODELARTS
    queued = job_event(_summary(state="Pending", queue_timeout="waited", queued_state="PENDING", timed_out_at=130.0),
                       160.0)
    assert isinstance(queued, JobFailed) and queued.live and queued.failure.failure_class is FC.QUEUE_TIMEOUT


def test_a_vertex_summary_without_a_platform_reads_as_before() -> None:
    event = job_event({"name": "projects/p/locations/r/customJobs/1", "state": "JOB_STATE_FAILED",
                       "error_code": 13, "error_message": "Internal error occurred for the current attempt.",
                       "started": True, "end_time": 10.0}, 20.0)
    assert isinstance(event, JobFailed) and event.failure.failure_class is FC.INTERNAL_ERROR
    assert event.failure.platform is Platform.VERTEX_AI


def test_the_platforms_reissues_reach_the_attempt_history() -> None:
    from airflow_provider_resilient.policy import RetryPolicy, history_table
    from airflow_provider_resilient.supervisor import RunState, Started, Submitted, step

    state, _ = step(RunState(), Started(0.0), RetryPolicy(), "seed")
    state, _ = step(state, Submitted("modelarts/cn-north-4/p/j1", 1.0), RetryPolicy(), "seed")
    failed = job_event(_summary(state="Failed", fault_scenario="node_fault", reissues=2, end_time=50.0), 60.0)
    assert isinstance(failed, JobFailed) and failed.platform_restarts == 2
    state, _ = step(state, failed, RetryPolicy(), "seed")
    assert state.history[0].platform_restarts == 2
    assert "node_unhealthy (after 2 platform re-issues)" in history_table(state.history)[1]


def _job(phase: str, records: list[dict], create_ms: int = 100_000) -> object:
    from types import SimpleNamespace as NS

    runs = [NS(start_at=r.get("start_at"), end_at=r.get("end_at"), start_type="init_or_rescheduled",
               recover_records=[NS(fault_scenario=f) for f in r.get("faults", [])]) for r in records]
    return NS(metadata=NS(id="j1", create_time=create_ms),
              status=NS(phase=phase, secondary_phase=phase, task_statuses=[], running_records=runs, start_time=None,
                        duration=None))


def test_a_reissued_job_waits_again_from_the_end_of_its_previous_run() -> None:
    """ModelArts re-issues a job after a hardware fault: it is Pending again, and its queue wait starts then -- not
    at its creation (counted from there, a job older than the queue timeout was stopped as queued too long at every
    re-issue: benchmarks/modelarts_goodput.py seeds 4, 14, 16, 18)."""
    from airflow_provider_resilient.backends.modelarts import job_look, job_summary
    from airflow_provider_resilient.supervisor.observe import Limits, WatchMemory, observe

    job = _job("Pending", [{"start_at": 110, "end_at": 5000, "faults": ["node_fault"]}])
    summary = job_summary(job, "modelarts/cn-north-4/p/j1")
    assert summary["create_time"] == 100.0 and summary["queued_since"] == 5000.0
    look = job_look(summary)
    assert look.queued_since == 5000.0
    _, verdict = observe(WatchMemory(), look, 5010.0, Limits(queue_seconds=1800.0))
    assert verdict.failure is None  # 10 s of waiting, not 4910


def test_only_the_newest_runs_fault_scenario_classifies_the_job() -> None:
    from airflow_provider_resilient.backends.modelarts import job_summary

    job = _job("Failed", [{"start_at": 110, "end_at": 200, "faults": ["node_fault"]}, {"start_at": 300, "end_at": 400}])
    assert job_summary(job, "modelarts/cn-north-4/p/j1")["fault_scenario"] is None  # a crash after the re-issue
    job = _job("Failed", [{"start_at": 110, "end_at": 200}, {"start_at": 300, "end_at": 400, "faults": ["chip_fault"]}])
    assert job_summary(job, "modelarts/cn-north-4/p/j1")["fault_scenario"] == "chip_fault"
