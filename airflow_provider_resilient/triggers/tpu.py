"""Trigger that watches a Cloud TPU node for the deferrable ``ResilientTPUWorkloadOperator``.

Theory of operation. The operator looks at its node in full -- node state and health, the workers'
reports (guest attributes written by :mod:`..worker.runner`), new audit-log entries, step progress for
hang detection and the goodput ledger -- and, when that look finds nothing to act on, defers to a
:class:`TPUNodeTrigger` with what it saw (the *baseline*: node state, health, symptoms and each worker's
``status`` / ``restarts``). Every ``poll_interval`` seconds the trigger reads the node and the workers'
reports with :class:`~..hooks.tpu.AsyncResilientTPUHook` and fires an event -- the operator then resumes
in a worker and does its full look -- as soon as

* the node's state, health or symptoms differ from the baseline (it left READY/HEALTHY: maintenance,
  preemption, termination, unhealthy hardware; or it came up after a reattach to a CREATING node),
* a worker's report shows a new end status (``succeeded``, ``failed``, ``terminated``,
  ``preflight_failed``), a new in-place restart (``restarting``, a higher ``restarts`` count) or a checkpoint
  saved on request (``checkpoint_ack``),
* the node's announced maintenance (``upcoming_maintenance``, v2alpha1) differs from the baseline's: a new
  notice, a moved window (the operator also comes back by the window's checkpoint time: ``look_again_at``),
* the node is gone (NOT_FOUND) or cannot be read (a non-transient API error): ``status`` ``"gone"`` /
  ``"error"``, or
* ``look_again_at`` (seconds since the epoch) has passed: ``status`` ``"look_again"``.

Step reports for the goodput ledger. On every poll that reads the workers' reports the trigger records
worker 0's ``step`` (digits only) when it differs from the last one it recorded, with the time it was
seen (the trigger's clock, ``time.time()``); every event of a watching trigger carries them as ``"steps": [[time, step],
...]`` (oldest first) when there are any, and the operator notes them for its ledger (as a polling
operator notes the step of each of its looks) -- so a deferred run's ledger attributes wasted progress
from steps, not from whole attempts. The list lives in the trigger only: it is not serialized, and a
trigger re-created on another triggerer (its triggerer was SIGKILLed) starts a new one. The steps seen
before the move are lost, and the ledger still holds: the operator adds the steps of the run's complete
checkpoints (stored where no process can lose them) to the reports, and dates a node failure by its audit
entry, not by the late look after the outage -- so the work lost is the work since the last checkpoint, and
the outage counts as detection.

The look-again interval (:func:`~..backends.tpu_watch.look_again_seconds`): what only the operator's full look
sees -- audit entries of an event that came and went between two polls, a worker whose heartbeat or step stopped
(hang detection) -- is seen within it. Default: ``hang_timeout / 2``, at most
:data:`~..backends.tpu_watch.DEFAULT_LOOK_AGAIN_SECONDS` (5 minutes) and at least ``poll_interval``; so a hang is
found within ``1.5 x hang_timeout``, and with the default ``hang_timeout`` (30 minutes) a quiet run costs one short
worker slot every 5 minutes instead of holding one all the time.

A trigger with ``watch_node=False`` only waits until ``look_again_at`` (status ``"timer"``): the operator
uses it for waits while a node of the run still exists (a maintenance wait: the platform recovers it in
place), so that a kill during the wait deletes that node too. Before a re-create there is none: the
supervisor has the failed node deleted before the backoff begins.

Kills. Airflow 3.3's triggerer calls ``on_kill`` when a user acts on the deferred task (mark failed, mark
success, clear), not on its own shutdown or restart -- but also when a triggerer whose heartbeat lapsed wakes
up and cancels a trigger that moved to another triggerer meanwhile (the trigger is re-created there from
:meth:`TPUNodeTrigger.serialize` and goes on watching; the absolute ``look_again_at`` and the baseline travel
with it). So ``on_kill`` first reads the task instance's state from Airflow (:mod:`.ownership`) and deletes
nothing while it is still deferred, resumed or up for retry. On a real kill it deletes the queued
resource (when ``queued_resource`` names one; force: its node goes too) and the node -- unless
``keep_node`` -- with transient API errors retried and the deletions waited for within the kill budget
(:func:`~..backends.kill.kill_budget`: 80 % of ``[triggerer] on_kill_timeout``, 30 s by default), and closes
its gRPC channel (:class:`~.base.SupervisedTrigger`'s ``on_kill``, the Vertex AI trigger's too). A deletion
requested but not confirmed in time still happens: Google carries it out. The gRPC channel of
:meth:`TPUNodeTrigger.run` is closed however it ends.

Importing this module imports no Google library (they are imported when a trigger runs).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from airflow.triggers.base import TriggerEvent

from ..backends.events import EventListening
from ..backends.tpu_watch import QUEUE_WAITING_STATES, QUEUED, node_baseline, notice_of, worker_change
from ..supervisor.watch_event import WatchEvent
from .base import SupervisedTrigger


class TPUNodeTrigger(EventListening, SupervisedTrigger):
    """Watch a TPU node until something needs the operator's full look (see the module docstring).

    Args:
        node_name: ``projects/P/locations/ZONE/nodes/NODE``.
        look_again_at: seconds since the epoch after which the trigger fires ``look_again`` (``timer`` when
            ``watch_node`` is False) at the latest.
        poll_interval: seconds between two reads of the node and the workers' reports.
        baseline: what the operator last saw (:func:`~..backends.tpu_watch.node_baseline`); None: a node
            READY/HEALTHY with no symptoms and no report yet.
        keep_node: on a user's kill, leave the node and queued resource alone.
        spare: the run's spare node (:mod:`~..supervisor.spare`), deleted with the node on a kill.
        queued_resource: ``projects/P/locations/ZONE/queuedResources/ID`` the node was requested through,
            deleted (force) on a user's kill; None: none.
        watch_node: False: only wait until ``look_again_at`` (a backoff that protects ``node_name``).
        fire_not_before: epoch seconds before which a watching trigger holds its event back (see
            ``operators.base.DEFAULT_MIN_DEFER_SECONDS``); None: fire at once.
        gcp_conn_id, impersonation_chain, emulator: as for :class:`~..hooks.tpu.ResilientTPUHook`.
        event_topic: ``projects/P/topics/T``, a Pub/Sub topic a Cloud Logging sink routes Cloud TPU's system
            events to: a message that names the node cuts the wait between two reads short (:mod:`..backends.events`);
            None (default): reads every ``poll_interval`` only.

    Events (``TriggerEvent.payload``): a :class:`~..supervisor.watch_event.WatchEvent` -- ``{"version": 1,
    "status": "changed" | "look_again" | "gone" | "error" | "timer", "resource": <node name>, "message": ...,
    "steps": [[time, step], ...]}``. ``steps`` -- worker 0's step
    reports this trigger saw, each when it first saw that step (seconds since the epoch), oldest first --
    is there only when it saw any (never in ``timer``: that trigger does not watch). The steps seen are
    not constructor arguments and are not serialized: a trigger re-created on another triggerer starts
    with none.
    """

    PLATFORM = "tpu"
    #: The constructor's arguments; ``serialize`` is derived from this one list.
    FIELDS = ("node_name", "look_again_at", "poll_interval", "baseline", "keep_node", "queued_resource",
              "watch_node", "gcp_conn_id", "impersonation_chain", "emulator",
              "fire_not_before", "spare", "event_topic")

    def __init__(self, node_name: str, look_again_at: float, poll_interval: float = 30.0,
                 baseline: Mapping[str, Any] | None = None, keep_node: bool = False,
                 queued_resource: str | None = None, watch_node: bool = True,
                 gcp_conn_id: str | None = "google_cloud_default", impersonation_chain: str | list[str] | None = None,
                 emulator: str | None = None, fire_not_before: float | None = None, spare: str | None = None,
                 event_topic: str | None = None) -> None:
        super().__init__()
        self.event_topic = event_topic
        self.spare = spare
        self.fire_not_before = fire_not_before
        if poll_interval <= 0:
            raise ValueError(f"TPUNodeTrigger: poll_interval must be > 0 seconds, got {poll_interval}")
        self.node_name = node_name
        self.look_again_at = float(look_again_at)
        self.poll_interval = float(poll_interval)
        self.baseline = dict(baseline or {"state": "READY", "health": "HEALTHY", "symptoms": [], "workers": []})
        self.keep_node = keep_node
        self.queued_resource = queued_resource
        self.watch_node = watch_node
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.emulator = emulator
        #: Worker 0's step reports seen by this trigger, ``[[time, step], ...]`` (see the module docstring).
        self._steps: list[list[float]] = []
        #: Seconds since the epoch, now; and how the watch waits (both replaced in tests, which step the
        #: platform's time instead of waiting for it).
        self._clock: Callable[[], float] = time.time
        self._sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {f: getattr(self, f) for f in self.FIELDS}

    def _hook(self, api_retry_seconds: float = 600.0) -> Any:
        from ..hooks.tpu import AsyncResilientTPUHook

        return AsyncResilientTPUHook(self.gcp_conn_id, self.impersonation_chain, emulator=self.emulator,
                                     api_retry_seconds=api_retry_seconds)

    def _event(self, status: str, message: str) -> dict[str, Any]:
        """The :class:`~..supervisor.watch_event.WatchEvent` payload of ``status`` (with the steps seen)."""
        return WatchEvent(status, self.node_name, message, steps=self._steps).payload()

    def _record_step(self, reports: Sequence[Mapping[str, str]]) -> None:
        """Record worker 0's step when it is a new one (digits only), with the time it was seen."""
        step = str(reports[0].get("step") or "") if reports else ""
        if not (step.isascii() and step.isdigit()):
            return
        if not self._steps or self._steps[-1][1] != int(step):
            self._steps.append([self._clock(), int(step)])

    async def run(self) -> AsyncIterator[TriggerEvent]:
        if not self.watch_node:
            await self._sleep(max(0.0, self.look_again_at - self._clock()))
            yield TriggerEvent(self._event("timer", "the backoff is over"))
            return
        hook = self._hook()
        try:
            await hook.open()  # imports and credentials in a thread: never block the triggerer's loop
            payload = await self._watch(hook)
        finally:
            await hook.close()
        if self.fire_not_before is not None:  # operators.base.DEFAULT_MIN_DEFER_SECONDS: Airflow's race
            await self._sleep(max(0.0, self.fire_not_before - self._clock()))
        yield TriggerEvent(payload)

    async def _watch(self, hook: Any) -> dict[str, Any]:
        self._listen(self.node_name)  # with event_topic: a message naming the node cuts the pause short
        try:
            while True:
                payload = await self._look(hook)
                if payload is not None:
                    self.log.info("%s: %s", self.node_name, payload["message"])
                    return payload
                remaining = self.look_again_at - self._clock()
                if remaining <= 0:
                    return self._event("look_again", "no change; time for a full look (audit log, progress)")
                if await self._pause(min(self.poll_interval, remaining), self._sleep):
                    self.log.info("%s: an event names the node; looking now", self.node_name)
        finally:
            await self._stop_listening()

    async def _look(self, hook: Any) -> dict[str, Any] | None:
        """One read of the node and the workers' reports: the event's payload when there is news, else None."""
        from google.api_core import exceptions as gexc

        if self.queued_resource and self.baseline.get("state") == QUEUED:
            return await self._look_at_queue(hook)
        try:
            node = await hook.get_node(self.node_name)
        except gexc.NotFound:
            return self._event("gone", f"{self.node_name} is gone")
        except gexc.GoogleAPICallError as exc:
            return self._event("error", f"cannot read {self.node_name}: {exc}")
        seen = node_baseline(node, [])
        before = (self.baseline.get("state"), self.baseline.get("health"), sorted(self.baseline.get("symptoms", [])))
        if (seen["state"], seen["health"], seen["symptoms"]) != before:
            return self._event("changed", f"node is {seen['state']} / {seen['health']}"
                               + (f", symptoms {seen['symptoms']}" if seen["symptoms"] else ""))
        if seen["state"] != "READY":
            return None  # e.g. still CREATING after a reattach: the workers report nothing yet
        try:
            reports = await hook.worker_reports(self.node_name)
        except gexc.GoogleAPICallError as exc:
            return self._event("error", f"cannot read the workers' reports of {self.node_name}: {exc}")
        self._record_step(reports)
        why = worker_change(self.baseline.get("workers", []), reports)
        if why:
            return self._event("changed", why)
        if "maintenance" not in self.baseline:  # a baseline of an older release: maintenance not watched
            return None
        try:
            notice = notice_of(await hook.upcoming_maintenance(self.node_name))
        except gexc.GoogleAPICallError as exc:
            return self._event("error", f"cannot read the upcoming maintenance of {self.node_name}: {exc}")
        summary = notice.summary() if notice else ""
        if summary != self.baseline["maintenance"]:
            return self._event("changed", f"upcoming maintenance: {summary or 'none'}")
        return None

    async def _look_at_queue(self, hook: Any) -> dict[str, Any] | None:
        """The operator saw the node's queued resource still waiting (baseline ``QUEUED``): news only when the
        request stops waiting as the operator judges it (``backends.tpu``'s queue look) -- granted (ACTIVE, or
        PROVISIONING with the node past CREATING), FAILED, SUSPENDED, gone. A node that exists but is still
        CREATING is the request still provisioning, not news (a "changed" for it would bring the task back to
        defer again on every round trip of a node's creation). The queue timeout is the operator's to judge at
        ``look_again_at``."""
        from google.api_core import exceptions as gexc

        try:
            queued = await hook.get_queued_resource(self.queued_resource)
        except gexc.NotFound:
            return self._event("gone", f"{self.queued_resource} is gone")
        except gexc.GoogleAPICallError as exc:
            return self._event("error", f"cannot read {self.queued_resource}: {exc}")
        state = queued.state.state.name
        if state == "PROVISIONING":
            try:
                node_state = (await hook.get_node(self.node_name)).state.name
            except gexc.NotFound:
                return None  # the node is not created yet
            except gexc.GoogleAPICallError as exc:
                return self._event("error", f"cannot read {self.node_name}: {exc}")
            if node_state != "CREATING":
                return self._event("changed", f"queued resource {self.queued_resource} is PROVISIONING, its node "
                                              f"{node_state}")
            return None
        if state in QUEUE_WAITING_STATES:
            return None
        return self._event("changed", f"queued resource {self.queued_resource} is {state}")

    def _kill_resources(self) -> list[Any]:
        """The queued resource (when ``queued_resource`` names one; force: its node goes too) and the node, as
        the kill rule reads them (kept with ``keep_node``)."""
        from ..backends.tpu import live_resources

        return live_resources(self.node_name, self.queued_resource, keep=self.keep_node, spare=self.spare)


__all__ = ["TPUNodeTrigger"]
