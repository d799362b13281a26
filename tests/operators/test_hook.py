"""The hook retries transient API errors and never turns a lost create reply into a duplicate job."""

from __future__ import annotations

import pytest
from google.api_core import exceptions

from airflow_provider_resilient.hooks.base import is_transient
from airflow_provider_resilient.hooks.vertex_ai import ResilientVertexAIHook, region_of
from airflow_provider_resilient.specs.common import job_labels
from airflow_provider_resilient.specs.vertex import labels_filter

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
JOB = {"display_name": "hooked", "job_spec": {"worker_pool_specs": [{
    "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
    "container_spec": {"image_uri": "x", "command": ["python", "-c", "print(1)"]}}]}}


def test_transient_errors_on_reads_are_retried_with_backoff(resilient_emulator):
    waits: list[float] = []
    hook = ResilientVertexAIHook(sleep=waits.append)
    job = hook.create_custom_job("test-project", "us-central1", JOB)
    resilient_emulator.add_fault({"kind": "unavailable", "times": 3})
    assert hook.get_custom_job(job.name).name == job.name
    assert len(waits) == 3 and waits[0] <= waits[2]
    assert [c.code for c in resilient_emulator.calls.list("GetCustomJob")] == ["UNAVAILABLE"] * 3 + ["OK"]


def test_retrying_stops_after_api_retry_seconds(resilient_emulator):
    hook = ResilientVertexAIHook(sleep=lambda s: None, api_retry_seconds=0)
    job = hook.create_custom_job("test-project", "us-central1", JOB)
    resilient_emulator.add_fault({"kind": "unavailable", "times": None})
    with pytest.raises(exceptions.ServiceUnavailable):
        hook.get_custom_job(job.name)


def test_a_create_whose_reply_was_lost_returns_the_job_instead_of_a_duplicate(resilient_emulator, mocker):
    hook = ResilientVertexAIHook(sleep=lambda s: None)
    client = hook.client("us-central1")
    real_create = client.create_custom_job

    def create_then_lose_reply(**kwargs):
        real_create(**kwargs)
        raise exceptions.ServiceUnavailable("connection reset")

    mocker.patch.object(client, "create_custom_job", side_effect=create_then_lose_reply)
    labels = job_labels("dag", "task", "run", -1, 1)
    job = hook.create_custom_job("test-project", "us-central1", {**JOB, "labels": labels},
                                 find_filter=labels_filter(labels))
    assert job.labels["resilient-attempt"] == "1"
    assert len(resilient_emulator.calls.list("CreateCustomJob")) == 1


def test_quota_on_create_is_raised_for_the_policy_not_retried(resilient_emulator):
    resilient_emulator.add_fault({"kind": "quota"})
    with pytest.raises(exceptions.ResourceExhausted):
        ResilientVertexAIHook(sleep=lambda s: None).create_custom_job("test-project", "us-central1", JOB)
    assert len(resilient_emulator.calls.list("CreateCustomJob")) == 1


def test_classification_of_api_errors_and_names():
    assert is_transient(exceptions.ServiceUnavailable("x"))
    assert is_transient(exceptions.ResourceExhausted("x")) and not is_transient(exceptions.ResourceExhausted("x"),
                                                                                 creating=True)
    assert not is_transient(exceptions.InvalidArgument("x"))
    assert region_of("projects/p/locations/asia-east1/customJobs/1") == "asia-east1"
    with pytest.raises(ValueError, match="CustomJob name"):
        region_of("projects/p/customJobs/1")


def test_the_connection_extra_emulator_host_points_the_hook_at_the_emulator(resilient_emulator, monkeypatch):
    """The endpoint switch read from an Airflow connection's extra, with RESILIENT_EMULATOR_HOST unset."""
    import json

    from airflow_provider_resilient.testing.emulator_clients import EMULATOR_HOST_ENV

    monkeypatch.delenv(EMULATOR_HOST_ENV, raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_RESILIENT_EMU", json.dumps({
        "conn_type": "google_cloud_platform", "extra": {"emulator_host": resilient_emulator.address}}))
    hook = ResilientVertexAIHook(gcp_conn_id="resilient_emu", sleep=lambda s: None)
    assert hook.emulator == resilient_emulator.address
    assert hook.credentials is None  # no Google credentials are looked up for the emulator
    job = hook.create_custom_job("test-project", "us-central1", {**JOB, "labels": {"via": "conn-extra"}})
    assert [j.name for j in hook.list_custom_jobs("test-project", "us-central1", "labels.via=conn-extra")] == [
        job.name]
    (listed,) = resilient_emulator.calls.list("ListCustomJobs")
    assert listed.code == "OK" and "labels.via=conn-extra" in listed.request
    assert [c.code for c in resilient_emulator.calls.list("CreateCustomJob")] == ["OK"]


def test_the_emulator_variable_alone_points_no_hook_at_the_emulator(resilient_emulator, monkeypatch):
    """RESILIENT_EMULATOR_HOST is exported (the fixture does) and the connection has no ``emulator_host``: the hook
    goes to Google, with the connection's credentials."""
    from airflow_provider_resilient.testing.emulator_clients import EMULATOR_HOST_ENV

    assert __import__("os").environ[EMULATOR_HOST_ENV] == resilient_emulator.address
    monkeypatch.setenv("AIRFLOW_CONN_PLAIN_GCP", '{"conn_type": "google_cloud_platform"}')
    hook = ResilientVertexAIHook(gcp_conn_id="plain_gcp")
    assert hook.emulator is None
    assert hook.endpoint_summary() == "Using Google Cloud APIs with the credentials of connection plain_gcp"
    assert ResilientVertexAIHook(gcp_conn_id=None).emulator is None


def test_logged_progress_reads_steps_and_the_starts_of_restarts_in_one_call(resilient_emulator):
    """A job's log as Vertex AI ships it: the chief replica's lines (the worker runner starting the command, the
    workload's ``start step`` and ``step`` lines, other output) and the service's own entries. One ListLogEntries
    call returns the steps as ``(time, step, start)`` and the starts of restarts: the runner's line (a job retried
    after an internal error logs nothing else) and a replica's exit -- not the service's end-of-job entry, not
    another replica's lines."""
    from datetime import UTC, datetime

    project, job_id = "test-project", "123"
    name = f"projects/{project}/locations/us-central1/customJobs/{job_id}"
    base = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def write(task: str, *texts: tuple[int, str]) -> None:
        log_id = f"ml.googleapis.com%2F{job_id}" if task == "service" else task
        resource = {"type": "ml_job", "labels": {"project_id": project, "job_id": job_id, "task_name": task}}
        resilient_emulator.logging.write_log_entries(f"projects/{project}/logs/{log_id}", resource, None, [
            {"text_payload": text, "timestamp": base.replace(second=at).isoformat()} for at, text in texts])

    write("workerpool0-0", (1, "runner: running ['python3', 'train.py', '--steps', '40'] (restarts so far: 0)"),
          (2, "start step 0"), (3, "step 1"), (4, "loss 0.5"), (5, "step 2"),
          (20, "runner: running ['python3', 'train.py', '--steps', '40'] (restarts so far: 0)"), (22, "start step 2"))
    write("workerpool1-0", (6, "step 99"), (7, "runner: running ['python3', 'train.py']"))
    write("service", (10, "The replica workerpool0-0 exited with a non-zero status of 139. Termination reason: "
                          "Error."), (30, "Job completed successfully."))
    calls = len(resilient_emulator.calls.list("ListLogEntries"))
    lines, restarts = ResilientVertexAIHook().logged_progress(name, base)
    t = base.timestamp()
    assert lines == [(t + 2, 0, True), (t + 3, 1, False), (t + 5, 2, False), (t + 22, 2, True)]
    assert restarts == [t + 1, t + 10, t + 20]
    assert len(resilient_emulator.calls.list("ListLogEntries")) == calls + 1
