"""Legacy AI Platform Training jobs (``ml.googleapis.com/v1``, shut down 2025-01-31), run on Vertex AI with the
provider's failure rules: :class:`ResilientAIPlatformTrainingJobOperator` takes the arguments of the Google
provider's removed ``MLEngineStartTrainingJobOperator`` -- an old DAG changes its import line and runs -- or a whole
``TrainingInput`` body, translates it (:func:`~..specs.legacy.translate_training_input`) and runs the CustomJob
like :class:`~.vertex_ai.ResilientCustomJobOperator` (resume from the latest checkpoint, no duplicate job, nothing
left running). AI Platform Training's own failure handling is why those rules apply ("Understanding the AI
Platform Training service", https://cloud.google.com/ai-platform/training/docs/understanding-training-service): a
replica exiting non-zero is restarted by the platform up to five times, then the job is retried up to three times,
and a common error is permanent.

Importing this module imports no Google library.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..backends.base import AttemptSpec
from ..compat import AirflowFailException
from ..specs.common import SpecError
from ..specs.legacy import LegacyTranslation, translate_training_input
from ..supervisor.reconcile import Owner
from .arguments import has_template
from .job_kinds import CustomJobKind, StudyKind
from .vertex_ai import STATE_KEY as CUSTOM_JOB_STATE_KEY
from .vertex_ai import ResilientCustomJobOperator

#: The arguments of ``MLEngineStartTrainingJobOperator`` (and ours beside them) -> their ``TrainingInput`` field.
LEGACY_ARGUMENTS: Mapping[str, str] = {
    "region": "region", "package_uris": "packageUris", "training_python_module": "pythonModule",
    "training_args": "args", "scale_tier": "scaleTier", "master_type": "masterType", "master_config": "masterConfig",
    "worker_type": "workerType", "worker_count": "workerCount", "worker_config": "workerConfig",
    "parameter_server_type": "parameterServerType", "parameter_server_count": "parameterServerCount",
    "parameter_server_config": "parameterServerConfig", "evaluator_type": "evaluatorType",
    "evaluator_count": "evaluatorCount", "evaluator_config": "evaluatorConfig", "runtime_version": "runtimeVersion",
    "python_version": "pythonVersion", "job_dir": "jobDir", "hyperparameters": "hyperparameters",
    "service_account": "serviceAccount", "network": "network", "scheduling": "scheduling",
    "use_chief_in_tf_config": "useChiefInTfConfig", "enable_web_access": "enableWebAccess",
    "encryption_config": "encryptionConfig",
}
#: The old operator's ``mode`` values: ``DRY_RUN`` logs the job instead of submitting it.
MODES = ("PRODUCTION", "DRY_RUN")


class ResilientAIPlatformTrainingJobOperator(ResilientCustomJobOperator):
    """Run a legacy AI Platform Training job on Vertex AI, through crashes, stockouts and internal errors.

    A drop-in for ``airflow.providers.google.cloud.operators.mlengine.MLEngineStartTrainingJobOperator`` (removed in
    apache-airflow-providers-google 15.0.0): the same arguments, plus the ``TrainingInput`` fields it never took.

    Args:
        job_id: the job's id; the CustomJob's display name.
        region: ``trainingInput.region``, the Vertex AI region.
        package_uris, training_python_module, training_args: ``packageUris``, ``pythonModule``, ``args``.
        scale_tier, master_type, master_config: ``scaleTier`` (BASIC, STANDARD_1, PREMIUM_1, BASIC_GPU, BASIC_TPU,
            CUSTOM), ``masterType`` (a Compute Engine machine type or a legacy name such as ``standard_gpu``),
            ``masterConfig`` (a ReplicaConfig dict, camelCase).
        worker_type, worker_count, worker_config: the workers (CUSTOM tier): ``workerType``, ``workerCount``,
            ``workerConfig``; ``parameter_server_type``, ``parameter_server_count``, ``parameter_server_config``
            and ``evaluator_type``, ``evaluator_count``, ``evaluator_config`` are the parameter servers and
            evaluators the same way.
        runtime_version, python_version: pick the pre-built container (e.g. ``"2.11"``, ``"3.7"``).
        job_dir: ``jobDir``: Vertex AI's ``base_output_directory``, and ``--job-dir`` in a package's args.
        hyperparameters: a HyperparameterSpec dict (camelCase). A parameter with one feasible value becomes a flag;
            a study over the others runs as a Vertex AI HyperparameterTuningJob with
            :class:`~.vertex_ai_tuning.ResilientHyperparameterTuningJobOperator`'s guarantees (no finished trial
            run again, each trial resuming from its own checkpoints, the best trial across attempts returned).
        scheduling: ``{"maxRunningTime": "7200s", "maxWaitTime": "3600s"}``.
        use_chief_in_tf_config, enable_web_access, network, service_account, encryption_config: the
            ``TrainingInput`` fields of the same names.
        training_input: a whole ``TrainingInput`` body (camelCase, as in an old ``config.yaml``); the arguments
            above override its fields.
        executor_image_uri: the container a package runs in instead of the runtime's TensorFlow container (a
            scikit-learn or XGBoost job).
        mode: ``"PRODUCTION"`` runs the job; ``"DRY_RUN"`` logs the translated CustomJob and submits nothing.
        labels, project_id, gcp_conn_id, impersonation_chain, deferrable, cancel_on_kill and the rest: as on
            :class:`~.vertex_ai.ResilientCustomJobOperator` (the resilience policy's ``queue_timeout_seconds``
            becomes ``scheduling.maxWaitTime`` when that is given).

    Returns: as :class:`~.vertex_ai.ResilientCustomJobOperator` (a study: as
    :class:`~.vertex_ai_tuning.ResilientHyperparameterTuningJobOperator`); in ``DRY_RUN``, ``{"state": "DRY_RUN",
    "custom_job": {...}}`` (a study: ``"hyperparameter_tuning_job"``).

    Raises:
        AirflowFailException: a field that cannot be carried over (one line each, ``trainingInput.<field>: ...``,
            with the fix) -- when the DAG is parsed for literal arguments, after rendering for templated ones --
            a permanent failure, or a spent budget.
    """

    #: The CustomJob operator's key (a run in flight keeps its state across the upgrade that made this class a
    #: tuning operator too).
    STATE_KEY = CUSTOM_JOB_STATE_KEY
    ui_color = ResilientCustomJobOperator.ui_color
    template_fields: Sequence[str] = (*ResilientCustomJobOperator.template_fields, "job_id", "training_input",
                                      "executor_image_uri",
                                      *(a for a in LEGACY_ARGUMENTS if a not in ("region", "service_account",
                                                                                 "network")))

    def __init__(self, *, job_id: str, region: str, training_input: Mapping[str, Any] | None = None,
                 executor_image_uri: str | None = None, mode: str = "PRODUCTION",
                 base_output_dir: str | None = None, **kwargs: Any) -> None:
        legacy = {name: kwargs.pop(name, None) for name in LEGACY_ARGUMENTS if name != "region"}
        vertex = {k: kwargs.pop(k) for k in ("service_account", "network") if k in kwargs}
        self.job_id = job_id
        self.training_input = training_input
        self.executor_image_uri = executor_image_uri
        self.mode = mode
        for name, value in legacy.items():
            setattr(self, name, value)
        self._translation: LegacyTranslation | None = None
        super().__init__(region=region, display_name=job_id, worker_pool_specs=[], base_output_dir=base_output_dir,
                         **vertex, **kwargs)

    # ------------------------------------------------------------------ the translation
    def _body(self) -> dict[str, Any]:
        """The ``TrainingInput``: ``training_input`` with the arguments given over it."""
        body = dict(self.training_input or {}) if isinstance(self.training_input, Mapping) else {}
        for name, key in LEGACY_ARGUMENTS.items():
            value = getattr(self, name, None)
            if value is not None and not (name == "training_args" and value == []):
                body[key] = value
        return body

    def _templated(self) -> bool:
        return any(has_template(getattr(self, n, None)) for n in (*LEGACY_ARGUMENTS, "training_input",
                                                                   "executor_image_uri"))

    def _validate(self, skip: Collection[str] = ()) -> None:
        """Translate the ``TrainingInput`` (after rendering when an argument is templated: as the DAG is parsed
        only literal arguments are judged) and check the CustomJob it gives.

        Raises:
            AirflowFailException: one line per problem, naming the field and the fix.
        """
        if self.mode not in MODES:
            raise AirflowFailException(f"{type(self).__name__} {self.task_id}: mode: {self.mode!r}: one of "
                                       f"{', '.join(MODES)}")
        if skip and self._templated():
            return  # judged whole after rendering
        if self.training_input is not None and not isinstance(self.training_input, Mapping):
            raise AirflowFailException(f"{type(self).__name__} {self.task_id}: training_input: give the TrainingInput "
                                       f"as a dict, got {type(self.training_input).__name__}")
        try:
            translation = translate_training_input(self._body(), executor_image_uri=self.executor_image_uri)
        except SpecError as exc:
            raise AirflowFailException(f"{type(self).__name__} {self.task_id}: {exc}") from exc
        self._apply(translation)
        super()._validate(skip)

    def _kind(self) -> Any:
        """What the translated ``TrainingInput`` submits: a study (:class:`~.job_kinds.StudyKind`) when its
        ``hyperparameters`` leave a parameter open, else a CustomJob -- the specs decide
        (:func:`~..specs.legacy.translate_training_input`)."""
        study = self._translation.study if self._translation is not None else None
        if study is None:
            return CustomJobKind()
        return StudyKind(study["study_spec"], study["max_trial_count"], study["parallel_trial_count"],
                         study["max_failed_trial_count"])

    def _apply(self, translation: LegacyTranslation) -> None:
        """Become the CustomJob (or the study) of ``translation``."""
        self._translation = translation
        self.worker_pool_specs = translation.worker_pool_specs
        self.base_output_dir = self.base_output_dir or translation.base_output_dir
        if translation.timeout_seconds is not None:
            self.timeout = translation.timeout_seconds
        if translation.queue_timeout_seconds is not None:
            self.resilience_policy = replace(self.resilience_policy,
                                             queue_timeout_seconds=translation.queue_timeout_seconds)

    def _custom_job(self, spec: AttemptSpec) -> dict[str, Any]:
        """The translated CustomJob of one attempt (:meth:`~.vertex_ai.ResilientCustomJobOperator._custom_job`);
        what changed on the way is logged with the first (not as the DAG is parsed)."""
        job = super()._custom_job(spec)
        if self._translation is not None and self._translation.enable_web_access:
            job["job_spec"]["enable_web_access"] = True
        if self._translation is not None and spec.attempt == 1:
            for note in self._translation.notes:
                self.log.info("AI Platform -> Vertex AI: %s", note)
        return job

    # ------------------------------------------------------------------ Airflow entry points
    def execute(self, context: Any) -> Any:
        if self.mode == "DRY_RUN":
            self._validate()
            owner = Owner(str(getattr(self, "dag_id", "") or ""), self.task_id, str(context.get("run_id") or ""),
                          self._map_index(context))
            spec = AttemptSpec(attempt=1, task=owner, labels=dict(self.labels or {}))
            result: dict[str, Any] = self._kind().dry_run(self, spec)
            return result
        return super().execute(context)

    def _prepare_resume(self) -> None:
        """A resumed process is a fresh operator: translate the (rendered) arguments again first -- a templated
        job was never translated in this process, and the next attempt is built from the pools."""
        self._validate()


__all__ = ["LEGACY_ARGUMENTS", "MODES", "ResilientAIPlatformTrainingJobOperator"]
