"""Progress lost to a Spot TPU preemption, with and without the checkpoint on notice:

    python benchmarks/notice.py [--events 6] [--save-seconds 10,30] [--quick]

A Spot VM's preemption notice is an ACPI G2 Soft Off -- the guest's SIGTERM -- and the ACPI G3 Mechanical Off follows
30 seconds later (Compute Engine, "Preemptible VM instances", preemption process,
https://cloud.google.com/compute/docs/instances/preemptible#preemption-process; the Compute Engine API's
``Scheduling.skipGuestOsShutdown``: "30 seconds for Spot VMs"). Cloud TPU's own pages say a Spot TPU VM is
preempted and must be re-created ("Cloud TPU Spot VMs", https://cloud.google.com/tpu/docs/spot) but give no notice
length of their own: this benchmark takes Compute Engine's 30 s (``--notice``), an assumption it states.

Each event is one run of ``ResilientTPUWorkloadOperator`` (``spot=True``) on the emulator: the benchmark workload
(``benchmarks/workloads/steady_training.py --on-request``: a step every ``--step-seconds``, a periodic checkpoint
every ``--checkpoint-every`` steps that costs C = ``--save-seconds``, and a save whenever the worker runner asks).
At a seeded step between its first and second periodic checkpoint the node is preempted: its workers get SIGTERM,
and ``--notice`` seconds later the VM stops; the operator re-creates the node and the workload resumes from the
newest complete checkpoint. Two ways, the same events:

* **checkpoint on notice** -- the operator's default (``checkpoint_on_notice=True``): the worker runner asks the
  workload for a checkpoint before it forwards the SIGTERM, and the helper keeps the SIGTERM from ending the
  workload before its next step's save;
* **without** -- ``checkpoint_on_notice=False``: the SIGTERM ends the workload, as under any tool that does not
  read the notice (the retry loops of Cloud TPU's "Manage maintenance events with Cloud TPU Pods",
  https://cloud.google.com/tpu/docs/maintenance-events; the Google provider, which has no TPU operator).

Progress lost per preemption = the last step the workload finished on the preempted node minus the step the new
node resumed from (both from worker 0's logs), in steps and in seconds of training. A save on notice helps only
when the step in progress and the save fit in the notice: with C longer than the notice it is cut off and the
periodic checkpoint stands. All figures are platform seconds; the emulator runs them ``--time-scale`` times faster.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "ERROR")  # before Airflow is imported: quiet runs
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKLOAD = ROOT / "benchmarks" / "workloads" / "steady_training.py"
WAYS = {"checkpoint on notice": True, "without": False}
#: ``--quick`` (CI: the benchmark runs and prints its tables, no figure is checked): one event, C = 10 s, a periodic
#: checkpoint every 10 steps, the two ways side by side.
QUICK = {"events": 1, "save_seconds": "10", "checkpoint_every": 10}


def one_event(emulator: Any, event: int, cost: float, way: str, on_notice: bool,
              a: argparse.Namespace) -> dict[str, Any]:
    """One run through one preemption of its spot node; the steps lost."""
    from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator
    from airflow_provider_resilient.policy import Backoff, RetryPolicy
    from airflow_provider_resilient.testing.standalone import standalone_context

    s = a.time_scale
    draw = random.Random(f"notice:{a.seed}:{event}")  # the same preemption for both ways and every C
    strike = draw.randint(a.checkpoint_every + 1, 2 * a.checkpoint_every)
    node_id = f"bench-{'n' if on_notice else 'w'}-{event}-{cost:g}".replace(".", "-")
    emulator.add_fault({"kind": "preemption", "at_step": strike, "grace_seconds": a.notice * s,
                        "match": {"labels": {"bench-run": node_id}, "nth": 1}})
    fast = Backoff(initial_seconds=0.1, multiplier=1.0, max_seconds=0.1, jitter=0.0)
    command = " ".join([f"AIP_CHECKPOINT_DIR=\"$RESILIENT_CHECKPOINT_DIR\" {sys.executable} {WORKLOAD}",
                        f"--steps {strike + a.steps_after}", f"--step-seconds {a.step_seconds * s:g}",
                        f"--every {a.checkpoint_every}", f"--save-seconds {cost * s:g}", "--log-steps",
                        "--on-request", "--resume scan"])
    op = ResilientTPUWorkloadOperator(
        task_id=node_id, project_id="bench-project", zone="us-central2-b", accelerator_type="v4-8",
        runtime_version="tpu-ubuntu2204-base", tpu_node_id=node_id, spot=True, labels={"bench-run": node_id},
        command=command, checkpoint_dir=f"gs://bench/notice/{node_id}", checkpoint_marker="COMMITTED",
        resilience_policy=RetryPolicy(backoff=fast, failover_backoff=fast), poll_interval=a.poll_interval * s,
        heartbeat_seconds=a.poll_interval * s, preflight=False, checkpoint_on_notice=on_notice,
        hang_timeout=3600 * s, startup_timeout=3600 * s)
    op.execute(standalone_context(node_id))
    logs = emulator.work_dir / "tpu"
    first = (logs / f"{node_id}-a1" / "worker-0.log").read_text(errors="replace")
    second = (logs / f"{node_id}-a2" / "worker-0.log").read_text(errors="replace")
    reached = max(int(n) for n in re.findall(r"^step (\d+)$", first, re.MULTILINE))
    resumed = int(re.search(r"^start step (\d+)$", second, re.MULTILINE)[1])
    asked = re.search(r"^saved step (\d+) on request", first, re.MULTILINE)
    return {"event": event, "cost": cost, "way": way, "strike": strike, "reached": reached, "resumed": resumed,
            "lost": reached - resumed, "asked": int(asked[1]) if asked else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=6, help="preemptions per way and checkpoint cost")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--step-seconds", type=float, default=5.0, help="training time per step, seconds")
    parser.add_argument("--checkpoint-every", type=int, default=60,
                        help="the periodic checkpoint, steps (60 x 5 s: about the Young/Daly interval of C = 30 s "
                             "and a 30 min MTBF, as in the goodput benchmarks)")
    parser.add_argument("--save-seconds", default="10,30", help="checkpoint costs C to run, seconds, comma-separated")
    parser.add_argument("--notice", type=float, default=30.0, help="SIGTERM to the VM's stop, seconds (Spot VMs)")
    parser.add_argument("--steps-after", type=int, default=10, help="steps the job has past the preemption's step")
    parser.add_argument("--poll-interval", type=float, default=10.0, help="operator poll and runner heartbeat, s")
    parser.add_argument("--time-scale", type=float, default=0.02, help="real seconds per platform second")
    parser.add_argument("--quick", action="store_true", help="one event, C = 10 s, shorter (CI; see QUICK)")
    a = parser.parse_args()
    if a.quick:
        for name, value in QUICK.items():
            setattr(a, name, value)
    costs = [float(c) for c in str(a.save_seconds).split(",") if c.strip()]
    logging.disable(logging.WARNING)  # the operators' own log lines would drown the tables
    from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig

    rows = []
    began = time.monotonic()
    with Emulator(config=EmulatorConfig(time_scale=a.time_scale, seed=a.seed)) as emulator:
        os.environ.update(emulator.env())
        emulator.ensure_bucket("bench")
        for event in range(1, a.events + 1):
            for cost in costs:
                with ThreadPoolExecutor(len(WAYS)) as pool:  # the two ways side by side, each on its own node
                    runs = [pool.submit(one_event, emulator, event, cost, way, on, a) for way, on in WAYS.items()]
                    rows.extend(run.result() for run in runs)
    print(f"Progress lost per Spot TPU preemption ({a.events} event(s) per way and C; a step every "
          f"{a.step_seconds:g} s, a periodic checkpoint every {a.checkpoint_every} steps, a notice of {a.notice:g} s; "
          f"time scale {a.time_scale:g}; {time.monotonic() - began:.0f} s)\n")
    print("| event | C (s) | way | preempted at step | last step finished | saved on notice | resumed from | "
          "steps lost |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['event']} | {r['cost']:g} | {r['way']} | {r['strike']} | {r['reached']} | "
              f"{r['asked'] if r['asked'] is not None else '-'} | {r['resumed']} | {r['lost']} |")
    print("\n| C (s) | way | mean steps lost | worst | mean training lost (s) |")
    print("| --- | --- | --- | --- | --- |")
    for cost in costs:
        for way in WAYS:
            lost = [r["lost"] for r in rows if r["way"] == way and r["cost"] == cost]
            print(f"| {cost:g} | {way} | {statistics.mean(lost):.1f} | {max(lost)} | "
                  f"{statistics.mean(lost) * a.step_seconds:.0f} |")
    return 0


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
