"""Scale on the real stack: N mapped, deferred CustomJob tasks on the CeleryExecutor stack with two triggerers.

    python benchmarks/stack_scale.py [--n 50 200 1000] [--poll 30] [--release-rate 0.5] [--quick] [--keep]

Starts the native CeleryExecutor stack (devtools/stack.py: PostgreSQL, Redis, the emulator, api-server, scheduler,
dag-processor, two Celery workers, two triggerers) with ``benchmarks/dags/stack_scale.py``: one DAG run maps N
``ResilientCustomJobOperator`` tasks (dynamic task mapping), each of which creates its CustomJob and defers; every
job's replica waits on a FIFO of its own, so the benchmark says when each job ends. For each N, in one DAG run:

1. **launch**: from the trigger until all N tasks are deferred (creates, the first reads, N task runs on the
   workers);
2. **watch**: one poll interval to settle, then ``--window`` seconds (default 3 poll intervals) with all N jobs
   running and watched: API read and write calls per minute per region, the triggerers' CPU and resident memory
   per watched job (their processes, against the idle triggerers before the run), the scheduler's CPU;
3. **end**: the jobs are let end at ``--release-rate`` jobs per second, in map order; for each, the time from
   the job's ``end_time`` (the platform's) to its task's ``end_date`` (Airflow's success), p50 and p99.

Then the projection to 10,000 watched jobs against Vertex AI's default quota of 600 resource-management
requests per minute per region (Vertex AI's "Quotas and limits" page): each triggerer's shared poller lists the
location's live labelled jobs once per poll interval (pages of 1,000), so list calls per minute grow with the
number of triggerers times the pages each listing takes, not with the jobs; 10,000 jobs need 10 triggerers at
the default capacity of 1,000 triggers each ([triggerer] capacity).

Prints Markdown. CPU is the sum of user and system time of a component's processes (``/proc/<pid>/stat``),
resident memory their RSS, sampled every 2 s. The targets of the issue this measures: reads per minute at
N = 1,000 within 2x of N = 50, and p99 end-to-success under 2 poll intervals + 15 s.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DAG_ID, TASK = "stack_scale", "train"
PROJECT, REGION = "resilient-bench", "us-central1"
#: Vertex AI's default per-region quota of resource-management (CRUD) requests per minute.
QUOTA_PER_MINUTE = 600
#: [triggerer] capacity's default: triggers per triggerer.
TRIGGERER_CAPACITY = 1000
READ_PREFIXES, WRITE_PREFIXES = ("Get", "List"), ("Create", "Cancel", "Delete")
SAMPLE_SECONDS = 2.0


# ---------------------------------------------------------------------------------------------- /proc
def usage(pids: list[int]) -> tuple[float, float]:
    """(CPU seconds, resident MiB) of ``pids`` now; a pid that is gone counts nothing."""
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    cpu = rss = 0.0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        cpu += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        rss += int(fields[21]) * page / 2**20
    return cpu, rss


class Sampler:
    """Samples the CPU and RSS of the stack's triggerers and scheduler every :data:`SAMPLE_SECONDS` in a thread."""

    def __init__(self, stack: Any) -> None:
        self.stack = stack
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _take(self) -> dict[str, Any]:
        sample: dict[str, Any] = {"t": time.time()}
        for role in ("triggerer", "scheduler"):
            pids = [p for name in self.stack.components(role) for p in self.stack.pids(name)]
            sample[role] = usage(pids)
        return sample

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.samples.append(self._take())

    def __enter__(self) -> Sampler:
        self.samples.append(self._take())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(self._take())

    def between(self, t0: float, t1: float, role: str) -> tuple[float, float]:
        """(CPU seconds used between t0 and t1, mean RSS MiB in it) of ``role``."""
        inside = [s for s in self.samples if t0 <= s["t"] <= t1] or self.samples[-1:]
        first, last = inside[0], inside[-1]
        return last[role][0] - first[role][0], sum(s[role][1] for s in inside) / len(inside)

    def before(self, t: float, role: str) -> float:
        """RSS MiB of ``role`` in the last sample before ``t``."""
        earlier = [s for s in self.samples if s["t"] <= t] or self.samples[:1]
        return float(earlier[-1][role][1])


# ---------------------------------------------------------------------------------------------- one run
def wait(what: str, condition: Callable[[], Any], timeout: float, every: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not so after {timeout:.0f} s")
        time.sleep(every)


def count(stack: Any, run_id: str, state: str) -> int:
    """How many of the run's tasks are in ``state``; 0 when the API server does not answer within its timeout
    (launching 1,000 tasks on 2 cores keeps it busy: the next look asks again)."""
    try:
        status, body = stack.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances?task_id={TASK}"
                                        f"&state={state}&limit=1")
    except (TimeoutError, OSError) as exc:
        print(f"  (the API server did not answer: {exc}; asking again)", file=sys.stderr, flush=True)
        return 0
    return int(body["total_entries"]) if status == 200 else 0


def launched(stack: Any, run_id: str, n: int) -> bool:
    """Whether all ``n`` tasks are deferred.

    Raises:
        RuntimeError: a task failed (the benchmark's setup is wrong: say why rather than wait).
    """
    if count(stack, run_id, "failed") or count(stack, run_id, "upstream_failed"):
        failed = [t for t in task_instances(stack, run_id) if t["state"] in ("failed", "upstream_failed")]
        raise RuntimeError(f"{len(failed)} task(s) failed while launching, e.g. {failed[0]['task_id']} "
                           f"{failed[0]['map_index']}: see its log under the stack's work directory (--keep)")
    return count(stack, run_id, "deferred") >= n


def task_instances(stack: Any, run_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        path = f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances?task_id={TASK}&limit=100&offset={len(found)}"
        for tries_left in range(4, -1, -1):  # a busy API server: ask again, up to 5 times
            try:
                status, body = stack.api("GET", path, timeout=60.0)
                break
            except (TimeoutError, OSError):
                if not tries_left:
                    raise
        assert status == 200, body
        found += body["task_instances"]
        if len(found) >= body["total_entries"] or not body["task_instances"]:
            return found


def jobs_ended(stack: Any, run_id: str) -> dict[int, float]:
    """map index -> the job's end_time (epoch seconds), for the run's ended jobs."""
    from airflow_provider_resilient.specs.common import job_labels
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    label = job_labels(DAG_ID, TASK, run_id, 0, None)["airflow-run"]
    client = vertex_job_client(REGION, emulator=stack.emulator_env["RESILIENT_EMULATOR_HOST"])
    try:
        ended = {}
        for job in client.list_custom_jobs(request={"parent": f"projects/{PROJECT}/locations/{REGION}",
                                                    "filter": f'labels.airflow-run="{label}"', "page_size": 1000}):
            if job.end_time and job.end_time.timestamp() > 0:
                ended[int(job.labels["airflow-map-index"])] = job.end_time.timestamp()
        return ended
    finally:
        client.transport.close()


def release(fifo: str, timeout: float = 60.0) -> None:
    """Let the job waiting on ``fifo`` end: write it a line once its replica has it open (a replica that is
    restarting has not yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"no replica reads {fifo}") from None
            time.sleep(0.2)
            continue
        try:
            os.write(fd, b"go\n")
        finally:
            os.close(fd)
        return


def per_minute(calls: list[dict[str, Any]], t0: float, t1: float, prefixes: tuple[str, ...]) -> float:
    inside = [c for c in calls if t0 <= c["time"] <= t1 and c["method"].startswith(prefixes)
              and f"/locations/{REGION}" in (c["resource"] or f"/locations/{REGION}")]
    return len(inside) * 60.0 / (t1 - t0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def one_run(stack: Any, n: int, *, poll: float, window: float, rate: float) -> dict[str, Any]:
    """One DAG run of ``n`` tasks through launch, watch and end (see the module docstring)."""
    stack.emulator_post("/reset")
    run_id = f"scale_{n}_{int(time.time())}"
    with tempfile.TemporaryDirectory(prefix="stack-scale-") as fifo_dir, Sampler(stack) as sampler:
        for i in range(n):
            os.mkfifo(f"{fifo_dir}/job_{i}")
        time.sleep(2 * SAMPLE_SECONDS)  # idle triggerers sampled before the run
        t_trigger = time.time()
        status, body = stack.api("POST", f"/api/v2/dags/{DAG_ID}/dagRuns",
                                 {"dag_run_id": run_id, "logical_date": None, "conf": {"n": n, "fifo_dir": fifo_dir}})
        assert status == 200, body
        wait(f"{n} tasks deferred", lambda: launched(stack, run_id, n), timeout=120 + 6 * n)
        t_deferred = time.time()
        time.sleep(poll)  # every trigger watching, the pollers in their rhythm
        w0 = time.time()
        time.sleep(window)
        w1 = time.time()
        for i in range(n):  # the jobs end at `rate` per second
            time.sleep(max(0.0, w1 + i / rate - time.time()))
            release(f"{fifo_dir}/job_{i}")
        wait(f"{n} tasks done", lambda: count(stack, run_id, "success") + count(stack, run_id, "failed") >= n,
             timeout=300 + 6 * n)
        t_done = time.time()
    calls: list[dict[str, Any]] = stack.emulator_get("/calls")
    ended = jobs_ended(stack, run_id)
    tis = task_instances(stack, run_id)
    failed = [t["map_index"] for t in tis if t["state"] != "success"]
    retried = [t["map_index"] for t in tis if int(t.get("try_number") or 1) > 1]
    lag = [datetime.fromisoformat(t["end_date"]).timestamp() - ended[t["map_index"]]
           for t in tis if t["state"] == "success" and t["map_index"] in ended]
    trig_cpu, trig_rss = sampler.between(w0, w1, "triggerer")
    sched_cpu, _ = sampler.between(w0, w1, "scheduler")
    idle_rss = sampler.before(t_trigger, "triggerer")
    minutes = (w1 - w0) / 60
    lists = [c for c in calls if w0 <= c["time"] <= w1 and c["method"] == "ListCustomJobs"]
    return {
        "n": n, "failed": failed, "retried": retried, "launch_s": t_deferred - t_trigger, "window_s": w1 - w0,
        "reads_per_min": per_minute(calls, w0, w1, READ_PREFIXES),
        "writes_per_min": per_minute(calls, w0, w1, WRITE_PREFIXES),
        "lists_per_min": len(lists) / minutes,
        "end_reads": sum(1 for c in calls if c["time"] >= w1 and c["method"].startswith(READ_PREFIXES)) / n,
        "launch_calls": sum(1 for c in calls if c["time"] < t_deferred) / n,
        "p50": percentile(lag, 0.5) if lag else float("nan"), "p99": percentile(lag, 0.99) if lag else float("nan"),
        "trig_cpu_ms_per_job_min": trig_cpu * 1000 / (n * minutes), "trig_rss_mib": trig_rss,
        "trig_rss_kib_per_job": max(0.0, trig_rss - idle_rss) * 1024 / n,
        "sched_cpu_per_min": sched_cpu / minutes, "end_s": t_done - w1,
    }


# ---------------------------------------------------------------------------------------------- report
def projection(rows: list[dict[str, Any]], poll: float, jobs: int = 10_000) -> list[str]:
    """The reads per minute of ``jobs`` watched jobs, from the measured rhythm (lists per poll per triggerer)."""
    from airflow_provider_resilient.triggers.vertex_ai import LIST_PAGE_SIZE

    triggerers = math.ceil(jobs / TRIGGERER_CAPACITY)
    pages = math.ceil(jobs / LIST_PAGE_SIZE)
    lists = triggerers * pages * 60.0 / poll
    largest = max(rows, key=lambda r: r["n"])
    measured_per_poll = largest["lists_per_min"] * poll / 60.0 / 2  # two triggerers in the stack
    worst_triggerers = math.floor(math.sqrt(QUOTA_PER_MINUTE * poll / 60.0))
    return [
        f"Projection to {jobs:,} watched jobs (poll interval {poll:g} s): {triggerers} triggerers at the default "
        f"capacity of {TRIGGERER_CAPACITY:,}, each listing the region's {jobs:,} live labelled jobs in {pages} "
        f"pages of {LIST_PAGE_SIZE:,} per poll: {triggerers} x {pages} x {60 / poll:g}/min = **{lists:.0f} list "
        f"calls/min**, {lists / QUOTA_PER_MINUTE:.0%} of the {QUOTA_PER_MINUTE} requests/min quota "
        f"(measured here: {measured_per_poll:.2f} list calls per poll per triggerer at N = {largest['n']}). "
        f"Jobs ending add about {largest['end_reads']:.1f} reads each (measured) -- 100 jobs ending per minute "
        f"add {100 * largest['end_reads']:.0f}/min. The listing grows as triggerers x pages, so with jobs spread "
        f"evenly at full capacity it reaches the quota near {worst_triggerers} triggerers "
        f"({worst_triggerers * TRIGGERER_CAPACITY:,} jobs) at this poll interval: beyond that, raise "
        "poll_interval, or ask for more quota.",
    ]


def row(r: dict[str, Any]) -> str:
    """One N's line of the Markdown table."""
    return (f"| {r['n']} | {r['reads_per_min']:.1f} | {r['writes_per_min']:.1f} | {r['lists_per_min']:.1f} | "
            f"{r['p50']:.1f} / {r['p99']:.1f} | {r['trig_cpu_ms_per_job_min']:.2f} | "
            f"{r['trig_rss_mib']:.0f} / {r['trig_rss_kib_per_job']:.0f} | {r['sched_cpu_per_min']:.1f} | "
            f"{r['launch_s']:.0f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[50, 200, 1000], help="numbers of mapped tasks")
    parser.add_argument("--poll", type=float, default=30.0, help="the operators' poll_interval (seconds)")
    parser.add_argument("--window", type=float, help="watch window (seconds; default 3 poll intervals)")
    parser.add_argument("--release-rate", type=float, default=0.5,
                        help="jobs let end per second (below what the workers can resume: else the figure is a queue)")
    parser.add_argument("--quick", action="store_true", help="N = 50, poll 10 s, jobs end at 1/s (CI)")
    parser.add_argument("--keep", action="store_true", help="keep the stack's work directory (logs)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.poll, args.release_rate = [50], 10.0, 1.0
    window = args.window or 3 * args.poll
    os.environ["RESILIENT_SCALE_POLL_INTERVAL"] = repr(args.poll)  # the DAG reads it (the stack passes it on)
    sys.path.insert(0, str(HERE.parent))
    from devtools.stack import NativeStack

    rows = []
    with NativeStack(executor="celery", dags=[HERE / "dags"], fault_plan=None, keep=args.keep) as stack:
        print(f"CeleryExecutor stack: {len(stack.components('celery_worker'))} workers, "
              f"{len(stack.components('triggerer'))} triggerers; poll_interval {args.poll:g} s, watch window "
              f"{window:g} s, jobs end at {args.release_rate:g}/s\n", flush=True)
        for n in args.n:
            rows.append(one_run(stack, n, poll=args.poll, window=window, rate=args.release_rate))
            r = rows[-1]  # its row printed now: kept if a later N fails
            print(f"N = {n}: launched in {r['launch_s']:.0f} s, ended in {r['end_s']:.0f} s, "
                  f"{len(r['failed'])} failed, {len(r['retried'])} retried; row: {row(r)}", flush=True)
    print("\n| N | reads/min | writes/min | list calls/min | job end -> task success p50 / p99 (s) | "
          "triggerer CPU ms per job-minute | triggerer RSS (MiB) / per job (KiB) | scheduler CPU s/min | "
          "launch (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(row(r))
    low, high = min(rows, key=lambda r: r["n"]), max(rows, key=lambda r: r["n"])
    bound = 2 * args.poll + 15
    if high["n"] > low["n"]:  # what one more watched job costs, without the fixed cost of a triggerer's imports
        extra = high["n"] - low["n"]
        rss = (high["trig_rss_mib"] - low["trig_rss_mib"]) * 1024 / extra
        cpu = (high["trig_cpu_ms_per_job_min"] * high["n"] - low["trig_cpu_ms_per_job_min"] * low["n"]) / extra
        print(f"\nEach watched job beyond N = {low['n']} (to N = {high['n']}): triggerer RSS {rss:.0f} KiB, triggerer "
              f"CPU {cpu:.2f} ms per minute. (At small N the per-job figures above carry each triggerer's fixed cost: "
              "the client libraries its first trigger imports.)")
    print(f"\nReads/min at N = {high['n']} / at N = {low['n']}: "
          f"{high['reads_per_min'] / low['reads_per_min']:.2f} (target: within 2). p99 job end -> task success at "
          f"N = {high['n']}: {high['p99']:.1f} s (target: under 2 poll intervals + 15 s = {bound:g} s).")
    print("\n" + "\n".join(projection(rows, args.poll)))
    failed = sum(len(r["failed"]) for r in rows)
    if failed:
        print(f"\n{failed} task(s) did not succeed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
