"""Triggerer scale: N CustomJobTriggers watching N jobs in one asyncio event loop -- API calls per minute and
CPU seconds, with per-job polling (one GetCustomJob per job per poll) and with the shared poller (one
ListCustomJobs per location per poll, see :mod:`airflow_provider_resilient.triggers.vertex_ai`).

    python benchmarks/scale.py [--n 10 100 1000] [--poll 10] [--window 30] [--quick]

The emulator runs in this process. For each mode and N it is reset and N jobs are created with the labels
the operator puts on its jobs; a queued latency of a day keeps them QUEUED for the whole run, so no replica
process starts and 1000 jobs cost only memory. The triggers run in a child process -- the triggerer -- in
one event loop, so its CPU time is the trigger side's alone: ``time.process_time()`` of the child over the
window (every thread of it: the event loop and gRPC's poller thread; the emulator is not counted).

Timing: the child starts the N triggers, waits half a poll interval (the warm-up: channels opened, first
reads done), then measures for ``--window`` seconds, a multiple of ``--poll`` so every trigger polls a
whole number of times in it. API calls/min = the calls the emulator recorded in the window x 60 / window.
Prints a Markdown table, then the ratio of the shared poller's calls/min at the largest N to those at the
smallest (the issue's bound: at most 5 from N=10 to N=1000).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "ERROR")  # before Airflow is imported: quiet runs

MODES = {"per-job": False, "shared": True}  # mode -> CustomJobTrigger(shared_poller=...)
PROJECT, REGION = "bench-project", "us-central1"
QUEUED_FOR = 86_400.0  # seconds a job stays QUEUED: longer than any run
MAX_RATIO = 5.0


# ---------------------------------------------------------------------------------------------- the triggerer
async def watch(names: list[str], *, emulator: str, shared: bool, poll: float, warmup: float,
                window: float) -> dict[str, Any]:
    """Run one trigger per job in this event loop; measure the window. Times: seconds (epoch for t0/t1)."""
    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

    async def drain(trigger: CustomJobTrigger) -> None:
        async for event in trigger.run():  # a job of the benchmark never ends: an event is a failed run
            raise RuntimeError(f"{trigger.job_name} ended: {event.payload}")

    tasks = [asyncio.create_task(drain(CustomJobTrigger(name, poll_interval=poll, gcp_conn_id=None,
                                                        emulator=emulator, cancel_on_kill=False,
                                                        shared_poller=shared))) for name in names]
    await asyncio.sleep(warmup)
    t0, cpu0 = time.time(), time.process_time()
    await asyncio.sleep(window)
    t1, cpu1 = time.time(), time.process_time()
    ended = [t for t in tasks if t.done()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    errors = [repr(t.exception()) for t in ended if not t.cancelled() and t.exception()]
    return {"t0": t0, "t1": t1, "cpu": cpu1 - cpu0, "errors": errors[:3]}


def child(emulator: str) -> int:
    """The triggerer process: one run per line on stdin (JSON: mode, names, poll, window), each in a new event
    loop; one ``RESULT <json>`` line per run on stdout. Ends at the end of stdin."""
    import gc

    import google.cloud.aiplatform_v1  # noqa: F401  -- loaded before any window, not in it

    import airflow_provider_resilient.hooks.vertex_ai  # noqa: F401

    for line in sys.stdin:
        run = json.loads(line)
        result = asyncio.run(watch(run["names"], emulator=emulator, shared=MODES[run["mode"]], poll=run["poll"],
                                   warmup=run["poll"] / 2, window=run["window"]))
        gc.collect()  # the last run's garbage is not collected in the next one's window
        print("RESULT", json.dumps(result), flush=True)
    return 0


class Triggerer:
    """The child process that runs the triggers, one run after another (its imports, ~6 s, are paid once and
    overlap the creation of the first jobs). A context manager: leaving it ends the process."""

    def __init__(self, emulator: str) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--child", emulator], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def run(self, mode: str, names: list[str], poll: float, window: float) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"mode": mode, "names": names, "poll": poll, "window": window}) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("RESULT "):
                return dict(json.loads(line[len("RESULT "):]))
        raise RuntimeError(f"the triggerer process ended (exit code {self.proc.wait()})")

    def __enter__(self) -> Triggerer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()  # the child ends at the end of its input
        try:
            self.proc.wait(timeout=60 if exc[0] is None else 5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------------------------------------- the bench
def create_jobs(emulator: Any, n: int) -> list[str]:
    """N CustomJobs of one location carrying the operator's labels (one task each), left QUEUED."""
    from airflow_provider_resilient.specs.common import job_labels
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    client = vertex_job_client(REGION, emulator=emulator.address)
    spec = {"worker_pool_specs": [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                                   "container_spec": {"image_uri": "x", "command": [
                                       "python", "-c", "import time; time.sleep(3600)"]}}]}
    return [str(client.create_custom_job(parent=f"projects/{PROJECT}/locations/{REGION}", custom_job={
        "display_name": f"scale-{i}", "labels": job_labels("scale", f"task-{i}", "bench", -1, 1),
        "job_spec": spec}).name) for i in range(n)]


def one_run(emulator: Any, triggerer: Triggerer, mode: str, n: int, poll: float, window: float) -> dict[str, float]:
    """Calls/min and CPU seconds of N triggers in ``mode`` over the window."""
    emulator.reset()
    result = triggerer.run(mode, create_jobs(emulator, n), poll, window)
    if result["errors"]:
        raise RuntimeError(f"triggers ended during the run: {result['errors']}")
    calls = [c for c in emulator.calls.list() if result["t0"] <= c.time <= result["t1"]]
    minutes = (result["t1"] - result["t0"]) / 60
    return {"calls_per_min": len(calls) / minutes, "cpu": result["cpu"], "minutes": minutes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[10, 100, 1000], help="numbers of watched jobs")
    parser.add_argument("--poll", type=float, default=10.0, help="poll_interval of every trigger (seconds)")
    parser.add_argument("--window", type=float, default=30.0, help="measurement window (seconds)")
    parser.add_argument("--quick", action="store_true", help="N = 10 and 100, poll 0.5 s, window 1 s (CI)")
    parser.add_argument("--child", metavar="EMULATOR", help=argparse.SUPPRESS)  # the triggerer process
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    if args.quick:
        args.n, args.poll, args.window = [10, 100], 0.5, 1.0  # every trigger polls twice in the window
    from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig, Latencies

    logging.disable(logging.WARNING)
    config = EmulatorConfig(latencies=Latencies(queued_seconds=QUEUED_FOR), tick_seconds=1.0)
    print(f"poll_interval {args.poll:g} s, window {args.window:g} s\n")
    print("| mode | N | API calls/min | calls/min per job | CPU s | CPU ms per job-minute |")
    print("| --- | --- | --- | --- | --- | --- |")
    shared: dict[int, float] = {}
    with Emulator(config=config, storage=False) as emulator, Triggerer(emulator.address) as triggerer:
        for mode in MODES:
            for n in args.n:
                r = one_run(emulator, triggerer, mode, n, args.poll, args.window)
                if mode == "shared":
                    shared[n] = r["calls_per_min"]
                per_job_minute = r["cpu"] * 1000 / (n * r["minutes"])
                print(f"| {mode} | {n} | {r['calls_per_min']:.1f} | {r['calls_per_min'] / n:.3f} | {r['cpu']:.2f} | "
                      f"{per_job_minute:.2f} |", flush=True)
        emulator.reset()  # forget the jobs (none runs a process) before the emulator stops
    low, high = min(shared), max(shared)
    ratio = shared[high] / shared[low] if shared[low] else float("inf")
    verdict = "within" if ratio <= MAX_RATIO else "ABOVE"
    print(f"\nshared poller: calls/min at N={high} / calls/min at N={low} = {ratio:.2f} "
          f"({verdict} the bound of {MAX_RATIO:g})")
    return 0


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
