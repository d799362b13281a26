"""Goodput of one Cloud TPU training workload under a seeded fault trace, three ways side by side on the emulator:

    python benchmarks/tpu_goodput.py [--seed 3] [--seeds N] [--quick] [--plot PATH] [--json PATH]

* **ours** -- ``ResilientTPUWorkloadOperator`` on a spot node with its default policy (backoffs compressed by the
  time scale), one fallback zone, ``hang_timeout`` = 5 heartbeats without a new step (the workload logs its step,
  the worker runner reports it; ``expect_steps``: also before its first step, so a hang during the start-up is
  caught), ``worker_hang_timeout`` = 60 s (the runner on the worker aborts a command that logged no step for that
  long and restarts it in place; ``--no-worker-watchdog``: off); the workload resumes from the checkpoint the
  operator hands it, and saves when the runner asks
  (``--on-request``): on a maintenance event's or a preemption's SIGTERM (``checkpoint_on_notice``, default on;
  ``--no-notice-checkpoint``: off). From its second attempt on it checkpoints at the interval the operator hands it
  (``--handed-interval``; ``--fixed-interval``: the trace's Young/Daly interval throughout, as the other ways):
  Young/Daly for the failures that lose progress, which the run measures (``goodput.advice``: an interruption a
  save on notice covered loses none). It holds a spare node while the run is at risk (``spare_node="at_risk"``,
  ``spare_risk_seconds`` 600: for 600 s after each interruption; ``--spare never|at_risk|always``,
  ``--spare-risk``): the next attempt takes it instead of a create, and a node in repair is replaced by it once the
  workload had 30 s to save on the notice. Its machine time counts in ours' host-s (the trace's failures strike the
  node an attempt runs on, not a waiting spare). The baselines run the same workload, whose VMs have no helper to
  ask it.
* **recreate loop** -- the recovery script of Cloud TPU's "Manage maintenance events with Cloud TPU Pods"
  (https://cloud.google.com/tpu/docs/maintenance-events; "a recovery script to detect the TPU's state and delete
  and re-create the TPU"): it polls the node; a TERMINATED or PREEMPTED node, or a workload that exited non-zero (its
  startup script reports the exit code as a guest attribute), is deleted and created again, in the same zone (a
  stockout: created again after ``--create-retry`` seconds); a maintenance event with recovery is waited out (the
  node comes back and its startup script -- "run whenever a TPU VM is created" -- resumes the training).
* **ssh loop** -- that page's ``while ! gcloud compute tpus tpu-vm ssh ${TPU_NAME} --command "python3 [training
  command]"; do sleep 1; done``: the node is created once (again after a stockout) and the command is run again
  until it succeeds. The loop runs in the node's startup script, so a reboot after a repair starts it again, as
  the next ssh would; a preempted or terminated node is never replaced -- the ssh fails for ever.

The trace (all figures in *platform seconds*; the emulator runs them ``--time-scale`` times faster):

* failures of the running node with exponential inter-arrival times of mean ``--mtbf`` (running time since the
  previous failure's node or processes started), each of a class drawn from :data:`TPU_MIX` -- maintenance events
  with automatic recovery (that page: most events; REPAIRING for the emulator's ``tpu_repair_seconds``) and without
  (TERMINATED), preemptions of the spot node, a crash of the workload (exit 139) and a hang (SIGSTOP: no platform
  signal at all). The same sequence strikes every way. A maintenance event or a preemption reaches the VM as a
  SIGTERM ``--notice`` seconds (default 30) before its processes are killed: a Spot VM's ACPI G2 Soft Off comes 30 s
  before the G3 Mechanical Off (Compute Engine, "Preemptible VM instances", preemption process,
  https://cloud.google.com/compute/docs/instances/preemptible#preemption-process). Cloud TPU documents no notice
  length of its own for either, so every such event gets those 30 s -- an assumption; a crash or a hang has none;
* capacity outages of the primary zone us-central1-b (CreateNode fails RESOURCE_EXHAUSTED): one at launch of
  ``--launch-outage`` seconds, then exponential periods of mean ``--capacity-up`` / ``--capacity-down``; the
  fallback zone europe-west4-a has capacity throughout;
* a checkpoint cost C every Young/Daly interval for every way (ours: until its operator hands another); the
  restart cost R of the ceilings = the workload's measured start-up and restore + the least platform time per
  class, weighted by the mix (a new node, ``tpu_create_seconds``, after a preemption, a termination or a
  maintenance event -- re-creating beats a repair -- and nothing after a crash or a hang, restarted in place once
  seen).

Goodput = useful work / wall time from the first create to success; a way still unfinished a quarter of the work
after ours finished (or at ``--horizon`` x the work) is stopped and printed as ``< x``. Machine time: host-seconds
of every node of the way while READY or REPAIRING (what a spot node is billed for; a preempted or terminated one
is not). Prints Markdown tables like ``goodput.py`` (whose trace, tables and plot this shares).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "ERROR")  # before Airflow is imported: quiet runs
sys.path.insert(0, str(Path(__file__).resolve().parent))

from goodput import (
    EVENT_TOPIC,
    STEP_SECONDS,
    WORKER_HANG_SECONDS,
    WORKLOAD,
    Outcome,
    Plan,
    budgets,
    checkpoint_steps_reached,
    execute_ours,
    kept_on_notice,
    measure_restore,
    print_budget,
    print_verdict,
    race,
    report_ways,
    run_seeds,
    scaled_policy,
    trace_parser,
)

from airflow_provider_resilient.backends import tpu as tpu_backend
from airflow_provider_resilient.goodput import (
    goodput_ceiling,
    trace_budget,
    trace_ceiling,
)
from airflow_provider_resilient.hooks import tpu as tpu_hooks
from airflow_provider_resilient.policy import RetryPolicy
from airflow_provider_resilient.policy import repair as repair_rules
from airflow_provider_resilient.specs.common import LABEL_SPARE
from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig

PROJECT = "bench-project"
#: Two zones that both offer the slice (Cloud TPU, "TPU regions and zones": v2-8 and v3-8 in us-central1-b and
#: europe-west4-a; v4 only in us-central2-b, so a v4 run has no zone to fall back to).
PRIMARY, FALLBACK = "us-central1-b", "europe-west4-a"
RUNTIME = "tpu-ubuntu2204-base"
#: The failure classes of a running TPU node and their shares (that page's events; crash and hang of the workload).
TPU_MIX = {"maintenance_event": 0.4, "maintenance_terminate": 0.1, "preemption": 0.3, "crash": 0.1, "hang": 0.1}
TPU_FAULT = {"maintenance_event": {"kind": "maintenance", "recover": True},
             "maintenance_terminate": {"kind": "maintenance", "recover": False},
             "preemption": {"kind": "preemption"}, "crash": {"kind": "crash", "exit_code": 139},
             "hang": {"kind": "hang"}}
#: ``--quick`` (CI: the benchmark runs and prints its tables, no figure is checked): the shortest run in which every
#: way meets a failure of the trace and ours finishes -- seed 352's trace (its first failure, a crash of the workload,
#: strikes 0.15 x MTBF into a run; the next 3.64 x MTBF later), a 2 min job, a launch outage that fails the first
#: creates (a create takes 90 s), and a horizon long enough for ours to finish on a loaded machine.
QUICK = {"seed": 352, "work": 120.0, "mtbf": 400.0, "checkpoint_cost": 10.0, "launch_outage": 150.0, "horizon": 8.0}
#: Ours' hang_timeout in heartbeats (poll intervals) without a new step: the step of the last checkpoint save
#: (C = 30 s) and a reboot's start-up (about 60 s) fit well inside.
HANG_HEARTBEATS = 5
#: Classes after which the best way needs a new node (the others: the workload restarted in place).
NEW_NODE = {"maintenance_event", "maintenance_terminate", "preemption"}
BILLED = {"READY", "REPAIRING"}
#: The hook's long-running-operation polls in real seconds (first, most), before :func:`scale_operation_polls`.
OPERATION_POLLS = (tpu_hooks.OPERATION_POLL_SECONDS, tpu_hooks.OPERATION_POLL_MAX_SECONDS)
SPARE_POLL = tpu_backend.SPARE_POLL_SECONDS
NOTICE_SAVE = repair_rules.NOTICE_SAVE_SECONDS
#: The exit code guest attribute a baseline's startup script writes (namespace/key).
EXIT_ATTRIBUTE = "bench/exit"
REPORT_EXIT = ("python3 -c 'import os, sys, urllib.request as u; u.urlopen(u.Request(\"http://\" + "
               "os.environ[\"GCE_METADATA_HOST\"] + \"/computeMetadata/v1/instance/guest-attributes/"
               f"{EXIT_ATTRIBUTE}\", data=sys.argv[1].encode(), method=\"PUT\", "
               "headers={\"Metadata-Flavor\": \"Google\"}))' \"$code\"")


def notice_faults(notice: float) -> dict[str, dict[str, Any]]:
    """:data:`TPU_FAULT` with ``notice`` real seconds between the SIGTERM of a maintenance event or a preemption and
    the kill (the emulator's ``grace_seconds``)."""
    return {kind: ({**fault, "grace_seconds": notice} if fault["kind"] in ("maintenance", "preemption") else fault)
            for kind, fault in TPU_FAULT.items()}


def notice_saves(emulator: Emulator, every: int, step_seconds: float) -> tuple[int, float]:
    """Ours' saves on a notice and the progress they kept (:func:`goodput.kept_on_notice`), from worker 0's log on
    every node of ours."""
    logs = [log.read_text(errors="replace")
            for log in sorted((emulator.work_dir / "tpu").glob("bench-ours-a*/worker-0.log"))]
    return kept_on_notice(logs, every, step_seconds)


def handed_intervals(emulator: Emulator, scale: float) -> list[tuple[int, float]]:
    """``(attempt, platform seconds)`` of each checkpoint interval ours' operator handed an attempt's workload
    (worker 0's ``checkpoint interval X s (handed)`` line, real seconds, over ``scale``), in attempt order."""
    handed = []
    for log in (emulator.work_dir / "tpu").glob("bench-ours-a*/worker-0.log"):
        found = re.search(r"^checkpoint interval ([0-9.e+-]+) s \(handed\)", log.read_text(errors="replace"),
                          re.MULTILINE)
        if found:
            handed.append((int(log.parent.name.rsplit("-a", 1)[1]), float(found.group(1)) / scale))
    return sorted(handed)


def baseline_script(way: str, args: list[str], loop: bool) -> str:
    """The startup script of a baseline's node: the training command once (``loop=False``) or until it succeeds
    (the ssh loop's ``while ! ...; do sleep 1; done``), then its exit code as guest attribute ``bench/exit``."""
    train = " ".join([f"AIP_CHECKPOINT_DIR=gs://bench/tpu-{way}", "python3", WORKLOAD, *args, "--resume", "scan"])
    body = f"while ! {train}; do sleep 1; done\ncode=0" if loop else f"{train}\ncode=$?"
    return f"#!/bin/bash\n{body}\n{REPORT_EXIT}\n"


def run_ours(outcome: Outcome, accelerator: str, args: list[str], policy: RetryPolicy, poll: float,
             hang_timeout: float, stop: threading.Event, on_notice: bool = True, spare: str = "never",
             spare_risk: float = 3600.0, event_topic: str | None = None,
             worker_hang_timeout: float | None = None) -> None:
    """Our operator, in this thread; stopped at the horizon as a user would: ``on_kill`` deletes the node (and its
    spare). ``spare``, ``spare_risk``: its ``spare_node`` and ``spare_risk_seconds`` (already scaled);
    ``event_topic``: it also listens for Cloud TPU's system events there (docs/detection.md);
    ``worker_hang_timeout``: the worker runner's liveness watchdog, real seconds (None: off)."""
    from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator

    command = " ".join(['AIP_CHECKPOINT_DIR="$RESILIENT_CHECKPOINT_DIR"', "python3", WORKLOAD, *args,
                        "--resume", "scan"])
    op = ResilientTPUWorkloadOperator(
        task_id="ours", project_id=PROJECT, zone=PRIMARY, accelerator_type=accelerator, runtime_version=RUNTIME,
        tpu_node_id="bench-ours", spot=True, command=command, checkpoint_dir="gs://bench/tpu-ours",
        checkpoint_marker="COMMITTED", labels={"bench-way": "ours"}, fallbacks=[{"zone": FALLBACK}],
        resilience_policy=policy, poll_interval=poll, heartbeat_seconds=poll, hang_timeout=hang_timeout,
        expect_steps=True, startup_timeout=max(60.0, 40 * poll), preflight=False, deferrable=False,
        checkpoint_on_notice=on_notice, spare_node=spare, spare_risk_seconds=spare_risk, event_topic=event_topic,
        worker_hang_timeout=worker_hang_timeout)
    execute_ours(outcome, op, stop, "tpu-goodput", (PRIMARY, FALLBACK))


def ours_policy(a: argparse.Namespace) -> RetryPolicy:
    """Ours' retry policy: the default, or with ``--maintenance-wait`` seconds as the ``maintenance_wait`` budget
    (how long a maintenance event with recovery is waited out before the node is re-created; 0: re-created after
    one look, when a new node comes up sooner than a repair), and with ``--no-weigh-repairs`` that budget alone
    deciding (``RetryPolicy(weigh_repairs=False)``; default: a repair is weighed against a new node, as the run
    measured them)."""
    if a.maintenance_wait is None:
        return RetryPolicy(weigh_repairs=a.weigh_repairs)
    wait = RetryPolicy().effective_budgets["maintenance_wait"]
    return RetryPolicy(budgets={"maintenance_wait": replace(wait, max_seconds=a.maintenance_wait)},
                       weigh_repairs=a.weigh_repairs)


def run_baseline(outcome: Outcome, way: str, accelerator: str, script: str, poll: float, create_retry: float,
                 recreate: bool, stop: threading.Event) -> None:
    """A baseline's loop: create the node (again after ``create_retry`` seconds when the zone has no capacity),
    watch it every ``poll`` seconds until its workload reports exit 0; ``recreate``: a TERMINATED or PREEMPTED
    node or a non-zero exit is deleted and created again (the recreate loop), else waited on for ever (ssh)."""
    from airflow_provider_resilient.testing.emulator_clients import tpu_client

    client = tpu_client()
    parent = f"projects/{PROJECT}/locations/{PRIMARY}"
    node = {"accelerator_type": accelerator, "runtime_version": RUNTIME, "labels": {"bench-way": way},
            "metadata": {"startup-script": script}, "scheduling_config": {"spot": True}}
    name = ""
    try:
        for tried in itertools.count(1):
            if stop.is_set():
                return
            operation = client.create_node(parent=parent, node_id=f"bench-{way}-{tried}", node=node)
            while not operation.done():
                if stop.wait(poll):
                    return
            if operation.exception() is not None:  # no capacity: the script tries again later
                if stop.wait(create_retry):
                    return
                continue
            outcome.submits += 1
            outcome.regions.add(PRIMARY)
            name = f"{parent}/nodes/bench-{way}-{tried}"
            while not stop.wait(poll):
                state = client.get_node(name=name).state.name
                if state in ("TERMINATED", "PREEMPTED"):
                    if recreate:
                        break
                    continue  # the ssh loop: "ssh: connect to host ... failed", again and again
                if state != "READY":
                    continue
                attributes = client.get_guest_attributes(request={"name": name, "query_path": EXIT_ATTRIBUTE})
                codes = {v.query_value.items[0].value if v.query_value.items else "" for v in
                         attributes.guest_attributes}
                if "0" in codes:
                    outcome.finished = True
                    return
                if codes - {""} and recreate:
                    break
            else:
                return
            client.delete_node(name=name)  # not waited for: the next create goes on at once
            name = ""
    finally:
        if name:
            client.delete_node(name=name)


def sample_machine_time(emulator: Emulator, totals: dict[str, float], scale: float, stop: threading.Event,
                        every: float = 0.1) -> None:
    """Add host-seconds (platform seconds) of every billed node (:data:`BILLED` states) to its way's total, and those
    of a spare node still waiting for its attempt (label ``resilient-spare``) to ``<way> spare`` as well."""
    last = time.monotonic()
    while not stop.wait(every):
        now = time.monotonic()
        with emulator.tpu.lock:
            for run in emulator.tpu.nodes.values():
                way = run.node.labels.get("bench-way")
                if way and run.node.state.name in BILLED:
                    billed = len(run.workers) * (now - last) / scale
                    totals[way] = totals.get(way, 0.0) + billed
                    if run.node.labels.get(LABEL_SPARE) == "true":
                        totals[f"{way} spare"] = totals.get(f"{way} spare", 0.0) + billed
        last = now


def scale_operation_polls(scale: float) -> None:
    """Ours' waits that are the platform's, not the policy's, scaled to the emulator's time. Ours' hook polls a
    create's or a deletion's long-running operation every 1 s growing to 5 s *real* seconds
    (``hooks.tpu.OPERATION_POLL_SECONDS`` ... ``OPERATION_POLL_MAX_SECONDS``): on the emulator's compressed time
    that is 50 s to 250 s of the platform's time at scale 0.02, which would charge ours a create's READY up to
    minutes late that a real run sees within 5 s. Scaled like every other wait of the benchmark (the
    baselines poll every ``--poll-interval`` x the scale)."""
    tpu_hooks.OPERATION_POLL_SECONDS = OPERATION_POLLS[0] * scale
    tpu_hooks.OPERATION_POLL_MAX_SECONDS = OPERATION_POLLS[1] * scale
    tpu_backend.SPARE_POLL_SECONDS = SPARE_POLL * scale  # a spare's startup script asks every 2 s of the platform
    # A READY spare replaces a node in repair once the workload had 30 s of the platform to save on the notice.
    repair_rules.NOTICE_SAVE_SECONDS = NOTICE_SAVE * scale


def one_seed(a: argparse.Namespace) -> dict[str, Any]:
    """One seeded trace, every way side by side; prints its tables and returns its figures."""
    s = a.time_scale
    scale_operation_polls(s)
    plan = Plan.of(a, TPU_MIX)
    trace, steps, interval, every, horizon, args = (plan.trace, plan.steps, plan.interval, plan.every, plan.horizon,
                                                    [*plan.args, "--on-request"])
    ours_args = [*args, "--handed-interval"] if a.handed_interval else args
    step_seconds = STEP_SECONDS
    config = EmulatorConfig(time_scale=s, seed=a.seed)
    with Emulator(config=config) as emulator:
        os.environ.update(emulator.env())
        emulator.ensure_bucket("bench")
        restore = measure_restore(emulator, s)
        platform = sum(share * (config.latencies.tpu_create_seconds if kind in NEW_NODE else 0.0)
                       for kind, share in TPU_MIX.items())
        restart = platform + restore
        ceiling = goodput_ceiling(a.checkpoint_cost, restart, a.mtbf)
        gaps = [d for d, _ in trace.failures]
        struck_ceiling, struck_interval = trace_ceiling(a.work, gaps, a.checkpoint_cost, restart)
        print(f"## TPU goodput: seed {a.seed}, time scale {s:g}\n")
        print("| trace | value |\n| --- | --- |")
        for name, value in [
            ("useful work W", f"{a.work:.0f} s ({steps} steps of {step_seconds:g} s) on a spot {a.accelerator_type}"),
            ("MTBF of the running node", f"{a.mtbf:.0f} s, classes "
                                         f"{', '.join(f'{k} {v:.0%}' for k, v in TPU_MIX.items())}"),
            ("checkpoint cost C", f"{a.checkpoint_cost:.0f} s, every {every} steps ({every * step_seconds:.0f} s; "
                                  f"Young/Daly {interval:.0f} s)"),
            ("restart cost R", f"{restart:.0f} s (a new node {config.latencies.tpu_create_seconds:.0f} s after "
                               f"{sum(TPU_MIX[k] for k in NEW_NODE):.0%} of failures + workload start-up and "
                               f"restore {restore:.0f} s); a repair takes {config.latencies.tpu_repair_seconds:.0f} s"),
            ("capacity outages in " + PRIMARY,
             ", ".join(f"{lo:.0f}-{hi:.0f}" for lo, hi in trace.outages if lo < horizon) or "none"),
            ("notice", f"{a.notice:g} s from a maintenance event's or a preemption's SIGTERM to the kill; ours "
                       + ("saves on it" if a.notice_checkpoint else "does not save on it (--no-notice-checkpoint)")),
            ("poll interval", f"{a.poll_interval:g} s (every way)"),
            ("ours detects", "by poll and by event (--events: Pub/Sub fed by a Cloud Logging sink)" if a.events
             else "by poll"),
            ("ours' worker watchdog", f"the runner aborts a command {WORKER_HANG_SECONDS:.0f} s without a step line "
                                      "and restarts it in place (worker_hang_timeout)" if a.worker_watchdog
             else "off (--no-worker-watchdog)"),
            ("ours' spare node", a.spare + (f" (spare_risk_seconds {a.spare_risk:g})" if a.spare == "at_risk" else "")),
            ("ours' maintenance_wait", ("the policy's default (900 s)" if a.maintenance_wait is None
                                        else f"{a.maintenance_wait:g} s")
             + ("; a repair weighed against a new node" if a.weigh_repairs else "; the budget alone decides")),
            ("Young/Daly ceiling", f"{ceiling:.3f} = 1 - sqrt(2C/MTBF) - R/MTBF"),
            ("ceiling of the failures that struck", f"{struck_ceiling:.3f} (best fixed interval {struck_interval:.0f} "
                                                   "s; restart R; no capacity wait; a hang seen at once)"),
        ]:
            print(f"| {name} | {value} |")
        print(flush=True)

        from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator  # noqa: F401 (warm)
        from airflow_provider_resilient.testing.emulator_clients import tpu_client

        tpu_client().list_nodes(parent=f"projects/{PROJECT}/locations/{PRIMARY}")
        emulator.reset()  # the outage windows count from here
        emulator.ensure_bucket("bench")
        if a.events:
            from airflow_provider_resilient.testing.emulator_clients import route_failure_events

            route_failure_events(EVENT_TOPIC, emulator=emulator.address)
        for lo, hi in trace.outages:
            emulator.add_fault({"kind": "stockout", "times": None, "match": {"location": PRIMARY},
                                "active_seconds": [lo * s, hi * s]})
        stop_all = threading.Event()
        poll = a.poll_interval * s
        # The workload logs every step and the worker runner reports it with each heartbeat (every poll), so
        # ours can call a hang after a few heartbeats without a new step -- not after checkpoint periods.
        hang_timeout = HANG_HEARTBEATS * poll
        ways: dict[str, Callable[[Outcome], None]] = {
            "ours": lambda o: run_ours(o, a.accelerator_type, ours_args, scaled_policy(ours_policy(a), s), poll,
                                       hang_timeout, stop_all, a.notice_checkpoint, a.spare, a.spare_risk * s,
                                       EVENT_TOPIC if a.events else None,
                                       WORKER_HANG_SECONDS * s if a.worker_watchdog else None),
            "recreate loop": lambda o: run_baseline(o, "recreate", a.accelerator_type,
                                                    baseline_script("recreate", args, loop=False), poll,
                                                    a.create_retry * s, True, stop_all),
            "ssh loop": lambda o: run_baseline(o, "ssh", a.accelerator_type, baseline_script("ssh", args, loop=True),
                                               poll, a.create_retry * s, False, stop_all),
        }
        label = {"ours": "ours", "recreate loop": "recreate", "ssh loop": "ssh"}
        machine: dict[str, float] = {}
        sampling = threading.Event()
        sampler = threading.Thread(target=sample_machine_time, args=(emulator, machine, s, sampling), daemon=True)
        sampler.start()
        outcomes, struck = race(emulator, ways, label, trace, s, a.work, horizon, stop_all, notice_faults(a.notice * s))
        sampling.set()
        sampler.join(timeout=30)
        result: dict[str, Any] = {"seed": a.seed, "ceiling": ceiling, "trace_ceiling": struck_ceiling,
                                  "ways": report_ways(outcomes, struck, a.work, ceiling, s,
                                                      lambda name: machine.get(label[name], 0.0),
                                                      ("nodes created", "zones", "host-s"),
                                                      lambda name: checkpoint_steps_reached(
                                                          emulator, f"gs://bench/tpu-{label[name]}"))}
        print("\nfailures struck, in order (the same sequence for every way; a way stopped early sees fewer):\n")
        for name in outcomes:
            print(f"* {name}: {', '.join(struck[name]) or 'none'}")
        result["budget"] = budgets(outcomes["ours"], trace_budget(a.work, gaps, a.checkpoint_cost, restart,
                                                                  struck_interval),
                                   platform / restart if restart > 0 else 0.0,
                                   "recovery (new node, repair, capacity waits)", s)
        saves, kept = notice_saves(emulator, every, step_seconds)
        result["notice_saves"], result["notice_kept_seconds"] = saves, kept
        result["handed_intervals"] = handed_intervals(emulator, s)
        result["spare_host_seconds"] = machine.get("ours spare", 0.0)
        if a.spare != "never":
            print(f"Spare nodes: ours' spares waited {result['spare_host_seconds']:.0f} host-s of its "
                  f"{machine.get('ours', 0.0):.0f} (READY, before an attempt took them or they were released)")
        if a.calls is not None:  # the emulator's record of every API call, for a timeline of where time went
            a.calls.mkdir(parents=True, exist_ok=True)
            (a.calls / f"calls-{a.seed}.json").write_text(json.dumps([c.to_dict() for c in emulator.calls.list()]))
        print_budget(result["budget"], f"\nWhere the time went, seed {a.seed} (platform seconds; the ceiling's "
                                       f"budget at its interval {struck_interval:.0f} s):\n")
        print(f"\nCheckpoint on notice: ours saved on {saves} notice(s), keeping {kept:.0f} s of training past the "
              "periodic checkpoints (time that is not in wasted progress above)")
        handed = ", ".join(f"attempt {n} {v:.0f} s" for n, v in result["handed_intervals"]) or "none"
        print(f"Checkpoint interval handed to ours' attempts (platform s; the trace's Young/Daly {interval:.0f} s "
              f"before): {handed}")
        print_verdict(result)
    return result


def main() -> int:
    parser = trace_parser(__doc__, "zone")
    parser.set_defaults(work=3600.0)  # a 1 h job: 20 seeds in about an hour
    parser.add_argument("--create-retry", type=float, default=60.0, help="a baseline's wait after a stockout, s")
    parser.add_argument("--maintenance-wait", type=float, help="ours' maintenance_wait budget, platform seconds "
                                                                 "(default: the policy's 900 s; 0: re-create at once)")
    parser.add_argument("--no-weigh-repairs", dest="weigh_repairs", action="store_false",
                        help="ours waits out a repair as the maintenance_wait budget allows, without weighing it "
                             "against a new node (RetryPolicy(weigh_repairs=False))")
    parser.add_argument("--notice", type=float, default=30.0, help="seconds from a maintenance event's or a "
                                                                     "preemption's SIGTERM to the kill")
    parser.add_argument("--no-worker-watchdog", dest="worker_watchdog", action="store_false",
                        help="ours without the worker runner's liveness watchdog (worker_hang_timeout)")
    parser.add_argument("--no-notice-checkpoint", dest="notice_checkpoint", action="store_false",
                        help="ours does not save on the notice (checkpoint_on_notice=False)")
    parser.add_argument("--fixed-interval", dest="handed_interval", action="store_false",
                        help="ours' workload keeps the Young/Daly interval of the trace, as the other ways, instead of "
                             "the interval the operator hands it (--handed-interval)")
    parser.add_argument("--spare", choices=("never", "at_risk", "always"), default="at_risk",
                        help="ours' spare_node (default at_risk): the next attempt's node made before it is needed "
                             "(its machine time counts in ours' host-s; the trace's failures strike the node an "
                             "attempt runs on, not a spare)")
    parser.add_argument("--spare-risk", type=float, default=600.0,
                        help="ours' spare_risk_seconds with --spare at_risk, platform seconds (default 600: a third "
                             "of the trace's MTBF of 1800 s; see RESULTS.md for what it saves and costs)")
    parser.add_argument("--calls", type=Path, help="write each seed's emulator API call record (method, resource, "
                                                  "code, epoch time) to DIR/calls-SEED.json")
    parser.add_argument("--accelerator-type", default="v3-8", help="the slice, offered in both zones: v2-8 or v3-8 "
                                                                   "(one worker VM, which runs the workload)")
    parser.add_argument("--quick", action="store_true", help="seed 352's trace, a 2 min job (CI; see QUICK)")
    parser.add_argument("--events", action="store_true", help="ours also detects by event: event_topic, a Pub/Sub "
                                                              "topic the emulator's Cloud Logging sink feeds")
    a = parser.parse_args()
    if a.quick:
        for name, value in QUICK.items():
            setattr(a, name, value)
    return run_seeds(a, one_seed, "host-s", "one TPU training workload")


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
