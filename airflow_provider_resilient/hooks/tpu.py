"""Cloud TPU hook (nodes, guest attributes) and the audit-log hook (maintenance, preemption, stockouts).

Both share :class:`~.base.GoogleApiHook`: credentials, the emulator override and transient API
errors retried with backoff. Long-running operations (CreateNode, DeleteNode) are waited for with
:meth:`ResilientTPUHook.wait_operation`, polled through the hook's ``sleep`` (so a test's stepped time reaches
those waits too); their errors (a stockout: RESOURCE_EXHAUSTED) are raised for the policy.
The create calls (CreateNode, CreateQueuedResource) are made with ``creating=True``: a RESOURCE_EXHAUSTED
answer to the call itself (a stockout or quota: RESOURCE_EXHAUSTED on create, which the policy classifies) is raised at
once for the policy instead of being retried here for ``api_retry_seconds``.

:class:`AsyncResilientTPUHook` is the async face used by :class:`~..triggers.tpu.TPUNodeTrigger`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ..clients import tpu_client
from .base import AsyncGoogleApiHook, GoogleApiHook

log = logging.getLogger(__name__)
GUEST_NAMESPACE = "resilient"
#: What the async TPU hook imports off the event loop (hooks/loading.py).
TPU_ASYNC_MODULES = ("google.api_core.exceptions", "tenacity",
                     "google.cloud.tpu_v2.services.tpu.transports.grpc_asyncio",
                     "google.cloud.tpu_v2alpha1.services.tpu.transports.grpc_asyncio")
#: The audit logs that hold TPU node events: System Event (``tpu.nodes.terminate`` / ``tpu.nodes.restart``:
#: Cloud TPU, "Manage maintenance events with Cloud TPU Pods") and Admin Activity (CreateNode / DeleteNode calls,
#: failed creates -- a stockout -- included).
AUDIT_LOGS = ("cloudaudit.googleapis.com%2Fsystem_event", "cloudaudit.googleapis.com%2Factivity")
#: How :meth:`ResilientTPUHook.wait_operation` polls a long-running operation: api_core's cadence
#: (``DEFAULT_POLLING``, without its jitter) -- the first look at once, the next after 1 s, each pause 1.5 times
#: the one before -- but at most 5 s, not api_core's 20 s: a node's create takes minutes and the run waits on it
#: (no training meanwhile), so READY is seen at most 5 s late instead of up to 20 s (a 90 s create: about 3 s late
#: instead of 11 s), for about 10 more GetOperation reads, a cheap call. :meth:`ResilientTPUHook.wait_gone` polls
#: every ``OPERATION_POLL_SECONDS``.
OPERATION_POLL_SECONDS = 1.0
OPERATION_POLL_MAX_SECONDS = 5.0
OPERATION_POLL_MULTIPLIER = 1.5


def audit_log_filter(project_id: str) -> str:
    """The Cloud Logging filter term selecting the :data:`AUDIT_LOGS` of ``project_id``:
    ``(logName="projects/P/logs/cloudaudit.googleapis.com%2Fsystem_event" OR logName="...%2Factivity")``."""
    return "(" + " OR ".join(f'logName="projects/{project_id}/logs/{log_id}"' for log_id in AUDIT_LOGS) + ")"


def _upcoming(node: Any) -> Any:
    """``node.upcoming_maintenance`` of a v2alpha1 node when it is set, else None."""
    return node.upcoming_maintenance if type(node).pb(node).HasField("upcoming_maintenance") else None


def _reports(response: Any) -> list[dict[str, str]]:
    return [{item.key: item.value for item in attrs.query_value.items if item.namespace == GUEST_NAMESPACE}
            for attrs in response.guest_attributes]


class ResilientTPUHook(GoogleApiHook):
    """Cloud TPU API calls (arguments: see :class:`~.base.GoogleApiHook`)."""

    def client(self) -> Any:
        if "tpu" not in self._clients:
            self._clients["tpu"] = tpu_client(credentials=self.credentials, emulator=self.emulator)
        return self._clients["tpu"]

    def create_node(self, project_id: str, zone: str, node_id: str, node: dict[str, Any],
                    timeout: float | None = 3600.0) -> Any:
        """Create a node and wait until it is READY (the operation's result); ``timeout`` None: return the
        operation at once (a spare node: nothing waits for it).

        An ALREADY_EXISTS (a retried call whose first try went through) returns the existing node. The call
        is made with ``creating=True``: RESOURCE_EXHAUSTED is not retried here.

        Args:
            node: a ``google.cloud.tpu_v2.Node`` as a dict (``accelerator_type``, ``runtime_version`` ...).
            timeout: seconds to wait for the operation; None: do not wait.

        Raises:
            google.api_core.exceptions.ResourceExhausted: a stockout or quota -- on the call or in the
                operation -- for the policy.
        """
        from google.api_core import exceptions as gexc

        parent = f"projects/{project_id}/locations/{zone}"
        try:
            operation = self.call(lambda: self.client().create_node(parent=parent, node_id=node_id, node=node,
                                                                    retry=None), creating=True)
        except gexc.AlreadyExists:
            log.info("Node %s/nodes/%s exists already: using it", parent, node_id)
            return self.get_node(f"{parent}/nodes/{node_id}")
        return operation if timeout is None else self.wait_operation(operation, timeout)

    def wait_operation(self, operation: Any, timeout: float) -> Any:
        """``operation.result()`` within ``timeout`` seconds: the operation is polled at once, then after each
        pause of the hook's ``sleep`` (:data:`OPERATION_POLL_SECONDS` growing to :data:`OPERATION_POLL_MAX_SECONDS`).
        The wait ends after ``timeout`` seconds of real time or of pauses, whichever comes first (the same with
        ``time.sleep``; with a test's stepped sleep, ``timeout`` seconds of the platform's time).

        Raises:
            concurrent.futures.TimeoutError: not done within ``timeout`` (the operation goes on).
            google.api_core.exceptions.GoogleAPICallError: the operation failed (a stockout: RESOURCE_EXHAUSTED).
        """
        from concurrent.futures import TimeoutError as FutureTimeout

        deadline = time.monotonic() + timeout
        pause, paused = OPERATION_POLL_SECONDS, 0.0
        while not operation.done():
            left = min(deadline - time.monotonic(), timeout - paused)
            if left <= 0:
                raise FutureTimeout(f"Operation {operation.operation.name} did not complete within {timeout:.0f} s")
            self._sleep(min(pause, left))
            paused += min(pause, left)
            pause = min(pause * OPERATION_POLL_MULTIPLIER, OPERATION_POLL_MAX_SECONDS)
        return operation.result()

    def get_node(self, name: str) -> Any:
        return self.call(lambda: self.client().get_node(name=name, retry=None))

    def list_nodes(self, project_id: str, zone: str) -> list[Any]:
        """Every node of ``projects/project_id/locations/zone`` (all pages)."""
        parent = f"projects/{project_id}/locations/{zone}"
        nodes: list[Any] = self.call(lambda: list(self.client().list_nodes(parent=parent, retry=None)))
        return nodes

    def delete_node(self, name: str, timeout: float | None = 1800.0) -> Any:
        """Delete a node and wait up to ``timeout`` seconds for it (None: do not wait); a node that is
        already gone is fine, and so is one already being deleted (FAILED_PRECONDITION, e.g. by a trigger's
        ``on_kill``): then this waits -- up to ``timeout`` -- until it is gone. Returns the operation, or None
        when the node was gone or being deleted.

        Raises:
            concurrent.futures.TimeoutError: the deletion did not finish within ``timeout`` (it goes on).
        """
        from google.api_core import exceptions as gexc

        try:
            operation = self.call(lambda: self.client().delete_node(name=name, retry=None))
        except gexc.NotFound:
            return None
        except gexc.FailedPrecondition as exc:
            log.info("Not deleting %s: %s", name, exc.message)
            if timeout is not None:
                self.wait_gone(name, timeout)
            return None
        if timeout is not None:
            self.wait_operation(operation, timeout)
        return operation

    def wait_gone(self, name: str, timeout: float) -> None:
        """Poll ``name`` until GetNode says NOT_FOUND, for at most ``timeout`` seconds.

        Raises:
            concurrent.futures.TimeoutError: it still exists after ``timeout`` seconds.
        """
        from concurrent.futures import TimeoutError as FutureTimeout

        from google.api_core import exceptions as gexc

        deadline = time.monotonic() + timeout
        while True:
            try:
                self.get_node(name)
            except gexc.NotFound:
                return
            if time.monotonic() > deadline:
                raise FutureTimeout(f"{name} still exists {timeout:.0f} s after its deletion began")
            self._sleep(min(OPERATION_POLL_SECONDS, timeout))

    def create_queued_resource(self, project_id: str, zone: str, resource_id: str, node: dict[str, Any], *,
                               spot: bool, valid_until_seconds: float | None, slices: int = 1) -> Any:
        """Request a node through a queued resource (capacity is granted when available). An existing one
        with this id (a retried call) is returned as is.

        Args:
            node: the node to create, as for :meth:`create_node`.
            valid_until_seconds: how long the request may wait for capacity (seconds); None: no limit.
            slices: more than 1: a multislice group of that many nodes ``<resource_id>-0`` ... through the
                ``tpu_v2alpha1`` API (``multi_node_params``: only v2alpha1 has it), all granted
                and deleted as one.

        Raises:
            google.api_core.exceptions.ResourceExhausted: quota or capacity, on the create call
                (``creating=True``: not retried here), for the policy.
        """
        from google.api_core import exceptions as gexc

        parent = f"projects/{project_id}/locations/{zone}"
        spec: dict[str, Any] = {"parent": parent, "node": node}
        if slices > 1:
            spec["multi_node_params"] = {"node_count": slices, "node_id_prefix": resource_id}
        else:
            spec["node_id"] = resource_id
        request: dict[str, Any] = {"tpu": {"node_spec": [spec]}}
        if spot:
            request["spot"] = {}
        if valid_until_seconds:
            request["queueing_policy"] = {"valid_until_duration": timedelta(seconds=valid_until_seconds)}
        client = self.alpha_client() if slices > 1 else self.client()
        with contextlib.suppress(gexc.AlreadyExists):  # a retried call whose first try went through
            self.call(lambda: client.create_queued_resource(
                parent=parent, queued_resource_id=resource_id, queued_resource=request, retry=None), creating=True)
        return self.get_queued_resource(f"{parent}/queuedResources/{resource_id}")

    def get_queued_resource(self, name: str) -> Any:
        return self.call(lambda: self.client().get_queued_resource(name=name, retry=None))

    def delete_queued_resource(self, name: str, timeout: float | None = 1800.0) -> Any:
        """Delete a queued resource and its node (force) and wait up to ``timeout`` seconds (None: do not
        wait); one already gone is fine. Returns the operation, or None when it was gone.

        Raises:
            concurrent.futures.TimeoutError: the deletion did not finish within ``timeout`` (it goes on).
        """
        from google.api_core import exceptions as gexc

        try:
            operation = self.call(lambda: self.client().delete_queued_resource(
                request={"name": name, "force": True}, retry=None))
        except gexc.NotFound:
            return None
        if timeout is not None:
            self.wait_operation(operation, timeout)
        return operation

    def worker_reports(self, name: str) -> list[dict[str, str]]:
        """Per worker VM (in worker order), the guest attributes our runner wrote: ``{"status": ..., ...}``."""
        return _reports(self.call(lambda: self.client().get_guest_attributes(
            request={"name": name, "query_path": f"{GUEST_NAMESPACE}/"}, retry=None)))

    def alpha_client(self) -> Any:
        """The ``tpu_v2alpha1`` client: the only API version with ``upcoming_maintenance`` (Cloud TPU API
        reference, https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/projects.locations.nodes)."""
        if "tpu_v2alpha1" not in self._clients:
            self._clients["tpu_v2alpha1"] = tpu_client(credentials=self.credentials, emulator=self.emulator,
                                                       version="v2alpha1")
        return self._clients["tpu_v2alpha1"]

    def hand_over(self, name: str, metadata: dict[str, str], labels: dict[str, str], timeout: float = 300.0) -> None:
        """Replace the node's ``metadata`` and ``labels`` whole (UpdateNode) and wait up to ``timeout`` seconds for
        the operation: a spare node taken by its attempt (:mod:`..supervisor.spare`).

        Raises:
            google.api_core.exceptions.GoogleAPICallError: the update failed past the hook's retries (NOT_FOUND:
                the spare is gone).
        """
        operation = self.call(lambda: self.client().update_node(
            node={"name": name, "metadata": metadata, "labels": labels},
            update_mask={"paths": ["metadata", "labels"]}, retry=None))
        self.wait_operation(operation, timeout)

    def wait_ready(self, name: str, timeout: float) -> Any:
        """Poll ``name`` until it is READY, for at most ``timeout`` seconds; the node.

        Raises:
            concurrent.futures.TimeoutError: not READY after ``timeout`` seconds.
            google.api_core.exceptions.NotFound: it is gone (a spare whose create failed or that was deleted).
            RuntimeError: it is in a state it will not come out of by itself (PREEMPTED, TERMINATED, STOPPED ...).
        """
        from concurrent.futures import TimeoutError as FutureTimeout

        deadline, pause = time.monotonic() + timeout, OPERATION_POLL_SECONDS
        while True:
            node = self.get_node(name)
            state = node.state.name
            if state == "READY":
                return node
            if state not in ("CREATING", "STARTING", "RESTARTING", "REPAIRING"):
                raise RuntimeError(f"{name} is {state}")
            if time.monotonic() > deadline:
                raise FutureTimeout(f"{name} is not READY {timeout:.0f} s after the wait began ({state})")
            self._sleep(min(pause, timeout))
            pause = min(pause * OPERATION_POLL_MULTIPLIER, OPERATION_POLL_MAX_SECONDS)

    def upcoming_maintenance(self, name: str) -> Any:
        """The node's announced maintenance (``tpu_v2alpha1.UpcomingMaintenance``; v2alpha1 GetNode), or None."""
        node = self.call(lambda: self.alpha_client().get_node(name=name, retry=None))
        return _upcoming(node)

    def request_checkpoint(self, name: str, token: str, timeout: float = 300.0) -> None:
        """Set the node's metadata ``resilient-checkpoint-request`` to ``token`` (UpdateNode, the other metadata
        kept) and wait up to ``timeout`` seconds for the operation: each worker's runner passes it on to the
        workload (:mod:`..worker.runner`, 4b).

        Raises:
            google.api_core.exceptions.GoogleAPICallError: the update failed past the hook's retries.
        """
        from ..worker.protocol import CHECKPOINT_REQUEST_ATTRIBUTE

        metadata = dict(self.get_node(name).metadata)
        metadata[CHECKPOINT_REQUEST_ATTRIBUTE] = token
        operation = self.call(lambda: self.client().update_node(
            node={"name": name, "metadata": metadata}, update_mask={"paths": ["metadata"]}, retry=None))
        self.wait_operation(operation, timeout)

    def simulate_maintenance_event(self, name: str, worker_ids: Sequence[str] = (), timeout: float = 300.0) -> Any:
        """v2alpha1 SimulateMaintenanceEvent on ``worker_ids`` (empty: worker 0); waits for the operation."""
        operation = self.call(lambda: self.alpha_client().simulate_maintenance_event(
            request={"name": name, "worker_ids": list(worker_ids)}, retry=None))
        return self.wait_operation(operation, timeout)


class AuditLogHook(GoogleApiHook):
    """Cloud Audit Logs entries about TPU nodes (``tpu.nodes.terminate`` / ``tpu.nodes.restart``: Cloud TPU,
    "Manage maintenance events with Cloud TPU Pods", https://cloud.google.com/tpu/docs/maintenance-events)."""

    def client(self) -> Any:
        if "logging" not in self._clients:
            from ..logging_clients import logging_gapic_client

            self._clients["logging"] = logging_gapic_client(credentials=self.credentials, emulator=self.emulator)
        return self._clients["logging"]

    def node_events(self, project_id: str, node_name: str, since: datetime) -> list[dict[str, Any]]:
        """Audit entries about ``node_name`` since ``since`` (an aware datetime), oldest first, as JSON dicts
        (``protoPayload.methodName``, ``protoPayload.metadata.terminateReason``, ``insertId`` ...).

        Both logs of :data:`AUDIT_LOGS` are read: System Event (maintenance and preemption) and
        Admin Activity, where Google writes the CreateNode calls -- failed ones (a stockout) included.
        Entries reach Cloud Logging some seconds after the event (ingestion delay): callers look back a
        little before the time they last looked.
        """
        from google.cloud.audit import audit_log_pb2  # noqa: F401 -- registers AuditLog for the Any payload
        from google.cloud.logging_v2.types import LogEntry
        from google.protobuf.json_format import MessageToDict

        text = (f'{audit_log_filter(project_id)} AND protoPayload.resourceName="{node_name}" '
                f'AND timestamp>="{since.isoformat()}"')
        request = {"resource_names": [f"projects/{project_id}"], "filter": text, "order_by": "timestamp asc"}
        pager = self.call(lambda: self.client().list_log_entries(request=request, retry=None))
        return [MessageToDict(LogEntry.pb(entry)) for entry in pager]


class AsyncResilientTPUHook(AsyncGoogleApiHook):
    """The async face of :class:`ResilientTPUHook` for triggers and async code (same arguments); transient
    API errors are retried with backoff for up to ``api_retry_seconds`` as in the sync hook.

    Create and use it inside one event loop (the gRPC channel binds to it) and :meth:`close` it there.
    """

    MODULES = TPU_ASYNC_MODULES

    def __init__(self, gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | Sequence[str] | None = None, *, emulator: str | None = None,
                 api_retry_seconds: float = 600.0) -> None:
        super().__init__(ResilientTPUHook(gcp_conn_id, impersonation_chain, emulator=emulator,
                                          api_retry_seconds=api_retry_seconds))
        self._client: Any = None

    def client(self) -> Any:
        """The ``TpuAsyncClient``; after :meth:`open` (the calls await it)."""
        if self._client is None:
            from ..clients import tpu_async_client

            self._client = tpu_async_client(credentials=self.sync.credentials, emulator=self.sync.emulator)
        return self._client

    async def get_node(self, name: str) -> Any:
        return await self.call(lambda: self.client().get_node(name=name, retry=None))

    async def get_queued_resource(self, name: str) -> Any:
        return await self.call(lambda: self.client().get_queued_resource(name=name, retry=None))

    async def worker_reports(self, name: str) -> list[dict[str, str]]:
        """As :meth:`ResilientTPUHook.worker_reports`."""
        return _reports(await self.call(lambda: self.client().get_guest_attributes(
            request={"name": name, "query_path": f"{GUEST_NAMESPACE}/"}, retry=None)))

    def alpha_client(self) -> Any:
        """The v2alpha1 ``TpuAsyncClient``; after :meth:`open`."""
        if getattr(self, "_alpha", None) is None:
            from ..clients import tpu_async_client

            self._alpha = tpu_async_client(credentials=self.sync.credentials, emulator=self.sync.emulator,
                                           version="v2alpha1")
        return self._alpha

    async def upcoming_maintenance(self, name: str) -> Any:
        """As :meth:`ResilientTPUHook.upcoming_maintenance`."""
        return _upcoming(await self.call(lambda: self.alpha_client().get_node(name=name, retry=None)))

    async def close(self) -> None:
        """Close the gRPC channel of the client made so far (in the event loop that used it). Idempotent."""
        client, self._client = self._client, None
        alpha, self._alpha = getattr(self, "_alpha", None), None
        for made in (client, alpha):
            if made is not None:
                await made.transport.close()


__all__ = ["GUEST_NAMESPACE", "AsyncResilientTPUHook", "AuditLogHook", "ResilientTPUHook", "audit_log_filter"]
