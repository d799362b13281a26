"""ResilientTPUWorkloadOperator against the emulated Cloud TPU: maintenance waited out or re-created,
crashes restarted in place, permanent errors failing, and never a node left behind."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from airflow.sdk.exceptions import AirflowFailException
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.clients import tpu_client
from airflow_provider_resilient.operators.tpu import STATE_KEY, ResilientTPUWorkloadOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy

from .test_vertex_operator_unit import TI, Store

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
WORKLOAD = Path(__file__).resolve().parents[2] / "dags" / "workloads" / "train_digits.py"
FAST = Backoff(initial_seconds=0.05, max_seconds=0.2)
POLICY = RetryPolicy(backoff=FAST, failover_backoff=FAST,
                     budgets={"maintenance_wait": Budget(max_seconds=30, backoff=FAST),
                              "stockout": Budget(max_retries=3, backoff=FAST)})
ZONE = "projects/test-project/locations/us-central2-b"


def context() -> dict[str, Any]:
    return {"task_state_store": Store(), "ti": TI(), "run_id": "manual__2026-01-01T00:00:00+00:00"}


def operator(command: str, **kwargs: Any) -> ResilientTPUWorkloadOperator:
    defaults: dict[str, Any] = dict(
        task_id="train", project_id="test-project", zone="us-central2-b", accelerator_type="v4-16",
        runtime_version="tpu-ubuntu2204-base", command=command, checkpoint_dir="gs://tpu-ckpt/run/checkpoints",
        checkpoint_marker="COMMITTED", poll_interval=0.05, resilience_policy=POLICY, max_worker_restarts=2,
        heartbeat_seconds=0.1)
    defaults.update(kwargs)
    op = ResilientTPUWorkloadOperator(**defaults)
    return op


def train(epochs: int = 12) -> str:
    return (f"{sys.executable} {WORKLOAD} --epochs {epochs} --checkpoint-every 3 --epoch-seconds 0.05 "
            '--checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"')


def nodes_left(emulator) -> list[str]:
    return [n.name for n in tpu_client().list_nodes(parent=ZONE)]


def test_maintenance_recovered_then_terminated_resumes_on_a_new_node(resilient_emulator):
    resilient_emulator.storage.create_bucket("tpu-ckpt")
    resilient_emulator.add_fault({"kind": "maintenance", "after_seconds": 0.6, "grace_seconds": 0.2,
                                  "match": {"nth": 1}})
    resilient_emulator.add_fault({"kind": "maintenance", "recover": False, "at_step": 6, "grace_seconds": 0.2,
                                  "match": {"nth": 1}})
    ctx = context()
    result = operator(train()).execute(ctx)
    attempts = result["attempts"]
    classes = [i["failure"]["failure_class"] for a in attempts for i in a.get("incidents", [])]
    actions = [i["decision"]["action"] for a in attempts for i in a.get("incidents", [])]
    assert "maintenance_event" in classes and "wait" in actions and "recreate_node" in actions
    assert len(attempts) == 2 and attempts[1]["resumed_from_step"] >= 3
    terminate = next(i for a in attempts for i in a.get("incidents", []) if i["decision"]["action"] == "recreate_node")
    assert terminate["failure"]["node_state"] == "TERMINATED"
    assert result["checkpoint"]["step"] == 12
    ledger = ctx["ti"].xcom["goodput"]
    assert ledger["basis"] == "steps" and 0 < ledger["goodput"] < 1 and ledger["recovery"] > 0
    assert nodes_left(resilient_emulator) == [] and resilient_emulator.tpu.processes() == []
    assert ctx["task_state_store"].data[STATE_KEY]["phase"] == "succeeded"


def test_a_crash_is_restarted_in_place_by_the_runner(resilient_emulator):
    resilient_emulator.storage.create_bucket("tpu-ckpt")
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "worker": 0, "at_step": 3})
    result = operator(train(9), accelerator_type="v4-8").execute(context())
    assert len(result["attempts"]) == 1  # the runner absorbed it: no new node
    (log,) = (resilient_emulator.work_dir / "tpu").rglob("worker-0.log")
    assert "exit status 139 is transient_crash: restart 1 of 2" in log.read_text()
    assert "final test accuracy" in log.read_text()


def test_a_permanent_error_fails_and_deletes_the_node(resilient_emulator):
    with pytest.raises(AirflowFailException, match="permanent-user-error"):
        operator("exit 1", accelerator_type="v4-8").execute(context())
    assert nodes_left(resilient_emulator) == []


def test_a_stockout_falls_back_to_another_zone(resilient_emulator):
    resilient_emulator.add_fault({"kind": "stockout"})
    result = operator("echo ok", accelerator_type="v4-8", fallbacks=[{"zone": "europe-west4-a"}]).execute(context())
    assert "europe-west4-a" in result["node_name"]
    assert [c.resource.split("/")[3] for c in resilient_emulator.calls.list("CreateNode")] == [
        "us-central2-b", "europe-west4-a"]


def decisions(result: dict) -> list[tuple[str, str]]:
    return [(i["failure"]["failure_class"], i["decision"]["action"]) for a in result["attempts"]
            for i in a.get("incidents", [])]


@pytest.mark.parametrize(("fault", "expected"), [
    ({"kind": "preemption", "after_seconds": 0.3, "grace_seconds": 0.05}, ("preemption", "recreate_node")),
    ({"kind": "unhealthy", "health": "TIMEOUT", "after_seconds": 0.3}, ("node_unhealthy", "recreate_node")),
])
def test_preempted_or_unhealthy_nodes_are_re_created(resilient_emulator, fault, expected):
    resilient_emulator.add_fault({**fault, "match": {"nth": 1}})
    result = operator("sleep 1", accelerator_type="v4-8").execute(context())
    assert decisions(result) == [expected] and len(result["attempts"]) == 2
    assert [c.code for c in resilient_emulator.calls.list("CreateNode")] == ["OK", "OK"]
    assert nodes_left(resilient_emulator) == []


def test_a_hung_workload_is_detected_by_its_stalled_step(resilient_emulator):
    resilient_emulator.add_fault({"kind": "hang", "after_seconds": 0.5, "match": {"nth": 1}})
    op = operator("python3 -c 'import time\nfor i in range(40): print(\"step\", i, flush=True); time.sleep(0.1)'",
                  accelerator_type="v4-8", hang_timeout=1.0)
    result = op.execute(context())
    assert decisions(result)[0][0] == "hang"
    assert nodes_left(resilient_emulator) == []


def test_a_queued_resource_never_provisioned_fails_over_to_another_zone(resilient_emulator):
    resilient_emulator.add_fault({"kind": "never_provision", "match": {"nth": 1}})
    result = operator("echo ok", accelerator_type="v4-8", valid_until_duration=1,
                      fallbacks=[{"zone": "europe-west4-a"}]).execute(context())
    assert decisions(result) == [("queue_timeout", "recreate_node")]
    assert "europe-west4-a" in result["node_name"]
    assert list(tpu_client().list_queued_resources(parent=ZONE)) == []
    assert nodes_left(resilient_emulator) == []


def test_a_killed_task_deletes_its_node(resilient_emulator):
    op = operator("sleep 60", accelerator_type="v4-8")

    class Killed(BaseException):
        pass

    def kill_while_watching(seconds: float) -> None:
        if op._live_node and nodes_left(resilient_emulator):
            op.on_kill()
            raise Killed

    op._sleep = kill_while_watching
    with pytest.raises(Killed):
        op.execute(context())
    assert nodes_left(resilient_emulator) == [] and resilient_emulator.tpu.processes() == []


def test_keep_node_keeps_the_last_node_and_links_point_at_it(resilient_emulator):
    ctx = context()
    result = operator("echo ok", accelerator_type="v4-8", keep_node=True).execute(ctx)
    assert nodes_left(resilient_emulator) == [result["node_name"]]
    node = result["node_name"].rsplit("/", 1)[1]
    assert ctx["ti"].xcom["_link_TPUNodeLink"].endswith(f"/us-central2-b/{node}?project=test-project")
    assert "tpu.nodes.terminate" in unquote(ctx["ti"].xcom["_link_TPUAuditLogLink"])


@pytest.mark.parametrize(("command", "kwargs", "field"), [
    ("echo ok", {"zone": "us-central2"}, "zone"), ("echo ok", {"accelerator_type": "v4-12"}, "accelerator_type"),
    ("", {}, "command"), ("echo ok", {"tpu_node_id": "Bad_Id"}, "tpu_node_id")])
def test_bad_arguments_fail_before_any_node_exists(resilient_emulator, command, kwargs, field):
    with pytest.raises(AirflowFailException, match=f"{field}:"):
        operator(command, **kwargs).execute(context())
    assert resilient_emulator.calls.list() == []


FAULTS = st.sampled_from([
    {"kind": "maintenance", "after_seconds": 0.1, "grace_seconds": 0.05},
    {"kind": "maintenance", "recover": False, "after_seconds": 0.1, "grace_seconds": 0.05},
    {"kind": "preemption", "after_seconds": 0.1, "grace_seconds": 0.05},
    {"kind": "unhealthy", "after_seconds": 0.1},
    {"kind": "stockout"},
    {"kind": "crash", "exit_code": 139, "after_seconds": 0.1},
])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(FAULTS, max_size=3), command=st.sampled_from(["sleep 0.3", "exit 1"]))
def test_no_node_is_left_whatever_happens(resilient_emulator, plan, command):
    """Property (bounded): after the task ends, by success or failure, no node it created remains."""
    resilient_emulator.reset()
    for fault in plan:
        resilient_emulator.add_fault(fault)
    with contextlib.suppress(AirflowFailException):  # a failed task must clean up too
        operator(command, accelerator_type="v4-8").execute(context())
    assert nodes_left(resilient_emulator) == []
