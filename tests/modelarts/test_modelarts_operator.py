"""The ModelArts operator's arguments, refused before anything is submitted, and the body one attempt submits."""

from __future__ import annotations

import subprocess
import sys

import pytest

from airflow_provider_resilient.compat import AirflowFailException
from airflow_provider_resilient.operators.modelarts import ResilientModelArtsTrainingJobOperator
from airflow_provider_resilient.specs.modelarts import JOB_RETRY_ANNOTATION, attempt_job_name, build_training_job

GOOD = {"task_id": "train", "name": "digits", "flavor_id": "modelarts.vm.cpu.8u", "command": "python3 train.py",
        "image_url": "swr.cn-north-4.myhuaweicloud.com/team/train:1", "checkpoint_dir": "obs://bucket/run/ckpt",
        "job_retry_num": 2}


def test_good_arguments_make_an_operator() -> None:
    op = ResilientModelArtsTrainingJobOperator(**GOOD, fallbacks=[{"flavor_id": "modelarts.vm.cpu.2u"}])
    assert op.PLATFORM == "modelarts" and op._conn_id() == "huaweicloud_default"


@pytest.mark.parametrize(("change", "field"), [
    ({"flavor_id": "n1-standard-4"}, "flavor_id"),
    ({"job_retry_num": 0}, "job_retry_num"),
    ({"job_retry_num": 129}, "job_retry_num"),
    ({"job_retry_num": True}, "job_retry_num"),
    ({"job_retry_num": "3"}, "job_retry_num"),
    ({"checkpoint_dir": "gs://bucket/ckpt"}, "checkpoint_dir"),
    ({"region": "us-central1"}, "region"),
    ({"name": "digits job!"}, "name"),
    ({"node_count": 0}, "node_count"),
    ({"code_dir": "/bucket/code/"}, "command"),
    ({"command": None, "image_url": None}, "command"),
    ({"annotations": {JOB_RETRY_ANNOTATION: "3"}}, "annotations"),
    ({"environments": {"A": 1}}, "environments"),
    ({"fallbacks": [{"region": "cn-east-3"}]}, "fallbacks[0]"),
    ({"fallbacks": [{"flavor_id": "big"}]}, "fallbacks[0].flavor_id"),
    ({"fallbacks": [{"flavour_id": "modelarts.vm.cpu.2u"}]}, "fallbacks[0].flavour_id"),
    ({"huaweicloud_conn_id": ""}, "huaweicloud_conn_id"),
    ({"event_topic": "projects/p/topics/resilient-events", "deferrable": True}, "event_topic"),
])
def test_a_bad_argument_is_refused_naming_it(change: dict, field: str) -> None:
    with pytest.raises(AirflowFailException) as raised:
        ResilientModelArtsTrainingJobOperator(**{**GOOD, **change})
    assert field in str(raised.value)


def test_a_templated_argument_is_judged_after_rendering() -> None:
    op = ResilientModelArtsTrainingJobOperator(**{**GOOD, "checkpoint_dir": "{{ var.value.ckpt }}"})
    assert op.checkpoint_dir.startswith("{{")


def test_an_attempt_body_carries_the_annotation_the_environment_and_the_fallback() -> None:
    from huaweicloudsdkcore.utils.http_utils import sanitize_for_serialization
    from huaweicloudsdkmodelarts.v1 import CreateTrainingJobRequest

    name = attempt_job_name("digits", "airflow-dag=d,airflow-task=t", 3)
    assert name.startswith("digits-") and name.endswith("-a3") and len(name) <= 64
    body = build_training_job(job_name=name, description=None, workspace_id=None, flavor_id="modelarts.vm.cpu.2u",
                              node_count=2, pool_id="pool-1", command="python3 train.py", image_url="img",
                              code_dir=None, boot_file=None, engine=None, parameters={"epochs": "3"},
                              environments={"RESILIENT_ATTEMPT": "3"}, inputs=None, outputs=None, annotations=None,
                              job_retry_num=2)
    assert body["metadata"] == {"name": name, "annotations": {JOB_RETRY_ANNOTATION: "2"}}
    assert body["spec"]["resource"] == {"flavor_id": "modelarts.vm.cpu.2u", "node_count": 2, "pool_id": "pool-1"}
    # what the SDK sends is the body as it is
    assert sanitize_for_serialization(CreateTrainingJobRequest(body=dict(body)).body) == body


def test_the_operator_imports_no_huawei_cloud_library() -> None:
    code = ("import sys, airflow_provider_resilient.operators.modelarts, airflow_provider_resilient.sensors.modelarts,"
            " airflow_provider_resilient.triggers.modelarts;"
            " bad = [m for m in sys.modules if m.startswith(('huaweicloudsdk', 's3fs', 'boto'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_missing_connection_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_resilient.hooks.modelarts import ResilientModelArtsHook

    monkeypatch.delenv("AIRFLOW_CONN_NO_SUCH_HUAWEI", raising=False)
    with pytest.raises(Exception, match=r"no_such_huawei.*does not exist.*--conn-type huaweicloud"):
        _ = ResilientModelArtsHook("no_such_huawei").settings
    monkeypatch.setenv("AIRFLOW_CONN_HALF_HUAWEI", '{"conn_type": "huaweicloud", "login": "ak", "extra": {}}')
    with pytest.raises(ValueError, match=r"password, extra\.region, extra\.project_id"):
        _ = ResilientModelArtsHook("half_huawei").settings


def test_a_trigger_reads_the_connection_on_its_event_loop_and_hands_it_to_the_hook(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow 3.1's triggerer corrupts its channel to its supervisor when a connection with a password is read in a
    worker thread (the secret-masking message is sent from that thread): the trigger reads it on the loop
    (``aget_connection``) and the hook, built with it, reads nothing more."""
    import asyncio

    from airflow_provider_resilient.hooks import modelarts as hooks

    monkeypatch.setenv("AIRFLOW_CONN_LOOP_HUAWEI", '{"conn_type": "huaweicloud", "login": "ak", "password": "sk", '
                                                   '"extra": {"region": "cn-north-4", "project_id": "p1"}}')
    connection = asyncio.run(hooks.aget_connection("loop_huawei"))

    def no_lookup(*_: object) -> None:
        raise AssertionError("the hook read the connection again")

    monkeypatch.setattr("airflow.sdk.BaseHook.get_connection", no_lookup)
    settings = hooks.ResilientModelArtsHook("loop_huawei", connection=connection).settings
    assert (settings["ak"], settings["sk"], settings["project_id"]) == ("ak", "sk", "p1")
