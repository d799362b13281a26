"""The tables of the AI Platform Training -> Vertex AI translation (:mod:`.legacy`): the pre-built containers by
runtime version, the legacy machine names and scale tiers as Compute Engine shapes, every ``TrainingInput`` field's
fate (:data:`FIELD_FATES`, printed by the documentation's "AI Platform Training specs" page), and the ``TF_CONFIG``
rewrite for custom containers that expected ``master``. The sources of each are in :mod:`.legacy`'s docstring. Pure
data.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Vertex AI's pre-built training containers (``us-docker.pkg.dev/vertex-ai/training/<name>:latest``).
CONTAINER_REPOSITORY = "us-docker.pkg.dev/vertex-ai/training"

#: AI Platform runtime versions that have a Vertex AI TensorFlow training container for Python 3.7 (the only
#: Python those runtimes ran from 1.15 on), by runtime -> the container's version part (``tf-cpu.2-11``).
RUNTIME_CONTAINERS: Mapping[str, str] = {v: v.replace(".", "-") for v in (
    "1.15", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.11")}

#: Legacy machine name -> (Compute Engine machine type, accelerator type or None, accelerators per replica);
#: see the module docstring for the two forced changes (no n1-highcpu-8, no K80).
LEGACY_MACHINES: Mapping[str, tuple[str, str | None, int]] = {
    "standard": ("n1-standard-4", None, 0),
    "large_model": ("n1-highmem-8", None, 0),
    "complex_model_s": ("n1-highcpu-16", None, 0),  # n1-highcpu-8 on AI Platform; Vertex AI has none
    "complex_model_m": ("n1-highcpu-16", None, 0),
    "complex_model_l": ("n1-highcpu-32", None, 0),
    "standard_gpu": ("n1-standard-8", "NVIDIA_TESLA_T4", 1),  # 1 K80 on AI Platform
    "complex_model_m_gpu": ("n1-standard-16", "NVIDIA_TESLA_T4", 4),  # 4 K80s on AI Platform
    "standard_p100": ("n1-standard-8", "NVIDIA_TESLA_P100", 1),
    "complex_model_m_p100": ("n1-standard-16", "NVIDIA_TESLA_P100", 4),
    "standard_v100": ("n1-standard-8", "NVIDIA_TESLA_V100", 1),
    "large_model_v100": ("n1-highmem-8", "NVIDIA_TESLA_V100", 1),
    "complex_model_m_v100": ("n1-standard-16", "NVIDIA_TESLA_V100", 4),
    "complex_model_l_v100": ("n1-standard-32", "NVIDIA_TESLA_V100", 8),
    "cloud_tpu": ("cloud-tpu", "TPU_V2", 8),
}
#: Legacy names refused, with what to use instead.
REFUSED_MACHINES: Mapping[str, str] = {
    "complex_model_l_gpu": "it had 8 NVIDIA Tesla K80s, which Vertex AI no longer offers, and no n1 host takes 8 T4s: "
                           "use masterType n1-standard-32 with acceleratorConfig {type: NVIDIA_TESLA_V100, count: 8} "
                           "(or 4 NVIDIA_TESLA_T4)",
}

#: Scale tier -> (master, (workers, count), (parameter servers, count)), legacy machine names.
SCALE_TIERS: Mapping[str, tuple[str, tuple[str, int] | None, tuple[str, int] | None]] = {
    "BASIC": ("standard", None, None),
    "BASIC_GPU": ("standard_gpu", None, None),
    "BASIC_TPU": ("cloud_tpu", None, None),
    "STANDARD_1": ("complex_model_s", ("complex_model_s", 4), ("standard", 3)),
    "PREMIUM_1": ("complex_model_l", ("complex_model_l", 19), ("large_model", 11)),
}
#: ml v1 accelerator names Vertex AI spells otherwise.
ACCELERATOR_RENAMES = {"TPU_V2_POD": "TPU_V2", "TPU_V3_POD": "TPU_V3", "NVIDIA_TESLA_K80": "NVIDIA_TESLA_T4"}

#: Every field of ``TrainingInput`` (and of the messages it holds) and what becomes of it:
#: ``(field, fate, where it goes or why not)``; fate is "carried", "translated", "refused" or "dropped".
FIELD_FATES: tuple[tuple[str, str, str], ...] = (
    ("scaleTier", "translated", "worker pools and machines (SCALE_TIERS)"),
    ("masterType", "translated", "worker_pool_specs[0].machine_spec (LEGACY_MACHINES, or the Compute Engine type)"),
    ("masterConfig", "translated", "worker_pool_specs[0]: see ReplicaConfig"),
    ("workerType", "translated", "worker_pool_specs[1].machine_spec"),
    ("workerConfig", "translated", "worker_pool_specs[1]"),
    ("workerCount", "translated", "worker_pool_specs[1].replica_count"),
    ("parameterServerType", "translated", "worker_pool_specs[2].machine_spec"),
    ("parameterServerConfig", "translated", "worker_pool_specs[2]"),
    ("parameterServerCount", "translated", "worker_pool_specs[2].replica_count"),
    ("evaluatorType", "translated", "worker_pool_specs[3].machine_spec"),
    ("evaluatorConfig", "translated", "worker_pool_specs[3]"),
    ("evaluatorCount", "translated", "worker_pool_specs[3].replica_count"),
    ("packageUris", "carried", "python_package_spec.package_uris of every pool"),
    ("pythonModule", "carried", "python_package_spec.python_module"),
    ("args", "carried", "python_package_spec.args / container_spec.args (+ --job-dir for a package)"),
    ("hyperparameters", "translated", "a HyperparameterTuningJob (ResilientHyperparameterTuningJobOperator); "
                                      "parameters with one value -> --name=value args of every trial"),
    ("region", "carried", "the CustomJob's location"),
    ("jobDir", "translated", "job_spec.base_output_directory, and --job-dir in a package's args"),
    ("runtimeVersion", "translated", "python_package_spec.executor_image_uri (RUNTIME_CONTAINERS)"),
    ("pythonVersion", "translated", "picks the container; only 3.7 has one"),
    ("scheduling", "translated", "see Scheduling"),
    ("network", "carried", "job_spec.network"),
    ("serviceAccount", "carried", "job_spec.service_account"),
    ("useChiefInTfConfig", "translated", "false (default) with a custom container: TF_CONFIG says master, as before"),
    ("encryptionConfig", "refused", "CMEK is not carried by this provider yet: remove it, or submit with the Google "
                                    "provider's CreateCustomJobOperator(encryption_spec_key_name=...)"),
    ("enableWebAccess", "carried", "job_spec.enable_web_access"),
    ("ReplicaConfig.acceleratorConfig", "translated", "machine_spec.accelerator_type / accelerator_count"),
    ("ReplicaConfig.imageUri", "carried", "container_spec.image_uri (workers inherit the master's)"),
    ("ReplicaConfig.containerCommand", "carried", "container_spec.command (required: no ENTRYPOINT)"),
    ("ReplicaConfig.containerArgs", "carried", "container_spec.args"),
    ("ReplicaConfig.diskConfig", "translated", "disk_spec.boot_disk_type / boot_disk_size_gb"),
    ("ReplicaConfig.tpuTfVersion", "dropped", "a Vertex AI TPU image carries its own TensorFlow"),
    ("AcceleratorConfig.type", "translated", "machine_spec.accelerator_type (K80 -> T4, *_POD -> TPU_V2/V3)"),
    ("AcceleratorConfig.count", "carried", "machine_spec.accelerator_count"),
    ("DiskConfig.bootDiskType", "carried", "disk_spec.boot_disk_type"),
    ("DiskConfig.bootDiskSizeGb", "carried", "disk_spec.boot_disk_size_gb"),
    ("Scheduling.maxRunningTime", "translated", "job_spec.scheduling.timeout"),
    ("Scheduling.maxWaitTime", "translated", "resilience_policy.queue_timeout_seconds"),
    ("Scheduling.priority", "refused", "Vertex AI has no job priority: remove it"),
    ("EncryptionConfig.kmsKeyName", "refused", "see encryptionConfig"),
    ("HyperparameterSpec.goal", "translated", "study_spec.metrics[0].goal (default MAXIMIZE)"),
    ("HyperparameterSpec.hyperparameterMetricTag", "translated", "study_spec.metrics[0].metric_id (default "
                                                                 "training/hptuning/metric)"),
    ("HyperparameterSpec.params", "translated", "study_spec.parameters: see ParameterSpec"),
    ("HyperparameterSpec.maxTrials", "translated", "max_trial_count across every attempt (default 1)"),
    ("HyperparameterSpec.maxParallelTrials", "translated", "parallel_trial_count (default 1)"),
    ("HyperparameterSpec.maxFailedTrials", "translated", "max_failed_trial_count: permanent trial failures only"),
    ("HyperparameterSpec.algorithm", "carried", "study_spec.algorithm"),
    ("HyperparameterSpec.enableTrialEarlyStopping", "refused", "automated stopping cannot be carried over to a "
                                                               "resumed study: remove it"),
    ("HyperparameterSpec.resumePreviousJobId", "refused", "a study of the shut-down service cannot be resumed: remove "
                                                          "it (the operator resumes its own study)"),
    ("ParameterSpec.parameterName", "carried", "parameter_id (the trial still gets --name=value)"),
    ("ParameterSpec.type", "translated", "DOUBLE/INTEGER -> double/integer_value_spec, DISCRETE/CATEGORICAL -> "
                                         "discrete/categorical_value_spec; one feasible value -> a flag"),
    ("ParameterSpec.minValue", "carried", "*_value_spec.min_value"),
    ("ParameterSpec.maxValue", "carried", "*_value_spec.max_value"),
    ("ParameterSpec.discreteValues", "carried", "discrete_value_spec.values"),
    ("ParameterSpec.categoricalValues", "carried", "categorical_value_spec.values"),
    ("ParameterSpec.scaleType", "translated", "scale_type (NONE -> unset)"),
)

TRAINING_FIELDS = {f for f, _, _ in FIELD_FATES if "." not in f}
REPLICA_FIELDS = {"acceleratorConfig", "imageUri", "containerCommand", "containerArgs", "diskConfig", "tpuTfVersion"}
#: The replica roles, in worker pool order (pool 0 to 3).
ROLES = ("master", "worker", "parameterServer", "evaluator")

TF_CONFIG_MASTER_SCRIPT = (
    'if [ -n "$TF_CONFIG" ]; then TF_CONFIG="$(python3 -c \'import json, os\n'
    'c = json.loads(os.environ["TF_CONFIG"])\n'
    'cluster = c.get("cluster") or {}\n'
    'if "chief" in cluster: cluster["master"] = cluster.pop("chief")\n'
    'task = c.get("task") or {}\n'
    'if task.get("type") == "chief": task["type"] = "master"\n'
    'print(json.dumps(c))\')" && export TF_CONFIG; fi\n'
    'exec "$@"\n')


def tf_config_master_command(command: list[str]) -> list[str]:
    """``command`` run after ``TF_CONFIG``'s ``chief`` (Vertex AI's name for the primary replica) is renamed
    ``master``, as AI Platform named it in custom containers without ``useChiefInTfConfig`` (a ``/bin/sh``
    prefix; the image needs ``python3``)."""
    return ["/bin/sh", "-c", TF_CONFIG_MASTER_SCRIPT, "tf-config-master", *command]


def fate_table() -> str:
    """:data:`FIELD_FATES` as a Markdown table (the documentation's "AI Platform Training specs" page prints it)."""
    rows = ["| TrainingInput field | fate | on Vertex AI |", "| --- | --- | --- |"]
    rows += [f"| `{f}` | {fate} | {where} |" for f, fate, where in FIELD_FATES]
    return "\n".join(rows)


__all__ = ["ACCELERATOR_RENAMES", "CONTAINER_REPOSITORY", "FIELD_FATES", "LEGACY_MACHINES", "REFUSED_MACHINES",
           "REPLICA_FIELDS", "ROLES", "RUNTIME_CONTAINERS", "SCALE_TIERS", "TF_CONFIG_MASTER_SCRIPT", "TRAINING_FIELDS",
           "fate_table", "tf_config_master_command"]
