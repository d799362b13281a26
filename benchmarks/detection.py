"""Fault-to-decision latency (detection) and decision-to-running time (recovery), per failure class and
``poll_interval``, for ResilientCustomJobOperator against the emulator.

    python benchmarks/detection.py [--runs 5] [--poll 1 2 5] [--quick]
    python benchmarks/detection.py --events [--runs 20] [--poll 5 30] [--quick]

Each run submits a job whose first attempt a fault ends at a seeded random moment (platform retries off,
so the figure is ours, not the platform's), lets the operator decide, and reads its attempt history:
detection = decision time - the job's end time reported by the platform; recovery = the next attempt's
submit time - the decision (backoff, here 1 s, plus the create call). The emulator runs with
``time_scale`` 0.01 (its ~1 min error delay becomes 0.6 s, before the end time is set). Prints a
Markdown table of p50 / p95 in seconds. ``--quick``: see :data:`QUICK`.

``--events``: detection of a deferred task's trigger (``CustomJobTrigger``, ``TPUNodeTrigger``) by poll alone and
with ``event_topic`` (docs/detection.md): the emulator routes the platform's failure entries through a Cloud Logging
sink to a Pub/Sub topic, which the trigger's feed pulls with the real google-cloud-pubsub client. Two failures: a
Vertex AI replica that crashes (exit 139; detection = the trigger's event - the job's ``end_time``) and a Cloud TPU
node preempted (detection = the trigger's event - the ``tpu.nodes.terminate`` audit entry's timestamp). Each strikes
at a seeded random moment within one poll period, the same for both ways. Prints p50 / p95 in seconds, per way and
``poll_interval``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import random
import statistics
import sys
import time
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
#: ``--quick`` (CI: the benchmark runs and prints its table, no figure is checked): one run per class, two classes (a
#: running fault and a provisioning one), poll 0.5 s; the fault strikes within 0.6 s of the job's start (still a span
#: wider than a poll), the job's workload runs 1 s, the backoff is 0.2 s and the platform's latencies half as long.
QUICK = {"runs": 1, "poll": [0.5], "classes": ["transient_crash", "capacity_stockout"], "strike_within": 0.6,
         "job_seconds": 1.0, "backoff": 0.2, "time_scale": 0.005}


def policy(backoff: float) -> RetryPolicy:
    """Every retry after ``backoff`` seconds (no jitter), stockouts 3 times."""
    fixed = Backoff(initial_seconds=backoff, multiplier=1.0, max_seconds=backoff, jitter=0.0)
    return RetryPolicy(backoff=fixed, budgets={"stockout": Budget(max_retries=3, backoff=fixed)})


def one_run(emulator: Emulator, fault: dict[str, Any], poll: float, run: int, a: argparse.Namespace) -> tuple[float,
                                                                                                              float]:
    emulator.reset()
    fault = dict(fault, match={"nth": 1})
    if "after_seconds" in fault:  # strike at a seeded random moment, so failures fall anywhere between polls
        fault["after_seconds"] = random.Random(f"{fault['kind']}:{poll}:{run}").uniform(0.1, a.strike_within)
    emulator.add_fault(fault)
    op = ResilientCustomJobOperator(
        task_id=f"bench{run}", project_id="bench-project", region="us-central1", display_name="bench",
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "x", "command": [
                                "python", "-c", f"import time; time.sleep({a.job_seconds:g})"]}}],
        base_output_dir="gs://bench/run", disable_retries=True, deferrable=False, poll_interval=poll,
        resilience_policy=policy(a.backoff))
    result = op.execute(standalone_context(f"bench-{run}"))
    first, second = result["attempts"][0], result["attempts"][1]
    incident = first["incidents"][0]
    detection = incident["decision"]["decided_at"] - incident["failure"]["timestamp"]
    recovery = second["started_at"] - incident["decision"]["decided_at"]
    return detection, recovery


TOPIC = "projects/bench-project/topics/resilient-events"
#: ``--events --quick`` (CI: the tables print, no figure is checked): one run of each failure and way, poll 1 s.
EVENTS_QUICK = {"runs": 1, "poll": [1.0]}


def route_events(emulator: Emulator) -> None:
    """The topic and the sink of docs/detection.md, on the emulator, with the real clients."""
    from airflow_provider_resilient.testing.emulator_clients import route_failure_events

    route_failure_events(TOPIC, emulator=emulator.address)


async def fired_at(trigger: Any) -> tuple[dict[str, Any], float]:
    """The trigger's first event and when it came (seconds since the epoch)."""
    async for event in trigger.run():
        return event.payload, time.time()
    raise AssertionError("the trigger ended without an event")


def strike_at(kind: str, poll: float, run: int) -> float:
    """Seconds into the job (node) when the failure strikes: seeded, anywhere in one poll period after 0.5 s, so
    that a polling watch finds it anywhere from at once to a whole ``poll`` later."""
    return random.Random(f"events:{kind}:{poll}:{run}").uniform(0.5, 0.5 + poll)


def vertex_event_run(emulator: Emulator, poll: float, run: int, events: bool, a: argparse.Namespace) -> float:
    """A replica crash seen by ``CustomJobTrigger``: the event's time - the job's end time (seconds)."""
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client
    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

    emulator.reset()
    route_events(emulator)
    emulator.add_fault({"kind": "crash", "exit_code": 139, "match": {"nth": 1},
                        "after_seconds": strike_at("crash", poll, run)})
    client = vertex_job_client("us-central1", emulator=emulator.address)
    job = client.create_custom_job(parent="projects/bench-project/locations/us-central1", custom_job={
        "display_name": f"events-{run}", "job_spec": {"scheduling": {"disable_retries": True}, "worker_pool_specs": [{
            "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": "x", "command": ["python", "-c", "import time; time.sleep(600)"]}}]}})
    trigger = CustomJobTrigger(job.name, poll, gcp_conn_id=None, emulator=emulator.address,
                               event_topic=TOPIC if events else None)
    payload, at = asyncio.run(fired_at(trigger))
    assert payload["status"] == "terminal", payload
    ended = client.get_custom_job(name=job.name).end_time.timestamp()
    client.transport.close()
    return at - ended


def tpu_event_run(emulator: Emulator, poll: float, run: int, events: bool, a: argparse.Namespace) -> float:
    """A preemption seen by ``TPUNodeTrigger``: the event's time - the terminate audit entry's time (seconds)."""
    from airflow_provider_resilient.testing.emulator_clients import tpu_client
    from airflow_provider_resilient.triggers.tpu import TPUNodeTrigger

    emulator.reset()
    route_events(emulator)
    client = tpu_client(emulator=emulator.address)
    operation = client.create_node(parent="projects/bench-project/locations/us-central2-b", node_id=f"n{run}", node={
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "sleep 600"}})
    node = operation.result(timeout=60)
    emulator.add_fault({"kind": "preemption", "grace_seconds": 0.0,
                        "after_seconds": strike_at("preemption", poll, run)})
    trigger = TPUNodeTrigger(node.name, look_again_at=time.time() + 3600, poll_interval=poll, gcp_conn_id=None,
                             emulator=emulator.address, event_topic=TOPIC if events else None)
    payload, at = asyncio.run(fired_at(trigger))
    assert payload["status"] == "changed", payload
    entries, _ = emulator.logging.list_log_entries(["projects/bench-project"],
                                                   'protoPayload.methodName="tpu.nodes.terminate"')
    client.transport.close()
    return at - entries[0].timestamp.timestamp()


def events_main(a: argparse.Namespace) -> int:
    print("| failure | poll_interval s | polling only p50 s | p95 s | with event_topic p50 s | p95 s |")
    print("| --- | --- | --- | --- | --- | --- |")
    with Emulator(config=EmulatorConfig(time_scale=a.time_scale)) as emulator:
        os.environ.update(emulator.env())
        for name, one in (("Vertex AI replica crash", vertex_event_run), ("Cloud TPU preemption", tpu_event_run)):
            for poll in a.poll:
                ways = [[one(emulator, poll, n, events, a) for n in range(a.runs)] for events in (False, True)]
                cells = " | ".join(f"{statistics.median(w):.2f} | {percentile(w, 0.95):.2f}" for w in ways)
                print(f"| {name} | {poll:g} | {cells} |", flush=True)
    return 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--poll", type=float, nargs="+", default=[1.0, 2.0, 5.0])
    parser.add_argument("--classes", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--strike-within", type=float, default=3.0, help="a running fault strikes at a seeded moment "
                                                                         "0.1 s to this many seconds into the job")
    parser.add_argument("--job-seconds", type=float, default=4.0, help="the job's workload, seconds")
    parser.add_argument("--backoff", type=float, default=1.0, help="seconds before the next attempt")
    parser.add_argument("--time-scale", type=float, default=0.01, help="the emulator's: real seconds per platform "
                                                                         "second")
    parser.add_argument("--quick", action="store_true", help="1 short run, poll 0.5 s, 2 classes (CI; see QUICK)")
    parser.add_argument("--events", action="store_true", help="a deferred trigger's detection by poll alone and with "
                                                              "event_topic (Pub/Sub fed by a Cloud Logging sink)")
    args = parser.parse_args()
    if args.events:
        logging.disable(logging.WARNING)
        if args.quick:
            for name, value in EVENTS_QUICK.items():
                setattr(args, name, value)
        return events_main(args)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    logging.disable(logging.WARNING)  # the operator's own log lines would drown the table
    print("| failure class | poll_interval s | detection p50 s | detection p95 s | recovery p50 s | recovery p95 s |")
    print("| --- | --- | --- | --- | --- | --- |")
    with Emulator(config=EmulatorConfig(time_scale=args.time_scale)) as emulator:
        os.environ.update(emulator.env())
        for name in args.classes:
            for poll in args.poll:
                figures = [one_run(emulator, SCENARIOS[name], poll, n, args) for n in range(args.runs)]
                det = [d for d, _ in figures]
                rec = [r for _, r in figures]
                print(f"| {name} | {poll:g} | {statistics.median(det):.2f} | {percentile(det, 0.95):.2f} | "
                      f"{statistics.median(rec):.2f} | {percentile(rec, 0.95):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
