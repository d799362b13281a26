"""A DAG written for AI Platform Training (shut down 2025-01-31), running on Vertex AI: the Google provider's own
example call of ``MLEngineStartTrainingJobOperator`` (its system test ``example_gcp_mlengine``), with the import
line changed to ``ResilientAIPlatformTrainingJobOperator`` and the runtime moved from 1.15 to 2.11 -- nothing else.

The ``package`` task does what ``gcloud ai-platform jobs submit training --package-path trainer`` did: it builds
the training package (``dags/workloads/legacy_trainer``, ``python -m trainer.task``) as a source distribution and
uploads it to ``package_uris``. The job's replica crashes with exit 139 (restarted in place by the platform, then
the job fails, as "Understanding the AI Platform Training service" describes), and the next attempt hits an
internal error; each new attempt resumes from the latest complete checkpoint under the job's ``jobDir``.

Run offline: ``.venv/bin/python scripts/run_demo.py --dag example_ai_platform_legacy_training`` (fault plan
dags/faults/ai_platform_legacy.yaml).
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow.sdk import dag, task
from demo_report import report_task

from airflow_provider_resilient.operators.ai_platform import ResilientAIPlatformTrainingJobOperator
from airflow_provider_resilient.policy import Backoff, RetryPolicy

TRAINER = Path(__file__).parent / "workloads" / "legacy_trainer"
OUTPUT = os.environ.get("RESILIENT_DEMO_LEGACY_OUTPUT", "gs://resilient-demo/legacy")
#: Seconds each epoch sleeps beside its work (the demo's pace; the tests run it faster: the story is in steps).
EPOCH_SECONDS = os.environ.get("RESILIENT_DEMO_EPOCH_SECONDS", "0.1")
JOB_DIR = OUTPUT + "/{{ run_id }}"
TRAINER_URI = JOB_DIR + "/packages/trainer-0.2.tar.gz"
TRAINER_PY_MODULE = "trainer.task"


@task
def package(uri: str) -> str:
    """Build ``trainer-0.2.tar.gz`` (``dags/workloads/legacy_trainer/build.py``) and upload it to ``uri``, as
    gcloud's ``--package-path`` did; returns ``uri``."""
    import runpy

    import fsspec

    with fsspec.open(uri, "wb") as out:
        out.write(runpy.run_path(str(TRAINER / "build.py"))["sdist"]())
    return uri


@dag(schedule=None, catchup=False, params={"model_name": "digits"},
     tags=["resilient", "vertex-ai", "ai-platform", "example"])
def example_ai_platform_legacy_training():
    uploaded = package(TRAINER_URI)
    # [START the Google provider's example call; only the class name and runtime_version changed]
    training = ResilientAIPlatformTrainingJobOperator(
        task_id="train",
        project_id=os.environ.get("RESILIENT_DEMO_PROJECT", "resilient-demo"),
        region="us-central1",
        job_id="training-job-{{ ts_nodash }}-{{ params.model_name }}",
        runtime_version="2.11",  # was "1.15": its container (tf-cpu.1-15) is past end of availability
        python_version="3.7",
        job_dir=JOB_DIR,
        package_uris=[TRAINER_URI],
        training_python_module=TRAINER_PY_MODULE,
        training_args=["--epochs", "30", "--epoch-seconds", EPOCH_SECONDS],
        labels={"job_type": "training"},
        # [END] Ours: short backoffs so that the offline example finishes in a minute.
        resilience_policy=RetryPolicy(backoff=Backoff(initial_seconds=1.0, max_seconds=4.0)),
        poll_interval=1.0,
    )
    uploaded >> training
    report_task(OUTPUT)(training.output)


example_ai_platform_legacy_training()
