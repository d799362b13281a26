"""A multislice run's recovery time after one slice fails:

    python benchmarks/multislice.py [--slices 2 4] [--runs 3] [--quick]

Each run is ``ResilientTPUWorkloadOperator(slices=N)`` on the emulator: N v4-8 slices through one queued resource
(``multi_node_params``), the demo workload (a step every ``--step-seconds``, a checkpoint every
``--checkpoint-every`` steps). At a seeded step one seeded slice is preempted (emulator fault ``preemption``
matching that slice's node). The operator ends the whole group and requests a new one, which resumes from the
latest complete checkpoint.

Figures per run, from the run's own history and the step reports it kept (the task state store):

* **detection** -- the preemption (its audit entry's time) to the operator's decision;
* **recovery** -- the decision to the new group's first step: ending the old group (its queued resource and
  every slice), queueing and creating the new one, booting its workers, restoring the checkpoint;
* **steps redone** -- the steps trained again after the resume.

All times are in emulator seconds (the platform's latencies -- a queued resource's queue, a node's create and
delete -- scaled by ``--time-scale``); printed per run, then the mean per slice count.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKLOAD = ROOT / "dags" / "workloads" / "train_digits.py"
#: ``--quick`` (CI: the benchmark runs and prints its tables, no figure is checked): one 2-slice run, a checkpoint every
#: 3 steps (a shorter run: the preemption falls within steps 4-7, the run ends 6 steps later), the queued resource's
#: queue and the nodes' create and delete in a fifth of the time.
QUICK = {"slices": [2], "runs": 1, "checkpoint_every": 3, "time_scale": 0.002}


def one_run(emulator: Any, slices: int, run: int, a: argparse.Namespace) -> dict[str, Any]:
    """One multislice run through one slice's preemption; the recovery figures."""
    from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator
    from airflow_provider_resilient.policy import Backoff, RetryPolicy
    from airflow_provider_resilient.specs.tpu import node_id_for
    from airflow_provider_resilient.testing.standalone import standalone_context

    draw = random.Random(f"multislice:{a.seed}:{slices}:{run}")
    struck, at_step = draw.randrange(slices), draw.randint(4, 4 + a.checkpoint_every)
    task_id = f"ms{slices}-{run}"
    first = node_id_for(task_id, "adhoc_airflow", task_id, task_id, -1, 1)
    emulator.add_fault({"kind": "preemption", "at_step": at_step, "grace_seconds": 0.2,
                        "match": {"display_name": f"{first}-{struck}"}})
    fast = Backoff(initial_seconds=0.1, multiplier=1.0, max_seconds=0.1, jitter=0.0)
    op = ResilientTPUWorkloadOperator(
        task_id=task_id, project_id="bench-project", zone="us-central2-b", accelerator_type="v4-8",
        runtime_version="tpu-ubuntu2204-base", tpu_node_id=task_id, slices=slices, preflight=False,
        command=f"{sys.executable} {WORKLOAD} --epochs {at_step + 2 * a.checkpoint_every} "
                f"--checkpoint-every {a.checkpoint_every} --epoch-seconds {a.step_seconds} "
                '--checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"',
        checkpoint_dir=f"gs://bench/multislice/{task_id}", checkpoint_marker="COMMITTED",
        resilience_policy=RetryPolicy(backoff=fast), poll_interval=a.poll_interval,
        heartbeat_seconds=a.poll_interval)
    ctx = standalone_context(task_id)
    result = op.execute(ctx)
    attempts = result["attempts"]
    incident = attempts[0]["incidents"][0]
    failed_at, decided_at = incident["failure"]["timestamp"], incident["decision"]["decided_at"]
    from airflow_provider_resilient.operators.run_store import steps_from_json

    steps = [(r.time, r.step) for r in steps_from_json(ctx["task_state_store"].get(op.STEPS_KEY))]
    resumed = attempts[1].get("resumed_from_step") or 0  # (absent: from scratch)
    later = [t for t, _ in steps if t >= attempts[1]["started_at"]]
    running_again = min(later) if later else float("nan")
    reached = max((s for t, s in steps if t <= failed_at + 1e-6), default=resumed)
    return {"slices": slices, "run": run, "struck": struck, "at_step": at_step, "attempts": len(attempts),
            "detection": decided_at - failed_at, "recovery": running_again - decided_at,
            "redone": max(0, reached - resumed), "resumed": resumed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slices", type=int, nargs="+", default=[2, 4], help="slice counts to run")
    parser.add_argument("--runs", type=int, default=3, help="runs per slice count")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--step-seconds", type=float, default=0.1, help="training time per step, seconds")
    parser.add_argument("--checkpoint-every", type=int, default=5, help="the workload's checkpoint, steps")
    parser.add_argument("--poll-interval", type=float, default=0.2, help="operator poll and runner heartbeat, seconds")
    parser.add_argument("--time-scale", type=float, default=0.01, help="real seconds per platform second")
    parser.add_argument("--quick", action="store_true", help="one short 2-slice run (CI; see QUICK)")
    a = parser.parse_args()
    if a.quick:
        for name, value in QUICK.items():
            setattr(a, name, value)
    logging.basicConfig(level=logging.WARNING)
    from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig

    rows = []
    began = time.monotonic()
    config = EmulatorConfig(time_scale=a.time_scale, seed=a.seed)
    with Emulator(config=config) as emulator:
        os.environ.update(emulator.env())
        emulator.ensure_bucket("bench")
        for slices in a.slices:
            for run in range(1, a.runs + 1):
                rows.append(one_run(emulator, slices, run, a))
    latencies = config.latencies
    print(f"Recovery of a multislice run after one slice is preempted ({a.runs} run(s) per slice count; v4-8 "
          f"slices; queue {latencies.tpu_queue_seconds * a.time_scale:g} s, create "
          f"{latencies.tpu_create_seconds * a.time_scale:g} s, delete {latencies.tpu_delete_seconds * a.time_scale:g} "
          f"s in the emulator; poll {a.poll_interval:g} s; {time.monotonic() - began:.0f} s)\n")
    print("| slices | run | slice struck | at step | attempts | detection (s) | recovery to the first step (s) | "
          "resumed from | steps redone |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['slices']} | {r['run']} | {r['struck']} | {r['at_step']} | {r['attempts']} | "
              f"{r['detection']:.2f} | {r['recovery']:.2f} | {r['resumed']} | {r['redone']} |")
    print("\n| slices | mean detection (s) | mean recovery (s) | mean steps redone |")
    print("| --- | --- | --- | --- |")
    for slices in a.slices:
        mine = [r for r in rows if r["slices"] == slices]
        detection, recovery = (statistics.mean(r[k] for r in mine) for k in ("detection", "recovery"))
        print(f"| {slices} | {detection:.2f} | {recovery:.2f} | {statistics.mean(r['redone'] for r in mine):.1f} |")
    return 0


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
