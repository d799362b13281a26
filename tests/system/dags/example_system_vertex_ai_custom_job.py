"""System test: a ResilientCustomJobOperator training on Vertex AI -- a real project's or the emulator's.

Setup creates a bucket (the job's ``base_output_dir``); the task runs a CustomJob of one n1-standard-4 replica (the
public ``python:3.11-slim`` image; the emulator runs the same command as a local process) that prints three steps;
teardown checks that no job of this run is live and deletes the bucket. Cost on a real project: one n1-standard-4
for the job's few minutes (Vertex AI pricing, "Custom-trained models": a few US cents).
"""

from __future__ import annotations

from airflow.sdk import DAG
from system_common import (
    GCP_CONN_ID,
    MIN_DEFER_SECONDS,
    POLL_SECONDS,
    PROJECT_ID,
    REGION,
    bucket_name,
    create_bucket,
    delete_bucket,
    nothing_left,
)

from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator

DAG_ID = "example_system_vertex_ai_custom_job"
#: Three steps (what a training prints; the operator reads them from the job's logs).
SCRIPT = "for step in range(1, 4):\n    print('step', step, flush=True)\n"

with DAG(DAG_ID, schedule=None, catchup=False, tags=["system", "vertex-ai"]) as dag:
    bucket = create_bucket(bucket_name(DAG_ID))
    train = ResilientCustomJobOperator(
        task_id="train", project_id=PROJECT_ID, region=REGION, gcp_conn_id=GCP_CONN_ID,
        display_name="resilient-system-test",
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "python:3.11-slim",
                                               "command": ["python3", "-c", SCRIPT]}}],
        base_output_dir=f"gs://{bucket_name(DAG_ID)}/{{{{ run_id }}}}", deferrable=True,
        poll_interval=POLL_SECONDS, min_defer_seconds=MIN_DEFER_SECONDS,
    )
    check = nothing_left(DAG_ID, regions=[REGION], run_id="{{ run_id }}")
    bucket >> train >> check >> delete_bucket(bucket)
