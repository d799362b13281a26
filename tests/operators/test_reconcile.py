"""ResilientReconcileOperator against the emulator: what tasks left behind is released by its owner's state."""

from __future__ import annotations

import pytest

from airflow_provider_resilient.compat import TaskDeferred
from airflow_provider_resilient.operators.reconcile import ResilientReconcileOperator, owner_states
from airflow_provider_resilient.specs.common import LABEL_ATTEMPT
from airflow_provider_resilient.supervisor.reconcile import GONE, Owner
from airflow_provider_resilient.testing.emulator_clients import tpu_client, vertex_job_client

from .test_tpu_operator import nodes_left, wait_until
from .test_tpu_operator import operator as tpu_operator
from .test_vertex_operator_unit import context
from .test_vertex_operator_unit import operator as vertex_operator

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
RUN = "manual__2026-01-01T00:00:00+00:00"


def reconciler(**kwargs):
    return ResilientReconcileOperator(task_id="reconcile", project_id="test-project", regions=["us-central1"],
                                      zones=["us-central2-b"], **kwargs)


def states(table):
    """A ``get_task_states`` answering from ``{(dag_id, run_id): {task_key: state}}``."""
    return lambda dag_id, run_ids: {r: table[(dag_id, r)] for r in run_ids if (dag_id, r) in table}


def live_jobs(emulator):
    return [j.name for j in emulator_jobs() if j.state.name in ("JOB_STATE_RUNNING", "JOB_STATE_PENDING",
                                                                 "JOB_STATE_QUEUED")]


def emulator_jobs():
    return list(vertex_job_client("us-central1").list_custom_jobs(
        parent="projects/test-project/locations/us-central1"))


def leave_a_deferred_job_behind():
    with pytest.raises(TaskDeferred) as deferred:
        vertex_operator("import time; time.sleep(600)", deferrable=True).execute(context())
    return deferred.value.trigger.job_name


@pytest.mark.parametrize(("table", "released"), [
    ({("adhoc_airflow", RUN): {"train": "failed"}}, True),
    ({("adhoc_airflow", RUN): {"train": "success"}}, True),
    ({}, True),  # the DAG run was deleted
    ({("adhoc_airflow", RUN): {"train": "deferred"}}, False),
    ({("adhoc_airflow", RUN): {"train": None}}, False),  # cleared: its next try ends the attempt itself
])
def test_a_job_left_behind_is_cancelled_when_its_task_instance_is_finished_or_gone(resilient_emulator, table,
                                                                                  released):
    job = leave_a_deferred_job_behind()
    resilient_emulator.wait_for_state(job, ["JOB_STATE_RUNNING"], 60)
    result = reconciler().reconcile(states(table))
    assert [r["name"] for r in result["released"]] == ([job] if released else [])
    if released:
        resilient_emulator.wait_for_state(job, ["JOB_STATE_CANCELLED"], 60)
    else:
        assert resilient_emulator.vertex.runs[job].job.state.name == "JOB_STATE_RUNNING"


def test_a_job_that_ends_while_the_states_are_read_is_not_released(resilient_emulator):
    """The listing finds the job running; it then succeeds and its task finishes (here: the job is cancelled while
    the states are read, and the task reads "success"). Judged on that first listing the reconciler would cancel
    an ended job -- the stack's stalled-triggerer test saw that call; judged on a listing made after the states
    it releases nothing."""
    job = leave_a_deferred_job_behind()
    resilient_emulator.wait_for_state(job, ["JOB_STATE_RUNNING"], 60)
    finished = states({("adhoc_airflow", RUN): {"train": "success"}})

    def ended_then_finished(dag_id, run_ids):
        vertex_job_client("us-central1").cancel_custom_job(name=job)
        resilient_emulator.wait_for_state(job, ["JOB_STATE_CANCELLED"], 60)
        return finished(dag_id, run_ids)

    cancels = len(resilient_emulator.calls.list("CancelCustomJob"))
    assert reconciler().reconcile(ended_then_finished)["released"] == []
    assert len(resilient_emulator.calls.list("CancelCustomJob")) == cancels + 1  # the test's own cancel only


def test_a_tuning_job_left_behind_is_cancelled_through_the_vertex_backend(resilient_emulator):
    """A deferred study whose task instance failed: its HyperparameterTuningJob is listed with the CustomJobs and
    cancelled as one (not handed to the TPU backend)."""
    import sys

    from airflow_provider_resilient.operators.vertex_ai_tuning import ResilientHyperparameterTuningJobOperator

    tune = ResilientHyperparameterTuningJobOperator(
        task_id="train", project_id="test-project", region="us-central1", display_name="tune",
        study_spec={"metrics": [{"metric_id": "accuracy", "goal": "MAXIMIZE"}],
                    "parameters": [{"parameter_id": "lr", "discrete_value_spec": {"values": [0.1, 0.2]}}]},
        max_trial_count=2, base_output_dir="gs://unit-bucket/tune", deferrable=True, poll_interval=0.05,
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "python:3.11",
                                               "command": [sys.executable, "-c", "import time; time.sleep(600)"]}}])
    with pytest.raises(TaskDeferred) as deferred:
        tune.execute(context())
    job = deferred.value.trigger.job_name
    result = reconciler().reconcile(states({("adhoc_airflow", RUN): {"train": "failed"}}))
    assert [r["name"] for r in result["released"]] == [job]
    resilient_emulator.wait_for_state(job, ["JOB_STATE_CANCELLED"], 60)


def test_a_node_left_behind_is_deleted_unless_kept_and_unowned_resources_are_reported(resilient_emulator):
    for keep in (False, True):  # two tasks of one run (one task's retry would find the other's node by its labels)
        with pytest.raises(TaskDeferred):
            tpu_operator("sleep 600", deferrable=True, keep_node=keep, task_id="kept" if keep else "train",
                         checkpoint_dir=f"gs://tpu-ckpt/run-{keep}/checkpoints",
                         tpu_node_id=f"left-{str(keep).lower()}").execute(context())
    vertex_job_client("us-central1").create_custom_job(parent="projects/test-project/locations/us-central1",
                                                       custom_job={"display_name": "by hand", "labels": {
                                                           LABEL_ATTEMPT: "1"}, "job_spec": {"worker_pool_specs": [{
                                                               "machine_spec": {"machine_type": "n1-standard-4"},
                                                               "replica_count": 1, "container_spec": {
                                                                   "image_uri": "x", "command": ["sleep", "600"]}}]}})
    failed = states({("adhoc_airflow", RUN): {"train": "failed", "kept": "failed"}})
    result = reconciler(dry_run=True).reconcile(failed)
    assert len(result["released"]) == 1 and len(result["unowned"]) == 1 and len(nodes_left()) == 2
    result = reconciler().reconcile(failed)
    (released,) = result["released"]
    assert released["name"].endswith("/nodes/left-false-a1") and "failed" in released["why"]
    wait_until(lambda: [n.rsplit("/", 1)[1] for n in nodes_left()] == ["left-true-a1"])
    assert tpu_client().get_node(name=released["name"].replace("left-false", "left-true")).state.name == "READY"


def test_owner_states_reads_mapped_task_keys_and_vanished_runs():
    owners = {Owner("d", "t", "r1", -1), Owner("d", "t", "r1", 2), Owner("d", "t", "r2", -1)}
    calls = []

    def answer(dag_id, run_ids):
        calls.append((dag_id, run_ids))
        return {"r1": {"t": "running", "t_2": "failed"}}

    got = owner_states(owners, answer)
    assert got == {Owner("d", "t", "r1", -1): "running", Owner("d", "t", "r1", 2): "failed",
                   Owner("d", "t", "r2", -1): GONE}
    assert calls == [("d", ["r1", "r2"])]


# ------------------------------------------------------------------ ModelArts
def modelarts_reconciler(**kwargs):
    return ResilientReconcileOperator(task_id="reconcile", huaweicloud_conn_id="huaweicloud_default", **kwargs)


class _Gone(BaseException):
    """The task's process ending between two looks (not an Exception: the operator catches none of it)."""


def leave_a_deferred_modelarts_job_behind(task_id="train"):
    """A ModelArts task whose process went away after its first look at its job (deferred to a trigger that never
    runs here, or -- before Airflow 3.3, where the ModelArts operator watches from the worker -- killed between two
    looks): its training job stays live. Returns the job's resource name."""
    from airflow_provider_resilient.backends.modelarts import live_resources
    from airflow_provider_resilient.operators.modelarts import ResilientModelArtsTrainingJobOperator

    op = ResilientModelArtsTrainingJobOperator(
        task_id=task_id, name="left", flavor_id="modelarts.vm.cpu.8u", command="sleep 600",
        image_url="swr.cn-north-4.myhuaweicloud.com/t/train:1", checkpoint_dir=f"obs://ma-reconcile/{task_id}/ckpt",
        deferrable=True, poll_interval=0.05, min_defer_seconds=0.0)

    def gone(*_):
        raise _Gone

    op._sleep = gone
    with pytest.raises((TaskDeferred, _Gone)):
        op.execute(context())
    (job,) = live_resources(op._live_job)
    return job.name


def modelarts_phase(emulator, job):
    return {j["id"]: j["phase"] for j in emulator.modelarts.summary()}[job.rsplit("/", 1)[1]]


@pytest.mark.parametrize(("table", "released"), [
    ({("adhoc_airflow", RUN): {"train": "failed"}}, True),
    ({("adhoc_airflow", RUN): {"train": "success"}}, True),
    ({}, True),  # the DAG run was deleted
    ({("adhoc_airflow", RUN): {"train": "deferred"}}, False),
    ({("adhoc_airflow", RUN): {"train": None}}, False),  # cleared: its next try ends the attempt itself
], ids=["failed", "success", "run-deleted", "deferred", "cleared"])
def test_a_modelarts_job_left_behind_is_stopped_when_its_task_instance_is_finished_or_gone(resilient_emulator, table,
                                                                                          released):
    job = leave_a_deferred_modelarts_job_behind()
    wait_until(lambda: modelarts_phase(resilient_emulator, job) == "Running")
    result = modelarts_reconciler().reconcile(states(table))
    assert [r["name"] for r in result["released"]] == ([job] if released else [])
    if released:
        why = result["released"][0]["why"]
        assert why == ("its task instance is " + table[("adhoc_airflow", RUN)]["train"] if table else
                       f"its task instance no longer exists (DAG run {RUN} was deleted)"), why
        wait_until(lambda: modelarts_phase(resilient_emulator, job) == "Terminated")
    else:
        assert modelarts_phase(resilient_emulator, job) == "Running" and result["kept"] == 1


def test_a_dry_run_stops_no_modelarts_job_and_an_ended_job_is_not_listed(resilient_emulator):
    job = leave_a_deferred_modelarts_job_behind()
    wait_until(lambda: modelarts_phase(resilient_emulator, job) == "Running")
    failed = states({("adhoc_airflow", RUN): {"train": "failed"}})
    assert [r["name"] for r in modelarts_reconciler(dry_run=True).reconcile(failed)["released"]] == [job]
    assert modelarts_phase(resilient_emulator, job) == "Running"
    assert [r["name"] for r in modelarts_reconciler().reconcile(failed)["released"]] == [job]
    wait_until(lambda: modelarts_phase(resilient_emulator, job) == "Terminated")
    assert modelarts_reconciler().reconcile(failed) == {"released": [], "kept": 0, "unowned": []}


def test_one_reconciler_sweeps_vertex_ai_and_modelarts_alike(resilient_emulator):
    custom_job = leave_a_deferred_job_behind()
    training_job = leave_a_deferred_modelarts_job_behind()
    resilient_emulator.wait_for_state(custom_job, ["JOB_STATE_RUNNING"], 60)
    both = ResilientReconcileOperator(task_id="reconcile", project_id="test-project", regions=["us-central1"],
                                      huaweicloud_conn_id="huaweicloud_default")
    result = both.reconcile(states({("adhoc_airflow", RUN): {"train": "success"}}))
    assert sorted(r["name"] for r in result["released"]) == sorted([custom_job, training_job])
    resilient_emulator.wait_for_state(custom_job, ["JOB_STATE_CANCELLED"], 60)
    wait_until(lambda: modelarts_phase(resilient_emulator, training_job) == "Terminated")


def test_the_reconciler_needs_something_to_sweep():
    with pytest.raises(ValueError, match="huaweicloud_conn_id"):
        ResilientReconcileOperator(task_id="reconcile")
    with pytest.raises(ValueError, match="need the project_id"):
        ResilientReconcileOperator(task_id="reconcile", regions=["us-central1"])
    assert modelarts_reconciler().project_id is None
