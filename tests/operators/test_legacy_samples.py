"""Real legacy AI Platform Training job specs, translated to Vertex AI CustomJobs or refused naming the field.

The specs under ``tests/fixtures/legacy/samples`` were collected from public repositories (the first lines of each
file name its source: GoogleCloudPlatform/cloudml-samples, ai-platform-samples and training-data-analyst,
google-research's seed_rl and valan, tensorflow/cloud, gclouduniverse/notebook_training, and the Airflow Google
provider's own tests). Many are the ``--config`` half of a ``gcloud ai-platform jobs submit training`` call: the
rest came from flags. :func:`body` completes them the way a typical submit did (``--package-path trainer
--module-name trainer.task --runtime-version 2.11 --python-version 3.7 --job-dir ... --region us-central1``),
with the sample's own flags (``x-gcloud-submit``) winning, and its shell placeholders filled in.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_resilient.specs.common import SpecError
from airflow_provider_resilient.specs.legacy import FIELD_FATES, fate_table, translate_training_input
from airflow_provider_resilient.specs.vertex import validate_custom_job

SAMPLES = Path(__file__).parents[1] / "fixtures" / "legacy" / "samples"
#: The flags a typical submit gave beside a --config file (gcloud builds --package-path into packageUris).
TYPICAL_SUBMIT = {"packageUris": ["gs://legacy-samples/staging/trainer-0.1.tar.gz"], "pythonModule": "trainer.task",
                  "runtimeVersion": "2.11", "pythonVersion": "3.7", "jobDir": "gs://legacy-samples/jobs/run",
                  "region": "us-central1"}
#: gcloud-only flags (not TrainingInput fields) in the samples' ``x-gcloud-submit``.
GCLOUD_ONLY = {"command", "packagePath", "stagingBucket"}


#: Placeholder name keywords -> the value put in (first match wins; anything else: "x").
PLACEHOLDERS = (
    (("SERVICE_ACCOUNT",), "trainer@legacy-samples.iam.gserviceaccount.com"), (("WORKERS", "COUNT"), "2"),
    (("IMAGE",), "gcr.io/legacy-samples/trainer:latest"), (("MACHINE_TYPE",), "n1-standard-8"),
    (("GPU_TYPE", "ACCELERATOR"), "NVIDIA_TESLA_T4"), (("REGION",), "us-central1"),
    (("STEPS", "MAX_RUN_TIME"), "100"), (("SCALE_TIER",), "STANDARD_1"),
    (("BUCKET", "DIR", "PATH", "FILE", "URI", "OUTPUT"), "gs://legacy-samples/data"),
)


def fill(text: str) -> str:
    """Shell / template placeholders (``$X``, ``${X}``, ``<x>``) -> plausible values (:data:`PLACEHOLDERS`)."""
    def value(name: str) -> str:
        upper = name.upper()
        return next((v for keys, v in PLACEHOLDERS if any(k in upper for k in keys)), "x")

    text = re.sub(r"\$\{([A-Za-z_]+)\}|\$([A-Z_]+)", lambda m: value(m[1] or m[2]), text)
    return re.sub(r"<([a-zA-Z_ .=0-9/-]+)>", lambda m: value(m[1].split()[0]), text)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def bodies(path: Path) -> list[dict[str, Any]]:
    """Each TrainingInput of a sample file, completed and filled in."""
    out = []
    for doc in yaml.safe_load_all(fill(path.read_text())):
        if not isinstance(doc, dict):
            continue
        given = doc.get("trainingInput") or doc.get("training_input")
        if given is None:
            continue
        flags = {k: v for k, v in (doc.get("x-gcloud-submit") or {}).items() if k not in GCLOUD_ONLY}
        if "packagePath" in (doc.get("x-gcloud-submit") or {}):
            flags.setdefault("packageUris", TYPICAL_SUBMIT["packageUris"])
        body = merge(given, flags)
        custom = any(isinstance(c, dict) and c.get("imageUri") for c in (
            body.get("masterConfig"), body.get("master_config")))
        typical = {k: v for k, v in TYPICAL_SUBMIT.items()
                   if not (custom and k in ("packageUris", "pythonModule", "runtimeVersion", "pythonVersion"))}
        out.append(merge(typical, body) if doc.get("x-gcloud-submit") is None and "jobId" not in doc
                   and "job_id" not in doc else body)
    return out


def outcome(body: dict[str, Any]) -> tuple[str, list[str]]:
    """("ok", pools' machine types) or ("refused", the fields named)."""
    try:
        translated = translate_training_input(body)
    except SpecError as exc:
        return "refused", sorted({e.field for e in exc.errors})
    validate_custom_job(project_id="legacy-samples", region=translated.region or "us-central1", display_name="j",
                        worker_pool_specs=translated.worker_pool_specs, base_output_dir=translated.base_output_dir,
                        labels={}, strategy=None, max_wait_duration=None, timeout=translated.timeout_seconds,
                        fallbacks=(), checkpoint_dir=None)  # what comes out is a CustomJob Vertex AI takes
    pools = [f"{p['machine_spec']['machine_type']}x{p['replica_count']}" if p else "-"
             for p in translated.worker_pool_specs]
    if translated.study is None:
        return "ok", pools
    from airflow_provider_resilient.specs.tuning import study_problems

    study = translated.study  # what comes out is a study the tuning operator takes
    problems = study_problems(study["study_spec"], study["max_trial_count"], study["parallel_trial_count"],
                              study["max_failed_trial_count"])
    if problems:
        return "refused", sorted({e.field for e in problems})
    spec = study["study_spec"]
    return "ok", [*pools, f"study of {study['max_trial_count']} over "
                          f"{','.join(p['parameter_id'] for p in spec['parameters'])} ({spec['algorithm']})"]


#: Every sample's outcome, reviewed by hand; why each refusal is right is in the comment. ("-": an empty pool.)
CONTAINER = "trainingInput.masterConfig.containerCommand"  # an image run by its ENTRYPOINT: the command is needed
EXPECTED: dict[str, list[tuple[str, list[str]]]] = {
    "airflow_operator_unittest_bodies": [
        ("refused", ["trainingInput.args", "trainingInput.runtimeVersion"]),  # args one string; no runtime
        ("refused", ["trainingInput.args", "trainingInput.pythonVersion"]),  # ... and Python 3.5
        ("refused", [CONTAINER]),
    ],
    "census_standard1_hptuning": [("ok", ["n1-highcpu-16x1", "n1-highcpu-16x4", "n1-standard-4x3",
                                          "study of 4 over first-layer-size,num-layers,scale-factor "
                                          "(ALGORITHM_UNSPECIFIED)"])],  # a study: a HyperparameterTuningJob
    "criteo_tft_large_ps": [("ok", ["n1-highmem-8x1", "n1-highcpu-16x60", "n1-highmem-8x29"])],
    "dqn_container_basic_gpu_hptuning": [("refused", [CONTAINER])],
    "horovod_custom_container_multi_gpu": [("refused", [CONTAINER, "trainingInput.workerConfig.containerCommand"])],
    "movielens_legacy_gpu_ps": [("ok", ["n1-standard-8x1", "n1-standard-8x2", "n1-highcpu-16x1"])],  # K80 -> T4
    # acceleratorConfig on a legacy machine type: AI Platform's own rule ("only ... a Compute Engine machine type")
    "notebook_training_scheduling_container": [
        ("refused", ["trainingInput.masterConfig.acceleratorConfig", CONTAINER,
                     "trainingInput.workerConfig.containerCommand"])],
    "pytorch_container_basic_gpu": [("refused", [CONTAINER])],
    # automated stopping cannot be carried over to a resumed study
    "resnet_hypertune_custom_container_v100": [
        ("refused", ["trainingInput.hyperparameters.enableTrialEarlyStopping", CONTAINER])],
    "seed_rl_football_legacy_gpu_container": [("refused", [CONTAINER, "trainingInput.workerConfig.containerCommand"])],
    "sklearn_template_standard1": [("refused", ["trainingInput.pythonVersion"])],  # Python 3.5: no container
    "tensorflow_cloud_fit_chief_string_bool": [
        ("refused", [CONTAINER, "trainingInput.workerConfig.containerCommand"])],
    "tensorflow_cloud_tpu_worker_chief": [("refused", [CONTAINER, "trainingInput.workerConfig.containerCommand"])],
    "tf_structured_basic": [("ok", ["n1-standard-4x1"])],
    "tf_structured_gpu_t4": [("ok", ["n1-standard-8x1"])],
    "tpu_resnet_basic_tpu": [("refused", ["trainingInput.runtimeVersion"])],  # runtime 1.8: no container
    "tpu_resnet_hptuning_cloud_tpu_worker": [("refused", ["trainingInput.hyperparameters.enableTrialEarlyStopping",
                                                          "trainingInput.runtimeVersion"])],
    "valan_r2r_evaluators_chief": [("refused", ["trainingInput.evaluatorConfig.containerCommand", CONTAINER,
                                                "trainingInput.workerConfig.containerCommand"])],
    "wals_airflow_contrib_custom_gpu": [("refused", ["trainingInput.runtimeVersion"])],  # the DAG gave none
    "wals_train_json_trailing_commas": [("ok", ["n1-standard-16x1"])],  # complex_model_m_gpu: 4 K80 -> 4 T4
    "wals_tune_json_string_numbers": [("ok", ["n1-standard-8x1", "study of 500 over regularization,latent_factors,"
                                              "unobs_weight,feature_wt_factor (ALGORITHM_UNSPECIFIED)"])],
}


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_a_real_legacy_spec_translates_or_is_refused_naming_the_field(path):
    assert [outcome(b) for b in bodies(path)] == EXPECTED[path.stem]


def with_command(body: dict[str, Any]) -> dict[str, Any]:
    """The body with each replica config's ``containerCommand`` given (what the refusal asks for)."""
    out = dict(body)
    for role in ("masterConfig", "workerConfig", "parameterServerConfig", "evaluatorConfig"):
        if isinstance(out.get(role), dict):
            out[role] = {**out[role], "containerCommand": ["python3", "-m", "trainer.task"]}
    return out


@pytest.mark.parametrize(("stem", "chief"), [
    ("horovod_custom_container_multi_gpu", False), ("pytorch_container_basic_gpu", False),
    ("seed_rl_football_legacy_gpu_container", False), ("tensorflow_cloud_fit_chief_string_bool", True),
    ("tensorflow_cloud_tpu_worker_chief", True), ("valan_r2r_evaluators_chief", True),
])
def test_a_custom_container_spec_runs_once_its_command_is_given(stem, chief):
    """The refusal's fix works: with ``containerCommand`` the container samples translate; ``TF_CONFIG`` says
    ``master`` as AI Platform said it unless ``useChiefInTfConfig`` (true, or the string "True")."""
    (body,) = bodies(SAMPLES / f"{stem}.yaml")
    translated = translate_training_input(with_command(body))
    commands = [p["container_spec"]["command"] for p in translated.worker_pool_specs if p]
    assert all((c[3:4] == ["tf-config-master"]) is not chief for c in commands), commands
    assert all("python3" in c and "trainer.task" in c for c in commands), commands
    if stem == "valan_r2r_evaluators_chief":  # fixed hyperparameters -> flags; evaluators -> pool 3
        assert "--batch_size=128" in translated.worker_pool_specs[0]["container_spec"]["args"]
        assert translated.worker_pool_specs[2] == {} and translated.worker_pool_specs[3]["replica_count"] == 2


def test_every_training_input_field_has_a_fate():
    """The documentation's table (docs/operators/ai-platform-training.md) covers every field of the ml v1 discovery
    document's TrainingInput and the messages it holds (``tests/fixtures/legacy/ml_v1_schemas.json``, from
    google-api-python-client 2.202.0's ml.v1.json)."""
    import json

    schemas = json.loads((SAMPLES.parent / "ml_v1_schemas.json").read_text())["schemas"]
    fields = set(schemas["GoogleCloudMlV1__TrainingInput"]["properties"])
    for message in ("ReplicaConfig", "AcceleratorConfig", "DiskConfig", "Scheduling", "EncryptionConfig",
                    "HyperparameterSpec", "ParameterSpec"):
        fields |= {f"{message}.{f}" for f in schemas[f"GoogleCloudMlV1__{message}"]["properties"]}
    fated = {f for f, _, _ in FIELD_FATES}
    assert fields - fated == set() and fated - fields == set()
    page = Path(__file__).parents[2] / "docs" / "operators" / "ai-platform-training.md"
    assert fate_table() in page.read_text()  # the documentation prints this table


# ------------------------------------------------------------------ hostile input
def _hostile_bodies() -> Any:
    from hypothesis import strategies as st

    leaves = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True),
                       st.text(max_size=12), st.sampled_from(["CUSTOM", "basic", "standard_gpu", "n1-standard-8",
                                                              "2.11", "3.7", "7200s", "gs://b/x", "NVIDIA_TESLA_K80"]))
    values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                          max_leaves=8)
    keys = st.sampled_from([f for f, _, _ in FIELD_FATES if "." not in f] + ["stagingBucket", "job_dir"])
    accelerator = st.fixed_dictionaries({}, optional={"type": values, "count": values})
    replica = st.fixed_dictionaries({}, optional={"imageUri": values, "containerCommand": values,
                                                  "acceleratorConfig": st.one_of(values, accelerator),
                                                  "diskConfig": values, "containerArgs": values})
    param = st.fixed_dictionaries({}, optional={"parameterName": values, "type": st.one_of(values, st.sampled_from(
        ["DOUBLE", "INTEGER", "CATEGORICAL", "DISCRETE"])), "minValue": values, "maxValue": values,
        "categoricalValues": values, "discreteValues": values})
    study = st.fixed_dictionaries({}, optional={"params": st.one_of(values, st.lists(param, max_size=3)),
                                                "maxTrials": values})
    return st.dictionaries(keys, st.one_of(values, replica, study), max_size=8)


def test_any_training_input_translates_or_is_refused_naming_fields():
    """Whatever the body -- wrong types at any depth, unknown keys, odd cases -- the translation returns a job or
    raises SpecError naming trainingInput fields: never a TypeError, KeyError or a half-made job."""
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_hostile_bodies())
    def check(body: dict[str, Any]) -> None:
        try:
            translated = translate_training_input(body)
        except SpecError as exc:
            assert exc.errors and all(e.field.startswith("trainingInput") for e in exc.errors), exc
        else:
            assert translated.worker_pool_specs and translated.worker_pool_specs[0]["replica_count"] == 1

    check()
