"""The typed backends: what a look at a CustomJob means to the supervisor (pure), the backends' shape, and
the operators left with no loop, no sleep and no platform call of their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from airflow_provider_resilient.backends.base import AttemptSpec, Backend, task_instance
from airflow_provider_resilient.backends.tpu import TPUNodeBackend
from airflow_provider_resilient.backends.vertex import VertexCustomJobBackend
from airflow_provider_resilient.policy import FailureClass
from airflow_provider_resilient.supervisor import JobFailed, JobSucceeded
from airflow_provider_resilient.supervisor.vertex_look import job_event

NOW = 1_800_000_000.0
JOB = "projects/p/locations/us-central1/customJobs/1"


def summary(state: str, **extra):
    return {"name": JOB, "state": state, "error_code": 0, "error_message": "", "started": True,
            "create_time": NOW - 600, "end_time": None, **extra}


def test_a_succeeded_or_partially_succeeded_job_is_success():
    assert job_event(summary("JOB_STATE_SUCCEEDED"), NOW) == JobSucceeded(NOW)
    assert job_event(summary("JOB_STATE_PARTIALLY_SUCCEEDED"), NOW) == JobSucceeded(NOW)


def test_a_failed_job_is_classified_and_dated_when_the_platform_ended_it():
    event = job_event(summary("JOB_STATE_FAILED", error_code=13, error_message="Internal error occurred for the "
                              "current attempt.", end_time=NOW - 60), NOW)
    assert isinstance(event, JobFailed) and not event.live
    assert event.failure.failure_class is FailureClass.INTERNAL_ERROR
    assert event.failure.timestamp == NOW - 60 and event.now == NOW


@pytest.mark.parametrize(("state", "live"), [("JOB_STATE_QUEUED", True), ("JOB_STATE_CANCELLED", False)])
def test_a_queue_timeout_judged_while_it_waited_is_live_until_the_job_has_ended(state, live):
    event = job_event(summary(state, queue_timeout="waited 1900 s in QUEUED", queued_state="QUEUED",
                              timed_out_at=NOW - 5), NOW)
    assert isinstance(event, JobFailed) and event.live is live
    assert (event.failure.failure_class, event.failure.terminate_reason, event.failure.timestamp) == (
        FailureClass.QUEUE_TIMEOUT, "QUEUED", NOW - 5)


def test_a_hang_is_dated_when_progress_stopped():
    event = job_event(summary("JOB_STATE_RUNNING", hang="no new checkpoint past step 300 for 1900 s",
                              hang_since=NOW - 1900), NOW)
    assert isinstance(event, JobFailed) and event.live
    assert (event.failure.failure_class, event.failure.timestamp) == (FailureClass.HANG, NOW - 1900)


def test_both_backends_have_the_backend_shape():
    assert isinstance(Backend, type)
    for backend in (VertexCustomJobBackend, TPUNodeBackend):
        for method in ("find", "submit", "look", "end", "release"):
            assert callable(getattr(backend, method)), f"{backend.__name__}.{method}"


def test_an_attempt_of_a_mapped_task_names_its_task_instance():
    spec = AttemptSpec(2, task_instance("dag", "train", "manual__1", None))
    assert (spec.task.map_index, spec.fallback, spec.fallback_index) == (-1, None, -1)
    assert task_instance("dag", "train", "manual__1", 3).map_index == 3


OPERATORS = Path(__file__).resolve().parents[2] / "airflow_provider_resilient" / "operators"


@pytest.mark.parametrize("module", ["tpu.py", "vertex_ai.py"])
def test_the_platform_operators_hold_no_loop_and_no_sleep(module):
    """Issue 11: the one watch loop and the backoffs are ``SupervisedOperator``'s; a platform's operator holds
    its arguments and specs."""
    tree = ast.parse((OPERATORS / module).read_text())
    loops = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.While)]
    sleeps = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
              and getattr(n.func, "attr", getattr(n.func, "id", "")).endswith("sleep")]
    assert (loops, sleeps) == ([], [])


SHELLS = [Path("operators/tpu.py"), Path("operators/vertex_ai.py"), Path("operators/base.py"),
          Path("operators/reconcile.py"), Path("triggers/tpu.py"), Path("triggers/vertex_ai.py")]


@pytest.mark.parametrize("module", SHELLS, ids=str)
def test_no_operator_or_trigger_creates_cancels_or_deletes_a_cloud_resource_itself(module):
    """Every create, cancel and delete is a backend's, carrying out a supervisor command -- a kill's too
    (``releases_on_kill`` -> ``release_all``), and the reconciler's (``releases`` -> ``release_all``)."""
    tree = ast.parse((OPERATORS.parent / module).read_text())
    verbs = ("create_", "cancel_", "delete_")
    wrong = [f"line {call.lineno} calls {call.func.attr}" for call in ast.walk(tree)
             if isinstance(call, ast.Call) and getattr(call.func, "attr", "").startswith(verbs)
             and call.func.attr != "create_task"]  # asyncio's
    assert wrong == []
