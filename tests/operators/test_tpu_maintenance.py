"""Upcoming maintenance on the emulator (issue 14, part 1): Cloud TPU announces a window
(``Node.upcoming_maintenance``, v2alpha1); before it the operator asks the workload for a checkpoint through
the node's metadata and the worker runner, then rides the event out or moves the run to a fresh node.

On stepped time (``tests/tpu_time.py``): the notice, the lead, the window and the repair are the platform's
seconds; the platform's time holds still while a checkpoint requested of a running workload is not yet
acknowledged, so the save happens before the window whatever the machine's speed."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_provider_resilient.compat import AirflowFailException
from airflow_provider_resilient.hooks.tpu import ResilientTPUHook
from airflow_provider_resilient.worker import CHECKPOINT_REQUEST_ATTRIBUTE, KEY_CHECKPOINT_ACK

from ..tpu_time import STEPPED, PlatformTime
from .test_tpu_operator import (
    A1,
    A2,
    PATIENT,
    ZONE,
    context,
    created,
    decisions,
    deleted,
    nodes_left,
    operator,
    run_deferred,
    train,
)

pytestmark = STEPPED
#: Platform seconds: the window is announced 10 minutes ahead; the checkpoint is asked for 5 minutes before it.
NOTICE, LEAD = 600.0, 300.0


@pytest.fixture
def platform_time(resilient_emulator: Any) -> PlatformTime:
    """The emulator's manual clock and the operator's (and trigger's) clock and sleep, as one time; it holds
    still while a running workload owes the acknowledgement of a checkpoint request (:func:`unacknowledged`)."""
    time = PlatformTime(resilient_emulator)
    time.hold_while(lambda: unacknowledged(resilient_emulator))
    return time


def unacknowledged(emulator: Any) -> bool:
    """Whether a READY node asks its workers for a checkpoint that a worker still running has not acknowledged."""
    with emulator.tpu.lock:
        runs = [r for r in emulator.tpu.nodes.values() if r.phase == "ready"]
        for run in runs:
            token = dict(run.node.metadata).get(CHECKPOINT_REQUEST_ATTRIBUTE)
            if not token:
                continue
            for worker in run.workers:
                key = f"resilient/{KEY_CHECKPOINT_ACK}"
                if worker.alive() and worker.metadata.guest(key).get(key, "") != token:
                    return True
    return False


def short_of_step(emulator: Any, node_id: str, step: int) -> bool:
    """Whether node ``node_id`` is READY with its worker running and not yet past ``step - 1``."""
    with emulator.tpu.lock:
        run = emulator.tpu.nodes.get(f"{ZONE}/nodes/{node_id}")
        if run is None or run.phase != "ready" or not run.workers[0].alive():
            return False
        reported = run.workers[0].metadata.guest("resilient/step").get("resilient/step", "")
        return not (reported.isdigit() and int(reported) >= step)


def train_slowly(epochs: int = 20, seconds: float = 0.05) -> str:
    """A 20-epoch run (0.05 s each) with no periodic checkpoint before its end: only a checkpoint on request
    saves progress before the window."""
    return train(epochs).replace("--checkpoint-every 3 --epoch-seconds 0.05",
                                 f"--checkpoint-every 1000 --epoch-seconds {seconds}")


def worker_log(emulator: Any, node_id: str) -> str:
    return (emulator.work_dir / "tpu" / node_id / "worker-0.log").read_text()


def boots(log: str) -> list[str]:
    """The worker's log per boot of its VM."""
    return re.split(r"===== worker 0 boot \d+ =====\n", log)[1:]


def announce(emulator: Any, **fields: Any) -> None:
    emulator.add_fault({"kind": "scheduled_maintenance", "at_step": 3, "notice_seconds": NOTICE,
                        "window_seconds": 60.0, **fields})


def test_ride_out_checkpoints_before_the_window_and_resumes_from_that_checkpoint(resilient_emulator, platform_time):
    resilient_emulator.storage.create_bucket("tpu-ckpt")
    announce(resilient_emulator)
    ctx = context()
    # No save on the window's SIGTERM (checkpoint on notice, tested on its own): this is the request before it.
    op = operator(train_slowly(), maintenance_lead_seconds=LEAD, poll_interval=100.0, checkpoint_on_notice=False,
                  **PATIENT)
    result = platform_time.drive(op).execute(ctx)
    # The event itself is waited out on the same node (seed 002: most events recover).
    assert set(decisions(result)) == {("maintenance_event", "wait")}
    assert created(resilient_emulator) == [A1] == deleted(resilient_emulator)
    first, second = boots(worker_log(resilient_emulator, A1))
    (saved,) = re.findall(r"saved checkpoint \S+/step_(\d+) on request \(scheduled maintenance at \S+\)", first)
    assert "checkpoint requested: scheduled maintenance at" in first  # the runner passed it on
    # After the repair the workload resumed from the checkpoint it saved on request, past the announcement.
    assert f"resuming from step {saved}" in second and int(saved) > 3
    assert result["checkpoint"]["step"] == 20
    assert nodes_left() == [] and resilient_emulator.tpu.processes() == []


def test_move_leaves_the_node_before_the_window_without_spending_a_budget(resilient_emulator, platform_time):
    resilient_emulator.storage.create_bucket("tpu-ckpt")
    announce(resilient_emulator)
    ctx = context()
    op = operator(train_slowly(), maintenance_lead_seconds=LEAD, maintenance_policy="move", poll_interval=100.0,
                  **PATIENT)
    result = platform_time.drive(op).execute(ctx)
    first, second = result["attempts"]
    assert first["ended_by"] == "maintenance" and not first.get("incidents")
    assert second["resumed_from_step"] > 3 and not second.get("incidents")
    assert decisions(result) == []  # no failure, no budget
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
    # The move came before the window: the first node never went into maintenance (one boot of its VM), and
    # the second resumed from the checkpoint the first saved on request.
    (only,) = boots(worker_log(resilient_emulator, A1))
    (saved,) = re.findall(r"saved checkpoint \S+/step_(\d+) on request", only)
    assert second["resumed_from_step"] == int(saved)
    assert nodes_left() == [] and resilient_emulator.tpu.processes() == []


def test_auto_rides_out_a_short_window_and_moves_off_a_long_one():
    from airflow_provider_resilient.supervisor.maintenance import MaintenancePolicy, MaintenanceSettings, Notice, moves

    auto = MaintenanceSettings(MaintenancePolicy.AUTO, lead_seconds=600, move_seconds=600)
    assert not moves(Notice("SCHEDULED", "PENDING", 1000.0, 1300.0), auto)
    assert moves(Notice("SCHEDULED", "PENDING", 1000.0, 4600.0), auto)


def test_bad_maintenance_arguments_are_refused_at_parse_time():
    with pytest.raises(AirflowFailException, match=r"maintenance_policy: 'later'.*ride_out, move, auto"):
        operator("echo hi", maintenance_policy="later")
    with pytest.raises(AirflowFailException, match=r"maintenance_lead_seconds: -1: give a number of seconds >= 0"):
        operator("echo hi", maintenance_lead_seconds=-1)


def test_the_v2alpha1_api_announces_the_window_and_simulates_an_event(resilient_emulator, platform_time):
    """Conformance of the emulator's v2alpha1 face with the real client."""
    hook = ResilientTPUHook(sleep=platform_time.sleep)
    announce(resilient_emulator, at_step=None, notice_seconds=60.0)
    hook.create_node("test-project", "us-central2-b", "n1", {
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "sleep 60"}})
    name = f"{ZONE}/nodes/n1"
    upcoming = platform_time.advance_until(lambda: hook.upcoming_maintenance(name))  # announced once it is READY
    assert upcoming.type_.name == "SCHEDULED" and upcoming.maintenance_status.name == "PENDING"
    assert upcoming.window_start_time < upcoming.window_end_time and upcoming.can_reschedule
    hook.request_checkpoint(name, "tok")
    assert dict(hook.get_node(name).metadata)["resilient-checkpoint-request"] == "tok"
    assert "startup-script" in dict(hook.get_node(name).metadata)  # the rest of the metadata is kept
    hook.simulate_maintenance_event(name, ["0"])
    node = hook.get_node(name)
    assert node.state.name == "REPAIRING" and node.health.name == "UNHEALTHY_MAINTENANCE"
    assert hook.upcoming_maintenance(name).maintenance_status.name == "ONGOING"
    hook.delete_node(name)


def test_deferred_the_trigger_brings_the_task_back_for_the_notice_and_the_ack(resilient_emulator, platform_time):
    """Deferred, the trigger sees the notice appear (v2alpha1) and the workers' acknowledgement, and the task
    comes back in time to request the checkpoint and to move."""
    resilient_emulator.storage.create_bucket("tpu-ckpt")
    # The notice comes 150 s after the node is up -- between the operator's first full look and its next (300 s
    # later), so the trigger sees it -- and the platform's time moves on only once the workload is past step 3.
    announce(resilient_emulator, at_step=None, after_seconds=150.0)
    platform_time.hold_while(lambda: unacknowledged(resilient_emulator) or short_of_step(resilient_emulator, A1, 4))
    events: list = []
    result = run_deferred(lambda: operator(train_slowly(), maintenance_lead_seconds=LEAD, maintenance_policy="move",
                                           deferrable=True, poll_interval=100.0, **PATIENT), context(), events=events,
                          platform_time=platform_time)
    messages = [e["message"] for e in events]
    assert any(m.startswith("upcoming maintenance: SCHEDULED PENDING") for m in messages)
    assert any("saved its checkpoint on request (scheduled maintenance at" in m for m in messages)
    first, second = result["attempts"]
    assert first["ended_by"] == "maintenance" and second["resumed_from_step"] > 3
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
    assert nodes_left() == [] and resilient_emulator.tpu.processes() == []


# ------------------------------------------------------------------ multislice (issue 14, part 4)
def test_a_multislice_group_recovers_whole_when_one_slice_fails(resilient_emulator, platform_time):
    """Two v4-8 slices through one queued resource (v2alpha1 multi_node_params); slice 1 of the first group is
    preempted once slice 0 has a complete checkpoint: the whole group is ended and a new one resumes from the
    latest complete checkpoint, every worker seeing the multislice environment; nothing is left behind."""
    from airflow_provider_resilient.testing.emulator_clients import tpu_client

    resilient_emulator.storage.create_bucket("tpu-ckpt")
    # Slice 1 is struck 5 s after the group is up; slice 0 writes the checkpoints (every 3 steps): the platform's
    # time stands still until its step 3 is complete, so there is one to resume from, whatever the machine's load.
    resilient_emulator.add_fault({"kind": "preemption", "after_seconds": 5.0, "grace_seconds": 5,
                                  "match": {"display_name": f"{A1}-1"}})
    storage = resilient_emulator.storage_filesystem()
    platform_time.hold_while(lambda: short_of_step(resilient_emulator, f"{A1}-0", 12)
                             and not storage.exists("tpu-ckpt/run/checkpoints/step_3/COMMITTED"))
    command = ('echo "multislice: slice $MEGASCALE_SLICE_ID of $MEGASCALE_NUM_SLICES, coordinator '
               '$MEGASCALE_COORDINATOR_ADDRESS"; ' + train(12).replace("--epoch-seconds 0.05", "--epoch-seconds 0.1"))
    ctx = context()
    result = platform_time.drive(operator(command, slices=2)).execute(ctx)
    assert decisions(result) == [("preemption", "recreate_node")]
    first, second = result["attempts"]
    assert first["incidents"][0]["failure"]["message"].startswith(f"slice 1 ({A1}-1): ")
    assert second["resumed_from_step"] >= 3 and result["checkpoint"]["step"] == 12
    # Every slice node of both groups was created by its queued resource and is gone with it.
    made = sorted(c.resource.rsplit("/", 1)[1] for c in resilient_emulator.calls.list("CreateQueuedResource"))
    assert made == [A1, A2]
    for node_id in (f"{A1}-0", f"{A1}-1", f"{A2}-0", f"{A2}-1"):
        log = worker_log(resilient_emulator, node_id)
        slice_id = node_id.rsplit("-", 1)[1]
        assert f"multislice: slice {slice_id} of 2, coordinator 127.0.0.1:8080" in log
    assert nodes_left() == [] and [q.name for q in tpu_client().list_queued_resources(parent=ZONE)] == []
    assert resilient_emulator.tpu.processes() == []


def test_multislice_arguments_are_checked_at_parse_time():
    with pytest.raises(AirflowFailException, match=r"slices: 0: give a whole number of slices from 1 to 64"):
        operator("echo hi", slices=0)
    with pytest.raises(AirflowFailException, match=r"slices: 2 slices with deferrable=True"):
        operator("echo hi", slices=2, deferrable=True)
    assert operator("echo hi", slices=2).queued_resource  # a group exists only as a queued resource


def test_a_multislice_group_is_one_queued_resource_to_the_reconciler(resilient_emulator, platform_time):
    """The v2alpha1 request makes ``node_count`` nodes ``<prefix>-i`` (``multislice_node``); the reconciler's
    listing holds the group once, as its queued resource (deleting it takes every slice)."""
    from airflow_provider_resilient.backends.tpu import live_nodes
    from airflow_provider_resilient.specs.common import LABEL_ATTEMPT

    hook = ResilientTPUHook(sleep=platform_time.sleep)
    hook.create_queued_resource("test-project", "us-central2-b", "grp", {
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base", "labels": {LABEL_ATTEMPT: "1"},
        "metadata": {"startup-script": "sleep 60"}}, spot=False, valid_until_seconds=None, slices=3)
    nodes = platform_time.advance_until(lambda: len(n := hook.list_nodes("test-project", "us-central2-b")) == 3 and n)
    assert sorted(n.name.rsplit("/", 1)[1] for n in nodes) == ["grp-0", "grp-1", "grp-2"]
    assert all(n.multislice_node and n.queued_resource.endswith("/queuedResources/grp") for n in nodes)
    found = live_nodes(hook, "test-project", ["us-central2-b"])
    assert [(f.name, f.kind) for f in found] == [(f"{ZONE}/queuedResources/grp", "queued_resource")]
    hook.delete_queued_resource(f"{ZONE}/queuedResources/grp")
    for node in nodes:
        hook.wait_gone(node.name, 60)


def test_at_risk_makes_a_spare_once_a_window_is_announced_and_the_move_takes_it(resilient_emulator, platform_time):
    """``spare_node="at_risk"``: the announced window puts the run at risk, so attempt 2's node is made while
    attempt 1 trains, and the move before the window hands it attempt 2 instead of creating one."""
    resilient_emulator.storage.create_bucket("tpu-ckpt")
    announce(resilient_emulator)
    op = operator(train_slowly(), maintenance_lead_seconds=LEAD, maintenance_policy="move", poll_interval=100.0,
                  spare_node="at_risk", **PATIENT)
    result = platform_time.drive(op).execute(context())
    first, second = result["attempts"]
    assert first["ended_by"] == "maintenance" and decisions(result) == []
    calls = [(c.method, c.resource.rsplit("/", 1)[1]) for c in resilient_emulator.calls.list()
             if c.method in ("CreateNode", "UpdateNode", "DeleteNode")]
    assert calls.index(("CreateNode", A2)) < calls.index(("DeleteNode", A1))  # made before the move
    assert ("UpdateNode", A2) in calls and created(resilient_emulator) == [A1, A2]  # taken; no spare after it
    assert second["resumed_from_step"] > 3
    assert nodes_left() == [] and resilient_emulator.tpu.processes() == []
