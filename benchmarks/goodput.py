"""Goodput of one Vertex AI training job under a seeded fault trace, four ways side by side on the emulator:

    python benchmarks/goodput.py [--seed 3] [--seeds N] [--quick] [--plot PATH] [--json PATH] [--from-json PATH]

* **ours** -- ``ResilientCustomJobOperator`` with its default policy (backoffs compressed by the time
  scale like every other delay) but a ``queue_timeout_seconds`` of 150 s (:data:`QUEUE_SECONDS`: a job still
  PENDING then is being re-provisioned after a stockout, so it fails over then), one fallback region, the
  workload resuming from the checkpoint; ours reads its ``step N`` lines from Cloud Logging (``read_step_logs``):
  ``restart_timeout`` = 300 s from the start of a restart (or a job's start) to its next step, ``hang_timeout`` =
  180 s without a new logged step otherwise when its command runs under the worker runner (Spot replicas with
  ``checkpoint_on_notice``), 300 s for a bare command; under the runner also ``worker_hang_timeout`` = 60 s
  (:data:`WORKER_HANG_SECONDS`: the runner on the replica aborts a command that logged no step for that long, and
  Vertex AI retries the job in place; ``--no-worker-watchdog``: off).
* **task retries** -- the usual practice: a plain submit-and-wait operator; a failed job fails the task
  and Airflow's task retries (``retry_delay`` 300 s, its default) submit it again, starting from scratch
  each time because nothing hands the job its checkpoint (``--resume none``).
* **Google provider** -- the choice a team makes today: apache-airflow-providers-google's
  ``CreateCustomJobOperator`` (its own create, wait and cancel code) with Airflow ``retries=3`` and the default
  ``retry_delay`` of 300 s; the workload resumes from its own checkpoint scan of the same output directory. Only
  the hook's client is pointed at the emulator (the provider opens TLS to Google's endpoint). Runs when the
  provider is installed (``make bench`` installs it in ``.venv-bench``); otherwise its row says so.
* **retry loop** -- ``while ! run; do sleep 1; done`` (the loop of Cloud TPU's "Manage maintenance events with
  Cloud TPU Pods", https://cloud.google.com/tpu/docs/maintenance-events): rerun until success, the workload
  resuming from its own checkpoint scan, no classification, always the same region.

The trace (all figures in *platform seconds*; the emulator runs them ``--time-scale`` times faster):

* failures of the running job with exponential inter-arrival times of mean ``--mtbf`` (counted in
  running time: the k-th failure strikes ``d_k`` after the processes the (k-1)-th left running started),
  each of a class drawn from the mix -- ``transient_crash`` (exit 139; Vertex AI's "Understand the custom
  training service": retried by the platform 3 times), ``internal_error`` (retried twice, the same page),
  ``worker_failure`` (VM lost: restarted in place up to 5 times, the same page and AI Platform Training's
  "Understanding the training service") and ``hang`` (the processes stop making progress and the
  platform never says so: the job stays RUNNING -- only a way that watches progress gets out; the others
  wait until they are stopped). The same sequence strikes every way;
* capacity outages of the primary region us-central1 (the stockout of Vertex AI's "Understand the custom training
  service": "Resources are insufficient in region"): one at launch lasting ``--launch-outage`` seconds -- the common
  experience with scarce accelerators -- then alternating exponential periods of mean ``--capacity-up`` and
  ``--capacity-down``; the same wall-clock windows for every way; the fallback region europe-west4 has capacity
  throughout;
* a checkpoint cost C (``--checkpoint-cost``), every way checkpointing at the Young/Daly interval; a
  restart cost R = the platform's in-place restart latency + the workload's measured start-up and
  restore time (the cheapest way back from a failure);
* the emulator's platform latencies (``EmulatorConfig.latencies``; Vertex AI reports an error about a minute
  after it) times the time scale;
* with ``--spot-share X``, Spot reclaims as a share X of the failures (the other classes keep their proportions):
  the replica's processes get SIGTERM ``--notice`` seconds (default 30) before its VM stops -- a Spot VM's ACPI G2
  Soft Off comes 30 s before the G3 Mechanical Off (Compute Engine, "Preemptible VM instances", preemption
  process, https://cloud.google.com/compute/docs/instances/preemptible#preemption-process) -- and Vertex AI
  restarts the worker on another VM (the "Understand the custom training service" page's rule for a worker whose
  VM goes away). Google publishes no reclaim rate for training replicas, so the share is an assumption the command
  line states; 0.3 is the Cloud TPU trace's share of preemptions. Every way's workload runs with ``--on-request``;
  only ours' replicas get the helper that reads the request (``checkpoint_on_notice=True``,
  ``--no-notice-checkpoint``: off), so the other ways' workloads die of the SIGTERM as a plain script does.

Every way's workload prints ``step N`` after each step (``--log-steps``); only ours reads the lines, and the
benchmark reads each way's progress from them at the end (``steps reached``, for machine time per useful step).

Goodput = the job's useful work (steps x step time) / the wall time from the first submit to success. A
way still unfinished a quarter of the work after ours finished (or at ``--horizon`` x the work, or when every
other way is done) is stopped; its goodput is then below work / elapsed, printed as ``< x``. The Young/Daly
ceiling is ``1 - sqrt(2C/MTBF) - R/MTBF``, for the *expected* MTBF; beside it the ceiling of the failures that
actually struck (``goodput.trace_ceiling``: the best fixed interval for this trace, the restart cost R, no
capacity wait, a hang seen at once), which does not swing with the trace's luck.
Prints Markdown tables: the trace, one row per way, and where ours' time went beside the trace ceiling's own
budget (``goodput.trace_budget``). ``--plot PATH`` draws goodput per way per seed as a PNG (matplotlib).
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "ERROR")  # before Airflow is imported: quiet runs

from airflow_provider_resilient.goodput import goodput_ceiling, trace_budget, trace_ceiling, young_daly_interval
from airflow_provider_resilient.policy import RetryPolicy
from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig
from airflow_provider_resilient.testing.standalone import standalone_context

WORKLOAD = str(Path(__file__).resolve().parent / "workloads" / "steady_training.py")
PROJECT = "bench-project"
PRIMARY, FALLBACK = "us-central1", "europe-west4"
#: The seed failure classes of the running job and their shares of the failures.
MIX = {"transient_crash": 0.45, "internal_error": 0.2, "worker_failure": 0.25, "hang": 0.1}
FAULT = {"transient_crash": {"kind": "crash", "exit_code": 139}, "internal_error": {"kind": "internal_error"},
         "worker_failure": {"kind": "worker_failure"}, "hang": {"kind": "hang"}, "spot_reclaim": {"kind": "preemption"}}


def vertex_mix(spot_share: float) -> dict[str, float]:
    """The failure mix with Spot reclaims at ``spot_share`` of the failures (the other classes keep their
    proportions of :data:`MIX`); 0: :data:`MIX` itself."""
    if not 0 <= spot_share < 1:
        raise ValueError(f"--spot-share must be in [0, 1), got {spot_share}")
    if spot_share == 0:
        return dict(MIX)
    return {**{kind: share * (1 - spot_share) for kind, share in MIX.items()}, "spot_reclaim": spot_share}


def vertex_faults(notice: float) -> dict[str, dict[str, Any]]:
    """:data:`FAULT` with ``notice`` real seconds between a Spot reclaim's SIGTERM and the kill (the emulator's
    ``grace_seconds``)."""
    return {kind: ({**fault, "grace_seconds": notice} if fault["kind"] == "preemption" else fault)
            for kind, fault in FAULT.items()}


#: Ours' restart_timeout, platform seconds from the start of a restart (a replica's exit, the runner's start line)
#: or a job's start to its next logged step: the platform's restart (10 s), the workload's start-up and restore
#: (R - 10 s, about 60-80 s, more on a loaded machine: the time scale multiplies Python's start-up by 50), a save
#: (C = 30 s), Cloud Logging's delay and one read interval (hang_timeout / 6). 150 s did not fit, beside other load
#: (false hangs).
RESTART_SECONDS = 300.0
#: Ours' hang_timeout, platform seconds without a new logged step, when the workload runs under the worker runner
#: (``checkpoint_on_notice``): a step (6 s) and a save (C = 30 s) between two step lines while it runs, and, after
#: a job retry the service does not log (an internal error), the platform's restart and the runner's own start-up
#: (10 s + about 30-50 s) before the runner's start line -- plus one poll (30 s) and one read interval between looks.
HANG_SECONDS = 180.0
#: Ours' worker_hang_timeout under the worker runner, platform seconds without a step line before the runner on the
#: replica aborts the command (exit 134: Vertex AI retries the job in place): a step (6 s) and a save (C = 20 or 30
#: s) lie between two step lines; the rest is room for this machine's jitter, which the time scale multiplies by 50
#: (0.5 real s of a busy core is 25 platform s). Off with --no-worker-watchdog.
WORKER_HANG_SECONDS = 60.0
#: Ours' hang_timeout for a bare command (no runner): a job retried after an internal error shows nothing until
#: its first step, so the whole restart must fit, as :data:`RESTART_SECONDS` does.
BARE_HANG_SECONDS = RESTART_SECONDS
#: Ours' ``RetryPolicy.queue_timeout_seconds``, platform seconds a job may stay QUEUED or PENDING: 2.5 times the
#: platform's provisioning latency (60 s). A job still PENDING then is being re-provisioned after a stockout (seed
#: 003: "Vertex AI retries the job up to 3 times", 60 s each, then the error a minute later), so ours cancels it and
#: fails over at once instead of waiting about 300 s for the failure. A team sets it from its own provisioning times.
QUEUE_SECONDS = 150.0
AIRFLOW_RETRY_DELAY = 300.0  # seconds: Airflow's default retry_delay
LOOP_SLEEP = 1.0  # seconds: the retry loop's `sleep 1`
TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}


@dataclass(frozen=True)
class Trace:
    """A seeded fault trace; times in platform seconds."""

    seed: int
    work: float  # seconds of useful training the job needs
    mtbf: float
    checkpoint_cost: float
    failures: tuple[tuple[float, str], ...]  # (running seconds since the previous failure, class)
    outages: tuple[tuple[float, float], ...]  # [start, end) seconds since the start, primary region

    @classmethod
    def draw(cls, seed: int, work: float, mtbf: float, checkpoint_cost: float, launch_outage: float,
             capacity_up: float, capacity_down: float, horizon: float, mix: dict[str, float] | None = None) -> Trace:
        """Draw the failures (classes from ``mix``, default :data:`MIX`) and the primary's outages from ``seed``."""
        mix = mix or MIX
        rng = random.Random(seed)
        failures: list[tuple[float, str]] = []
        while sum(d for d, _ in failures) < 4 * horizon:
            kind = rng.choices(list(mix), weights=list(mix.values()))[0]
            failures.append((rng.expovariate(1 / mtbf), kind))
        outages: list[tuple[float, float]] = [(0.0, launch_outage)] if launch_outage > 0 else []
        t, down = launch_outage, False
        while t < horizon:
            length = rng.expovariate(1 / (capacity_down if down else capacity_up))
            if down:
                outages.append((t, t + length))
            t += length
            down = not down
        return cls(seed, work, mtbf, checkpoint_cost, tuple(failures), tuple(outages))


@dataclass
class Outcome:
    way: str
    started: float
    ended: float | None = None
    finished: bool = False
    submits: int = 0
    regions: set[str] = field(default_factory=set)
    error: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    ledger: dict[str, Any] = field(default_factory=dict)  # XCom "goodput" of our operator (seconds)


def scaled_policy(policy: RetryPolicy, scale: float) -> RetryPolicy:
    """``policy`` with every backoff and time budget multiplied by ``scale`` (compressed time)."""

    def backoff(b: Any) -> Any:
        return None if b is None else replace(b, initial_seconds=b.initial_seconds * scale,
                                              max_seconds=b.max_seconds * scale)

    budgets = {name: replace(b, backoff=backoff(b.backoff),
                             max_seconds=None if b.max_seconds is None else b.max_seconds * scale)
               for name, b in policy.effective_budgets.items()}
    return replace(policy, budgets=budgets, backoff=backoff(policy.backoff),
                   failover_backoff=backoff(policy.failover_backoff),
                   queue_timeout_seconds=policy.queue_timeout_seconds * scale)


def worker_pool(args: list[str]) -> list[dict[str, Any]]:
    return [{"machine_spec": {"machine_type": "a2-highgpu-1g", "accelerator_type": "NVIDIA_TESLA_A100",
                              "accelerator_count": 1},
             "replica_count": 1,
             "container_spec": {"image_uri": "us-docker.pkg.dev/bench/train:latest",
                                "command": ["python", WORKLOAD, *args]}}]


def run_ours(outcome: Outcome, args: list[str], policy: RetryPolicy, poll: float, hang_timeout: float,
             stop: threading.Event, event_topic: str | None = None, on_notice: bool = False,
             restart_timeout: float | None = None, worker_hang_timeout: float | None = None) -> None:
    """Our operator, in this thread; stopped at the horizon as a user would: ``on_kill`` cancels the live job.
    ``event_topic``: it also listens for the platform's failure entries there (docs/detection.md). ``on_notice``:
    Spot replicas (``strategy="SPOT"``) that checkpoint on a preemption notice (``checkpoint_on_notice``).
    ``worker_hang_timeout``: the worker runner's liveness watchdog, real seconds (None: off)."""
    from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator

    op = ResilientCustomJobOperator(
        task_id="ours", project_id=PROJECT, region=PRIMARY, display_name="goodput-ours",
        worker_pool_specs=worker_pool([*args, "--resume", "scan"]), base_output_dir="gs://bench/ours",
        labels={"bench-way": "ours"}, fallbacks=[{"region": FALLBACK}], resilience_policy=policy,
        poll_interval=poll, hang_timeout=hang_timeout, restart_timeout=restart_timeout, deferrable=False,
        event_topic=event_topic,
        strategy="SPOT" if on_notice else None, checkpoint_on_notice=on_notice,
        worker_hang_timeout=worker_hang_timeout)
    execute_ours(outcome, op, stop, "goodput", (PRIMARY, FALLBACK))


def execute_ours(outcome: Outcome, op: Any, stop: threading.Event, run_id: str, where: tuple[str, str]) -> None:
    """Run our operator ``op`` in this thread as run ``run_id``; once ``stop`` is set, kill it as Airflow would
    (``on_kill``: it cancels or deletes what runs). Its figures go to ``outcome`` (:func:`record_ours`)."""
    threading.Thread(target=lambda: stop.wait() and op.on_kill(), daemon=True).start()
    context = standalone_context(run_id)
    try:
        op.execute(context)
        outcome.finished = True
    finally:
        record_ours(outcome, op, context, where)


def record_ours(outcome: Outcome, op: Any, context: dict[str, Any], where: tuple[str, str]) -> None:
    """Our run's figures into ``outcome``, finished or not: its attempts (from the run's state, as a retried task
    reads them), resources created, the ``(primary, fallback)`` locations they ran in, and the goodput ledger."""
    from airflow_provider_resilient.policy import history_to_json
    from airflow_provider_resilient.supervisor import state_from_json

    history = state_from_json(context["task_state_store"].get(op.STATE_KEY)).history
    outcome.ledger = context["ti"].xcom.get("goodput", {})
    outcome.history = history_to_json(history)
    outcome.submits = sum(1 for a in history if a.resource_name)
    outcome.regions = {where[1] if a.fallback_index >= 0 else where[0] for a in history if a.resource_name}


def run_resubmitting(outcome: Outcome, args: list[str], way: str, delay: float, poll: float,
                     stop: threading.Event) -> None:
    """Submit, wait for the end, and on failure submit again after ``delay`` seconds, until success."""
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    client = vertex_job_client(PRIMARY)
    spec = {"display_name": f"goodput-{way}", "labels": {"bench-way": way},
            "job_spec": {"worker_pool_specs": worker_pool(args),
                         "base_output_directory": {"output_uri_prefix": f"gs://bench/{way}"}}}
    while not stop.is_set():
        job = client.create_custom_job(parent=f"projects/{PROJECT}/locations/{PRIMARY}", custom_job=spec)
        outcome.submits += 1
        outcome.regions.add(PRIMARY)
        while job.state.name not in TERMINAL:
            if stop.wait(poll):
                client.cancel_custom_job(name=job.name)
                return
            job = client.get_custom_job(name=job.name)
        if job.state.name == "JOB_STATE_SUCCEEDED":
            outcome.finished = True
            return
        stop.wait(delay)


AIRFLOW_RETRIES = 3  # the Google provider way's task retries


def google_provider_installed() -> bool:
    """Whether apache-airflow-providers-google (its Vertex AI custom job operator) can be imported here."""
    import importlib.util

    try:
        return importlib.util.find_spec("airflow.providers.google.cloud.operators.vertex_ai.custom_job") is not None
    except ModuleNotFoundError:
        return False


def run_google_provider(outcome: Outcome, args: list[str], delay: float, poll: float,
                        stop: threading.Event) -> None:
    """The Google provider's ``CreateCustomJobOperator`` as Airflow runs it with ``retries=3``: each try creates
    a job and waits for it (the provider's own ``wait_for_custom_job``); a failed try raises, and the next try
    starts ``delay`` seconds later; after the last, the task fails. Stopped as Airflow stops a task: ``on_kill``."""
    from functools import cached_property

    from airflow.providers.google.cloud.hooks.vertex_ai.custom_job import CustomJobHook
    from airflow.providers.google.cloud.operators.vertex_ai.custom_job import CreateCustomJobOperator

    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    class EmulatedCustomJobHook(CustomJobHook):
        def get_job_service_client(self, region: str | None = None) -> Any:  # plain-text gRPC to the emulator
            return vertex_job_client(region or PRIMARY)

    class Operator(CreateCustomJobOperator):
        @cached_property
        def hook(self) -> CustomJobHook:  # type: ignore[override]
            return EmulatedCustomJobHook(gcp_conn_id=self.gcp_conn_id)

    # The connection a team has; the hook reads it (its credentials go unused: the client above is anonymous).
    os.environ.setdefault("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", '{"conn_type": "google_cloud_platform"}')
    spec = {"display_name": "goodput-google", "labels": {"bench-way": "google"},
            "job_spec": {"worker_pool_specs": worker_pool([*args, "--resume", "scan"]),
                         "base_output_directory": {"output_uri_prefix": "gs://bench/google"}}}
    for attempt in range(1, AIRFLOW_RETRIES + 2):
        op = Operator(task_id="google", project_id=PROJECT, region=PRIMARY, custom_job=spec, poll_interval=poll,
                      retries=AIRFLOW_RETRIES)
        watcher = threading.Event()
        threading.Thread(target=lambda op=op, watcher=watcher: (stop.wait() and not watcher.is_set()) and op.on_kill(),
                         daemon=True).start()
        outcome.regions.add(PRIMARY)
        try:
            outcome.submits += 1
            op.execute(standalone_context("goodput-google"))
            outcome.finished = True
            return
        except Exception as exc:
            if stop.is_set():
                return
            if attempt > AIRFLOW_RETRIES:
                outcome.error = f"task failed after {attempt} tries: {str(exc).splitlines()[0][:80]}"
                return
        finally:
            watcher.set()
        if stop.wait(delay):
            return


def arm_failures(emulator: Emulator, way: str, trace: Trace, scale: float, stop: threading.Event,
                 struck: list[str], faults: dict[str, dict[str, Any]] | None = None) -> None:
    """Keep exactly one failure of the trace armed for ``way``: the next once the previous struck. ``faults``: the
    emulator fault of each class (default :data:`FAULT`). After a hang the next failure waits for a job or node of
    the way that the hang did not stop (a way that never notices its hung job stays hung, as it would: a later
    crash must not free it)."""
    for delay, kind in trace.failures:
        index = emulator.add_fault({**(faults or FAULT)[kind], "after_seconds": delay * scale, "times": 1,
                                    "match": {"labels": {"bench-way": way}}})
        while emulator.faults.fired(index) == 0:
            if stop.wait(0.02):
                return
        struck.append(kind)
        if kind == "hang":
            hung = resources_of(emulator, way)
            while not resources_of(emulator, way) - hung:
                if stop.wait(0.02):
                    return


def resources_of(emulator: Emulator, way: str) -> set[str]:
    """The names of the Vertex AI jobs and TPU nodes labelled ``bench-way=<way>`` the emulator has now."""
    with emulator.vertex.lock:
        jobs = {name for name, run in emulator.vertex.runs.items() if run.job.labels.get("bench-way") == way}
    with emulator.tpu.lock:
        nodes = {name for name, run in emulator.tpu.nodes.items() if run.node.labels.get("bench-way") == way}
    return jobs | nodes


#: The workload's lines that say its step: ``start step S``, ``step N`` (``--log-steps``), ``done steps N``. (The
#: runner's ``DEFAULT_STEP_PATTERN`` reads ``step N`` only; a restarted run that has not stepped yet is at its
#: ``start step``.)
STEP_LINE = re.compile(r"^(?:start step|step|done steps) (\d+)$", re.MULTILINE)


def vertex_steps_reached(emulator: Emulator, way: str) -> int:
    """The step a Vertex AI way's training has reached (0: none yet): the last step line of its newest job that
    printed one (every way's workload logs its steps). That is its current run's progress -- for the task-retries
    way (``--resume none``) not what its checkpoint directory holds, which keeps the two highest steps of any run."""
    with emulator.vertex.lock:
        jobs = sorted((name for name, run in emulator.vertex.runs.items() if run.job.labels.get("bench-way") == way),
                      key=lambda name: int(name.rsplit("/", 1)[-1]), reverse=True)
    for name in jobs:
        steps = STEP_LINE.findall(emulator.replica_log(name))
        if steps:
            return int(steps[-1])
    return 0


def kept_on_notice(logs: list[str], every: int, step_seconds: float) -> tuple[int, float]:
    """The saves on a notice in the workload's ``logs`` (``saved step N on request (notice-...)`` lines) and the
    progress they kept, in seconds of training: for each, the steps past the newer of the periodic checkpoint before
    it (every ``every`` steps) and the previous save on notice, times ``step_seconds``."""
    steps = sorted(int(n) for text in logs
                   for n in re.findall(r"^saved step (\d+) on request \(notice-", text, re.MULTILINE))
    kept, previous = 0.0, 0
    for step in steps:
        kept += (step - max(step // every * every, previous)) * step_seconds
        previous = step
    return len(steps), kept


def vertex_notice_saves(emulator: Emulator, way: str, every: int, step_seconds: float) -> tuple[int, float]:
    """:func:`kept_on_notice` of every replica log of ``way``'s jobs."""
    with emulator.vertex.lock:
        jobs = [name for name, run in emulator.vertex.runs.items() if run.job.labels.get("bench-way") == way]
    return kept_on_notice([emulator.replica_log(name) for name in jobs], every, step_seconds)


@functools.cache
def workload_module() -> Any:
    """The benchmark's workload (:data:`WORKLOAD`) as a module, loaded once: its checkpoint scan is reused."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("steady_training", WORKLOAD)
    assert spec is not None and spec.loader is not None
    workload = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(workload)
    return workload


def checkpoint_steps_reached(emulator: Emulator, directory: str) -> int:
    """The newest committed checkpoint step under ``directory`` (``gs://...``; 0: none): the progress of a way whose
    workload always resumes from its checkpoints, read with the workload's own scan."""
    steps = workload_module().committed_steps(emulator.storage_filesystem(), directory.removeprefix("gs://"))
    return steps[-1] if steps else 0


def measure_restore(emulator: Emulator, scale: float) -> float:
    """The workload's start-up and restore time (platform seconds): one start that finds a checkpoint."""
    env = {**os.environ, **emulator.workload_env(), "AIP_CHECKPOINT_DIR": "gs://bench/probe/checkpoints"}
    subprocess.run([sys.executable, WORKLOAD, "--steps", "1", "--step-seconds", "0", "--every", "1"], env=env,
                   check=True, capture_output=True)
    began = time.perf_counter()
    subprocess.run([sys.executable, WORKLOAD, "--steps", "1", "--step-seconds", "0", "--every", "1"], env=env,
                   check=True, capture_output=True)
    return (time.perf_counter() - began) / scale


def trace_parser(doc: str | None, place: str) -> argparse.ArgumentParser:
    """The command line both goodput benchmarks share: the trace (``place``: where capacity runs out, e.g. "region"),
    the run and the many-seed options."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=1, help="run this many seeded traces, from --seed on, and "
                                                                 "print the mean, p10 and p90 per way")
    parser.add_argument("--work", type=float, default=2 * 3600.0, help="useful training, platform seconds")
    parser.add_argument("--mtbf", type=float, default=1800.0, help="mean running time between failures, seconds")
    parser.add_argument("--checkpoint-cost", type=float, default=30.0, help="C: seconds per checkpoint")
    parser.add_argument("--launch-outage", type=float, default=1800.0, help="seconds without capacity at launch")
    parser.add_argument("--capacity-up", type=float, default=7200.0, help=f"mean seconds the {place} has capacity")
    parser.add_argument("--capacity-down", type=float, default=1800.0, help="mean seconds of a later outage")
    parser.add_argument("--poll-interval", type=float, default=30.0, help="seconds, every way")
    parser.add_argument("--time-scale", type=float, default=0.02, help="real seconds per platform second")
    parser.add_argument("--horizon", type=float, default=2.5, help="stop a way after this many x the work")
    parser.add_argument("--plot", type=Path, help="write goodput per way per seed to this PNG (needs matplotlib)")
    parser.add_argument("--json", type=Path, help="write every seed's figures to this file as each seed ends")
    parser.add_argument("--from-json", type=Path, help="run nothing: print the many-trace table (and --plot) of "
                                                       "the figures a --json run wrote, e.g. one stopped early")
    return parser


def run_seeds(a: argparse.Namespace, one: Callable[[argparse.Namespace], dict[str, Any]], unit: str,
              what: str) -> int:
    """Run ``one`` seed after another from ``a.seed`` (or read ``a.from_json``), then the many-trace table (in
    machine time ``unit``) and the plot (of ``what``)."""
    logging.disable(logging.WARNING)  # the operator's own log lines would drown the tables
    # A SIGTERM (kill, timeout) unwinds the emulator like Ctrl-C does: its jobs' and VMs' processes go with it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    first = a.seed
    results = []
    if a.from_json:
        import json

        results = json.loads(a.from_json.read_text())
    for seed in range(first, first + a.seeds) if not a.from_json else ():
        a.seed = seed
        results.append(one(a))
        if a.json:
            import json

            a.json.write_text(json.dumps(results, indent=1))
    if len(results) > 1:
        summarize(results, unit)
    if a.plot:
        plot(results, a.plot, what)
    return 0


#: ``--quick`` (CI: the benchmark runs and prints its tables, no figure is checked): the shortest run in which every
#: way meets a failure of the trace and ours finishes -- seed 37's trace (its first failure, a lost worker, strikes
#: 0.1 x MTBF into a run; the next 1.84 x MTBF later), a 2 min job, a launch outage the platform's provisioning
#: retry meets, and a horizon long enough for ours to finish on a loaded machine.
QUICK = {"seed": 37, "work": 120.0, "mtbf": 300.0, "checkpoint_cost": 10.0, "launch_outage": 130.0, "horizon": 8.0}

CRASH_STEP = 25  # the deterministic crash of the crash-loop scenario: every run dies at this step


#: Each Vertex AI way's ``bench-way`` label (its jobs' label, its fault matcher, its checkpoint directory).
#: The topic ``--events`` routes the platform's failure entries to (docs/detection.md's sink, on the emulator).
EVENT_TOPIC = f"projects/{PROJECT}/topics/resilient-events"
LABEL = {"ours": "ours", "task retries": "retries", "retry loop": "loop", "Google provider": "google"}


def vertex_ways(args: list[str], scale: float, poll: float, hang_timeout: float,
                stop: threading.Event, event_topic: str | None = None,
                on_notice: bool = False, restart_timeout: float | None = None,
                worker_hang_timeout: float | None = None) -> dict[str, Callable[[Outcome], None]]:
    """The Vertex AI ways, each a body for :func:`race`: ours (``hang_timeout``, ``restart_timeout`` and
    ``worker_hang_timeout`` real seconds; listening on
    ``event_topic`` when given; checkpointing on a Spot reclaim's notice with ``on_notice``), task retries, the retry
    loop and, when installed, the Google provider; workload ``args``, real ``poll`` seconds."""
    ways: dict[str, Callable[[Outcome], None]] = {
        "ours": lambda o: run_ours(o, args, scaled_policy(RetryPolicy(queue_timeout_seconds=QUEUE_SECONDS), scale),
                                   poll, hang_timeout, stop, event_topic, on_notice, restart_timeout,
                                   worker_hang_timeout),
        "task retries": lambda o: run_resubmitting(o, [*args, "--resume", "none"], "retries",
                                                   AIRFLOW_RETRY_DELAY * scale, poll, stop),
        "retry loop": lambda o: run_resubmitting(o, [*args, "--resume", "scan"], "loop", LOOP_SLEEP * scale,
                                                    poll, stop),
    }
    if google_provider_installed():
        ways["Google provider"] = lambda o: run_google_provider(o, args, AIRFLOW_RETRY_DELAY * scale, poll, stop)
    return ways


def crash_loop(a: argparse.Namespace) -> dict[str, Any]:
    """The crash-loop scenario: a deterministic bug -- every run of the workload dies with exit 139 at step
    :data:`CRASH_STEP` (its last checkpoint is step 20), so no retry can ever succeed. What matters then is how soon a
    way stops paying for it: each way runs until it gives up, or until a quarter of ``--work`` after ours did.
    Prints one row per way and returns the figures."""
    s = a.time_scale
    args = ["--steps", "600", "--step-seconds", f"{STEP_SECONDS * s:g}", "--every", "10", "--save-seconds", "0",
            "--crash-at-step", str(CRASH_STEP)]
    with Emulator(config=EmulatorConfig(time_scale=s, seed=a.seed)) as emulator:
        os.environ.update(emulator.env())
        emulator.ensure_bucket("bench")
        stop = threading.Event()
        ways = vertex_ways(args, s, a.poll_interval * s, 3600 * s, stop)
        nothing = Trace(a.seed, a.work, a.mtbf, a.checkpoint_cost, (), ())
        outcomes, _ = race(emulator, ways, LABEL, nothing, s, a.work, 20 * a.work, stop)
        print(f"\n## A crash loop: every run dies at step {CRASH_STEP} (exit 139), time scale {s:g}\n")
        print("| way | ended | after s | jobs submitted | machine time (replica-s) |\n| --- | --- | --- | --- | --- |")
        figures = {}
        for name, o in outcomes.items():
            after = ((o.ended or time.monotonic()) - o.started) / s
            billed = machine_seconds(LABEL[name], s)
            figures[name] = {"gave_up": bool(o.error), "after": after, "submits": o.submits, "machine": billed}
            ended = f"gave up: {o.error}" if o.error else "stopped, still retrying"
            print(f"| {name} | {ended} | {after:.0f} | {o.submits} | {billed:.0f} |")
        if outcomes["ours"].history:
            from airflow_provider_resilient.policy import history_from_json, history_table

            print("\nours, attempt by attempt:\n\n```")
            print("\n".join(history_table(history_from_json(outcomes["ours"].history))))
            print("```")
    return figures


def main() -> int:
    parser = trace_parser(__doc__, "region")
    parser.add_argument("--quick", action="store_true", help="seed 37's trace, a 2 min job (CI; see QUICK)")
    parser.add_argument("--crash-loop", action="store_true", help="after the traces, the crash-loop scenario "
                                                                   "(:func:`crash_loop`)")
    parser.add_argument("--events", action="store_true", help="ours also detects by event: event_topic, a Pub/Sub "
                                                              "topic the emulator's Cloud Logging sink feeds")
    parser.add_argument("--spot-share", type=float, default=0.0,
                        help="share of the failures that are Spot reclaims (SIGTERM, --notice s, then the VM stops; "
                             "the worker is restarted on another VM), the other classes scaled down (default 0: none)")
    parser.add_argument("--notice", type=float, default=30.0, help="seconds from a Spot reclaim's SIGTERM to the "
                                                                   "machine's stop (Compute Engine: 30 s)")
    parser.add_argument("--no-worker-watchdog", dest="worker_watchdog", action="store_false",
                        help="ours without the worker runner's liveness watchdog (worker_hang_timeout; it needs the "
                             "runner: --spot-share > 0)")
    parser.add_argument("--no-notice-checkpoint", dest="notice_checkpoint", action="store_false",
                        help="ours does not checkpoint on a Spot reclaim's notice (checkpoint_on_notice=False)")
    a = parser.parse_args()
    vertex_mix(a.spot_share)  # a bad share fails here, before any seed runs
    if a.quick:
        for name, value in QUICK.items():
            setattr(a, name, value)
    status = run_seeds(a, one_seed, "replica-s", "one training job") if a.seeds > 0 or a.from_json else 0
    if a.crash_loop:
        crash_loop(a)
    return status


def machine_seconds(way: str, scale: float) -> float:
    """Replica-seconds billed to ``way`` (platform seconds): each of its jobs from its start to its end (or now),
    in both regions -- what a team pays, idle waits on a live job included."""
    from datetime import UTC, datetime

    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    total = 0.0
    for region in (PRIMARY, FALLBACK):
        jobs = vertex_job_client(region).list_custom_jobs(request={
            "parent": f"projects/{PROJECT}/locations/{region}", "filter": f'labels.bench-way="{way}"'})
        for job in jobs:
            if "start_time" not in job:
                continue
            end = job.end_time if "end_time" in job else datetime.now(tz=UTC)
            replicas = sum(int(pool.replica_count or 1) for pool in job.job_spec.worker_pool_specs)
            total += replicas * (end - job.start_time).total_seconds()
    return total / scale


def way_goodput(work: float, wall: float, outcome: Outcome) -> float:
    """A way's goodput: ``work / wall`` when it finished, or its upper bound when it was stopped still running;
    0 when it gave up (a failed task delivers no training)."""
    return 0.0 if outcome.error and not outcome.finished else work / wall


def shown_goodput(goodput: float, outcome: Outcome) -> str:
    """As a table shows it: ``0.738``, ``< 0.512`` (stopped: a bound) or ``0 (gave up)``."""
    if outcome.finished:
        return f"{goodput:.3f}"
    return "0 (gave up)" if outcome.error else f"< {goodput:.3f}"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarize(results: list[dict[str, Any]], unit: str = "replica-s") -> None:
    """The many-trace table: per way the mean, p10 and p90 of goodput (a way stopped still running counts with
    its bound ``work / elapsed``, so its figures are upper bounds, marked ``<``; one that gave up counts 0), its mean
    share of each seed's Young/Daly ceiling and trace ceiling, jobs submitted, machine time, and machine time per
    useful step (:func:`per_useful_step`)."""
    import statistics

    seeds = [r["seed"] for r in results]
    print(f"\n## Goodput over {len(results)} seeded traces (seeds {seeds[0]}-{seeds[-1]})\n")
    print("| way | finished | mean goodput | p10 | p90 | of Young/Daly ceiling | of trace ceiling | jobs submitted "
          f"| machine time ({unit}) | {unit} per useful step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for way in results[0]["ways"]:
        rows = [r["ways"][way] for r in results]
        goodput = [w["goodput"] for w in rows]
        done = sum(1 for w in rows if w["finished"])
        bound = "< " if any(not w["finished"] and not w.get("failed") for w in rows) else ""
        print(f"| {way} | {done}/{len(rows)} | {bound}{statistics.mean(goodput):.3f} | {_percentile(goodput, 0.1):.3f} "
              f"| {_percentile(goodput, 0.9):.3f} | "
              f"{statistics.mean(w['goodput'] / r['ceiling'] for w, r in zip(rows, results, strict=True)):.1%} | "
              f"{statistics.mean(w['goodput'] / r['trace_ceiling'] for w, r in zip(rows, results, strict=True)):.1%} | "
              f"{statistics.mean(w['submits'] for w in rows):.1f} | "
              f"{statistics.mean(w['machine'] for w in rows):.0f} | {per_useful_step(rows)} |")
    with_budget = [r["budget"] for r in results if "ours" in r.get("budget", {})]
    if with_budget:
        mean = {side: {row: statistics.mean(b[side][row] for b in with_budget) for row in with_budget[0][side]}
                for side in ("ours", "trace ceiling")}
        print_budget(mean, f"\nWhere the time went, mean over the {len(with_budget)} traces ours finished "
                           "(platform seconds):\n")


def per_useful_step(rows: list[dict[str, Any]]) -> str:
    """Machine time per useful step over the seeds, as the table shows it: the machine time of every seed over the
    steps trained that count -- all of them for a finished run, the steps reached for one stopped still running (it
    keeps them), none for one that gave up (a failed task delivers no model) -- so a way is not cheaper for having
    stopped or given up early. "n/a" for figures without steps (older ``--json`` files); "no steps" when none count."""
    if any("steps" not in w for w in rows):
        return "n/a"
    useful = sum(0 if w.get("failed") and not w["finished"] else w["steps"] for w in rows)
    return f"{sum(w['machine'] for w in rows) / useful:.2f}" if useful else "no steps"


def print_budget(budget: dict[str, dict[str, float]], title: str) -> None:
    """The gap to the trace ceiling, bucket by bucket: ours (our ledger, plus the wait before the first start)
    beside the ceiling's own budget (:func:`~airflow_provider_resilient.goodput.trace_budget`); seconds."""
    if "ours" not in budget:
        return
    print(title)
    print("| bucket | ours s | trace ceiling s | ours - ceiling s |\n| --- | --- | --- | --- |")
    ours, best = budget["ours"], budget["trace ceiling"]
    for row in best:
        print(f"| {row} | {ours[row]:.0f} | {best[row]:.0f} | {ours[row] - best[row]:+.0f} |")
    print(f"| **total** | {sum(ours.values()):.0f} | {sum(best.values()):.0f} | "
          f"{sum(ours.values()) - sum(best.values()):+.0f} |")


def plot(results: list[dict[str, Any]], path: Path, what: str = "one training job") -> None:
    """Goodput per way per seed (a filled marker: finished; hollow: stopped, its bound), with each seed's trace
    ceiling and Young/Daly ceiling, as a PNG at ``path``."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        print(f"\n(plot {path} not written: matplotlib is not installed here; `make bench` installs it)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = [r["seed"] for r in results]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(seeds) + 3), 4.2), dpi=120)
    ax.plot(seeds, [r["trace_ceiling"] for r in results], "_", color="black", markersize=16, mew=2,
            label="trace ceiling")
    ax.plot(seeds, [r["ceiling"] for r in results], "_", color="grey", markersize=16, mew=1.5,
            label="Young/Daly ceiling")
    markers = {"ours": "o", "Google provider": "s", "retry loop": "^", "task retries": "v", "recreate loop": "D",
               "ssh loop": "^"}
    for index, way in enumerate(results[0]["ways"]):
        x = [seed + 0.12 * (index - 1.5) for seed in seeds]
        y = [r["ways"][way]["goodput"] for r in results]
        done = [r["ways"][way]["finished"] for r in results]
        color = f"C{index}"
        ax.scatter([p for p, d in zip(x, done, strict=True) if d], [q for q, d in zip(y, done, strict=True) if d],
                   marker=markers.get(way, "o"), color=color, label=way, zorder=3)
        stopped = [not r["ways"][way]["finished"] and not r["ways"][way].get("failed") for r in results]
        ax.scatter([p for p, d in zip(x, stopped, strict=True) if d],
                   [q for q, d in zip(y, stopped, strict=True) if d], marker=markers.get(way, "o"),
                   facecolors="none", edgecolors=color, zorder=3)
        failed = [bool(r["ways"][way].get("failed")) for r in results]
        ax.scatter([p for p, d in zip(x, failed, strict=True) if d], [0.01] * sum(failed), marker="x", color=color,
                   zorder=3)
    ax.set_xlabel("trace seed (hollow: stopped unfinished, its upper bound; x: gave up)")
    ax.set_ylabel("goodput (useful work / wall time)")
    ax.set_xticks(seeds)
    ax.set_xlim(seeds[0] - 0.6, seeds[-1] + 0.6)
    ax.set_ylim(0, 1)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower left", fontsize=8, ncol=3)
    ax.set_title(f"Goodput of {what} per seeded fault trace ({len(seeds)} traces)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    print(f"\nplot: {path}")


def race(emulator: Emulator, ways: dict[str, Callable[[Outcome], None]], label: dict[str, str], trace: Trace,
         scale: float, work: float, horizon: float, stop: threading.Event,
         faults: dict[str, dict[str, Any]] | None = None) -> tuple[dict[str, Outcome], dict[str, list[str]]]:
    """Run every way side by side, each in a thread with the trace's failures armed for its label
    (:func:`arm_failures`), until all ended, or a quarter of ``work`` after ours ended, or ``horizon`` (platform
    seconds); then set ``stop`` (the ways clean up) and wait for them. Returns each way's outcome and the failure
    classes that struck it."""
    stop_faults = threading.Event()
    outcomes: dict[str, Outcome] = {}
    struck: dict[str, list[str]] = {}
    threads = []
    began = time.monotonic()
    for name, body in ways.items():
        outcome = outcomes[name] = Outcome(name, began)
        struck[name] = []
        threads.append(threading.Thread(target=arm_failures, daemon=True,
                                        args=(emulator, label[name], trace, scale, stop_faults, struck[name], faults)))

        def run(body: Callable[[Outcome], None] = body, outcome: Outcome = outcome) -> None:
            try:
                body(outcome)
            except Exception as exc:  # a way that gives up is a result, not a crash of the benchmark
                if not stop.is_set():  # (an exception caused by our stopping it is no giving up)
                    outcome.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            finally:
                outcome.ended = time.monotonic()

        threads.append(threading.Thread(target=run, name=name, daemon=True))
    for thread in threads:
        thread.start()
    deadline = began + horizon * scale
    while time.monotonic() < deadline:
        if all(o.ended is not None for o in outcomes.values()):
            break
        ours_ended = outcomes["ours"].ended
        if ours_ended is not None:  # the others get a quarter of the work more, then their bound is clear
            deadline = min(deadline, ours_ended + 0.25 * work * scale)
        time.sleep(0.1)
    stop.set()
    for thread in threads:
        if thread.name in ways:  # the stopped ways clean up (cancel, delete) before the faults stop
            thread.join(timeout=30)
    stop_faults.set()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes, struck


def report_ways(outcomes: dict[str, Outcome], struck: dict[str, list[str]], work: float, ceiling: float,
                scale: float, machine: Callable[[str], float], columns: tuple[str, str, str],
                steps: Callable[[str], int]) -> dict[str, Any]:
    """Print one row per way (finished, wall, goodput, its share of ``ceiling``, failures struck, resources
    created, where, steps reached (``steps``: the way's progress, read at the end), machine time; ``columns``
    names the resources, places and machine-time unit) and ours' attempt history; returns each way's figures for
    the many-trace table."""
    created, places, unit = columns
    print(f"| way | finished | wall s | goodput | of ceiling | failures struck | {created} | {places} | "
          f"steps reached | machine time ({unit}) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ways = {}
    for name, o in outcomes.items():
        wall = ((o.ended or time.monotonic()) - o.started) / scale
        goodput = way_goodput(work, wall, o)
        billed, reached = machine(name), steps(name)
        ways[name] = {"goodput": goodput, "finished": o.finished, "failed": bool(o.error), "submits": o.submits,
                      "machine": billed, "steps": reached}
        status = "yes" if o.finished else ("no: " + o.error if o.error else "no: stopped")
        print(f"| {name} | {status} | {wall:.0f} | {shown_goodput(goodput, o)} | {goodput / ceiling:.0%} | "
              f"{len(struck[name])} | {o.submits} | {', '.join(sorted(o.regions))} | {reached} | {billed:.0f} |")
    if outcomes["ours"].history:
        from airflow_provider_resilient.policy import history_from_json, history_table

        print("\nours, attempt by attempt:\n\n```")
        print("\n".join(history_table(history_from_json(outcomes["ours"].history))))
        print("```")
    return ways


def print_verdict(result: dict[str, Any]) -> None:
    """One line: ours' goodput against the seed's two ceilings, and whether it beat every other way (a way
    stopped still running counts with its upper bound, one that gave up with 0)."""
    ours, ceiling, best = result["ways"]["ours"], result["ceiling"], result["trace_ceiling"]
    if not ours["finished"]:
        print("\nours: did not finish")
        return
    others = [w["goodput"] for name, w in result["ways"].items() if name != "ours"]
    print(f"\nours: {ours['goodput']:.3f} = {ours['goodput'] / ceiling:.1%} of the Young/Daly ceiling {ceiling:.3f}, "
          f"{ours['goodput'] / best:.1%} of this trace's ceiling {best:.3f}; above every other way: "
          f"{'yes' if all(ours['goodput'] > g for g in others) else 'no'}")


def budgets(ours: Outcome, budget: dict[str, float], split: float, recovery: str,
            scale: float) -> dict[str, dict[str, float]]:
    """The trace ceiling's budget (:func:`~airflow_provider_resilient.goodput.trace_budget`; its restarts split
    ``split`` : ``1 - split`` into ``recovery`` and start-up) beside ours' ledger when ours finished, both in
    platform seconds, bucket by bucket as :func:`print_budget` shows them."""
    rows = {"training": budget["work"], "checkpoint saves": budget["checkpoint"],
            "wasted progress": budget["wasted_progress"],
            "detection (a failure the platform showed, to the look that saw it)": 0.0,
            "hang detection (a hang's timeout, from the last progress seen)": 0.0, recovery: budget["restart"] * split,
            "repair waits (a node in repair, until the workload steps again or the node is re-created)": 0.0,
            "in-place restarts (last step to the restarted process's start)": 0.0,
            "start to first step (start-up, restore)": budget["restart"] * (1 - split),
            "submit to the first start": 0.0, "stalls (slow spans, no restart seen)": 0.0,
            "other (unexplained: steps going back with no start seen, gaps)": 0.0}
    result = {"trace ceiling": rows}
    if ours.finished and ours.ledger and ours.ended is not None:
        wall = (ours.ended - ours.started) / scale
        led = {k: float(ours.ledger.get(k, 0.0)) / scale
               for k in ("total", "productive", "wasted_progress", "detection", "hang_detection", "recovery",
                         "repair_wait", "in_place_restart", "checkpoint_restore", "checkpoint_save", "stall", "other")}
        result["ours"] = dict(zip(rows, (led["productive"], led["checkpoint_save"], led["wasted_progress"],
                                         led["detection"], led["hang_detection"], led["recovery"], led["repair_wait"],
                                         led["in_place_restart"], led["checkpoint_restore"],
                                         max(0.0, wall - led["total"]), led["stall"], led["other"]), strict=True))
    return result


STEP_SECONDS = 6.0  # platform seconds per step of the workload (0.12 s real at the default scale)


@dataclass(frozen=True)
class Plan:
    """One seed's run: the trace, the workload's steps, its checkpoint period (every ``every`` steps, the
    Young/Daly ``interval`` rounded to steps), its arguments (real seconds), the horizon (platform seconds)."""

    trace: Trace
    steps: int
    interval: float
    every: int
    horizon: float
    args: list[str]

    @classmethod
    def of(cls, a: argparse.Namespace, mix: dict[str, float] | None = None) -> Plan:
        s = a.time_scale
        interval = young_daly_interval(a.checkpoint_cost, a.mtbf)
        every = max(1, round(interval / STEP_SECONDS))
        steps = round(a.work / STEP_SECONDS)
        horizon = a.horizon * a.work
        trace = Trace.draw(a.seed, a.work, a.mtbf, a.checkpoint_cost, a.launch_outage, a.capacity_up,
                           a.capacity_down, horizon, mix)
        args = ["--steps", str(steps), "--step-seconds", f"{STEP_SECONDS * s:g}", "--every", str(every),
                "--save-seconds", f"{a.checkpoint_cost * s:g}", "--log-steps",
                "--keep", "0"]  # every save stays listed: ours' ledger times each (checkpoint_save), not as a stall
        return cls(trace, steps, interval, every, horizon, args)

    def hang_timeout(self, a: argparse.Namespace, runner: bool) -> float:
        """Ours' ``hang_timeout``, real seconds: :data:`HANG_SECONDS` under the worker runner (``runner``), else
        :data:`BARE_HANG_SECONDS`."""
        return (HANG_SECONDS if runner else BARE_HANG_SECONDS) * a.time_scale


def one_seed(a: argparse.Namespace) -> dict[str, Any]:
    """One seeded trace, every way side by side; prints its tables and returns its figures."""
    s = a.time_scale
    spot_share, notice_on = getattr(a, "spot_share", 0.0), getattr(a, "notice_checkpoint", True)
    mix = vertex_mix(spot_share)
    plan = Plan.of(a, mix)
    trace, steps, interval, every, horizon, args = (plan.trace, plan.steps, plan.interval, plan.every, plan.horizon,
                                                    [*plan.args, "--on-request"] if spot_share else plan.args)
    step_seconds = STEP_SECONDS
    config = EmulatorConfig(time_scale=s, seed=a.seed)
    with Emulator(config=config) as emulator:
        os.environ.update(emulator.env())
        emulator.ensure_bucket("bench")
        restore = measure_restore(emulator, s)
        restart = config.latencies.restart_seconds + restore
        ceiling = goodput_ceiling(a.checkpoint_cost, restart, a.mtbf)
        # The best any way could do on this very trace: the interval best for the failures that struck, the least
        # restart, no wait for capacity (the fallback region has it) -- it does not swing with the trace's luck.
        struck_ceiling, struck_interval = trace_ceiling(a.work, [d for d, _ in trace.failures], a.checkpoint_cost,
                                                        restart)
        print(f"## Goodput: seed {a.seed}, time scale {s:g}\n")
        print("| trace | value |\n| --- | --- |")
        for name, value in [
            ("useful work W", f"{a.work:.0f} s ({steps} steps of {step_seconds:g} s)"),
            ("MTBF of the running job", f"{a.mtbf:.0f} s, classes {', '.join(f'{k} {v:.0%}' for k, v in mix.items())}"),
            ("checkpoint cost C", f"{a.checkpoint_cost:.0f} s, every {every} steps "
                                  f"({every * step_seconds:.0f} s; Young/Daly {interval:.0f} s)"),
            ("restart cost R", f"{restart:.0f} s (platform restart {config.latencies.restart_seconds:.0f} s + "
                               f"workload start-up and restore {restore:.0f} s)"),
            ("capacity outages in " + PRIMARY,
             ", ".join(f"{lo:.0f}-{hi:.0f}" for lo, hi in trace.outages if lo < horizon) or "none"),
            ("poll interval", f"{a.poll_interval:g} s (every way)"),
            ("ours detects", "by poll and by event (--events: Pub/Sub fed by a Cloud Logging sink)" if a.events
             else "by poll"),
            *([("Spot reclaims", f"{spot_share:.0%} of the failures: SIGTERM {a.notice:g} s before the VM stops; "
                                 + ("ours checkpoints on it" if notice_on else "ours does not save on it"))]
              if spot_share else []),
            *([("ours' worker watchdog", f"the runner aborts a command {WORKER_HANG_SECONDS:.0f} s without a step line "
                                         "(worker_hang_timeout)" if getattr(a, "worker_watchdog", True) else "off")]
              if spot_share and notice_on else []),
            ("Young/Daly ceiling", f"{ceiling:.3f} = 1 - sqrt(2C/MTBF) - R/MTBF"),
            ("ceiling of the failures that struck", f"{struck_ceiling:.3f} (the best fixed interval for this trace's "
                                                   f"failures, {struck_interval:.0f} s; restart R; no capacity wait)"),
        ]:
            print(f"| {name} | {value} |")
        print(flush=True)

        from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator  # noqa: F401
        from airflow_provider_resilient.testing.emulator_clients import vertex_job_client  # warm imports: a fair start

        vertex_job_client(PRIMARY).list_custom_jobs(parent=f"projects/{PROJECT}/locations/{PRIMARY}")
        emulator.reset()  # the outage windows count from here
        emulator.ensure_bucket("bench")
        if a.events:
            from airflow_provider_resilient.testing.emulator_clients import route_failure_events

            route_failure_events(EVENT_TOPIC, emulator=emulator.address)
        for lo, hi in trace.outages:
            emulator.add_fault({"kind": "stockout", "times": None, "match": {"location": PRIMARY},
                                "active_seconds": [lo * s, hi * s]})
        stop_all = threading.Event()
        on_notice = bool(spot_share) and notice_on
        watchdog = on_notice and getattr(a, "worker_watchdog", True)
        ways = vertex_ways(args, s, a.poll_interval * s, plan.hang_timeout(a, runner=on_notice), stop_all,
                           EVENT_TOPIC if a.events else None, on_notice=on_notice,
                           restart_timeout=RESTART_SECONDS * s if on_notice else None,
                           worker_hang_timeout=WORKER_HANG_SECONDS * s if watchdog else None)
        outcomes, struck = race(emulator, ways, LABEL, trace, s, a.work, horizon, stop_all,
                                vertex_faults(a.notice * s) if spot_share else None)
        result: dict[str, Any] = {"seed": a.seed, "ceiling": ceiling, "trace_ceiling": struck_ceiling,
                                  "ways": report_ways(outcomes, struck, a.work, ceiling, s,
                                                      lambda name: machine_seconds(LABEL[name], s),
                                                      ("jobs submitted", "regions", "replica-s"),
                                                      lambda name: vertex_steps_reached(emulator, LABEL[name]))}
        if not google_provider_installed():
            print("\n(Google provider way: apache-airflow-providers-google is not installed here; `make bench` "
                  "installs it in .venv-bench)")
        split = config.latencies.restart_seconds / restart if restart > 0 else 0.0
        result["budget"] = budgets(outcomes["ours"], trace_budget(a.work, [d for d, _ in trace.failures],
                                                                  a.checkpoint_cost, restart, struck_interval),
                                   split, "recovery (platform restart, capacity waits)", s)
        print_budget(result["budget"], f"\nWhere the time went, seed {a.seed} (platform seconds; the ceiling's "
                                       f"budget at its interval {struck_interval:.0f} s):\n")
        if spot_share:
            saves, kept = vertex_notice_saves(emulator, LABEL["ours"], every, step_seconds)
            result["notice_saves"], result["notice_kept_seconds"] = saves, kept
            print(f"\nCheckpoint on notice: ours saved on {saves} notice(s), keeping {kept:.0f} s of training past "
                  "the periodic checkpoints (time that is not in wasted progress above)")
        print_verdict(result)
    return result


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
