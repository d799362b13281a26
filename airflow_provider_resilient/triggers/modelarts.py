"""Trigger that watches a Huawei Cloud ModelArts training job from the triggerer until it ends.

Events: a :class:`~..supervisor.watch_event.WatchEvent`, as the Vertex AI trigger's: ``terminal`` with the job's
summary (:func:`~..backends.modelarts.job_summary`: phase, exit code, error events, fault scenario, the platform's
re-issues) once its phase is terminal; ``error`` when the job can no longer be read; ``hang`` / ``queue_timeout``
when the pure observer (:mod:`..supervisor.observe`) judges the live job failed (no new complete checkpoint for
``hang_timeout``; Creating or Pending longer than ``queue_timeout``) -- the job is left live, the supervisor commands
its end. The SDK's calls block (``requests``; the SDK's "async" client is a thread pool too): every read runs in a
worker thread, never in the triggerer's event loop. Transient errors are retried by the hook and never end the
trigger. ``on_kill`` is :class:`~.base.SupervisedTrigger`'s: it stops the job only when the task was really killed.

The shared poller (``shared_poller=True``, the default), as the Vertex AI trigger's (:mod:`.vertex_ai`): the triggers
of one event loop that watch jobs of one project, region and connection subscribe to one
:class:`ModelArtsJobPoller`, which reads every live job the provider created there with one job search per cycle
(``training-job-searches``, tag ``resilient-attempt``, phases Creating to Terminating; pages of 50) and hands each
subscriber its job's status; a job not in the listing (it ended, or the listing failed) is read by its own trigger
(details, and for an ended job its stages and Error events). For N watched jobs of a region: ceil(L / 50) searches
per cycle instead of N reads.

Importing this module imports no Huawei Cloud library.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from functools import cached_property
from typing import Any

from airflow.triggers.base import TriggerEvent

from ..supervisor.watch_event import VERDICT_KEYS, WatchEvent
from .base import SupervisedTrigger
from .vertex_ai import CustomJobPoller, PollerKey, poller_for

log = logging.getLogger(__name__)

#: The provider's modules a watch uses, imported in a worker thread when it starts.
WATCH_MODULES = ("airflow_provider_resilient.backends.modelarts", "airflow_provider_resilient.hooks.modelarts",
                 "airflow_provider_resilient.supervisor.observe", "airflow_provider_resilient.checkpoints",
                 "airflow_provider_resilient.specs.common",
                 "huaweicloudsdkmodelarts.v1")


class AsyncModelArtsHook:
    """The trigger's face of a :class:`~..hooks.modelarts.ResilientModelArtsHook`: every call in a worker thread (the
    SDK blocks), never in the triggerer's event loop."""

    def __init__(self, conn_id: str, region: str | None) -> None:
        self.conn_id = conn_id
        self.region = region
        self.sync: Any = None

    async def open(self) -> None:
        """Read the connection on the event loop (never in a thread: see
        :class:`~..hooks.modelarts.ResilientModelArtsHook`'s ``connection``), then import the SDK and build its
        client in a thread. Idempotent."""
        if self.sync is None:
            from ..hooks.modelarts import ResilientModelArtsHook, aget_connection

            connection = await aget_connection(self.conn_id)
            hook = ResilientModelArtsHook(self.conn_id, self.region, connection=connection)
            await asyncio.to_thread(hook.client)
            if self.sync is None:
                self.sync = hook

    async def list_live_jobs(self) -> list[Any]:
        """The provider's live jobs (tagged ``resilient-attempt``) with their status."""
        from ..specs.common import LABEL_ATTEMPT

        await self.open()
        return list(await asyncio.to_thread(self.sync.list_live_jobs, LABEL_ATTEMPT))

    async def read_summary(self, name: str) -> dict[str, Any]:
        from ..backends.modelarts import read_summary

        await self.open()
        return dict(await asyncio.to_thread(read_summary, self.sync, name))

    async def close(self) -> None:
        if self.sync is not None:
            await asyncio.to_thread(self.sync.close)


class ModelArtsJobPoller(CustomJobPoller):
    """Reads the live jobs of one project and region once per cycle for every subscribed trigger (the Vertex AI
    poller's cycle, subscriptions and registry; :func:`~.vertex_ai.poller_for` with ``kind=ModelArtsJobPoller``)."""

    async def _list(self) -> dict[str, Any] | None:
        from ..hooks.modelarts import resource_name

        _, region = self.key[:2]
        try:
            jobs = await self.hook.list_live_jobs()
        except Exception as exc:  # permission, retries used up: every subscriber reads its own job this cycle
            log.warning("Cannot search the training jobs of %s (each trigger reads its own job): %s", region, exc)
            return None
        project = self.hook.sync.project_id
        return {resource_name(region, project, job.metadata.id): job for job in jobs}


class ModelArtsTrainingJobTrigger(SupervisedTrigger):
    """Watch one training job, every ``poll_interval`` seconds, until it is terminal or judged failed.

    Args:
        job_name: the provider's resource name ``modelarts/<region>/<project>/<job id>``.
        poll_interval: seconds between two looks.
        huaweicloud_conn_id: the Airflow connection (:mod:`..hooks.modelarts`).
        cancel_on_kill: stop the job when a user kills the deferred task.
        hang_timeout: seconds a Running job may go without a new complete checkpoint under ``checkpoint_dir``;
            None: never (and no listing).
        checkpoint_dir, checkpoint_marker: where progress is seen, as for the operator.
        queue_timeout: seconds the job may be Creating or Pending (from its ``create_time``); None: never.
        fire_not_before: epoch seconds before which the event is held back (``operators.base``'s guard).
        watch: the observer's memory of this attempt (``WatchMemory.to_json()``); every event carries it on.
        shared_poller: share one :class:`ModelArtsJobPoller` with the triggers of this event loop watching jobs of the
            same project, region and connection (see the module docstring); False: one read per ``poll_interval`` for
            this job alone.

    Raises:
        ValueError: ``hang_timeout`` without ``checkpoint_dir``, or a ``queue_timeout`` that is not positive.
    """

    PLATFORM = "modelarts"
    FIELDS = ("job_name", "poll_interval", "huaweicloud_conn_id", "cancel_on_kill", "hang_timeout", "checkpoint_dir",
              "checkpoint_marker", "queue_timeout", "fire_not_before", "watch", "shared_poller")
    gcp_conn_id = None
    impersonation_chain = None
    emulator = None

    def __init__(self, job_name: str, poll_interval: float = 30.0, huaweicloud_conn_id: str = "huaweicloud_default",
                 cancel_on_kill: bool = True, hang_timeout: float | None = None, checkpoint_dir: str | None = None,
                 checkpoint_marker: str | None = None, queue_timeout: float | None = None,
                 fire_not_before: float | None = None, watch: dict[str, Any] | None = None,
                 shared_poller: bool = True) -> None:
        super().__init__()
        if hang_timeout is not None and not checkpoint_dir:
            raise ValueError("ModelArtsTrainingJobTrigger: hang_timeout needs checkpoint_dir, where progress is seen")
        if queue_timeout is not None and queue_timeout <= 0:
            raise ValueError(f"ModelArtsTrainingJobTrigger: queue_timeout must be > 0 seconds, got {queue_timeout}")
        self.job_name = job_name
        self.poll_interval = poll_interval
        self.huaweicloud_conn_id = huaweicloud_conn_id
        self.cancel_on_kill = cancel_on_kill
        self.hang_timeout = hang_timeout
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_marker = checkpoint_marker
        self.queue_timeout = queue_timeout
        self.fire_not_before = fire_not_before
        self.watch = dict(watch or {})
        self.shared_poller = shared_poller
        #: Seconds since the epoch, now (replaced in tests).
        self._clock: Callable[[], float] = time.time
        self._steps: list[list[float]] = []

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {f: getattr(self, f) for f in self.FIELDS}

    def _conn_id(self) -> str | None:
        return self.huaweicloud_conn_id

    async def _kill_connection(self) -> Any:
        """The connection a kill's release uses, read on the event loop (never in the release's thread)."""
        from ..hooks.modelarts import aget_connection

        return await aget_connection(self.huaweicloud_conn_id)

    def _kill_resources(self) -> list[Any]:
        from ..backends.modelarts import live_resources

        return live_resources(self.job_name, self.cancel_on_kill)

    @cached_property
    def _memory(self) -> Any:
        from ..supervisor.observe import WatchMemory

        return WatchMemory.from_json(self.watch)

    def _hook(self) -> AsyncModelArtsHook:
        from ..hooks.modelarts import region_of

        return AsyncModelArtsHook(self.huaweicloud_conn_id, region_of(self.job_name))

    def _poller_key(self) -> PollerKey | None:
        """Who may share a poller with this trigger (``modelarts/<project>`` marks the platform in the key); None when
        ``job_name`` is not a provider resource name."""
        parts = self.job_name.split("/")
        if len(parts) != 4 or parts[0] != "modelarts":
            return None
        return (f"modelarts/{parts[2]}", parts[1], self.huaweicloud_conn_id, None, None)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from ..hooks.loading import load_off_loop

        await load_off_loop(WATCH_MODULES)
        key = self._poller_key() if self.shared_poller else None
        payload = await (self._watch_shared(key) if key else self._watch_alone())
        event = WatchEvent(payload["status"], self.job_name, payload.get("message", ""), payload.get("job"),
                           {k: payload[k] for k in VERDICT_KEYS if k in payload}, self._memory.to_json() or None,
                           self._steps)
        if self.fire_not_before is not None:  # operators.base.DEFAULT_MIN_DEFER_SECONDS: Airflow's race
            await asyncio.sleep(max(0.0, self.fire_not_before - self._clock()))
        yield TriggerEvent(event.payload())

    async def _watch_alone(self) -> dict[str, Any]:
        """Per-job polling: one look every ``poll_interval`` seconds until the watch is over; the event's payload."""
        hook = self._hook()
        try:
            while True:
                payload, summary = await self._read(hook)
                if payload or (payload := await self._verdict(summary)):
                    return payload
                self.log.debug("%s is %s", self.job_name, summary["state"])
                await asyncio.sleep(self.poll_interval)
        finally:
            await hook.close()

    async def _watch_shared(self, key: PollerKey) -> dict[str, Any]:
        """The shared poller's observations, a look of this trigger's own when it did not list the job; the event's
        payload. Unsubscribes however it ends."""
        from ..backends.modelarts import job_summary

        poller = poller_for(key, self._hook, ModelArtsJobPoller)
        watch = poller.subscribe(self.job_name, self.poll_interval)
        try:
            await poller.hook.open()  # the SDK's imports and the connection in a thread
            while True:
                await watch.observed.wait()
                watch.observed.clear()
                if watch.job is not None:  # listed live: its status is enough to judge
                    payload, summary = None, job_summary(watch.job, self.job_name)
                else:  # not listed: it ended, or the listing failed
                    payload, summary = await self._read(poller.hook)
                if payload or (payload := await self._verdict(summary)):
                    return payload
                self.log.debug("%s is %s", self.job_name, summary["state"])
        finally:
            poller.unsubscribe(watch)

    async def _read(self, hook: AsyncModelArtsHook) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """(the event's payload when the watch is over, else None; the job's summary) from one look."""
        from ..policy.job_states import MODELARTS_TERMINAL_PHASES

        try:
            summary = await hook.read_summary(self.job_name)
        except Exception as exc:  # past the hook's retries: the operator reads it itself
            return {"status": "error", "message": f"cannot read {self.job_name}: {exc}"}, {}
        if summary["state"] in MODELARTS_TERMINAL_PHASES:
            return {"status": "terminal", "job": summary}, summary
        return None, summary

    async def _verdict(self, summary: dict[str, Any]) -> dict[str, Any] | None:
        """The ``queue_timeout`` or ``hang`` payload when the observer judges the live job failed, else None."""
        from ..backends.modelarts import job_look, wants_checkpoints

        if wants_checkpoints(summary, self.hang_timeout) and self.checkpoint_dir:  # a listing: in a thread
            look = await asyncio.to_thread(job_look, summary, self.checkpoint_dir, self.checkpoint_marker)
        else:
            look = job_look(summary)
        return self._observe_job(look, summary)


__all__ = ["AsyncModelArtsHook", "ModelArtsJobPoller", "ModelArtsTrainingJobTrigger"]
