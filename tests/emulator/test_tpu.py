"""The real google-cloud-tpu clients against the emulated Cloud TPU API (seed 002's behaviour)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from pathlib import Path

import pytest
from google.api_core import exceptions

from airflow_provider_resilient.testing.emulator.tpu.topology import worker_count
from airflow_provider_resilient.testing.emulator_clients import tpu_async_client, tpu_client

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
ZONE = "projects/test-project/locations/us-central2-b"

# Each worker reports its id through a guest attribute, then idles; on SIGTERM it notes it and exits.
SCRIPT = f"""
trap 'echo got-sigterm; exit 143' TERM
{sys.executable} - <<'PY'
import os, urllib.request
url = "http://" + os.environ["GCE_METADATA_HOST"] + "/computeMetadata/v1/instance/guest-attributes/resilient/worker"
req = urllib.request.Request(url, data=os.environ["TPU_WORKER_ID"].encode(), method="PUT",
                             headers={{"Metadata-Flavor": "Google"}})
urllib.request.urlopen(req, timeout=5)
PY
echo booted worker $TPU_WORKER_ID
sleep 600 & wait
"""


def node(accelerator_type: str = "v4-32", **extra):
    return {"accelerator_type": accelerator_type, "runtime_version": "tpu-ubuntu2204-base",
            "metadata": {"startup-script": SCRIPT}, **extra}


def wait_for(predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise TimeoutError("condition not met")


#: The platform's own latencies (``Latencies``) on a clock the test moves: nothing happens between advances, and an
#: operation the clock has moved past is done when its ``result()`` is asked for (no polling).
MANUAL = pytest.mark.resilient_emulator(clock="manual", time_scale=1.0)
CREATE, REPAIR, DELETE = 90.0, 300.0, 30.0  # Latencies.tpu_create_seconds, tpu_repair_seconds, tpu_delete_seconds


@pytest.mark.parametrize(("accelerator", "workers"), [("v4-8", 1), ("v4-16", 2), ("v4-32", 4), ("v5litepod-8", 1),
                                                      ("v5litepod-16", 4), ("v5p-8", 1), ("v3-32", 4)])
def test_worker_counts(accelerator, workers):
    assert worker_count(accelerator) == workers


@pytest.mark.parametrize("name", ["v4-12", "v4-8000000", "v3-16", "v5litepod-12", "v6e-512", "v7-8", "v4-08"])
def test_worker_count_refuses_what_the_platform_does_not_offer(name):
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        worker_count(name)


OFFERED = ["v2-8", "v2-512", "v3-8", "v3-2048", "v4-8", "v4-64", "v4-4096", "v5p-8", "v5p-1024", "v5litepod-1",
           "v5litepod-4", "v5litepod-8", "v5litepod-256", "v6e-8", "v6e-16", "v6e-256"]


@pytest.mark.parametrize("name", OFFERED)
def test_the_provider_and_the_emulator_count_the_same_workers_from_separate_tables(name):
    """The emulator's table is written from the documentation apart from the provider's (specs.tpu): where they
    disagree, one of them is wrong, and this says so."""
    from airflow_provider_resilient.specs.tpu import worker_count as provider_count

    assert provider_count(name) == worker_count(name)


def test_the_emulator_imports_nothing_of_the_provider_outside_testing():
    """A bug in product code must not be copied into the fake it is tested against."""
    import ast

    root = Path(__file__).resolve().parents[2] / "airflow_provider_resilient" / "testing" / "emulator"
    found = []
    for path in root.rglob("*.py"):
        depth = len(path.relative_to(root).parts) + 1  # levels up to testing/: 2 in emulator/x.py
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                name = node.module or ""
                # a relative import climbing past testing/ (level > depth) or an absolute one of the package
                if node.level > depth or (node.level == 0 and name.startswith("airflow_provider_resilient")
                                          and not name.startswith("airflow_provider_resilient.testing")):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {'.' * node.level}{name}")
    assert found == []
    from airflow_provider_resilient import clients
    from airflow_provider_resilient.testing import emulator_clients
    from airflow_provider_resilient.testing.emulator import server

    # What they share is names: the connection extra that switches the provider's operators to the emulator, and
    # the variable the emulator's own tools read its address from.
    connection = json.loads(server.emulator_connection("127.0.0.1:8470"))
    assert connection["extra"] == {clients.EMULATOR_HOST_EXTRA: "127.0.0.1:8470"}
    assert server.EMULATOR_HOST_ENV == emulator_clients.EMULATOR_HOST_ENV


@MANUAL
def test_create_node_runs_startup_scripts_on_every_worker_and_guest_attributes_flow(resilient_emulator):
    client = tpu_client()
    operation = client.create_node(parent=ZONE, node_id="train-node", node=node(labels={"team": "ml"}))
    resilient_emulator.advance(CREATE)  # (each operation below is done when its result is asked for: no polling)
    created = operation.result(timeout=30)
    assert created.state.name == "READY" and created.health.name == "HEALTHY"
    assert len(created.network_endpoints) == 4 and created.labels["team"] == "ml"
    name = f"{ZONE}/nodes/train-node"
    response = wait_for(lambda: (r := client.get_guest_attributes(request={"name": name, "query_path": "resilient/"}))
                        and all(g.query_value.items for g in r.guest_attributes) and r)
    assert sorted(g.query_value.items[0].value for g in response.guest_attributes) == ["0", "1", "2", "3"]
    one = client.get_guest_attributes(request={"name": name, "query_path": "resilient/", "worker_ids": ["2"]})
    assert [g.query_value.items[0].value for g in one.guest_attributes] == ["2"]
    assert [n.name for n in client.list_nodes(parent=ZONE)] == [name]
    assert len(resilient_emulator.tpu.worker_pids()) == 4

    stopping = client.stop_node(request={"name": name})
    resilient_emulator.advance(DELETE)
    stopping.result(timeout=30)
    assert client.get_node(name=name).state.name == "STOPPED" and resilient_emulator.tpu.processes() == []
    starting = client.start_node(request={"name": name})
    resilient_emulator.advance(CREATE / 3)
    starting.result(timeout=30)
    assert client.get_node(name=name).state.name == "READY"
    deleting = client.delete_node(name=name)
    resilient_emulator.advance(DELETE)
    deleting.result(timeout=30)
    with pytest.raises(exceptions.NotFound):
        client.get_node(name=name)
    assert resilient_emulator.tpu.processes() == []
    assert {"CreateNode", "GetGuestAttributes", "StopNode", "StartNode", "DeleteNode"} <= {
        c.method for c in resilient_emulator.calls.list()}


@MANUAL
def test_async_client_creates_and_reads_a_node(resilient_emulator):
    async def scenario() -> str:
        client = tpu_async_client()
        operation = await client.create_node(parent=ZONE, node_id="async-node", node=node("v4-8"))
        resilient_emulator.advance(CREATE)
        created = await operation.result(timeout=30)
        return (await client.get_node(name=created.name)).state.name

    assert asyncio.run(scenario()) == "READY"


def test_bad_requests_are_invalid_argument(resilient_emulator):
    client = tpu_client()
    with pytest.raises(exceptions.InvalidArgument, match="accelerator_type"):
        client.create_node(parent=ZONE, node_id="bad", node=node("v4-12"))
    client.create_node(parent=ZONE, node_id="twice", node=node("v4-8"))
    with pytest.raises(exceptions.AlreadyExists):
        client.create_node(parent=ZONE, node_id="twice", node=node("v4-8"))




def _booted(emulator, node_id: str, worker: int = 0, times: int = 1) -> str:
    """The worker's log once its startup script has booted ``times`` times (a real process: waited for)."""
    path = emulator.work_dir / "tpu" / node_id / f"worker-{worker}.log"
    return wait_for(lambda: path.exists() and (text := path.read_text()).count(f"booted worker {worker}") >= times
                    and text)


def _created_on_the_clock(emulator, node_id: str, accelerator: str = "v4-16") -> str:
    """Create a node and advance the clock through its creation: READY when this returns."""
    operation = tpu_client().create_node(parent=ZONE, node_id=node_id, node=node(accelerator))
    emulator.advance(CREATE - 1)
    assert not operation.done()
    emulator.advance(1)
    return operation.result(timeout=30).name


@MANUAL
def test_maintenance_with_recovery_repairs_and_reruns_the_startup_scripts(resilient_emulator):
    resilient_emulator.add_fault({"kind": "maintenance", "after_seconds": 60, "grace_seconds": 5})
    name = _created_on_the_clock(resilient_emulator, "maint")
    _booted(resilient_emulator, "maint")
    client = tpu_client()
    resilient_emulator.advance(59)
    assert client.get_node(name=name).state.name == "READY"
    resilient_emulator.advance(1)  # 60 s after READY: the event
    repairing = client.get_node(name=name)
    assert (repairing.state.name, repairing.health.name) == ("REPAIRING", "UNHEALTHY_MAINTENANCE")
    assert repairing.health_description.startswith("The TPU had a maintenance event at")
    log = wait_for(lambda: "got-sigterm" in (text := _booted(resilient_emulator, "maint")) and text)
    assert log.count("booted worker 0") == 1  # the workload had its SIGTERM; nothing rebooted yet
    resilient_emulator.advance(5 + REPAIR - 1)  # the grace, then all but the last second of the repair
    assert client.get_node(name=name).state.name == "REPAIRING"
    resilient_emulator.advance(1)
    assert (n := client.get_node(name=name)).state.name == "READY" and n.health.name == "HEALTHY"
    assert _booted(resilient_emulator, "maint", times=2)  # the startup scripts ran again
    entries = resilient_emulator.logging.list_log_entries(["projects/test-project"],
                                                           'protoPayload.methodName="tpu.nodes.restart"', "", 0, "")[0]
    assert [e.proto_payload for e in entries]


@MANUAL
def test_maintenance_without_recovery_terminates_with_a_reason(resilient_emulator):
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, "after_seconds": 30,
                                  "grace_seconds": 10})
    name = _created_on_the_clock(resilient_emulator, "gone")
    _booted(resilient_emulator, "gone")
    client = tpu_client()
    resilient_emulator.advance(30)  # the event: the guests get SIGTERM and their notice; the API shows READY still
    assert client.get_node(name=name).state.name == "READY"
    resilient_emulator.advance(10)
    assert client.get_node(name=name).state.name == "TERMINATED"
    assert resilient_emulator.tpu.processes() == []  # past the grace: the VMs are off, whatever the scripts do
    entries, _ = resilient_emulator.logging.list_log_entries(
        ["projects/test-project"], '"tpu.nodes.terminate" OR "tpu.nodes.restart"', "", 0, "")
    assert len(entries) == 1


@MANUAL
def test_preemption_and_unhealthy_nodes(resilient_emulator):
    resilient_emulator.add_fault({"kind": "preemption", "after_seconds": 10, "match": {"display_name": "spot"}})
    resilient_emulator.add_fault({"kind": "unhealthy", "health": "UNHEALTHY_TENSORFLOW",
                                  "symptoms": ["MESH_BUILD_FAIL"], "after_seconds": 20,
                                  "match": {"display_name": "sick"}})
    client = tpu_client()
    spot, sick = (_created_on_the_clock(resilient_emulator, n, "v4-8") for n in ("spot", "sick"))
    resilient_emulator.advance(10)  # spot was preempted (and its 1 s notice ran out) while sick was created
    assert client.get_node(name=spot).state.name == "PREEMPTED"
    assert client.get_node(name=sick).health.name == "HEALTHY"
    resilient_emulator.advance(10)
    got = client.get_node(name=sick)
    assert (got.state.name, got.health.name) == ("READY", "UNHEALTHY_TENSORFLOW")
    assert [s.symptom_type.name for s in got.symptoms] == ["MESH_BUILD_FAIL"]


@MANUAL
def test_stockout_fails_the_create_operation_and_writes_an_audit_entry(resilient_emulator):
    resilient_emulator.add_fault({"kind": "stockout"})
    client = tpu_client()
    operation = client.create_node(parent=ZONE, node_id="nocap", node=node("v4-8"))
    resilient_emulator.advance(CREATE)  # the platform looks for capacity at the end of the creation
    with pytest.raises(exceptions.ResourceExhausted, match="no more capacity"):
        operation.result(timeout=30)
    with pytest.raises(exceptions.NotFound):
        client.get_node(name=f"{ZONE}/nodes/nocap")
    entries, _ = resilient_emulator.logging.list_log_entries(["projects/test-project"], "severity>=ERROR", "", 0, "")
    assert len(entries) == 1
    assert entries[0].log_name == "projects/test-project/logs/cloudaudit.googleapis.com%2Factivity"


@MANUAL
def test_crash_signals_the_workload_process_of_one_worker(resilient_emulator):
    _created_on_the_clock(resilient_emulator, "crashy")
    log1 = resilient_emulator.work_dir / "tpu" / "crashy" / "worker-1.log"
    # The fault comes once the workload runs on both workers: a crash that strikes a startup script still
    # booting (a loaded machine) would signal no workload process (not a guessed delay).
    wait_for(lambda: all(f"booted worker {w}" in (log1.parent / f"worker-{w}.log").read_text() for w in (0, 1)))
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "worker": 1})
    # Wait for the process to be gone, not for bash's "Segmentation fault" line: that is written before the
    # worker's script has exited and been reaped (a CI run caught 2 processes right after the line).
    wait_for(lambda: len(resilient_emulator.tpu.worker_pids()) == 1)  # worker 1's script ended, worker 0 runs


@MANUAL
def test_queued_resource_becomes_active_with_its_node(resilient_emulator):
    client = tpu_client()
    client.create_queued_resource(parent=ZONE, queued_resource_id="qr", queued_resource={
        "tpu": {"node_spec": [{"parent": ZONE, "node_id": "qr-node", "node": node("v4-8")}]}, "spot": {}})
    resilient_emulator.advance(30 + CREATE)  # Latencies.tpu_queue_seconds, then the node's creation
    assert client.get_queued_resource(name=f"{ZONE}/queuedResources/qr").state.state.name == "ACTIVE"
    assert client.get_node(name=f"{ZONE}/nodes/qr-node").queued_resource == f"{ZONE}/queuedResources/qr"
    with pytest.raises(exceptions.FailedPrecondition):
        client.delete_queued_resource(name=f"{ZONE}/queuedResources/qr").result(timeout=30)
    client.delete_queued_resource(request={"name": f"{ZONE}/queuedResources/qr", "force": True}).result(timeout=30)
    assert [n.state.name for n in client.list_nodes(parent=ZONE)] == ["DELETING"]
    resilient_emulator.advance(DELETE)
    assert not list(client.list_nodes(parent=ZONE))


@MANUAL
def test_a_queued_resource_never_provisioned_fails_when_its_validity_ends(resilient_emulator):
    resilient_emulator.add_fault({"kind": "never_provision"})
    client = tpu_client()
    client.create_queued_resource(parent=ZONE, queued_resource_id="waiting", queued_resource={
        "tpu": {"node_spec": [{"parent": ZONE, "node_id": "never", "node": node("v4-8")}]},
        "queueing_policy": {"valid_until_duration": "3600s"}})
    name = f"{ZONE}/queuedResources/waiting"
    state = lambda: client.get_queued_resource(name=name).state  # noqa: E731
    assert state().state.name == "ACCEPTED"
    resilient_emulator.advance(30)  # Latencies.tpu_queue_seconds: the platform looks for capacity
    assert state().state.name == "WAITING_FOR_RESOURCES"
    resilient_emulator.advance(3600 - 30 - 1)
    assert state().state.name == "WAITING_FOR_RESOURCES"
    resilient_emulator.advance(1)
    assert state().state.name == "FAILED" and "valid_until_duration" in state().failed_data.error.message


@MANUAL
def test_deleting_a_node_kills_commands_in_sessions_of_their_own(resilient_emulator, tmp_path):
    """The worker runner starts the training command in its own session; a command that ignores SIGTERM
    must still die with the VM, or the emulator would leak it past DeleteNode and past shutdown."""
    pid_file = tmp_path / "stubborn.pid"
    script = (f"setsid bash -c 'trap \"\" TERM; echo $$ > {pid_file}; while true; do sleep 0.2; done' &\n"
              "wait\n")
    client = tpu_client()
    name = f"{ZONE}/nodes/stubborn"
    creating = client.create_node(parent=ZONE, node_id="stubborn",
                                  node={**node("v4-8"), "metadata": {"startup-script": script}})
    resilient_emulator.advance(CREATE)
    creating.result(timeout=30)
    pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip()))
    assert pid in resilient_emulator.tpu.processes()  # seen although it left the script's process group
    deleting = client.delete_node(name=name)
    resilient_emulator.advance(DELETE)
    deleting.result(timeout=30)
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(")")[1]
             .split()[0] == "Z")
    assert resilient_emulator.tpu.processes() == []


@MANUAL
def test_unavailable_faults_strike_tpu_and_logging_calls(resilient_emulator):
    """``unavailable`` with ``service: tpu`` / ``service: logging``: the k-th matching call answers
    UNAVAILABLE (the hooks must retry through it); other services' calls are not counted."""
    from airflow_provider_resilient.testing.emulator_clients import logging_gapic_client

    name = _created_on_the_clock(resilient_emulator, "flaky", "v4-8")
    resilient_emulator.add_fault({"kind": "unavailable", "service": "tpu", "match": {"nth": 2}})
    resilient_emulator.add_fault({"kind": "unavailable", "service": "tpu", "calls": "list"})
    resilient_emulator.add_fault({"kind": "unavailable", "service": "logging", "calls": "list"})
    client = tpu_client()
    assert client.get_node(name=name, retry=None).state.name == "READY"  # the 1st Get passes
    with pytest.raises(exceptions.ServiceUnavailable):
        client.get_node(name=name, retry=None)
    assert client.get_node(name=name, retry=None).state.name == "READY"  # times: 1 -- once only
    with pytest.raises(exceptions.ServiceUnavailable):
        client.list_nodes(parent=ZONE, retry=None)
    assert [n.name for n in client.list_nodes(parent=ZONE, retry=None)] == [name]
    logs = logging_gapic_client()
    with pytest.raises(exceptions.ServiceUnavailable):
        list(logs.list_log_entries(resource_names=["projects/test-project"], retry=None))
    assert isinstance(list(logs.list_log_entries(resource_names=["projects/test-project"], retry=None)), list)
    assert [f["fired"] for f in resilient_emulator.faults.faults()] == [1, 1, 1]


@MANUAL
def test_a_quota_fault_refuses_the_create_call_itself(resilient_emulator):
    """``quota`` with ``service: tpu``: CreateNode / CreateQueuedResource answer 429 RESOURCE_EXHAUSTED
    naming the metric (unlike a stockout, which fails the create operation); Vertex AI creates are not
    counted by it."""
    metric = "tpu.googleapis.com/TPUV4sPerProjectPerZone"
    resilient_emulator.add_fault({"kind": "quota", "service": "tpu", "quota_metric": metric, "times": 2})
    client = tpu_client()
    with pytest.raises(exceptions.ResourceExhausted, match="TPUV4sPerProjectPerZone"):
        client.create_node(parent=ZONE, node_id="q1", node=node("v4-8"), retry=None)
    queued = {"tpu": {"node_spec": [{"parent": ZONE, "node_id": "q2", "node": node("v4-8")}]}}
    with pytest.raises(exceptions.ResourceExhausted, match="quota metrics exceed quota limits"):
        client.create_queued_resource(parent=ZONE, queued_resource_id="q2", queued_resource=queued, retry=None)
    assert [n.name for n in client.list_nodes(parent=ZONE)] == []
    _created_on_the_clock(resilient_emulator, "q3", "v4-8")  # times: 2 -- spent
    assert [f["fired"] for f in resilient_emulator.faults.faults()] == [2]


@MANUAL
def test_a_second_delete_of_a_deleting_node_is_refused_and_the_first_delete_still_finishes(resilient_emulator):
    """A cleared task's next try and the old trigger's on_kill both delete the node, in either order; the one
    that asked first waits on its operation, which must finish (it once was replaced, and never did)."""
    client = tpu_client()
    name = _created_on_the_clock(resilient_emulator, "twice", "v4-8")
    first = client.delete_node(name=name)
    with pytest.raises(exceptions.FailedPrecondition, match="DELETING"):
        client.delete_node(name=name)
    resilient_emulator.advance(DELETE)
    first.result(timeout=30)
    with pytest.raises(exceptions.NotFound):
        client.get_node(name=name)
    assert resilient_emulator.tpu.processes() == []


@MANUAL
def test_deleting_a_node_while_it_is_created_aborts_the_create_operation(resilient_emulator):
    client = tpu_client()
    creating = client.create_node(parent=ZONE, node_id="young", node=node("v4-8"))  # CREATING: the clock stands
    deleting = client.delete_node(name=f"{ZONE}/nodes/young")
    resilient_emulator.advance(DELETE)
    deleting.result(timeout=30)
    with pytest.raises(exceptions.Aborted, match="being deleted"):
        creating.result(timeout=30)


def test_one_node_whose_advance_fails_stops_no_other_node(resilient_emulator, monkeypatch, caplog):
    """Issue 13 item 6: an error in one resource (a bug, a workload that cannot start) never stops the engine."""
    backend = resilient_emulator.tpu
    real = backend._advance

    def advance(run, now):
        if run.name.endswith("/broken"):
            raise RuntimeError("this node's advance is broken")
        real(run, now)

    monkeypatch.setattr(backend, "_advance", advance)
    client = tpu_client()
    client.create_node(parent=ZONE, node_id="broken", node=node("v4-8"))
    healthy = client.create_node(parent=ZONE, node_id="healthy", node=node("v4-8")).result(timeout=30)
    assert healthy.state.name == "READY"
    assert "booted worker 0" in _booted(resilient_emulator, "healthy")
    assert client.get_node(name=f"{ZONE}/nodes/broken").state.name == "CREATING"  # stuck alone
    assert caplog.text.count("emulator: advancing") == 1  # logged once, not once per tick


def test_a_hang_freezes_a_workload_made_of_short_lived_processes(tmp_path):
    """A ``hang`` stops the newest process under the startup script. In a shell loop of 1 ms ``sleep``s that process
    often ends between the look and the SIGSTOP: the emulator stops the then newest one instead, so the loop never
    steps again (CI once saw a TPU hang slip past this way: the workload kept stepping, no hang was ever judged)."""
    import os
    import signal
    import subprocess

    from airflow_provider_resilient.testing.emulator.tpu.workers import Worker, _descendants, _state

    proc = subprocess.Popen(["/bin/sh", "-c", "while :; do sleep 0.001; done"], start_new_session=True)
    worker = Worker(0, None, tmp_path / "log", proc)  # type: ignore[arg-type]  # signals need no metadata server
    try:
        for _ in range(30):
            assert worker.signal_workload(signal.SIGSTOP)
            tree = [proc.pid, *_descendants(proc.pid)]
            assert any(_state(pid) in ("T", "t") for pid in tree), [(pid, _state(pid)) for pid in tree]
            os.killpg(proc.pid, signal.SIGCONT)  # the loop and its sleep: one group
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
