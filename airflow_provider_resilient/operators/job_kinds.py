"""What one attempt of a Vertex AI run submits: a CustomJob (:class:`CustomJobKind`) or the owed share of a
hyperparameter study as a HyperparameterTuningJob (:class:`StudyKind`). The Vertex AI operators are composed with
one: the CustomJob operator always runs a CustomJob, the tuning operator a study, and the AI Platform operator
whichever its translated ``TrainingInput`` is (the specs decide: :func:`~..specs.legacy.translate_training_input`
gives a study when the ``hyperparameters`` leave a parameter open). A kind builds the run's backend, says what the
run resumes from and what its ledger reads, what the task returns on success, and the arguments it refuses; the
operator carries it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..backends.base import AttemptSpec
from ..specs.common import SpecError
from ..supervisor import RunState

#: Where a trial writes its checkpoints, under the run's ``checkpoint_dir`` (then ``/<trial_key>/``).
TRIALS_DIR = "trials"


class CustomJobKind:
    """One CustomJob per attempt, resuming from the run's newest complete checkpoint; the run's goodput ledger reads
    that line of checkpoints."""

    #: A new attempt resumes from the run's newest complete checkpoint.
    resumes_run_checkpoints = True
    #: The run's goodput ledger and checkpoint advice read its checkpoints.
    keeps_run_ledger = True

    def backend(self, op: Any) -> Any:
        """The run's :class:`~..backends.vertex.VertexCustomJobBackend` (on the operator's hook)."""
        from ..backends.vertex import VertexCustomJobBackend

        return VertexCustomJobBackend(
            op._hook(), project_id=op.project_id, region=op.region, fallbacks=op.resilience_policy.fallbacks,
            custom_job=op._custom_job, checkpoint_dir=op._checkpoint_dir(), checkpoint_marker=op.checkpoint_marker,
            hang_timeout=op.hang_timeout, queue_timeout=op.resilience_policy.queue_timeout_seconds,
            poll_interval=op.poll_interval, clock=lambda: op._clock(), read_step_logs=op.read_step_logs,
            restart_timeout=op.restart_timeout)

    def finish(self, op: Any, context: Any, state: RunState, job_name: str) -> dict[str, Any]:
        """``{"job_name", "state", "checkpoint": {"uri", "step"} | None, "attempts"}``."""
        from ..checkpoints import find_latest_checkpoint
        from ..policy import history_to_json

        checkpoint = None
        try:
            found = find_latest_checkpoint(op._checkpoint_dir(), marker=op.checkpoint_marker)
            checkpoint = {"uri": found.uri, "step": found.step} if found else None
        except Exception as exc:  # the job succeeded; a missing listing does not change that
            op.log.warning("Could not list the final checkpoint: %s", exc)
        return {"job_name": job_name, "state": "JOB_STATE_SUCCEEDED", "checkpoint": checkpoint,
                "attempts": history_to_json(state.history)}

    def problems(self, op: Any) -> list[SpecError]:
        """Nothing beyond the CustomJob operator's own checks."""
        return []

    def dry_run(self, op: Any, spec: AttemptSpec) -> dict[str, Any]:
        """The CustomJob that would be submitted (``{"state": "DRY_RUN", "custom_job": ...}``)."""
        job = op._custom_job(spec)
        op.log.info("DRY_RUN: the CustomJob that would be submitted in %s:\n%s", op.region, job)
        return {"state": "DRY_RUN", "custom_job": job}


@dataclass(frozen=True)
class StudyKind:
    """A hyperparameter study: one HyperparameterTuningJob per attempt running the trials still owed, never a
    finished trial again (:mod:`..supervisor.study`); each trial resumes from its own checkpoints under
    ``<checkpoint_dir>/trials/<trial key>/``. The run's ledger counts time only (its progress is many trials').

    Attributes:
        study_spec: the ``StudySpec`` (a dict, or the message).
        max_trial_count, parallel_trial_count, max_failed_trial_count: as for
            :class:`~.vertex_ai_tuning.ResilientHyperparameterTuningJobOperator`.
    """

    study_spec: Any
    max_trial_count: Any
    parallel_trial_count: Any = 1
    max_failed_trial_count: Any = 0

    resumes_run_checkpoints = False
    keeps_run_ledger = False

    def spec(self) -> Any:
        """The study spec as a dict (a message converted; anything else as given, for the checks to name)."""
        from ..specs.messages import message_as_dict

        spec = message_as_dict(self.study_spec)
        return dict(spec) if isinstance(spec, Mapping) else spec

    def study(self) -> Any:
        """The pure :class:`~..supervisor.study.Study` (:func:`~..specs.tuning.study_of`)."""
        from ..specs.tuning import study_of

        return study_of(self.spec(), self.max_trial_count, self.max_failed_trial_count)

    def backend(self, op: Any) -> Any:
        """The run's :class:`~..backends.vertex_tuning.VertexTuningJobBackend`."""
        from ..backends.vertex_tuning import VertexTuningJobBackend

        return VertexTuningJobBackend(
            op._hook(), study=self.study(), tuning_job=lambda spec, share: self.tuning_job(op, spec, share),
            project_id=op.project_id, region=op.region, fallbacks=op.resilience_policy.fallbacks,
            checkpoint_dir=op._checkpoint_dir(), checkpoint_marker=op.checkpoint_marker,
            queue_timeout=op.resilience_policy.queue_timeout_seconds, poll_interval=op.poll_interval,
            clock=lambda: op._clock())

    def tuning_job(self, op: Any, spec: AttemptSpec, share: Any) -> dict[str, Any]:
        """One attempt's HyperparameterTuningJob body: the owed ``share`` of the study, each trial a CustomJob of the
        operator's pools with the attempt's labels and ``RESILIENT_*`` environment."""
        from ..specs.tuning import build_tuning_job

        trial = op._custom_job(spec)
        if op.base_output_dir:  # trial ids restart at 1 in each job: one output directory per attempt
            trial["job_spec"]["base_output_directory"] = {"output_uri_prefix": attempt_output(op, spec.attempt)}
        return build_tuning_job(display_name=op.display_name, study_spec=self.spec(), share=share,
                                parallel_trial_count=self.parallel_trial_count, trial_job_spec=trial["job_spec"],
                                labels=spec.labels)

    def finish(self, op: Any, context: Any, state: RunState, job_name: str) -> dict[str, Any]:
        """The study's result (see the tuning operator) and XCom ``study``."""
        from ..policy import history_to_json
        from ..specs.common import job_labels
        from ..supervisor.study import study_summary

        backend = op._backend()
        task = op._task_instance(context)
        trials = backend.last_trials
        if trials is None:  # no end judged in this process: listed once
            trials = backend.study_trials(job_labels(task.dag_id, task.task_id, task.run_id, task.map_index, None))
        summary = study_summary(backend.study, trials)
        best = summary["best_trial"]
        if best is not None:
            best["checkpoint"] = trial_checkpoint(op, best["key"])
            best["model_dir"] = (f"{attempt_output(op, best['attempt'])}/{best['trial_id']}/model"
                                 if op.base_output_dir else None)
            op.log.info("Best trial of %d run (%d re-run): %s %s = %s (trial %s of %s, attempt %d)",
                        summary["trials_run"], summary["trials_rerun"], best["parameters"], summary["metric_id"],
                        best["metric"], best["trial_id"], best["job_name"], best["attempt"])
        seconds = summary["trial_seconds"]
        op.log.info("Trial time: %.0f s kept, %.0f s lost to failed or stopped trials (goodput %.1f%%)",
                    seconds["kept"], seconds["lost"], 100 * seconds["goodput"])
        context["ti"].xcom_push(key="study", value=summary)
        return {"job_name": job_name, "state": "JOB_STATE_SUCCEEDED", **summary,
                "attempts": history_to_json(state.history)}

    def problems(self, op: Any) -> list[SpecError]:
        """:func:`~..specs.tuning.study_problems`, and the arguments a study does not take: ``hang_timeout`` and
        ``worker_hang_timeout`` (a study's progress is its trials: bound each with ``timeout``), ``preflight`` (its
        wrapper would swallow the ``--<parameter>=<value>`` arguments the platform appends) and ``goodput_job_name``
        (each trial is its own goodput job)."""
        from ..specs.tuning import study_problems

        problems = []
        if op.hang_timeout is not None:
            problems.append(SpecError("hang_timeout", "not taken by a study (its progress is its trials): bound each "
                                                      "trial with timeout= (scheduling.timeout) instead"))
        if op.worker_hang_timeout is not None:
            problems.append(SpecError("worker_hang_timeout", "not taken by a study (as hang_timeout): bound each trial "
                                                             "with timeout= (scheduling.timeout) instead"))
        if op.preflight:
            problems.append(SpecError("preflight", "not taken by a study: the wrapper would swallow the "
                                                   "--<parameter>=<value> arguments the platform appends"))
        if op.goodput_job_name is not None:
            problems.append(SpecError("goodput_job_name", "not taken by a study (its trials are separate runs, "
                                                          "each its own goodput job): record and read per trial"))
        return [*problems, *study_problems(self.spec(), self.max_trial_count, self.parallel_trial_count,
                                           self.max_failed_trial_count)]

    def dry_run(self, op: Any, spec: AttemptSpec) -> dict[str, Any]:
        """The HyperparameterTuningJob that would be submitted (``{"state": "DRY_RUN",
        "hyperparameter_tuning_job": ...}``)."""
        from ..supervisor.study import owed

        tuning = self.tuning_job(op, spec, owed(self.study(), []))
        op.log.info("DRY_RUN: the HyperparameterTuningJob that would be submitted in %s:\n%s", op.region, tuning)
        return {"state": "DRY_RUN", "hyperparameter_tuning_job": tuning}


def attempt_output(op: Any, attempt: int) -> str:
    """Attempt ``attempt``'s ``base_output_directory``: ``<base_output_dir>/attempt-<N>``. Vertex AI gives trial T
    ``<it>/<T>/model`` etc.; trial ids restart at 1 in every job, so a shared one would let attempt 2's trial 1
    overwrite attempt 1's model."""
    return f"{(op.base_output_dir or '').rstrip('/')}/attempt-{attempt}"


def trial_checkpoint(op: Any, key: str) -> dict[str, Any] | None:
    """The newest complete checkpoint of the trial whose key is ``key`` (``{"uri", "step"}``), or None."""
    from ..checkpoints import find_latest_checkpoint

    try:
        found = find_latest_checkpoint(f"{op._checkpoint_dir().rstrip('/')}/{TRIALS_DIR}/{key}",
                                       marker=op.checkpoint_marker)
    except Exception as exc:  # the study succeeded; a missing listing does not change that
        op.log.warning("Could not list the best trial's checkpoint: %s", exc)
        return None
    return {"uri": found.uri, "step": found.step} if found else None


__all__ = ["TRIALS_DIR", "CustomJobKind", "StudyKind", "attempt_output", "trial_checkpoint"]
