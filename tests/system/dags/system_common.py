"""What the system-test DAGs share: where they run, and their setup and teardown tasks.

Against a real project when ``SYSTEM_TESTS_GCP_PROJECT`` is set (and credentials: the Airflow connection named by
``SYSTEM_TESTS_GCP_CONN_ID``, default ``google_cloud_default``; ``none`` for Application Default Credentials);
otherwise against the emulator, whose connection the test exports (tests/system/test_system_dags.py).

Environment: ``SYSTEM_TESTS_GCP_PROJECT``, ``SYSTEM_TESTS_ENV_ID`` (a suffix keeping two runs' buckets apart;
default ``local``), ``SYSTEM_TESTS_GCP_REGION`` (Vertex AI; default ``us-central1``), ``SYSTEM_TESTS_GCP_TPU_ZONE``
(Cloud TPU; default ``us-central1-b``, where v2-8 is offered: Cloud TPU "TPU regions and zones",
https://cloud.google.com/tpu/docs/regions-zones), ``SYSTEM_TESTS_GCP_BUCKET_LOCATION`` (default ``US``).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from airflow.sdk import setup, task, teardown

PROJECT_ID = os.environ.get("SYSTEM_TESTS_GCP_PROJECT") or "resilient-system-tests"
ENV_ID = os.environ.get("SYSTEM_TESTS_ENV_ID", "local").lower()
REGION = os.environ.get("SYSTEM_TESTS_GCP_REGION", "us-central1")
TPU_ZONE = os.environ.get("SYSTEM_TESTS_GCP_TPU_ZONE", "us-central1-b")
#: The operators' poll_interval (seconds): 15 on a real project; the emulator's test run sets 0.5.
POLL_SECONDS = float(os.environ.get("SYSTEM_TESTS_POLL_SECONDS", "15"))
#: The operators' min_defer_seconds: their default on a real project; 0 in the emulator's test run (``dag.test()``
#: has no executor to race with).
MIN_DEFER_SECONDS = float(os.environ.get("SYSTEM_TESTS_MIN_DEFER_SECONDS", "10"))
_CONN = os.environ.get("SYSTEM_TESTS_GCP_CONN_ID", "google_cloud_default")
#: The operators' gcp_conn_id: the connection, or None (``SYSTEM_TESTS_GCP_CONN_ID=none``) for Application Default
#: Credentials.
GCP_CONN_ID: str | None = None if _CONN.lower() == "none" else _CONN


def bucket_name(dag_id: str) -> str:
    """A bucket of the test's own (Cloud Storage bucket names: lower case, at most 63 characters)."""
    return f"{PROJECT_ID}-{dag_id}-{ENV_ID}".replace("_", "-")[:63].strip("-")


def _storage() -> Any:
    """A Cloud Storage client with the connection's credentials (the emulator's when the connection names one:
    ``STORAGE_EMULATOR_HOST`` is set then)."""
    from google.cloud import storage

    from airflow_provider_resilient.hooks.base import GoogleApiHook

    hook = GoogleApiHook(GCP_CONN_ID)
    if hook.emulator:
        return storage.Client(project=PROJECT_ID)
    return storage.Client(project=PROJECT_ID, credentials=hook.credentials)


@setup
def create_bucket(name: str) -> str:
    """Create the bucket the run writes its checkpoints to (an existing one is used as it is)."""
    from google.api_core.exceptions import Conflict

    client = _storage()
    with contextlib.suppress(Conflict):
        client.create_bucket(name, location=os.environ.get("SYSTEM_TESTS_GCP_BUCKET_LOCATION", "US"))
    return name


def delete_bucket(name: Any) -> Any:
    """The teardown task deleting the bucket ``name`` and everything in it (a new decorated task per DAG: a teardown
    decorator keeps the trigger rule it set on its first call, so one object cannot serve two DAGs)."""
    return teardown(_delete_bucket).override(task_id="delete_bucket")(name)


def _delete_bucket(name: str) -> None:
    """Delete the bucket and everything in it."""
    from google.api_core.exceptions import NotFound

    client = _storage()
    try:
        bucket = client.get_bucket(name)
    except NotFound:
        return
    for blob in list(client.list_blobs(name)):
        blob.delete()
    bucket.delete()


@task(trigger_rule="all_done")  # also after a failed training: what it left is what matters most then
def nothing_left(dag_id: str, regions: list[str] | None = None, zones: list[str] | None = None,
                 run_id: str | None = None) -> None:
    """Fail when a job or node this DAG run created is still live after its tasks ended (the provider's promise:
    nothing paid for is left behind)."""
    from airflow_provider_resilient.backends.tpu import live_nodes
    from airflow_provider_resilient.backends.vertex import live_jobs
    from airflow_provider_resilient.hooks.tpu import ResilientTPUHook
    from airflow_provider_resilient.hooks.vertex_ai import ResilientVertexAIHook

    live = []
    if regions:
        live += live_jobs(ResilientVertexAIHook(GCP_CONN_ID), PROJECT_ID, regions)
    if zones:
        live += live_nodes(ResilientTPUHook(GCP_CONN_ID), PROJECT_ID, zones)
    ours = [r for r in live if r.owner is not None and r.owner.dag_id == dag_id and r.owner.run_id == run_id]
    assert not ours, f"left running after the run: {[r.name for r in ours]}"
