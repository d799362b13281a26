"""The fault plan: files, matching, step triggers from real checkpoints and logs, reproducible draws."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from google.api_core import exceptions

from airflow_provider_resilient.checkpoints import find_latest_checkpoint
from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig, FaultPlan
from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

from ..platform_time import MANUAL, PlatformTime
from .conftest import PARENT, PYTHON, custom_job

WORKLOAD = str(Path(__file__).parent / "workloads" / "checkpointing.py")

PLAN_YAML = """
seed: 7
faults:
  - kind: crash
    exit_code: 139
    match: {display_name: "train-*", labels: {team: ml}}
    at_step: 300
    times: 4
  - kind: stockout
    match: {nth: 1}
    times: 4
  - kind: unavailable
    match: {nth: 3}
"""


def checkpointing_job(name: str = "train-1", *, steps: int = 100, every: int = 10, **kw):
    job = custom_job(display_name=name, base_output_dir="gs://ckpt-bucket/runs/" + name, **kw)
    job["job_spec"]["worker_pool_specs"][0]["container_spec"]["command"] = [
        "python", WORKLOAD, "--steps", str(steps), "--every", str(every)]
    return job


def test_yaml_and_json_plans_load_the_same(tmp_path: Path):
    yaml_file = tmp_path / "plan.yaml"
    yaml_file.write_text(PLAN_YAML)
    plan = FaultPlan.load(yaml_file)
    json_file = tmp_path / "plan.json"
    json_file.write_text(json.dumps(plan.model_dump(mode="json")))
    assert FaultPlan.load(json_file) == plan
    assert plan.seed == 7 and [f.kind for f in plan.faults] == ["crash", "stockout", "unavailable"]
    assert plan.faults[0].match.labels == {"team": "ml"}


@pytest.mark.parametrize(("text", "message"), [
    ("faults: [{kind: crash}]", "exit_code"),
    ("faults: [{kind: meteor}]", "kind"),
    ("faults: [{kind: quota, after_seconds: 3}]", "running faults"),
    ("faults: [{kind: crash, exit_code: 1, times: 0}]", "times"),
    ("faults: [{kind: crash, exit_code: 1, colour: red}]", "colour"),
])
def test_bad_plans_name_the_file_and_the_field(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        FaultPlan.load(path)
    assert "bad.yaml" in str(info.value)


@pytest.mark.resilient_emulator(time_scale=0.002)
def test_crash_at_a_checkpointed_step_and_the_platform_retries_resume_from_it(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "at_step": 20, "times": 4})
    job = client.create_custom_job(parent=PARENT, custom_job=checkpointing_job(steps=1000))
    resilient_emulator.wait_for_state(job.name, ["JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"], 120)
    failed = client.get_custom_job(name=job.name)
    assert failed.error.message.startswith("The replica workerpool0-0 exited with a non-zero status of 139.")
    log = resilient_emulator.replica_log(job.name)
    resumed = [int(line.split()[-1]) for line in log.splitlines() if line.startswith("resuming from step")]
    assert len(resumed) == 4 and resumed[0] == 0
    # Each run resumes from the newest complete save, so never from an older one. Not always a newer one: the fault
    # strikes once step 20's (or a later step's) directory holds an object, and if that is while the save is being
    # written, the next run resumes from the save before it (a stricter check failed CI once, on a loaded machine).
    assert all(b >= a for a, b in itertools.pairwise(resumed))
    assert resumed[1] >= 10  # the first crash came at step 20's save or later: step 10's was complete
    # The checkpoints the workload wrote are real objects in the emulated bucket, readable through gcsfs.
    latest = find_latest_checkpoint("gs://ckpt-bucket/runs/train-1/checkpoints", marker="COMMITTED")
    assert latest is not None and latest.step >= resumed[-1] and latest.uri.startswith("gs://ckpt-bucket/")


@pytest.mark.resilient_emulator(time_scale=0.002)
def test_one_crash_is_absorbed_by_a_platform_retry_resuming_from_the_checkpoint(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 134, "at_step": 30})
    job = client.create_custom_job(parent=PARENT, custom_job=checkpointing_job(steps=60))
    assert resilient_emulator.wait_for_state(job.name, ["JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"], 120) == \
        "JOB_STATE_SUCCEEDED"
    log = resilient_emulator.replica_log(job.name)
    second_start = log.split("===== ")[2]
    assert "resuming from step 30" in second_start or "resuming from step 40" in second_start
    assert "training complete" in second_start


@pytest.mark.resilient_emulator(time_scale=0.002)
def test_log_pattern_steps_trigger_faults(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "oom", "at_step": 7, "step_source": "log"})
    job = client.create_custom_job(parent=PARENT, custom_job=checkpointing_job(steps=500, every=1000))
    resilient_emulator.wait_for_state(job.name, ["JOB_STATE_FAILED"], 60)
    log = resilient_emulator.replica_log(job.name)
    assert "step 7" in log and "training complete" not in log


@pytest.mark.resilient_emulator(time_scale=0.002)
def test_faults_match_display_name_labels_and_nth_job(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 1, "times": None,
                                  "match": {"display_name": "train-*", "labels": {"team": "ml"}, "nth": 2}})
    jobs = [client.create_custom_job(parent=PARENT, custom_job=custom_job(
        "import time; time.sleep(0.2)", display_name=name, labels=labels))
        for name, labels in [("train-a", {"team": "ml"}), ("train-b", {"team": "ml"}), ("eval", {"team": "ml"}),
                             ("train-c", {"team": "other"})]]
    states = [resilient_emulator.wait_for_state(j.name, ["JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"], 60)
              for j in jobs]
    assert states == ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED", "JOB_STATE_SUCCEEDED"]


def quota_pattern(seed: int) -> list[str]:
    plan = FaultPlan.model_validate({"seed": seed, "faults": [{"kind": "quota", "probability": 0.5,
                                                                 "times": None}]})
    with Emulator(fault_plan=plan, config=EmulatorConfig(time_scale=0.002, seed=seed), storage=False) as emulator:
        client = vertex_job_client("us-central1", emulator=emulator.address)
        outcomes = []
        for _ in range(16):
            try:
                job = client.create_custom_job(parent=PARENT, custom_job=custom_job())
                client.cancel_custom_job(name=job.name)
                outcomes.append("ok")
            except exceptions.ResourceExhausted:
                outcomes.append("quota")
        return outcomes


def test_a_seed_makes_fault_draws_reproducible():
    first, again, other = quota_pattern(1), quota_pattern(1), quota_pattern(2)
    assert first == again
    assert set(first) == {"ok", "quota"}
    assert first != other


HALF_QUOTA = {"kind": "quota", "probability": 0.5, "times": None}


def run_time_quota_pattern(config: EmulatorConfig, plan: FaultPlan | None = None) -> list[str]:
    """Outcomes of 16 creates under a 50 % quota fault added at run time (as POST /faults does)."""
    with Emulator(fault_plan=plan, config=config, storage=False) as emulator:
        emulator.add_fault(HALF_QUOTA)
        client = vertex_job_client("us-central1", emulator=emulator.address)
        outcomes = []
        for _ in range(16):
            try:
                client.create_custom_job(parent=PARENT, custom_job=custom_job("pass"), retry=None)
                outcomes.append("ok")
            except exceptions.ResourceExhausted:
                outcomes.append("quota")
        return outcomes


def test_the_configured_seed_drives_faults_added_at_run_time():
    seed_1, seed_1_again, seed_2 = (run_time_quota_pattern(EmulatorConfig(time_scale=0.002, seed=seed))
                                    for seed in (1, 1, 2))
    assert seed_1 == seed_1_again
    assert set(seed_1) == {"ok", "quota"}
    assert seed_1 != seed_2  # seed 0 (the empty plan's) used to drive both


def test_an_explicit_config_seed_wins_over_the_plans_and_the_plans_applies_otherwise():
    plan_7 = FaultPlan(seed=7)
    explicit = run_time_quota_pattern(EmulatorConfig(time_scale=0.002, seed=3), plan_7)
    assert explicit == run_time_quota_pattern(EmulatorConfig(time_scale=0.002, seed=3))
    from_plan = run_time_quota_pattern(EmulatorConfig(time_scale=0.002), plan_7)
    assert from_plan == run_time_quota_pattern(EmulatorConfig(time_scale=0.002, seed=7))
    assert explicit != from_plan


@pytest.mark.parametrize(("argv", "seed"), [([], 7), (["--seed", "11"], 11)])
def test_the_cli_seed_reaches_the_fault_book(tmp_path: Path, argv: list[str], seed: int):
    from airflow_provider_resilient.testing.emulator.__main__ import build

    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN_YAML)  # seed: 7
    emulator = build(["--fault-plan", str(plan), "--work-dir", str(tmp_path / "work"), *argv])
    try:
        assert emulator.faults.seed == seed and emulator.config.seed == seed
    finally:
        emulator.stop()


@pytest.mark.resilient_emulator(time_scale=0.002, seed=5, fault_plan={"seed": 7})
def test_the_markers_seed_reaches_the_fault_book(resilient_emulator):
    assert resilient_emulator.faults.seed == 5
    resilient_emulator.reset(FaultPlan(seed=9))  # a plan loaded later does not override it either
    assert resilient_emulator.faults.seed == 5


@pytest.mark.resilient_emulator(time_scale=0.002, fault_plan={"seed": 7})
def test_without_a_marker_seed_the_plans_seed_applies(resilient_emulator):
    assert resilient_emulator.faults.seed == 7


def test_python_resolves_to_the_emulators_interpreter():
    from google.cloud.aiplatform_v1.types import CustomJobSpec

    from airflow_provider_resilient.testing.emulator.vertex.specs import plan_replicas

    spec = CustomJobSpec(custom_job()["job_spec"])
    (plan,) = plan_replicas(spec, job_id="1", base_env={})
    assert plan.argv[0] == PYTHON


@MANUAL
def test_location_limits_a_fault_to_one_region(resilient_emulator):
    resilient_emulator.add_fault({"kind": "stockout", "times": None, "match": {"location": "us-central1"}})
    jobs = {}
    for region in ("us-central1", "europe-west4"):
        client = vertex_job_client(region, emulator=resilient_emulator.address)
        jobs[region] = client.create_custom_job(parent=f"projects/test-project/locations/{region}",
                                                custom_job=custom_job("print('trained')")).name
    state = resilient_emulator.vertex.state_name
    # The stockouts (four provisioning attempts of 60 s) and the error delay pass in platform time.
    PlatformTime(resilient_emulator).until(lambda: all(state(j) in ("JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED")
                                                       for j in jobs.values()))
    assert {region: state(job) for region, job in jobs.items()} == {"us-central1": "JOB_STATE_FAILED",
                                                                     "europe-west4": "JOB_STATE_SUCCEEDED"}


def test_active_seconds_is_a_window_since_the_plan_was_loaded():
    from airflow_provider_resilient.testing.emulator.faults import PROVISIONING_KINDS, Fault, FaultBook

    now = [100.0]
    book = FaultBook(FaultPlan(faults=(Fault(kind="stockout", times=None, active_seconds=(10, 20),
                                             match={"location": "us-central1"}),)), clock=lambda: now[0])
    book.job_created("projects/p/locations/us-central1/customJobs/1", "train", {})
    book.job_created("projects/p/locations/us-central1-a/nodes/n", "train", {})  # a zone of the region
    book.job_created("projects/p/locations/europe-west4/customJobs/2", "train", {})
    seen = {}
    for at in (105.0, 110.0, 119.9, 120.0):
        now[0] = at
        seen[at] = [name.rsplit("/", 1)[-1] for name in ("projects/p/locations/us-central1/customJobs/1",
                                                          "projects/p/locations/us-central1-a/nodes/n",
                                                          "projects/p/locations/europe-west4/customJobs/2")
                    if book.candidates(PROVISIONING_KINDS, name, 1)]
    assert seen == {105.0: [], 110.0: ["1", "n"], 119.9: ["1", "n"], 120.0: []}
    with pytest.raises(ValueError, match="active_seconds"):
        Fault(kind="stockout", active_seconds=(5, 5))


def test_an_at_step_fault_waits_for_a_step_directory_with_something_written_in_it(tmp_path):
    """The emulator's own rule (vertex/runs.written_step), not the provider's completeness rule."""
    from airflow_provider_resilient.testing.emulator.vertex.runs import written_step

    assert written_step(str(tmp_path / "missing")) is None
    for name, files in [("step_3", ["state.json"]), ("checkpoint-5", ["model.pkl"]), ("step_9", []),
                        ("step_12.orbax-checkpoint-tmp", ["x"]), ("notes", ["x"])]:
        (tmp_path / name).mkdir()
        for file in files:
            (tmp_path / name / file).write_text("x")
    assert written_step(str(tmp_path)) == 5  # step_9 is empty, the tmp directory is no step
