"""Vertex AI CustomJobs as the operator, its trigger, the sensor and the reconciler all read them: one
place for the job's facts, its terminal states, the live-job listing filter, what a look at a live job
means to the observer (:mod:`..supervisor.observe`) and to the supervisor
(:func:`~..supervisor.vertex_look.job_event`), and the
operator's typed backend (:class:`VertexCustomJobBackend`: find by labels, submit, look, cancel and wait,
rebuild a run from its jobs). Importing it imports no Google library.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..policy import Attempt, Fallback, Platform
from ..policy.job_states import TERMINAL_STATES
from ..supervisor import Ended, JobFailed, JobSucceeded, RunState, SubmitFailed, Submitted
from ..supervisor.observe import CHECKPOINTS, LOGGED, Limits, Look
from ..supervisor.reconcile import OwnedResource, Owner, Release
from ..supervisor.vertex_look import job_event, stop_keys
from .base import AttemptSpec, Judge, LookResult

log = logging.getLogger(__name__)

#: Keys of a trigger's event (and of the operator's job summary) when the job was cancelled for a reason:
#: a queue timeout (the failure's message, the state it waited in, when it was decided) or a hang (why,
#: since when).


#: The kinds of resource :func:`release_all` cancels.
JOB_KINDS = frozenset({"custom_job", "hyperparameter_tuning_job"})


def job_kind(name: str) -> str:
    """``hyperparameter_tuning_job`` or ``custom_job``, by the resource name."""
    from ..hooks.vertex_ai import is_tuning_job

    return "hyperparameter_tuning_job" if is_tuning_job(name) else "custom_job"


def live_resources(job: str | None, cancel_on_kill: bool = True) -> list[OwnedResource]:
    """A run's live CustomJob (or HyperparameterTuningJob) as the supervisor's release rules read it (kept
    without ``cancel_on_kill``)."""
    return [OwnedResource(job, job_kind(job), None, keep=not cancel_on_kill)] if job else []


def live_jobs(hook: Any, project_id: str, regions: Sequence[str]) -> list[OwnedResource]:
    """The live CustomJobs and HyperparameterTuningJobs the provider created in ``regions`` (one ListCustomJobs and
    one ListHyperparameterTuningJobs each, :func:`list_filter`),
    each with the task instance that created it and the checkpoint directory its workload writes (from the
    primary replica's environment) -- what the reconciler and the two-writers check read.

    Raises:
        google.api_core.exceptions.GoogleAPICallError: a listing failed past the hook's retries.
    """
    from ..specs.common import ENV_CHECKPOINT_DIR
    from ..specs.vertex import primary_env
    from ..supervisor.reconcile import owner_from

    found = []
    for region in dict.fromkeys(regions):
        jobs = [*hook.list_custom_jobs(project_id, region, list_filter()),
                *hook.list_hyperparameter_tuning_jobs(project_id, region, list_filter())]
        for job in jobs:
            env = primary_env(job)
            found.append(OwnedResource(job.name, job_kind(job.name), owner_from(env),
                                       checkpoint_dir=env.get(ENV_CHECKPOINT_DIR) or None))
    return found


def release_all(hook: Any, releases: Sequence[Release]) -> None:
    """Carry out the supervisor's ``Release`` commands of CustomJobs and HyperparameterTuningJobs -- the one way the
    provider cancels a job:
    at the end of an attempt (:meth:`VertexCustomJobBackend.end`, which then waits), in an operator's or a
    trigger's ``on_kill`` and in the reconciler. It requests each cancel (a job already over is fine) and does
    not wait: the platform ends the job (``CancelCustomJob`` is asynchronous).

    Args:
        hook: a :class:`~..hooks.vertex_ai.ResilientVertexAIHook` (its ``api_retry_seconds`` bounds the retries).
        releases: ``custom_job`` or ``hyperparameter_tuning_job`` releases.

    Raises:
        ValueError: a release of another kind of resource.
        google.api_core.exceptions.GoogleAPICallError: a call failed past the hook's retries.
    """
    for release in releases:
        if release.resource.kind not in JOB_KINDS:
            raise ValueError(f"release_all: a Vertex AI backend releases CustomJobs and HyperparameterTuningJobs, "
                             f"not a {release.resource.kind}")
        log.info("Cancelling %s: %s", release.resource.name, release.why)
        hook.cancel_job(release.resource.name)


def attempt_of(job: Any) -> int:
    """The attempt number of a job the provider created (its ``resilient-attempt`` label); 0 without one."""
    from ..specs.common import LABEL_ATTEMPT

    number = str(job.labels.get(LABEL_ATTEMPT, ""))
    return int(number) if number.isascii() and number.isdigit() else 0


def job_summary(job: Any) -> dict[str, Any]:
    """The facts of a CustomJob (a ``google.cloud.aiplatform_v1.CustomJob``) the provider needs, as JSON:
    ``name``, ``state`` (JobState name), ``error_code``, ``error_message``, ``started`` (bool), and
    ``create_time`` / ``end_time`` in seconds since the epoch (None when unset)."""
    return {
        "name": job.name,
        "state": job.state.name,
        "error_code": int(job.error.code),
        "error_message": job.error.message,
        "started": "start_time" in job,
        "create_time": job.create_time.timestamp() if "create_time" in job else None,
        "end_time": job.end_time.timestamp() if "end_time" in job else None,
    }


def list_filter() -> str:
    """The ListCustomJobs filter for the live jobs the operator created: those carrying
    ``resilient-attempt`` (every job the operator creates, :mod:`..specs.common`) and not terminal, e.g.
    ``labels.resilient-attempt:* AND state!="JOB_STATE_CANCELLED" AND ...``. Only fields and operators that
    Vertex AI documents for this filter are used (``labels.key:*``, ``state!=``)."""
    from ..specs.common import LABEL_ATTEMPT

    return " AND ".join([f"labels.{LABEL_ATTEMPT}:*", *(f'state!="{s}"' for s in sorted(TERMINAL_STATES))])


def wants_checkpoints(summary: dict[str, Any], hang_timeout: float | None) -> bool:
    """Whether a look at the job of ``summary`` lists the checkpoints: only a RUNNING job is judged for a
    hang, and only with a ``hang_timeout`` (seconds)."""
    return hang_timeout is not None and summary["state"] == "JOB_STATE_RUNNING"


#: What a :class:`StepLogReader` returns: ``(read, step, lines, restarts)``.
StepLogRead = tuple[bool, int | None, tuple[tuple[float, int, bool], ...], tuple[float, ...]]


class StepLogReader:
    """Reads the steps a CustomJob's chief replica logged and the starts of its restarts, for the observer's
    :data:`LOGGED` and :data:`~..supervisor.observe.RESTARTING` clocks and the goodput ledger: at most once every
    ``every`` seconds (Cloud Logging's read quota is per project), each read asking for
    the lines since the newest one already read, and never again after a ``PermissionDenied`` (said once: the
    credentials lack ``logging.logEntries.list``). A read that fails otherwise is logged and leaves the clock
    unjudged: it is no evidence of a hang.

    Args:
        read: ``(job name, since) -> ([(time, step, start), ...], [restart time, ...])`` oldest first
            (:meth:`~..hooks.vertex_ai.ResilientVertexAIHook.logged_progress`); blocking: a trigger calls the reader
            in a thread.
        every: seconds between two reads (:func:`step_log_seconds`).
        clock: seconds since the epoch, now.
    """

    def __init__(self, read: Callable[[str, Any], tuple[Sequence[tuple[float, int, bool]], Sequence[float]]],
                 every: float, clock: Callable[[], float] = time.time) -> None:
        self.read = read
        self.every = every
        self.clock = clock
        self.next_at = 0.0
        self.denied = False
        self.newest: dict[str, tuple[float, int, bool]] = {}  # per job: the newest line read so far
        self.step: dict[str, int] = {}  # per job: the step of its newest step line
        self.restarted: dict[str, float] = {}  # per job: the newest start of a restart read so far

    def __call__(self, summary: Mapping[str, Any]) -> StepLogRead:
        """``(read, step, lines, restarts)`` for the job of ``summary`` (:func:`job_summary`): ``read`` False when no
        read was due or it failed; ``step`` the newest ``step N`` line's step, None when the job has logged none
        since it was created; ``lines`` the step and start lines not returned before, ``(time, step, start)``
        oldest first; ``restarts`` the times of the restarts' starts not returned before (a replica's exit, the
        runner starting the command: :meth:`~..hooks.vertex_ai.ResilientVertexAIHook.logged_progress`), oldest
        first."""
        from datetime import UTC, datetime

        from google.api_core import exceptions as gexc

        now = self.clock()
        if self.denied or now < self.next_at:
            return False, None, (), ()
        self.next_at = now + self.every
        name = summary["name"]
        newest, restarted = self.newest.get(name), self.restarted.get(name, 0.0)
        since = datetime.fromtimestamp(max(summary.get("create_time") or 0.0, newest[0] if newest else 0.0,
                                           restarted), UTC)
        try:
            read, read_restarts = self.read(name, since)
            lines = tuple(line for line in read if newest is None or line > newest)
            restarts = tuple(at for at in read_restarts if at > restarted)
        except gexc.PermissionDenied as exc:
            self.denied = True
            log.warning("Cannot read the step lines of %s from Cloud Logging (%s): its hang clock follows its "
                        "checkpoints only; grant roles/logging.viewer to read them", name, exc.message)
            return False, None, (), ()
        except Exception as exc:  # any other read error: the clock is left unjudged, not a hang
            log.warning("Could not read the step lines of %s from Cloud Logging: %s", name, exc)
            return False, None, (), ()
        if lines:
            self.newest[name] = lines[-1]
        if restarts:
            self.restarted[name] = restarts[-1]
        for _, step, start in lines:
            if not start:
                self.step[name] = step
        return True, self.step.get(name), lines, restarts


def step_log_seconds(hang_timeout: float) -> float:
    """Seconds between two reads of a job's logged step: ``hang_timeout / 6``, so a hang is seen within 7/6 of
    ``hang_timeout`` (with the default 30-minute ``hang_timeout``: one read every 5 minutes per job)."""
    return hang_timeout / 6


def job_look(summary: dict[str, Any], checkpoint_dir: str | None = None, checkpoint_marker: str | None = None,
             step_logs: Callable[[Mapping[str, Any]], StepLogRead] | None = None) -> Look:
    """The observer's :class:`~..supervisor.observe.Look` at the job of ``summary`` (:func:`job_summary`): its
    state and since when it waits (``create_time``); given a ``checkpoint_dir`` (pass one only when
    :func:`wants_checkpoints`), the newest complete checkpoint's step there (None: none yet); given
    ``step_logs`` (a :class:`StepLogReader`), the step the chief replica last logged when a read was due, the
    step and start lines it read (``Look.step_lines``, for the goodput ledger) and the restarts it read
    (``Look.restarts``, for the restart allowance).

    Both read the platform -- blocking I/O: a trigger calls it in a thread. A listing or read that fails is
    logged and leaves its clock unjudged: it is no evidence of a hang.
    """
    look = Look(summary["name"], Platform.VERTEX_AI, summary["state"], summary.get("create_time"))
    progress: dict[str, int | None] = {}
    if checkpoint_dir:
        from ..checkpoints import find_latest_checkpoint

        try:
            found = find_latest_checkpoint(checkpoint_dir, marker=checkpoint_marker)
            progress[CHECKPOINTS] = found.step if found else None
        except Exception as exc:  # any listing error: the clock is left unjudged, not a hang
            log.warning("Could not look for checkpoint progress of %s under %s: %s", summary["name"],
                        checkpoint_dir, exc)
    if step_logs is not None:
        read, step, lines, restarts = step_logs(summary)
        if read:
            progress[LOGGED] = step
            look = replace(look, step_lines=lines, restarts=restarts)
    return replace(look, progress=progress) if progress else look


def resumed_from(job: Any) -> tuple[int | None, str | None]:
    """(step, URI) of the checkpoint a created CustomJob resumes from, read from its primary pool's
    ``RESILIENT_RESUME_STEP`` / ``RESILIENT_RESUME_FROM``; (None, None) for a fresh start."""
    from ..specs.common import ENV_RESUME_FROM, ENV_RESUME_STEP
    from ..specs.vertex import primary_env

    env = primary_env(job)
    step = env.get(ENV_RESUME_STEP, "")
    return (int(step) if step.isascii() and step.isdigit() else None), env.get(ENV_RESUME_FROM) or None


#: Seconds to wait for a cancelled job to end before giving up (``TimeoutError``), and the longest pause
#: between two looks at it.
CANCEL_WAIT_SECONDS = 1800.0
CANCEL_POLL_SECONDS = 5.0


class VertexCustomJobBackend:
    """A run's CustomJobs on Vertex AI (:class:`~.base.Backend`), through a
    :class:`~..hooks.vertex_ai.ResilientVertexAIHook`.

    Args:
        hook: the sync hook (transient API errors retried there).
        project_id: the project the jobs run in.
        region: the operator's region; a fallback's ``region`` moves an attempt.
        fallbacks: the policy's fallbacks, in order (for the region a rebuilt attempt ran on).
        custom_job: builds the CustomJob body (a dict) of an attempt from its spec (the operator's specs).
        checkpoint_dir, checkpoint_marker: where the workload writes checkpoints (listed for hang detection).
        hang_timeout: seconds without progress before a RUNNING job is hung (None: never): a new complete
            checkpoint or, once the job has logged one, a new logged step.
        queue_timeout: seconds a job may stay QUEUED or PENDING (``RetryPolicy.queue_timeout_seconds``).
        poll_interval: seconds between two looks at a job being cancelled (at most :data:`CANCEL_POLL_SECONDS`).
        clock: epoch seconds now.
        read_step_logs: with a ``hang_timeout``, read the chief replica's ``step N`` lines from Cloud Logging
            (:class:`StepLogReader`, every :func:`step_log_seconds`).
        restart_timeout: seconds from the start of a restart (a replica's exit, the runner's start line) or of an
            attempt to the job's next logged step (``Limits.restart_seconds``; None: ``hang_timeout`` throughout).
    """

    platform = Platform.VERTEX_AI

    def __init__(self, hook: Any, *, project_id: str, region: str, fallbacks: Sequence[Fallback],
                 custom_job: Callable[[AttemptSpec], dict[str, Any]], checkpoint_dir: str,
                 checkpoint_marker: str | None, hang_timeout: float | None, queue_timeout: float | None,
                 poll_interval: float, clock: Callable[[], float], read_step_logs: bool = False,
                 restart_timeout: float | None = None) -> None:
        self.hook = hook
        self.step_logs = None if not (read_step_logs and hang_timeout) else StepLogReader(
            lambda name, since: hook.logged_progress(name, since), step_log_seconds(hang_timeout), clock)
        self.project_id = project_id
        self.region = region
        self.fallbacks = tuple(fallbacks)
        self.custom_job = custom_job
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_marker = checkpoint_marker
        self.hang_timeout = hang_timeout
        self.restart_timeout = restart_timeout
        self.queue_timeout = queue_timeout
        self.poll_interval = poll_interval
        self.clock = clock
        #: The attempt number :meth:`rebuild` has just seen has no job (its listing saved :meth:`find` one).
        self.known_absent: int | None = None

    def live_owned(self) -> list[OwnedResource]:
        """The provider's live CustomJobs in the operator's region and its fallbacks' (:func:`live_jobs`)."""
        return live_jobs(self.hook, self.project_id, [self.region, *(f.region for f in self.fallbacks if f.region)])

    def region_for(self, fallback: Fallback | None) -> str:
        """The region an attempt on ``fallback`` (None: the operator's own target) runs in."""
        return fallback.region if fallback and fallback.region else self.region

    def fallback_index(self, job_name: str) -> int:
        """The fallback a job ran on, as far as its region tells (-1: the original target)."""
        from ..hooks.vertex_ai import region_of

        region = region_of(job_name)
        if region == self.region:
            return -1
        return next((i for i, f in enumerate(self.fallbacks) if f.region == region), -1)

    # ------------------------------------------------------------------ the platform's calls for this kind of job
    def _list_jobs(self, region: str, filter_text: str) -> list[Any]:
        """ListCustomJobs in ``region`` with ``filter_text`` (a subclass lists its own kind of job)."""
        return list(self.hook.list_custom_jobs(self.project_id, region, filter_text))

    def _get_job(self, name: str) -> Any:
        return self.hook.get_custom_job(name)

    def _create_job(self, region: str, spec: AttemptSpec, find_filter: str) -> Any:
        """Create the attempt's job (the hook finds one a lost reply created by ``find_filter``)."""
        return self.hook.create_custom_job(self.project_id, region, self.custom_job(spec), find_filter=find_filter)

    def jobs_by_attempt(self, labels: Mapping[str, str]) -> dict[int, Any]:
        """The task instance's jobs by attempt number (the newest job of each), one listing per region the run
        may use (the operator's and its fallbacks'). ``labels``: the task instance's, or any attempt's (the
        attempt's own label is dropped)."""
        from ..specs.common import LABEL_ATTEMPT
        from ..specs.vertex import labels_filter

        find = labels_filter({k: v for k, v in labels.items() if k != LABEL_ATTEMPT})
        jobs: dict[int, Any] = {}
        for region in dict.fromkeys([self.region, *(f.region for f in self.fallbacks if f.region)]):
            for job in self._list_jobs(region, find):
                number = attempt_of(job)
                if number and (number not in jobs or job.create_time > jobs[number].create_time):
                    jobs[number] = job
        return jobs

    def _ended_well(self, job: Any) -> bool:
        """Whether a terminal job of this run was the run's success (:meth:`rebuild` returns its result)."""
        from ..policy.job_states import SUCCEEDED_STATES

        return job.state.name in SUCCEEDED_STATES

    # ------------------------------------------------------------------ Backend
    def find(self, spec: AttemptSpec) -> Submitted | None:
        """The job carrying the attempt's labels in its region (one ListCustomJobs call), watched instead of
        creating another; None when there is none."""
        from ..specs.vertex import labels_filter

        known_absent, self.known_absent = self.known_absent == spec.attempt, None
        if known_absent:
            return None
        region = self.region_for(spec.fallback)
        existing = self._list_jobs(region, labels_filter(spec.own_labels))
        if not existing:
            return None
        job = existing[0]
        log.info("Attempt %d already exists as %s (the task was interrupted after creating it): watching it "
                 "instead of creating another", spec.attempt, job.name)
        step, uri = resumed_from(job)
        return Submitted(job.name, self.clock(), step, uri)

    def submit(self, spec: AttemptSpec) -> Submitted | SubmitFailed:
        """Create the attempt's CustomJob; a retried create call first looks for the job by its labels (a lost
        reply never becomes a second job). A refused call is classified (:func:`~..policy.classify_create_error`)."""
        from google.api_core import exceptions as gexc

        from ..policy import classify_create_error
        from ..specs.vertex import labels_filter

        region = self.region_for(spec.fallback)
        try:
            job = self._create_job(region, spec, labels_filter(spec.own_labels))
        except gexc.GoogleAPICallError as exc:
            failure = classify_create_error(exc.grpc_status_code.value[0] if exc.grpc_status_code else exc.code,
                                            exc.message, platform=Platform.VERTEX_AI, timestamp=self.clock())
            log.warning("Creating attempt %d failed: %s", spec.attempt, failure.summary())
            return SubmitFailed(failure, self.clock())
        where = f" on fallback {spec.fallback_index + 1} ({spec.fallback.describe()})" if spec.fallback else ""
        resumed = f"resuming from step {spec.resume_step} ({spec.resume_uri})" if spec.resume_uri else "from scratch"
        log.info("Attempt %d: created %s in %s%s, %s", spec.attempt, job.name, region, where, resumed)
        return Submitted(job.name, self.clock(), spec.resume_step, spec.resume_uri)

    def look(self, name: str, judge: Judge, started_at: float | None = None) -> LookResult:
        """One GetCustomJob: the job's outcome once it is terminal, or when ``judge`` finds it failed while it
        runs (QUEUED or PENDING past the queue timeout, RUNNING without checkpoint progress past
        ``hang_timeout``: ``live=True``, the supervisor ends it); None while it just runs."""
        summary = job_summary(self._get_job(name))
        if summary["state"] in TERMINAL_STATES:
            return self.event(summary)
        watched = wants_checkpoints(summary, self.hang_timeout)
        verdict = judge(job_look(summary, self.checkpoint_dir if watched else None, self.checkpoint_marker,
                                 self.step_logs if watched else None),
                        Limits(hang_seconds=self.hang_timeout, queue_seconds=self.queue_timeout,
                               restart_seconds=self.restart_timeout))
        if verdict.failure is None:
            return None
        log.warning("%s: %s", name, verdict.failure.message)
        return self.event({**summary, **stop_keys(verdict.failure)})

    def event(self, summary: Mapping[str, Any]) -> JobSucceeded | JobFailed:
        """:func:`~..supervisor.vertex_look.job_event` now, with a failure logged."""
        event = job_event(summary, self.clock())
        if isinstance(event, JobFailed) and not event.live:
            log.warning("%s ended: %s", summary["name"], event.failure.summary())
        return event

    def end(self, name: str, wait: bool = True) -> Ended:
        """Cancel ``name`` and wait until it is terminal (``Ended.succeeded`` when it finished before the cancel
        took effect); always waited for, whatever ``wait`` says.

        Raises:
            TimeoutError: it is still not terminal after :data:`CANCEL_WAIT_SECONDS`.
        """
        job = self._cancel_and_wait(name, "the attempt ends")
        return Ended(self.clock(), succeeded=job.state.name in ("JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED"))

    def release(self, name: str) -> None:
        """The run stops with ``name`` live (hung, queued too long): cancel it and wait until it has ended, so
        that nothing of the stopped task runs on."""
        self._cancel_and_wait(name, "the run stops")

    def _cancel_and_wait(self, name: str, why: str) -> Any:
        from concurrent.futures import TimeoutError as FutureTimeout

        release_all(self.hook, [Release(OwnedResource(name, job_kind(name), None), why)])
        try:
            job = self.hook.wait_for_end(name, timeout=CANCEL_WAIT_SECONDS,
                                         interval=min(self.poll_interval, CANCEL_POLL_SECONDS))
        except FutureTimeout as exc:
            raise TimeoutError(f"{exc}; not starting another attempt beside it") from None
        if job.state.name != "JOB_STATE_CANCELLED":
            log.info("%s ended %s before the cancel took effect", name, job.state.name)
        return job

    def rebuild(self, task: Owner, rerun_after_success: bool) -> RunState | None:
        """The run of ``task`` rebuilt from its jobs, for a task state store that holds none.

        One ListCustomJobs call per region (the operator's and the fallbacks') with the task instance's labels
        (:func:`~..specs.common.job_labels` without the attempt). No job: None (a first try). Otherwise a history
        with one attempt per ``resilient-attempt`` label up to the newest (numbers without a job: create calls
        that failed), and the newest decides the phase: live -> RUNNING (watched, not resubmitted); SUCCEEDED
        -> SUCCEEDED (the earlier result, or with ``rerun_after_success`` a new attempt numbered after it); ended
        otherwise -> FAILED (a new attempt, fresh budgets, resuming from the latest checkpoint, as after a
        Clear). The rebuilt attempts carry no incidents, so budgets start afresh.
        """
        from ..specs.common import job_labels

        jobs = self.jobs_by_attempt(job_labels(task.dag_id, task.task_id, task.run_id, task.map_index, None))
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
            step, uri = resumed_from(job)
            history.append(Attempt(attempt, job.name, self.fallback_index(job.name), job.create_time.timestamp(),
                                   job.end_time.timestamp() if "end_time" in job else None, step, uri))
        newest = jobs[last]
        from ..supervisor.rebuild import rebuilt_run

        state_name = newest.state.name
        live = state_name not in TERMINAL_STATES
        rebuilt = rebuilt_run(history, newest.name, live=live, succeeded=not live and self._ended_well(newest),
                              rerun_after_success=rerun_after_success)
        self.known_absent = rebuilt.known_absent
        log.info("Attempt %d already exists as %s, %s (the task state store holds nothing for this task): %s",
                 last, newest.name, state_name, rebuilt.then)
        return rebuilt.state


__all__ = [
    "CANCEL_POLL_SECONDS",
    "CANCEL_WAIT_SECONDS",
    "VertexCustomJobBackend",
    "attempt_of",
    "job_look",
    "job_summary",
    "list_filter",
    "resumed_from",
    "wants_checkpoints",
]
