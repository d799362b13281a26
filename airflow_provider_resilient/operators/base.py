"""The shell shared by the provider's operators around the pure supervisor (:mod:`..supervisor`).

This class carries out each command of the supervisor through the platform's typed backend
(:meth:`SupervisedOperator._backend`, :mod:`..backends`): submit an attempt (:meth:`SupervisedOperator._submit`:
find it by its labels, else look up the latest complete checkpoint and create it), watch one until it ends
(:meth:`SupervisedOperator._watch`: the backend's look, polled in the worker or deferred to the platform's
trigger), end one and wait for it (:meth:`SupervisedOperator._end_attempt`), end what a stopping run leaves live
(:meth:`SupervisedOperator._end_last`). A subclass holds its platform's arguments and specs, builds its backend,
and says how to defer and what success returns (:meth:`SupervisedOperator._finish`). It decides nothing. This class
runs the loop: it steps the supervisor, persists its state in Airflow's task state store after every step (so a
retried or cleared task continues), logs every decision, sleeps (or defers to a ``DateTimeTrigger``) through
backoffs, and raises ``AirflowFailException`` with the attempt history when the run fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator

from ..backends.base import AttemptSpec, Backend, airflow_task_states, task_instance
from ..compat import TRIGGER_ON_KILL, AirflowException, AirflowFailException, conf, run_state_store
from ..policy import Failure, FailureClass, Fallback, RetryPolicy, history_table, history_to_json
from ..specs.fallbacks import fallbacks_of
from ..supervisor import (
    EndAttempt,
    Fail,
    Phase,
    RunState,
    Sleep,
    Started,
    StateSchemaTooNew,
    Submit,
    SubmitFailed,
    Succeed,
    Watch,
    WokeUp,
    state_from_json,
    state_to_json,
    step,
)
from ..supervisor.machine import STATE_SCHEMA_VERSION, stored_schema_version
from ..supervisor.observe import Limits, Look, Verdict, WatchMemory, ledger_steps, observe
from ..supervisor.reconcile import Owner, other_writers


def policy_with_fallbacks(policy: RetryPolicy | None,
                          fallbacks: Sequence[Fallback | Mapping[str, Any]]) -> RetryPolicy:
    """``policy`` (default: the default rules) with ``fallbacks`` (Fallback objects or dicts) appended.

    Raises:
        TypeError: when ``policy`` is not a :class:`~..policy.RetryPolicy`.
        ValueError: when a fallback dict is not a valid :class:`~..policy.Fallback`.
    """
    if policy is not None and not isinstance(policy, RetryPolicy):
        raise TypeError(f"resilience_policy must be an airflow_provider_resilient.policy.RetryPolicy, got "
                        f"{type(policy).__name__}")
    policy = policy or RetryPolicy()
    extra = []
    for value in fallbacks:
        if isinstance(value, Fallback):
            extra.append(value)
            continue
        data = dict(value)
        if "on" in data:
            data["on"] = frozenset(FailureClass(c) for c in data["on"])
        extra.append(Fallback(**data))
    if not extra:
        return policy
    return replace(policy, fallbacks=policy.fallbacks + tuple(extra))


#: The shortest deferral, in seconds. Airflow 3.3 can fail a task whose trigger fires within seconds of
#: its deferral: the executor's late "success" for the process that deferred is processed after the resumed
#: try is already running, and the scheduler marks that try failed ("state mismatch"; apache/airflow#71580,
#: #72716, seen here under LocalExecutor with the default 5 s worker heartbeat). So a backoff shorter than
#: this is slept in the worker, and a trigger the operator defers to holds its event until this long after
#: the deferral (a job that ends sooner is reported up to this much later). 0 turns the guard off.
DEFAULT_MIN_DEFER_SECONDS = 10.0


def first_try_after_clear(context: Any, retries: int | None) -> bool:
    """Whether this try is the first one after a person cleared the task (not an Airflow retry, not the first
    try). Airflow 3.3 tells a try nothing else about why it started; its own rule
    (``RuntimeTaskInstance.get_first_reschedule_date``) is that the first try since the last Clear is number
    ``max_tries - retries + 1``: a Clear raises ``max_tries`` to ``try_number + retries``, a retry leaves it.

    Args:
        context: the task's context (its ``ti`` gives ``try_number`` and ``max_tries``).
        retries: the operator's ``retries``.
    """
    ti = context.get("ti")
    try_number, max_tries = getattr(ti, "try_number", None), getattr(ti, "max_tries", None)
    if not isinstance(try_number, int) or not isinstance(max_tries, int) or try_number <= 1:
        return False
    return try_number == max_tries - (retries or 0) + 1


def has_template(value: Any) -> bool:
    """Whether ``value`` (a string, or lists / tuples / dicts of them, keys included) holds a Jinja expression
    or statement: such an argument is checked after Airflow renders it, not when the DAG is parsed."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(has_template(k) or has_template(v) for k, v in value.items())
    if isinstance(value, list | tuple | set):
        return any(has_template(v) for v in value)
    return False


def mask_sensitive_env(entries: Sequence[tuple[str, str]]) -> list[str]:
    """Register with Airflow's secrets masker (``mask_secret``) the value of each ``(name, value)`` whose name
    Airflow deems sensitive -- its own rule for the keys of a dict it redacts (``[core] sensitive_var_conn_names``
    extends it) -- so that the task log and the rendered fields shown in the UI hold ``***`` instead. Returns
    the names masked."""
    from airflow.sdk._shared.secrets_masker import should_hide_value_for_key
    from airflow.sdk.log import mask_secret

    masked = []
    for name, value in entries:
        if value and should_hide_value_for_key(name):
            mask_secret(value, name)
            masked.append(name)
    return masked


def steps_to_json(reports: Sequence[Any]) -> dict[str, Any]:
    """Step reports (``goodput.StepReport``) as the task state store keeps them (key ``STEPS_KEY``):
    ``{"schema_version": 2, "reports": [[time, step], ...]}`` (the run's schema version,
    :data:`~..supervisor.STATE_SCHEMA_VERSION`)."""
    return {"schema_version": STATE_SCHEMA_VERSION, "reports": [[r.time, r.step] for r in reports]}


def steps_from_json(data: Any) -> list[Any]:
    """The inverse of :func:`steps_to_json`; also reads version 1, a bare ``[[time, step], ...]`` list (what the
    releases before ``schema_version`` wrote). None or empty: no reports.

    Raises:
        StateSchemaTooNew: written by a newer release of the provider.
        TypeError, ValueError: not step reports.
    """
    from ..goodput import StepReport

    if not data:
        return []
    if isinstance(data, dict):
        stored_schema_version(data)
        data = data.get("reports") or []
    return [StepReport(float(t), int(s)) for t, s in data]


#: How many of the newest complete checkpoints the run summary reads (one listing each): their steps join the
#: goodput ledger's step reports; the newest :data:`ADVICE_SAVES` of them judge the checkpoint interval.
LEDGER_SAVES = 100
ADVICE_SAVES = 20

#: The values of ``torn_checkpoints`` (see :class:`SupervisedOperator`).
TORN_CHECKPOINT_CHOICES = ("start_fresh", "fail")


#: Seconds ``on_kill`` waits for Airflow to tell the task instance's state before it keeps the job or node.
KILL_STATE_SECONDS = 10.0


def _in_task_runner() -> bool:
    """Whether this process runs a task under Airflow's supervisor (the task SDK's channel to it is set up)."""
    import sys

    runner = sys.modules.get("airflow.sdk.execution_time.task_runner")
    return runner is not None and getattr(runner, "SUPERVISOR_COMMS", None) is not None

class _OnlyTornCheckpoints(Exception):
    """A checkpoint directory holds saves but none complete, and the user asked to fail then."""


class SupervisedOperator(BaseOperator):
    """Base of operators whose attempts are run by the supervisor. Subclasses set ``STATE_KEY``.

    The arguments every platform's operator takes (documented here once; keyword only):

    Args:
        project_id: Google Cloud project id.
        checkpoint_dir: where the workload writes checkpoints (``gs://`` or a local path); searched for the
            latest complete checkpoint before every new attempt, which resumes from it.
        checkpoint_marker: a file the workload writes last in each checkpoint (e.g. ``COMMITTED``); when set,
            a checkpoint without it is never resumed from. Without it, a step directory counts as complete by
            its format's proof (DCP ``.metadata``, Orbax commit, TensorFlow state file and every shard,
            safetensors shards and index) or by the rule for plain directories (:mod:`..checkpoints.formats`).
        torn_checkpoints: what a new attempt does when ``checkpoint_dir`` holds saves but none is complete:
            ``"start_fresh"`` (default: from step 0, with a warning naming the newest torn save) or ``"fail"``
            (the run fails, as a permanent user error, so that a person looks before progress is thrown away).
        labels: extra labels of the job / node (the operator adds ``airflow-dag``, ``airflow-task``,
            ``airflow-run``, ``airflow-map-index`` and ``resilient-attempt``).
        network, service_account: the job's / node's.
        resilience_policy: a :class:`~..policy.RetryPolicy` for attempts (default: the default rules). Named so
            because ``retry_policy`` is Airflow's own argument, for task retries. Its ``queue_timeout_seconds``
            (default 1800 s, after ModelArts' "Training Fault Tolerance Check": "If the waiting time exceeds 30
            minutes, the training job will automatically exit") bounds how long an attempt may wait for capacity.
        fallbacks: alternative targets (:class:`~..policy.Fallback` or dicts) consumed on stockouts and queue
            timeouts, in order; shorthand for ``resilience_policy.fallbacks``. Each hop waits
            ``RetryPolicy.failover_backoff`` first (default 10 s doubling to 2 min, 50 % jitter).
        deferrable: wait in the triggerer (default ``[operators] default_deferrable``).
        poll_interval: seconds between looks at the running attempt (> 0; default 30).
        rerun_after_success: when a successful task is cleared, train again (default: return the earlier
            result without creating anything).
        gcp_conn_id: the Airflow connection for credentials (default ``google_cloud_default``, the Google
            provider's); it must exist, else the task fails naming it and the fix. Its extra ``emulator_host``
            (``host:port``) points every call at the emulator instead of Google Cloud. None: Application Default
            Credentials, no connection. The first line the task logs says which (the emulator's address, or the
            credentials used).
        impersonation_chain: service account(s) to impersonate.
        min_defer_seconds: the shortest deferral (see :data:`DEFAULT_MIN_DEFER_SECONDS`).
        checkpoint_interval_cap: the longest checkpoint interval handed to a new attempt (seconds; None: Vertex
            AI's "at least every four hours" only). From its second attempt on, once the run has seen an
            interruption and two saves, each attempt gets ``RESILIENT_CHECKPOINT_INTERVAL_SECONDS``: Young/Daly's
            optimum for the run's observed MTBF and save cost (:func:`~..goodput.handed_interval`), for the
            workload to honour.
        goodput_job_name: the ``job_name`` the workload records its goodput events under with Google's
            ml-goodput-measurement (``GoodputRecorder(job_name, logger_name, logging_enabled=True)``), the same
            across its restarts (templated, e.g. ``"{{ dag.dag_id }}-{{ ts_nodash }}"``). When set, the run's end
            reads those events from Cloud Logging with the package's own calculator (:mod:`..goodput.events`;
            needs ``ml-goodput-measurement`` and ``logging.logEntries.list``) and reports its goodput and badput
            in XCom ``goodput`` under ``workload_events`` and in the log, beside the estimate from checkpoints.
            A read that fails is a warning, never a failed task.
        goodput_logger_name: the workload's ``logger_name`` (a Cloud Logging log ID; default
            ``goodput_<goodput_job_name>``, as MaxText names it).

    Raises:
        ValueError: ``poll_interval`` <= 0, ``min_defer_seconds`` < 0, ``torn_checkpoints`` not one of
            :data:`TORN_CHECKPOINT_CHOICES`, or a ``goodput_logger_name`` without a ``goodput_job_name`` or not a
            log ID (at DAG parse time).
        TypeError: ``resilience_policy`` is not a :class:`~..policy.RetryPolicy`.
    """

    STATE_KEY = "resilient_state"
    #: Task-state-store key of the step reports seen so far ([[time, step], ...], the newest
    #: :attr:`MAX_STEP_REPORTS`), so that the ledger of a deferred or retried run sees all of them.
    STEPS_KEY = "resilient_step_reports"
    MAX_STEP_REPORTS = 2000
    #: How ``on_kill`` reads task instance states (``(dag_id, run_ids) -> {run_id: {task_key: state}}``): Airflow's
    #: API server through the task's supervisor; a test replaces it on an instance.
    read_task_states = staticmethod(airflow_task_states)
    resilience_policy: RetryPolicy
    deferrable: bool
    rerun_after_success: bool

    def __init__(self, *, project_id: str, checkpoint_dir: str | None = None, checkpoint_marker: str | None = None,
                 labels: Mapping[str, str] | None = None, network: str | None = None,
                 service_account: str | None = None, resilience_policy: RetryPolicy | None = None,
                 fallbacks: Sequence[Fallback | Mapping[str, Any]] = (),
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 poll_interval: float = 30.0, rerun_after_success: bool = False,
                 gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | Sequence[str] | None = None,
                 min_defer_seconds: float = DEFAULT_MIN_DEFER_SECONDS, torn_checkpoints: str = "start_fresh",
                 checkpoint_interval_cap: float | None = None, goodput_job_name: str | None = None,
                 goodput_logger_name: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.goodput_job_name = goodput_job_name
        self.goodput_logger_name = goodput_logger_name
        self._validate_goodput_names()
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval}")
        if checkpoint_interval_cap is not None and not checkpoint_interval_cap > 0:
            raise ValueError(f"{type(self).__name__}: checkpoint_interval_cap must be > 0 seconds, got "
                             f"{checkpoint_interval_cap}")
        self.checkpoint_interval_cap = checkpoint_interval_cap
        if torn_checkpoints not in TORN_CHECKPOINT_CHOICES:
            raise ValueError(f"{type(self).__name__}: torn_checkpoints must be one of "
                             f"{', '.join(map(repr, TORN_CHECKPOINT_CHOICES))}, got {torn_checkpoints!r}")
        self.torn_checkpoints = torn_checkpoints
        usable, self.fallback_problems = fallbacks_of(fallbacks)  # a malformed entry is named by _validate
        self.resilience_policy = policy_with_fallbacks(resilience_policy, usable)
        self.project_id = project_id
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_marker = checkpoint_marker
        # Anything but a mapping is kept as given, for the platform's validation to name (never a raw error here).
        self.labels: Any = dict(labels) if isinstance(labels, Mapping) else ({} if labels is None else labels)
        self.network = network
        self.service_account = service_account
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.rerun_after_success = rerun_after_success
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        if min_defer_seconds < 0:
            raise ValueError(f"{type(self).__name__}: min_defer_seconds must be >= 0 seconds, got {min_defer_seconds}")
        #: See :data:`DEFAULT_MIN_DEFER_SECONDS`.
        self.min_defer_seconds = float(min_defer_seconds)
        self._sleep: Callable[[float], Any] = time.sleep
        self._clock: Callable[[], float] = time.time

    def _validate_goodput_names(self) -> None:
        """``goodput_job_name`` / ``goodput_logger_name`` as given (a templated one is checked once rendered).

        Raises:
            ValueError: a logger name without a job name, a name that is not a non-empty string, or a logger name
                that is not a Cloud Logging log ID.
        """
        from ..goodput.events import LOG_ID_RE

        job, logger = self.goodput_job_name, self.goodput_logger_name
        name = type(self).__name__
        if logger is not None and job is None:
            raise ValueError(f"{name}: goodput_logger_name {logger!r} needs goodput_job_name (the job_name the "
                             "workload gives GoodputRecorder)")
        if job is not None and (not isinstance(job, str) or not job.strip()):
            raise ValueError(f"{name}: goodput_job_name must be a non-empty string, got {job!r}")
        if logger is not None and (not isinstance(logger, str) or
                                   not (has_template(logger) or LOG_ID_RE.fullmatch(logger))):
            raise ValueError(f"{name}: goodput_logger_name {logger!r} is not a Cloud Logging log ID: use letters, "
                             "digits and '/_-.', at most 512 characters")

    def _log_endpoint(self, hook: Any) -> None:
        """Say first, in the task's log, where the calls go: ``Using the Google API emulator at HOST (connection
        X)``, or Google Cloud with which credentials (:meth:`~..hooks.base.GoogleApiHook.endpoint_summary`).

        Raises:
            AirflowNotFoundException: the connection ``gcp_conn_id`` does not exist (the message names it and the
                fix), before anything is created.
        """
        self.log.info("%s", hook.endpoint_summary())

    def _fire_not_before(self) -> float:
        """Epoch seconds before which a trigger this task defers to must not fire (see
        :data:`DEFAULT_MIN_DEFER_SECONDS`)."""
        return self._clock() + self.min_defer_seconds

    # ------------------------------------------------------------------ subclass interface
    def _backend(self) -> Backend:
        """The platform's backend (:mod:`..backends`), built once from the operator's arguments: every side
        effect on a cloud resource goes through it, as the execution of a supervisor command."""
        raise NotImplementedError

    def _begin_watch(self, context: Any, state: RunState, job_name: str) -> None:
        """Before the first look at ``job_name``: links, what ``on_kill`` must end; may defer at once."""

    def _defer_watch(self, state: RunState, job_name: str) -> None:
        """Defer to the platform's trigger, which brings the task back (``execute_complete``) on a change."""
        raise NotImplementedError

    def _watch(self, context: Any, state: RunState, job_name: str) -> Any:
        """Carry out ``Watch``: look at the attempt every ``poll_interval`` seconds until a look reports an
        event; deferrable, wait in the platform's trigger between looks instead of in the worker. The only
        watch loop: what one look is, is the backend's (:meth:`_look`)."""
        self._begin_watch(context, state, job_name)
        while True:
            event = self._look(context, state, job_name)
            if event is not None:
                return event
            if self.deferrable:
                if not TRIGGER_ON_KILL:
                    self.log.warning(
                        "This Airflow's triggerer calls no trigger on_kill (new in Airflow 3.3): if this deferred "
                        "task is marked failed or success, or cleared, %s goes on running until the reconciler DAG "
                        "(airflow_provider_resilient.reconcile) releases it on its schedule", job_name)
                self._defer_watch(state, job_name)
            self._sleep(self.poll_interval)

    def _finish(self, context: Any, state: RunState, job_name: str) -> Any:
        """The task's return value after success."""
        raise NotImplementedError

    def _recover(self, context: Any, state: RunState) -> RunState:
        """The run to continue when the task state store holds none (phase new): a first try, or a store
        that was emptied (``[state_store] clear_on_success``, its retention, its REST API). A subclass that
        can see the resources it created may rebuild the run from them; the default starts afresh."""
        return state

    # ------------------------------------------------------------------ kills
    def _judge_kill(self) -> Any:
        """Whether ``on_kill`` should release this task's job or node: :func:`~..supervisor.reconcile.judge_task_kill`
        of the task instance's state, read from Airflow through the task process's supervisor in a thread bounded
        by :data:`KILL_STATE_SECONDS` (``on_kill`` may run in a signal handler that interrupted a call to the
        supervisor: then the read times out, and the state is unknown). Outside Airflow's task runner (no
        supervisor: ``on_kill`` called directly, a unit test) the kill is taken as asked. Never raises.

        Returns:
            a :class:`~..supervisor.reconcile.CancelJudgement`.
        """
        import concurrent.futures

        from ..supervisor.reconcile import UNKNOWN, CancelJudgement, judge_task_kill, owner_states

        owner = self.__dict__.get("_owner")
        reader = self.read_task_states
        if owner is None or (reader is airflow_task_states and not _in_task_runner()):
            return CancelJudgement(True, "on_kill was called outside Airflow's task runner")
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="resilient-kill-state")
        try:
            state = pool.submit(owner_states, [owner], reader).result(timeout=KILL_STATE_SECONDS)[owner]
        except Exception as exc:  # the API server down or busy, the supervisor's channel held: decide nothing
            self.log.warning("Cannot read the state of task instance %s: %s", owner, exc or type(exc).__name__)
            state = UNKNOWN
        finally:
            pool.shutdown(wait=False)
        return judge_task_kill(state)

    # ------------------------------------------------------------------ the commands, carried out by the backend
    def _task_instance(self, context: Any) -> Owner:
        return task_instance(self.dag_id, self.task_id, context["run_id"], self._map_index(context))

    def _submit(self, context: Any, state: RunState, action: Submit) -> Any:
        """Carry out ``Submit``: watch the resource the attempt already has (:meth:`~..backends.base.Backend.find`),
        else look up the latest complete checkpoint and create the attempt resuming from it (``RESILIENT_*``
        variables, :mod:`..specs.common`). Returns ``Submitted`` or ``SubmitFailed``.

        Raises:
            AirflowException: the checkpoints cannot be listed (never a silent restart from step 0; Airflow's
                task retries apply).
        """
        from ..specs.common import job_labels, resume_env
        from ..supervisor.reconcile import owner_env

        backend = self._backend()
        task = self._task_instance(context)
        index = action.fallback_index
        own = job_labels(task.dag_id, task.task_id, task.run_id, task.map_index, action.attempt)
        owner = owner_env(task.dag_id, task.task_id, task.run_id, task.map_index)
        spec = AttemptSpec(action.attempt, task, self.resilience_policy.fallbacks[index] if index >= 0 else None,
                           index if index >= 0 else -1, {**self.labels, **own}, own, owner, owner)
        found = backend.find(spec)
        if found is not None:
            return found
        location = self._checkpoint_location()
        if location and (others := other_writers(backend.live_owned(), task, location)):
            other, theirs = others[0], others[0].owner
            assert theirs is not None  # other_writers keeps only resources that name their task instance
            who = f"{other.name} of {theirs.dag_id}.{theirs.task_id} run {theirs.run_id}"
            self.log.error("Not submitting: %s writes checkpoints where this run would (%s)", who, location)
            return SubmitFailed(Failure(FailureClass.PERMANENT_USER_ERROR, backend.platform, message=(
                f"another run writes checkpoint_dir {location}: give each run its own (put {{{{ run_id }}}} in the "
                f"path) or stop that run -- {who}")), self._clock())
        try:
            checkpoint = self._latest_checkpoint(location, state.demoted) if location else None
        except _OnlyTornCheckpoints as torn:
            return SubmitFailed(Failure(FailureClass.PERMANENT_USER_ERROR, backend.platform, message=str(torn)),
                                self._clock())
        uri, step_ = (checkpoint.uri, checkpoint.step) if checkpoint else (None, None)
        saves = self._checkpoint_saves() if location and action.attempt > 1 and state.history else None
        if saves:
            self._note_saves(state, saves)
        resume = resume_env(attempt=action.attempt, checkpoint_dir=str(location), resume_uri=uri, resume_step=step_,
                            failure_class=action.failure_class, demoted=state.demoted,
                            checkpoint_interval=self._handed_interval(state, action.attempt, saves))
        return backend.submit(replace(spec, env={**spec.env, **resume}, resume_uri=uri, resume_step=step_))

    def _note_saves(self, state: RunState, saves: Sequence[Any]) -> None:
        """Note the run's complete checkpoints (``checkpoints.CheckpointSave``) as step reports for the goodput
        ledger, before a new attempt starts: a workload that keeps only its newest saves (Orbax
        ``max_to_keep``, a step-folder rotation) deletes the proof of an earlier attempt's progress, and the
        ledger would count that attempt's work as lost. Saves from before the run's first start and steps
        already noted at that time are left out; the reports are kept with the task state."""
        from ..goodput import StepReport

        started = [a.started_at for a in state.history if a.started_at is not None]
        if not started:
            return
        seen = {(r.time, r.step) for r in self._step_reports()}
        new = [StepReport(s.completed_at, s.step) for s in saves
               if s.completed_at >= min(started) and (s.completed_at, s.step) not in seen]
        if new:
            self.__dict__["_steps_seen"] = sorted([*self._step_reports(), *new], key=lambda r: r.time)

    def _handed_interval(self, state: RunState, attempt: int, saves: Sequence[Any] | None) -> float | None:
        """The checkpoint interval handed to attempt ``attempt`` (:func:`~..goodput.handed_interval` of the run's
        history and ``saves``, its newest complete checkpoints), logged with why; None for a first attempt,
        before an interruption, or when the saves could not be listed."""
        if attempt <= 1 or not state.history:
            return None
        from ..goodput import advise_checkpointing, handed_interval

        if not saves:
            return None
        advice = advise_checkpointing(state.history, saves[-ADVICE_SAVES:], end=self._clock())
        interval = handed_interval(advice, self.checkpoint_interval_cap)
        if interval is not None:
            self.log.info("Attempt %d: checkpoint every %.3g s (RESILIENT_CHECKPOINT_INTERVAL_SECONDS) -- %s",
                          attempt, interval, advice.summary())
        return interval

    def _latest_checkpoint(self, location: str, demoted: Collection[int] = ()) -> Any:
        """The newest complete checkpoint under ``location`` (:func:`~..checkpoints.scan_checkpoints`) that is not
        ``demoted`` (steps that would not load), or None. Saves that exist but are all torn are said loudly and
        follow ``torn_checkpoints``.

        Raises:
            AirflowException: the checkpoints cannot be listed (never a silent restart from step 0; Airflow's
                task retries apply).
            _OnlyTornCheckpoints: only torn saves, and ``torn_checkpoints="fail"``.
        """
        from ..checkpoints import scan_checkpoints

        try:
            scan = scan_checkpoints(location, marker=self.checkpoint_marker, exclude=demoted)
        except Exception as exc:  # cannot see the checkpoints: never silently restart from step 0
            raise AirflowException(f"cannot list checkpoints under {location}: {exc}") from exc
        if scan.latest is None and scan.torn:
            newest = scan.torn[0]
            message = (f"no complete checkpoint under {location}: {len(scan.torn)} torn save(s), the newest "
                       f"{newest.uri} (step {newest.step}: {newest.why})")
            if self.torn_checkpoints == "fail":
                self.log.error("%s: torn_checkpoints='fail' stops the run", message)
                raise _OnlyTornCheckpoints(
                    f"only torn checkpoints ({len(scan.torn)}) and torn_checkpoints='fail': repair or remove them, or "
                    f"set torn_checkpoints='start_fresh'; newest step {newest.step}: {newest.why} ({newest.uri})")
            self.log.warning("%s: starting from step 0 (torn_checkpoints='start_fresh')", message)
        return scan.latest

    def _look(self, context: Any, state: RunState, job_name: str) -> Any:
        """One look at the attempt (the backend's, judged by :meth:`_observe`): ``JobSucceeded`` /
        ``JobFailed`` when something happened, None while it just runs."""
        started = state.history[-1].started_at if state.history else None
        return self._backend().look(job_name, lambda look, limits: self._observe(context, state, look, limits),
                                    started)

    def _end_attempt(self, context: Any, state: RunState, job_name: str) -> Any:
        """Carry out :class:`~..supervisor.EndAttempt`: end ``job_name`` (cancel the job, delete the node) and
        wait until the platform says it has ended; ``Ended`` (``succeeded`` when it finished successfully
        before the end took effect).

        Raises:
            AirflowException: it has not ended in the backend's time (a task retry ends it again).
        """
        try:
            return self._backend().end(job_name)
        except TimeoutError as exc:
            raise AirflowException(str(exc)) from None

    def _end_last(self, context: Any, state: RunState, job_name: str) -> None:
        """Carry out ``Fail.end`` / ``Succeed.end``: the run stops and ``job_name`` is still live; end it
        (cancel the job, delete the node) before the task ends.

        Raises:
            AirflowException: it has not ended in the backend's time.
        """
        try:
            self._backend().release(job_name)
        except TimeoutError as exc:
            raise AirflowException(str(exc)) from None

    # ------------------------------------------------------------------ the loop
    def _start(self, context: Any) -> Any:
        state = self._load(context)
        if state.phase == Phase.NEW:
            state = self._recover(context, state)
        cleared = first_try_after_clear(context, self.retries)
        if state.phase != Phase.NEW:
            self.log.info("Found this task's run in phase %s with %d attempt(s): continuing it%s", state.phase,
                          len(state.history), " (this try follows a Clear)" if cleared else "")
        return self._drive(context, state, Started(self._clock(), rerun=self.rerun_after_success, cleared=cleared))

    def _drive(self, context: Any, state: RunState, event: Any) -> Any:
        seed = f"{self.dag_id}/{self.task_id}/{context['run_id']}/{self._map_index(context)}"
        while True:
            if (memory := self.__dict__.pop("_observed", None)) is not None:
                state = state.observed(memory)  # what the last action's looks remembered
            before = sum(len(a.incidents) for a in state.history)
            state, action = step(state, event, self.resilience_policy, seed)
            self._save(context, state)
            if sum(len(a.incidents) for a in state.history) > before:
                incident = state.history[-1].incidents[-1]
                self.log.warning("Attempt %d (%s): %s -> %s", state.history[-1].number,
                                 state.history[-1].resource_name or "not created", incident.failure.summary(),
                                 incident.decision.reason)
            if isinstance(action, Submit):
                event = self._submit(context, state, action)
            elif isinstance(action, Watch):
                event = self._watch(context, state, action.job_name)
            elif isinstance(action, EndAttempt):
                self.log.info("%s: ending %s; what follows starts once it has ended", action.reason,
                              action.job_name)
                event = self._end_attempt(context, state, action.job_name)
            elif isinstance(action, Sleep):
                self.log.info("Next step in %.1f s", action.seconds)
                if self.deferrable and action.seconds > 0 and action.seconds >= self.min_defer_seconds:
                    self._defer_for(action.seconds)
                self._sleep(action.seconds)
                event = WokeUp(self._clock())
            elif isinstance(action, Succeed):
                self._log_history(state)
                if action.end:
                    self._end_last(context, state, action.job_name)
                result = self._finish(context, state, action.job_name)
                self._push_history(context, state)
                return result
            elif isinstance(action, Fail):
                self._log_history(state)
                self._push_history(context, state)
                if action.end:
                    self._end_last(context, state, action.end)
                raise AirflowFailException(action.message)

    def _defer_for(self, seconds: float) -> None:
        """Free the worker slot for ``seconds``; the operator's ``execute_complete`` continues."""
        from airflow.providers.standard.triggers.temporal import DateTimeTrigger

        moment = datetime.fromtimestamp(self._clock(), tz=UTC) + timedelta(seconds=seconds)
        self.defer(trigger=DateTimeTrigger(moment=moment), method_name="execute_complete")

    # ------------------------------------------------------------------ state and XCom
    @staticmethod
    def _map_index(context: Any) -> int:
        value = getattr(context.get("ti"), "map_index", None)
        return -1 if value is None else int(value)  # 0 is a map index; None / -1: not mapped

    def _load(self, context: Any) -> RunState:
        self.__dict__["_owner"] = self._task_instance(context)  # what on_kill asks Airflow about
        store = run_state_store(context)
        if store is None:
            self.log.warning("No task state store and no task instance in the context: a retried task finds its "
                             "run only from the platform")
            return getattr(self, "_memory_state", RunState())
        self._load_steps(context)
        try:
            return state_from_json(store.get(self.STATE_KEY))
        except StateSchemaTooNew as exc:  # a retry on an upgraded worker reads it: not a permanent failure
            raise AirflowException(f"{self.STATE_KEY!r}: {exc}") from exc
        except ValueError as exc:
            raise AirflowFailException(f"the stored state under {self.STATE_KEY!r} is unreadable: {exc}") from exc

    def _save(self, context: Any, state: RunState) -> None:
        self._memory_state = state
        store = run_state_store(context)
        if store is not None:
            store.set(self.STATE_KEY, state_to_json(state))
            steps = self._step_reports()
            if len(steps) != self.__dict__.get("_steps_stored", 0):  # only when there are new ones
                store.set(self.STEPS_KEY, steps_to_json(steps[-self.MAX_STEP_REPORTS:]))
                self.__dict__["_steps_stored"] = len(steps)

    # ------------------------------------------------------------------ the observer
    def _watch_memory(self, state: RunState) -> WatchMemory:
        """What the observer remembers of the watched attempt: the newest of this process's looks, else the
        stored state's (a deferral or a task retry continues the clocks)."""
        memory: WatchMemory = self.__dict__.get("_observed", state.watch)
        return memory

    def _observe(self, context: Any, state: RunState, look: Look, limits: Limits) -> Verdict:
        """Judge one look with the pure observer (:func:`~..supervisor.observe.observe`) and keep its memory
        in the run state, saved at once when it changed (a deferral or a kill right after keeps it); new steps
        go to the goodput ledger."""
        before = self._watch_memory(state)
        memory, verdict = observe(before, look, self._clock(), limits)
        self.__dict__["_observed"] = memory
        if memory != before:  # one write per change, not per look (each is a call to Airflow's API server)
            self._save(context, state.observed(memory))
        for at, step_ in ledger_steps(verdict, memory):  # the run's lead (worker 0, the logged steps)
            self._note_step(at, step_)
        return verdict

    def _log_history(self, state: RunState) -> None:
        """The attempt history as one aligned table block in the task log (readable in the UI's log view)."""
        self.log.info("Attempt history:\n%s", "\n".join(history_table(state.history)))

    def _note_step(self, time_: float, step_: int) -> None:
        """Record that the workload was at ``step_`` at ``time_`` (seconds since the epoch), for the ledger."""
        from ..goodput import StepReport

        self.__dict__.setdefault("_steps_seen", []).append(StepReport(time_, step_))

    def _note_trigger_steps(self, context: Any, state: RunState, event: Any) -> None:
        """Note the step reports a trigger's event carries (``event["steps"]``, ``[[time, step], ...]``) for
        the goodput ledger, as a polling operator notes the step of each look, and save them at once (a
        resumed look that defers again saves nothing). A step equal to the last one noted in the same attempt
        is not noted again: it is no new progress (a new trigger records the step it first sees, often the
        one its predecessor saw last), and the ledger would count the time between the two sightings as a
        stall. An unreadable report only costs the ledger a point."""
        reported = event.get("steps") if isinstance(event, dict) else None
        if not reported:
            return
        started = state.history[-1].started_at if state.history else None
        seen = self._step_reports()
        last = (seen[-1].time, seen[-1].step) if seen else None
        noted = 0
        for item in reported:
            try:
                at, step_ = float(item[0]), int(item[1])
            except (TypeError, ValueError, IndexError):
                continue
            if last is not None and last[1] == step_ and (started is None or last[0] >= started):
                continue
            self._note_step(at, step_)
            last, noted = (at, step_), noted + 1
        if noted:
            self._save(context, state)

    def _checkpoint_saves(self) -> list[Any] | None:
        """The newest :data:`LEDGER_SAVES` complete checkpoints (``checkpoints.CheckpointSave``, oldest first),
        or None without a checkpoint location or when they cannot be listed (the summary is a nicety: a failed
        listing must not fail the task)."""
        location = self._checkpoint_location()
        if not location:
            return None
        from ..checkpoints import list_checkpoint_saves

        try:
            return list_checkpoint_saves(location, marker=getattr(self, "checkpoint_marker", None),
                                         max_saves=LEDGER_SAVES)
        except Exception as exc:
            self.log.warning("Could not list the checkpoints for the ledger and the interval advice: %s", exc)
            return None

    def _step_reports(self) -> list[Any]:
        """Step observations made while watching (``goodput.StepReport``), this run's, oldest first."""
        return list(self.__dict__.get("_steps_seen", []))

    def _load_steps(self, context: Any) -> None:
        """Bring back the step reports of earlier processes of this task (deferrals, task retries)."""
        store = run_state_store(context)
        if store is None or "_steps_seen" in self.__dict__:
            return
        stored = store.get(self.STEPS_KEY)
        try:
            saved = steps_from_json(stored)
        except StateSchemaTooNew as exc:
            raise AirflowException(f"{self.STEPS_KEY!r}: {exc}") from exc
        except (TypeError, ValueError):
            saved = []  # unreadable reports only cost the ledger its detail
        self.__dict__["_steps_seen"] = saved
        current = not stored or (isinstance(stored, dict) and stored.get("schema_version") == STATE_SCHEMA_VERSION)
        self.__dict__["_steps_stored"] = len(saved) if current else -1  # an older form is written anew at the next save

    def _workload_goodput(self) -> dict[str, Any]:
        """The workload's own goodput events (``goodput_job_name``), read with ml-goodput-measurement's calculator
        through the connection's Cloud Logging client: ``{"workload_events": {...}}`` (logged), or
        ``{"workload_events_error": "..."}`` when they cannot be read (a warning: the estimate stands)."""
        from ..goodput.events import read_workload_goodput
        from ..hooks.base import GoogleApiHook
        from ..logging_clients import logging_client

        job, logger = str(self.goodput_job_name), self.goodput_logger_name
        try:
            hook = GoogleApiHook(self.gcp_conn_id, self.impersonation_chain)
            client = logging_client(self.project_id, credentials=hook.credentials, emulator=hook.emulator)
            figures = read_workload_goodput(client, job, logger)
        except Exception as exc:  # the run's outcome stands; only this report is missing
            self.log.warning("Could not read the workload's goodput events (goodput_job_name %r): %s; the goodput "
                             "above is estimated from checkpoints", job, exc)
            return {"workload_events_error": f"{type(exc).__name__}: {exc}"}
        self.log.info("Goodput from the workload's ml-goodput-measurement events: %s", figures.summary())
        return {"workload_events": figures.as_dict()}

    def _checkpoint_location(self) -> str | None:
        """Where the workload writes its checkpoints: every new attempt resumes from the latest complete one
        there, and the run summary judges its saves; None: none (a fresh start each time, no advice)."""
        return None

    def _push_history(self, context: Any, state: RunState) -> None:
        """Push the attempt history and the run's goodput ledger (with the checkpoint-interval advice) to
        XCom, and log both as the run's summary."""
        from ..goodput import advise_checkpointing, goodput_ledger

        context["ti"].xcom_push(key="attempt_history", value=history_to_json(state.history))
        if any(a.started_at is not None for a in state.history):
            now = self._clock()
            saves = self._checkpoint_saves()
            ledger = goodput_ledger(state.history, self._step_reports(), end=now, saves=saves or ())
            summary: dict[str, Any] = dict(ledger.as_dict())
            self.log.info("Goodput: %s", ledger.summary())
            self.log.info("Badput as ml-goodput-measurement names it (%% of the run): %s", ", ".join(
                f"{kind} {share:.1f}" for kind, share in ledger.badput_breakdown().items()))
            if saves is not None:
                advice = advise_checkpointing(state.history, saves[-ADVICE_SAVES:], end=now)
                self.log.info("Checkpointing: %s", advice.summary())
                summary["checkpoint_advice"] = {**advice.as_dict(), "summary": advice.summary()}
            if self.goodput_job_name:
                summary.update(self._workload_goodput())
            context["ti"].xcom_push(key="goodput", value=summary)
