"""Tune the demo model's learning rate with a Vertex AI HyperparameterTuningJob -- or on the offline emulator --
through a trial that crashes and an internal error, without running a finished trial again.

Run offline: ``.venv/bin/python scripts/run_demo.py --dag example_vertex_ai_hyperparameter_tuning`` (starts the
emulator with dags/faults/vertex_tuning.yaml and runs ``airflow dags test`` on this DAG). Each trial runs
dags/workloads/train_digits.py with ``--learning_rate=<value>``, checkpoints under
``<checkpoint_dir>/trials/learning_rate=<value>/`` (where the same grid point, run again after an interruption,
resumes) and reports its held-out accuracy as ``cloudml-hypertune`` does.
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow.sdk import dag
from demo_report import study_report_task

from airflow_provider_resilient.operators.vertex_ai_tuning import ResilientHyperparameterTuningJobOperator
from airflow_provider_resilient.policy import Backoff, RetryPolicy

WORKLOAD = str(Path(__file__).parent / "workloads" / "train_digits.py")
OUTPUT = os.environ.get("RESILIENT_DEMO_OUTPUT", "gs://resilient-demo/digits-tuning")
EPOCHS = os.environ.get("RESILIENT_DEMO_EPOCHS", "18")
#: Seconds each epoch sleeps beside its work (the demo's pace; the tests run it faster: the story is in steps).
EPOCH_SECONDS = os.environ.get("RESILIENT_DEMO_EPOCH_SECONDS", "0.1")

# Short backoffs so that the offline demo finishes in a minute; in production keep the defaults.
DEMO_POLICY = RetryPolicy(backoff=Backoff(initial_seconds=1.0, max_seconds=4.0),
                          failover_backoff=Backoff(initial_seconds=1.0, max_seconds=4.0))


@dag(schedule=None, catchup=False, tags=["resilient", "vertex-ai", "tuning", "example"])
def example_vertex_ai_hyperparameter_tuning():
    train = ResilientHyperparameterTuningJobOperator(
        task_id="train",
        project_id=os.environ.get("RESILIENT_DEMO_PROJECT", "resilient-demo"),
        region="us-central1",
        display_name="digits-lr-study",
        study_spec={
            "metrics": [{"metric_id": "accuracy", "goal": "MAXIMIZE"}],
            "parameters": [{"parameter_id": "learning_rate", "scale_type": "UNIT_LOG_SCALE",
                            "discrete_value_spec": {"values": [0.0001, 0.0003, 0.001, 0.003, 0.01]}}],
            "algorithm": "GRID_SEARCH",
        },
        max_trial_count=5,
        # A trial failing for good (exit 1: a bug, a bad value) twice ends the study; crashes, internal errors
        # and lost replicas never count -- their trials are owed and run again.
        max_failed_trial_count=2,
        worker_pool_specs=[{
            "machine_spec": {"machine_type": "n1-standard-4"},
            "replica_count": 1,
            "container_spec": {
                "image_uri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-0:latest",
                "command": ["python", WORKLOAD, "--epochs", EPOCHS, "--checkpoint-every", "3",
                            "--epoch-seconds", EPOCH_SECONDS],
            },
        }],
        base_output_dir=OUTPUT + "/{{ run_id }}",
        checkpoint_marker="COMMITTED",
        resilience_policy=DEMO_POLICY,
        deferrable=True,
        poll_interval=1.0,
    )

    study_report_task()(train.output)


example_vertex_ai_hyperparameter_tuning()
