"""DAGs of the stack tests (tests/stack/): the demo workload on Vertex AI and on a TPU node, each run writing
checkpoints under its own run id, deferrable (the stack's ``[operators] default_deferrable``) and polling.

``dag_run.conf`` (or the params' defaults): ``epochs`` and ``epoch_seconds`` of the workload -- a test that
clicks while the training runs asks for a long one -- and ``fail_first_attempt_at`` (see :func:`train`).
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator
from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy

WORKLOAD = str(Path(__file__).resolve().parents[3] / "dags" / "workloads" / "train_digits.py")
FAST = Backoff(initial_seconds=0.5, multiplier=1.0, max_seconds=0.5, jitter=0.0)
POLICY = RetryPolicy(backoff=FAST, failover_backoff=FAST,
                     budgets={"stockout": Budget(max_retries=3, backoff=FAST),
                              "maintenance_wait": Budget(max_seconds=120, backoff=FAST)})
PARAMS = {"epochs": Param(24, type="integer"), "epoch_seconds": Param(0.2, type="number"),
          "fail_first_attempt_at": Param(0, type="integer")}


def train(extra: str = "") -> str:
    """The workload's command line; with ``fail_first_attempt_at`` N > 0, attempt 1 trains N epochs and then
    exits 1 (a permanent user error: the task fails), and later attempts train to the end."""
    run = (f"python3 {WORKLOAD} --checkpoint-every 3 --epoch-seconds {{{{ params.epoch_seconds }}}}{extra}"
           " --epochs")
    return ('{% if params.fail_first_attempt_at %}if [ "$RESILIENT_ATTEMPT" = 1 ]; then '
            f"{run} {{{{ params.fail_first_attempt_at }}}} && exit 1; fi; {{% endif %}}{run} {{{{ params.epochs }}}}")


TRAIN = train()

for deferrable in (None, False):
    suffix = "" if deferrable is None else "_polling"
    mode = {} if deferrable is None else {"deferrable": False}
    with DAG(f"stack_vertex{suffix}", schedule=None, catchup=False, params=PARAMS, tags=["stack-test"]):
        ResilientCustomJobOperator(
            task_id="train", project_id="resilient-demo", region="us-central1", display_name="stack-digits",
            worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                                "container_spec": {"image_uri": "python:3.11", "command": ["sh", "-c", TRAIN]}}],
            base_output_dir="gs://resilient-stack/vertex/{{ run_id }}", checkpoint_marker="COMMITTED",
            resilience_policy=POLICY, poll_interval=1.0, retries=0, **mode)
    with DAG(f"stack_tpu{suffix}", schedule=None, catchup=False, params=PARAMS, tags=["stack-test"]):
        ResilientTPUWorkloadOperator(
            task_id="train", project_id="resilient-demo", zone="us-central2-b", accelerator_type="v4-8",
            runtime_version="tpu-ubuntu2204-base",
            command=train(' --checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"'),
            checkpoint_dir="gs://resilient-stack/tpu/{{ run_id }}/checkpoints", checkpoint_marker="COMMITTED",
            resilience_policy=POLICY, heartbeat_seconds=0.5, poll_interval=1.0, retries=0, **mode)
