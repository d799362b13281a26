"""Fault-tolerance checks on a Cloud TPU VM -- or the offline emulator: the first node boots with a
TPU chip missing, so the worker runner's pre-check (``preflight failed: item tpu-check``) stops the job before it
starts and the operator isolates the node (a new one); the second node loses a chip while training, so the
periodic hardware check stops the workload (SIGTERM: it checkpoints) and the operator isolates that node too;
the third trains to the end from the latest complete checkpoint.

Run offline: ``.venv/bin/python scripts/run_demo.py --dag example_tpu_fault_tolerance_checks`` (fault plan
dags/faults/tpu_preflight.yaml).
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow.sdk import dag
from demo_report import report_task

from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy
from airflow_provider_resilient.specs.preflight import Preflight

WORKLOAD = str(Path(__file__).parent / "workloads" / "train_digits.py")
OUTPUT = os.environ.get("RESILIENT_DEMO_TPU_CHECKS_OUTPUT", "gs://resilient-demo/tpu-checks")
RUN_OUTPUT = OUTPUT + "/{{ run_id }}"

# Short waits so that the offline example finishes in a minute; in production keep the defaults.
FAST = Backoff(initial_seconds=0.5, multiplier=1.0, max_seconds=0.5, jitter=0.0)


@dag(schedule=None, catchup=False, tags=["resilient", "tpu", "example", "fault-tolerance-checks"])
def example_tpu_fault_tolerance_checks():
    train = ResilientTPUWorkloadOperator(
        task_id="train",
        project_id=os.environ.get("RESILIENT_DEMO_PROJECT", "resilient-demo"),
        zone="us-central2-b",
        accelerator_type="v4-8",  # 1 worker VM with 4 chips: tpu-check expects to see all 4
        runtime_version="tpu-ubuntu2204-base",
        command=f'python3 {WORKLOAD} --epochs 24 --checkpoint-every 3 --epoch-seconds 0.15 '
                f'--checkpoint-dir "$RESILIENT_CHECKPOINT_DIR" --model-dir {RUN_OUTPUT}/model',
        checkpoint_dir=f"{RUN_OUTPUT}/checkpoints",
        checkpoint_marker="COMMITTED",
        # The default items and thresholds (preflight=True), with the periodic device check every
        # second instead of every minute so that the example is short. preflight=False turns the checks off.
        preflight=Preflight(hardware_check_seconds=1.0),
        # Re-issues after a failed pre-check: 0 to 3 (default 3), as ModelArts' fault-tolerance/job-retry-num.
        resilience_policy=RetryPolicy(backoff=FAST, budgets={"preflight": Budget(max_retries=2)}),
        heartbeat_seconds=0.5,
        poll_interval=0.5,
    )

    report_task(OUTPUT, label="TPU ")(train.output)


example_tpu_fault_tolerance_checks()
