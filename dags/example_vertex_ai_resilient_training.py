"""Train a real model on Vertex AI -- or on the offline emulator -- through crashes, a stockout and
internal errors, resuming each new attempt from the latest complete checkpoint.

Run offline: ``make demo`` (starts the emulator with dags/faults/vertex_demo.yaml and runs
``airflow dags test`` on this DAG). The workload (dags/workloads/train_digits.py) trains an MLP on
scikit-learn's digits data, checkpointing every 3 epochs to ``AIP_CHECKPOINT_DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow.sdk import dag
from demo_report import report_task

from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, Budget, Fallback, RetryPolicy

WORKLOAD = str(Path(__file__).parent / "workloads" / "train_digits.py")
OUTPUT = os.environ.get("RESILIENT_DEMO_OUTPUT", "gs://resilient-demo/digits")
#: Each run writes under its own path: two runs in one checkpoint directory would resume from each other's saves
#: (the operator refuses to submit beside a live run of another task instance writing there).
RUN_OUTPUT = OUTPUT + "/{{ run_id }}"
EPOCHS = os.environ.get("RESILIENT_DEMO_EPOCHS", "30")

# Short backoffs so that the offline demo finishes in a minute; in production keep the defaults
# (30 s doubling to 10 min; stockouts 2 min doubling to 30 min; 10 s before each failover).
DEMO_POLICY = RetryPolicy(
    backoff=Backoff(initial_seconds=1.0, max_seconds=4.0),
    failover_backoff=Backoff(initial_seconds=1.0, max_seconds=4.0),
    budgets={"stockout": Budget(max_retries=3, backoff=Backoff(initial_seconds=2.0, max_seconds=8.0))},
)


@dag(schedule=None, catchup=False, tags=["resilient", "vertex-ai", "example"])
def example_vertex_ai_resilient_training():
    train = ResilientCustomJobOperator(
        task_id="train",
        project_id=os.environ.get("RESILIENT_DEMO_PROJECT", "resilient-demo"),
        region="us-central1",
        display_name="digits-mlp",
        worker_pool_specs=[{
            "machine_spec": {"machine_type": "n1-standard-4"},
            "replica_count": 1,
            "container_spec": {
                "image_uri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-0:latest",
                "command": ["python", WORKLOAD, "--epochs", EPOCHS, "--checkpoint-every", "3",
                            "--epoch-seconds", "0.1"],
            },
        }],
        base_output_dir=RUN_OUTPUT,
        checkpoint_marker="COMMITTED",
        fallbacks=[Fallback(region="europe-west4")],
        resilience_policy=DEMO_POLICY,
        deferrable=True,
        poll_interval=1.0,
        # No new checkpoint for 60 s while RUNNING (a checkpoint comes every ~0.3 s here): a hang -- cancel
        # and resume. It also has the trigger report checkpoint steps for the goodput ledger.
        hang_timeout=60.0,
    )

    report_task(OUTPUT, label="")(train.output)


example_vertex_ai_resilient_training()
