"""A DAG whose ResilientCustomJobOperator task is configured by the test through RESILIENT_E2E (JSON).

Keys: ``code`` (the replica's Python one-liner), ``display_name``, ``deferrable``, ``fallbacks``,
``poll_interval``, ``workload`` (a list of argv after ``python``, instead of ``code``), ``base_output_dir``,
``queue_timeout_seconds`` (``RetryPolicy.queue_timeout_seconds``, default 1800), ``region`` (default us-central1),
``disable_retries`` (``scheduling.disable_retries``: no retry by the platform itself).
With ``tasks`` (``{task_id: {keys as above}}``) the DAG has one independent task per entry instead of the one
task ``train``: several scenarios in one ``airflow dags test`` run (tests/e2e/test_vertex_operator.py).
"""

from __future__ import annotations

import json
import os

from airflow.sdk import DAG

from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy

FAST = Backoff(initial_seconds=0.2, max_seconds=1.0)  # seconds, not minutes: tests
config = json.loads(os.environ.get("RESILIENT_E2E", "{}"))


def training(task_id: str, settings: dict) -> ResilientCustomJobOperator:
    """The task ``task_id`` as ``settings`` say (the keys of this module's docstring)."""
    argv = settings.get("workload") or ["-c", settings.get("code", "print('ok')")]
    return ResilientCustomJobOperator(
        task_id=task_id,
        project_id="e2e-project",
        region=settings.get("region", "us-central1"),
        display_name=settings.get("display_name", "e2e"),
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "python:3.11", "command": ["python", *argv]}}],
        base_output_dir=settings.get("base_output_dir", f"gs://e2e-bucket/{task_id}"),
        checkpoint_marker="COMMITTED",
        fallbacks=settings.get("fallbacks", []),
        resilience_policy=RetryPolicy(backoff=FAST, failover_backoff=FAST,
                                      budgets={"stockout": Budget(max_retries=3, backoff=FAST),
                                               "quota_wait": Budget(max_seconds=60, backoff=FAST)},
                                      queue_timeout_seconds=settings.get("queue_timeout_seconds", 1800.0)),
        deferrable=settings.get("deferrable", True),
        min_defer_seconds=settings.get("min_defer_seconds", 0.0),  # dag.test() has no executor, hence no race
        poll_interval=settings.get("poll_interval", 0.3),
        retries=settings.get("retries", 0),
        disable_retries=settings.get("disable_retries", False),
    )


# A DAG id of its own per set of tasks: Airflow 3.1 and 3.2 store a DAG's structure the first time dag.test() runs
# it, and later runs of that DAG id keep it.
with DAG(config.get("dag_id", "e2e_vertex"), schedule=None, catchup=False) as dag:
    for task_id, task_config in (config.get("tasks") or {"train": config}).items():
        training(task_id, task_config)
