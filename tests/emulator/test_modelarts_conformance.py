"""The real Huawei Cloud SDK (``huaweicloudsdkmodelarts``'s ModelArtsClient, pointed at the emulator by endpoint)
against the emulated ModelArts: training jobs behave as the API reference and the "Training Fault Tolerance Check"
page (https://support.huaweicloud.com/intl/en-us/usermanual-standard-modelarts/modelarts_trouble_0003.html) say."""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

import pytest
import requests

pytest.importorskip("huaweicloudsdkmodelarts")

from huaweicloudsdkcore.auth.credentials import BasicCredentials
from huaweicloudsdkcore.exceptions.exceptions import ClientRequestException, ServerResponseException
from huaweicloudsdkmodelarts.v1 import (
    CountTrainingJobsByTagsRequest,
    CreateTmsTagsRequest,
    CreateTrainingJobRequest,
    CreateTrainJobTagsRequest,
    DeleteTmsTagsRequest,
    DeleteTrainingJobRequest,
    DeleteTrainJobTagsRequest,
    Filter,
    Job,
    JobActionType,
    JobAlgorithm,
    JobEngine,
    JobMetadata,
    JobSearches,
    ListTrainingJobEventsRequest,
    ListTrainingJobsByTagsRequest,
    ListTrainingJobsRequest,
    ListTrainingJobStagesRequest,
    ListTrainingJobTagsRequest,
    ListTrainingJobTasksRequest,
    ModelArtsAsyncClient,
    ModelArtsClient,
    ResourceInstancesFilterReq,
    ShowTrainingJobDetailsRequest,
    ShowTrainingJobFlavorsRequest,
    ShowTrainJobTagsRequest,
    Spec,
    SpecResource,
    StopTrainingJobRequest,
    TmsTag,
)

from airflow_provider_resilient.testing.emulator.modelarts import catalog

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
MANUAL = pytest.mark.resilient_emulator(clock="manual", time_scale=1.0)
RETRY = "fault-tolerance/job-retry-num"
PY = sys.executable


def sdk_client(cls: Any, emulator: Any) -> Any:
    """A ``ModelArtsClient`` (or ``ModelArtsAsyncClient``) built as users build it, on the emulator's endpoint."""
    credentials = BasicCredentials(catalog.FAKE_ACCESS_KEY, catalog.FAKE_SECRET_KEY, catalog.FAKE_PROJECT_ID)
    return cls.new_builder().with_credentials(credentials).with_endpoints([emulator.modelarts_url]).build()


@pytest.fixture
def client(resilient_emulator: Any) -> Any:
    return sdk_client(ModelArtsClient, resilient_emulator)


def job(code: str = "print('ok')", *, name: str = "train", nodes: int = 1, retries: str | None = None,
        env: dict[str, str] | None = None, flavor: str = "modelarts.vm.cpu.8u") -> Job:
    annotations = {RETRY: retries} if retries is not None else None
    return Job(kind="job", metadata=JobMetadata(name=name, annotations=annotations),
               algorithm=JobAlgorithm(command=f"{PY} -c \"{code}\"", environments=env,
                                      engine=JobEngine(image_url="swr.cn-north-4.myhuaweicloud.com/team/train:1")),
               spec=Spec(resource=SpecResource(flavor_id=flavor, node_count=nodes)))


def create(client: Any, body: Job) -> str:
    return client.create_training_job(CreateTrainingJobRequest(body=body)).metadata.id


def wait_phase(emulator: Any, job_id: str, phases: set[str], timeout: float = 8.0) -> str:
    """Wait (without API calls, which faults may strike) until the job's status.phase is one of ``phases``."""
    deadline = time.monotonic() + timeout
    while True:
        with emulator.modelarts.lock:
            phase = emulator.modelarts.runs[job_id].phases()[0]
        if phase in phases:
            return phase
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} is still {phase}, wanted {sorted(phases)}")
        time.sleep(0.01)


def details(client: Any, job_id: str) -> Any:
    return client.show_training_job_details(ShowTrainingJobDetailsRequest(training_job_id=job_id))


def events(client: Any, job_id: str, **query: Any) -> list[str]:
    reply = client.list_training_job_events(ListTrainingJobEventsRequest(training_job_id=job_id, limit=100, **query))
    return [e.message for e in reply.events]


def stage_records(client: Any, job_id: str) -> list[Any]:
    return client.list_training_job_stages(ListTrainingJobStagesRequest(training_job_id=job_id)).running_records


# ---------------------------------------------------------------------- the plain lifecycle
def test_a_job_runs_its_nodes_as_processes_to_completed(client, resilient_emulator, tmp_path):
    out = tmp_path / "env"
    code = (f"import os; open('{out}-' + os.environ['VC_TASK_INDEX'], 'w').write(' '.join(os.environ.get(k, '-') "
            "for k in ('MA_NUM_HOSTS', 'VC_TASK_INDEX', 'MA_VJ_NAME', 'MA_CURRENT_IP', 'MA_JOB_DIR', 'MINE')))")
    created = client.create_training_job(CreateTrainingJobRequest(body=job(code, nodes=2, env={"MINE": "yes"})))
    job_id = created.metadata.id
    assert str(uuid.UUID(job_id)) == job_id and created.status.phase == "Creating"
    assert abs(created.metadata.create_time / 1000 - time.time()) < 60 and created.metadata.name == "train"

    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Completed"
    got = details(client, job_id)
    assert (got.status.phase, got.status.secondary_phase) == ("Completed", "Completed")
    assert [(t.task, t.exit_code) for t in got.status.task_statuses] == [("worker-0", 0), ("worker-1", 0)]
    assert got.status.start_time >= created.metadata.create_time and got.status.duration >= 0
    assert len(got.status.running_records) == 1 and got.status.running_records[0].end_reason == "completed"
    for index in (0, 1):
        hosts, task, vj, ip, job_dir, mine = (out.parent / f"env-{index}").read_text().split()
        assert (hosts, task, vj, ip, mine) == ("2", str(index), f"ma-job-{job_id}", "127.0.0.1", "yes")
        assert job_dir.endswith("user-job-dir")
    [record] = stage_records(client, job_id)
    assert record.record_order == 1
    assert [s.name for s in record.stages] == ["scheduling", "preparing", "running", "end"]
    assert [s.stage_order for s in record.stages] == [1, 2, 3, 4]
    tasks = client.list_training_job_tasks(ListTrainingJobTasksRequest(training_job_id=job_id)).body
    assert [t.task for t in tasks] == ["worker-0", "worker-1"]
    said = events(client, job_id)
    assert said[0] == "Training job created." and said[-1] == "Training job executed."
    assert "[worker-1] Training finished. Exit code 0." in said
    assert resilient_emulator.calls.count("CreateTrainingJob") == 1
    assert resilient_emulator.calls.count("ShowTrainingJobDetails") == 1


def test_the_phases_move_creating_pending_running(resilient_emulator, client):
    job_id = create(client, job("import time; time.sleep(30)"))
    seen = []
    deadline = time.monotonic() + 8
    while "Running" not in seen and time.monotonic() < deadline:
        status = details(client, job_id).status
        pair = (status.phase, status.secondary_phase)
        if not seen or seen[-1] != pair[0]:
            seen.append(pair[0])
        assert pair in {("Creating", "Creating"), ("Pending", "Queuing"), ("Running", "Running")}
    assert seen[-1] == "Running" and seen == sorted(seen, key=["Creating", "Pending", "Running"].index)
    client.stop_training_job(StopTrainingJobRequest(training_job_id=job_id,
                                                    body=JobActionType(action_type="terminate")))


def test_stop_terminates_the_job_and_kills_its_processes(client, resilient_emulator):
    job_id = create(client, job("import time; time.sleep(60)", nodes=2))
    wait_phase(resilient_emulator, job_id, {"Running"})
    deadline = time.monotonic() + 5
    while len(resilient_emulator.processes()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(resilient_emulator.processes()) == 2
    stopped = client.stop_training_job(StopTrainingJobRequest(training_job_id=job_id,
                                                              body=JobActionType(action_type="terminate")))
    assert stopped.status.phase in ("Terminating", "Terminated")
    assert resilient_emulator.processes() == []
    assert wait_phase(resilient_emulator, job_id, {"Terminated"}) == "Terminated"
    assert details(client, job_id).status.secondary_phase == "Terminated"
    with pytest.raises(ClientRequestException) as refused:
        client.stop_training_job(StopTrainingJobRequest(training_job_id=job_id,
                                                        body=JobActionType(action_type="terminate")))
    assert (refused.value.status_code, refused.value.error_code) == (409, "ModelArts.2796")
    listed = requests.get(f"{resilient_emulator.control_url}/modelarts-jobs", timeout=5).json() \
        if resilient_emulator.control_url else resilient_emulator.modelarts.summary()
    assert [(j["id"], j["phase"]) for j in listed] == [(job_id, "Terminated")]
    client.delete_training_job(DeleteTrainingJobRequest(training_job_id=job_id))
    with pytest.raises(ClientRequestException) as gone:
        details(client, job_id)
    assert (gone.value.status_code, gone.value.error_code) == (400, "ModelArts.2775")
    assert resilient_emulator.modelarts.summary() == []


def test_tags_searches_and_flavors(client, resilient_emulator):
    first = create(client, job(name="train-a"))
    second = create(client, job(name="train-b"))
    other = create(client, job(name="eval-c"))
    client.create_train_job_tags(CreateTrainJobTagsRequest(training_job_id=first, body=CreateTmsTagsRequest(
        tags=[TmsTag(key="team", value="ml"), TmsTag(key="run", value="a")])))
    client.create_train_job_tags(CreateTrainJobTagsRequest(training_job_id=second, body=CreateTmsTagsRequest(
        tags=[TmsTag(key="team", value="ml")])))
    shown = client.show_train_job_tags(ShowTrainJobTagsRequest(training_job_id=first)).tags
    assert {(t.key, t.value) for t in shown} == {("team", "ml"), ("run", "a")}
    project_tags = client.list_training_job_tags(ListTrainingJobTagsRequest()).tags
    assert {t.key: t.values for t in project_tags} == {"team": ["ml"], "run": ["a"]}

    def by_tags(**body: Any) -> set[str]:
        reply = client.list_training_jobs_by_tags(ListTrainingJobsByTagsRequest(
            body=ResourceInstancesFilterReq(**body)))
        assert reply.total_count == len(reply.resources)
        return {r.resource_id for r in reply.resources}

    assert by_tags(tags=[{"key": "team", "values": ["ml"]}]) == {first, second}
    assert by_tags(tags=[{"key": "team", "values": []}, {"key": "run", "values": ["a"]}]) == {first}
    assert by_tags(matches=[{"key": "resource_name", "value": "train-"}]) == {first, second}
    assert by_tags(without_any_tag=True) == {other}
    count = client.count_training_jobs_by_tags(CountTrainingJobsByTagsRequest(
        body={"tags": [{"key": "team", "values": ["ml"]}]}))
    assert count.total_count == 2
    client.delete_train_job_tags(DeleteTrainJobTagsRequest(training_job_id=first, body=DeleteTmsTagsRequest(
        tags=[TmsTag(key="run", value="a")])))
    assert by_tags(tags=[{"key": "run", "values": []}]) == set()

    searched = client.list_training_jobs(ListTrainingJobsRequest(body=JobSearches(
        filters=[Filter(key="name", operator="like", value=["train-"])])))
    assert searched.total == 3 and searched.count == 2
    assert {j.metadata.id for j in searched.items} == {first, second}
    exact = client.list_training_jobs(ListTrainingJobsRequest(body=JobSearches(
        filters=[Filter(key="name", operator="in", value=["eval-c"])])))
    assert [j.metadata.name for j in exact.items] == ["eval-c"]

    flavors = client.show_training_job_flavors(ShowTrainingJobFlavorsRequest()).flavors
    assert {"modelarts.vm.cpu.2u", "modelarts.vm.cpu.8u"} <= {f.flavor_id for f in flavors}
    assert {f.flavor_type for f in flavors} == {"CPU", "GPU", "Ascend"}
    gpus = client.show_training_job_flavors(ShowTrainingJobFlavorsRequest(flavor_type="GPU")).flavors
    assert gpus and all(f.flavor_type == "GPU" and f.flavor_info.gpu.unit_num >= 1 for f in gpus)
    names = [c.method for c in resilient_emulator.calls.list()]
    assert names.count("ListTrainingJobsByTags") == 5 and "ShowTrainingJobFlavors" in names


def test_the_async_client_reads_a_job(client, resilient_emulator):
    job_id = create(client, job())
    async_client = sdk_client(ModelArtsAsyncClient, resilient_emulator)
    future = async_client.show_training_job_details_async(ShowTrainingJobDetailsRequest(training_job_id=job_id))
    got = future.result()  # the SDK's FutureSdkResponse (requests on a thread pool), not asyncio
    assert got.metadata.id == job_id and got.status.phase in ("Creating", "Pending", "Running", "Completed")
    missing = async_client.show_training_job_details_async(ShowTrainingJobDetailsRequest(training_job_id="nope"))
    with pytest.raises(ClientRequestException) as refused:
        missing.result()
    assert refused.value.error_code == "ModelArts.2775"


# ---------------------------------------------------------------------- errors
def test_errors_arrive_as_sdk_exceptions_with_modelarts_codes(client, resilient_emulator):
    with pytest.raises(ClientRequestException) as missing:
        details(client, "00000000-0000-4000-8000-000000000000")
    assert (missing.value.status_code, missing.value.error_code) == (400, "ModelArts.2775")
    with pytest.raises(ClientRequestException) as retries:
        create(client, job(retries="129"))
    assert (retries.value.status_code, retries.value.error_code) == (400, "ModelArts.2788")
    assert "job-retry-num" in retries.value.error_msg
    with pytest.raises(ClientRequestException) as flavor:
        create(client, job(flavor="modelarts.vm.cpu.999u"))
    assert flavor.value.error_code == "ModelArts.2781"
    create(client, job(name="once"))
    with pytest.raises(ClientRequestException) as duplicate:
        create(client, job(name="once"))
    assert duplicate.value.error_code == "ModelArts.2751"

    resilient_emulator.add_fault({"kind": "quota", "service": "modelarts", "match": {"display_name": "big-*"}})
    with pytest.raises(ClientRequestException) as quota:
        create(client, job(name="big-1"))
    assert (quota.value.status_code, quota.value.error_code) == (400, "ModelArts.2815")
    assert "modelarts.vm.cpu.8u" in quota.value.error_msg
    job_id = create(client, job(name="big-2"))  # times: 1

    resilient_emulator.add_fault({"kind": "unavailable", "service": "modelarts", "match": {"nth": 1}})
    with pytest.raises(ServerResponseException) as unavailable:
        details(client, job_id)
    assert (unavailable.value.status_code, unavailable.value.error_code) == (500, "ModelArts.0010")
    assert details(client, job_id).metadata.name == "big-2"
    codes = [c.code for c in resilient_emulator.calls.list("CreateTrainingJob")]
    assert codes == ["ModelArts.2788", "ModelArts.2781", "OK", "ModelArts.2751", "ModelArts.2815", "OK"]


def test_an_unsigned_request_is_refused(resilient_emulator):
    url = f"{resilient_emulator.modelarts_url}/v2/{catalog.FAKE_PROJECT_ID}/training-job-flavors"
    reply = requests.get(url, timeout=5)
    assert reply.status_code == 401 and reply.json()["error_code"] == "ModelArts.0201"
    signed = requests.get(url, timeout=5, headers={"X-Project-Id": "f" * 32,
                                                   "Authorization": "SDK-HMAC-SHA256 Access=A, SignedHeaders=host, "
                                                                    "Signature=00"})
    assert signed.status_code == 404 and signed.json()["error_code"] == "ModelArts.2786"


def test_the_emulator_exports_a_huaweicloud_connection(resilient_emulator):
    conn = json.loads(resilient_emulator.env()["AIRFLOW_CONN_HUAWEICLOUD_DEFAULT"])
    assert conn["conn_type"] == "huaweicloud" and conn["login"] and conn["password"]
    assert conn["extra"] == {"region": "cn-north-4", "project_id": catalog.FAKE_PROJECT_ID,
                             "endpoint": resilient_emulator.modelarts_url}
    assert len(conn["extra"]["project_id"]) == 32 and int(conn["extra"]["project_id"], 16) >= 0


def test_the_control_api_lists_modelarts_jobs_for_leak_checks():
    from airflow_provider_resilient.testing.emulator.config import EmulatorConfig
    from airflow_provider_resilient.testing.emulator.server import Emulator

    with Emulator(config=EmulatorConfig(time_scale=0.002), storage=False, control_port=0) as emulator:
        job_id = create(sdk_client(ModelArtsClient, emulator), job("import time; time.sleep(30)", name="leak"))
        wait_phase(emulator, job_id, {"Running"})
        [listed] = requests.get(f"{emulator.control_url}/modelarts-jobs", timeout=5).json()
        assert listed == {"id": job_id, "project_id": catalog.FAKE_PROJECT_ID, "name": "leak", "phase": "Running",
                          "secondary_phase": "Running", "running_records": 1, "stage_records": 1}
        emulator.reset()
        assert requests.get(f"{emulator.control_url}/modelarts-jobs", timeout=5).json() == []
        assert emulator.processes() == []
