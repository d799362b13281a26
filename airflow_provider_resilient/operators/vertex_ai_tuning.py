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

from ..backends.base import AttemptSpec
from ..specs.common import SpecError
from ..supervisor import RunState
from ..supervisor.study import Owed
from .vertex_ai import ResilientCustomJobOperator, _as_dict

#: Key of the supervisor's state in the task state store. Renaming it breaks in-flight runs.
STATE_KEY = "resilient_tuning_job"
#: Where a trial writes its checkpoints, under the run's ``checkpoint_dir`` (then ``/<trial_key>/``).
TRIALS_DIR = "trials"


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

    def _is_study(self) -> bool:
        """Whether this run is a study (always, here; the legacy AI Platform operator, a subclass, runs one only
        when its ``hyperparameters`` leave a parameter open, and a single CustomJob otherwise)."""
        return True

    # ------------------------------------------------------------------ the shell
    def _study_spec(self) -> Any:
        spec = _as_dict(self.study_spec)
        return dict(spec) if isinstance(spec, Mapping) else spec

    def _study(self) -> Any:
        from ..specs.tuning import study_of

        return study_of(self._study_spec(), self.max_trial_count, self.max_failed_trial_count)

    def _make_backend(self) -> Any:
        """The run's :class:`~..backends.vertex_tuning.VertexTuningJobBackend`."""
        if not self._is_study():
            return super()._make_backend()
        from ..backends.vertex_tuning import VertexTuningJobBackend

        return VertexTuningJobBackend(
            self._hook(), study=self._study(), tuning_job=self._tuning_job, project_id=self.project_id,
            region=self.region, fallbacks=self.resilience_policy.fallbacks, checkpoint_dir=self._checkpoint_dir(),
            checkpoint_marker=self.checkpoint_marker, queue_timeout=self.resilience_policy.queue_timeout_seconds,
            poll_interval=self.poll_interval, clock=lambda: self._clock())

    def _tuning_job(self, spec: AttemptSpec, share: Owed) -> dict[str, Any]:
        """One attempt's HyperparameterTuningJob body: the owed share of the study, each trial a CustomJob of the
        operator's pools with the attempt's labels and ``RESILIENT_*`` environment."""
        from ..specs.tuning import build_tuning_job

        trial = self._custom_job(spec)
        if self.base_output_dir:  # trial ids restart at 1 in each job: one output directory per attempt
            trial["job_spec"]["base_output_directory"] = {"output_uri_prefix": self._attempt_output(spec.attempt)}
        return build_tuning_job(display_name=self.display_name, study_spec=self._study_spec(), share=share,
                                parallel_trial_count=self.parallel_trial_count, trial_job_spec=trial["job_spec"],
                                labels=spec.labels)

    def _attempt_output(self, attempt: int) -> str:
        """Attempt ``attempt``'s ``base_output_directory``: ``<base_output_dir>/attempt-<N>``. Vertex AI gives trial
        T ``<it>/<T>/model`` etc.; trial ids restart at 1 in every job, so a shared one would let attempt 2's
        trial 1 overwrite attempt 1's model."""
        return f"{(self.base_output_dir or '').rstrip('/')}/attempt-{attempt}"

    def _resumes_run_checkpoints(self) -> bool:
        """A study does not: each trial resumes from its own checkpoints (by its parameters), not from one of the
        run's."""
        return not self._is_study()

    def _checkpoint_saves(self) -> list[Any] | None:
        """None: the trials' checkpoints are many progress lines, not the run's one (the ledger counts time
        only)."""
        if not self._is_study():
            return super()._checkpoint_saves()
        return None

    def _push_history(self, context: Any, state: RunState) -> None:
        """Push the attempt history to XCom. No run ledger: it reads one line of checkpoint progress, and a study
        has one per trial; its goodput is the trial time kept (``trial_seconds`` of the result and of XCom
        ``study``)."""
        if not self._is_study():
            return super()._push_history(context, state)
        from ..policy import history_to_json

        context["ti"].xcom_push(key="attempt_history", value=history_to_json(state.history))

    def _finish(self, context: Any, state: RunState, job_name: str) -> dict[str, Any]:
        if not self._is_study():
            return super()._finish(context, state, job_name)
        from ..policy import history_to_json
        from ..supervisor.study import study_summary

        self._live_job = None
        backend = self._backend()
        task = self._task_instance(context)
        from ..specs.common import job_labels

        trials = backend.last_trials
        if trials is None:  # no end judged in this process: listed once
            trials = backend.study_trials(job_labels(task.dag_id, task.task_id, task.run_id, task.map_index, None))
        summary = study_summary(backend.study, trials)
        best = summary["best_trial"]
        if best is not None:
            best["checkpoint"] = self._trial_checkpoint(best["key"])
            best["model_dir"] = (f"{self._attempt_output(best['attempt'])}/{best['trial_id']}/model"
                                 if self.base_output_dir else None)
            self.log.info("Best trial of %d run (%d re-run): %s %s = %s (trial %s of %s, attempt %d)",
                          summary["trials_run"], summary["trials_rerun"], best["parameters"], summary["metric_id"],
                          best["metric"], best["trial_id"], best["job_name"], best["attempt"])
        seconds = summary["trial_seconds"]
        self.log.info("Trial time: %.0f s kept, %.0f s lost to failed or stopped trials (goodput %.1f%%)",
                      seconds["kept"], seconds["lost"], 100 * seconds["goodput"])
        context["ti"].xcom_push(key="study", value=summary)
        return {"job_name": job_name, "state": "JOB_STATE_SUCCEEDED", **summary,
                "attempts": history_to_json(state.history)}

    def _trial_checkpoint(self, key: str) -> dict[str, Any] | None:
        """The newest complete checkpoint of the trial whose key is ``key`` (``{"uri", "step"}``), or None."""
        from ..checkpoints import find_latest_checkpoint

        try:
            found = find_latest_checkpoint(f"{self._checkpoint_dir().rstrip('/')}/{TRIALS_DIR}/{key}",
                                           marker=self.checkpoint_marker)
        except Exception as exc:  # the study succeeded; a missing listing does not change that
            self.log.warning("Could not list the best trial's checkpoint: %s", exc)
            return None
        return {"uri": found.uri, "step": found.step} if found else None

    def _problems(self) -> list[SpecError]:
        """The CustomJob operator's problems of the trial's pools, :func:`~..specs.tuning.study_problems`, and
        the arguments a study does not take: ``hang_timeout`` (a study's progress is its trials: bound each with
        ``timeout``), ``preflight`` (its wrapper would swallow the ``--<parameter>=<value>`` arguments the
        platform appends) and ``goodput_job_name`` (each trial is its own goodput job)."""
        from ..specs.tuning import study_problems

        problems = super()._problems()
        if not self._is_study():
            return problems
        if self.hang_timeout is not None:
            problems.append(SpecError("hang_timeout", "not taken by a study (its progress is its trials): bound each "
                                                      "trial with timeout= (scheduling.timeout) instead"))
        if self.preflight:
            problems.append(SpecError("preflight", "not taken by a study: the wrapper would swallow the "
                                                   "--<parameter>=<value> arguments the platform appends"))
        if self.goodput_job_name is not None:
            problems.append(SpecError("goodput_job_name", "not taken by a study (its trials are separate runs, "
                                                          "each its own goodput job): record and read per trial"))
        return [*problems, *study_problems(self._study_spec(), self.max_trial_count, self.parallel_trial_count,
                                           self.max_failed_trial_count)]


__all__ = ["STATE_KEY", "TRIALS_DIR", "ResilientHyperparameterTuningJobOperator"]
