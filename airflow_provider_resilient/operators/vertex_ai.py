"""``ResilientCustomJobOperator``: a Vertex AI CustomJob that finishes despite crashes, stockouts,
internal errors, lost workers and hangs.

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

Never two attempts at once: a job judged queued past ``RetryPolicy.queue_timeout_seconds`` or
hung is still live when the supervisor hears of it (``JobFailed(live=True)``); the supervisor commands its
end (``EndAttempt``: cancel it and wait until the platform reports it ended) before the backoff and the
next attempt, or ends it as the run stops (``Fail.end``). Neither this shell nor its trigger decides that.

Importing this module imports no Google library.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any

from ..backends.base import AttemptSpec
from ..links.vertex_ai import VertexAICustomJobLink, VertexAICustomJobLogsLink, push_links
from ..policy import history_to_json
from ..specs.common import SpecError
from ..specs.messages import message_as_dict
from ..specs.preflight import Preflight, preflight_of, watchdog_args, watchdog_problems
from ..specs.vertex import (
    build_custom_job,
    env_entries,
    preflight_problems,
    validate_custom_job,
)
from ..supervisor import (
    RunState,
)
from .arguments import flag_problems, has_template, mask_sensitive_env, seconds_problems
from .base import SupervisedOperator
from .job_kinds import CustomJobKind

log = logging.getLogger(__name__)

#: Key of the supervisor's state in the task state store. Renaming it breaks in-flight runs.
STATE_KEY = "resilient_custom_job"


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
            hung (the failure policy's ``hang`` class: no checkpoint progress for a set time is treated as a
            transient crash, sharing its budget): the job is cancelled and resubmitted from the latest
            checkpoint. Set it to a few checkpoint intervals (more than ``poll_interval``); None (default)
            never declares a hang -- the platform's ``scheduling.timeout`` is then the only limit. Deferred,
            the trigger watches for it (and only then lists checkpoints: a deferred run has step reports only
            with a hang_timeout). A workload that logs its steps (lines like ``step 120`` on stdout, which
            Vertex AI ships to Cloud Logging) is watched by them instead, once it has logged one (see
            ``read_step_logs``): then ``hang_timeout`` may be shorter than the checkpoint interval -- a few
            minutes of no new step instead of a few checkpoint intervals of no new save.
        restart_timeout: seconds a replica that Vertex AI restarts in place (a lost worker, a Spot VM reclaimed:
            the job stays RUNNING) may take from its exit to its next logged step -- its container's start, the
            checkpoint's restore, the first step -- before the job counts as hung; meanwhile ``hang_timeout`` is
            not applied. Seen from the service's ``The replica ... exited with a non-zero status`` entry in the
            job's Cloud Logging logs ("Understand the custom training service",
            https://cloud.google.com/vertex-ai/docs/training/understanding-training-service), read with the steps
            (``read_step_logs``), or, for a command under the worker runner (``checkpoint_on_notice``,
            ``preflight``), from the runner's line at each start of the container (a job the platform retries after
            an internal error logs no exit; a bare command's such retry must fit in ``hang_timeout``). It also
            bounds an attempt's start, from its first look RUNNING to its first logged step. With it,
            ``hang_timeout`` can be a few step times, so a real hang is caught sooner, while a restore may take
            minutes (Kubernetes' startup probe beside its liveness probe). None (default): ``hang_timeout``
            throughout. Must be more than ``hang_timeout``.
        read_step_logs: with a ``hang_timeout``, read the chief replica's (``workerpool0-0``) newest ``step N``
            line from Cloud Logging every ``hang_timeout / 6`` seconds (default True). Needs
            ``logging.logEntries.list`` (``roles/logging.viewer``) for the connection's credentials; without
            it a warning says so once and the checkpoints alone are watched.
        cancel_on_kill: cancel the live job when the task is killed (``on_kill`` / trigger ``on_kill``).
        preflight: fault-tolerance checks on every replica (:class:`~..specs.preflight.Preflight`, after ModelArts'
            "Training Fault Tolerance Check"; ``True`` for its thresholds, a dict of its fields for others): each
            container's command runs under the worker runner (:func:`~..specs.preflight.wrap_container_command`;
            the image needs ``python3``), which checks ``dns`` (the job's hosts from ``CLUSTER_SPEC``), ``disk-size
            root/shm/cache``, ``ulimit`` and, with NVIDIA accelerators, ``gpu-check`` before the command and every
            ``hardware_check_seconds`` while it runs. A failed check exits 78: ``preflight_failure``, a new job on
            new machines (the policy's ``preflight`` budget, 0 to 3). Default ``False`` -- ModelArts' default too:
            the wrapper replaces the container's command line, and every pool needs a ``container_spec.command``
            (an image's ENTRYPOINT cannot be wrapped).
        checkpoint_on_notice: save a checkpoint on a replica's preemption notice (default ``False``). A Spot VM
            (``strategy="SPOT"``) is reclaimed with a notice: the ACPI G2 Soft Off, the guest's SIGTERM, 30 seconds
            before the machine stops (Compute Engine, "Preemptible VM instances", preemption process,
            https://cloud.google.com/compute/docs/instances/preemptible#preemption-process); Vertex AI then
            restarts the worker on another VM ("Understand the custom training service"). With ``True`` each
            container's command runs under the worker runner, as with ``preflight`` (the image needs ``python3``
            and every pool a ``container_spec.command``), and the helper ``resilient_checkpoint``
            (:mod:`~..worker.checkpoint_request`) is on the command's ``PYTHONPATH``: on SIGTERM the runner asks
            the workload for a checkpoint (a request ``notice-<time>``) before it forwards the signal, and the
            workload that calls ``save_if_requested`` once per step saves at once, so the restarted worker resumes
            from the step it reached instead of the last periodic checkpoint. A step and a save must fit in the
            30 s; a longer save is cut off and the periodic checkpoint stands.
        worker_hang_timeout: seconds a replica's command may go without a ``step N`` line on stdout before the worker
            runner on the replica aborts it (SIGABRT, exit 134; the runner's liveness watchdog, as PyTorch's NCCL
            watchdog tears down a process whose collective timed out), and Vertex AI retries the job, as after any
            exit it names potentially transient, SIGABRT among them ("Understand the custom training service",
            https://cloud.google.com/vertex-ai/docs/training/understanding-training-service): a hang costs this many
            seconds and a restart instead of ``hang_timeout``, the logs' delay, a poll and a new job. Before a
            command's first step line the allowance is ``restart_timeout`` (else ``hang_timeout``; neither: no watch
            then). The chief's command (the first pool, ``workerpool0``, whose steps the provider reads) runs under
            the worker runner, as with ``preflight`` (the image needs ``python3`` and the pool a
            ``container_spec.command``); a collective that never returns stops the chief with every other rank. Set
            it above the longest gap between two step lines (a step and a checkpoint save, an evaluation); it must be
            less than ``hang_timeout``, which stays the fallback for a hang of the whole machine (the runner frozen
            too). None (default): no watchdog.
        checkpoint_dir: as on :class:`~.base.SupervisedOperator`; default ``<base_output_dir>/checkpoints/``
            (Vertex AI's ``AIP_CHECKPOINT_DIR``).
        resilience_policy: as on :class:`~.base.SupervisedOperator`. On Vertex AI its ``queue_timeout_seconds``
            bounds how long an attempt may stay QUEUED or PENDING (Vertex AI, "Understand the custom training
            service": a job may wait there until quota frees), counted from the job's ``create_time``: past it the
            job is cancelled, and once it has ended the ``queue-timeout`` rule fails over to the next fallback or
            fails the task with a message naming the queue timeout.
        poll_interval: as on :class:`~.base.SupervisedOperator`: seconds between status reads while an attempt
            runs. Each read also looks for a new complete checkpoint (two listings): the steps seen feed the
            goodput ledger.

    ``project_id``, ``checkpoint_marker``, ``labels``, ``network``, ``service_account``, ``fallbacks``,
    ``deferrable``, ``rerun_after_success``, ``gcp_conn_id``, ``impersonation_chain`` and ``min_defer_seconds``
    are the arguments every operator of the provider shares, documented once on
    :class:`~.base.SupervisedOperator`.

    Returns (and pushes to XCom as ``return_value``): ``{"job_name", "state", "checkpoint": {"uri", "step"}
    | None, "attempts": [...]}``; the attempt history is also pushed as ``attempt_history``.

    Raises:
        AirflowFailException: a bad argument -- when the DAG is parsed for literal arguments, after rendering for
            templated ones; before anything is submitted; one line per problem naming the field, the value and
            the fix (:func:`~..specs.vertex.validate_custom_job`) -- a permanent failure, or a spent budget --
            with the attempt history as the message. Airflow does not retry it.
        AirflowException: an infrastructure error of Airflow's or Google's side (e.g. the checkpoint bucket
            cannot be read): Airflow's task retries apply, and the retried task reattaches.
    """

    STATE_KEY = STATE_KEY
    PLATFORM = "vertex_ai"
    template_fields: Sequence[str] = ("project_id", "region", "display_name", "worker_pool_specs", "base_output_dir",
                                      "checkpoint_dir", "labels", "service_account", "network", "impersonation_chain",
                                      "goodput_job_name", "goodput_logger_name")
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
        restart_timeout: float | None = None,
        read_step_logs: bool = True,
        cancel_on_kill: bool = True,
        preflight: Preflight | Mapping[str, Any] | bool | None = False,
        checkpoint_on_notice: bool = False,
        worker_hang_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
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
        self.restart_timeout = restart_timeout
        self.worker_hang_timeout = worker_hang_timeout
        self.read_step_logs = read_step_logs
        self.cancel_on_kill = cancel_on_kill
        self.preflight = preflight
        self.checkpoint_on_notice = checkpoint_on_notice
        self._live_job: str | None = None
        # Literal arguments are checked as the DAG is parsed; templated ones after rendering, in execute.
        self._validate(skip={name for name in self.template_fields if has_template(getattr(self, name))})

    # ------------------------------------------------------------------ Airflow entry points
    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Render as Airflow does, then register with Airflow's secrets masker the value of every worker pool
        environment entry whose name Airflow deems sensitive (``HF_TOKEN``, ``DB_PASSWORD``, ``API_KEY`` ...):
        the ``{"name", "value"}`` shape hides the name from the masker's own walk of dicts, so the rendered
        fields the UI shows and the task log would hold the value. Runs before Airflow stores the rendered
        fields; a ``{name: value}`` dict (the TPU operator's ``env``) is masked by Airflow itself."""
        super().render_template_fields(context, jinja_env)
        mask_sensitive_env(env_entries(self.worker_pool_specs))

    def execute(self, context: Any) -> Any:
        self._validate()
        self._log_endpoint(self._hook())
        self.log.info("%s in %s; checkpoints: %s", self.display_name, self.region, self._checkpoint_dir())
        return self._start(context)

    def _resumed(self, context: Any, state: RunState, event: Any) -> Any:
        """The CustomJobTrigger's event (:class:`~..supervisor.watch_event.WatchEvent`): the job it saw end
        (``terminal``) or judged failed while live (``hang``, ``queue_timeout``: the supervisor commands its end),
        with the observer's memory (``watch``) going on; anything else (``error``: it could not read the job; no
        event) -> one GetCustomJob here."""
        summary = self._judged_summary(event)
        if summary is None:
            summary = self._job_summary(self._hook().get_job(state.job_name))
        return self._outcome(summary)

    def _live_resources(self) -> list[Any]:
        """The job this process watches (kept without ``cancel_on_kill``)."""
        from ..backends.vertex import live_resources

        return live_resources(self._live_job, self.cancel_on_kill)

    # ------------------------------------------------------------------ the shell
    def _kind(self) -> Any:
        """What each attempt submits (:mod:`.job_kinds`): a CustomJob."""
        return CustomJobKind()

    def _make_backend(self) -> Any:
        """The run's backend, as its kind builds it (:meth:`_kind`)."""
        return self._kind().backend(self)

    def _resumes_run_checkpoints(self) -> bool:
        return bool(self._kind().resumes_run_checkpoints)

    def _checkpoint_saves(self) -> list[Any] | None:
        """The run's newest complete checkpoints, when its kind keeps the run's ledger (a study's trials are many
        lines of progress, not the run's one: its ledger counts time only)."""
        return super()._checkpoint_saves() if self._kind().keeps_run_ledger else None

    def _push_history(self, context: Any, state: RunState) -> None:
        """The attempt history and, when the kind keeps the run's ledger, the goodput ledger (a study's goodput is
        its trial time kept: ``trial_seconds`` of the result and of XCom ``study``)."""
        if self._kind().keeps_run_ledger:
            super()._push_history(context, state)
        else:
            context["ti"].xcom_push(key="attempt_history", value=history_to_json(state.history))

    def _custom_job(self, spec: AttemptSpec) -> dict[str, Any]:
        """The CustomJob body of one attempt (:func:`~..specs.vertex.build_custom_job`): the operator's pools
        and scheduling, the attempt's labels and ``RESILIENT_*`` environment, on its fallback."""
        from ..worker import helper_source, runner_source  # read only when the runner wraps the command

        checks, notice = preflight_of(self.preflight), self.checkpoint_on_notice is True
        watchdog = watchdog_args(self.worker_hang_timeout, self.restart_timeout or self.hang_timeout)
        return build_custom_job(
            display_name=self.display_name, worker_pool_specs=self._pools(), labels=dict(spec.labels),
            base_output_dir=self.base_output_dir, scheduling=self._scheduling(), service_account=self.service_account,
            network=self.network, fallback=spec.fallback, env=dict(spec.env), preflight=checks,
            runner_source=runner_source() if checks or notice or watchdog else "", checkpoint_on_notice=notice,
            helper_source=helper_source() if notice else "", watchdog=watchdog)

    def _recover(self, context: Any, state: RunState) -> RunState:
        """Rebuild the run from this task instance's jobs when the task state store holds none
        (:meth:`~..backends.vertex.VertexCustomJobBackend.rebuild`); none: ``state`` unchanged (a first try)."""
        return self._backend().rebuild(self._task_instance(context), self.rerun_after_success) or state

    def _begin_watch(self, context: Any, state: RunState, job_name: str) -> None:
        """Push the job's links (every try starts with no XCom: a created, reattached or resumed job gets them
        again) and, deferrable, defer at once: the trigger makes the first look."""
        self._backend().known_absent = None
        push_links(context, job_name)
        self._live_job = job_name
        if self.deferrable:
            self._defer_watch(state, job_name)

    def _outcome(self, summary: Mapping[str, Any]) -> Any:
        """What the job of ``summary`` (a trigger's, or a look's) means to the supervisor
        (:func:`~..supervisor.vertex_look.job_event`)."""
        return self._backend().event(summary)

    def _defer_watch(self, state: RunState, job_name: str) -> None:
        """Wait in a :class:`~..triggers.vertex_ai.CustomJobTrigger` until the job ends or is judged failed."""
        from ..triggers.vertex_ai import CustomJobTrigger

        hook = self._hook()
        from ..clients import serializable_chain

        chain = serializable_chain(self.impersonation_chain)
        trigger = CustomJobTrigger(job_name, self.poll_interval, self.gcp_conn_id, chain, hook.emulator,
                                   self.cancel_on_kill, hang_timeout=self.hang_timeout,
                                   restart_timeout=self.restart_timeout,
                                   checkpoint_dir=self._checkpoint_dir() if self.hang_timeout else None,
                                   checkpoint_marker=self.checkpoint_marker,
                                   read_step_logs=bool(self.read_step_logs and self.hang_timeout),
                                   queue_timeout=self.resilience_policy.queue_timeout_seconds,
                                   fire_not_before=self._fire_not_before(),
                                   watch=self._watch_memory(state).to_json(), event_topic=self.event_topic)
        self.defer(trigger=trigger, method_name="execute_complete")

    def _finish(self, context: Any, state: RunState, job_name: str) -> dict[str, Any]:
        """The task's result, as the kind says (:meth:`~.job_kinds.CustomJobKind.finish`)."""
        self._live_job = None
        result: dict[str, Any] = self._kind().finish(self, context, state, job_name)
        return result

    # ------------------------------------------------------------------ helpers
    def _hook_emulator(self) -> str | None:
        return self._hook().emulator  # type: ignore[no-any-return]

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

    def _pools(self) -> Any:
        """The worker pools as dicts (proto messages converted); anything but a list or tuple as given, for
        the validation to name."""
        pools = message_as_dict(self.worker_pool_specs)
        return [message_as_dict(p) for p in pools] if isinstance(pools, list | tuple) else pools

    def _scheduling(self) -> dict[str, Any]:
        return {"timeout": self.timeout, "restart_job_on_worker_restart": self.restart_job_on_worker_restart or None,
                "strategy": self.strategy.upper() if self.strategy else None,
                "max_wait_duration": self.max_wait_duration, "disable_retries": self.disable_retries or None}

    def _validate(self, skip: Collection[str] = ()) -> None:
        """:func:`~..specs.vertex.validate_custom_job` and :func:`~..specs.vertex.preflight_problems` of the
        arguments, every problem at once.

        Raises:
            AirflowFailException: one line per problem (but those of ``skip``: templated arguments, judged after
                rendering), naming the field, the value and the fix.
        """
        self._refuse(self._problems(), skip)

    def _problems(self) -> list[SpecError]:
        """Every problem of the arguments (empty: none), templated ones included."""
        problems = [*self._common_problems(),
                    *preflight_problems(self._pools(), self.preflight, self.checkpoint_on_notice,
                                        self.worker_hang_timeout),
                    *seconds_problems("hang_timeout", self.hang_timeout, optional=True),
                    *watchdog_problems(self.worker_hang_timeout, self.hang_timeout),
                    *seconds_problems("restart_timeout", self.restart_timeout, optional=True),
                    *flag_problems("read_step_logs", self.read_step_logs),
                    *flag_problems("cancel_on_kill", self.cancel_on_kill), *self._kind().problems(self)]
        hang, poll = self.hang_timeout, self.poll_interval
        if (not seconds_problems("hang_timeout", hang) and not seconds_problems("poll_interval", poll)
                and hang <= poll):
            problems.append(SpecError("hang_timeout", f"{self.hang_timeout!r} must be more than poll_interval "
                                                      f"({self.poll_interval} s): a hang is judged between looks"))
        restart = self.restart_timeout
        if restart is not None and not seconds_problems("restart_timeout", restart):
            if hang is None or not self.read_step_logs:
                problems.append(SpecError("restart_timeout", "needs hang_timeout and read_step_logs=True: a replica's "
                                                             "restart is seen in the logs read with its steps"))
            elif not seconds_problems("hang_timeout", hang) and restart <= hang:
                problems.append(SpecError("restart_timeout", f"{restart!r} must be more than hang_timeout ({hang} s): "
                                                             "it allows a restore that a step time does not"))
        if not self.checkpoint_dir and not self.base_output_dir:
            problems.append(SpecError("checkpoint_dir", "set checkpoint_dir or base_output_dir: new attempts "
                                                        "resume from the checkpoints written there"))
        try:
            validate_custom_job(project_id=self.project_id, region=self.region, display_name=self.display_name,
                                worker_pool_specs=self._pools(), base_output_dir=self.base_output_dir,
                                labels=self.labels, strategy=self.strategy, max_wait_duration=self.max_wait_duration,
                                timeout=self.timeout, fallbacks=self.resilience_policy.fallbacks,
                                checkpoint_dir=self.checkpoint_dir,
                                extra_regions=os.environ.get("RESILIENT_EXTRA_REGIONS", ""),
                                service_account=self.service_account, fallback_problems=self.fallback_problems)
        except SpecError as exc:
            problems.insert(0, exc)
        return problems


__all__ = ["STATE_KEY", "ResilientCustomJobOperator"]
