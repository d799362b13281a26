"""A run rebuilt from the platform when the task state store holds none: the phase is the core's rule."""

from __future__ import annotations

from airflow_provider_resilient.policy import Attempt
from airflow_provider_resilient.supervisor import Phase
from airflow_provider_resilient.supervisor.rebuild import rebuilt_run

JOB = "projects/p/locations/us-central1/customJobs/2"
HISTORY = (Attempt(1), Attempt(2, JOB, -1, 100.0))


def test_a_live_newest_attempt_is_watched_never_created_again():
    rebuilt = rebuilt_run(HISTORY, JOB, live=True)
    assert (rebuilt.state.phase, rebuilt.state.job_name, rebuilt.known_absent) == (Phase.RUNNING, JOB, None)


def test_a_success_returns_its_result_or_with_rerun_trains_again_as_the_next_attempt():
    kept = rebuilt_run(HISTORY, JOB, live=False, succeeded=True)
    assert (kept.state.phase, kept.known_absent) == (Phase.SUCCEEDED, None)
    again = rebuilt_run(HISTORY, JOB, live=False, succeeded=True, rerun_after_success=True)
    assert (again.state.phase, again.known_absent) == (Phase.SUCCEEDED, 3) and "attempt 3" in again.then


def test_a_failure_resumes_as_the_next_attempt_with_fresh_budgets():
    rebuilt = rebuilt_run(HISTORY, JOB, live=False)
    assert (rebuilt.state.phase, rebuilt.known_absent) == (Phase.FAILED, 3)
    assert all(not a.incidents for a in rebuilt.state.history)
