"""What the handed checkpoint interval gains over a fixed one when the user's guess of the MTBF is wrong:

    python benchmarks/checkpoint_interval.py [--seeds 3] [--quick]

Two runs of ``ResilientCustomJobOperator`` side by side on one emulator, under the same seeded failure trace
(goodput.py's: exponential inter-arrival times of mean ``--mtbf``, classes from its mix, hangs included: both ways
catch a hang after goodput.py's ``hang_timeout`` without a new logged step), with the
platform's own retries off (``scheduling.disable_retries``: every failure is a new attempt, the operator's to
handle), both starting with the Young/Daly interval of the user's *guess* ``--guess-mtbf`` (10x the true MTBF by
default: failures are more frequent than the user thinks):

* **fixed interval** -- the workload keeps checkpointing at the guessed interval;
* **handed interval** -- from the second attempt on, the workload checkpoints every
  ``RESILIENT_CHECKPOINT_INTERVAL_SECONDS`` the operator hands it: Young/Daly for the MTBF and save cost the run
  has observed so far, weighed with the interval the workload has kept -- here the guess's -- as one more failure's
  worth of evidence (``goodput.handed_interval``, ``goodput.advice.losing_mtbf``).

Goodput = useful work / wall time to success. Prints per seed a row per way (goodput, attempts, the interval the
last attempt used), then the mean gain, beside the Young/Daly ceiling of the true MTBF.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from goodput import (
    BARE_HANG_SECONDS,
    PRIMARY,
    PROJECT,
    Outcome,
    Trace,
    arm_failures,
    measure_restore,
    scaled_policy,
    worker_pool,
)

from airflow_provider_resilient.goodput import goodput_ceiling, young_daly_interval
from airflow_provider_resilient.policy import RetryPolicy
from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig
from airflow_provider_resilient.testing.standalone import standalone_context

WAYS = {"fixed interval": "fixed", "handed interval": "handed"}
#: ``--quick`` (CI: the benchmark runs and prints its table, no figure is checked): the smallest run in which the
#: handed way is handed an interval -- its first attempt saves twice, then fails (seed 5's first failure, an internal
#: error 1.35 x MTBF into the run), and its second finishes before the trace's next failure (2.86 x MTBF later).
#: The guess stays 10x the true MTBF; a 1 s save and a 5 min job keep it short.
QUICK_SEED = 5
QUICK = {"work": 300.0, "mtbf": 200.0, "guess_mtbf": 2000.0, "checkpoint_cost": 1.0, "horizon": 6.0}
#: Retries of every budget (a 1 h job at MTBF 10 min meets ~6 failures; the seeds' budgets are 2-5 per class).
BUDGET_RETRIES = 30


def run_way(outcome: Outcome, args: list[str], way: str, policy: RetryPolicy, poll: float, hang_timeout: float,
            stop: threading.Event) -> None:
    """Our operator for ``way`` in this thread (platform retries off); stopped at the horizon by ``on_kill``. The
    trace's hangs (goodput.py's mix) are caught as goodput.py's ours catches them: ``hang_timeout`` real seconds
    without a new ``step N`` line read from Cloud Logging -- without it a hang is never seen and holds the way until
    the horizon."""
    from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator

    op = ResilientCustomJobOperator(
        task_id=f"interval-{way}", project_id=PROJECT, region=PRIMARY, display_name=f"interval-{way}",
        worker_pool_specs=worker_pool([*args, "--resume", "scan"]), base_output_dir=f"gs://bench/interval-{way}",
        labels={"bench-way": way}, resilience_policy=policy, poll_interval=poll, deferrable=False,
        disable_retries=True, checkpoint_marker="COMMITTED", hang_timeout=hang_timeout)
    threading.Thread(target=lambda: stop.wait() and op.on_kill(), daemon=True).start()
    result = op.execute(standalone_context(f"interval-{way}"))
    outcome.history = result["attempts"]
    outcome.submits = len(result["attempts"])
    outcome.finished = True


def patient_policy(scale: float) -> RetryPolicy:
    """The default policy (time-scaled) with every budget at :data:`BUDGET_RETRIES`: with the platform's retries off,
    every failure of the trace is the operator's, and both ways must be able to finish."""
    from dataclasses import replace

    policy = scaled_policy(RetryPolicy(), scale)
    return replace(policy, budgets={name: replace(b, max_retries=BUDGET_RETRIES if name != "preflight" else
                                                  b.max_retries)  # (ModelArts' fault-tolerance/job-retry-num: 0 to 3)
                                    for name, b in policy.effective_budgets.items()})


def last_interval(emulator: Emulator, outcome: Outcome, scale: float) -> str:
    """The interval the way's last attempt was handed, in platform seconds ("-": none)."""
    from airflow_provider_resilient.specs.vertex import primary_env
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    if not outcome.history:
        return "-"
    job = vertex_job_client(PRIMARY).get_custom_job(name=outcome.history[-1]["resource_name"])
    handed = primary_env(job).get("RESILIENT_CHECKPOINT_INTERVAL_SECONDS")
    return f"{float(handed) / scale:.0f} s" if handed else "-"


def one_seed(seed: int, a: argparse.Namespace) -> dict[str, Any]:
    s = a.time_scale
    step_seconds = 6.0
    steps = round(a.work / step_seconds)
    guessed = young_daly_interval(a.checkpoint_cost, a.guess_mtbf)
    every = max(1, round(guessed / step_seconds))
    horizon = a.horizon * a.work
    trace = Trace.draw(seed, a.work, a.mtbf, a.checkpoint_cost, 0.0, 1.0, 1.0, horizon)
    args = ["--steps", str(steps), "--step-seconds", f"{step_seconds * s:g}", "--every", str(every),
            "--save-seconds", f"{a.checkpoint_cost * s:g}", "--log-steps"]
    config = EmulatorConfig(time_scale=s, seed=seed)
    rows: dict[str, Any] = {}
    with Emulator(config=config) as emulator:
        os.environ.update(emulator.env())
        emulator.ensure_bucket("bench")
        restart = config.latencies.restart_seconds + measure_restore(emulator, s)
        ceiling = goodput_ceiling(a.checkpoint_cost, restart, a.mtbf)
        from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

        vertex_job_client(PRIMARY).list_custom_jobs(parent=f"projects/{PROJECT}/locations/{PRIMARY}")  # warm
        emulator.reset()
        emulator.ensure_bucket("bench")
        stop_all, stop_faults = threading.Event(), threading.Event()
        policy = patient_policy(s)
        outcomes = {name: Outcome(name, time.monotonic()) for name in WAYS}
        threads = []
        for name, way in WAYS.items():
            way_args = [*args, "--handed-interval"] if way == "handed" else args
            struck: list[str] = []
            threads.append(threading.Thread(target=arm_failures, daemon=True,
                                            args=(emulator, way, trace, s, stop_faults, struck)))

            def work(outcome: Outcome = outcomes[name], way_args: list[str] = way_args, way: str = way) -> None:
                try:
                    run_way(outcome, way_args, way, policy, a.poll_interval * s, BARE_HANG_SECONDS * s,
                            stop_all)
                except Exception as exc:  # a way that gives up is a result
                    outcome.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
                finally:
                    outcome.ended = time.monotonic()

            threads.append(threading.Thread(target=work, daemon=True))
        began = time.monotonic()
        for name in outcomes:
            outcomes[name].started = began
        for thread in threads:
            thread.start()
        while time.monotonic() < began + horizon * s and any(o.ended is None for o in outcomes.values()):
            time.sleep(0.1)
        stop_all.set()
        stop_faults.set()
        for thread in threads:
            thread.join(timeout=30)
        for name, o in outcomes.items():
            wall = ((o.ended or time.monotonic()) - o.started) / s
            rows[name] = {"goodput": a.work / wall, "finished": o.finished, "attempts": o.submits,
                          "interval": last_interval(emulator, o, s), "error": o.error}
    return {"seed": seed, "ceiling": ceiling, "restart": restart, "guessed": every * step_seconds,
            "optimum": young_daly_interval(a.checkpoint_cost, a.mtbf), "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="seeded traces, from seed 1")
    parser.add_argument("--work", type=float, default=3600.0, help="useful training, platform seconds")
    parser.add_argument("--mtbf", type=float, default=600.0, help="true mean time between failures, seconds")
    parser.add_argument("--guess-mtbf", type=float, default=6000.0, help="the user's guess of it, seconds")
    parser.add_argument("--checkpoint-cost", type=float, default=20.0, help="C: seconds per checkpoint")
    parser.add_argument("--poll-interval", type=float, default=30.0, help="seconds")
    parser.add_argument("--time-scale", type=float, default=0.02, help="real seconds per platform second")
    parser.add_argument("--horizon", type=float, default=3.0, help="stop a way after this many x the work")
    parser.add_argument("--quick", action="store_true", help=f"seed {QUICK_SEED} only, a 5 min job (CI; see QUICK)")
    a = parser.parse_args()
    seeds = range(1, a.seeds + 1)
    if a.quick:
        seeds = range(QUICK_SEED, QUICK_SEED + 1)
        for name, value in QUICK.items():
            setattr(a, name, value)
    logging.disable(logging.WARNING)
    print(f"## Checkpoint interval: handed vs fixed (true MTBF {a.mtbf:.0f} s, guessed {a.guess_mtbf:.0f} s, "
          f"C {a.checkpoint_cost:.0f} s, work {a.work:.0f} s, platform retries off, time scale {a.time_scale:g})\n")
    print("| seed | way | finished | goodput | attempts | last attempt's interval | of ceiling |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    results = []
    for seed in seeds:
        result = one_seed(seed, a)
        results.append(result)
        for name, row in result["rows"].items():
            status = "yes" if row["finished"] else f"no: {row['error'] or 'stopped at the horizon'}"
            shown = f"{row['goodput']:.3f}" if row["finished"] else "-"
            share = f"{row['goodput'] / result['ceiling']:.0%}" if row["finished"] and result["ceiling"] else "-"
            interval = row["interval"] if name == "handed interval" else f"{result['guessed']:.0f} s (guessed)"
            print(f"| {seed} | {name} | {status} | {shown} | {row['attempts']} | {interval} | {share} |", flush=True)
    both = [r for r in results if all(r["rows"][name]["finished"] for name in WAYS)]
    print(f"\nYoung/Daly interval for the true MTBF: {results[0]['optimum']:.0f} s; for the guess: "
          f"{results[0]['guessed']:.0f} s; ceiling {results[0]['ceiling']:.3f}.")
    if not results[0]["ceiling"]:  # R >= MTBF: a start-up measured on a loaded machine, magnified by the time scale
        print(f"The ceiling is 0: the measured restart ({results[0]['restart']:.0f} s) leaves nothing of the MTBF; "
              "this machine was too busy for the time scale (raise --time-scale).")
    if not both:
        print("Mean goodput: no seed where both ways finished.")
        return 0
    gains = [r["rows"]["handed interval"]["goodput"] - r["rows"]["fixed interval"]["goodput"] for r in both]
    means = {name: statistics.mean(r["rows"][name]["goodput"] for r in both) for name in WAYS}
    print(f"Mean goodput over the {len(both)} seed(s) both finished: fixed {means['fixed interval']:.3f}, handed "
          f"{means['handed interval']:.3f} (gain {statistics.mean(gains):+.3f}; handed ahead in "
          f"{sum(g > 0 for g in gains)} of {len(gains)}).")
    return 0


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
