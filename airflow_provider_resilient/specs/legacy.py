"""Legacy AI Platform Training job specs (``ml.googleapis.com/v1`` ``TrainingInput``) as Vertex AI CustomJobs.

AI Platform Training was shut down on 2025-01-31 and the Airflow Google provider removed
``MLEngineStartTrainingJobOperator`` (15.0.0); teams still hold DAGs and ``config.yaml`` files written for it.
:func:`translate_training_input` turns a ``TrainingInput`` (camelCase as in the ``ml v1`` REST reference, the
snake_case keys gcloud also accepted, counts as the int64 strings the API sent) into the arguments of a Vertex AI
CustomJob, or refuses -- before anything is submitted -- every field it cannot carry over, one line each naming the
field and what to use instead. Every field's fate is in :data:`FIELD_FATES` (the documentation prints it: "AI
Platform Training specs").

The translation (our choices, documented where AI Platform's own documentation is not in reach):

* **Replicas -> worker pools.** master -> pool 0 (1 replica), workers -> pool 1 (``workerCount``), parameter
  servers -> pool 2 (``parameterServerCount``), evaluators -> pool 3 (``evaluatorCount``); unused pools in
  between are left empty (``{}``), as Vertex AI wants. A worker / parameter server / evaluator without its own
  ``imageUri`` runs the master's (AI Platform: "If ... has not been set, AI Platform uses the value of
  ``masterConfig.imageUri``").
* **Machines.** A Compute Engine type (``n1-standard-8``) is kept, with its ``acceleratorConfig``. The legacy
  names become :data:`LEGACY_MACHINES`: AI Platform described ``complex_model_m`` as "roughly twice the cores and
  memory of complex_model_s" and ``standard_gpu`` as "equivalent to standard, plus a single NVIDIA Tesla K80"
  (ml v1 discovery document); the Compute Engine shapes are the ones its machine-types page gave. Two changes
  are forced by Vertex AI: it has no ``n1-highcpu-8`` (``complex_model_s`` runs on ``n1-highcpu-16``), and the
  K80 has reached end of support ("Deprecated: Nvidia Tesla K80 GPU has reached end of support" --
  ``aiplatform_v1.AcceleratorType``), so the K80 types run on as many NVIDIA T4s -- except
  ``complex_model_l_gpu``: no n1 host takes 8 T4s, so it is refused with a replacement to choose.
  ``cloud_tpu`` -> ``cloud-tpu`` with 8 TPU v2 cores (or its ``acceleratorConfig``), ``TPU_V2_POD`` /
  ``TPU_V3_POD`` -> ``TPU_V2`` / ``TPU_V3`` with the count.
* **Scale tiers** (:data:`SCALE_TIERS`): BASIC -> one ``standard``; BASIC_GPU -> one ``standard_gpu``; BASIC_TPU ->
  one ``cloud_tpu``; STANDARD_1 -> a ``complex_model_s`` master, 4 ``complex_model_s`` workers and 3 ``standard``
  parameter servers; PREMIUM_1 -> a ``complex_model_l`` master, 19 ``complex_model_l`` workers and 11
  ``large_model`` parameter servers (AI Platform's documented tiers; it warned they "may change over time": pin
  a shape with CUSTOM). CUSTOM uses ``masterType`` etc. Lower case (``custom``) is accepted, as gcloud did.
* **Runtime -> container.** ``runtimeVersion`` with ``pythonVersion`` 3.7 -> Vertex AI's pre-built TensorFlow
  training container of that version (:data:`RUNTIME_CONTAINERS`; ``tf-gpu`` for a pool with GPUs): they carry the
  scikit-learn and XGBoost the runtime carried. A scikit-learn or XGBoost job, or a newer TensorFlow, takes
  ``executor_image_uri``. Python 2.7 and 3.5 have no container; runtime 2.10 had none either.
* **Python package** (``packageUris`` + ``pythonModule`` + ``args``) -> ``python_package_spec``; AI Platform passed
  ``jobDir`` to the program as ``--job-dir``: the translation appends it to the args (unless they hold it).
  **Custom container** (``imageUri``) -> ``container_spec`` with ``containerCommand`` (required here: Vertex AI
  jobs of this provider never rely on an image's ENTRYPOINT) and ``containerArgs`` or ``args``.
* **TF_CONFIG.** Vertex AI names the primary ``chief``. AI Platform named it ``master`` in custom containers
  unless ``useChiefInTfConfig`` (and in runtime 1.15 and earlier; runtime 2.1 and later said ``chief``). A custom
  container without ``useChiefInTfConfig`` gets its ``TF_CONFIG`` rewritten back to ``master`` before the command
  starts (:func:`tf_config_master_command`). A runtime-1.15 package job sees ``chief``, which TensorFlow 1.15's
  ``RunConfig`` reads as the chief too.
* **hyperparameters**: a parameter with one feasible value (``maxTrials: 1`` jobs used to pass fixed flags) becomes
  a flag (``--name=value``, as AI Platform passed them); a study over the others becomes a HyperparameterTuningJob
  run by :class:`~..operators.vertex_ai_tuning.ResilientHyperparameterTuningJobOperator`'s rules (``maxTrials`` ->
  ``max_trial_count`` ...; the metric is ``hyperparameterMetricTag``, AI Platform's default
  ``training/hptuning/metric`` without one). ``resumePreviousJobId`` and ``enableTrialEarlyStopping`` are refused.
* ``jobDir`` -> ``base_output_directory``; ``scheduling.maxRunningTime`` -> ``scheduling.timeout``;
  ``scheduling.maxWaitTime`` -> the policy's queue timeout (a job QUEUED longer is cancelled and failed over);
  ``diskConfig`` -> ``disk_spec``; ``serviceAccount``, ``network``, ``region``, ``enableWebAccess`` carried as
  they are. ``scheduling.priority`` (no Vertex AI equivalent) and ``encryptionConfig`` (not carried by this
  provider yet) are refused; ``tpuTfVersion`` is dropped (a Vertex AI TPU image carries its own TensorFlow).

Pure: pydantic only, no Airflow, no Google imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .common import SpecError
from .legacy_study import count_of, study_of_hyperparameters
from .legacy_tables import (  # the tables; the public ones re-exported, as the docs and DAGs name them here
    ACCELERATOR_RENAMES,
    CONTAINER_REPOSITORY,
    FIELD_FATES,
    LEGACY_MACHINES,
    REFUSED_MACHINES,
    REPLICA_FIELDS,
    ROLES,
    RUNTIME_CONTAINERS,
    SCALE_TIERS,
    TRAINING_FIELDS,
    fate_table,
    tf_config_master_command,
)
from .vertex import duration_seconds
from .vertex_pools import MACHINE_TYPE_RE


@dataclass(frozen=True)
class LegacyTranslation:
    """A ``TrainingInput`` as the arguments of :class:`~..operators.vertex_ai.ResilientCustomJobOperator`.

    Attributes:
        region: the job's region.
        worker_pool_specs: the pools (dict form; empty pools as ``{}``).
        base_output_dir: from ``jobDir``.
        timeout_seconds: ``scheduling.timeout`` (from ``maxRunningTime``), None: Vertex AI's default (7 days).
        queue_timeout_seconds: from ``maxWaitTime``, None: the policy's.
        service_account, network: as given.
        enable_web_access: ``enableWebAccess``.
        notes: what changed on the way (a K80 now a T4 ...), one line each, for the task log.
        study: a hyperparameter study (``hyperparameters`` with a parameter of more than one value): the tuning
            operator's ``study_spec``, ``max_trial_count``, ``parallel_trial_count`` and ``max_failed_trial_count``;
            None: one job.
    """

    region: str | None
    worker_pool_specs: list[dict[str, Any]]
    base_output_dir: str | None = None
    timeout_seconds: float | None = None
    queue_timeout_seconds: float | None = None
    service_account: str | None = None
    network: str | None = None
    enable_web_access: bool = False
    notes: list[str] = field(default_factory=list)
    study: dict[str, Any] | None = None


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _normalized(value: Any) -> Any:
    """snake_case keys -> camelCase (gcloud's YAML accepted both), recursively."""
    if isinstance(value, Mapping):
        return {_camel(str(k)) if "_" in str(k) else str(k): _normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def _flag(value: Any, where: str, problems: list[SpecError]) -> bool:
    """A boolean as the API took it: true/false or their strings (``"True"``)."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    problems.append(SpecError(where, f"{value!r}: give true or false"))
    return False


def _strings(value: Any, where: str, problems: list[SpecError]) -> list[str]:
    """A list of strings (numbers taken as their text); anything else is a problem and gives []."""
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        return [str(v) for v in value]
    problems.append(SpecError(where, f"{value!r}: give a list of strings, one per item (e.g. ['--epochs', '10'])"))
    return []


def _text(value: Any, where: str, problems: list[SpecError]) -> str | None:
    """A string, or None when absent; anything else is a problem."""
    if value is None or isinstance(value, str):
        return value
    problems.append(SpecError(where, f"{value!r}: give a string"))
    return None


def _duration(value: Any, where: str, problems: list[SpecError]) -> float | None:
    """A google-duration (``"7200s"``) or a number of seconds (:func:`~.vertex.duration_seconds`), or None."""
    if value is None:
        return None
    try:
        if not isinstance(value, bool) and (seconds := duration_seconds(value)) >= 0:
            return seconds
    except ValueError:
        pass
    problems.append(SpecError(where, f"{value!r}: give a duration in seconds like '7200s'"))
    return None


def _machine(name: Any, config: Mapping[str, Any], where: str, problems: list[SpecError],
             notes: list[str]) -> dict[str, Any]:
    """``machine_spec`` of a legacy machine name or Compute Engine type with the config's ``acceleratorConfig``."""
    accelerator = config.get("acceleratorConfig") or {}
    if not isinstance(name, str) or not name:
        problems.append(SpecError(where, f"{name!r}: give a machine type, e.g. 'n1-standard-8' or 'standard_gpu'"))
        return {}
    if name in REFUSED_MACHINES:
        problems.append(SpecError(where, f"{name!r}: {REFUSED_MACHINES[name]}"))
        return {}
    if name in LEGACY_MACHINES:
        machine_type, kind, count = LEGACY_MACHINES[name]
        if accelerator and name != "cloud_tpu":
            problems.append(SpecError(f"{where.rsplit('Type', 1)[0]}Config.acceleratorConfig",
                                      f"applies to Compute Engine machine types only; {name!r} has its accelerators "
                                      "built in: remove it, or name a Compute Engine type such as 'n1-standard-8'"))
        if name in ("standard_gpu", "complex_model_m_gpu"):
            notes.append(f"{where} {name!r}: {count} NVIDIA Tesla K80 on AI Platform -> {count} NVIDIA_TESLA_T4 "
                         "(Vertex AI no longer offers the K80)")
        if name == "complex_model_s":
            notes.append(f"{where} 'complex_model_s': n1-highcpu-8 on AI Platform -> n1-highcpu-16 (Vertex AI has "
                         "no n1-highcpu-8)")
    elif re.match(MACHINE_TYPE_RE, name):  # a Compute Engine type: Vertex AI's own validation judges it
        machine_type, kind, count = name, None, 0
    else:
        problems.append(SpecError(where, f"{name!r} is neither a Compute Engine machine type nor one of AI Platform's "
                                         f"names ({', '.join(sorted([*LEGACY_MACHINES, *REFUSED_MACHINES]))})"))
        return {}
    if accelerator:
        if not isinstance(accelerator, Mapping):
            problems.append(SpecError(f"{where}.acceleratorConfig", "give {type: ..., count: ...}"))
        else:
            kind = _text(accelerator.get("type"), f"{where}.acceleratorConfig.type", problems) or None
            count = count_of(accelerator.get("count"), f"{where}.acceleratorConfig.count", problems) or (
                8 if kind and kind.startswith("TPU") else 1)
            if kind in ACCELERATOR_RENAMES:
                notes.append(f"{where} accelerator {kind} -> {ACCELERATOR_RENAMES[kind]}")
                kind = ACCELERATOR_RENAMES[kind]
    spec: dict[str, Any] = {"machine_type": machine_type}
    if kind:
        spec.update(accelerator_type=kind, accelerator_count=count)
    return spec


def _image(runtime: Any, python: Any, gpu: bool, tpu: bool, executor_image_uri: str | None,
           problems: list[SpecError]) -> str:
    """The pre-built container of ``runtimeVersion`` / ``pythonVersion`` (or ``executor_image_uri``)."""
    if executor_image_uri:
        return executor_image_uri
    if runtime is None:
        problems.append(SpecError("trainingInput.runtimeVersion", "give the runtime version (e.g. '2.11') or "
                                  "masterConfig.imageUri, or pass executor_image_uri"))
        return ""
    runtime = str(runtime)
    if python is not None and str(python) != "3.7":
        problems.append(SpecError("trainingInput.pythonVersion", f"{python!r}: Vertex AI has no container for Python "
                                  f"{python}; port the code to Python 3.7 and runtimeVersion >= 1.15"))
        return ""
    version = RUNTIME_CONTAINERS.get(runtime)
    if version is None:
        fix = "use '2.11'" if runtime == "2.10" else f"the runtimes with one are {', '.join(RUNTIME_CONTAINERS)}"
        problems.append(SpecError("trainingInput.runtimeVersion", f"{runtime!r} has no Vertex AI training container: "
                                  f"{fix}, or pass executor_image_uri (e.g. a scikit-learn or XGBoost container)"))
        return ""
    if tpu:
        problems.append(SpecError("trainingInput.runtimeVersion", f"Vertex AI has no TPU container of runtime "
                                  f"{runtime}: pass executor_image_uri (e.g. {CONTAINER_REPOSITORY}/tf-tpu.2-15.cp310"
                                  ":latest), or run the workload with ResilientTPUWorkloadOperator"))
        return ""
    return f"{CONTAINER_REPOSITORY}/tf-{'gpu' if gpu else 'cpu'}.{version}:latest"


def translate_training_input(training_input: Mapping[str, Any], *, executor_image_uri: str | None = None
                             ) -> LegacyTranslation:
    """Translate a legacy ``TrainingInput`` (see the module docstring).

    Args:
        training_input: the ``trainingInput`` of an ``ml v1`` Job (camelCase or snake_case keys; counts as numbers
            or int64 strings; ``scaleTier`` in any case).
        executor_image_uri: the container to run a package in instead of the runtime's TensorFlow container
            (a scikit-learn or XGBoost job, a newer TensorFlow).

    Returns:
        The CustomJob's arguments (:class:`LegacyTranslation`).

    Raises:
        SpecError: every field that cannot be carried over, one line each (``trainingInput.<field>: <why and the
            fix>``), before anything is submitted.
    """
    problems: list[SpecError] = []
    notes: list[str] = []
    if not isinstance(training_input, Mapping):
        raise SpecError("trainingInput", f"give the TrainingInput mapping, got {type(training_input).__name__}")
    body = _normalized(training_input)
    for key in sorted(set(body) - TRAINING_FIELDS):
        problems.append(SpecError(f"trainingInput.{key}", f"not a TrainingInput field; the fields are "
                                                          f"{', '.join(sorted(TRAINING_FIELDS))}"))
    # The old operator always sent scaleTier (null when not given); a master type without a tier means CUSTOM.
    tier = (_text(body.get("scaleTier"), "trainingInput.scaleTier", problems) or (
        "CUSTOM" if body.get("masterType") else "BASIC")).upper()
    if tier not in (*SCALE_TIERS, "CUSTOM"):
        problems.append(SpecError("trainingInput.scaleTier", f"{body['scaleTier']!r}: one of "
                                                             f"{', '.join([*SCALE_TIERS, 'CUSTOM'])}"))
        tier = "BASIC"
    types: dict[str, Any] = {}
    counts: dict[str, int] = {"master": 1}
    if tier == "CUSTOM":
        if not body.get("masterType"):
            problems.append(SpecError("trainingInput.masterType", "is required with scaleTier CUSTOM, e.g. "
                                                                  "'n1-standard-8'"))
        for role in ROLES:
            types[role] = body.get(f"{role}Type")
            if role != "master":
                counts[role] = count_of(body.get(f"{role}Count"), f"trainingInput.{role}Count", problems)
                if counts[role] and not types[role]:
                    problems.append(SpecError(f"trainingInput.{role}Type", f"is required with {role}Count > 0"))
    else:
        master, workers, servers = SCALE_TIERS[tier]
        types["master"] = master
        for role, spec in (("worker", workers), ("parameterServer", servers)):
            if spec is not None:
                types[role], counts[role] = spec
        for role in ROLES:
            for key in (f"{role}Type", f"{role}Count") if role != "master" else ("masterType",):
                if body.get(key) not in (None, "", 0, "0"):
                    problems.append(SpecError(f"trainingInput.{key}", f"applies with scaleTier CUSTOM only (the tier "
                                              f"is {tier}): set scaleTier CUSTOM or remove it"))
    configs = {role: body.get(f"{role}Config") or {} for role in ROLES}
    for role, config in configs.items():
        if not isinstance(config, Mapping):
            problems.append(SpecError(f"trainingInput.{role}Config", "give a ReplicaConfig mapping"))
            configs[role] = {}
            continue
        for key in sorted(set(config) - REPLICA_FIELDS):
            known = ", ".join(sorted(REPLICA_FIELDS))
            problems.append(SpecError(f"trainingInput.{role}Config.{key}", f"not a ReplicaConfig field ({known})"))
    images = {role: _text(c.get("imageUri"), f"trainingInput.{role}Config.imageUri", problems)
              for role, c in configs.items()}
    master_image = images["master"]
    custom = any(images.values())
    if custom and body.get("runtimeVersion") is not None:
        problems.append(SpecError("trainingInput.runtimeVersion", "and masterConfig.imageUri exclude each other (a "
                                                                  "custom container brings its runtime): remove one"))
    if not custom and not (body.get("packageUris") and body.get("pythonModule")):
        problems.append(SpecError("trainingInput.packageUris", "and pythonModule are required without a custom "
                                                               "container (masterConfig.imageUri)"))
    chief = _flag(body.get("useChiefInTfConfig"), "trainingInput.useChiefInTfConfig", problems)
    extra_args: list[str] = []
    study: dict[str, Any] | None = None
    if body.get("hyperparameters") is not None:
        extra_args, study = study_of_hyperparameters(body["hyperparameters"], problems)
        if extra_args:
            notes.append("hyperparameters: parameters with one value -> " + " ".join(extra_args))
        if study:
            names = ", ".join(p["parameter_id"] for p in study["study_spec"]["parameters"])
            metric = study["study_spec"]["metrics"][0]["metric_id"]
            notes.append(f"hyperparameters: a study over {names} -> a HyperparameterTuningJob of "
                         f"{study['max_trial_count']} trial(s), metric {metric}")
    args = _strings(body.get("args"), "trainingInput.args", problems)
    job_dir = body.get("jobDir")
    if job_dir is not None and not (isinstance(job_dir, str) and job_dir.startswith("gs://")):
        problems.append(SpecError("trainingInput.jobDir", f"{job_dir!r}: give a gs:// path"))
        job_dir = None
    pools: list[dict[str, Any]] = []
    for role in ROLES:
        if role != "master" and not counts.get(role):
            pools.append({})
            continue
        config = configs[role]
        machine = _machine(types.get(role), config, f"trainingInput.{role}Type", problems, notes)
        pool: dict[str, Any] = {"machine_spec": machine, "replica_count": counts.get(role, 1)}
        image = images[role] or master_image
        if image:
            own = "containerCommand" if config.get("containerCommand") else None
            source = config if own else configs["master"]
            command = _strings(source.get("containerCommand"), f"trainingInput.{role if own else 'master'}Config."
                                                               "containerCommand", problems)
            if not command:
                problems.append(SpecError(f"trainingInput.{role}Config.containerCommand", "give the container's "
                                          "command (its ENTRYPOINT, e.g. ['python3', '-m', 'trainer.task']): this "
                                          "provider does not rely on an image's ENTRYPOINT"))
            container_args = _strings(config.get("containerArgs"), f"trainingInput.{role}Config.containerArgs",
                                      problems) or [*args, *extra_args]
            if not chief:
                command, container_args = tf_config_master_command([*command, *container_args]), []
            pool["container_spec"] = {"image_uri": str(image), "command": command, "args": container_args}
        else:
            gpu = str(machine.get("accelerator_type") or "").startswith("NVIDIA")
            tpu = str(machine.get("accelerator_type") or "").startswith("TPU")
            package_args = [*args, *extra_args]
            if job_dir and not any(a == "--job-dir" or a.startswith("--job-dir=") for a in package_args):
                package_args += ["--job-dir", str(job_dir)]
            pool["python_package_spec"] = {
                "executor_image_uri": _image(body.get("runtimeVersion"), body.get("pythonVersion"), gpu, tpu,
                                             executor_image_uri, problems),
                "package_uris": _strings(body.get("packageUris"), "trainingInput.packageUris", problems),
                "python_module": _text(body.get("pythonModule"), "trainingInput.pythonModule", problems) or "",
                "args": package_args}
        disk = config.get("diskConfig")
        if disk is not None and not isinstance(disk, Mapping):
            problems.append(SpecError(f"trainingInput.{role}Config.diskConfig", "give {bootDiskType, bootDiskSizeGb}"))
        elif disk:
            pool["disk_spec"] = {k: v for k, v in (("boot_disk_type", disk.get("bootDiskType")),
                                                   ("boot_disk_size_gb", disk.get("bootDiskSizeGb"))) if v is not None}
        if config.get("tpuTfVersion"):
            notes.append(f"trainingInput.{role}Config.tpuTfVersion dropped: a Vertex AI TPU image carries its own "
                         "TensorFlow")
        pools.append(pool)
    while pools and not pools[-1]:
        pools.pop()
    scheduling = body.get("scheduling") or {}
    if not isinstance(scheduling, Mapping):
        problems.append(SpecError("trainingInput.scheduling", "give {maxRunningTime, maxWaitTime}"))
        scheduling = {}
    for key in sorted(set(scheduling) - {"maxRunningTime", "maxWaitTime", "priority"}):
        problems.append(SpecError(f"trainingInput.scheduling.{key}", "not a Scheduling field (maxRunningTime, "
                                                                     "maxWaitTime, priority)"))
    if scheduling.get("priority") not in (None, 0, "0"):
        problems.append(SpecError("trainingInput.scheduling.priority", "Vertex AI has no job priority: remove it"))
    if body.get("encryptionConfig"):
        problems.append(SpecError("trainingInput.encryptionConfig", dict((f, w) for f, _, w in FIELD_FATES)[
            "encryptionConfig"]))
    timeout = _duration(scheduling.get("maxRunningTime"), "trainingInput.scheduling.maxRunningTime", problems)
    queue = _duration(scheduling.get("maxWaitTime"), "trainingInput.scheduling.maxWaitTime", problems)
    web = _flag(body.get("enableWebAccess"), "trainingInput.enableWebAccess", problems)
    for key in ("region", "serviceAccount", "network"):
        if body.get(key) is not None and not isinstance(body[key], str):
            problems.append(SpecError(f"trainingInput.{key}", f"{body[key]!r}: give a string"))
    if problems:  # a problem of the job, found once per pool, is said once
        raise SpecError.of_many(list({str(p): p for p in problems}.values()))
    return LegacyTranslation(region=body.get("region"), worker_pool_specs=pools, base_output_dir=job_dir,
                             timeout_seconds=timeout, queue_timeout_seconds=queue,
                             service_account=body.get("serviceAccount"), network=body.get("network"),
                             enable_web_access=web, notes=notes, study=study)


__all__ = ["CONTAINER_REPOSITORY", "FIELD_FATES", "LEGACY_MACHINES", "REFUSED_MACHINES", "RUNTIME_CONTAINERS",
           "SCALE_TIERS", "LegacyTranslation", "fate_table", "tf_config_master_command",
           "translate_training_input"]
