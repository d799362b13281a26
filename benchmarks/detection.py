"""Fault-to-decision latency (detection) and decision-to-running time (recovery), per failure class and
``poll_interval``, for ResilientCustomJobOperator against the emulator.

    python benchmarks/detection.py [--runs 5] [--poll 1 2 5] [--quick]

Each run submits a job whose first attempt a fault ends at a seeded random moment (platform retries off,
so the figure is ours, not the platform's), lets the operator decide, and reads its attempt history:
detection = decision time - the job's end time reported by the platform; recovery = the next attempt's
submit time - the decision (backoff, here 1 s, plus the create call). The emulator runs with
``time_scale`` 0.01 (its ~1 min error delay becomes 0.6 s, before the end time is set). Prints a
Markdown table of p50 / p95 in seconds.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
from typing import Any

os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "ERROR")  # before Airflow is imported: quiet runs

from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy
from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig
from airflow_provider_resilient.testing.standalone import standalone_context

SCENARIOS = {
    "transient_crash": {"kind": "crash", "exit_code": 139, "after_seconds": 0.3},
    "internal_error": {"kind": "internal_error", "after_seconds": 0.3},
    "capacity_stockout": {"kind": "stockout"},
    "worker_failure": {"kind": "worker_failure", "after_seconds": 0.3},
}
FAST = Backoff(initial_seconds=1.0, multiplier=1.0, max_seconds=1.0, jitter=0.0)
POLICY = RetryPolicy(backoff=FAST, budgets={"stockout": Budget(max_retries=3, backoff=FAST)})


def one_run(emulator: Emulator, fault: dict[str, Any], poll: float, run: int) -> tuple[float, float]:
    emulator.reset()
    fault = dict(fault, match={"nth": 1})
    if "after_seconds" in fault:  # strike at a seeded random moment, so failures fall anywhere between polls
        fault["after_seconds"] = random.Random(f"{fault['kind']}:{poll}:{run}").uniform(0.1, 3.0)
    emulator.add_fault(fault)
    op = ResilientCustomJobOperator(
        task_id=f"bench{run}", project_id="bench-project", region="us-central1", display_name="bench",
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "x",
                                               "command": ["python", "-c", "import time; time.sleep(4)"]}}],
        base_output_dir="gs://bench/run", disable_retries=True, deferrable=False, poll_interval=poll,
        resilience_policy=POLICY)
    result = op.execute(standalone_context(f"bench-{run}"))
    first, second = result["attempts"][0], result["attempts"][1]
    incident = first["incidents"][0]
    detection = incident["decision"]["decided_at"] - incident["failure"]["timestamp"]
    recovery = second["started_at"] - incident["decision"]["decided_at"]
    return detection, recovery


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--poll", type=float, nargs="+", default=[1.0, 2.0, 5.0])
    parser.add_argument("--quick", action="store_true", help="1 run, poll 0.5 s, 2 classes (CI)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the operator's own log lines would drown the table
    runs, polls, scenarios = args.runs, args.poll, SCENARIOS
    if args.quick:
        runs, polls = 1, [0.5]
        scenarios = {k: SCENARIOS[k] for k in ("transient_crash", "capacity_stockout")}
    print("| failure class | poll_interval s | detection p50 s | detection p95 s | recovery p50 s | recovery p95 s |")
    print("| --- | --- | --- | --- | --- | --- |")
    with Emulator(config=EmulatorConfig(time_scale=0.01)) as emulator:
        os.environ.update(emulator.env())
        for name, fault in scenarios.items():
            for poll in polls:
                figures = [one_run(emulator, fault, poll, n) for n in range(runs)]
                det = [d for d, _ in figures]
                rec = [r for _, r in figures]
                print(f"| {name} | {poll:g} | {statistics.median(det):.2f} | {percentile(det, 0.95):.2f} | "
                      f"{statistics.median(rec):.2f} | {percentile(rec, 0.95):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
