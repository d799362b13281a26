"""Goodput of one Huawei Cloud ModelArts training job under a seeded fault trace, three ways side by side on the
emulator (its ModelArts REST API driven by the real ``huaweicloudsdkmodelarts`` SDK, checkpoints in its OBS):

    python benchmarks/modelarts_goodput.py [--seed 3] [--seeds N] [--quick] [--plot PATH] [--json PATH]

* **ours** -- ``ResilientModelArtsTrainingJobOperator`` with ``job_retry_num`` 3 (ModelArts' own fault tolerance on,
  our policy above it), its default policy (backoffs compressed by the time scale) but a ``queue_timeout_seconds``
  of :data:`QUEUE_SECONDS`, one fallback flavor (:data:`FALLBACK_FLAVOR`) for stockouts of the primary, a
  ``hang_timeout`` of :data:`HANG_PERIODS` checkpoint periods without a new checkpoint in OBS, the workload resuming
  from the checkpoint it is handed (``RESILIENT_RESUME_FROM``) or finds.
* **platform re-issue** -- one job created with the SDK's ``ModelArtsClient`` with
  ``fault-tolerance/job-retry-num`` = 3 and nothing else: the platform re-issues it on new nodes after a hardware
  fault or a failed environment pre-check, at most 3 times; any other failure (a crash on sound hardware, a 4th
  re-issue, a re-issued job queued 30 minutes) fails the job and ends the run -- the run gave up (goodput 0, as a
  failed task everywhere in these benchmarks). A hang is never noticed: the job is stopped at the horizon.
* **task retries** -- Airflow's task retries around a plain submit-and-wait: each try creates one job with the SDK
  (no fault tolerance: this way is the Airflow mechanism alone) and waits for it; a failed job fails the try, and
  the next try starts ``retry_delay`` (300 s, Airflow's default) later, ``retries=3``; no fallback flavor.

Every way runs the same workload (``benchmarks/workloads/steady_training.py``) with ``--resume scan``: it resumes
from the newer of the checkpoint handed to it and its own scan of its OBS directory, so a re-issued job or a retried
try resumes too (goodput.py's Google provider and retry loop ways assume the same); only ours is handed one.

The trace (platform seconds; the emulator runs them ``--time-scale`` times faster), the same for every way:

* failures of the running job with exponential inter-arrival times of mean ``--mtbf`` (running time since the
  previous failure's processes started), each of a class drawn from :data:`MA_MIX`, struck as the emulator's
  ``service: modelarts`` faults (:data:`MA_FAULT`):

  - ``hardware`` -- a node's hardware fails under the running workload (scenario 3 of ModelArts' "Training Fault
    Tolerance Check", https://support.huaweicloud.com/intl/en-us/develop-modelarts/modelarts_trouble_0003.html;
    a run record's ``node_fault`` / ``chip_fault``): with fault tolerance on the platform isolates the node and
    re-issues the job;
  - ``preflight`` -- the same, and the re-issued job's environment pre-check then fails once (scenarios 1-2: "the
    environment pre-check fails ... ModelArts ... issues the training job again"), a second re-issue. A way without
    fault tolerance runs no pre-check, so only the hardware fault strikes it;
  - ``crash`` -- the workload dies with exit 139 on sound hardware (scenario 4, ``job_failed``: "the training job
    ends in the failure state" -- never re-issued);
  - ``hang`` -- the workload stops making progress (SIGSTOP; ``job_hanged``); the job stays Running.

  Huawei's pages give the scenarios but no rates. The shares are ours: half the failures are the hardware the page
  is written for ("a training failure may occur due to a hardware fault"), a seventh of those found again by the
  re-issue's pre-check; a third are software crashes ("occasional software failures or network fluctuations",
  the recovery policies' page); the rest hangs (ModelArts has a page for restarting suspended jobs).
* capacity outages of the primary flavor (:data:`PRIMARY_FLAVOR`): one at launch of ``--launch-outage`` seconds,
  then exponential periods of mean ``--capacity-up`` / ``--capacity-down`` (goodput.py's defaults); a job of that
  flavor that looks for nodes in an outage stays Pending (Queuing) -- a re-issued one fails after 30 minutes of it
  ("If the waiting time exceeds 30 minutes, the training job will automatically exit"), a first issue waits. The
  emulator's faults match no flavor, so the benchmark arms each outage as a ``stockout`` fault on every new job of
  that flavor by its name (:func:`watch_jobs`); the fallback flavor has capacity throughout;
* a checkpoint cost C every Young/Daly interval for every way; the restart cost R of the ceilings = the platform's
  re-issue (``modelarts_schedule_seconds`` + ``modelarts_precheck_seconds``) + the workload's measured start-up and
  restore from OBS.

Goodput = useful work / wall time from the first create to success; a way still running a quarter of the work after
ours finished (or at ``--horizon`` x the work) is stopped and printed as ``< x``; when ours gives up, the others race
on to their own end or the horizon (:func:`outlast`). Machine time: node-seconds of the
way's jobs while Running (pre-check included: ``status.phase`` is Running then), sampled from the emulator -- a node
of the 8-GPU fallback flavor counts as one node. Prints goodput.py's tables (whose trace, race and summary this
shares).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "ERROR")  # before Airflow is imported: quiet runs
sys.path.insert(0, str(Path(__file__).resolve().parent))

import goodput
from goodput import (
    STEP_SECONDS,
    WORKLOAD,
    Outcome,
    Plan,
    Trace,
    budgets,
    execute_ours,
    print_budget,
    print_verdict,
    race,
    report_ways,
    run_seeds,
    scaled_policy,
    trace_parser,
    workload_module,
)

from airflow_provider_resilient.goodput import goodput_ceiling, trace_budget, trace_ceiling
from airflow_provider_resilient.policy import RetryPolicy
from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig

#: The primary flavor (1 x V100, public pool) and the fallback: the same GPU in the bare-metal 8 x V100 flavor, so the
#: workload's step time is the same on either (the emulator runs both at one speed; a slower GPU would flatter ours).
PRIMARY_FLAVOR, FALLBACK_FLAVOR = "modelarts.p3.large.public", "modelarts.bm.gpu.v100"
IMAGE = "swr.cn-north-4.myhuaweicloud.com/bench/train:latest"
BUCKET = "bench"
#: The failure classes of a running ModelArts job and their shares (see the module docstring).
MA_MIX = {"hardware": 0.35, "preflight": 0.15, "crash": 0.35, "hang": 0.15}
MA_FAULT = {"hardware": {"kind": "hardware"}, "preflight": {"kind": "hardware"},
            "crash": {"kind": "crash", "exit_code": 139}, "hang": {"kind": "hang"}}
#: The pre-check item a ``preflight`` failure's re-issued nodes fail (Docker's 64 MiB /dev/shm).
PREFLIGHT_ITEM = "disk-size shm"
JOB_RETRY_NUM = 3
AIRFLOW_RETRIES = 3
AIRFLOW_RETRY_DELAY = 300.0  # seconds: Airflow's default retry_delay
#: Ours' ``RetryPolicy.queue_timeout_seconds``, platform seconds: a job is granted nodes ``modelarts_create_seconds``
#: + ``modelarts_schedule_seconds`` (15 s) after its create when there is capacity, so a job still Pending after 8
#: looks for capacity is in an outage and fails over to the fallback flavor.
QUEUE_SECONDS = 120.0
#: Ours' hang_timeout in checkpoint periods without a new checkpoint: a re-issue or a new job (queue, pre-check,
#: start-up and restore: about 100 s) plus one period and a save, after up to a period since the last checkpoint
#: before the fault, fit inside 3 periods.
HANG_PERIODS = 3.0
RUNNING = {"prechecking", "running"}  # the emulator's internal phases shown as status.phase Running
TERMINAL = {"Completed", "Failed", "Terminated"}
#: ``--quick`` (CI: the benchmark runs and prints its tables, no figure is checked): a 2 min job on a trace whose
#: first failure strikes early in every way's run and a launch outage that ours fails over from.
QUICK = {"seed": 31, "work": 120.0, "mtbf": 300.0, "checkpoint_cost": 10.0, "launch_outage": 150.0, "horizon": 8.0}
LABEL = {"ours": "ours", "platform re-issue": "platform", "task retries": "retries"}


def command(args: list[str]) -> str:
    """The training command every node runs (``bash -c``); the workload checkpoints under ``AIP_CHECKPOINT_DIR``."""
    return " ".join(["python3", WORKLOAD, *args, "--resume", "scan"])


def run_ours(outcome: Outcome, args: list[str], policy: RetryPolicy, poll: float, hang_timeout: float,
             stop: threading.Event) -> None:
    """Our operator, in this thread; stopped at the horizon as a user would: ``on_kill`` stops the live job."""
    from airflow_provider_resilient.operators.modelarts import ResilientModelArtsTrainingJobOperator

    op = ResilientModelArtsTrainingJobOperator(
        task_id="ours", name="ma-ours", flavor_id=PRIMARY_FLAVOR, image_url=IMAGE,
        command='AIP_CHECKPOINT_DIR="$RESILIENT_CHECKPOINT_DIR" ' + command(args),
        checkpoint_dir=f"obs://{BUCKET}/ma-ours", checkpoint_marker="COMMITTED",
        annotations={"bench-way": "ours"}, job_retry_num=JOB_RETRY_NUM, fallbacks=[{"flavor_id": FALLBACK_FLAVOR}],
        resilience_policy=policy, poll_interval=poll, hang_timeout=hang_timeout, deferrable=False)
    execute_ours(outcome, op, stop, "modelarts-goodput", (PRIMARY_FLAVOR, FALLBACK_FLAVOR))


def modelarts_client(emulator: Emulator) -> Any:
    """The SDK's ``ModelArtsClient`` on the emulator, with the credentials of its connection."""
    from huaweicloudsdkcore.auth.credentials import BasicCredentials
    from huaweicloudsdkmodelarts.v1 import ModelArtsClient

    conn = json.loads(emulator.modelarts_connection())
    credentials = BasicCredentials(conn["login"], conn["password"], conn["extra"]["project_id"])
    return ModelArtsClient.new_builder().with_credentials(credentials).with_endpoints(
        [conn["extra"]["endpoint"]]).build()


def create_job(client: Any, way: str, name: str, args: list[str], job_retry_num: int | None) -> str:
    """Create one training job of ``way`` on the primary flavor (``job_retry_num``: fault tolerance); its id."""
    from huaweicloudsdkmodelarts.v1 import (
        CreateTrainingJobRequest,
        Job,
        JobAlgorithm,
        JobEngine,
        JobMetadata,
        Spec,
        SpecResource,
    )

    annotations = {"bench-way": way}
    if job_retry_num:
        annotations["fault-tolerance/job-retry-num"] = str(job_retry_num)
    checkpoints = f"obs://{BUCKET}/ma-{way}"
    body = Job(kind="job", metadata=JobMetadata(name=name, annotations=annotations),
               algorithm=JobAlgorithm(command=command(args), engine=JobEngine(image_url=IMAGE),
                                      environments={"AIP_CHECKPOINT_DIR": checkpoints,
                                                    "RESILIENT_CHECKPOINT_DIR": checkpoints}),
               spec=Spec(resource=SpecResource(flavor_id=PRIMARY_FLAVOR, node_count=1)))
    return str(client.create_training_job(CreateTrainingJobRequest(body=body)).metadata.id)


def wait_job(client: Any, job_id: str, poll: float, stop: threading.Event) -> str | None:
    """Read the job every ``poll`` seconds until its phase is terminal (returned); once ``stop`` is set, stop the
    job (as Airflow's ``on_kill`` would) and return None."""
    from huaweicloudsdkmodelarts.v1 import JobActionType, ShowTrainingJobDetailsRequest, StopTrainingJobRequest

    while True:
        phase = client.show_training_job_details(ShowTrainingJobDetailsRequest(job_id)).status.phase
        if phase in TERMINAL:
            return str(phase)
        if stop.wait(poll):
            client.stop_training_job(StopTrainingJobRequest(job_id, JobActionType(action_type="terminate")))
            return None


def run_platform(outcome: Outcome, client: Any, args: list[str], poll: float, stop: threading.Event) -> None:
    """One job with ``fault-tolerance/job-retry-num`` 3; its end is the run's end."""
    job_id = create_job(client, "platform", "ma-platform", args, JOB_RETRY_NUM)
    outcome.submits, outcome.regions = 1, {PRIMARY_FLAVOR}
    phase = wait_job(client, job_id, poll, stop)
    if phase == "Completed":
        outcome.finished = True
    elif phase is not None:
        outcome.error = f"the job ended {phase}; the platform re-issues no more"


def run_task_retries(outcome: Outcome, client: Any, args: list[str], delay: float, poll: float,
                     stop: threading.Event) -> None:
    """Airflow's ``retries=3`` around a submit-and-wait: a new job per try, ``delay`` seconds after a failed one."""
    for attempt in range(1, AIRFLOW_RETRIES + 2):
        job_id = create_job(client, "retries", f"ma-retries-{attempt}", args, None)
        outcome.submits += 1
        outcome.regions.add(PRIMARY_FLAVOR)
        phase = wait_job(client, job_id, poll, stop)
        if phase is None:
            return
        if phase == "Completed":
            outcome.finished = True
            return
        if attempt > AIRFLOW_RETRIES:
            outcome.error = f"task failed after {attempt} tries: the job ended {phase}"
            return
        if stop.wait(delay):
            return


def done_sets(done: threading.Event, body: Callable[[], None]) -> None:
    """Run a baseline's ``body``; set ``done`` when it returns or raises."""
    try:
        body()
    finally:
        done.set()


def outlast(outcome: Outcome, body: Callable[[], None], others: Any, ended: list[float],
            stop: threading.Event) -> None:
    """Run ours' ``body``; when it gives up, note its error and end time (in ``outcome`` and ``ended``) and return only
    once every other way is done or ``stop`` is set. goodput.race stops the others a quarter of the work after ours
    ended -- right once ours finished (their bound is clear), but when ours gave up it would stop them before they
    could finish, their bound then above 1: they race on to their own end or the horizon instead."""
    try:
        body()
    except Exception as exc:
        if stop.is_set():
            raise
        outcome.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        ended.append(time.monotonic())
        while not all(done.is_set() for done in others) and not stop.wait(0.1):
            pass


def jobs_of(emulator: Emulator, way: str) -> set[str]:
    """The ids of the ModelArts jobs annotated ``bench-way=<way>``."""
    with emulator.modelarts.lock:
        return {i for i, run in emulator.modelarts.runs.items()
                if run.job["metadata"].get("annotations", {}).get("bench-way") == way}


def await_fired(emulator: Emulator, index: int, stop: threading.Event) -> bool:
    while emulator.faults.fired(index) == 0:
        if stop.wait(0.02):
            return False
    return True


def arm_modelarts_failures(emulator: Emulator, way: str, trace: Trace, scale: float, stop: threading.Event,
                           struck: list[str], faults: dict[str, dict[str, Any]] | None = None) -> None:
    """goodput.arm_failures for ModelArts jobs: one failure of the trace armed for ``way`` at a time, as a
    ``service: modelarts`` fault on its jobs (their ``bench-way`` annotation); a ``preflight`` failure's re-issue
    then fails its pre-check once (ways with fault tolerance); after a hang the next failure waits for a new job."""
    match = {"labels": {"bench-way": way}}
    for delay, kind in trace.failures:
        index = emulator.add_fault({"service": "modelarts", **(faults or MA_FAULT)[kind],
                                    "after_seconds": delay * scale, "times": 1, "match": match})
        if not await_fired(emulator, index, stop):
            return
        struck.append(kind)
        if kind == "preflight" and way != LABEL["task retries"]:
            index = emulator.add_fault({"service": "modelarts", "kind": "preflight", "item": PREFLIGHT_ITEM,
                                        "times": 1, "match": match})
            if not await_fired(emulator, index, stop):
                return
        if kind == "hang":
            hung = jobs_of(emulator, way)
            while not jobs_of(emulator, way) - hung:
                if stop.wait(0.02):
                    return


def watch_jobs(emulator: Emulator, outages: list[tuple[float, float]], machine: dict[str, float], scale: float,
               stop: threading.Event, every: float = 0.02) -> None:
    """Until ``stop``: arm every outage window (real seconds since the reset) as a ``stockout`` fault on each new
    job of the primary flavor (by its name: the emulator's faults match no flavor), and add node-seconds (platform
    seconds) of every job while Running to its way's total in ``machine``."""
    armed: set[str] = set()
    last = time.monotonic()
    while not stop.wait(every):
        now = time.monotonic()
        new = []
        with emulator.modelarts.lock:
            for job_id, run in emulator.modelarts.runs.items():
                way = run.job["metadata"].get("annotations", {}).get("bench-way")
                if way and not run.done and run.phase in RUNNING:
                    machine[way] = machine.get(way, 0.0) + len(run.plans) * (now - last) / scale
                if job_id not in armed:
                    armed.add(job_id)
                    if run.job["spec"]["resource"].get("flavor_id") == PRIMARY_FLAVOR:
                        new.append(run.job["metadata"]["name"])
        last = now
        for name in new:
            for lo, hi in outages:
                emulator.add_fault({"service": "modelarts", "kind": "stockout", "times": None,
                                    "match": {"display_name": name}, "active_seconds": [lo, hi]})


def measure_restore(emulator: Emulator, scale: float) -> float:
    """The workload's start-up and restore time (platform seconds): one start that finds a checkpoint in OBS."""
    env = {**os.environ, **emulator.workload_env(), "AIP_CHECKPOINT_DIR": f"obs://{BUCKET}/probe/checkpoints"}
    probe = [sys.executable, WORKLOAD, "--steps", "1", "--step-seconds", "0", "--every", "1"]
    subprocess.run(probe, env=env, check=True, capture_output=True)
    began = time.perf_counter()
    subprocess.run(probe, env=env, check=True, capture_output=True)
    return (time.perf_counter() - began) / scale


def steps_reached(emulator: Emulator, way: str) -> int:
    """The newest committed checkpoint step of ``way`` in OBS (0: none), read with the workload's own scan."""
    steps = workload_module().committed_steps(emulator.obs.filesystem(), f"{BUCKET}/ma-{way}")
    return steps[-1] if steps else 0


def one_seed(a: Any) -> dict[str, Any]:
    """One seeded trace, every way side by side; prints its tables and returns its figures."""
    s = a.time_scale
    plan = Plan.of(a, MA_MIX)
    trace, steps, interval, every, horizon, args = (plan.trace, plan.steps, plan.interval, plan.every, plan.horizon,
                                                    plan.args)
    config = EmulatorConfig(time_scale=s, seed=a.seed)
    with Emulator(config=config) as emulator:
        os.environ.update(emulator.env())
        emulator.obs.create_bucket(BUCKET)
        restore = measure_restore(emulator, s)
        latencies = config.latencies
        platform = latencies.modelarts_schedule_seconds + latencies.modelarts_precheck_seconds
        restart = platform + restore
        ceiling = goodput_ceiling(a.checkpoint_cost, restart, a.mtbf)
        gaps = [d for d, _ in trace.failures]
        struck_ceiling, struck_interval = trace_ceiling(a.work, gaps, a.checkpoint_cost, restart)
        hang_timeout = HANG_PERIODS * every * STEP_SECONDS
        print(f"## ModelArts goodput: seed {a.seed}, time scale {s:g}\n")
        print("| trace | value |\n| --- | --- |")
        for name, value in [
            ("useful work W", f"{a.work:.0f} s ({steps} steps of {STEP_SECONDS:g} s) on {PRIMARY_FLAVOR} x1"),
            ("MTBF of the running job", f"{a.mtbf:.0f} s, classes "
                                        f"{', '.join(f'{k} {v:.0%}' for k, v in MA_MIX.items())}"),
            ("checkpoint cost C", f"{a.checkpoint_cost:.0f} s, every {every} steps ({every * STEP_SECONDS:.0f} s; "
                                  f"Young/Daly {interval:.0f} s)"),
            ("restart cost R", f"{restart:.0f} s (a re-issue: queue {latencies.modelarts_schedule_seconds:.0f} s + "
                               f"pre-check {latencies.modelarts_precheck_seconds:.0f} s; workload start-up and restore "
                               f"{restore:.0f} s)"),
            ("capacity outages of " + PRIMARY_FLAVOR,
             ", ".join(f"{lo:.0f}-{hi:.0f}" for lo, hi in trace.outages if lo < horizon) or "none"),
            ("poll interval", f"{a.poll_interval:g} s (every way)"),
            ("ours", f"job_retry_num {JOB_RETRY_NUM}, fallback {FALLBACK_FLAVOR}, queue timeout {QUEUE_SECONDS:.0f} s, "
                     f"hang_timeout {hang_timeout:.0f} s"),
            ("Young/Daly ceiling", f"{ceiling:.3f} = 1 - sqrt(2C/MTBF) - R/MTBF"),
            ("ceiling of the failures that struck", f"{struck_ceiling:.3f} (best fixed interval {struck_interval:.0f} "
                                                   "s; restart R; no capacity wait; a hang seen at once)"),
        ]:
            print(f"| {name} | {value} |")
        print(flush=True)

        from airflow_provider_resilient.operators.modelarts import ResilientModelArtsTrainingJobOperator  # noqa: F401

        client = modelarts_client(emulator)  # warm imports and the connection: a fair start
        emulator.reset()  # the outage windows count from here
        emulator.obs.create_bucket(BUCKET)
        stop_all = threading.Event()
        poll = a.poll_interval * s
        others = {"platform re-issue": threading.Event(), "task retries": threading.Event()}
        ours_ended: list[float] = []
        ways: dict[str, Callable[[Outcome], None]] = {
            "ours": lambda o: outlast(o, lambda: run_ours(
                o, args, scaled_policy(RetryPolicy(queue_timeout_seconds=QUEUE_SECONDS), s), poll, hang_timeout * s,
                stop_all), others.values(), ours_ended, stop_all),
            "platform re-issue": lambda o: done_sets(others["platform re-issue"],
                                                     lambda: run_platform(o, client, args, poll, stop_all)),
            "task retries": lambda o: done_sets(others["task retries"], lambda: run_task_retries(
                o, client, args, AIRFLOW_RETRY_DELAY * s, poll, stop_all)),
        }
        machine: dict[str, float] = {}
        watching = threading.Event()
        watcher = threading.Thread(target=watch_jobs, daemon=True, args=(
            emulator, [(lo * s, hi * s) for lo, hi in trace.outages if lo < horizon], machine, s, watching))
        watcher.start()
        # goodput.race arms goodput.arm_failures (Vertex AI and TPU faults); ModelArts jobs need their own arming.
        with mock.patch.object(goodput, "arm_failures", arm_modelarts_failures):
            outcomes, struck = race(emulator, ways, LABEL, trace, s, a.work, horizon, stop_all, MA_FAULT)
        watching.set()
        watcher.join(timeout=30)
        if ours_ended:  # ours gave up: its wall time ends there, not where the others did
            outcomes["ours"].ended = ours_ended[0]
        result: dict[str, Any] = {"seed": a.seed, "ceiling": ceiling, "trace_ceiling": struck_ceiling,
                                  "ways": report_ways(outcomes, struck, a.work, ceiling, s,
                                                      lambda name: machine.get(LABEL[name], 0.0),
                                                      ("jobs created", "flavors", "node-s"),
                                                      lambda name: steps_reached(emulator, LABEL[name]))}
        print("\nfailures struck, in order (the same sequence for every way; a way stopped early sees fewer):\n")
        for name in outcomes:
            print(f"* {name}: {', '.join(struck[name]) or 'none'}")
        result["budget"] = budgets(outcomes["ours"], trace_budget(a.work, gaps, a.checkpoint_cost, restart,
                                                                  struck_interval),
                                   platform / restart if restart > 0 else 0.0,
                                   "recovery (re-issue, new job, capacity waits)", s)
        print_budget(result["budget"], f"\nWhere the time went, seed {a.seed} (platform seconds; the ceiling's "
                                       f"budget at its interval {struck_interval:.0f} s):\n")
        print_verdict(result)
    return result


def main() -> int:
    parser = trace_parser(__doc__, "flavor")
    parser.set_defaults(work=3600.0)  # a 1 h job: 20 seeds in about 40 minutes
    parser.add_argument("--quick", action="store_true", help="a 2 min job on one trace (CI; see QUICK)")
    a = parser.parse_args()
    if a.quick:
        for name, value in QUICK.items():
            setattr(a, name, value)
    return run_seeds(a, one_seed, "node-s", "one ModelArts training job")


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
