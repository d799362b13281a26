"""The shell shared by the provider's operators around the pure supervisor (:mod:`..supervisor`).

:class:`SupervisedOperator` runs the loop: it steps the supervisor, keeps its state in Airflow's task state store
after every step (:mod:`.run_store`: a retried or cleared task continues), logs every decision, and carries out
each command through the platform's typed backend (:mod:`..backends`): submit an attempt (:mod:`.launch`), watch it
(the backend's look, polled in the worker or deferred to the platform's trigger), end it and wait, end what a
stopping run leaves live; it sleeps (or defers to a ``DateTimeTrigger``) through backoffs and raises
``AirflowFailException`` with the attempt history when the run fails. A subclass holds its platform's arguments and
specs, builds its backend, says how to defer and what success returns. It decides nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator

from ..backends.base import Backend, airflow_task_states, task_instance
from ..compat import TRIGGER_ON_KILL, AirflowException, AirflowFailException, conf
from ..policy import Fallback, RetryPolicy
from ..specs.common import SpecError
from ..specs.fallbacks import fallbacks_of
from ..supervisor import (
    EndAttempt,
    Fail,
    Phase,
    RunState,
    Sleep,
    Started,
    Submit,
    Succeed,
    Watch,
    WokeUp,
    step,
)
from ..supervisor.observe import Limits, Look, Verdict, WatchMemory, ledger_steps, observe
from ..supervisor.reconcile import OwnedResource, Owner
from ..supervisor.watch_event import WatchEvent, WatchEventTooNew
from . import report
from .arguments import common_problems, policy_with_fallbacks
from .kills import judge_kill, release_on_task_kill
from .launch import attempt_spec, submit_attempt
from .run_store import STEPS_KEY, RunStore, first_try_after_clear

#: The shortest deferral, in seconds. Airflow 3.3 can fail a task whose trigger fires within seconds of
#: its deferral: the executor's late "success" for the process that deferred is processed after the resumed
#: try is already running, and the scheduler marks that try failed ("state mismatch"; apache/airflow#71580,
#: #72716, seen here under LocalExecutor with the default 5 s worker heartbeat). So a backoff shorter than
#: this is slept in the worker, and a trigger the operator defers to holds its event until this long after
#: the deferral (a job that ends sooner is reported up to this much later). 0 turns the guard off.
DEFAULT_MIN_DEFER_SECONDS = 10.0


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
        event_topic: ``projects/P/topics/T``: detect by event as well as by poll. A Cloud Logging sink routes the
            platform's failure entries to this Pub/Sub topic (the Vertex AI job's ``ml_job`` entries, Cloud TPU's
            system events: docs/detection.md gives the sink's filter); the watch listens on it -- the deferred
            task's trigger, or the worker between two looks (:class:`~..backends.events.ThreadedListener`) -- and
            looks at its job or node as soon as a message names it (:mod:`..backends.events`), instead of at its
            next poll. Polling goes on as the fallback. The connection's identity needs the right to create and
            delete subscriptions of the topic (``roles/pubsub.editor``). None (default): polling only.

    Raises:
        AirflowFailException: as the DAG is parsed (templated arguments: once rendered, in ``execute``), one line
            per bad argument naming it and the fix (:func:`~.arguments.common_problems` and the platform's own
            checks): a duration that is not a positive number (``poll_interval``, ``min_defer_seconds`` >= 0,
            ``checkpoint_interval_cap``), a flag that is not a bool, ``torn_checkpoints`` not one of
            :data:`~.arguments.TORN_CHECKPOINT_CHOICES`, ``resilience_policy`` not a :class:`~..policy.RetryPolicy`,
            a fallback that is not a Fallback or a dict of its fields (an unknown key, an unknown failure class
            in ``on``), a ``goodput_logger_name`` without a ``goodput_job_name`` or not a log ID, an ``event_topic``
            that is not a topic name.

    The one ``execute_complete`` (every deferral of every platform comes back to it) and the one ``on_kill`` (a
    kill in the worker: :func:`~..backends.kill.release_on_kill` within :func:`~..backends.kill.kill_budget`) are
    this class's; a subclass says what a trigger's event means (:meth:`_resumed`) and what a kill releases
    (:meth:`_live_resources`).
    """

    STATE_KEY = "resilient_state"
    #: Task-state-store key of the step reports seen so far (:class:`~.run_store.RunStore`).
    STEPS_KEY = STEPS_KEY
    #: The platform whose resources a kill releases (:func:`~..backends.kill.release_on_kill`).
    PLATFORM = ""
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
                 goodput_logger_name: str | None = None, event_topic: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.event_topic = event_topic
        self.goodput_job_name = goodput_job_name
        self.goodput_logger_name = goodput_logger_name
        self.checkpoint_interval_cap = checkpoint_interval_cap
        self.torn_checkpoints = torn_checkpoints
        #: Problems of ``fallbacks`` entries (:func:`~..specs.fallbacks.fallbacks_of`; the platform's checks report
        #: them) and of ``resilience_policy`` (reported with the shared arguments' problems, :meth:`_refuse`).
        usable, self.fallback_problems = fallbacks_of(fallbacks)
        try:
            self.resilience_policy = policy_with_fallbacks(resilience_policy, usable)
            self._policy_problems: list[SpecError] = []
        except SpecError as exc:
            self.resilience_policy = RetryPolicy()
            self._policy_problems = exc.errors
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
        #: See :data:`DEFAULT_MIN_DEFER_SECONDS`.
        self.min_defer_seconds = min_defer_seconds
        self._sleep: Callable[[float], Any] = time.sleep
        self._clock: Callable[[], float] = time.time
        # What this task process holds of its run (none of it is an argument or serialized with the DAG):
        #: the run state and step reports in the task state store;
        self._store = RunStore(self.STATE_KEY)
        #: the task instance (what on_kill asks Airflow about), known once the run is loaded;
        self._owner: Owner | None = None
        #: the observer's memory of the newest look, not yet folded into the run state;
        self._observed: WatchMemory | None = None
        #: the platform's backend, built at first use (:meth:`_backend`).
        self._backend_built: Backend | None = None

    def _common_problems(self) -> list[SpecError]:
        """Problems of the arguments this class takes (:func:`~.arguments.common_problems`, the policy's)."""
        return [*self._policy_problems, *common_problems(self)]

    def _refuse(self, problems: list[SpecError], skip: Collection[str] = ()) -> None:
        """Raise the arguments' problems, those of ``skip`` (templated arguments, judged after rendering) left
        out.

        Raises:
            AirflowFailException: one line per problem, naming the field, the value and the fix.
        """
        left = SpecError.of_many(problems).without(skip) if problems else None
        if left is not None:
            raise AirflowFailException(f"{type(self).__name__} {self.task_id}: {left}") from problems[0]

    def _log_endpoint(self, hook: Any) -> None:
        """Say first, in the task's log, where the calls go (:meth:`~..hooks.base.GoogleApiHook.endpoint_summary`:
        the emulator's address, or Google Cloud with which credentials). Raises ``AirflowNotFoundException`` naming
        the connection and the fix when ``gcp_conn_id`` does not exist, before anything is created."""
        self.log.info("%s", hook.endpoint_summary())

    def _fire_not_before(self) -> float:
        """Epoch seconds before which a trigger this task defers to must not fire (see
        :data:`DEFAULT_MIN_DEFER_SECONDS`)."""
        return self._clock() + self.min_defer_seconds

    # ------------------------------------------------------------------ subclass interface
    def _backend(self) -> Any:
        """The platform's backend (:mod:`..backends`), built once from the operator's arguments
        (:meth:`_make_backend`): every side effect on a cloud resource goes through it, as the execution of a
        supervisor command."""
        if self._backend_built is None:
            self._backend_built = self._make_backend()
        return self._backend_built

    def _make_backend(self) -> Backend:
        raise NotImplementedError

    def _live_resources(self) -> list[OwnedResource]:
        """What this process knows to be live of the run, as the kill rule reads it (``keep`` for what the user
        keeps); a kill releases it (:meth:`on_kill`)."""
        raise NotImplementedError

    def _resumed(self, context: Any, state: RunState, event: WatchEvent | None) -> Any:
        """The supervisor event a trigger's ``event`` (:class:`~..supervisor.watch_event.WatchEvent`; None: no
        payload) brings for the watched attempt of ``state`` (phase RUNNING)."""
        raise NotImplementedError

    def _judged_summary(self, event: WatchEvent | None) -> dict[str, Any] | None:
        """What a job trigger's event brings: the observer's memory goes on (folded in by the next step), and the job
        it saw end (``terminal``) or judged failed while live (``hang``, ``queue_timeout``: the supervisor commands
        its end) is returned as the job's summary with the verdict; None for anything else (``error``, said in the
        log; no event): the platform's operator then looks itself."""
        if event is not None and event.watch:
            self._observed = WatchMemory.from_json(event.watch)
        if event is not None and event.job is not None and event.status in ("terminal", "hang", "queue_timeout"):
            return {**event.job, **event.verdict}
        if event is not None and event.status == "error":
            self.log.warning("The trigger could not read the job: %s", event.message)
        return None

    def _prepare_resume(self) -> None:
        """Before a resumed process goes on (:meth:`execute_complete`): what ``execute`` prepares from the
        rendered arguments besides checking them (default: nothing)."""

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
        events = self._event_listener(job_name)
        try:
            while True:
                self._tend_spare(context, state)
                event = self._look(context, state, job_name)
                if event is not None:
                    return event
                if self.deferrable:
                    if not TRIGGER_ON_KILL:
                        self.log.warning(
                            "This Airflow's triggerer calls no trigger on_kill (new in Airflow 3.3): if this deferred "
                            "task is marked failed or success, or cleared, %s goes on running until the reconciler "
                            "DAG (airflow_provider_resilient.reconcile) releases it on its schedule", job_name)
                    self._defer_watch(state, job_name)
                if events is None:
                    self._sleep(self.poll_interval)
                elif events.pause(self.poll_interval):
                    self.log.info("An event names %s: looking now", job_name)
        finally:
            if events is not None:
                events.close()

    def _event_listener(self, resource_name: str) -> Any:
        """With ``event_topic`` and ``deferrable=False``: a :class:`~..backends.events.ThreadedListener` for the
        worker's waits between two looks at ``resource_name``; else None (a deferred watch listens in its trigger).
        """
        if not self.event_topic or self.deferrable:
            return None
        from ..backends.events import ThreadedListener, feed_key, pubsub_hook_maker

        chain, emulator = self.impersonation_chain, self._hook_emulator()
        return ThreadedListener(feed_key(self.event_topic, self.gcp_conn_id, chain, emulator), resource_name,
                                self.poll_interval, pubsub_hook_maker(self.gcp_conn_id, chain, emulator))

    def _hook_emulator(self) -> str | None:
        """The emulator address the platform's hook uses (None: Google), for the event feed's client."""
        return None

    def _finish(self, context: Any, state: RunState, job_name: str) -> Any:
        """The task's return value after success."""
        raise NotImplementedError

    def _tend_spare(self, context: Any, state: RunState) -> None:
        """Before each look at the running attempt and as the run stops: carry out what the supervisor says about a
        spare resource (:func:`~..supervisor.spare.tend_spare`). Only the TPU operator holds spares; here, nothing."""

    def _recover(self, context: Any, state: RunState) -> RunState:
        """The run to continue when the task state store holds none (phase new): a first try, or a store
        that was emptied (``[state_store] clear_on_success``, its retention, its REST API). A subclass that
        can see the resources it created may rebuild the run from them; the default starts afresh."""
        return state

    # ------------------------------------------------------------------ Airflow entry points
    def execute_complete(self, context: Any, event: Any = None) -> Any:
        """Continue after a deferral: a backoff's ``DateTimeTrigger`` (phase SLEEPING), or the platform's trigger
        (phase RUNNING: its event means what :meth:`_resumed` says). The state comes from the task state store
        (``airflow dags test`` drops the defer kwargs); the step reports the trigger saw go to the ledger first.

        Raises:
            AirflowException: resumed in a phase that waits for no trigger.
        """
        self._prepare_resume()
        try:
            watched = WatchEvent.from_payload(event) if isinstance(event, dict) and "status" in event else None
        except WatchEventTooNew as exc:  # a retry on an upgraded worker reads it: not a permanent failure
            raise AirflowException(str(exc)) from exc
        if watched is not None and watched.message:
            self.log.info("Trigger (%s): %s", watched.status, watched.message)
        state = self._load(context)
        if watched is not None:
            self._note_trigger_steps(context, state, watched.steps)
        if state.phase == Phase.SLEEPING:
            return self._drive(context, state, WokeUp(self._clock()))
        if state.phase != Phase.RUNNING or not state.job_name:
            raise AirflowException(f"resumed in phase {state.phase!r}, which does not wait for a trigger")
        return self._drive(context, state, self._resumed(context, state, watched))

    def on_kill(self) -> None:
        """The task is being killed in its worker: when its task instance is really over -- read from Airflow
        (:meth:`_judge_kill`: marked failed or success, cleared, deleted, or this try timing out; not a try taken
        for dead and retried, whose next try reattaches) -- release what the supervisor's kill rule says
        (:func:`~..supervisor.reconcile.releases_on_kill` of :meth:`_live_resources`) through
        :func:`~..backends.kill.release_on_kill`, with a client of its own (Airflow calls it from a signal handler,
        perhaps in the middle of a call on the operator's client) within :func:`~..backends.kill.kill_budget`
        (``"worker"``). A release requested but not confirmed in time still happens at Google."""
        release_on_task_kill(self._live_resources(), self._judge_kill, self.PLATFORM, self._conn_id(),
                             self.impersonation_chain, self.log)

    def _conn_id(self) -> str | None:
        """The Airflow connection of the platform's calls (Google's ``gcp_conn_id``; ModelArts' own)."""
        return self.gcp_conn_id

    # ------------------------------------------------------------------ kills
    def _judge_kill(self) -> Any:
        """Whether ``on_kill`` should release this task's job or node (:func:`~.kills.judge_kill`)."""
        return judge_kill(self._owner, self.read_task_states, self.log)

    # ------------------------------------------------------------------ the commands, carried out by the backend
    def _task_instance(self, context: Any) -> Owner:
        return task_instance(self.dag_id, self.task_id, context["run_id"], self._map_index(context))

    def _submit(self, context: Any, state: RunState, action: Submit) -> Any:
        """Carry out ``Submit`` (:func:`~.launch.submit_attempt`): find the attempt's resource, else create it
        resuming from the latest complete checkpoint. Returns ``Submitted`` or ``SubmitFailed``.

        Raises:
            AirflowException: the checkpoints cannot be listed (never a silent restart from step 0; Airflow's
                task retries apply).
        """
        spec = attempt_spec(action, self._task_instance(context), self.resilience_policy.fallbacks, self.labels)
        return submit_attempt(self._backend(), spec, state, action, location=self._checkpoint_location(),
                              marker=self.checkpoint_marker, torn_checkpoints=self.torn_checkpoints,
                              interval_cap=self.checkpoint_interval_cap, store=self._store,
                              saves=self._checkpoint_saves, clock=self._clock, log=self.log,
                              resume=self._resumes_run_checkpoints())

    def _resumes_run_checkpoints(self) -> bool:
        """Whether a new attempt resumes from the run's latest complete checkpoint (default: yes)."""
        return True

    def _look(self, context: Any, state: RunState, job_name: str) -> Any:
        """One look at the attempt (the backend's, judged by :meth:`_observe`): ``JobSucceeded`` /
        ``JobFailed`` when something happened, None while it just runs."""
        started = state.history[-1].started_at if state.history else None
        return self._backend().look(job_name, lambda look, limits: self._observe(context, state, look, limits),
                                    started)

    def _end_attempt(self, context: Any, state: RunState, job_name: str, wait: bool = True) -> Any:
        """Carry out :class:`~..supervisor.EndAttempt`: end ``job_name`` (cancel the job, delete the node) and
        wait until the platform says it has ended (``wait=False``: as the backend allows, see
        :meth:`~..backends.base.Backend.end`); ``Ended`` (``succeeded`` when it finished successfully before the
        end took effect).

        Raises:
            AirflowException: it has not ended in the backend's time (a task retry ends it again).
        """
        try:
            return self._backend().end(job_name, wait)
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
            if (memory := self._observed) is not None:
                self._observed = None
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
                self.log.info("%s: ending %s; %s", action.reason, action.job_name,
                              "what follows starts once it has ended" if action.wait else
                              "it runs nothing: the next node is created while it is deleted")
                event = self._end_attempt(context, state, action.job_name, action.wait)
            elif isinstance(action, Sleep):
                self.log.info("Next step in %.1f s", action.seconds)
                if self.deferrable and action.seconds > 0 and action.seconds >= self.min_defer_seconds:
                    self._defer_for(action.seconds)
                self._sleep(action.seconds)
                event = WokeUp(self._clock())
            elif isinstance(action, Succeed):
                report.log_history(state, self.log)
                self._tend_spare(context, state)
                if action.end:
                    self._end_last(context, state, action.job_name)
                result = self._finish(context, state, action.job_name)
                self._push_history(context, state)
                return result
            elif isinstance(action, Fail):
                report.log_history(state, self.log)
                self._tend_spare(context, state)
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
        """The run of this task instance from the task state store (:class:`~.run_store.RunStore`).

        Raises:
            AirflowException: stored by a newer release of the provider.
            AirflowFailException: the stored state is unreadable.
        """
        self._owner = self._task_instance(context)  # what on_kill asks Airflow about
        if not self._store.available(context):
            self.log.warning("No task state store and no task instance in the context: a retried task finds its "
                             "run only from the platform")
        return self._store.load(context)

    def _save(self, context: Any, state: RunState) -> None:
        self._store.save(context, state)

    # ------------------------------------------------------------------ the observer
    def _watch_memory(self, state: RunState) -> WatchMemory:
        """What the observer remembers of the watched attempt: the newest of this process's looks, else the
        stored state's (a deferral or a task retry continues the clocks)."""
        return self._observed if self._observed is not None else state.watch

    def _observe(self, context: Any, state: RunState, look: Look, limits: Limits) -> Verdict:
        """Judge one look with the pure observer (:func:`~..supervisor.observe.observe`) and keep its memory
        in the run state, saved at once when it changed (a deferral or a kill right after keeps it); new steps
        go to the goodput ledger."""
        before = self._watch_memory(state)
        memory, verdict = observe(before, look, self._clock(), limits)
        self._observed = memory
        if memory != before:  # one write per change, not per look (each is a call to Airflow's API server)
            self._save(context, state.observed(memory))
        for at, step_, start in ledger_steps(verdict, memory, look):  # the run's lead (worker 0, the logged steps)
            self._store.note(at, step_, start)
        return verdict

    def _note_trigger_steps(self, context: Any, state: RunState, steps: Sequence[Sequence[float]]) -> None:
        """Note the step reports a trigger's event carries (``[[time, step(, 1)], ...]``) for the goodput ledger, as a
        polling operator notes the step of each look (:meth:`~.run_store.RunStore.note_reported`), and save them at
        once (a resumed look that defers again saves nothing)."""
        started = state.history[-1].started_at if state.history else None
        if self._store.note_reported(steps, started):
            self._save(context, state)

    def _checkpoint_saves(self) -> list[Any] | None:
        """The run's newest complete checkpoints (:func:`~.report.checkpoint_saves`), or None."""
        return report.checkpoint_saves(self._checkpoint_location(), self.checkpoint_marker, self.log)

    def _step_reports(self) -> list[Any]:
        """Step observations made while watching (``goodput.StepReport``), this run's, oldest first."""
        return self._store.steps

    def _checkpoint_location(self) -> str | None:
        """Where the workload writes its checkpoints: every new attempt resumes from the latest complete one
        there, and the run summary judges its saves; None: none (a fresh start each time, no advice)."""
        return None

    def _push_history(self, context: Any, state: RunState) -> None:
        """Push the attempt history and the run's goodput ledger (with the checkpoint-interval advice) to XCom and
        log both as the run's summary (:func:`~.report.push_summary`)."""
        saves = self._checkpoint_saves() if any(a.started_at is not None for a in state.history) else None
        workload = report.WorkloadEvents(self.project_id, str(self.goodput_job_name), self.goodput_logger_name,
                                         self.gcp_conn_id, self.impersonation_chain) if self.goodput_job_name else None
        report.push_summary(context, state, self._step_reports(), saves, now=self._clock(), log=self.log,
                            workload=workload, extra=self._summary_extra(context))

    def _summary_extra(self, context: Any) -> dict[str, Any]:
        """More figures of the run for its goodput summary (XCom ``goodput``); none here."""
        return {}
