"""Huawei Cloud ModelArts training jobs as the operator, its trigger and the sensor read them: the job's facts
(:func:`job_summary`), what a look at a live job means to the observer, and the operator's typed backend
(:class:`ModelArtsTrainingJobBackend`: find by name, submit and tag, look, stop and wait, rebuild a run from its jobs).

A job's name is its attempt's (:func:`~..specs.modelarts.attempt_job_name`), so a create whose reply was lost -- or
that ModelArts refused as a duplicate name, ``ModelArts.2751`` -- is found by name, never made twice; the provider's
labels become TMS tags right after the create (what the reconciler and the two-writers check list by). What the
platform did on its own -- the re-issues of its fault tolerance (``fault-tolerance/job-retry-num``; one stage record
per run of the job, "Obtaining the Stages of a Training Job":
https://support.huaweicloud.com/intl/en-us/api-modelarts/ListTrainingJobStages.html) -- is read into the summary
(``reissues``, ``fault_scenario``) for the history and the classifier. It decides nothing: what a job's phase and
error mean is :func:`~..supervisor.vertex_look.job_event`'s (its ModelArts row), what to do the policy's.

Importing it imports no Huawei Cloud library.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..policy import Attempt, Fallback, Platform
from ..policy.job_states import MODELARTS_SUCCEEDED_PHASES, MODELARTS_TERMINAL_PHASES
from ..supervisor import Ended, JobFailed, JobSucceeded, RunState, SubmitFailed, Submitted
from ..supervisor.observe import CHECKPOINTS, Limits, Look
from ..supervisor.reconcile import OwnedResource, Owner, Release
from ..supervisor.vertex_look import job_event, stop_keys
from .base import AttemptSpec, Judge, LookResult

log = logging.getLogger(__name__)

#: The kind of resource :func:`release_all` stops.
JOB_KIND = "modelarts_training_job"
#: Seconds to wait for a stopped job to end, and the longest pause between two looks at it.
STOP_WAIT_SECONDS = 1800.0
STOP_POLL_SECONDS = 5.0
#: How many of a failed job's newest Error events its summary's message takes.
ERROR_EVENTS = 3


def live_resources(job: str | None, cancel_on_kill: bool = True) -> list[OwnedResource]:
    """A run's live training job as the supervisor's release rules read it (kept without ``cancel_on_kill``)."""
    return [OwnedResource(job, JOB_KIND, None, keep=not cancel_on_kill)] if job else []


def release_all(hook: Any, releases: Sequence[Release]) -> None:
    """Carry out the supervisor's ``Release`` commands of training jobs -- the one way the provider stops one: at the
    end of an attempt (:meth:`ModelArtsTrainingJobBackend.end`, which then waits), in an operator's or a trigger's
    ``on_kill`` and in the reconciler. Requests each stop (a job already over is fine) and does not wait.

    Raises:
        ValueError: a release of another kind of resource.
        huaweicloudsdkcore.exceptions.exceptions.SdkException: a call failed past the hook's retries.
    """
    for release in releases:
        if release.resource.kind != JOB_KIND:
            raise ValueError(f"release_all: a ModelArts backend stops training jobs, not a {release.resource.kind}")
        log.info("Stopping %s: %s", release.resource.name, release.why)
        hook.stop_training_job(release.resource.name)


def live_jobs(hook: Any) -> list[OwnedResource]:
    """The provider's live training jobs of the hook's region and project (tagged ``resilient-attempt``; one job
    search, :meth:`~..hooks.modelarts.ResilientModelArtsHook.list_live_jobs`), each with the task instance that created
    it and its checkpoint directory (from its environment) -- what the two-writers check and the reconciler read.

    Raises:
        huaweicloudsdkcore.exceptions.exceptions.SdkException: the search failed past the hook's retries.
    """
    from ..hooks.modelarts import resource_name
    from ..specs.common import ENV_CHECKPOINT_DIR, LABEL_ATTEMPT
    from ..supervisor.reconcile import owner_from

    found = []
    for job in hook.list_live_jobs(LABEL_ATTEMPT):
        env = job_env(job)
        found.append(OwnedResource(resource_name(hook.region, hook.project_id, job.metadata.id), JOB_KIND,
                                   owner_from(env), checkpoint_dir=env.get(ENV_CHECKPOINT_DIR) or None))
    return found


def job_env(job: Any) -> dict[str, str]:
    """A training job's ``algorithm.environments`` as one dict (the API answers a list of dicts)."""
    envs = getattr(getattr(job, "algorithm", None), "environments", None) or {}
    if isinstance(envs, Mapping):
        return {str(k): str(v) for k, v in envs.items()}
    merged: dict[str, str] = {}
    for entry in envs:
        merged.update({str(k): str(v) for k, v in (entry or {}).items()})
    return merged


def job_summary(job: Any, name: str, *, error_events: Sequence[str] = (), stage_records: int | None = None
                ) -> dict[str, Any]:
    """The facts of a training job (``ShowTrainingJobDetailsResponse``) the provider needs, as JSON: ``platform``
    ``"modelarts"``, ``name`` (the provider's resource name), ``state`` (``status.phase``), ``secondary_phase``,
    ``error_code`` (the first non-zero task exit code), ``error_message`` (the failed tasks' messages and
    ``error_events``, the newest Error events), ``fault_scenario`` (the newest run record's newest recover record's),
    ``reissues`` (the platform's re-issues: ``stage_records`` - 1 when the stages were read, else the run records
    started by a reschedule), ``started`` (bool), ``create_time`` / ``end_time`` in epoch seconds (None: unset), and
    ``queued_since``: when its current wait for nodes began (its creation, or the end of its newest run: a re-issued
    job queues again), epoch seconds. The fault scenario is the newest run's only: an earlier run's was the platform's
    to handle, and it re-issued the job."""
    status = job.status
    tasks = list(status.task_statuses or [])
    failed = [t for t in tasks if t.exit_code]
    records = list(status.running_records or [])
    # What ended the job is the newest run's record: an earlier run's fault was the platform's, and re-issued.
    recovered = list(records[-1].recover_records or []) if records else []
    scenario = recovered[-1].fault_scenario if recovered else None
    if stage_records is not None:
        reissues = max(0, stage_records - 1)
    else:
        reissues = max(0, sum(1 for r in records if r.start_type != "restarted") - 1)
    messages = [f"[{t.task}] {t.message}" for t in failed if t.message] + list(error_events)
    create = job.metadata.create_time
    start = status.start_time
    end = None
    if status.phase in MODELARTS_TERMINAL_PHASES and start:
        end = (start + (status.duration or 0)) / 1000.0
    # A job the platform re-issued waits again from the end of its previous run, not from its creation.
    ended_runs = [float(r.end_at) for r in records if r.end_at]
    queued_since = max(([create / 1000.0] if create else []) + ended_runs, default=None)
    return {
        "platform": Platform.MODELARTS.value,
        "name": name,
        "state": status.phase,
        "secondary_phase": status.secondary_phase,
        "error_code": failed[0].exit_code if failed else None,
        "error_message": " | ".join(messages),
        "fault_scenario": scenario,
        "reissues": reissues,
        "started": bool(start),
        "create_time": create / 1000.0 if create else None,
        "queued_since": queued_since,
        "end_time": end,
    }


def read_summary(hook: Any, name: str) -> dict[str, Any]:
    """One look at job ``name`` (GET details; for a terminal job also its stages and, when it failed, its newest
    Error events) as :func:`job_summary`. Blocks: a trigger calls it in a worker thread."""
    job = hook.get_training_job(name)
    if job.status.phase not in MODELARTS_TERMINAL_PHASES:
        return job_summary(job, name)
    events: list[str] = []
    if job.status.phase not in MODELARTS_SUCCEEDED_PHASES:
        runs = list(job.status.running_records or [])
        since = float(runs[-1].start_at) if runs and runs[-1].start_at else None
        try:  # the newest run's Error events only: an earlier run's fault was re-issued by the platform
            events = [e.message for e in hook.list_events(name, level="Error", limit=ERROR_EVENTS)
                      if e.message and _in_run(e.time, since)]
        except Exception as exc:  # the phase and exit codes still classify it
            log.warning("Could not read the events of %s: %s", name, exc)
    try:
        stages: int | None = len(hook.list_stages(name))
    except Exception as exc:  # the run records still count the re-issues
        log.warning("Could not read the stages of %s: %s", name, exc)
        stages = None
    return job_summary(job, name, error_events=events, stage_records=stages)


def _in_run(text: Any, since: float | None) -> bool:
    """Whether an event at ``text`` (``2022-11-26T16:03:41+08:00``) belongs to the run that began at ``since``
    (epoch seconds; None, or a time that cannot be read: taken as the run's)."""
    from datetime import datetime

    if since is None:
        return True
    try:
        return datetime.fromisoformat(str(text)).timestamp() >= since
    except ValueError:
        return True


def job_look(summary: Mapping[str, Any], checkpoint_dir: str | None = None,
             checkpoint_marker: str | None = None) -> Look:
    """The observer's :class:`~..supervisor.observe.Look` at the job of ``summary``: its phase and since when it
    waits (``queued_since``: a re-issued job waits again from its previous run's end); given a ``checkpoint_dir`` (a
    Running job watched for a hang), the newest complete checkpoint's step there. Lists the checkpoints -- blocking
    I/O: a trigger calls it in a thread."""
    look = Look(summary["name"], Platform.MODELARTS, str(summary["state"]).upper(),
                summary.get("queued_since") or summary.get("create_time"))
    if not checkpoint_dir:
        return look
    from ..checkpoints import find_latest_checkpoint

    try:
        found = find_latest_checkpoint(checkpoint_dir, marker=checkpoint_marker)
    except Exception as exc:  # any listing error: the clock is left unjudged, not a hang
        log.warning("Could not look for checkpoint progress of %s under %s: %s", summary["name"], checkpoint_dir,
                    exc)
        return look
    return replace(look, progress={CHECKPOINTS: found.step if found else None})


def wants_checkpoints(summary: Mapping[str, Any], hang_timeout: float | None) -> bool:
    """Whether a look lists the checkpoints: only a Running job is judged for a hang, and only with a timeout."""
    return hang_timeout is not None and summary["state"] == "Running"


def resumed_from(env: Mapping[str, str]) -> tuple[int | None, str | None]:
    """(step, URI) of the checkpoint a job resumes from, read from its ``RESILIENT_RESUME_*`` variables."""
    from ..specs.common import ENV_RESUME_FROM, ENV_RESUME_STEP

    step = env.get(ENV_RESUME_STEP, "")
    return (int(step) if step.isascii() and step.isdigit() else None), env.get(ENV_RESUME_FROM) or None


def run_key(labels: Mapping[str, str]) -> str:
    """The task instance's key in its jobs' names: its labels without the attempt's, in order."""
    from ..specs.common import LABEL_ATTEMPT

    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != LABEL_ATTEMPT)


class ModelArtsTrainingJobBackend:
    """A run's training jobs on ModelArts (:class:`~.base.Backend`), through a
    :class:`~..hooks.modelarts.ResilientModelArtsHook`.

    Args:
        hook: the sync hook (transient API errors retried there).
        name: the operator's job name prefix (:func:`~..specs.modelarts.attempt_job_name`).
        fallbacks: the policy's fallbacks, in order (flavor_id / pool_id).
        training_job: builds the ``Job`` body (a dict) of an attempt from its spec and job name.
        checkpoint_dir, checkpoint_marker: where the workload writes checkpoints (listed for hang detection).
        hang_timeout: seconds without a new complete checkpoint before a Running job is hung (None: never).
        queue_timeout: seconds a job may stay Creating or Pending (``RetryPolicy.queue_timeout_seconds``).
        poll_interval: seconds between two looks at a job being stopped (at most :data:`STOP_POLL_SECONDS`).
        clock: epoch seconds now.
    """

    platform = Platform.MODELARTS

    def __init__(self, hook: Any, *, name: str, fallbacks: Sequence[Fallback],
                 training_job: Callable[[AttemptSpec, str], dict[str, Any]], checkpoint_dir: str,
                 checkpoint_marker: str | None, hang_timeout: float | None, queue_timeout: float | None,
                 poll_interval: float, clock: Callable[[], float]) -> None:
        self.hook = hook
        self.name = name
        self.fallbacks = tuple(fallbacks)
        self.training_job = training_job
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_marker = checkpoint_marker
        self.hang_timeout = hang_timeout
        self.queue_timeout = queue_timeout
        self.poll_interval = poll_interval
        self.clock = clock
        #: The attempt number :meth:`rebuild` has just seen has no job.
        self.known_absent: int | None = None

    def _name(self, job_id: str) -> str:
        from ..hooks.modelarts import resource_name

        return resource_name(self.hook.region, self.hook.project_id, job_id)

    def job_name(self, spec: AttemptSpec) -> str:
        """The training job name of the attempt of ``spec``."""
        from ..specs.modelarts import attempt_job_name

        return attempt_job_name(self.name, run_key(spec.own_labels), spec.attempt)

    def live_owned(self) -> list[OwnedResource]:
        """The provider's live training jobs in the region (:func:`live_jobs`): the supervisor's ``other_writers``
        reads it."""
        return live_jobs(self.hook)

    def find(self, spec: AttemptSpec) -> Submitted | None:
        """The job of the attempt's name (one tags listing matching it), watched instead of creating another."""
        known_absent, self.known_absent = self.known_absent == spec.attempt, None
        if known_absent:
            return None
        jobs = self.hook.find_by_name(self.job_name(spec))
        if not jobs:
            return None
        job = jobs[0]
        log.info("Attempt %d already exists as %s (the task was interrupted after creating it): watching it "
                 "instead of creating another", spec.attempt, job.metadata.id)
        step, uri = resumed_from(job_env(job))
        return Submitted(self._name(job.metadata.id), self.clock(), step, uri)

    def submit(self, spec: AttemptSpec) -> Submitted | SubmitFailed:
        """Create the attempt's training job and tag it with the provider's labels. A refused create is classified
        (:func:`~..policy.classify_modelarts_error`); a duplicate name, or a reply lost on the way, is the attempt's
        own job, found by its name.

        Raises:
            huaweicloudsdkcore.exceptions.exceptions.SdkException: the create's reply was lost and no job of the
                attempt's name exists (a task retry looks again).
        """
        from huaweicloudsdkcore.exceptions import exceptions as hexc

        from ..policy import classify_modelarts_error
        from ..policy.codes import MODELARTS_DUPLICATE_NAME

        name = self.job_name(spec)
        try:
            job = self.hook.create_training_job(self.training_job(spec, name))
            job_id = job.metadata.id
        except hexc.ServiceResponseException as exc:
            if exc.error_code != MODELARTS_DUPLICATE_NAME:
                failure = classify_modelarts_error(exc.status_code, exc.error_code, exc.error_msg,
                                                   timestamp=self.clock())
                log.warning("Creating attempt %d failed: %s", spec.attempt, failure.summary())
                return SubmitFailed(failure, self.clock())
            job_id = self._found(name, exc)
        except (hexc.ConnectionException, hexc.RequestTimeoutException) as exc:
            job_id = self._found(name, exc)
        self._tag(job_id, spec)
        where = f" on fallback {spec.fallback_index + 1} ({spec.fallback.describe()})" if spec.fallback else ""
        resumed = f"resuming from step {spec.resume_step} ({spec.resume_uri})" if spec.resume_uri else "from scratch"
        log.info("Attempt %d: created training job %s (%s)%s, %s", spec.attempt, name, job_id, where, resumed)
        return Submitted(self._name(job_id), self.clock(), spec.resume_step, spec.resume_uri)

    def _found(self, name: str, exc: Exception) -> str:
        """The id of the job named ``name`` a create answered with ``exc`` for; re-raises ``exc`` when there is none."""
        jobs = self.hook.find_by_name(name)
        if not jobs:
            raise exc
        log.info("The create of %s answered %s, and the job exists: watching it", name, exc)
        return str(jobs[0].metadata.id)

    def _tag(self, job_id: str, spec: AttemptSpec) -> None:
        try:
            self.hook.tag_training_job(job_id, spec.labels)
        except Exception as exc:  # found by its name all the same; only the listings by tag miss it
            log.warning("Could not tag training job %s with the provider's labels: %s", job_id, exc)

    def look(self, name: str, judge: Judge, started_at: float | None = None) -> LookResult:
        """One look: the job's outcome once it is terminal, or when ``judge`` finds it failed while live (Creating
        or Pending past the queue timeout, Running without checkpoint progress past ``hang_timeout``: ``live=True``,
        the supervisor ends it); None while it just runs."""
        summary = read_summary(self.hook, name)
        if summary["state"] in MODELARTS_TERMINAL_PHASES:
            return self.event(summary)
        watched = wants_checkpoints(summary, self.hang_timeout)
        verdict = judge(job_look(summary, self.checkpoint_dir if watched else None, self.checkpoint_marker),
                        Limits(hang_seconds=self.hang_timeout, queue_seconds=self.queue_timeout))
        if verdict.failure is None:
            return None
        log.warning("%s: %s", name, verdict.failure.message)
        return self.event({**summary, **stop_keys(verdict.failure)})

    def event(self, summary: Mapping[str, Any]) -> JobSucceeded | JobFailed:
        """:func:`~..supervisor.vertex_look.job_event` now, with the platform's re-issues and a failure logged."""
        if summary.get("reissues"):
            log.info("%s: ModelArts re-issued the job %d time(s) on its own (fault tolerance)", summary["name"],
                     summary["reissues"])
        event = job_event(summary, self.clock())
        if isinstance(event, JobFailed) and not event.live:
            log.warning("%s ended: %s", summary["name"], event.failure.summary())
        return event

    def end(self, name: str, wait: bool = True) -> Ended:
        """Stop ``name`` and wait until it is terminal (``Ended.succeeded`` when it completed first); always
        waited for, whatever ``wait`` says.

        Raises:
            TimeoutError: it is still not terminal after :data:`STOP_WAIT_SECONDS`.
        """
        job = self._stop_and_wait(name, "the attempt ends")
        return Ended(self.clock(), succeeded=job.status.phase in MODELARTS_SUCCEEDED_PHASES)

    def release(self, name: str) -> None:
        """The run stops with ``name`` live: stop it and wait until it has ended."""
        self._stop_and_wait(name, "the run stops")

    def _stop_and_wait(self, name: str, why: str) -> Any:
        release_all(self.hook, [Release(OwnedResource(name, JOB_KIND, None), why)])
        job = self.hook.wait_for_end(name, timeout=STOP_WAIT_SECONDS,
                                     interval=min(self.poll_interval, STOP_POLL_SECONDS))
        if job.status.phase != "Terminated":
            log.info("%s ended %s before the stop took effect", name, job.status.phase)
        return job

    def rebuild(self, task: Owner, rerun_after_success: bool) -> RunState | None:
        """The run of ``task`` rebuilt from its jobs (found by their tags), for a task state store that holds none;
        None: no job (a first try). The newest job decides the phase (:func:`~..supervisor.rebuild.rebuilt_run`)."""
        from ..specs.common import LABEL_ATTEMPT, job_labels
        from ..supervisor.rebuild import rebuilt_run

        labels = job_labels(task.dag_id, task.task_id, task.run_id, task.map_index, None)
        jobs: dict[int, Any] = {}
        for resource in self.hook.find_by_tags(labels):
            number = next((t.value for t in resource.tags or [] if t.key == LABEL_ATTEMPT), "")
            if str(number).isdigit():
                jobs[int(number)] = self.hook.get_training_job(resource.resource_id)
        if not jobs:
            self.known_absent = 1
            return None
        last = max(jobs)
        history = []
        for attempt in range(1, last + 1):
            job = jobs.get(attempt)
            if job is None:
                history.append(Attempt(attempt))
                continue
            summary = job_summary(job, self._name(job.metadata.id))
            step, uri = resumed_from(job_env(job))
            history.append(Attempt(attempt, summary["name"], -1, summary["create_time"], summary["end_time"], step,
                                   uri))
        newest = jobs[last]
        phase = newest.status.phase
        live = phase not in MODELARTS_TERMINAL_PHASES
        rebuilt = rebuilt_run(history, self._name(newest.metadata.id), live=live,
                              succeeded=phase in MODELARTS_SUCCEEDED_PHASES, rerun_after_success=rerun_after_success)
        self.known_absent = rebuilt.known_absent
        log.info("Attempt %d already exists as %s, %s (the task state store holds nothing for this task): %s",
                 last, newest.metadata.id, phase, rebuilt.then)
        return rebuilt.state


__all__ = [
    "JOB_KIND",
    "ModelArtsTrainingJobBackend",
    "job_env",
    "job_look",
    "job_summary",
    "live_jobs",
    "live_resources",
    "read_summary",
    "release_all",
    "resumed_from",
    "run_key",
    "wants_checkpoints",
]
