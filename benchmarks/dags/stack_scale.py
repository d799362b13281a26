"""The scale benchmark's DAG (benchmarks/stack_scale.py): ``n`` mapped, deferred ResilientCustomJobOperator tasks,
each training job waiting until the benchmark lets it end -- its replica reads one line from its own FIFO
(``<fifo_dir>/job_<i>``), so a waiting job costs a blocked ``sh`` and no CPU, and the benchmark decides when each
job ends.

``dag_run.conf``: ``n`` (tasks) and ``fifo_dir`` (where the FIFOs are, made by the benchmark). The operators'
``poll_interval`` (seconds; 30 by default, as in production) comes from ``RESILIENT_SCALE_POLL_INTERVAL`` in the
environment of the stack's processes (it is not a templated argument).
"""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import DAG, Param, task

from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator

with DAG("stack_scale", schedule=None, catchup=False, max_active_tasks=64, tags=["benchmark"],
         params={"n": Param(50, type="integer", minimum=1), "fifo_dir": Param("/tmp", type="string")}):

    @task
    def pools(params: dict | None = None) -> list[list[dict]]:
        """One worker pool spec per task: its replica waits on its own FIFO, then exits 0."""
        assert params is not None
        return [[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                  "container_spec": {"image_uri": "python:3.11", "command": [
                      "sh", "-c", f"read line < {params['fifo_dir']}/job_{i}"]}}] for i in range(params["n"])]

    ResilientCustomJobOperator.partial(
        task_id="train", project_id="resilient-bench", region="us-central1", display_name="scale",
        base_output_dir="gs://resilient-bench/scale/{{ run_id }}/{{ ti.map_index }}",  # its own checkpoints each
        poll_interval=float(os.environ.get("RESILIENT_SCALE_POLL_INTERVAL", "30")), deferrable=True,
        # as in production: a try lost to the machine (a worker's heartbeat missed under the launch's load) is
        # retried and reattaches to its job; the benchmark counts such tasks
        retries=2, retry_delay=timedelta(seconds=10),
    ).expand(worker_pool_specs=pools())
