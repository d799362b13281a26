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
history is kept); clearing a successful task reruns nothing unless ``rerun_after_success=True``.

Importing this module imports no Google library.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ..links.vertex_ai import VertexAICustomJobLink, VertexAICustomJobLogsLink, push_links
from ..policy import Failure, FailureClass, Fallback, Platform, RetryPolicy, history_to_json
from ..specs.vertex import (
    SpecError,
    build_custom_job,
    job_labels,
    labels_filter,
    resume_env,
    validate_custom_job,
)
from ..supervisor import (
    JobFailed,
    JobSucceeded,
    RunState,
    Submit,
    SubmitFailed,
    Submitted,
    WokeUp,
)
from .base import SupervisedOperator, policy_with_fallbacks

log = logging.getLogger(__name__)

#: Key of the supervisor's state in the task state store. Renaming it breaks in-flight runs.
STATE_KEY = "resilient_custom_job"


def _as_dict(value: Any) -> Any:
    """Proto-plus messages (WorkerPoolSpec ...) as dicts; everything else unchanged."""
    if hasattr(value, "_pb") and hasattr(type(value), "to_dict"):
        return type(value).to_dict(value, preserving_proto_field_name=True)
    return value


class ResilientCustomJobOperator(SupervisedOperator):
    """Run a Vertex AI CustomJob to completion through crashes, stockouts, internal errors and quota waits.

    Args:
        project_id: Google Cloud project id.
        region: Vertex AI region, e.g. ``us-central1``.
        display_name: the CustomJob's display name (every attempt uses it).
        worker_pool_specs: list of WorkerPoolSpec dicts (or messages); the first pool has 1 replica.
        base_output_dir: ``gs://`` prefix for Vertex AI's ``AIP_MODEL_DIR`` / ``AIP_CHECKPOINT_DIR`` /
            ``AIP_TENSORBOARD_LOG_DIR``.
        checkpoint_dir: where the workload writes checkpoints (default ``<base_output_dir>/checkpoints/``,
            Vertex AI's ``AIP_CHECKPOINT_DIR``); searched before every new attempt.
        checkpoint_marker: a file the workload writes last in each checkpoint (e.g. ``COMMITTED``); when set,
            a checkpoint without it is never resumed from.
        timeout: ``scheduling.timeout`` (timedelta or seconds): the platform expires a longer attempt.
        restart_job_on_worker_restart: ``scheduling.restart_job_on_worker_restart``.
        strategy: ``scheduling.strategy``: STANDARD, SPOT or FLEX_START (ON_DEMAND, LOW_COST).
        max_wait_duration: FLEX_START's ``scheduling.max_wait_duration``.
        disable_retries: ``scheduling.disable_retries`` (the platform's own retries; ours still apply).
        labels: extra job labels (the operator adds ``airflow-dag``, ``airflow-task``, ``airflow-run``,
            ``airflow-map-index`` and ``resilient-attempt``).
        service_account, network: the CustomJob's.
        resilience_policy: a :class:`~..policy.RetryPolicy` for job attempts (default: the seed rules).
            Named so because ``retry_policy`` is Airflow's own argument, for task retries.
        fallbacks: alternative targets (:class:`~..policy.Fallback` or dicts) consumed on stockouts and
            queue timeouts, in order; shorthand for ``resilience_policy.fallbacks``.
        deferrable: wait in the triggerer (default ``[operators] default_deferrable``).
        poll_interval: seconds between status reads while an attempt runs. Each read also looks for a new
            complete checkpoint (two listings): the steps seen feed the goodput ledger.
        hang_timeout: seconds a RUNNING attempt may go without a new complete checkpoint before it counts as
            hung (DESIGN.md rules table: "no heartbeat / no checkpoint progress for a set time" -> treated as
            a transient crash, sharing its budget): the job is cancelled and resubmitted from the latest
            checkpoint. Set it to a few checkpoint intervals; None (default) never declares a hang -- the
            platform's ``scheduling.timeout`` is then the only limit. Deferred, the trigger watches for it
            (and only then lists checkpoints: a deferred run has step reports only with a hang_timeout).
        cancel_on_kill: cancel the live job when the task is killed (``on_kill`` / trigger ``on_kill``).
        rerun_after_success: when a successful task is cleared, train again (default: return the earlier
            result without submitting anything).
        gcp_conn_id: Airflow connection for credentials (its extra ``emulator_host`` selects an emulator).
        impersonation_chain: service account(s) to impersonate.

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
        project_id: str,
        region: str,
        display_name: str,
        worker_pool_specs: Sequence[Mapping[str, Any]],
        base_output_dir: str | None = None,
        checkpoint_dir: str | None = None,
        checkpoint_marker: str | None = None,
        timeout: timedelta | float | None = None,
        restart_job_on_worker_restart: bool = False,
        strategy: str | None = None,
        max_wait_duration: timedelta | float | None = None,
        disable_retries: bool = False,
        labels: Mapping[str, str] | None = None,
        service_account: str | None = None,
        network: str | None = None,
        resilience_policy: RetryPolicy | None = None,
        fallbacks: Sequence[Fallback | Mapping[str, Any]] = (),
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 30.0,
        hang_timeout: float | None = None,
        cancel_on_kill: bool = True,
        rerun_after_success: bool = False,
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval}")
        if hang_timeout is not None and hang_timeout <= poll_interval:
            raise ValueError(f"hang_timeout must be more than poll_interval ({poll_interval} s), got {hang_timeout}")
        self.resilience_policy = policy_with_fallbacks(resilience_policy, fallbacks)
        self.project_id = project_id
        self.region = region
        self.display_name = display_name
        self.worker_pool_specs = worker_pool_specs
        self.base_output_dir = base_output_dir
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_marker = checkpoint_marker
        self.timeout = timeout
        self.restart_job_on_worker_restart = restart_job_on_worker_restart
        self.strategy = strategy
        self.max_wait_duration = max_wait_duration
        self.disable_retries = disable_retries
        self.labels = dict(labels or {})
        self.service_account = service_account
        self.network = network
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.hang_timeout = hang_timeout
        self.cancel_on_kill = cancel_on_kill
        self.rerun_after_success = rerun_after_success
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
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
        if state.phase == "sleeping":
            return self._drive(context, state, WokeUp(self._clock()))
        if state.phase != "running" or not state.job_name:
            raise AirflowException(f"resumed in phase {state.phase!r}, which does not wait for a trigger")
        for at, step in (event.get("steps") or []) if isinstance(event, dict) else []:
            self._note_step(float(at), int(step))
        status = event.get("status") if isinstance(event, dict) else None
        summary = event.get("job") if status in ("terminal", "hang") else None
        if status == "hang" and summary is not None:
            summary = {**summary, "hang": event.get("hang"), "hang_since": event.get("hang_since")}
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
    def _submit(self, context: Any, state: RunState, action: Submit) -> Any:
        from ..checkpoints import find_latest_checkpoint
        from ..policy import classify_create_error

        hook = self._hook()
        fallback = self.resilience_policy.fallbacks[action.fallback_index] if action.fallback_index >= 0 else None
        region = fallback.region if fallback and fallback.region else self.region
        labels = job_labels(self.dag_id, self.task_id, context["run_id"], self._map_index(context), action.attempt)
        find = labels_filter(labels)
        existing = hook.list_custom_jobs(self.project_id, region, find)
        if existing:
            job = existing[0]
            self.log.info("Attempt %d already exists as %s (the task was interrupted after creating it): "
                          "watching it instead of creating another", action.attempt, job.name)
            primary = job.job_spec.worker_pool_specs[0]
            spec = primary.container_spec if "container_spec" in primary else primary.python_package_spec
            step_env = {e.name: e.value for e in spec.env}
            resumed = step_env.get("RESILIENT_RESUME_STEP")
            return Submitted(job.name, self._clock(), int(resumed) if resumed else None,
                             step_env.get("RESILIENT_RESUME_FROM"))
        try:
            checkpoint = find_latest_checkpoint(self._checkpoint_dir(), marker=self.checkpoint_marker)
        except Exception as exc:  # cannot see the checkpoints: never silently restart from step 0
            raise AirflowException(f"cannot list checkpoints under {self._checkpoint_dir()}: {exc}") from exc
        env = resume_env(attempt=action.attempt, checkpoint_dir=self._checkpoint_dir(),
                         resume_uri=checkpoint.uri if checkpoint else None,
                         resume_step=checkpoint.step if checkpoint else None, failure_class=action.failure_class)
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
        push_links(context, job.name)
        return Submitted(job.name, self._clock(), checkpoint.step if checkpoint else None,
                         checkpoint.uri if checkpoint else None)

    def _watch(self, context: Any, state: RunState, job_name: str) -> Any:
        self._live_job = job_name
        if self.deferrable:
            self._defer_watch(job_name)
        return self._outcome(self._poll_until_terminal(job_name))

    def _poll_until_terminal(self, job_name: str) -> dict[str, Any]:
        from ..checkpoints.progress import ProgressWatch
        from ..triggers.vertex_ai import TERMINAL_STATES

        hook = self._hook()
        progress = ProgressWatch(self.hang_timeout)
        while True:
            summary = self._job_summary(hook.get_custom_job(job_name))
            if summary["state"] in TERMINAL_STATES:
                return summary
            if summary["state"] == "JOB_STATE_RUNNING":
                hung = self._look_for_progress(progress)
                if hung is not None:
                    self.log.warning("%s: %s; cancelling it", job_name, hung)
                    hook.cancel_custom_job(job_name)
                    return {**summary, "hang": hung, "hang_since": progress.since}
            self._sleep(self.poll_interval)

    def _look_for_progress(self, progress: Any) -> str | None:
        """Look for a new complete checkpoint (a step report for the ledger when there is one); why the
        attempt counts as hung, or None."""
        from ..checkpoints import find_latest_checkpoint

        now = self._clock()
        try:
            found = find_latest_checkpoint(self._checkpoint_dir(), marker=self.checkpoint_marker)
        except Exception as exc:  # a listing error is not evidence of a hang
            self.log.warning("Could not look for checkpoint progress: %s", exc)
            return None
        if progress.observe(found.step if found else None, now):
            self._note_step(now, found.step if found else 0)
        hang: str | None = progress.hang(now)
        return hang

    def _outcome(self, summary: Mapping[str, Any]) -> Any:
        from ..policy import classify_vertex_job

        now = self._clock()
        if summary.get("hang"):  # the last progress is when the hang began
            return JobFailed(Failure(FailureClass.HANG, Platform.VERTEX_AI, message=summary["hang"],
                                     timestamp=summary.get("hang_since") or now), now)
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

    def _defer_watch(self, job_name: str) -> None:
        from ..triggers.vertex_ai import CustomJobTrigger

        hook = self._hook()
        chain = list(self.impersonation_chain) if isinstance(self.impersonation_chain, list | tuple) else \
            self.impersonation_chain
        trigger = CustomJobTrigger(job_name, self.poll_interval, self.gcp_conn_id, chain, hook.emulator,
                                   self.cancel_on_kill, hang_timeout=self.hang_timeout,
                                   checkpoint_dir=self._checkpoint_dir() if self.hang_timeout else None,
                                   checkpoint_marker=self.checkpoint_marker)
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
        from ..triggers.vertex_ai import job_summary

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
