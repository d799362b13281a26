"""System test: a ResilientTPUWorkloadOperator running a command on a Cloud TPU VM -- a real project's or the
emulator's.

Setup creates the bucket for the run's checkpoint directory; the task creates a v2-8 TPU VM (one host) in
``SYSTEM_TESTS_GCP_TPU_ZONE``, runs a command that prints three steps, and deletes the node; teardown checks that
no node of this run is live and deletes the bucket. Cost on a real project: a v2-8 on demand for the ten minutes
or so of creating, running and deleting it (Cloud TPU pricing: a few US dollars an hour).
"""

from __future__ import annotations

from airflow.sdk import DAG
from system_common import (
    GCP_CONN_ID,
    MIN_DEFER_SECONDS,
    POLL_SECONDS,
    PROJECT_ID,
    TPU_ZONE,
    bucket_name,
    create_bucket,
    delete_bucket,
    nothing_left,
)

from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator

DAG_ID = "example_system_tpu_workload"

with DAG(DAG_ID, schedule=None, catchup=False, tags=["system", "tpu"]) as dag:
    bucket = create_bucket(bucket_name(DAG_ID))
    train = ResilientTPUWorkloadOperator(
        task_id="train", project_id=PROJECT_ID, zone=TPU_ZONE, gcp_conn_id=GCP_CONN_ID,
        accelerator_type="v2-8", runtime_version="tpu-ubuntu2204-base",
        command='for step in 1 2 3; do echo "step $step"; done',
        checkpoint_dir=f"gs://{bucket_name(DAG_ID)}/{{{{ run_id }}}}/checkpoints",
        deferrable=True,
        poll_interval=POLL_SECONDS, min_defer_seconds=MIN_DEFER_SECONDS,
    )
    check = nothing_left(DAG_ID, zones=[TPU_ZONE], run_id="{{ run_id }}")
    bucket >> train >> check >> delete_bucket(bucket)
