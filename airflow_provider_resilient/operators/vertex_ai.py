"""``ResilientCustomJobOperator``: a Vertex AI CustomJob that finishes despite the failures of the seeds.

A DAG author gives a CustomJob spec and a checkpoint location. The operator submits attempt 1; when an
attempt fails it classifies the failure (:mod:`..policy.classify`), asks the policy what to do
(:func:`..policy.decide`) and -- for a retryable failure -- submits the next attempt resuming from the
latest complete checkpoint (:func:`..checkpoints.find_latest_checkpoint`), handed to the workload as
``RESILIENT_RESUME_FROM`` / ``RESILIENT_RESUME_STEP`` / ``RESILIENT_ATTEMPT`` / ``RESILIENT_FAILURE_CLASS``
(see :mod:`..specs.vertex`). The loop itself is the pure supervisor (:mod:`..supervisor`); this module is
its shell: it persists the supervisor's state in Airflow's task state store after every step, and carries
out the actions -- submit, watch (deferring to :class:`~..triggers.vertex_ai.CustomJobTrigger`, or polling
in the worker), sleep (deferring to a ``DateTimeTrigger``), succeed, fail.

Never a duplicate: every job carries labels naming the DAG, task, run, map index and attempt; before any
create call the operator looks for a job with the same labels and, if one exists (the task was killed
after the create call), watches it instead. A task retry finds the state in the store and reattaches;
budgets continue. Clearing a failed task resumes from the latest checkpoint with fresh budgets (the
history is kept); clearing a successful task reruns nothing unless ``rerun_after_success=True``. When the
store holds nothing (a first try, or a store emptied by ``[state_store] clear_on_success``, its retention
or its REST API), the operator lists the task instance's jobs by their labels and rebuilds the run from
them (:meth:`ResilientCustomJobOperator._recover`): a live job is watched, a successful one is the result
(or, with ``rerun_after_success``, followed by a new attempt numbered after it), a failed one is followed
by a new attempt -- never a second job with the same attempt label.

Never two attempts at once: a job judged queued past ``RetryPolicy.queue_timeout_seconds`` (seed 004) or
hung is still live when the supervisor hears of it (``JobFailed(live=True)``); the supervisor commands its
end (``EndAttempt``: cancel it and wait until the platform reports it ended) before the backoff and the
next attempt, or ends it as the run stops (``Fail.end``). Neither this shell nor its trigger decides that.

Importing this module imports no Google library.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ..links.vertex_ai import VertexAICustomJobLink, VertexAICustomJobLogsLink, push_links
from ..policy import Failure, FailureClass, Platform, history_to_json
from ..specs.vertex import (
    ENV_RESUME_FROM,
    ENV_RESUME_STEP,
    LABEL_ATTEMPT,
    SpecError,
    build_custom_job,
    job_labels,
    labels_filter,
    primary_env,
    resume_env,
    validate_custom_job,
)
from ..supervisor import (
    Ended,
    JobFailed,
    JobSucceeded,
    Phase,
    RunState,
    Submit,
    SubmitFailed,
    Submitted,
    WokeUp,
)
from ..supervisor.reconcile import owner_env
from .base import SupervisedOperator

log = logging.getLogger(__name__)

#: Key of the supervisor's state in the task state store. Renaming it breaks in-flight runs.
STATE_KEY = "resilient_custom_job"
#: Seconds to wait for a job cancelled for a reason to end before giving up (AirflowException), and the
#: longest pause between two looks at it.
CANCEL_WAIT_SECONDS = 1800.0
CANCEL_POLL_SECONDS = 5.0


def _as_dict(value: Any) -> Any:
    """A WorkerPoolSpec (proto-plus or protobuf message) as a dict in the shape of the dict form; anything
    else unchanged.

    Only the fields that are set are kept, with proto field names, enum names, durations as ``"3600s"`` and
    64-bit integers (``replica_count``, ``boot_disk_size_gb`` where int64 ...) as ``int`` -- protobuf's JSON
    mapping writes those as strings, which the validation would read as ``"1" != 1``.
    """
    message = type(value).pb(value) if hasattr(value, "_pb") and hasattr(type(value), "pb") else value
    if not hasattr(message, "DESCRIPTOR") or not hasattr(message, "ListFields"):
        return value
    from google.protobuf import json_format

    data = json_format.MessageToDict(message, preserving_proto_field_name=True, use_integers_for_enums=False)
    return _cast_int64(data, message.DESCRIPTOR)


def _cast_int64(data: dict[str, Any], descriptor: Any) -> dict[str, Any]:
    """``data`` (the JSON form of a message of type ``descriptor``) with its 64-bit integers as ints."""
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            inner = field.message_type.fields_by_name["value"]
            data[field.name] = {k: _cast_value(v, inner) for k, v in value.items()}
        elif repeated:
            data[field.name] = [_cast_value(v, field) for v in value]
        else:
            data[field.name] = _cast_value(value, field)
    return data


def _cast_value(value: Any, field: Any) -> Any:
    if field.message_type is not None:  # well-known types (Duration ...) are strings in JSON: left as they are
        return _cast_int64(value, field.message_type) if isinstance(value, dict) else value
    from google.protobuf.descriptor import FieldDescriptor as F

    int64 = (F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_SINT64, F.TYPE_FIXED64, F.TYPE_SFIXED64)
    return int(value) if field.type in int64 and isinstance(value, str) else value


def _resumed_from(job: Any) -> tuple[int | None, str | None]:
    """(step, URI) of the checkpoint a created CustomJob resumes from, read from its primary pool's
    ``RESILIENT_RESUME_STEP`` / ``RESILIENT_RESUME_FROM``; (None, None) for a fresh start."""
    env = primary_env(job)
    step = env.get(ENV_RESUME_STEP, "")
    return (int(step) if step.isdigit() else None), env.get(ENV_RESUME_FROM) or None


class ResilientCustomJobOperator(SupervisedOperator):
    """Run a Vertex AI CustomJob to completion through crashes, stockouts, internal errors and quota waits.

    Args:
        region: Vertex AI region, e.g. ``us-central1``.
        display_name: the CustomJob's display name (every attempt uses it).
        worker_pool_specs: list of WorkerPoolSpec dicts (or messages); the first pool has 1 replica.
        base_output_dir: ``gs://`` prefix for Vertex AI's ``AIP_MODEL_DIR`` / ``AIP_CHECKPOINT_DIR`` /
            ``AIP_TENSORBOARD_LOG_DIR``.
        timeout: ``scheduling.timeout`` (timedelta or seconds): the platform expires a longer attempt.
        restart_job_on_worker_restart: ``scheduling.restart_job_on_worker_restart``.
        strategy: ``scheduling.strategy``: STANDARD, SPOT or FLEX_START (ON_DEMAND, LOW_COST).
        max_wait_duration: FLEX_START's ``scheduling.max_wait_duration``.
        disable_retries: ``scheduling.disable_retries`` (the platform's own retries; ours still apply).
        hang_timeout: seconds a RUNNING attempt may go without a new complete checkpoint before it counts as
            hung (DESIGN.md rules table: "no heartbeat / no checkpoint progress for a set time" -> treated as
            a transient crash, sharing its budget): the job is cancelled and resubmitted from the latest
            checkpoint. Set it to a few checkpoint intervals (more than ``poll_interval``); None (default)
            never declares a hang -- the platform's ``scheduling.timeout`` is then the only limit. Deferred,
            the trigger watches for it (and only then lists checkpoints: a deferred run has step reports only
            with a hang_timeout).
        cancel_on_kill: cancel the live job when the task is killed (``on_kill`` / trigger ``on_kill``).
        project_id, checkpoint_marker, labels, network, service_account, fallbacks, deferrable,
            rerun_after_success, gcp_conn_id, impersonation_chain, min_defer_seconds: the arguments every
            operator of the provider shares, documented once on :class:`~.base.SupervisedOperator`.
        checkpoint_dir: as there; default ``<base_output_dir>/checkpoints/`` (Vertex AI's
            ``AIP_CHECKPOINT_DIR``).
        resilience_policy: as there. On Vertex AI its ``queue_timeout_seconds`` bounds how long an attempt may
            stay QUEUED or PENDING (seed 003: a job may wait there until quota frees), counted from the job's
            ``create_time``: past it the job is cancelled, and once it has ended the ``queue-timeout`` rule
            fails over to the next fallback or fails the task with a message naming the queue timeout.
        poll_interval: as there: seconds between status reads while an attempt runs. Each read also looks
            for a new complete checkpoint (two listings): the steps seen feed the goodput ledger.

    Returns (and pushes to XCom as ``return_value``): ``{"job_name", "state", "checkpoint": {"uri", "step"}
    | None, "attempts": [...]}``; the attempt history is also pushed as ``attempt_history``.

    Raises:
        AirflowFailException: a bad argument (before anything is submitted, naming the field), a permanent
            failure, or a spent budget -- with the attempt history as the message. Airflow does not retry it.
        AirflowException: an infrastructure error of Airflow's or Google's side (e.g. the checkpoint bucket
            cannot be read): Airflow's task retries apply, and the retried task reattaches.
    """

    STATE_KEY = STATE_KEY
    template_fields: Sequence[str] = ("project_id", "region", "display_name", "worker_pool_specs", "base_output_dir",
                                      "checkpoint_dir", "labels", "service_account", "network", "impersonation_chain")
    template_fields_renderers = {"worker_pool_specs": "json", "labels": "json"}
    operator_extra_links = (VertexAICustomJobLink(), VertexAICustomJobLogsLink())
    ui_color = "#c2e0ff"

    def __init__(
        self,
        *,
        region: str,
        display_name: str,
        worker_pool_specs: Sequence[Mapping[str, Any]],
        base_output_dir: str | None = None,
        timeout: timedelta | float | None = None,
        restart_job_on_worker_restart: bool = False,
        strategy: str | None = None,
        max_wait_duration: timedelta | float | None = None,
        disable_retries: bool = False,
        hang_timeout: float | None = None,
        cancel_on_kill: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if hang_timeout is not None and hang_timeout <= self.poll_interval:
            raise ValueError(f"hang_timeout must be more than poll_interval ({self.poll_interval} s), "
                             f"got {hang_timeout}")
        self.region = region
        self.display_name = display_name
        self.worker_pool_specs = worker_pool_specs
        self.base_output_dir = base_output_dir
        self.timeout = timeout
        self.restart_job_on_worker_restart = restart_job_on_worker_restart
        self.strategy = strategy
        self.max_wait_duration = max_wait_duration
        self.disable_retries = disable_retries
        self.hang_timeout = hang_timeout
        self.cancel_on_kill = cancel_on_kill
        self._live_job: str | None = None

    # ------------------------------------------------------------------ Airflow entry points
    def execute(self, context: Any) -> Any:
        self._validate()
        self.log.info("%s in %s; checkpoints: %s", self.display_name, self.region, self._checkpoint_dir())
        return self._start(context)

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        """Resume after a deferral. The state comes from the task state store (``airflow dags test`` drops
        the defer kwargs); the event is the trigger's payload."""
        state = self._load(context)
        if state.phase == Phase.SLEEPING:
            return self._drive(context, state, WokeUp(self._clock()))
        if state.phase != Phase.RUNNING or not state.job_name:
            raise AirflowException(f"resumed in phase {state.phase!r}, which does not wait for a trigger")
        if isinstance(event, dict) and isinstance(event.get("watch"), dict):  # the observer's memory goes on
            from ..supervisor.observe import WatchMemory

            state = state.observed(WatchMemory.from_json(event["watch"]))
            self._save(context, state)
        self._note_trigger_steps(context, state, event)
        status = event.get("status") if isinstance(event, dict) else None
        summary = event.get("job") if status in ("terminal", "hang", "queue_timeout") else None
        if status in ("hang", "queue_timeout") and summary is not None:
            # The trigger judged the live job (a trigger of the previous release also cancelled it): the
            # supervisor commands its end (EndAttempt) before anything follows.
            from ..backends.vertex import STOP_KEYS

            summary = {**summary, **{k: event.get(k) for k in STOP_KEYS if event.get(k) is not None}}
        if summary is None:
            if isinstance(event, dict) and event.get("status") == "error":
                self.log.warning("The trigger could not read the job: %s", event.get("message"))
            summary = self._job_summary(self._hook().get_custom_job(state.job_name))
        return self._drive(context, state, self._outcome(summary))

    def on_kill(self) -> None:
        if self.cancel_on_kill and self._live_job:
            self.log.info("Task killed: cancelling %s", self._live_job)
            self._hook().cancel_custom_job(self._live_job)

    # ------------------------------------------------------------------ the shell
    def _recover(self, context: Any, state: RunState) -> RunState:
        """Rebuild the run from this task instance's jobs when the task state store holds none.

        One ListCustomJobs call per region (``region`` and the fallbacks' regions) with the task instance's
        labels (:func:`~..specs.vertex.job_labels` without the attempt). No job: ``state`` unchanged (a
        first try). Otherwise a history with one attempt per ``resilient-attempt`` label up to the newest
        (numbers without a job: create calls that failed), and the newest decides the phase: live ->
        ``running`` (watched, not resubmitted); SUCCEEDED -> ``succeeded`` (the earlier result, or with
        ``rerun_after_success`` a new attempt numbered after it); ended otherwise -> ``failed`` (a new
        attempt, fresh budgets, resuming from the latest checkpoint, as after a Clear). The rebuilt attempts
        carry no incidents, so budgets start afresh.
        """
        from ..backends.vertex import TERMINAL_STATES
        from ..policy import Attempt

        hook = self._hook()
        find = labels_filter(job_labels(self.dag_id, self.task_id, context["run_id"], self._map_index(context), None))
        jobs: dict[int, Any] = {}
        for region in dict.fromkeys([self.region, *(f.region for f in self.resilience_policy.fallbacks if f.region)]):
            for job in hook.list_custom_jobs(self.project_id, region, find):
                number = str(job.labels.get(LABEL_ATTEMPT, ""))
                if number.isdigit() and (int(number) not in jobs or job.create_time > jobs[int(number)].create_time):
                    jobs[int(number)] = job
        if not jobs:
            self._known_absent = 1
            return state
        last = max(jobs)
        history = []
        for number in range(1, last + 1):
            job = jobs.get(number)
            if job is None:
                history.append(Attempt(number))
                continue
            step, uri = _resumed_from(job)
            history.append(Attempt(number, job.name, self._fallback_index(job.name), job.create_time.timestamp(),
                                   job.end_time.timestamp() if "end_time" in job else None, step, uri))
        newest = jobs[last]
        state_name = newest.state.name
        if state_name not in TERMINAL_STATES:
            phase, then = Phase.RUNNING, "watching it instead of creating another"
        elif state_name in ("JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED"):
            phase = Phase.SUCCEEDED
            then = (f"rerun_after_success: training again as attempt {last + 1}" if self.rerun_after_success else
                    "returning its result instead of creating another")
        else:
            phase, then = Phase.FAILED, f"resuming as attempt {last + 1}"
        if phase == Phase.FAILED or (phase == Phase.SUCCEEDED and self.rerun_after_success):
            self._known_absent = last + 1
        self.log.info("Attempt %d already exists as %s, %s (the task state store holds nothing for this task): %s",
                      last, newest.name, state_name, then)
        return RunState(phase=phase, history=tuple(history), job_name=newest.name)

    def _fallback_index(self, job_name: str) -> int:
        """The fallback a job ran on, as far as its region tells (-1: the original target)."""
        from ..hooks.vertex_ai import region_of

        region = region_of(job_name)
        if region == self.region:
            return -1
        return next((i for i, f in enumerate(self.resilience_policy.fallbacks) if f.region == region), -1)

    def _submit(self, context: Any, state: RunState, action: Submit) -> Any:
        from ..checkpoints import find_latest_checkpoint
        from ..policy import classify_create_error

        hook = self._hook()
        fallback = self.resilience_policy.fallbacks[action.fallback_index] if action.fallback_index >= 0 else None
        region = fallback.region if fallback and fallback.region else self.region
        labels = job_labels(self.dag_id, self.task_id, context["run_id"], self._map_index(context), action.attempt)
        find = labels_filter(labels)
        # _recover has just listed every job of this task instance and seen none with this attempt's label.
        known_absent = self.__dict__.pop("_known_absent", None) == action.attempt
        existing = [] if known_absent else hook.list_custom_jobs(self.project_id, region, find)
        if existing:
            job = existing[0]
            self.log.info("Attempt %d already exists as %s (the task was interrupted after creating it): "
                          "watching it instead of creating another", action.attempt, job.name)
            step, uri = _resumed_from(job)
            return Submitted(job.name, self._clock(), step, uri)
        try:
            checkpoint = find_latest_checkpoint(self._checkpoint_dir(), marker=self.checkpoint_marker)
        except Exception as exc:  # cannot see the checkpoints: never silently restart from step 0
            raise AirflowException(f"cannot list checkpoints under {self._checkpoint_dir()}: {exc}") from exc
        env = resume_env(attempt=action.attempt, checkpoint_dir=self._checkpoint_dir(),
                         resume_uri=checkpoint.uri if checkpoint else None,
                         resume_step=checkpoint.step if checkpoint else None, failure_class=action.failure_class)
        env.update(owner_env(self.dag_id, self.task_id, context["run_id"], self._map_index(context)))
        custom_job = build_custom_job(
            display_name=self.display_name, worker_pool_specs=self._pools(), labels={**self.labels, **labels},
            base_output_dir=self.base_output_dir, scheduling=self._scheduling(), service_account=self.service_account,
            network=self.network, fallback=fallback, env=env)
        from google.api_core import exceptions as gexc

        try:
            job = hook.create_custom_job(self.project_id, region, custom_job, find_filter=find)
        except gexc.GoogleAPICallError as exc:
            failure = classify_create_error(exc.grpc_status_code.value[0] if exc.grpc_status_code else exc.code,
                                            exc.message, platform=Platform.VERTEX_AI, timestamp=self._clock())
            self.log.warning("Creating attempt %d failed: %s", action.attempt, failure.summary())
            return SubmitFailed(failure, self._clock())
        where = f" on fallback {action.fallback_index + 1} ({fallback.describe()})" if fallback else ""
        resumed = f"resuming from step {checkpoint.step} ({checkpoint.uri})" if checkpoint else "from scratch"
        self.log.info("Attempt %d: created %s in %s%s, %s", action.attempt, job.name, region, where, resumed)
        return Submitted(job.name, self._clock(), checkpoint.step if checkpoint else None,
                         checkpoint.uri if checkpoint else None)

    def _begin_watch(self, context: Any, state: RunState, job_name: str) -> None:
        """Push the job's links (every try starts with no XCom: a created, reattached or resumed job gets them
        again) and, deferrable, defer at once: the trigger makes the first look."""
        self.__dict__.pop("_known_absent", None)
        push_links(context, job_name)
        self._live_job = job_name
        if self.deferrable:
            self._defer_watch(state, job_name)

    def _look(self, context: Any, state: RunState, job_name: str) -> Any:
        """One look at the job: ``JobSucceeded`` / ``JobFailed`` once it is terminal, or when the observer
        judges it failed while it runs (:mod:`..supervisor.observe`: QUEUED or PENDING past the queue
        timeout, or RUNNING without checkpoint progress past ``hang_timeout``; the job is then still live:
        ``live=True``, and the supervisor commands its end); None while it just runs."""
        from ..backends.vertex import TERMINAL_STATES, job_look, stop_keys, wants_checkpoints
        from ..supervisor.observe import Limits

        summary = self._job_summary(self._hook().get_custom_job(job_name))
        if summary["state"] in TERMINAL_STATES:
            return self._outcome(summary)
        listed = self._checkpoint_dir() if wants_checkpoints(summary, self.hang_timeout) else None
        limits = Limits(hang_seconds=self.hang_timeout, queue_seconds=self.resilience_policy.queue_timeout_seconds)
        verdict = self._observe(context, state, job_look(summary, listed, self.checkpoint_marker), limits)
        if verdict.failure is None:
            return None
        self.log.warning("%s: %s", job_name, verdict.failure.message)
        return self._outcome({**summary, **stop_keys(verdict.failure)})

    def _end_attempt(self, context: Any, state: RunState, job_name: str) -> Ended:
        """Carry out ``EndAttempt``: cancel ``job_name`` and wait until it is terminal (a person cleared the
        running task, or it failed while live: hung, queued too long)."""
        job = self._cancel_and_wait(job_name)
        return Ended(self._clock(), succeeded=job.state.name in ("JOB_STATE_SUCCEEDED",
                                                                 "JOB_STATE_PARTIALLY_SUCCEEDED"))

    def _end_last(self, context: Any, state: RunState, job_name: str) -> None:
        """Carry out ``Fail.end``: the run stops with ``job_name`` still live (hung, queued too long): cancel
        it and wait until it has ended, so that nothing of the failed task runs on."""
        self.log.info("Cancelling %s: the run stops", job_name)
        self._cancel_and_wait(job_name)

    def _cancel_and_wait(self, job_name: str) -> Any:
        """Cancel ``job_name`` and wait (:meth:`~..hooks.vertex_ai.ResilientVertexAIHook.wait_for_end`) until
        it is terminal, so that nothing follows while it runs; the terminal job (SUCCEEDED when it finished
        before the cancel took effect).

        Raises:
            AirflowException: the job is still not terminal after :data:`CANCEL_WAIT_SECONDS` (a task retry
                ends it again).
        """
        from concurrent.futures import TimeoutError as FutureTimeout

        hook = self._hook()
        hook.cancel_custom_job(job_name)
        try:
            job = hook.wait_for_end(job_name, timeout=CANCEL_WAIT_SECONDS,
                                    interval=min(self.poll_interval, CANCEL_POLL_SECONDS))
        except FutureTimeout as exc:
            raise AirflowException(f"{exc}; not starting another attempt beside it") from None
        if job.state.name != "JOB_STATE_CANCELLED":
            self.log.info("%s ended %s before the cancel took effect", job_name, job.state.name)
        return job

    def _outcome(self, summary: Mapping[str, Any]) -> Any:
        from ..backends.vertex import TERMINAL_STATES
        from ..policy import classify_vertex_job

        now = self._clock()
        if summary.get("queue_timeout"):  # decided when the wait passed the limit (seed 004)
            return JobFailed(Failure(FailureClass.QUEUE_TIMEOUT, Platform.VERTEX_AI, message=summary["queue_timeout"],
                                     terminate_reason=summary.get("queued_state"),
                                     timestamp=summary.get("timed_out_at") or now), now,
                             live=summary["state"] not in TERMINAL_STATES)
        if summary.get("hang"):  # the last progress is when the hang began
            return JobFailed(Failure(FailureClass.HANG, Platform.VERTEX_AI, message=summary["hang"],
                                     timestamp=summary.get("hang_since") or now), now,
                             live=summary["state"] not in TERMINAL_STATES)
        if summary["state"] == "JOB_STATE_SUCCEEDED":
            return JobSucceeded(now)
        # The failure happened when the platform ended the job; we learn of it now (detection, in the ledger).
        ended = summary.get("end_time") or now
        failure = classify_vertex_job(summary["state"], summary.get("error_code"), summary.get("error_message"),
                                      started=summary.get("started"), timestamp=min(ended, now))
        if failure is None:  # PARTIALLY_SUCCEEDED is not a failure of a CustomJob
            return JobSucceeded(now)
        self.log.warning("%s ended: %s", summary["name"], failure.summary())
        return JobFailed(failure, now)

    def _defer_watch(self, state: RunState, job_name: str) -> None:
        """Wait in a :class:`~..triggers.vertex_ai.CustomJobTrigger` until the job ends or is judged failed."""
        from ..triggers.vertex_ai import CustomJobTrigger

        hook = self._hook()
        from ..clients import serializable_chain

        chain = serializable_chain(self.impersonation_chain)
        trigger = CustomJobTrigger(job_name, self.poll_interval, self.gcp_conn_id, chain, hook.emulator,
                                   self.cancel_on_kill, hang_timeout=self.hang_timeout,
                                   checkpoint_dir=self._checkpoint_dir() if self.hang_timeout else None,
                                   checkpoint_marker=self.checkpoint_marker,
                                   queue_timeout=self.resilience_policy.queue_timeout_seconds,
                                   fire_not_before=self._fire_not_before(),
                                   watch=self._watch_memory(state).to_json())
        self.defer(trigger=trigger, method_name="execute_complete")

    def _finish(self, context: Any, state: RunState, job_name: str) -> dict[str, Any]:
        from ..checkpoints import find_latest_checkpoint

        self._live_job = None
        checkpoint = None
        try:
            found = find_latest_checkpoint(self._checkpoint_dir(), marker=self.checkpoint_marker)
            checkpoint = {"uri": found.uri, "step": found.step} if found else None
        except Exception as exc:  # the job succeeded; a missing listing does not change that
            self.log.warning("Could not list the final checkpoint: %s", exc)
        return {"job_name": job_name, "state": "JOB_STATE_SUCCEEDED", "checkpoint": checkpoint,
                "attempts": history_to_json(state.history)}

    # ------------------------------------------------------------------ helpers
    def _hook(self) -> Any:
        if not hasattr(self, "_hook_instance"):
            from ..hooks.vertex_ai import ResilientVertexAIHook

            self._hook_instance = ResilientVertexAIHook(self.gcp_conn_id, self.impersonation_chain,
                                                        sleep=self._sleep)
        return self._hook_instance

    @staticmethod
    def _job_summary(job: Any) -> dict[str, Any]:
        from ..backends.vertex import job_summary

        return job_summary(job)

    def _checkpoint_location(self) -> str | None:
        return self._checkpoint_dir()

    def _checkpoint_dir(self) -> str:
        if self.checkpoint_dir:
            return self.checkpoint_dir
        return f"{(self.base_output_dir or '').rstrip('/')}/checkpoints/"

    def _pools(self) -> list[dict[str, Any]]:
        return [_as_dict(p) for p in _as_dict(self.worker_pool_specs)]

    def _scheduling(self) -> dict[str, Any]:
        return {"timeout": self.timeout, "restart_job_on_worker_restart": self.restart_job_on_worker_restart or None,
                "strategy": self.strategy.upper() if self.strategy else None,
                "max_wait_duration": self.max_wait_duration, "disable_retries": self.disable_retries or None}

    def _validate(self) -> None:
        try:
            if not self.checkpoint_dir and not self.base_output_dir:
                raise SpecError("checkpoint_dir", "set checkpoint_dir or base_output_dir: new attempts resume "
                                                  "from the checkpoints written there")
            validate_custom_job(project_id=self.project_id, region=self.region, display_name=self.display_name,
                                worker_pool_specs=self._pools(), base_output_dir=self.base_output_dir,
                                labels=self.labels, strategy=self.strategy, max_wait_duration=self.max_wait_duration,
                                timeout=self.timeout, fallbacks=self.resilience_policy.fallbacks)
        except SpecError as exc:
            raise AirflowFailException(f"{type(self).__name__} {self.task_id}: {exc}") from exc


__all__ = ["STATE_KEY", "ResilientCustomJobOperator"]
