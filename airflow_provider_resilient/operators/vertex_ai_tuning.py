"""``ResilientHyperparameterTuningJobOperator``: a Vertex AI HyperparameterTuningJob whose study finishes despite
crashes, internal errors, stockouts, quota waits and preemptions -- without running a finished trial again.

It is :class:`~.vertex_ai.ResilientCustomJobOperator` with a tuning job as each attempt's resource
(:class:`~..backends.vertex_tuning.VertexTuningJobBackend`): the same labels and no-duplicate create, the same
reattach after a task retry, the same Clear and Mark-failed handling, the same cancel on kill, deferrable in
the same trigger. What differs is what an attempt is and when the run is done:

* **The run is one study** of ``max_trial_count`` trials. Each attempt's tuning job asks only for the trials
  still owed: a trial that SUCCEEDED (its metric kept) or failed with a permanent user error (it counts toward
  ``max_failed_trial_count``, as the platform counts it) is never run again; a trial that failed for a
  transient reason (a crash, an internal error, a lost replica: the policy's retryable classes) or was stopped
  by the job's end is owed again. A GRID_SEARCH study's next job is narrowed to the grid points not yet done.
* **A tuning job's end is judged by its trials** (:func:`~..supervisor.study.outcome`): a job that failed
  because transient trial failures reached the platform's ``max_failed_trial_count``, or one that SUCCEEDED
  short of trials because some failed transiently, is a failure of that class: the policy's rule for it decides
  the next attempt (its budget, its backoff). Permanent failures past the user's ``max_failed_trial_count``
  fail the run, naming the trials.
* **Each trial resumes from its own checkpoints**, found by its parameters: a trial writes under
  ``<RESILIENT_CHECKPOINT_DIR>/trials/<trial_key>/`` (:func:`~..supervisor.study.trial_key`, e.g.
  ``learning_rate=0.001``), which the same grid point run again after an interruption finds. Vertex AI's own
  ``AIP_CHECKPOINT_DIR`` (``<base>/<trial id>/checkpoints``) cannot serve: trial ids restart at 1 in every job.
  No ``RESILIENT_RESUME_FROM`` is set (it would be one checkpoint for every trial).
* **The result is the best trial across every attempt**: its parameters, metric, job and trial id, with the
  counts (trials run, succeeded, failed, re-run) and every trial's record.

Importing this module imports no Google library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .job_kinds import TRIALS_DIR, StudyKind
from .vertex_ai import ResilientCustomJobOperator

#: Key of the supervisor's state in the task state store. Renaming it breaks in-flight runs.
STATE_KEY = "resilient_tuning_job"


class ResilientHyperparameterTuningJobOperator(ResilientCustomJobOperator):
    """Run a Vertex AI hyperparameter study to completion through crashes, stockouts and internal errors, one
    HyperparameterTuningJob per attempt, never running a finished trial again.

    Args:
        study_spec: the ``StudySpec`` as a dict (snake_case, or the message): exactly one metric
            (``{"metric_id", "goal": "MAXIMIZE" | "MINIMIZE"}``), the parameters (``parameter_id`` and one of
            ``double_value_spec`` / ``integer_value_spec`` / ``discrete_value_spec`` / ``categorical_value_spec``,
            optional ``scale_type``) and ``algorithm`` (``ALGORITHM_UNSPECIFIED`` -- Vertex AI's Bayesian search --
            ``GRID_SEARCH`` or ``RANDOM_SEARCH``). Each trial's replicas get ``--<parameter_id>=<value>`` appended
            to their arguments, and report the metric as ``cloudml-hypertune`` does (the file named by
            ``CLOUD_ML_HP_METRIC_FILE``). Conditional parameters and automated stopping are refused (a resumed
            study could not carry them over).
        max_trial_count: trials in the whole study, across attempts (>= 1; a grid: at most its size).
        parallel_trial_count: trials at once (1 to ``max_trial_count``; default 1).
        max_failed_trial_count: trials failed *permanently* (exit 1, a bad argument...) that fail the study; 0
            (default) lets Vertex AI decide (the job fails when every trial failed). Transient trial failures never
            count: their trials are run again.
        worker_pool_specs: each trial's CustomJob pools, as for the CustomJob operator.
        base_output_dir: ``gs://`` prefix of the trials' outputs; attempt N's job gets ``<base_output_dir>/attempt-N``
            (Vertex AI's ``AIP_MODEL_DIR`` of its trial T: ``<that>/<T>/model``), since trial ids restart in every
            job.
        checkpoint_dir: the study's checkpoint root (default ``<base_output_dir>/checkpoints/``); each trial writes
            under ``<checkpoint_dir>/trials/<trial_key>/`` (the trial reads the root from
            ``RESILIENT_CHECKPOINT_DIR``) and resumes from the newest complete checkpoint there.

    ``display_name``, ``region``, ``timeout``, ``restart_job_on_worker_restart``, ``strategy``,
    ``max_wait_duration``, ``disable_retries`` and ``cancel_on_kill`` are as for
    :class:`~.vertex_ai.ResilientCustomJobOperator` (``timeout`` bounds each trial); the rest are the arguments
    every operator of the provider shares (:class:`~.base.SupervisedOperator`). ``hang_timeout``, ``preflight``
    and ``goodput_job_name`` are not taken: a study's progress is its trials (each its own goodput job), and the
    preflight wrapper would swallow the parameters the platform appends to the command line.

    Returns (and pushes to XCom as ``return_value``): ``{"job_name", "state", "metric_id", "goal",
    "best_trial": {"parameters", "metric", "job_name", "trial_id", "attempt", "key", "checkpoint", "model_dir"} |
    None,
    "trials_run", "trials_succeeded", "trials_failed_permanently", "trials_rerun", "trials": [...],
    "attempts": [...]}``.

    Raises:
        AirflowFailException: a bad argument (before anything is submitted, naming the field and the fix), a
            permanent failure (trials past ``max_failed_trial_count``), or a spent budget.
        AirflowException: an infrastructure error (Airflow's task retries apply; the retried task reattaches).
    """

    STATE_KEY = STATE_KEY
    template_fields: Sequence[str] = (*ResilientCustomJobOperator.template_fields, "study_spec")
    template_fields_renderers = {**ResilientCustomJobOperator.template_fields_renderers, "study_spec": "json"}
    ui_color = "#d6c2ff"

    def __init__(self, *, study_spec: Mapping[str, Any], max_trial_count: int, parallel_trial_count: int = 1,
                 max_failed_trial_count: int = 0, **kwargs: Any) -> None:
        self.study_spec = study_spec
        self.max_trial_count = max_trial_count
        self.parallel_trial_count = parallel_trial_count
        self.max_failed_trial_count = max_failed_trial_count
        super().__init__(**kwargs)

    def _kind(self) -> Any:
        """A study of the (rendered) arguments (:class:`~.job_kinds.StudyKind`)."""
        return StudyKind(self.study_spec, self.max_trial_count, self.parallel_trial_count,
                         self.max_failed_trial_count)


__all__ = ["STATE_KEY", "TRIALS_DIR", "ResilientHyperparameterTuningJobOperator"]
