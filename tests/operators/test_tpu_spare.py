"""The spare node of the TPU operator (``spare_node``, :mod:`airflow_provider_resilient.supervisor.spare`) on the
emulator: the next attempt's node made while the attempt trains, taken after a failure instead of a create, and
never left behind."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_provider_resilient.compat import AirflowFailException, TaskDeferred
from airflow_provider_resilient.specs.common import LABEL_SPARE
from airflow_provider_resilient.specs.tpu import ATTEMPT_SCRIPT_ATTRIBUTE
from airflow_provider_resilient.testing.emulator_clients import tpu_client

from ..tpu_time import STEPPED, PlatformTime
from .test_tpu_operator import (
    A1,
    A2,
    A3,
    FIRST_ATTEMPT_RUNS_UNTIL_STRUCK,
    PATIENT,
    STRIKES_WHEN_IT_RUNS,
    ZONE,
    Killed,
    context,
    created,
    decisions,
    deleted,
    nodes_left,
    operator,
    runs_until_struck_once,
)

pytestmark = STEPPED
CREATE_SECONDS = 90.0  # the emulator's tpu_create_seconds (EmulatorConfig's default)


@pytest.fixture
def platform_time(resilient_emulator: Any) -> PlatformTime:
    """The emulator's manual clock and the code under test's clock and sleep, as one time."""
    return PlatformTime(resilient_emulator)


def spare_labels() -> dict[str, dict[str, str]]:
    return {n.name.rsplit("/", 1)[1]: dict(n.labels) for n in tpu_client().list_nodes(parent=ZONE)}


@pytest.mark.parametrize("spare", ["always", "never"])
def test_after_a_preemption_the_next_attempt_takes_the_spare_instead_of_waiting_for_a_create(
        resilient_emulator, platform_time, spare):
    """With ``spare_node="always"`` attempt 2's node is made while attempt 1 trains; when a preemption ends attempt 1,
    attempt 2 starts on it at once (UpdateNode hands it attempt 2's startup script: no CreateNode after the failure),
    a spare for attempt 3 follows, and every node is deleted when the run ends. Without, attempt 2 waits a create."""
    # 150 platform-s into attempt 1: its spare (created as attempt 1 started) has been READY for a minute.
    resilient_emulator.add_fault({"kind": "preemption", "after_seconds": 150, "match": {"nth": 1}})
    ctx = context()
    result = platform_time.drive(operator(FIRST_ATTEMPT_RUNS_UNTIL_STRUCK, spot=True, spare_node=spare,
                                          **PATIENT)).execute(ctx)
    assert decisions(result) == [("preemption", "recreate_node")]
    first, second = result["attempts"]
    assert second["resource_name"].endswith(A2)
    recovery = second["started_at"] - first["incidents"][0]["decision"]["decided_at"]
    calls = [(c.method, c.resource.rsplit("/", 1)[1]) for c in resilient_emulator.calls.list()
             if c.method in ("CreateNode", "UpdateNode", "DeleteNode")]
    assert nodes_left() == []
    if spare == "never":
        assert "spare_nodes" not in ctx["ti"].xcom["goodput"]
        assert recovery >= CREATE_SECONDS
        assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator)
        return
    assert recovery < CREATE_SECONDS / 3, recovery  # the spare was READY: the hand-over and a deletion's wait
    assert calls.index(("CreateNode", A2)) < calls.index(("DeleteNode", A1))  # made before it was needed
    assert ("UpdateNode", A2) in calls and calls.count(("CreateNode", A2)) == 1
    assert created(resilient_emulator) == [A1, A2, A3]  # A3: attempt 2's own spare, released at the end
    costs = ctx["ti"].xcom["goodput"]["spare_nodes"]  # the summary counts what the spares cost
    assert (costs["taken"], costs["released"]) == (1, 1) and costs["held_seconds"] >= 150
    assert costs["host_seconds"] == costs["held_seconds"]  # a v4-8: one worker VM
    assert sorted(deleted(resilient_emulator)) == sorted([A1, A2, A3])
    log = (resilient_emulator.work_dir / "tpu" / A2 / "worker-0.log").read_text(errors="replace")
    assert "runner:" in log  # the spare's waiting script ran attempt 2's startup script (the worker runner)


def test_a_spare_that_is_no_longer_needed_is_deleted_as_the_run_succeeds(resilient_emulator, platform_time):
    """No failure: the spare made for attempt 2 is never taken, and success deletes it with attempt 1's node."""
    op = operator('echo "step 1"; sleep 5; echo "step 2"', spare_node="always", **PATIENT)
    result = platform_time.drive(op).execute(context())
    assert len(result["attempts"]) == 1
    assert created(resilient_emulator) == [A1, A2]
    assert sorted(deleted(resilient_emulator)) == sorted([A1, A2])
    assert nodes_left() == []


def test_at_risk_holds_a_spare_only_after_an_interruption(resilient_emulator, platform_time):
    """``at_risk``: nothing is held while nothing has failed; after the preemption the run is at risk for
    ``spare_risk_seconds``, so attempt 2 gets a spare (attempt 3's), deleted as the run ends."""
    resilient_emulator.add_fault({"kind": "preemption", **STRIKES_WHEN_IT_RUNS, "match": {"nth": 1}})
    command = 'if [ "$RESILIENT_ATTEMPT" = 1 ]; then echo "step 1"; sleep 120; else echo "step 2"; sleep 5; fi'
    result = platform_time.drive(operator(command, spot=True, spare_node="at_risk", **PATIENT)).execute(context())
    assert decisions(result) == [("preemption", "recreate_node")]
    calls = [(c.method, c.resource.rsplit("/", 1)[1]) for c in resilient_emulator.calls.list()
             if c.method in ("CreateNode", "DeleteNode")]
    assert calls.index(("CreateNode", A2)) > calls.index(("DeleteNode", A1))  # not at risk before the failure
    assert created(resilient_emulator) == [A1, A2, A3]
    assert nodes_left() == []


def test_a_spare_waits_for_its_attempt_and_a_kill_deletes_it(resilient_emulator, platform_time):
    """While attempt 1 runs, attempt 2's spare exists with ``resilient-spare=true`` and no attempt script yet (its
    startup script waits); a kill of the task deletes it with attempt 1's node."""
    op = platform_time.drive(operator('echo "step 1"; sleep 600', spare_node="always", **PATIENT))
    seen: dict[str, Any] = {}

    def kill_once_spared(seconds: float) -> None:
        labels = spare_labels()
        if A2 in labels:
            node = tpu_client().get_node(name=f"{ZONE}/nodes/{A2}")
            seen["spare"] = (labels[A2].get(LABEL_SPARE), ATTEMPT_SCRIPT_ATTRIBUTE in dict(node.metadata))
            with platform_time.moving():  # on_kill's own hook waits on the wall clock
                op.on_kill()
            raise Killed
        platform_time.sleep(seconds)

    op._sleep = kill_once_spared  # type: ignore[method-assign]
    with pytest.raises(Killed):
        op.execute(context())
    assert seen["spare"] == ("true", False)
    assert sorted(deleted(resilient_emulator)) == sorted([A1, A2])
    assert nodes_left() == []


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"spare_node": "sometimes"}, "spare_node"),
    ({"spare_node": "at_risk", "spare_risk_seconds": 0}, "spare_risk_seconds"),
    ({"spare_node": "always", "queued_resource": True}, "spare_node"),
])
def test_bad_spare_arguments_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(AirflowFailException, match=f"{field}"):
        operator("echo ok", **kwargs)


@pytest.mark.parametrize("store", ["kept", "emptied"])
def test_a_retried_try_after_its_process_died_finds_the_spare_and_still_deletes_it(resilient_emulator, platform_time,
                                                                                   store):
    """The worker process dies (no on_kill) after attempt 2's spare was made. ``kept``: the retried try reattaches to
    attempt 1 from the task state store and knows the spare from there. ``emptied`` (Airflow 3.1 and 3.2 have no task
    state store): it rebuilds the run from the task instance's live nodes -- attempt 2's spare carries attempt 2's
    labels, yet the run is attempt 1's; without the spare label check it would watch the waiting spare for ever.
    Either way the run's success deletes both nodes."""
    ctx = context()
    go = resilient_emulator.work_dir / "go"
    command = f'echo "step 1"; while [ ! -e {go} ]; do sleep 0.05; done'
    first = platform_time.drive(operator(command, spare_node="always", **PATIENT))

    def die_once_spared(seconds: float) -> None:
        if A2 in spare_labels():
            raise Killed
        platform_time.sleep(seconds)

    first._sleep = die_once_spared  # type: ignore[method-assign]
    with pytest.raises(Killed):
        first.execute(ctx)
    assert ctx["task_state_store"].data["resilient_spare"]["spare"]["name"].endswith(A2)
    go.touch()
    retry = ctx if store == "kept" else context()
    result = platform_time.drive(operator(command, spare_node="always", **PATIENT)).execute(retry)
    assert [a["resource_name"].rsplit("/", 1)[1] for a in result["attempts"]] == [A1]
    assert created(resilient_emulator) == [A1, A2]
    assert sorted(deleted(resilient_emulator)) == sorted([A1, A2]) and nodes_left() == []


@pytest.mark.parametrize("spare", ["always", "never"])
def test_a_node_in_repair_is_not_waited_for_when_a_spare_is_ready(resilient_emulator, platform_time, tmp_path,
                                                                  spare):
    """A maintenance event that recovers is waited out on the same node (Cloud TPU: most events do) -- unless a spare
    is READY: then the next attempt takes it once the workload had 30 s to save on the event's SIGTERM, since a
    repair, however short, ends in the same boot."""
    resilient_emulator.add_fault({"kind": "maintenance", "after_seconds": 150, "grace_seconds": 5,
                                  "match": {"nth": 1}})
    command = runs_until_struck_once(tmp_path / "struck")
    result = platform_time.drive(operator(command, spare_node=spare, **PATIENT)).execute(context())
    if spare == "never":
        assert {d for d in decisions(result)} == {("maintenance_event", "wait")} and len(result["attempts"]) == 1
    else:  # looks at the repair until the workload had its 30 s to save on the notice, then the spare
        *waits, last = decisions(result)
        assert set(waits) == {("maintenance_event", "wait")} and last == ("maintenance_event", "recreate_node")
        incidents = result["attempts"][0]["incidents"]
        assert "taking it beats waiting any repair" in incidents[-1]["decision"]["reason"]
        assert incidents[-1]["decision"]["decided_at"] - incidents[0]["decision"]["decided_at"] >= 30
        assert result["attempts"][1]["resource_name"].endswith(A2)
    assert nodes_left() == []


def test_a_deferred_task_hands_its_spare_to_the_trigger_whose_kill_deletes_it(resilient_emulator, platform_time,
                                                                              tmp_path):
    """Deferred, the task waits in a TPUNodeTrigger; the trigger knows the spare (a serialized argument), so a kill of
    the deferred task deletes the spare with the node."""
    go = tmp_path / "go"
    with pytest.raises(TaskDeferred) as deferred:
        platform_time.drive(operator(f"while [ ! -e {go} ]; do sleep 0.05; done", deferrable=True,
                                     spare_node="always", **PATIENT)).execute(context())
    trigger = deferred.value.trigger
    assert trigger.serialize()[1]["spare"].endswith(A2)
    with platform_time.moving():  # on_kill's own hook waits on the wall clock
        asyncio.run(asyncio.wait_for(trigger.on_kill(), 60.0))
    assert sorted(deleted(resilient_emulator)) == sorted([A1, A2])
    go.touch()


def test_a_spare_gone_before_its_attempt_came_is_replaced_by_a_create(resilient_emulator, platform_time):
    """Someone deletes the spare while attempt 1 trains; when attempt 1 is preempted, attempt 2's node is created as
    usual, and nothing is left behind."""
    resilient_emulator.add_fault({"kind": "preemption", "after_seconds": 150, "match": {"nth": 1}})
    op = platform_time.drive(operator(FIRST_ATTEMPT_RUNS_UNTIL_STRUCK, spot=True, spare_node="always", **PATIENT))
    gone: list[str] = []

    def delete_the_spare_once_ready(seconds: float) -> None:
        node = next((n for n in tpu_client().list_nodes(parent=ZONE) if n.name.endswith(A2)), None)
        if not gone and node is not None and node.state.name == "READY":
            tpu_client().delete_node(name=node.name)
            gone.append(node.name)
        platform_time.sleep(seconds)

    op._sleep = delete_the_spare_once_ready  # type: ignore[method-assign]
    result = op.execute(context())
    assert gone and decisions(result) == [("preemption", "recreate_node")]
    assert result["attempts"][1]["resource_name"].endswith(A2)
    assert created(resilient_emulator).count(A2) == 2  # the spare, then attempt 2's own node
    assert nodes_left() == []
