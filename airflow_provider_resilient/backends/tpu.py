"""Cloud TPU nodes as the TPU operator and its trigger read them: the baseline a deferred watch compares
with, what in the workers' reports is news, how often a deferred operator comes back for a full look, and
the operator's typed backend (:class:`TPUNodeBackend`: find a node by name, request one directly or through
a queued resource, look at it -- queue, state, health, audit log, the workers' reports -- delete it and
wait). Importing it imports no Google library (it runs in the triggerer's event loop as its trigger is
loaded).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from ..policy import Attempt, Failure, Platform
from ..supervisor import Ended, JobFailed, MoveOff, RunState, SubmitFailed, Submitted
from ..supervisor.maintenance import MaintenanceSettings
from ..supervisor.observe import Limits, Look
from ..supervisor.reconcile import OwnedResource, Release
from ..worker.protocol import (
    CHECKPOINT_REQUEST_ATTRIBUTE,
    KEY_CHECKPOINT_ACK,
)
from .base import AttemptSpec, Judge, LookResult
from .tpu_watch import QUEUED, node_baseline, notice_of

log = logging.getLogger(__name__)

#: How often a spare node's startup script asks the metadata server whether an attempt has taken it (seconds, real
#: time: :func:`~..specs.tpu.spare_startup_script`); a benchmark on the emulator's compressed time scales it.
SPARE_POLL_SECONDS = 2.0
#: How long ending an attempt waits for its node's deletion (seconds) before the next attempt may begin.
DELETE_WAIT_SECONDS = 1800.0

def live_resources(node: str | None, queued_resource: str | None, keep: bool = False,
                   spare: str | None = None) -> list[OwnedResource]:
    """A run's live TPU resources as the supervisor's release rules read them: the queued resource (when the
    node was requested through one) and the node, marked ``keep`` with ``keep_node``, and the spare node
    (:mod:`~..supervisor.spare`), never kept."""
    found = [OwnedResource(queued_resource, "queued_resource", None, keep=keep)] if queued_resource else []
    found += [OwnedResource(node, "tpu_node", None, keep=keep)] if node else []
    return found + ([OwnedResource(spare, "tpu_node", None)] if spare and spare != node else [])


def live_nodes(hook: Any, project_id: str, zones: Sequence[str]) -> list[OwnedResource]:
    """The live TPU nodes the provider created in ``zones`` (one ListNodes each; those carrying
    ``resilient-attempt``, not DELETING), each as its queued resource when it has one (deleting that takes the
    node too), with the task instance that created it, ``keep`` for ``resilient-keep``, and the checkpoint
    directory (``RESILIENT_CHECKPOINT_DIR`` in its metadata) -- what the reconciler and the two-writers check
    read.

    Raises:
        google.api_core.exceptions.GoogleAPICallError: a listing failed past the hook's retries.
    """
    from ..specs.common import ENV_CHECKPOINT_DIR, LABEL_ATTEMPT, LABEL_KEEP
    from ..supervisor.reconcile import owner_from

    found: list[OwnedResource] = []
    for zone in dict.fromkeys(zones):
        for node in hook.list_nodes(project_id, zone):
            if LABEL_ATTEMPT not in node.labels or node.state.name in ("DELETING", "HIDDEN"):
                continue
            kind = "queued_resource" if node.queued_resource else "tpu_node"
            metadata = dict(node.metadata)
            if node.queued_resource and any(f.name == node.queued_resource for f in found):
                continue  # another slice of the same multislice group
            found.append(OwnedResource(node.queued_resource or node.name, kind, owner_from(metadata),
                                       keep=node.labels.get(LABEL_KEEP) == "true",
                                       checkpoint_dir=metadata.get(ENV_CHECKPOINT_DIR) or None))
    return found


def release_all(hook: Any, releases: Sequence[Release], wait_seconds: float | None) -> None:
    """Carry out the supervisor's ``Release`` commands of TPU resources -- the one way the provider deletes a
    node or a queued resource: at the end of an attempt (:meth:`TPUNodeBackend.end`), in an operator's or a
    trigger's ``on_kill`` and in the reconciler. Every deletion is requested first, in the order given (a queued
    resource with ``force``: its node goes too), so that a slow one does not hold back the next; then, with
    ``wait_seconds``, this waits for all of them within that many seconds in all (a node already being deleted
    -- by a trigger's ``on_kill``, say -- is waited for until it is gone). A resource already gone is fine.

    Args:
        hook: a :class:`~..hooks.tpu.ResilientTPUHook` (its ``api_retry_seconds`` bounds the retries of each call).
        releases: ``queued_resource`` and ``tpu_node`` releases (:func:`~..supervisor.reconcile.releases_on_kill`,
            :func:`~..supervisor.reconcile.releases`).
        wait_seconds: how long to wait for the deletions to finish (seconds); None: request them only.

    Raises:
        ValueError: a release of another kind of resource.
        concurrent.futures.TimeoutError: a deletion did not finish within ``wait_seconds`` (it goes on at Google).
        google.api_core.exceptions.GoogleAPICallError: a call failed past the hook's retries.
    """
    import time

    requested = []
    for release in releases:
        resource = release.resource
        if resource.kind == "queued_resource":
            requested.append((resource, hook.delete_queued_resource(resource.name, timeout=None)))
        elif resource.kind == "tpu_node":
            requested.append((resource, hook.delete_node(resource.name, timeout=None)))
        else:
            raise ValueError(f"release_all: a TPU backend releases queued resources and nodes, not a {resource.kind}")
        log.info("Deleting %s: %s", resource.name, release.why)
    if wait_seconds is None:
        return
    deadline = time.monotonic() + wait_seconds
    for resource, operation in requested:
        left = max(0.1, deadline - time.monotonic())
        if operation is not None:
            hook.wait_operation(operation, left)
        elif resource.kind == "tpu_node":  # gone, or being deleted by someone else: wait until it is gone
            hook.wait_gone(resource.name, left)


class TPUNodeBackend:
    """A run's Cloud TPU nodes (:class:`~.base.Backend`): attempt ``n`` runs on node ``<node id>-a<n>`` (fresh
    hardware: a faulty node is isolated), created directly or through a queued resource of the same id, through a
    :class:`~..hooks.tpu.ResilientTPUHook` and the audit log's :class:`~..hooks.tpu.AuditLogHook`.

    Args:
        hooks: returns ``(tpu_hook, audit_hook)`` (built on first use).
        project_id, zone, accelerator_type: the operator's target; a fallback's ``zone`` / ``accelerator_type``
            moves an attempt.
        node_id: returns the node id of an attempt (``node_id_for``: the task instance and attempt).
        node: builds the node body (a dict) of an attempt on an accelerator type (the operator's specs).
        queued_resource: request each node through a queued resource (it waits for capacity).
        spot: the queued resource asks for Spot capacity.
        valid_until_seconds: how long a queued resource may wait (None: the policy's ``queue_timeout``).
        queue_timeout: ``RetryPolicy.queue_timeout_seconds`` (default 30 minutes).
        hang_timeout, startup_timeout: the observer's limits for a READY node's workers (seconds).
        expect_steps: the workload logs steps from its start (:attr:`~..supervisor.observe.Limits.expect_steps`).
        keep_node: :meth:`release` keeps the last node (and its queued resource) for inspection.
        clock: epoch seconds now.
        fallback_zones: the zones the policy's fallbacks may move the run to (listed by :meth:`live_owned`).
        maintenance: what to do before an announced maintenance window (:mod:`~..supervisor.maintenance`; None:
            the defaults -- a checkpoint 10 minutes before, then ride it out).
        slices: more than 1: each attempt is a multislice group of that many nodes of ``accelerator_type``, one
            queued resource (``queued_resource`` must be set), looked at and ended as one.
        spare_poll_seconds: how often a spare node's startup script asks the metadata server whether an attempt
            has taken it (seconds; :func:`~..specs.tpu.spare_startup_script`); None: :data:`SPARE_POLL_SECONDS`.

    What a deferred watch needs is kept on the instance: :attr:`baseline` (what the last look saw),
    :attr:`queue_deadline` (when a waiting request passes the queue timeout), and the live node and queued
    resource (:attr:`live_node`, :attr:`live_queued`: what a kill deletes).
    """

    platform = Platform.TPU

    def __init__(self, hooks: Callable[[], tuple[Any, Any]], *, project_id: str, zone: str, accelerator_type: str,
                 node_id: Callable[[AttemptSpec], str], node: Callable[[AttemptSpec, str], dict[str, Any]],
                 queued_resource: bool, spot: bool, valid_until_seconds: float | None, queue_timeout: float | None,
                 hang_timeout: float | None, startup_timeout: float | None, keep_node: bool,
                 clock: Callable[[], float], fallback_zones: Sequence[str] = (),
                 maintenance: MaintenanceSettings | None = None, slices: int = 1, expect_steps: bool = False,
                 spare_poll_seconds: float | None = None) -> None:
        self.hooks = hooks
        self.spare_poll_seconds = spare_poll_seconds
        #: The spare node this process requested or found (:meth:`submit_spare`), until an attempt takes it or it is
        #: released: what a kill deletes too.
        self.spare: str | None = None
        #: The attempt :attr:`spare` was made for, when this process found it (:meth:`find`, :meth:`rebuild`).
        self.spare_attempt: int | None = None
        self.expect_steps = expect_steps
        self.project_id = project_id
        self.zone = zone
        self.fallback_zones = tuple(fallback_zones)
        self.accelerator_type = accelerator_type
        self.node_id = node_id
        self.node = node
        self.queued_resource = queued_resource
        self.spot = spot
        self.valid_until_seconds = valid_until_seconds
        self.queue_timeout = queue_timeout
        self.hang_timeout = hang_timeout
        self.startup_timeout = startup_timeout
        self.keep_node = keep_node
        self.clock = clock
        self.live_node: str | None = None
        self.live_queued: str | None = None
        #: What the last look saw (:func:`node_baseline`), for a deferred watch to compare with.
        self.baseline: dict[str, Any] | None = None
        #: Epoch seconds when the request being waited for passes the queue timeout (None: not waiting).
        self.queue_deadline: float | None = None
        self.maintenance = maintenance or MaintenanceSettings()
        self.slices = slices
        #: Epoch seconds when an announced maintenance window next needs a look (its checkpoint request, or a
        #: move); None: nothing due. A deferred watch comes back by then.
        self.maintenance_due: float | None = None
        self._granted: str | None = None
        #: Nodes whose deletion :meth:`end` requested without waiting (they ran nothing); :meth:`submit` makes
        #: sure they are gone before the next attempt is watched.
        self.deleting: list[str] = []

    def live_owned(self) -> list[OwnedResource]:
        """The provider's live nodes in the run's zone and its fallbacks' (:func:`live_nodes`)."""
        return live_nodes(self._tpu(), self.project_id, [self.zone, *self.fallback_zones])

    def _tpu(self) -> Any:
        return self.hooks()[0]

    def node_name(self, spec: AttemptSpec) -> str:
        """``projects/P/locations/ZONE/nodes/ID`` of the attempt of ``spec`` (on its fallback's zone)."""
        zone = spec.fallback.zone if spec.fallback and spec.fallback.zone else self.zone
        return f"projects/{self.project_id}/locations/{zone}/nodes/{self.node_id(spec)}"

    def watching(self, node_name: str) -> None:
        """Remember ``node_name`` (and its queued resource) as live: a kill deletes them."""
        from ..specs.tpu import queued_resource_name

        if node_name != self.live_node:  # an announced window was the old node's
            self.maintenance_due = None
        self.live_node = node_name
        self.live_queued = queued_resource_name(node_name) if self.queued_resource else None

    # ------------------------------------------------------------------ Backend
    def find(self, spec: AttemptSpec) -> Submitted | None:
        """The attempt's node, when it exists (the task was interrupted after creating it): watched instead of
        creating another."""
        from google.api_core import exceptions as gexc

        from ..specs.common import LABEL_SPARE
        from ..specs.tpu import queued_resource_name

        name = self.node_name(spec)
        try:
            if self.slices > 1:  # a multislice group exists as its queued resource (its nodes come later)
                state = self._tpu().get_queued_resource(queued_resource_name(name)).state.state.name
            else:
                node = self._tpu().get_node(name)
                if dict(node.labels).get(LABEL_SPARE) == "true":  # a spare waiting for this attempt: submit takes it
                    self.spare = name
                    self.spare_attempt = spec.attempt
                    return None
                state = node.state.name
        except gexc.NotFound:
            return None
        log.info("Attempt %d already has node %s (%s): watching it", spec.attempt, name, state)
        self.watching(name)
        return Submitted(name, self.clock())

    def submit(self, spec: AttemptSpec) -> Submitted | SubmitFailed:
        """Create the attempt's node and wait until it is READY, or request it through a queued resource and
        return at once (the watch waits for capacity: :meth:`look`). A refused call is classified
        (:func:`~..policy.classify_create_error`: a stockout, quota)."""
        from google.api_core import exceptions as gexc

        accelerator = self._accelerator(spec)
        name = self.node_name(spec)
        zone, node_id = name.split("/")[3], name.rsplit("/", 1)[1]
        body = self.node(spec, accelerator)
        self.watching(name)  # before the call: a kill during it deletes what it made
        started = self.clock()
        resumed = f"resuming from step {spec.resume_step}" if spec.resume_uri else "from scratch"
        if name == self.spare and self._take_spare(name, body):  # find saw it waiting at this attempt's name
            # The failed node's deletion (it runs nothing) goes on; the next create waits for it (_wait_deleted).
            log.info("Attempt %d: spare node %s (%s in %s) taken, READY after %.0f s, %s", spec.attempt, name,
                     accelerator, zone, self.clock() - started, resumed)
            return Submitted(name, self.clock(), spec.resume_step, spec.resume_uri)

        def create() -> None:
            if self.queued_resource:
                self._tpu().create_queued_resource(self.project_id, zone, node_id, body, spot=self.spot,
                                                   valid_until_seconds=self.valid_until_seconds,
                                                   **({"slices": self.slices} if self.slices > 1 else {}))
            else:
                self._tpu().create_node(self.project_id, zone, node_id, body)

        try:
            self._create_when_quota_frees(create, spec.attempt)
        except gexc.GoogleAPICallError as exc:
            self.live_node = self.live_queued = None
            return SubmitFailed(_refusal(exc, self.clock()), self.clock())
        self._wait_deleted()
        if self.queued_resource:
            log.info("Attempt %d: node %s (%s in %s) requested through queued resource %s, %s", spec.attempt, name,
                     accelerator, zone, self.live_queued, resumed)
        else:
            log.info("Attempt %d: node %s (%s in %s) READY after %.0f s, %s", spec.attempt, name, accelerator, zone,
                     self.clock() - started, resumed)
        return Submitted(name, self.clock(), spec.resume_step, spec.resume_uri)

    def _accelerator(self, spec: AttemptSpec) -> str:
        fallback = spec.fallback
        return fallback.accelerator_type if fallback and fallback.accelerator_type else self.accelerator_type

    def submit_spare(self, spec: AttemptSpec, reason: str) -> bool:
        """Carry out :class:`~..supervisor.spare.CreateSpare`: request the node of ``spec``'s attempt (the next one)
        as a spare -- the attempt's body with label ``resilient-spare`` and a startup script that waits until the
        attempt takes it (:func:`~..specs.tpu.spare_startup_script`) -- without waiting for it. True when requested;
        a refused create (a stockout, quota) is logged and False: the supervisor asks again at the next look.
        Single nodes only (not through a queued resource, not multislice)."""
        from google.api_core import exceptions as gexc

        from ..specs.common import LABEL_SPARE

        name = self.node_name(spec)
        zone, node_id = name.split("/")[3], name.rsplit("/", 1)[1]
        body = self.node(spec, self._accelerator(spec))
        body["metadata"] = {**body["metadata"], "startup-script": self._spare_script()}
        body["labels"] = {**body["labels"], LABEL_SPARE: "true"}
        self.spare = name  # before the call: a kill during it deletes what it made
        try:
            self._tpu().create_node(self.project_id, zone, node_id, body, timeout=None)
        except gexc.GoogleAPICallError as exc:
            self.spare = None
            log.warning("Spare node %s for attempt %d not created (%s): asked again at the next look", name,
                        spec.attempt, exc)
            return False
        log.info("Spare node %s requested for attempt %d: %s", name, spec.attempt, reason)
        return True

    def _spare_script(self) -> str:
        from ..specs.tpu import spare_startup_script

        return spare_startup_script(self.spare_poll_seconds or SPARE_POLL_SECONDS)

    def _take_spare(self, name: str, body: dict[str, Any]) -> bool:
        """Hand the spare ``name`` its attempt once it is READY: its metadata gets the attempt's startup script
        (attribute :data:`~..specs.tpu.ATTEMPT_SCRIPT_ATTRIBUTE`; the waiting script stays the node's startup script,
        so a reboot finds the attempt's at once) and its labels the attempt's. False when it
        cannot be taken -- gone, broken, not READY within the startup timeout: it is deleted (waited for) and the
        attempt's node is created as usual."""
        from concurrent.futures import TimeoutError as FutureTimeout

        from google.api_core import exceptions as gexc

        from ..specs.tpu import ATTEMPT_SCRIPT_ATTRIBUTE

        metadata = {**body["metadata"], ATTEMPT_SCRIPT_ATTRIBUTE: body["metadata"]["startup-script"],
                    "startup-script": self._spare_script()}
        try:
            # READY first: a spare still being created is waited for (it was requested before a create would be),
            # and Cloud TPU updates a node's metadata once it exists.
            self._tpu().wait_ready(name, self.startup_timeout or 1800.0)
            self._tpu().hand_over(name, metadata, dict(body["labels"]))
        except (gexc.GoogleAPICallError, RuntimeError, FutureTimeout) as exc:
            log.warning("Spare node %s cannot be taken (%s): deleting it and creating the node anew", name, exc)
            with contextlib.suppress(gexc.NotFound):
                self._delete(name)
            self.spare = None
            self.watching(name)
            return False
        self.spare = None
        return True

    def _spare_ready(self) -> bool:
        """Whether the spare this process holds is READY (one GetNode; False when none is held or it cannot be
        read)."""
        from google.api_core import exceptions as gexc

        if not self.spare:
            return False
        try:
            return bool(self._tpu().get_node(self.spare).state.name == "READY")
        except gexc.GoogleAPICallError:
            return False

    def release_spare(self, name: str, reason: str) -> None:
        """Carry out :class:`~..supervisor.spare.ReleaseSpare`: request the spare's deletion (not waited for: it runs
        nothing). A spare already gone is fine.

        Raises:
            google.api_core.exceptions.GoogleAPICallError: the call failed past the hook's retries.
        """
        release_all(self._tpu(), [Release(OwnedResource(name, "tpu_node", None), f"spare: {reason}")], None)
        if self.spare == name:
            self.spare = None

    def slice_names(self, name: str) -> list[str]:
        """The nodes of the attempt ``name``: itself, or for a multislice group (``slices`` > 1) the queued
        resource's nodes ``<name>-0`` ... ``<name>-<slices - 1>`` (``multi_node_params.node_id_prefix``)."""
        return [f"{name}-{i}" for i in range(self.slices)] if self.slices > 1 else [name]

    def look(self, name: str, judge: Judge, started_at: float | None = None) -> LookResult:
        """One look at the node -- or at every slice of a multislice group -- read here and judged by the core
        (:mod:`~..supervisor.tpu_look`), in three stages: its queued resource while not granted; the audit entries
        not seen before and each node's state and health; the workers' reports and the announced maintenance on
        READY nodes. Carries out what the judgement asks (a checkpoint request on every node before a maintenance
        window) and keeps what a deferred watch needs (:attr:`baseline`, :attr:`queue_deadline`,
        :attr:`maintenance_due`). ``started_at``: when the attempt was submitted (epoch seconds; the audit log is
        read from a minute before it)."""
        from ..supervisor.tpu_look import judge_nodes, judge_queue, judge_workers, node_failure

        now = self.clock()
        self.watching(name)
        self.maintenance_due = None  # set again below when a READY node's announced window needs a look
        if self.queued_resource and self._granted != name:
            queue = judge_queue(self._read_queue(name), judge, now,
                                None if self.valid_until_seconds else self.queue_timeout)
            if not queue.granted:
                self.queue_deadline = queue.deadline
                self.baseline = {"state": QUEUED, "health": "", "symptoms": [], "workers": []}
                return queue.result
            self._granted, self.queue_deadline = name, None
        slices = self.slice_names(name)
        # The audit entries that arrived since the last look are read *before* the nodes, so each event counts
        # once: an event that starts between the two reads then shows in the node's state (REPAIRING,
        # TERMINATED ...), and only an event that came and went is known by its entry alone.
        audits = [a for node_name in slices for a in self._new_audits(node_name, judge, started_at, name)]
        nodes = [self._read_node(node_name) for node_name in slices]
        judged = judge_nodes([reading for reading, _ in nodes], audits, now)
        if judged.failed is not None and judged.failure is not None:  # its reason's entry may have come since
            late = self._new_audits(slices[judged.failed], judge, started_at, name)
            result = node_failure(judged.failure, late, now, slices, judged.failed, judged.stopped)
            if isinstance(result, JobFailed) and self._spare_ready():  # the policy weighs it (a node in repair)
                result = replace(result, spare_ready=True)
            return result
        if judged.result is not None:
            return judged.result
        if not judged.ready:
            self.baseline = node_baseline(next(n for r, n in nodes if r.state != "READY"), [])
            return None
        reports = [self._tpu().worker_reports(node_name) for node_name in slices]
        # (lead 0: the run never acts on a notice, so it is not read -- one call less per look)
        notices = [notice_of(self._tpu().upcoming_maintenance(node_name)) if self.maintenance.lead_seconds > 0
                   else None for node_name in slices]
        limits = Limits(hang_seconds=self.hang_timeout, startup_seconds=self.startup_timeout,
                        maintenance=self.maintenance, expect_steps=self.expect_steps)
        workers = judge_workers(name, [r for r, _ in nodes], reports, notices, judge, limits, now, self.maintenance,
                                KEY_CHECKPOINT_ACK)
        self.baseline = node_baseline(nodes[0][1], [r for node_reports in reports for r in node_reports],
                                      workers.notice)
        if workers.request is not None:
            log.warning("%s: asking the workload for a checkpoint (%s)", workers.reason, workers.request)
            for node_name in slices:  # every slice of a group saves: its collectives span them all
                self._tpu().request_checkpoint(node_name, workers.request)
        self.maintenance_due = workers.maintenance_due
        if isinstance(workers.result, MoveOff):
            log.warning("%s", workers.reason)
        return workers.result

    def _read_queue(self, node_name: str) -> Any:
        """The node's queued resource as read (``QueuedReading``): gone, its state, and while PROVISIONING its
        node's state."""
        from google.api_core import exceptions as gexc

        from ..specs.tpu import queued_resource_name
        from ..supervisor.tpu_look import QueuedReading

        hook = self._tpu()
        name = queued_resource_name(node_name)
        try:
            queued = hook.get_queued_resource(name)
        except gexc.NotFound:
            return QueuedReading(name, None)
        state = queued.state.state.name
        node_state = None
        if state == "PROVISIONING":
            with contextlib.suppress(gexc.NotFound):  # not created yet
                node_state = hook.get_node(node_name).state.name
        return QueuedReading(queued.name, state, queued.create_time.timestamp(),
                             queued.state.failed_data.error.message or "", node_state)

    def _read_node(self, node_name: str) -> tuple[Any, Any]:
        """``(NodeReading, the node)`` (the node None when it is gone)."""
        from google.api_core import exceptions as gexc

        from ..supervisor.tpu_look import NodeReading

        try:
            node = self._tpu().get_node(node_name)
        except gexc.NotFound:
            return NodeReading(node_name, None), None
        return NodeReading(node_name, node.state.name, node.health.name,
                           tuple(s.symptom_type.name for s in node.symptoms), node.health_description or "",
                           _workers(node), dict(node.metadata).get(CHECKPOINT_REQUEST_ATTRIBUTE) or None), node

    def _new_audits(self, node_name: str, judge: Judge, started_at: float | None,
                    resource: str | None = None) -> list[Failure]:
        """The audit entries about the node not seen before (the observer de-duplicates them by ``insertId``),
        classified (:func:`~..policy.node_events.classify_audit_entries`). Read from a minute (ingestion delay)
        before the attempt started (``started_at``; unknown: now)."""
        from ..policy.node_events import classify_audit_entries

        since = datetime.fromtimestamp((started_at or self.clock()) - 60, tz=UTC)
        entries = self.hooks()[1].node_events(self.project_id, node_name, since)
        ids = [str(e.get("insertId")) for e in entries]
        fresh = set(judge(Look(resource or node_name, Platform.TPU, audit_ids=ids), Limits()).fresh_audit)
        return classify_audit_entries(e for e in entries if str(e.get("insertId")) in fresh)

    def end(self, name: str, wait: bool = True) -> Ended:
        """Delete ``name`` (and its queued resource) and wait until it is gone; ``keep_node`` does not keep it:
        the run goes on with a new node. ``wait=False`` (``EndAttempt(wait=False)``: the node runs nothing --
        preempted, terminated, in repair): request the deletion and return at once, so that the next node's create
        overlaps it; :meth:`submit` waits for it to be gone before the next attempt is watched (and, when the
        create is refused for quota meanwhile, before it creates once more)."""
        self._delete(name, wait)
        if not wait:
            self.deleting += self.slice_names(name)
        return Ended(self.clock())

    def _create_when_quota_frees(self, create: Callable[[], None], attempt: int) -> None:
        """``create()``; refused for quota while nodes :meth:`end` left are still being deleted
        (:func:`~..supervisor.tpu_look.create_after_deletion`: they may still count against it), wait until they
        are gone and ``create()`` once more -- what ending them with a wait would have done.

        Raises:
            google.api_core.exceptions.GoogleAPICallError: the create was refused (again).
        """
        from google.api_core import exceptions as gexc

        from ..supervisor.tpu_look import create_after_deletion

        try:
            create()
        except gexc.GoogleAPICallError as exc:
            if not self.deleting or not create_after_deletion(_refusal(exc)):
                raise
            log.info("Attempt %d: no quota while %s is being deleted; creating once it is gone", attempt,
                     ", ".join(self.deleting))
            self._wait_deleted()
            create()

    def _wait_deleted(self) -> None:
        """Wait until the nodes :meth:`end` left being deleted are gone (within :data:`DELETE_WAIT_SECONDS`)."""
        while self.deleting:
            self._tpu().wait_gone(self.deleting[0], DELETE_WAIT_SECONDS)
            log.info("Deleted node %s", self.deleting.pop(0))

    def release(self, name: str) -> None:
        """The run stops: delete the node and its queued resource, unless ``keep_node`` -- the user's own
        request to keep the last node for inspection."""
        if self.keep_node:
            self.live_node = self.live_queued = None
            log.info("Keeping node %s (keep_node=True): delete it yourself", name)
            return
        self._delete(name)

    def rebuild(self, task: Any, fallback_index: Callable[[str], int] = lambda zone: -1) -> RunState | None:
        """The run of ``task`` (an :class:`~..supervisor.reconcile.Owner`) rebuilt from its live nodes, for a
        task state store that holds none -- Airflow 3.1 and 3.2 have no task state store, so a retried task
        finds its run here.

        One ListNodes call per zone the run may use (the operator's and its fallbacks'); the nodes carrying the
        task instance's labels (:func:`~..specs.common.job_labels`), not being deleted. None when none is live
        (a first try, or every node of the run is gone: a new attempt then resumes from the latest complete
        checkpoint). Otherwise the run is RUNNING on the newest attempt's node -- watched, never created
        again -- with one attempt per ``resilient-attempt`` number up to it (earlier numbers carry no detail:
        their nodes are gone). ``fallback_index(zone)``: which fallback a zone is (-1: the operator's own).

        Raises:
            google.api_core.exceptions.GoogleAPICallError: a listing failed past the hook's retries.
        """
        from ..specs.common import LABEL_ATTEMPT, LABEL_SPARE, job_labels
        from ..supervisor.rebuild import rebuilt_run

        want = job_labels(task.dag_id, task.task_id, task.run_id, task.map_index, None)
        newest: tuple[int, str, Any] | None = None
        for zone in dict.fromkeys([self.zone, *self.fallback_zones]):
            for node in self._tpu().list_nodes(self.project_id, zone):
                labels = dict(node.labels)
                if node.state.name in ("DELETING", "HIDDEN") or any(labels.get(k) != v for k, v in want.items()):
                    continue
                text = labels.get(LABEL_ATTEMPT, "")
                number = int(text) if text.isascii() and text.isdigit() else 0
                if labels.get(LABEL_SPARE) == "true":  # no attempt ran on it: remembered, so a kill deletes it
                    self.spare, self.spare_attempt = node.name, number
                    continue
                name = (node.queued_resource.replace("/queuedResources/", "/nodes/") if node.queued_resource
                        else node.name)  # a multislice group's attempt is named after its queued resource
                if number and (newest is None or number > newest[0]):
                    newest = (number, name, node)
        if newest is None:
            return None
        number, name, node = newest
        history = [Attempt(n) for n in range(1, number)]
        history.append(Attempt(number, name, fallback_index(name.split("/")[3]), node.create_time.timestamp()))
        self.watching(name)
        rebuilt = rebuilt_run(history, name, live=True)  # a node not being deleted is the run's live attempt
        log.info("Attempt %d already has node %s (%s), %s (the task state store holds nothing for this task)",
                 number, name, node.state.name, rebuilt.then)
        return rebuilt.state

    def _delete(self, name: str, wait: bool = True) -> None:
        from ..specs.tpu import queued_resource_name

        self.live_node = self.live_queued = None
        self._granted = None
        owned = live_resources(name, queued_resource_name(name) if self.queued_resource else None)
        if self.slices > 1:  # the queued resource takes its nodes along; the wait covers each of them
            owned = owned[:1] + [OwnedResource(n, "tpu_node", None) for n in self.slice_names(name)]
        release_all(self._tpu(), [Release(r, "the attempt ends") for r in owned], DELETE_WAIT_SECONDS if wait else None)
        if wait:
            log.info("Deleted node %s", name)


def _refusal(exc: Any, now: float | None = None) -> Failure:
    """A refused create call (a ``GoogleAPICallError``) classified (:func:`~..policy.classify_create_error`: a
    stockout, quota ...), dated ``now``."""
    from ..policy import classify_create_error

    return classify_create_error(exc.grpc_status_code.value[0] if exc.grpc_status_code else exc.code, exc.message,
                                 platform=Platform.TPU, timestamp=now)


def _workers(node: Any) -> int:
    """How many worker VMs the node has (its accelerator type's hosts; 1 when the type is unknown)."""
    from ..specs.tpu import worker_count

    try:
        return worker_count(str(node.accelerator_type))
    except ValueError:
        return 1


__all__ = ["DELETE_WAIT_SECONDS", "TPUNodeBackend", "live_nodes", "live_resources", "release_all"]
