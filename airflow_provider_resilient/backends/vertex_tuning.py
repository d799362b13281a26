"""Vertex AI HyperparameterTuningJobs as the tuning operator's backend: one tuning job per attempt, each
asking only for the trials the study still owes (:func:`~..supervisor.study.owed`), its end judged by its
trials (:func:`~..supervisor.study.outcome`). Everything else -- labels, finding a job a lost reply created,
cancel and wait, rebuilding a run from its jobs -- is the CustomJob backend's. Importing it imports no Google
library.

The study's record is the platform's: the trials of every attempt's job, listed by the task instance's labels
(:meth:`VertexTuningJobBackend.study_trials`). Vertex AI keeps ended jobs with their trials, so the record
survives task retries, process kills and an emptied task state store without a copy of ours.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..policy.job_states import TERMINAL_STATES
from ..supervisor import JobFailed, JobSucceeded
from ..supervisor.study import Owed, Study, TrialRecord, classify_trial, outcome, owed
from ..supervisor.vertex_look import job_event
from .base import AttemptSpec
from .vertex import VertexCustomJobBackend, attempt_of, job_summary

log = logging.getLogger(__name__)


def trial_records(job: Any, metric_id: str) -> list[TrialRecord]:
    """The trials of one HyperparameterTuningJob (a ``google.cloud.aiplatform_v1.HyperparameterTuningJob``) as
    :class:`~..supervisor.study.TrialRecord` s: its attempt from the ``resilient-attempt`` label (0 without),
    each trial's parameters, state, final measurement of ``metric_id`` and, INFEASIBLE, its classified
    ``infeasible_reason``."""
    attempt = attempt_of(job)
    records = []
    for trial in job.trials:
        metric = next((float(m.value) for m in trial.final_measurement.metrics if m.metric_id == metric_id), None)
        end = trial.end_time.timestamp() if "end_time" in trial else None
        state = trial.state.name
        records.append(TrialRecord(
            attempt=attempt, job_name=job.name, trial_id=str(trial.id),
            parameters=tuple((p.parameter_id, p.value) for p in trial.parameters), state=state, metric=metric,
            failure=classify_trial(trial.infeasible_reason, end) if state == "INFEASIBLE" else None,
            start_time=trial.start_time.timestamp() if "start_time" in trial else None, end_time=end))
    return records


class VertexTuningJobBackend(VertexCustomJobBackend):
    """A run's HyperparameterTuningJobs on Vertex AI (:class:`~.base.Backend`).

    Args:
        study: the whole run's study (trials in all, the metric and its goal, the user's failed-trial limit).
        tuning_job: builds one attempt's HyperparameterTuningJob body (a dict) from its spec and the study's owed
            share (:func:`~..specs.tuning.build_tuning_job`).
        the rest: as :class:`~.vertex.VertexCustomJobBackend` (``custom_job`` is unused; ``hang_timeout`` None:
            trials checkpoint in their own directories, a tuning job's progress is its trials).
    """

    def __init__(self, hook: Any, *, study: Study, tuning_job: Callable[[AttemptSpec, Owed], dict[str, Any]],
                 **kwargs: Any) -> None:
        super().__init__(hook, custom_job=lambda spec: {}, hang_timeout=None, **kwargs)
        self.study = study
        self.tuning_job = tuning_job
        #: The study's trials as the last judged end of a job saw them (the run's result reads them again only
        #: without one: a task that found its run already succeeded).
        self.last_trials: list[TrialRecord] | None = None

    # ------------------------------------------------------------------ the platform's calls
    def _list_jobs(self, region: str, filter_text: str) -> list[Any]:
        return list(self.hook.list_hyperparameter_tuning_jobs(self.project_id, region, filter_text))

    def _get_job(self, name: str) -> Any:
        return self.hook.get_hyperparameter_tuning_job(name)

    def _create_job(self, region: str, spec: AttemptSpec, find_filter: str) -> Any:
        """Create the attempt's tuning job for the trials the study still owes (after the earlier attempts')."""
        share = owed(self.study, self.study_trials(spec.own_labels))
        log.info("Attempt %d: %s", spec.attempt, share.note)
        return self.hook.create_hyperparameter_tuning_job(self.project_id, region, self.tuning_job(spec, share),
                                                          find_filter=find_filter)

    def _ended_well(self, job: Any) -> bool:
        """Whether the study was complete when ``job`` ended (a job that SUCCEEDED short of trials was not)."""
        return isinstance(self.event(job_summary(job)), JobSucceeded)

    # ------------------------------------------------------------------ the study
    def study_trials(self, labels: Mapping[str, str]) -> list[TrialRecord]:
        """Every trial of the task instance's tuning jobs (``labels``: any attempt's own labels; the attempt's
        is dropped), oldest attempt first: one ListHyperparameterTuningJobs per region the run may use."""
        newest = self.jobs_by_attempt(labels)
        return [t for n in sorted(newest) for t in trial_records(newest[n], self.study.metric_id)]

    def event(self, summary: Mapping[str, Any]) -> JobSucceeded | JobFailed:
        """What the end of the tuning job of ``summary`` means to the supervisor: a queue timeout as for a
        CustomJob; once it is terminal, the study's :func:`~..supervisor.study.outcome` over every attempt's
        trials -- success when nothing is owed (even from a FAILED job), a transient trial failure's class
        (the next attempt runs the owed trials), the permanent failures past ``max_failed_trial_count``, or
        the job's own failure."""
        base = job_event(summary, self.clock())
        if summary["state"] not in TERMINAL_STATES or summary.get("queue_timeout") or summary.get("hang"):
            return base
        job = self._get_job(summary["name"])  # its labels name the task instance
        trials = self.last_trials = self.study_trials(job.labels)
        attempt = attempt_of(job)
        failure = outcome(self.study, trials, attempt, summary["state"],
                          base.failure if isinstance(base, JobFailed) else None, self.clock())
        mine = [t for t in trials if t.attempt == attempt]
        log.info("%s ended %s: %d trial(s) -- %s", summary["name"], summary["state"], len(mine),
                 "; ".join(f"{t.trial_id} {t.state}" + (f" {t.metric:.4f}" if t.metric is not None else "") +
                           (f" ({t.failure.failure_class.value})" if t.failure else "") for t in mine) or "none")
        if failure is None:
            return JobSucceeded(self.clock())
        log.warning("%s: %s", summary["name"], failure.summary())
        return JobFailed(failure, self.clock())


__all__ = ["VertexTuningJobBackend", "trial_records"]
