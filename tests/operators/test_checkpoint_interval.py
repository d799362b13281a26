"""Issue 14 part 3 end to end on the emulator: after an interruption, the next attempt is handed the checkpoint
interval the run's own failures and saves advise (``RESILIENT_CHECKPOINT_INTERVAL_SECONDS``), bounded by the
user's cap, and the demo workload checkpoints by it."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, RetryPolicy

from .test_vertex_operator_unit import context

WORKLOAD = Path(__file__).parents[2] / "dags" / "workloads" / "train_digits.py"
FAST = RetryPolicy(backoff=Backoff(initial_seconds=0.05, max_seconds=0.1),
                   failover_backoff=Backoff(initial_seconds=0.05, max_seconds=0.1))


def train(**overrides: Any) -> ResilientCustomJobOperator:
    arguments: dict[str, Any] = dict(
        task_id="train", project_id="test-project", region="us-central1", display_name="digits",
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "python:3.11", "command": [
                                sys.executable, str(WORKLOAD), "--epochs", "16", "--checkpoint-every", "2",
                                "--epoch-seconds", "0.05"]}}],
        base_output_dir="gs://interval-bucket/run", checkpoint_marker="COMMITTED", resilience_policy=FAST,
        poll_interval=0.05, min_defer_seconds=0.0, deferrable=False)
    arguments.update(overrides)
    return ResilientCustomJobOperator(**arguments)


def attempt_env(job_name: str) -> dict[str, str]:
    from airflow_provider_resilient.specs.vertex import primary_env
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    return primary_env(vertex_job_client("us-central1").get_custom_job(name=job_name))


# Real time (the advice relates the saves' own times to the attempts'), latencies compressed; a crash fails the job
# at once: the platform's own retries of it are the emulator's rules (tests/emulator/test_platform_rules.py).
@pytest.mark.resilient_emulator(time_scale=0.002, platform={"transient_job_retries": 0})
def test_the_second_attempt_is_handed_the_advised_interval_capped_and_the_workload_honours_it(resilient_emulator):
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "at_step": 6, "match": {"nth": 1}})
    result = train(checkpoint_interval_cap=0.2).execute(context())
    first, second = (a["resource_name"] for a in result["attempts"])
    assert "RESILIENT_CHECKPOINT_INTERVAL_SECONDS" not in attempt_env(first)  # nothing observed yet
    handed = float(attempt_env(second)["RESILIENT_CHECKPOINT_INTERVAL_SECONDS"])
    assert 0 < handed <= 0.2  # Young/Daly of the observed MTBF and save cost, within the user's cap
    log = resilient_emulator.replica_log(second)
    assert f"checkpoint interval: {handed:g} s" in log
    saved = [int(s) for s in re.findall(r"saved checkpoint \S*step_(\d+)", log)]
    assert saved and saved[-1] == 16  # the final epoch is always saved (the time rule itself: the workload's test)
