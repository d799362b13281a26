"""A one-task DAG whose ResilientCustomJobOperator is configured by the test through RESILIENT_E2E (JSON).

Keys: ``code`` (the replica's Python one-liner), ``display_name``, ``deferrable``, ``fallbacks``,
``poll_interval``, ``workload`` (a list of argv after ``python``, instead of ``code``), ``base_output_dir``,
``queue_timeout_seconds`` (``RetryPolicy.queue_timeout_seconds``, default 1800).
"""

from __future__ import annotations

import json
import os

from airflow.sdk import DAG

from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy

FAST = Backoff(initial_seconds=0.2, max_seconds=1.0)  # seconds, not minutes: tests
config = json.loads(os.environ.get("RESILIENT_E2E", "{}"))
argv = config.get("workload") or ["-c", config.get("code", "print('ok')")]

with DAG("e2e_vertex", schedule=None, catchup=False) as dag:
    ResilientCustomJobOperator(
        task_id="train",
        project_id="e2e-project",
        region="us-central1",
        display_name=config.get("display_name", "e2e"),
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "python:3.11", "command": ["python", *argv]}}],
        base_output_dir=config.get("base_output_dir", "gs://e2e-bucket/run"),
        checkpoint_marker="COMMITTED",
        fallbacks=config.get("fallbacks", []),
        resilience_policy=RetryPolicy(backoff=FAST, failover_backoff=FAST,
                                      budgets={"stockout": Budget(max_retries=3, backoff=FAST),
                                               "quota_wait": Budget(max_seconds=60, backoff=FAST)},
                                      queue_timeout_seconds=config.get("queue_timeout_seconds", 1800.0)),
        deferrable=config.get("deferrable", True),
        min_defer_seconds=config.get("min_defer_seconds", 0.0),  # dag.test() has no executor, hence no race
        poll_interval=config.get("poll_interval", 0.3),
        retries=config.get("retries", 0),
    )
