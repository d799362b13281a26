"""Train on a 2-worker Cloud TPU slice -- or the offline emulator -- through two maintenance events: one announced
ahead (``Node.upcoming_maintenance``), which the node recovers from by itself, and one that terminates it (Cloud
TPU, "Manage maintenance events with Cloud TPU Pods"). Before the first the operator asks the workload for a
checkpoint and then waits the event out; after the second it re-creates the node; each time the workload resumes
from its latest complete checkpoint.

Run offline: ``make demo`` (after the Vertex AI demo; fault plan dags/faults/tpu_demo.yaml).
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow.sdk import dag
from demo_report import report_task

from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy

WORKLOAD = str(Path(__file__).parent / "workloads" / "train_digits.py")
OUTPUT = os.environ.get("RESILIENT_DEMO_TPU_OUTPUT", "gs://resilient-demo/tpu-digits")
#: Each run writes under its own path: two runs in one checkpoint directory would resume from each other's saves
#: (the operator refuses to submit beside a live run of another task instance writing there).
RUN_OUTPUT = OUTPUT + "/{{ run_id }}"

# Short waits so that the offline demo finishes in a minute; in production keep the defaults.
FAST = Backoff(initial_seconds=0.5, multiplier=1.0, max_seconds=0.5, jitter=0.0)
DEMO_POLICY = RetryPolicy(backoff=FAST, budgets={"maintenance_wait": Budget(max_seconds=120, backoff=FAST)})


@dag(schedule=None, catchup=False, tags=["resilient", "tpu", "example"])
def example_tpu_resilient_training():
    train = ResilientTPUWorkloadOperator(
        task_id="train",
        project_id=os.environ.get("RESILIENT_DEMO_PROJECT", "resilient-demo"),
        zone="us-central2-b",
        accelerator_type="v4-16",  # 2 worker VMs
        runtime_version="tpu-ubuntu2204-base",
        command=f'python3 {WORKLOAD} --epochs 30 --checkpoint-every 12 --epoch-seconds 0.15 '
                f'--checkpoint-dir "$RESILIENT_CHECKPOINT_DIR" --model-dir {RUN_OUTPUT}/model',
        checkpoint_dir=f"{RUN_OUTPUT}/checkpoints",
        checkpoint_marker="COMMITTED",
        resilience_policy=DEMO_POLICY,
        heartbeat_seconds=0.25,
        poll_interval=0.25,
        # Ask for the checkpoint 1.3 s before an announced window (in production: the default 10 minutes), then
        # ride the event out (most recover by themselves); "move" would leave the node before the window instead.
        maintenance_lead_seconds=1.3,
        maintenance_policy="ride_out",
    )

    report_task(OUTPUT, label="TPU ")(train.output)


example_tpu_resilient_training()
