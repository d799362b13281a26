"""Train a real model on Huawei Cloud ModelArts -- or on the offline emulator -- through a hardware fault the
platform's own fault tolerance cannot get past and a sold-out flavor, resuming each new training job from the latest
complete checkpoint in OBS.

Run offline: ``make demo`` (starts the emulator with dags/faults/modelarts_demo.yaml and runs ``airflow dags test`` on
this DAG). The workload (dags/workloads/train_digits.py) trains an MLP on scikit-learn's digits data, checkpointing
every 3 epochs to ``RESILIENT_CHECKPOINT_DIR`` (``obs://``).

With ``job_retry_num=1`` ModelArts re-issues the job once on new nodes after a hardware fault ("Training Fault
Tolerance Check"); when its next run hits one too, the platform gives up and the operator takes over: a new job on new
nodes, resumed from the checkpoint. That job's flavor is sold out -- it queues -- and past the queue timeout the
operator stops it and runs the next attempt on the fallback flavor.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from airflow.sdk import dag
from demo_report import report_task

from airflow_provider_resilient.operators.modelarts import ResilientModelArtsTrainingJobOperator
from airflow_provider_resilient.policy import Backoff, Fallback, RetryPolicy

WORKLOAD = str(Path(__file__).parent / "workloads" / "train_digits.py")
OUTPUT = os.environ.get("RESILIENT_DEMO_MODELARTS_OUTPUT", "obs://resilient-demo/modelarts-digits")
#: Each run writes under its own path (two runs in one checkpoint directory would resume from each other's saves).
RUN_OUTPUT = OUTPUT + "/{{ run_id }}"
EPOCHS = os.environ.get("RESILIENT_DEMO_EPOCHS", "30")
#: On ModelArts the command runs in the image's shell; offline, the emulator runs it with this interpreter.
PYTHON = os.environ.get("RESILIENT_DEMO_PYTHON", sys.executable)

# Short backoffs and a short queue timeout so that the offline demo finishes in a minute; in production keep the
# defaults (30 s doubling to 10 min; a queue timeout of 30 minutes, ModelArts' own limit for a re-issued job).
DEMO_POLICY = RetryPolicy(
    backoff=Backoff(initial_seconds=1.0, max_seconds=4.0),
    failover_backoff=Backoff(initial_seconds=1.0, max_seconds=4.0),
    queue_timeout_seconds=8.0,
)


@dag(schedule=None, catchup=False, tags=["resilient", "modelarts", "example"])
def example_modelarts_resilient_training():
    train = ResilientModelArtsTrainingJobOperator(
        task_id="train",
        name="digits-mlp",
        flavor_id="modelarts.vm.cpu.8u",
        command=(f"{PYTHON} {WORKLOAD} --epochs {EPOCHS} --checkpoint-every 3 --epoch-seconds 0.1 "
                 '--checkpoint-dir "$RESILIENT_CHECKPOINT_DIR" --model-dir ' + RUN_OUTPUT + "/model"),
        image_url="swr.cn-north-4.myhuaweicloud.com/resilient-demo/train-digits:1",
        checkpoint_dir=RUN_OUTPUT + "/checkpoints",
        checkpoint_marker="COMMITTED",
        job_retry_num=1,
        fallbacks=[Fallback(flavor_id="modelarts.vm.cpu.2u")],
        resilience_policy=DEMO_POLICY,
        deferrable=True,
        poll_interval=1.0,
        hang_timeout=60.0,
    )

    report_task(OUTPUT, label="MODELARTS ")(train.output)


example_modelarts_resilient_training()
