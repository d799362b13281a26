"""``ResilientAIPlatformTrainingJobOperator`` end to end on the emulator: a DAG written for AI Platform Training --
the Google provider's own example call of ``MLEngineStartTrainingJobOperator``, import line changed -- runs its
training package (built and uploaded as gcloud's ``--package-path`` did, fetched by the emulated Vertex AI from
``package_uris``) through seed 000/001's failures, resuming from the latest checkpoint; and what it refuses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_resilient.compat import AirflowFailException
from airflow_provider_resilient.operators.ai_platform import ResilientAIPlatformTrainingJobOperator
from airflow_provider_resilient.policy import Backoff, RetryPolicy

from ..platform_time import PlatformTime, manual
from .test_vertex_operator_unit import context

#: The platform's time is stepped with the operator's (tests/platform_time.py). A crash fails the job at once:
#: the platform's own retries of it are the emulator's rules (tests/emulator/test_platform_rules.py).
pytestmark = manual(platform={"transient_job_retries": 0})
TRAINER = Path(__file__).parents[2] / "dags" / "workloads" / "legacy_trainer"
TRAINER_URI = "gs://airflow-system-tests-resources/ml-engine/trainer-0.2.tar.gz"  # the provider example's
JOB_DIR = "gs://bucket-example-gcp-mlengine/job-dir"
FAST = RetryPolicy(backoff=Backoff(initial_seconds=0.05, max_seconds=0.1),
                   failover_backoff=Backoff(initial_seconds=0.05, max_seconds=0.1))


def upload_trainer(emulator: Any) -> None:
    """``trainer-0.2.tar.gz`` (``dags/workloads/legacy_trainer/build.py``) into the emulated Cloud Storage."""
    import runpy

    for bucket in ("airflow-system-tests-resources", "bucket-example-gcp-mlengine"):
        emulator.storage.create_bucket(bucket)
    emulator.storage_filesystem().pipe_file(TRAINER_URI[5:], runpy.run_path(str(TRAINER / "build.py"))["sdist"]())


def the_providers_example(**overrides: Any) -> ResilientAIPlatformTrainingJobOperator:
    """apache/airflow tests/system/providers/google/cloud/ml_engine/example_mlengine.py@00c4d758, the training
    call verbatim but for the class (and runtime 2.11 with our short epochs and backoffs)."""
    arguments: dict[str, Any] = dict(
        task_id="training", project_id="example-project", region="us-central1",
        job_id="training-job-20260101T000000-digits", runtime_version="2.11", python_version="3.7",
        job_dir=JOB_DIR, package_uris=[TRAINER_URI], training_python_module="trainer.task",
        training_args=["--epochs", "12", "--epoch-seconds", "0.02"], labels={"job_type": "training"},
        resilience_policy=FAST, poll_interval=5.0, min_defer_seconds=0.0, deferrable=False)
    arguments.update(overrides)
    return ResilientAIPlatformTrainingJobOperator(**arguments)


def replica_logs(emulator: Any) -> str:
    return "\n".join(p.read_text() for p in sorted(emulator.work_dir.rglob("workerpool0-0.log")))


def test_the_providers_example_runs_through_seed_000_failures_and_resumes(resilient_emulator):
    upload_trainer(resilient_emulator)
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "at_step": 6, "match": {"nth": 1}})
    ctx = context()
    result = PlatformTime(resilient_emulator).wire(the_providers_example()).execute(ctx)
    attempts = result["attempts"]
    assert [(i["failure"]["failure_class"], i["decision"]["action"]) for a in attempts for i in a["incidents"]] == [
        ("transient_crash", "resubmit")]
    assert attempts[1]["resumed_from_step"] >= 6 and result["checkpoint"]["step"] == 12
    logs = replica_logs(resilient_emulator)
    # The package came from package_uris, fetched and unpacked by the emulated Vertex AI -- not from this tree.
    sources = set(re.findall(r"trainer from (\S+)", logs))
    assert sources and all("/packages/" in s and str(TRAINER) not in s for s in sources), sources
    assert "TF_CONFIG task: chief 0" in logs  # runtime 2.1 and later: 'chief', as AI Platform said too
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    job = vertex_job_client("us-central1").get_custom_job(name=result["job_name"])
    assert job.display_name == "training-job-20260101T000000-digits" and job.labels["job_type"] == "training"


def test_a_whole_training_input_with_a_custom_container_keeps_master_in_tf_config(resilient_emulator):
    """A ``config.yaml`` body: CUSTOM tier, a custom container (with its command), 2 workers; TF_CONFIG names the
    primary ``master``, as AI Platform did for custom containers without ``useChiefInTfConfig``."""
    import sys

    show = "import json, os; t = json.loads(os.environ['TF_CONFIG'])['task']; print('task', t['type'], t['index'])"
    body = {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": "2",
            "masterConfig": {"imageUri": "gcr.io/example-project/trainer:latest",
                             "containerCommand": [sys.executable, "-c", show]}}
    result = PlatformTime(resilient_emulator).wire(ResilientAIPlatformTrainingJobOperator(
        task_id="t", project_id="example-project", region="us-central1", job_id="custom", training_input=body,
        base_output_dir="gs://unit-bucket/custom", resilience_policy=FAST, poll_interval=5.0,
        min_defer_seconds=0.0)).execute(context())
    assert result["state"] == "JOB_STATE_SUCCEEDED"
    assert "task master 0" in replica_logs(resilient_emulator)


def test_dry_run_submits_nothing(resilient_emulator):
    result = the_providers_example(mode="DRY_RUN").execute(context())
    pool = result["custom_job"]["job_spec"]["worker_pool_specs"][0]
    assert result["state"] == "DRY_RUN" and pool["python_package_spec"]["executor_image_uri"].endswith(
        "/tf-cpu.2-11:latest")
    assert pool["python_package_spec"]["args"][-2:] == ["--job-dir", JOB_DIR]
    assert resilient_emulator.calls.list("CreateCustomJob") == []


@pytest.mark.parametrize(("overrides", "lines"), [
    ({"runtime_version": "1.15", "python_version": "2.7"}, ["trainingInput.pythonVersion: '2.7'"]),
    ({"runtime_version": "2.10"}, ["trainingInput.runtimeVersion: '2.10' has no Vertex AI training container: "
                                   "use '2.11'"]),
    ({"scale_tier": "BASIC", "master_type": "complex_model_l_gpu"},
     ["trainingInput.masterType: applies with scaleTier CUSTOM only"]),
    ({"scale_tier": "CUSTOM", "master_type": "complex_model_l_gpu"},
     ["trainingInput.masterType: 'complex_model_l_gpu': it had 8 NVIDIA Tesla K80s"]),
    ({"scheduling": {"priority": 10}, "hyperparameters": {"enableTrialEarlyStopping": True, "params": [
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1}]}},
     ["trainingInput.hyperparameters.enableTrialEarlyStopping: automated stopping cannot be carried over",
      "trainingInput.scheduling.priority: Vertex AI has no job priority"]),
    ({"hyperparameters": {"algorithm": "GRID_SEARCH", "params": [
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1}]}},
     ["study_spec.parameters[0].double_value_spec: GRID_SEARCH needs every parameter INTEGER, CATEGORICAL or "
      "DISCRETE"]),
    ({"training_input": {"scaleTier": "BASIC", "stagingBucket": "gs://b"}}, ["trainingInput.stagingBucket: not a "
                                                                               "TrainingInput field"]),
    ({"mode": "TEST"}, ["mode: 'TEST': one of PRODUCTION, DRY_RUN"]),
])
def test_what_cannot_be_carried_over_is_refused_before_anything_is_submitted(overrides, lines):
    with pytest.raises(AirflowFailException) as raised:
        the_providers_example(**overrides)
    for line in lines:
        assert line in str(raised.value), str(raised.value)


def test_templated_arguments_are_judged_after_rendering():
    op = the_providers_example(runtime_version="{{ params.runtime }}")  # parses: judged once rendered
    op.runtime_version = "2.10"
    with pytest.raises(AirflowFailException, match=r"use '2\.11'"):
        op._validate()
    op.runtime_version = "2.11"
    op._validate()
    assert op.worker_pool_specs[0]["python_package_spec"]["executor_image_uri"].endswith("tf-cpu.2-11:latest")


def test_a_deferred_templated_job_resubmits_from_a_fresh_operator(resilient_emulator):
    """Deferrable (the old operator's ``deferrable=True``) with a templated argument: Airflow resumes the task in
    a fresh operator, rendered but never translated in that process -- the attempt after the crash must still be
    the translated job, not an empty one."""
    from .test_tpu_operator import run_deferred

    upload_trainer(resilient_emulator)
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "at_step": 6, "match": {"nth": 1}})
    platform = PlatformTime(resilient_emulator)

    def rendered() -> ResilientAIPlatformTrainingJobOperator:
        # The trigger looks every 0.05 s of real time while the platform's time passes (tests/platform_time.py).
        op = platform.wire(the_providers_example(runtime_version="{{ params.runtime }}", deferrable=True,
                                                 poll_interval=0.05))
        op.runtime_version = "2.11"  # what Airflow's render_template_fields does before execute / execute_complete
        return op

    with platform.passing():
        result = run_deferred(rendered, context())
    assert [a["incidents"][0]["decision"]["action"] for a in result["attempts"][:-1]] == ["resubmit"]
    assert result["attempts"][1]["resumed_from_step"] >= 6 and result["checkpoint"]["step"] == 12


def test_a_legacy_hyperparameter_study_runs_as_a_tuning_job_and_no_finished_trial_runs_again(resilient_emulator):
    """``hyperparameters`` with an open parameter: a HyperparameterTuningJob of the tuning operator's rules; the
    trial that crashes past the platform's retries is owed and run again from its own checkpoint, the other is not
    run again, and the best trial is returned by the legacy metric tag."""
    import sys

    workload = Path(__file__).parents[2] / "dags" / "workloads" / "train_digits.py"
    body = {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "jobDir": JOB_DIR, "region": "us-central1",
            "useChiefInTfConfig": True,
            "masterConfig": {"imageUri": "gcr.io/example-project/digits:latest", "containerCommand": [
                sys.executable, str(workload), "--epochs", "6", "--checkpoint-every", "2", "--epoch-seconds", "0.02"]},
            "hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy", "maxTrials": 2,
                                "algorithm": "GRID_SEARCH",
                                "params": [{"parameterName": "learning_rate", "type": "DISCRETE",
                                            "discreteValues": [0.001, 0.01]},
                                           {"parameterName": "seed", "type": "INTEGER", "minValue": 0,
                                            "maxValue": 0}]}}
    resilient_emulator.storage.create_bucket("bucket-example-gcp-mlengine")
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "at_step": 4, "step_source": "log",
                                  "log_pattern": r"saved checkpoint .*step_(\d+)",
                                  "match": {"display_name": "tuning-digits-trial-1"}})
    op = PlatformTime(resilient_emulator).wire(ResilientAIPlatformTrainingJobOperator(
        task_id="training", project_id="example-project", region="us-central1", job_id="tuning-digits",
        training_input=body, resilience_policy=FAST, poll_interval=5.0, min_defer_seconds=0.0, deferrable=False))
    result = op.execute(context())
    assert [(t["attempt"], t["parameters"], t["state"]) for t in result["trials"]] == [
        (1, {"learning_rate": 0.001}, "INFEASIBLE"), (1, {"learning_rate": 0.01}, "SUCCEEDED"),
        (2, {"learning_rate": 0.001}, "SUCCEEDED")]
    assert result["metric_id"] == "accuracy" and result["trials_rerun"] == 0
    assert result["best_trial"]["checkpoint"]["step"] == 6
    logs = "\n".join(p.read_text() for p in sorted(resilient_emulator.work_dir.rglob("trial-*/workerpool0-0.log")))
    assert "--seed=0" in logs or "seed" not in logs  # the fixed parameter is a flag of every trial
    assert max(int(m) for m in re.findall(r"resuming from step (\d+)", logs)) >= 4
    dry = ResilientAIPlatformTrainingJobOperator(task_id="dry", project_id="example-project", region="us-central1",
                                                 job_id="tuning-digits", training_input=body, mode="DRY_RUN")
    job = dry.execute(context())["hyperparameter_tuning_job"]
    assert job["max_trial_count"] == 2 and job["study_spec"]["metrics"] == [{"metric_id": "accuracy",
                                                                              "goal": "MAXIMIZE"}]
