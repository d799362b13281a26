"""Trigger that watches a Vertex AI CustomJob from the triggerer until it ends.

Events: a :class:`~..supervisor.watch_event.WatchEvent` (the TPU trigger's type too; its payload also holds
``"version"`` and ``"resource"``, the job's name): ``{"status": "terminal", "job": {...}}`` with the job's name,
state, error and start time when it reached a terminal state; ``{"status": "error", "message": ...}`` when the job
can no longer be read (deleted, permission lost); ``{"status": "hang", "job": {...}, "hang": why, "hang_since": t}``
when a ``hang_timeout`` is set and the running job wrote no new complete checkpoint under ``checkpoint_dir`` for
that long; ``{"status": "queue_timeout", "job": {...}, "queue_timeout": message, "queued_state": state,
"timed_out_at": t}`` when a ``queue_timeout`` is set and the job has been QUEUED or PENDING for longer since its
``create_time``. Both are the pure observer's verdicts (:mod:`..supervisor.observe`); its memory comes in as
``watch`` and goes out in every event. Both report a job that is still live: the trigger decides nothing and cancels
nothing -- the operator hands the verdict to the supervisor, which commands the job's end (``EndAttempt``: cancel,
then wait until it ended) before anything follows. With ``hang_timeout`` each event also carries ``"steps": [[time,
step], ...]``, the checkpoint steps seen (for the goodput ledger). Transient API errors are retried by the async
hook and never end the trigger. ``on_kill`` (:class:`~.base.SupervisedTrigger`'s, the TPU trigger's too) cancels the
job when ``cancel_on_kill`` and the task was really killed -- its task instance, read from Airflow, was marked
failed or success, cleared or deleted -- within ``[triggerer] on_kill_timeout``; a trigger the triggerer cancels
because it moved to another triggerer (a stalled triggerer wakes up after its heartbeat lapsed) finds its task
instance still deferred and cancels nothing (:mod:`.ownership`).

Theory of operation -- the shared poller (``shared_poller=True``, the default). Airflow's triggerer runs
every trigger of its process in one asyncio event loop. The triggers of one loop that watch jobs of the
same project, region, connection, impersonation chain and emulator subscribe to one
:class:`CustomJobPoller`, a task of that loop. Each cycle the poller lists the location's live jobs that
carry the operator's ``resilient-attempt`` label (:func:`~..backends.vertex.list_filter`; pages of
:data:`LIST_PAGE_SIZE`) and hands every subscriber its job as listed. A subscriber whose job is not in the
listing -- a job created without our labels (e.g. one the sensor watches), a job that ended (ended jobs are left out of
the listing so that it does not grow with history), or every job when the listing failed -- reads its
job with one GetCustomJob of its own that cycle, so correctness never depends on the labels. The cycle
period is the smallest ``poll_interval`` among the subscribers; the poller stops when the last one
leaves (its job ended, or its trigger was cancelled).

Cost per cycle, for N watched jobs of one location: ``ceil(L / LIST_PAGE_SIZE)`` ListCustomJobs calls,
where L is the number of live labelled jobs of the location, plus one GetCustomJob per watched job the
listing did not show -- instead of N GetCustomJob calls with per-job polling (``shared_poller=False``),
where every trigger polls its own job with its own client.

Importing this module imports no Google library (they are imported when a trigger runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from functools import cached_property
from typing import Any, TypeAlias

from airflow.triggers.base import TriggerEvent

from ..backends.events import EventListening
from ..backends.loops import PerLoop
from ..supervisor.watch_event import VERDICT_KEYS, WatchEvent
from .base import SupervisedTrigger

log = logging.getLogger(__name__)

#: Jobs per ListCustomJobs page asked for by the shared poller (a service that caps it pages further).
LIST_PAGE_SIZE = 1000


#: (project, region, gcp_conn_id, impersonation chain, emulator): the triggers that may share a poller.
PollerKey: TypeAlias = tuple[str, str, str | None, str | tuple[str, ...] | None, str | None]


#: The provider's modules a watch uses inside the event loop (the queue-timeout rule, the labels, checkpoint
#: discovery), imported in a worker thread when it starts (hooks/loading.py): importing them costs 20-30 ms
#: of CPU, several times that in wall time on a loaded triggerer.
WATCH_MODULES = ("airflow_provider_resilient.backends.vertex", "airflow_provider_resilient.specs.vertex",
                 "airflow_provider_resilient.checkpoints")


class Subscription:
    """One trigger's subscription to a :class:`CustomJobPoller`.

    Each cycle the poller sets ``job`` -- the job as listed, or None when the listing did not show it --
    and then ``observed``; the subscriber clears ``observed`` when it has read ``job``.
    """

    __slots__ = ("job", "job_name", "observed", "poll_interval")

    def __init__(self, job_name: str, poll_interval: float) -> None:
        self.job_name = job_name
        self.poll_interval = poll_interval
        self.job: Any = None
        self.observed = asyncio.Event()


class CustomJobPoller:
    """Lists the live labelled jobs of one location once per cycle for every subscribed trigger.

    Create it with :func:`poller_for` (one per event loop and :data:`PollerKey`), never directly.

    Args:
        key: the location and credentials it serves.
        hook: an ``AsyncResilientVertexAIHook`` for ``key``; transient API errors are retried there. It
            is closed when the poller stops; subscribers use it for their own GetCustomJob calls.
        on_idle: called once when the last subscriber left (removes the poller from the registry).
    """

    def __init__(self, key: PollerKey, hook: Any, on_idle: Callable[[], None]) -> None:
        self.key = key
        self.hook = hook
        self._on_idle = on_idle
        self._watches: list[Subscription] = []
        self._wake = asyncio.Event()
        self._now = False  # look_now() was called: the next cycle starts at once
        self._task: asyncio.Task[None] | None = None
        self.cycles = 0

    @property
    def job_names(self) -> list[str]:
        """The jobs watched by the current subscribers, in the order they subscribed."""
        return [w.job_name for w in self._watches]

    @property
    def interval(self) -> float:
        """Seconds between the starts of two cycles: the smallest ``poll_interval`` of the subscribers."""
        return min((w.poll_interval for w in self._watches), default=0.0)

    def subscribe(self, job_name: str, poll_interval: float) -> Subscription:
        """Watch ``job_name`` from the next cycle on, at least every ``poll_interval`` seconds."""
        faster = not self._watches or poll_interval < self.interval
        watch = Subscription(job_name, poll_interval)
        self._watches.append(watch)
        if self._task is None:
            project, region = self.key[:2]
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"poll {project}/{region}")
        elif faster:
            self._wake.set()  # the cycle being waited for may now be due sooner
        return watch

    def look_now(self) -> None:
        """Start the next cycle at once (an event named a watched job, :mod:`..backends.events`); a cycle under way is
        followed by another one."""
        self._now = True
        self._wake.set()

    def unsubscribe(self, watch: Subscription) -> None:
        """Stop delivering to ``watch``; the last subscriber to leave stops the poller. Idempotent."""
        with contextlib.suppress(ValueError):
            self._watches.remove(watch)
        if not self._watches and self._task is not None:
            self._task.cancel()
            self._task = None
            self._on_idle()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._watches:
                started = loop.time()
                listed = await self._list()
                self.cycles += 1
                for watch in list(self._watches):
                    watch.job = listed.get(watch.job_name) if listed is not None else None
                    watch.observed.set()
                await self._sleep_until(started)
        finally:
            await self.hook.close()

    async def _list(self) -> dict[str, Any] | None:
        """The listed jobs by name, or None when the listing could not be read (every subscriber reads its
        own job this cycle)."""
        project, region = self.key[:2]
        from ..backends.vertex import list_filter

        try:
            jobs = await self.hook.list_custom_jobs(project, region, list_filter(), page_size=LIST_PAGE_SIZE)
        except Exception as exc:  # permission, an unsupported filter, retries used up: fall back to GetCustomJob
            log.warning("Cannot list the CustomJobs of %s/%s (each trigger reads its own job): %s",
                        project, region, exc)
            return None
        return {job.name: job for job in jobs}

    async def _sleep_until(self, started: float) -> None:
        """Sleep until ``started + interval``; a subscriber with a shorter interval brings that time forward."""
        loop = asyncio.get_running_loop()
        while self._watches:
            remaining = started + self.interval - loop.time()
            if remaining <= 0 or self._now:
                self._now = False
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), remaining)


#: The pollers of each event loop (the triggerer has one loop; tests may run several, one after another).
_POLLERS: PerLoop[PollerKey, CustomJobPoller] = PerLoop()


def poller_for(key: PollerKey, make_hook: Callable[[], Any],
               kind: type[CustomJobPoller] | None = None) -> CustomJobPoller:
    """The running event loop's poller for ``key``, created (a ``kind``, default :class:`CustomJobPoller`, with
    ``make_hook()``) when there is none; ``kind``: a poller of another platform's jobs (its key says which)."""
    return _POLLERS.get(key, lambda forget: (kind or CustomJobPoller)(key, make_hook(), forget))


def active_pollers() -> dict[PollerKey, CustomJobPoller]:
    """The pollers of the running event loop that have subscribers (for tests and diagnostics)."""
    return _POLLERS.active()


class CustomJobTrigger(EventListening, SupervisedTrigger):
    """Watch one CustomJob, at least every ``poll_interval`` seconds, until it is terminal.

    Args:
        job_name: ``projects/P/locations/R/customJobs/ID``.
        poll_interval: seconds between two looks at the job (a shared poller's cycle is the smallest
            ``poll_interval`` of its subscribers).
        gcp_conn_id, impersonation_chain, emulator: as for :class:`~..hooks.vertex_ai.ResilientVertexAIHook`.
        cancel_on_kill: cancel the job when a user kills the deferred task.
        shared_poller: share one ListCustomJobs poller with the triggers of this event loop that watch jobs
            of the same location and credentials (see the module docstring); False: one GetCustomJob per
            ``poll_interval`` for this job alone.
        hang_timeout: seconds a RUNNING job may go without a new complete checkpoint under
            ``checkpoint_dir`` before the trigger reports a hang; None (default): never, and
            no checkpoint listing is made (two listings per look when set, in a worker thread).
        checkpoint_dir, checkpoint_marker: where to look for progress, as for the operator.
        read_step_logs: with ``hang_timeout``, also read the chief replica's logged steps from Cloud Logging
            (:class:`~..backends.vertex.StepLogReader`, in a worker thread), as the operator does.
        restart_timeout: seconds from the start of a restart (a replica's exit, the runner's start line: read with
            the steps) or of the attempt to the job's next logged step, instead of ``hang_timeout`` (the operator's
            argument); None (default): ``hang_timeout`` throughout.
        fire_not_before: epoch seconds before which the event is held back, even if the job ended sooner
            (see ``operators.base.DEFAULT_MIN_DEFER_SECONDS``); None: fire at once.
        queue_timeout: seconds the job may be QUEUED or PENDING, counted from its ``create_time``, before
            the trigger reports a ``queue_timeout`` (the operator passes
            ``RetryPolicy.queue_timeout_seconds``); None (default): never.
        watch: the observer's memory of this attempt (``WatchMemory.to_json()``, from the run state), so that
            a hang clock keeps counting across deferrals; every event carries the updated one as ``"watch"``.
        event_topic: ``projects/P/topics/T``, a Pub/Sub topic a Cloud Logging sink routes the job's log entries to
            (resource type ``ml_job``): a message that names the job brings the next look forward -- the shared
            poller's next cycle, or this trigger's own read (:mod:`..backends.events`); None (default): polling only.

    Raises:
        ValueError: ``hang_timeout`` without ``checkpoint_dir``, or a ``queue_timeout`` or ``restart_timeout`` that
            is not positive.
    """

    PLATFORM = "vertex_ai"
    #: The constructor's arguments; ``serialize`` is derived from this one list.
    FIELDS = ("job_name", "poll_interval", "gcp_conn_id", "impersonation_chain", "emulator", "cancel_on_kill",
              "shared_poller", "hang_timeout", "checkpoint_dir", "checkpoint_marker", "queue_timeout",
              "fire_not_before", "watch", "read_step_logs", "event_topic", "restart_timeout")
    #: Arguments newer than a provider version a triggerer may still run during a rolling upgrade: serialized only
    #: when set, so a trigger that does not use one can be re-created there.
    OMIT_WHEN_NONE = frozenset({"restart_timeout"})

    def __init__(self, job_name: str, poll_interval: float = 30.0, gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | list[str] | None = None, emulator: str | None = None,
                 cancel_on_kill: bool = True, shared_poller: bool = True, hang_timeout: float | None = None,
                 checkpoint_dir: str | None = None, checkpoint_marker: str | None = None,
                 queue_timeout: float | None = None, fire_not_before: float | None = None,
                 watch: dict[str, Any] | None = None, read_step_logs: bool = False,
                 event_topic: str | None = None, restart_timeout: float | None = None) -> None:
        super().__init__()
        self.restart_timeout = restart_timeout
        self.event_topic = event_topic
        self.read_step_logs = read_step_logs
        self._step_logs: Any = None  # the StepLogReader, made at first use (off the event loop)
        self._log_hook: Any = None  # its sync hook, closed when the watch ends
        self.watch = dict(watch or {})
        self.fire_not_before = fire_not_before
        if hang_timeout is not None and not checkpoint_dir:
            raise ValueError("CustomJobTrigger: hang_timeout needs checkpoint_dir, where progress is seen")
        if queue_timeout is not None and queue_timeout <= 0:
            raise ValueError(f"CustomJobTrigger: queue_timeout must be > 0 seconds, got {queue_timeout}")
        if restart_timeout is not None and restart_timeout <= 0:
            raise ValueError(f"CustomJobTrigger: restart_timeout must be > 0 seconds, got {restart_timeout}")
        self.queue_timeout = queue_timeout
        #: Seconds since the epoch, now (replaced in tests).
        self._clock: Callable[[], float] = time.time
        self.hang_timeout = hang_timeout
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_marker = checkpoint_marker
        self._steps: list[list[float]] = []
        self.job_name = job_name
        self.poll_interval = poll_interval
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.emulator = emulator
        self.cancel_on_kill = cancel_on_kill
        self.shared_poller = shared_poller

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {
            f: getattr(self, f) for f in self.FIELDS if f not in self.OMIT_WHEN_NONE or getattr(self, f) is not None}

    @cached_property
    def _memory(self) -> Any:
        """The observer's memory (:class:`~..supervisor.observe.WatchMemory`), from ``watch``; made at first
        use, after the observer's modules were imported off the event loop."""
        from ..supervisor.observe import WatchMemory

        return WatchMemory.from_json(self.watch)

    def _hook(self) -> Any:
        from ..hooks.vertex_ai import AsyncResilientVertexAIHook

        return AsyncResilientVertexAIHook(self.gcp_conn_id, self.impersonation_chain, emulator=self.emulator)

    def _poller_key(self) -> PollerKey | None:
        """Who may share a poller with this trigger; None when ``job_name`` is not a CustomJob name."""
        from ..hooks.vertex_ai import JOB_NAME_RE

        match = JOB_NAME_RE.match(self.job_name)
        if not match:
            return None
        chain = self.impersonation_chain
        return (match["project"], match["region"], self.gcp_conn_id,
                tuple(chain) if isinstance(chain, list | tuple) else chain, self.emulator)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from ..hooks.loading import load_off_loop

        await load_off_loop(WATCH_MODULES)  # before the poller's first cycle, which needs list_filter()
        key = self._poller_key() if self.shared_poller else None
        self._listen(self.job_name)  # with event_topic: a message naming the job brings the next look forward
        try:
            payload = await (self._watch_shared(key) if key else self._watch_alone())
        finally:
            await self._stop_listening()
            if self._log_hook is not None:
                self._log_hook.close()  # the step log reader's channel (closing a gRPC channel does not block)
        event = WatchEvent(payload["status"], self.job_name, payload.get("message", ""), payload.get("job"),
                           {k: payload[k] for k in VERDICT_KEYS if k in payload}, self._memory.to_json() or None,
                           self._steps)
        if self.fire_not_before is not None:  # operators.base.DEFAULT_MIN_DEFER_SECONDS: Airflow's race
            await asyncio.sleep(max(0.0, self.fire_not_before - self._clock()))
        yield TriggerEvent(event.payload())

    async def _verdict(self, job: Any) -> dict[str, Any] | None:
        """The ``queue_timeout`` or ``hang`` event's payload when the observer judges the live ``job`` failed,
        else None. The job is left running: the supervisor commands its end. Lists the checkpoints (in a
        worker thread) only when a RUNNING job is judged for a hang."""
        from ..backends.vertex import job_look, job_summary, wants_checkpoints

        summary = job_summary(job)
        if wants_checkpoints(summary, self.hang_timeout) and self.checkpoint_dir:  # listing, reading: in a thread
            look = await asyncio.to_thread(job_look, summary, self.checkpoint_dir, self.checkpoint_marker,
                                           self._step_log_reader())
        else:
            look = job_look(summary)
        return self._observe_job(look, summary)

    def _step_log_reader(self) -> Any:
        """The :class:`~..backends.vertex.StepLogReader` of the watch (None without ``read_step_logs``), over a
        sync hook of its own (called in a worker thread; its gRPC channel is closed when the watch ends)."""
        if not self.read_step_logs or self.hang_timeout is None:
            return None
        if self._step_logs is None:
            from ..backends.vertex import StepLogReader, step_log_seconds

            hook = self._sync_hook(0.0)
            self._log_hook = hook
            self._step_logs = StepLogReader(lambda name, since: hook.logged_progress(name, since),
                                            step_log_seconds(self.hang_timeout), self._clock)
        return self._step_logs

    async def _watch_alone(self) -> dict[str, Any]:
        """Per-job polling: one GetCustomJob every ``poll_interval`` seconds; the event's payload."""
        hook = self._hook()
        try:
            await hook.open()  # imports and credentials in a thread: never block the triggerer's loop
            while True:
                payload, job = await self._read(hook)
                if payload or (payload := await self._verdict(job)):
                    return payload
                self.log.debug("%s is %s", self.job_name, job.state.name)
                if await self._pause(self.poll_interval):
                    self.log.info("%s: an event names the job; looking now", self.job_name)
        finally:
            await hook.close()

    async def _watch_shared(self, key: PollerKey) -> dict[str, Any]:
        """The shared poller's observations, a GetCustomJob when it did not list the job; the event's payload.

        Unsubscribes however it ends -- the job ended, the read failed, or the trigger was cancelled.
        """
        poller = poller_for(key, self._hook)
        watch = poller.subscribe(self.job_name, self.poll_interval)
        forwarding = asyncio.ensure_future(self._forward_events(poller)) if self._listener else None
        try:
            await poller.hook.open()  # imports and credentials in a thread: never block the triggerer's loop
            while True:
                await watch.observed.wait()
                watch.observed.clear()
                if watch.job is not None:
                    payload, job = self._judge(watch.job), watch.job
                else:  # not in the listing: no labels of ours, ended, or the listing failed
                    payload, job = await self._read(poller.hook)
                if payload or (payload := await self._verdict(job)):
                    return payload
                self.log.debug("%s is %s", self.job_name, job.state.name)
        finally:
            if forwarding is not None:
                forwarding.cancel()
            poller.unsubscribe(watch)

    async def _forward_events(self, poller: CustomJobPoller) -> None:
        """While the shared poller watches the job: an event that names it starts the poller's next cycle now, and
        the follow-up looks after it (:func:`~..backends.events.follow_ups`) start cycles of their own."""
        from ..backends.events import follow_ups

        listener = self._listener
        assert listener is not None
        pending: list[float] = []
        while True:
            if pending:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(listener.woke.wait(), pending.pop(0))
            else:
                await listener.woke.wait()
            if listener.woke.is_set():
                listener.woke.clear()
                pending = follow_ups(self.poll_interval)
                self.log.info("%s: an event names the job; looking now", self.job_name)
            poller.look_now()

    async def _read(self, hook: Any) -> tuple[dict[str, Any] | None, Any]:
        """(the event's payload when the watch is over, else None; the job) from one GetCustomJob."""
        from google.api_core import exceptions as gexc

        try:
            job = await hook.get_job(self.job_name)
        except gexc.GoogleAPICallError as exc:
            return {"status": "error", "message": f"cannot read {self.job_name}: {exc}"}, None
        return self._judge(job), job

    @staticmethod
    def _judge(job: Any) -> dict[str, Any] | None:
        """The terminal event's payload when ``job`` is in a terminal state, else None."""
        from ..backends.vertex import job_summary
        from ..policy.job_states import TERMINAL_STATES

        return {"status": "terminal", "job": job_summary(job)} if job.state.name in TERMINAL_STATES else None

    def _kill_resources(self) -> list[Any]:
        """The watched job, as the kill rule reads it (kept without ``cancel_on_kill``)."""
        from ..backends.vertex import live_resources

        return live_resources(self.job_name, self.cancel_on_kill)

    def _sync_hook(self, api_retry_seconds: float) -> Any:
        from ..hooks.vertex_ai import ResilientVertexAIHook

        return ResilientVertexAIHook(self.gcp_conn_id, self.impersonation_chain, emulator=self.emulator,
                                     api_retry_seconds=api_retry_seconds)


__all__ = ["CustomJobPoller", "CustomJobTrigger", "active_pollers", "poller_for"]
