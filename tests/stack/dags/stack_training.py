"""DAGs of the stack tests (tests/stack/): the demo workload on Vertex AI, on a TPU node and on Huawei Cloud ModelArts
(checkpoints in OBS, the platform's own re-issues on: ``job_retry_num``), each run writing checkpoints under its own
run id, deferrable (the stack's ``[operators] default_deferrable``) and polling, with
no task retry (``stack_<platform>[_polling]``) and with one (``..._retried``: a try whose worker died is retried
and reattaches).

``dag_run.conf`` (or the params' defaults): ``epochs`` and ``epoch_seconds`` of the workload -- a test that
clicks while the training runs asks for a long one --, ``fail_first_try_at`` and ``hold_file`` (see
:func:`train`).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_provider_resilient.operators.modelarts import ResilientModelArtsTrainingJobOperator
from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator
from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy

WORKLOAD = str(Path(__file__).resolve().parents[3] / "dags" / "workloads" / "train_digits.py")
FAST = Backoff(initial_seconds=0.5, multiplier=1.0, max_seconds=0.5, jitter=0.0)
#: Fast backoffs: they are slept in the worker (under min_defer_seconds), so a quota wait keeps the operator in
#: execute() -- where a test kills its worker.
POLICY = RetryPolicy(backoff=FAST, failover_backoff=FAST,
                     budgets={"stockout": Budget(max_retries=3, backoff=FAST),
                              "maintenance_wait": Budget(max_seconds=120, backoff=FAST),
                              "quota_wait": Budget(max_seconds=600, backoff=FAST)})
PARAMS = {"epochs": Param(24, type="integer"), "epoch_seconds": Param(0.2, type="number"),
          "fail_first_try_at": Param(0, type="integer"), "hold_file": Param("", type="string")}


def train(extra: str = "") -> str:
    """The workload's command line; with ``fail_first_try_at`` N > 0, the task's first try trains N epochs and
    then exits 1 (a permanent user error: the task fails), and later tries train to the end (keyed by the try,
    not the attempt: on Airflow 3.1 and 3.2 a cleared TPU task numbers its attempts from 1 again). With ``hold_file`` (a
    path on the machine, which the emulator's replicas share with the test), the training, once done, waits until
    that file exists before it exits: the test says when the job ends, not a guessed length of training."""
    run = (f"python3 {WORKLOAD} --checkpoint-every 3 --epoch-seconds {{{{ params.epoch_seconds }}}}{extra}"
           " --epochs")
    hold = ('{% if params.hold_file %}; rc=$?; while [ ! -e "{{ params.hold_file }}" ]; do sleep 0.2; done; '
            "exit $rc{% endif %}")
    return ("{% if params.fail_first_try_at and ti.try_number == 1 %}"
            f"{run} {{{{ params.fail_first_try_at }}}} && exit 1; {{% endif %}}{run} {{{{ params.epochs }}}}" + hold)


TRAIN = train()

for deferrable, retries in ((None, 0), (False, 0), (None, 1), (False, 1)):
    suffix = ("" if deferrable is None else "_polling") + ("_retried" if retries else "")
    mode = ({} if deferrable is None else {"deferrable": False}) | {"retries": retries,
                                                                    "retry_delay": timedelta(seconds=0)}
    with DAG(f"stack_vertex{suffix}", schedule=None, catchup=False, params=PARAMS, tags=["stack-test"]):
        ResilientCustomJobOperator(
            task_id="train", project_id="resilient-demo", region="us-central1", display_name="stack-digits",
            worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                                "container_spec": {"image_uri": "python:3.11", "command": ["sh", "-c", TRAIN]}}],
            base_output_dir="gs://resilient-stack/vertex/{{ run_id }}", checkpoint_marker="COMMITTED",
            resilience_policy=POLICY, poll_interval=1.0, **mode)
    with DAG(f"stack_tpu{suffix}", schedule=None, catchup=False, params=PARAMS, tags=["stack-test"]):
        ResilientTPUWorkloadOperator(
            task_id="train", project_id="resilient-demo", zone="us-central2-b", accelerator_type="v4-8",
            runtime_version="tpu-ubuntu2204-base",
            command=train(' --checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"'),
            checkpoint_dir="gs://resilient-stack/tpu/{{ run_id }}/checkpoints", checkpoint_marker="COMMITTED",
            resilience_policy=POLICY, heartbeat_seconds=0.5, poll_interval=1.0, **mode)
    with DAG(f"stack_modelarts{suffix}", schedule=None, catchup=False, params=PARAMS, tags=["stack-test"]):
        ResilientModelArtsTrainingJobOperator(
            task_id="train", name="stack-digits", flavor_id="modelarts.vm.cpu.8u",
            image_url="swr.cn-north-4.myhuaweicloud.com/resilient/train:1",
            command=train(' --checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"'),
            checkpoint_dir="obs://resilient-stack/modelarts/{{ run_id }}/checkpoints", checkpoint_marker="COMMITTED",
            job_retry_num=1, resilience_policy=POLICY, poll_interval=1.0, **mode)
