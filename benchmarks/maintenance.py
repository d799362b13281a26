"""Progress lost to a scheduled Cloud TPU maintenance event, with and without the early checkpoint:

    python benchmarks/maintenance.py [--events 6] [--quick]

Each event is one run of ``ResilientTPUWorkloadOperator`` on the emulator: the demo workload
(``dags/workloads/train_digits.py``: a step every ``--step-seconds``, a periodic checkpoint every
``--checkpoint-every`` steps, the workload's own habit) on a v4-8 node. At a seeded step Cloud TPU announces a
maintenance window (``Node.upcoming_maintenance``; emulator fault ``scheduled_maintenance``) a seeded notice ahead,
so the window falls at a different phase of the periodic checkpoints each time; the node recovers from the event
by itself (most do: Cloud TPU, "Manage maintenance events with Cloud TPU Pods") and its startup script resumes
training. Two ways, the same events:

* **early checkpoint** -- the operator's default: ``maintenance_lead_seconds`` before the window it asks the
  workload for a checkpoint (node metadata -> worker runner -> ``resilient_checkpoint``), then rides the event
  out;
* **without** -- ``maintenance_lead_seconds=0``: nobody asks; the workload learns of the event from its SIGTERM,
  as under any other tool (the Google provider has no TPU operators; SkyPilot and that page's retry loops do not read
  the notice).

Both ways run with ``checkpoint_on_notice=False``: no save on the window's SIGTERM, so the table measures the early
checkpoint alone (``notice.py`` measures the save on a SIGTERM's notice).

Progress lost per event = the last step the workload finished before the window's SIGTERM minus the step it
resumed from after the repair (both from worker 0's log), in steps and in seconds of training (x step time).
Without the early checkpoint the expected loss is half the periodic interval; with it, what the lead and the
reporting latency leave. Prints one row per event and way, then the mean and the worst per way.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKLOAD = ROOT / "dags" / "workloads" / "train_digits.py"
WAYS = {"early checkpoint": None, "without": 0.0}
#: ``--quick`` (CI: the benchmark runs and prints its tables, no figure is checked): one event, its two ways side by
#: side; a periodic checkpoint every 3 steps of 0.2 s (the window falls within 3 steps' time of its least notice, and
#: few steps are trained past it); a node created and deleted in a fifth of the time. The early way asks 1.5 s ahead
#: of a window at least 2 s away, so that on a loaded machine the request still reaches the workload before it.
QUICK = {"events": 1, "checkpoint_every": 3, "step_seconds": 0.2, "lead": 1.5, "min_notice": 2.0, "time_scale": 0.002,
         "side_by_side": True}


def one_event(emulator: Any, event: int, way: str, lead: float | None, a: argparse.Namespace) -> dict[str, Any]:
    """One run through one announced window; the steps lost."""
    from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator
    from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy
    from airflow_provider_resilient.testing.standalone import standalone_context

    draw = random.Random(f"maintenance:{a.seed}:{event}")  # the same event for both ways
    announced = draw.randint(3, 3 + a.checkpoint_every)
    notice = draw.uniform(a.min_notice, a.min_notice + a.checkpoint_every * a.step_seconds)
    emulator.add_fault({"kind": "scheduled_maintenance", "at_step": announced, "notice_seconds": notice,
                        "window_seconds": 0.5, "grace_seconds": 0.5, "match": {"labels": {"bench-event": str(event)},
                                                                                "display_name": f"*{way[:5]}*"}})
    fast = Backoff(initial_seconds=0.1, multiplier=1.0, max_seconds=0.1, jitter=0.0)
    policy = RetryPolicy(backoff=fast, budgets={"maintenance_wait": Budget(max_seconds=60, backoff=fast)})
    epochs = announced + round((notice + 1.5) / a.step_seconds)  # past the window and the repair
    node_id = f"bench-{way[:5]}-{event}"
    op = ResilientTPUWorkloadOperator(
        task_id=node_id, project_id="bench-project", zone="us-central2-b", accelerator_type="v4-8",
        runtime_version="tpu-ubuntu2204-base", tpu_node_id=node_id, labels={"bench-event": str(event)},
        command=f"{sys.executable} {WORKLOAD} --epochs {epochs} --checkpoint-every {a.checkpoint_every} "
                f'--epoch-seconds {a.step_seconds} --checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"',
        checkpoint_dir=f"gs://bench/maintenance/{node_id}", checkpoint_marker="COMMITTED", resilience_policy=policy,
        poll_interval=a.poll_interval, heartbeat_seconds=a.poll_interval, preflight=False,
        maintenance_lead_seconds=a.lead if lead is None else lead, checkpoint_on_notice=False)
    op.execute(standalone_context(node_id))
    log = (emulator.work_dir / "tpu" / f"{node_id}-a1" / "worker-0.log").read_text(errors="replace")
    first, second = re.split(r"===== worker 0 boot \d+ =====\n", log)[1:3]
    reached = max(int(s) for s in re.findall(r"^step (\d+) loss", first, re.MULTILINE))
    resumed = int(re.search(r"^resuming from step (\d+)$", second, re.MULTILINE)[1])
    asked = re.search(r"^saved checkpoint \S*?step_(\d+) on request", first, re.MULTILINE)
    return {"event": event, "way": way, "announced": announced, "notice": notice, "reached": reached,
            "resumed": resumed, "lost": reached - resumed, "asked": int(asked[1]) if asked else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=6, help="scheduled maintenance events per way")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--step-seconds", type=float, default=0.1, help="training time per step, seconds")
    parser.add_argument("--checkpoint-every", type=int, default=20, help="the workload's periodic checkpoint, steps")
    parser.add_argument("--lead", type=float, default=1.0, help="maintenance_lead_seconds of the early way")
    parser.add_argument("--min-notice", type=float, default=1.5, help="shortest notice ahead of a window, seconds")
    parser.add_argument("--poll-interval", type=float, default=0.2, help="operator poll and runner heartbeat, seconds")
    parser.add_argument("--time-scale", type=float, default=0.01, help="the emulator's: real seconds per platform "
                                                                         "second (a node's create and delete)")
    parser.add_argument("--side-by-side", action="store_true", help="run the ways of an event at the same time "
                                                                     "(each on its own node; they share the machine)")
    parser.add_argument("--quick", action="store_true", help="one event per way, shorter, side by side (CI; see QUICK)")
    a = parser.parse_args()
    if a.quick:
        for name, value in QUICK.items():
            setattr(a, name, value)
    logging.basicConfig(level=logging.WARNING)
    from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig

    rows = []
    began = time.monotonic()
    with Emulator(config=EmulatorConfig(time_scale=a.time_scale, seed=a.seed)) as emulator:
        os.environ.update(emulator.env())
        emulator.ensure_bucket("bench")
        for event in range(1, a.events + 1):
            if a.side_by_side:  # each way in a thread of its own, on its own node
                with ThreadPoolExecutor(len(WAYS)) as pool:
                    runs = [pool.submit(one_event, emulator, event, way, lead, a) for way, lead in WAYS.items()]
                    rows.extend(run.result() for run in runs)
            else:
                for way, lead in WAYS.items():
                    rows.append(one_event(emulator, event, way, lead, a))
    print(f"Progress lost per scheduled maintenance event ({a.events} event(s) per way; a step every "
          f"{a.step_seconds:g} s, a periodic checkpoint every {a.checkpoint_every} steps; early checkpoint asked for "
          f"{a.lead:g} s before the window; {time.monotonic() - began:.0f} s)\n")
    print("| event | way | window announced at step | notice (s) | last step before the window | resumed from | "
          "saved on request | steps lost |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['event']} | {r['way']} | {r['announced']} | {r['notice']:.2f} | {r['reached']} | {r['resumed']} | "
              f"{r['asked'] if r['asked'] is not None else '-'} | {r['lost']} |")
    print("\n| way | mean steps lost | worst | mean training lost (s) |")
    print("| --- | --- | --- | --- |")
    for way in WAYS:
        lost = [r["lost"] for r in rows if r["way"] == way]
        print(f"| {way} | {statistics.mean(lost):.1f} | {max(lost)} | {statistics.mean(lost) * a.step_seconds:.2f} |")
    return 0


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
