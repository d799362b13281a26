"""The real google-cloud-aiplatform clients against the emulator: the API behaves as Google documents it."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from google.api_core import exceptions
from google.cloud.aiplatform_v1.types import JobState
from google.protobuf import empty_pb2

from airflow_provider_resilient.testing.emulator_clients import vertex_job_async_client

from .conftest import PARENT, TERMINAL, custom_job, pool

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)


def test_create_get_list_by_label_cancel_delete(client, resilient_emulator):
    done = client.create_custom_job(parent=PARENT, custom_job=custom_job("print('done')", display_name="quick",
                                                                          labels={"team": "ml", "run": "a"}))
    slow = client.create_custom_job(parent=PARENT, custom_job=custom_job("import time; time.sleep(60)",
                                                                          display_name="slow", labels={"team": "ml"}))
    other = client.create_custom_job(parent="projects/test-project/locations/europe-west4",
                                     custom_job=custom_job(labels={"team": "ml"}))
    assert done.name.startswith(f"{PARENT}/customJobs/") and done.name.rsplit("/", 1)[1].isdigit()
    assert done.state == JobState.JOB_STATE_QUEUED and done.create_time is not None

    resilient_emulator.wait_for_state(done.name, ["JOB_STATE_SUCCEEDED"], 30)
    resilient_emulator.wait_for_state(slow.name, ["JOB_STATE_RUNNING"], 30)
    got = client.get_custom_job(name=done.name)
    assert got.state == JobState.JOB_STATE_SUCCEEDED
    assert got.start_time <= got.end_time and got.display_name == "quick" and dict(got.labels)["run"] == "a"

    def names(filter_text: str) -> set[str]:
        return {j.name for j in client.list_custom_jobs(request={"parent": PARENT, "filter": filter_text})}

    assert names("labels.team=ml") == {done.name, slow.name}  # the europe-west4 job is another parent
    assert names("labels.run:*") == {done.name}
    assert names("labels.team=ml AND NOT labels.run:*") == {slow.name}
    assert names("state=JOB_STATE_RUNNING OR state=JOB_STATE_QUEUED") == {slow.name}
    assert names('display_name="quick"') == {done.name}
    first, second = got.create_time, client.get_custom_job(name=slow.name).create_time
    assert first < second
    assert names(f'create_time>="{first.isoformat()}"') == {done.name, slow.name}
    assert names(f'create_time>"{first.isoformat()}"') == {slow.name}
    assert names(f'create_time>"{(first + (second - first) / 2).isoformat()}"') == {slow.name}  # between them
    assert names(f'create_time<"{second.isoformat()}"') == {done.name}
    assert names(f'create_time>"{second.isoformat()}"') == set()  # after the last job
    assert names(f'create_time>="{first.isoformat()}" AND labels.run:*') == {done.name}
    pager = client.list_custom_jobs(request={"parent": PARENT, "page_size": 1})
    assert len(list(pager)) == 2  # pages through next_page_token

    client.cancel_custom_job(name=slow.name)
    assert client.get_custom_job(name=slow.name).state in (JobState.JOB_STATE_CANCELLING,
                                                          JobState.JOB_STATE_CANCELLED)
    resilient_emulator.wait_for_state(slow.name, ["JOB_STATE_CANCELLED"], 30)
    cancelled = client.get_custom_job(name=slow.name)
    assert cancelled.error.code == 1  # google.rpc.Code.CANCELLED

    operation = client.delete_custom_job(name=done.name)
    operation.result(timeout=10)
    with pytest.raises(exceptions.NotFound):
        client.get_custom_job(name=done.name)
    # The operation is a resource of google.longrunning.Operations, which the client's mixin reads.
    op_name = operation.operation.name
    assert op_name.startswith(f"{done.name}/operations/")
    fetched = client.get_operation(request={"name": op_name})
    assert fetched.name == op_name and fetched.done and not fetched.HasField("error")
    assert fetched.response.Is(empty_pb2.Empty.DESCRIPTOR)
    assert [(c.method, c.resource, c.code) for c in resilient_emulator.calls.list("GetOperation")] == [
        ("GetOperation", op_name, "OK")]
    with pytest.raises(exceptions.NotFound):
        client.get_operation(request={"name": f"{done.name}/operations/999"})
    assert other.name.startswith("projects/test-project/locations/europe-west4/")
    methods = [c.method for c in resilient_emulator.calls.list()]
    assert methods.count("CreateCustomJob") == 3 and "DeleteCustomJob" in methods


def test_errors_arrive_as_google_api_core_exceptions(client, resilient_emulator):
    with pytest.raises(exceptions.NotFound):
        client.get_custom_job(name=f"{PARENT}/customJobs/404")
    with pytest.raises(exceptions.InvalidArgument, match="worker_pool_specs"):
        client.create_custom_job(parent=PARENT, custom_job={"display_name": "x", "job_spec": {}})
    with pytest.raises(exceptions.InvalidArgument, match="filter"):
        client.list_custom_jobs(request={"parent": PARENT, "filter": "labels.a=(("})
    running = client.create_custom_job(parent=PARENT, custom_job=custom_job("import time; time.sleep(60)"))
    with pytest.raises(exceptions.FailedPrecondition, match="terminal state"):
        client.delete_custom_job(name=running.name)
    client.cancel_custom_job(name=running.name)
    resilient_emulator.wait_for_state(running.name, ["JOB_STATE_CANCELLED"], 30)
    with pytest.raises(exceptions.FailedPrecondition):
        client.cancel_custom_job(name=running.name)
    codes = [c.code for c in resilient_emulator.calls.list()]
    assert {"NOT_FOUND", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OK"} <= set(codes)


def _job_with(change) -> dict:
    job = custom_job()
    change(job)
    return job


def _tuning_job(**fields) -> dict:
    job = {"display_name": "tune", "max_trial_count": 2, "parallel_trial_count": 1,
           "study_spec": {"metrics": [{"metric_id": "accuracy", "goal": "MAXIMIZE"}],
                          "parameters": [{"parameter_id": "lr",
                                          "double_value_spec": {"min_value": 0.1, "max_value": 0.3}}],
                          "algorithm": "GRID_SEARCH"},
           "trial_job_spec": custom_job()["job_spec"]}
    job.update(fields)
    return {k: v for k, v in job.items() if v is not None}


def _first_pool(job: dict) -> dict:
    return job["job_spec"]["worker_pool_specs"][0]


@pytest.mark.parametrize(("custom", "tuning", "field"), [
    pytest.param(custom_job(pools=[pool("pass", replicas=2)]), None,
                 "custom_job.job_spec.worker_pool_specs[0].replica_count", id="first-pool-replica-count-2"),
    pytest.param(_job_with(lambda j: _first_pool(j).pop("machine_spec")), None,
                 "custom_job.job_spec.worker_pool_specs[0].machine_spec.machine_type", id="no-machine-type"),
    pytest.param(_job_with(lambda j: _first_pool(j).pop("container_spec")), None,
                 "custom_job.job_spec.worker_pool_specs[0].container_spec", id="no-container-or-python-spec"),
    pytest.param(custom_job(labels={"Team": "ml"}), None, "custom_job.labels['Team']", id="bad-label-key"),
    pytest.param(custom_job(labels={"team": "ML Team"}), None, "custom_job.labels['team']", id="bad-label-value"),
    pytest.param(None, _tuning_job(study_spec=None), "hyperparameter_tuning_job.study_spec",
                 id="tuning-job-without-study-spec"),
])
def test_invalid_specs_get_invalid_argument_naming_the_field(client, resilient_emulator, custom, tuning, field):
    with pytest.raises(exceptions.InvalidArgument) as info:
        if custom is not None:
            client.create_custom_job(parent=PARENT, custom_job=custom)
        else:
            client.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job=tuning)
    assert info.value.message.startswith(f"List of found errors: 1.Field: {field}; Message: ")
    assert [c.code for c in resilient_emulator.calls.list()] == ["INVALID_ARGUMENT"]
    assert not resilient_emulator.vertex.runs and not resilient_emulator.vertex.tuning  # nothing was created


def test_async_client(resilient_emulator):
    async def wait(client, name: str, states: list[str]) -> str:
        state = ""
        for _ in range(1500):
            state = (await client.get_custom_job(name=name)).state.name
            if state in states:
                break
            await asyncio.sleep(0.02)
        return state

    async def scenario() -> dict:
        client = vertex_job_async_client("us-central1")
        seen: dict = {}
        with pytest.raises(exceptions.InvalidArgument, match=re.escape("custom_job.job_spec.worker_pool_specs")):
            await client.create_custom_job(parent=PARENT, custom_job={"display_name": "empty", "job_spec": {}})
        job = await client.create_custom_job(parent=PARENT, custom_job=custom_job(labels={"k": "v"}))
        slow = await client.create_custom_job(parent=PARENT, custom_job=custom_job("import time; time.sleep(60)"))
        seen["state"] = await wait(client, job.name, TERMINAL)
        seen["listed"] = [j.name async for j in await client.list_custom_jobs(request={"parent": PARENT,
                                                                                       "filter": "labels.k=v"})]
        seen["slow running"] = await wait(client, slow.name, ["JOB_STATE_RUNNING"])
        await client.cancel_custom_job(name=slow.name)
        seen["slow"] = await wait(client, slow.name, TERMINAL)
        seen["slow error"] = (await client.get_custom_job(name=slow.name)).error.code
        operation = await client.delete_custom_job(name=job.name)
        await operation.result()
        with pytest.raises(exceptions.NotFound):
            await client.get_custom_job(name=job.name)
        seen["name"], seen["slow name"] = job.name, slow.name
        return seen

    seen = asyncio.run(scenario())
    assert seen["state"] == "JOB_STATE_SUCCEEDED" and seen["listed"] == [seen["name"]]
    assert seen["slow running"] == "JOB_STATE_RUNNING"
    assert resilient_emulator.job_events(seen["slow name"])[-3:] == ["RUNNING", "CANCELLING", "CANCELLED"]
    assert seen["slow"] == "JOB_STATE_CANCELLED" and seen["slow error"] == 1  # google.rpc.Code.CANCELLED
    assert resilient_emulator.processes() == []
    assert [c.code for c in resilient_emulator.calls.list("CreateCustomJob")] == ["INVALID_ARGUMENT", "OK", "OK"]
    assert [c.code for c in resilient_emulator.calls.list("CancelCustomJob")] == ["OK"]


def test_hyperparameter_tuning_job_runs_trials_with_their_parameters(client, resilient_emulator):
    code = ("import json, os, sys; lr = float(sys.argv[1].split('=')[1]); "
            "open(os.environ['CLOUD_ML_HP_METRIC_FILE'], 'a').write(json.dumps({'accuracy': 1 - lr}) + '\\n'); "
            "print('trial', os.environ['AIP_TRIAL_ID'], os.environ['AIP_CHECKPOINT_DIR'])")
    spec = custom_job(code, base_output_dir="gs://bucket/hp")["job_spec"]
    tuning = client.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job={
        "display_name": "tune", "max_trial_count": 3, "parallel_trial_count": 1,
        "study_spec": {"metrics": [{"metric_id": "accuracy", "goal": "MAXIMIZE"}],
                       "parameters": [{"parameter_id": "lr",
                                       "double_value_spec": {"min_value": 0.1, "max_value": 0.3}}],
                       "algorithm": "GRID_SEARCH"},
        "trial_job_spec": spec,
    })
    for _ in range(3000):
        got = client.get_hyperparameter_tuning_job(name=tuning.name)
        if got.state.name in TERMINAL:
            break
        resilient_emulator._stop.wait(0.01)
    assert got.state == JobState.JOB_STATE_SUCCEEDED
    assert [t.state.name for t in got.trials] == ["SUCCEEDED"] * 3
    assert [round(t.parameters[0].value, 3) for t in got.trials] == [0.1, 0.2, 0.3]
    assert [round(t.final_measurement.metrics[0].value, 3) for t in got.trials] == [0.9, 0.8, 0.7]
    assert [j.name for j in client.list_hyperparameter_tuning_jobs(parent=PARENT)] == [tuning.name]
    client.delete_hyperparameter_tuning_job(name=tuning.name).result(timeout=10)
    with pytest.raises(exceptions.NotFound):
        client.get_hyperparameter_tuning_job(name=tuning.name)


def until(emulator, predicate, timeout: float = 30.0, what: str = "condition") -> None:
    """Wait (on the emulator's clock tick) until ``predicate()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        emulator._stop.wait(emulator.config.tick_seconds)


def create_tuning(client, code: str, **fields):
    return client.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job=_tuning_job(
        trial_job_spec=custom_job(code)["job_spec"], **fields))


@pytest.mark.resilient_emulator(time_scale=0.002, latencies={"cancel_seconds": 10**6})
def test_cancelling_a_tuning_job_stops_its_running_trial(client, resilient_emulator):
    tuning = create_tuning(client, "import time; time.sleep(60)")
    until(resilient_emulator, resilient_emulator.processes, what="the first trial's process")
    client.cancel_hyperparameter_tuning_job(name=tuning.name)
    assert resilient_emulator.processes() == []  # killed by the cancel call itself
    got = client.get_hyperparameter_tuning_job(name=tuning.name)
    assert got.state == JobState.JOB_STATE_CANCELLING  # for the (here very long) cancel latency
    assert [t.state.name for t in got.trials] == ["STOPPING"]
    client.cancel_hyperparameter_tuning_job(name=tuning.name)  # cancelling again is accepted, as for CustomJobs
    with pytest.raises(exceptions.FailedPrecondition, match="terminal state"):
        client.delete_hyperparameter_tuning_job(name=tuning.name)


@pytest.mark.resilient_emulator(time_scale=0.002, latencies={"cancel_seconds": 10**6})
def test_parallel_trials_run_at_once_and_a_cancel_stops_them_all(client, resilient_emulator):
    tuning = create_tuning(client, "import time; time.sleep(60)", max_trial_count=3, parallel_trial_count=2)
    until(resilient_emulator, lambda: len(resilient_emulator.processes()) == 2, what="two trials' processes")
    got = client.get_hyperparameter_tuning_job(name=tuning.name)
    assert [t.state.name for t in got.trials] == ["ACTIVE", "ACTIVE"]  # the third waits for a free slot
    client.cancel_hyperparameter_tuning_job(name=tuning.name)
    assert resilient_emulator.processes() == []
    got = client.get_hyperparameter_tuning_job(name=tuning.name)
    assert [t.state.name for t in got.trials] == ["STOPPING", "STOPPING"]


def test_a_cancelled_tuning_job_ends_cancelled_with_its_stopped_trial_infeasible(client, resilient_emulator):
    tuning = create_tuning(client, "import time; time.sleep(60)")
    until(resilient_emulator, resilient_emulator.processes, what="the first trial's process")
    client.cancel_hyperparameter_tuning_job(name=tuning.name)
    assert resilient_emulator.wait_for_state(tuning.name, TERMINAL, 30) == "JOB_STATE_CANCELLED"
    got = client.get_hyperparameter_tuning_job(name=tuning.name)
    assert got.error.code == 1 and got.error.message == "CANCELED"
    assert got.start_time <= got.end_time
    (trial,) = got.trials  # no trial started after the cancel
    assert trial.state.name == "INFEASIBLE" and trial.end_time >= trial.start_time
    assert trial.infeasible_reason == "The trial was stopped because its HyperparameterTuningJob was cancelled."
    assert resilient_emulator.job_events(tuning.name) == [
        "QUEUED", "RUNNING", "trial 1 ACTIVE", "CANCELLING", "trial 1 STOPPING", "trial 1 INFEASIBLE", "CANCELLED"]
    assert resilient_emulator.processes() == []
    with pytest.raises(exceptions.FailedPrecondition, match="already in state JOB_STATE_CANCELLED"):
        client.cancel_hyperparameter_tuning_job(name=tuning.name)


def test_tuning_jobs_list_by_label_filter(client, resilient_emulator):
    a = create_tuning(client, "pass", labels={"team": "a"})
    b = create_tuning(client, "pass", labels={"team": "b", "exp": "1"})
    create_tuning(client, "pass")

    def names(filter_text: str) -> set[str]:
        return {j.name for j in client.list_hyperparameter_tuning_jobs(request={"parent": PARENT,
                                                                                "filter": filter_text})}

    assert names("labels.team=a") == {a.name}
    assert names("labels.team:*") == {a.name, b.name}
    assert names("labels.team:* AND NOT labels.team=a") == {b.name}
    assert names("labels.exp=1 OR labels.team=a") == {a.name, b.name}
    assert names("labels.team=c") == set()


def test_a_tuning_job_fails_once_max_failed_trial_count_trials_failed(client, resilient_emulator):
    code = "import os; raise SystemExit(1 if os.environ['AIP_TRIAL_ID'] in ('1', '3') else 0)"
    tuning = create_tuning(client, code, max_trial_count=5, max_failed_trial_count=2)
    assert resilient_emulator.wait_for_state(tuning.name, TERMINAL, 60) == "JOB_STATE_FAILED"
    got = client.get_hyperparameter_tuning_job(name=tuning.name)
    assert [t.state.name for t in got.trials] == ["INFEASIBLE", "SUCCEEDED", "INFEASIBLE"]  # no 4th trial
    exit_1 = "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error."
    assert got.trials[0].infeasible_reason == got.trials[2].infeasible_reason == exit_1
    assert got.error.code == 9  # RpcCodes.trials_failed
    assert got.error.message == ("2 of 3 trials failed, reaching max_failed_trial_count 2. "
                                 f"The last failed trial, 3: {exit_1}")
