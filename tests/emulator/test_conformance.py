"""The real google-cloud-aiplatform clients against the emulator: the API behaves as Google documents it."""

from __future__ import annotations

import asyncio

import pytest
from google.api_core import exceptions
from google.cloud.aiplatform_v1.types import JobState

from airflow_provider_resilient.clients import vertex_job_async_client

from .conftest import PARENT, TERMINAL, custom_job

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
    assert names(f'create_time>="{got.create_time.isoformat()}"') >= {done.name}
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


def test_async_client(resilient_emulator):
    async def scenario() -> tuple[str, list[str], str]:
        client = vertex_job_async_client("us-central1")
        job = await client.create_custom_job(parent=PARENT, custom_job=custom_job(labels={"k": "v"}))
        state = ""
        for _ in range(1500):
            state = (await client.get_custom_job(name=job.name)).state.name
            if state in TERMINAL:
                break
            await asyncio.sleep(0.02)
        listed = [j.name async for j in await client.list_custom_jobs(request={"parent": PARENT,
                                                                               "filter": "labels.k=v"})]
        operation = await client.delete_custom_job(name=job.name)
        await operation.result()
        with pytest.raises(exceptions.NotFound):
            await client.get_custom_job(name=job.name)
        return state, listed, job.name

    state, listed, name = asyncio.run(scenario())
    assert state == "JOB_STATE_SUCCEEDED" and listed == [name]


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
