"""Cloud TPU nodes and queued resources (moto-style backend), following Cloud TPU's "Manage maintenance events with
Cloud TPU Pods" (https://cloud.google.com/tpu/docs/maintenance-events).

A node of accelerator type T has :func:`.topology.worker_count` worker VMs. Each worker runs the node's
``startup-script`` metadata with bash as a local process, at creation and after every restart, with
``GCE_METADATA_HOST`` pointing at that worker's :class:`.metadata.MetadataServer`, ``TPU_WORKER_ID`` and
``STORAGE_EMULATOR_HOST`` set. Lifecycle::

    CreateNode -> CREATING -(tpu_create_seconds)-> READY/HEALTHY, startup scripts run   (LRO done)
                         \\-> stockout fault: the LRO fails RESOURCE_EXHAUSTED, CreateNode audit entry ERROR
    READY -- maintenance (recover) -> SIGTERM workers, REPAIRING / UNHEALTHY_MAINTENANCE, audit
             ``tpu.nodes.restart`` -(tpu_repair_seconds)-> READY/HEALTHY, startup scripts run again
          -- maintenance (no recovery) -> SIGTERM workers; once they are gone (the fault's ``grace_seconds``: the
             guest's notice, still READY meanwhile) TERMINATED, audit ``tpu.nodes.terminate``
          -- scheduled maintenance -> announced: ``upcoming_maintenance`` PENDING (v2alpha1 GetNode) with its
             window; at the window's start ONGOING and a maintenance event with recovery (above), REPAIRING for
             the fault's ``window_seconds``; READY again with no notice. ``SimulateMaintenanceEvent`` (v2alpha1)
             starts one at once.
          -- preemption -> SIGTERM workers (a Spot VM's preemption notice: the ACPI G2 Soft Off, the G3 Mechanical
             Off ``grace_seconds`` later); once they are gone PREEMPTED, audit ``tpu.nodes.terminate`` (reason:
             preempted)
          -- unhealthy -> health TIMEOUT / UNHEALTHY_TENSORFLOW, symptoms
          -- crash / hang -> the workload process of one worker gets the signal / SIGSTOP
    StopNode -> STOPPING -> STOPPED; StartNode -> STARTING -> READY (scripts run); DeleteNode -> DELETING -> gone

Queued resources: ACCEPTED -(tpu_queue_seconds)-> PROVISIONING -> the node is created -> ACTIVE when it
is READY; a ``never_provision`` fault keeps it WAITING_FOR_RESOURCES, and past the queueing policy's
``valid_until_duration`` it becomes FAILED.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clock import Clock, ManualClock, SystemClock
from ..cloud_logging.service import ACTIVITY_LOG
from ..config import EmulatorConfig
from ..errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, Unavailable
from ..faults import (
    CREATE_KINDS,
    GET_KINDS,
    PROVISIONING_KINDS,
    QUEUED_RESOURCE_KINDS,
    TPU_BOOT_KINDS,
    TPU_RUNNING_KINDS,
    Fault,
    FaultBook,
)
from ..operations import OperationStore
from .catalog import check_create
from .metadata import MetadataServer
from .topology import chips_per_host, worker_count
from .workers import Worker

log = logging.getLogger(__name__)
TPU_SERVICE = "tpu.googleapis.com"
#: An emulated TPU VM's disks: a 100 GB boot disk with 80 GB free; ``/dev/shm`` half of its memory.
VM_ROOT_FREE_BYTES = 80 * 1000**3
VM_SHM_FREE_BYTES = 200 * 1000**3
#: The port of a multislice group's coordinator (``MEGASCALE_PORT``).
MEGASCALE_PORT = 8080
#: The label of a spare node (the provider's ``specs.common.LABEL_SPARE``): a node made before an attempt needs it,
#: running a startup script that waits. The running faults of a job do not strike it until an attempt takes it (the
#: label goes), and from then their ``after_seconds`` count from that moment: a fault injected "N s after the job's
#: processes started" means the attempt's processes, not the waiting script's.
SPARE_LABEL = "resilient-spare"
#: On a :class:`~..clock.ManualClock`, the file that holds the platform's time (epoch seconds) for the worker VMs'
#: clock (the worker runner's heartbeat reads it: ``worker/runner.py``, ``EMULATED_CLOCK_ENV``), kept current by
#: every tick; so a VM's heartbeat moves with the platform's time, not the wall clock's.
EMULATED_CLOCK_ENV = "RESILIENT_EMULATED_CLOCK"
_SIGNAL_FOR_EXIT = {6: signal.SIGABRT, 134: signal.SIGABRT, 11: signal.SIGSEGV, 139: signal.SIGSEGV,
                    143: signal.SIGTERM, 15: signal.SIGTERM}


def _rfc3339(moment: Any) -> str:
    """``2026-11-25T22:00:00.000000Z`` (the TPU API's timestamp strings)."""
    return str(moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def _types() -> Any:
    from google.cloud.tpu_v2 import types

    return types


@dataclass
class NodeRun:
    """The platform side of one node."""

    node: Any
    zone: str
    project: str
    workers: list[Worker]
    phase: str = "creating"
    next_at: float = 0.0
    operation: str | None = None
    ready_at: float = 0.0
    fired: set[tuple[int, int]] = field(default_factory=set)
    events: list[str] = field(default_factory=list)
    term_deadline: float | None = None
    after_termination: str = "down"  # the phase once the workers are gone: "repairing" or "down"
    #: The node's state and the audit entry's terminate reason once its workers are gone (a preemption, a
    #: maintenance event without recovery): the API shows the node READY while its guests have their notice.
    down_state: tuple[str, str] | None = None
    #: The VM's make-up its workers see (the worker runner's pre-check reads it): host names of the slice, free bytes
    #: of its disks by path (``RESILIENT_EMULATED_FREE_BYTES``); boot faults change them.
    hostnames: list[str] = field(default_factory=list)
    free_bytes: dict[str, int] = field(default_factory=dict)
    #: The announced maintenance (``tpu_v2alpha1.UpcomingMaintenance`` as a dict; None: none), when its window
    #: starts (the emulator's monotonic seconds) and how long the node is then REPAIRING (real seconds).
    upcoming: dict[str, Any] | None = None
    window_at: float | None = None
    window_seconds: float | None = None
    window_grace: float = 1.0
    #: Multislice: this node's slice id, the number of slices and the coordinator (slice 0's worker 0) of its
    #: queued resource's group; ``num_slices`` 1 for a node on its own.
    slice_id: int = 0
    num_slices: int = 1

    @property
    def name(self) -> str:
        return str(self.node.name)


class TpuService:
    """All TPU nodes and queued resources of the emulator.

    Args:
        audit: writes a Cloud Audit Logs entry: ``audit(project, method_name=..., resource_name=...,
            severity=..., terminate_reason=..., status_code=..., status_message=...)``.
        clock: where every verb and tick reads the time (:mod:`..clock`; default: real time).
    """

    def __init__(self, config: EmulatorConfig, faults: FaultBook, operations: OperationStore, work_dir: Path,
                 workload_env: Callable[[], dict[str, str]], audit: Callable[..., None],
                 clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.faults = faults
        self.operations = operations
        self.work_dir = work_dir
        self.workload_env = workload_env
        self.audit = audit
        self.lock = threading.RLock()
        self.nodes: dict[str, NodeRun] = {}
        self.queued: dict[str, dict[str, Any]] = {}  # name -> {"qr": QueuedResource, "phase", "next_at", ...}
        self.all_workers: list[Worker] = []  # of deleted nodes too, so processes() can prove nothing survived
        self._broken: set[str] = set()  # nodes / queued resources whose advance raised (logged once)
        self._ids = itertools.count(7_000_000_000_000_000_000 + (config.seed or 0) * 1000)
        self._vm_clock: tuple[Path, float] | None = None  # the VMs' clock file and the time it holds (ManualClock)

    # ------------------------------------------------------------------ helpers
    def _later(self, now: float, seconds: float) -> float:
        return now + self.config.scaled(seconds)

    def _run(self, name: str) -> NodeRun:
        run = self.nodes.get(name)
        if run is None:
            raise NotFound(f"Resource '{name}' was not found")
        return run

    def _op_name(self, parent: str) -> str:
        return f"{parent}/operations/operation-{self.operations.next_id()}"

    def _metadata(self, run: NodeRun, verb: str) -> Any:
        types = _types()
        return types.OperationMetadata.pb(types.OperationMetadata(create_time=self.clock.now(), target=run.name,
                                                                  verb=verb, api_version="v2"))

    def _set_state(self, run: NodeRun, state: str, health: str | None = None) -> None:
        types = _types()
        run.node.state = getattr(types.Node.State, state)
        if health is not None:
            run.node.health = getattr(types.Node.Health, health)
        run.events.append(state if health is None else f"{state}/{health}")

    @staticmethod
    def device_root(worker: Worker) -> Path:
        """The worker VM's ``/dev`` (``RESILIENT_DEVICE_ROOT``): ``accelN`` per TPU chip, ``shm``."""
        return worker.log_path.parent / f"dev-{worker.index}"

    def _worker_env(self, run: NodeRun, worker: Worker) -> dict[str, str]:
        env = dict(self.workload_env())
        dev = self.device_root(worker)
        free = {"/": VM_ROOT_FREE_BYTES, str(dev / "shm"): VM_SHM_FREE_BYTES}
        free.update({str(dev / "shm") if path == "/dev/shm" else path: n for path, n in run.free_bytes.items()})
        if isinstance(self.clock, ManualClock):
            env[EMULATED_CLOCK_ENV] = str(self._publish_clock())
        env.update({"GCE_METADATA_HOST": worker.metadata.address, "TPU_WORKER_ID": str(worker.index),
                    "TPU_NAME": run.name.rsplit("/", 1)[1], "TPU_ACCELERATOR_TYPE": run.node.accelerator_type,
                    "TPU_WORKER_HOSTNAMES": ",".join(run.hostnames), "RESILIENT_DEVICE_ROOT": str(dev),
                    "RESILIENT_EMULATED_FREE_BYTES": json.dumps(free)})
        if run.num_slices > 1:  # Multislice: what Cloud TPU gives each worker of a slice of the group
            env.update({"MEGASCALE_COORDINATOR_ADDRESS": f"{run.hostnames[0] if run.hostnames else '127.0.0.1'}:"
                                                         f"{MEGASCALE_PORT}",
                        "MEGASCALE_NUM_SLICES": str(run.num_slices), "MEGASCALE_SLICE_ID": str(run.slice_id),
                        "MEGASCALE_PORT": str(MEGASCALE_PORT)})
        return env

    def _make_devices(self, run: NodeRun) -> None:
        """Each worker VM's ``/dev``: its TPU chips (``accel0``...) and ``shm``."""
        chips = chips_per_host(run.node.accelerator_type)
        for worker in run.workers:
            dev = self.device_root(worker)
            (dev / "shm").mkdir(parents=True, exist_ok=True)
            for n in range(chips):
                (dev / f"accel{n}").touch()

    def _lose_chips(self, run: NodeRun, fault: Fault) -> None:
        """``hardware``: ``fault.chips`` TPU chips of worker ``fault.worker`` vanish (all when None)."""
        worker = run.workers[min(fault.worker, len(run.workers) - 1)]
        chips = sorted(self.device_root(worker).glob("accel*"))
        for path in chips[:fault.chips or len(chips)]:
            path.unlink()
        run.events.append(f"chips lost on worker {worker.index}")

    def _strike_at_boot(self, run: NodeRun) -> None:
        """The make-up faults the pre-check finds, before the startup scripts run: ``hardware`` without a timing and
        ``preflight``."""
        for index, fault in self.faults.candidates(TPU_BOOT_KINDS, run.name, 1):
            if fault.kind == "hardware" and (fault.at_step is not None or fault.after_seconds is not None):
                continue
            if not self.faults.fire(index, f"{run.name}:boot:{len(run.events)}"):
                continue
            run.events.append(f"fault {fault.kind}")
            if fault.kind == "hardware":
                self._lose_chips(run, fault)
            elif fault.item == "dns":
                run.hostnames = [*run.hostnames[:-1], f"worker-{len(run.hostnames) - 1}.invalid"]
            else:
                run.free_bytes["/" if fault.item == "disk-size root" else "/dev/shm"] = (
                    1000**3 if fault.item == "disk-size root" else 64 * 2**20)

    def _boot(self, run: NodeRun, now: float) -> None:
        self._strike_at_boot(run)
        script = dict(run.node.metadata).get("startup-script", "")
        for worker in run.workers:
            worker.start(script, self._worker_env(run, worker))
        run.ready_at = now
        if run.upcoming is not None and run.upcoming.get("maintenance_status") == "ONGOING":
            run.upcoming = None  # the maintenance is over
        self._set_state(run, "READY", "HEALTHY")
        run.node.health_description = ""
        run.phase = "ready"

    # ------------------------------------------------------------------ Node verbs
    def create_node(self, parent: str, node_id: str, node: Any, *, queued_resource: str | None = None,
                    slice_id: int = 0, num_slices: int = 1) -> Any:
        """CreateNode: validate, CREATING, return the pending operation."""
        types = _types()
        if not node_id:
            raise InvalidArgument("node_id is required")
        check_create(parent, node_id, node.accelerator_type, node.runtime_version)
        count = worker_count(node.accelerator_type)
        name = f"{parent}/nodes/{node_id}"
        project, zone = parent.split("/")[1], parent.split("/")[3]
        if not queued_resource:  # a queued resource's node was already let through at its own create
            self._check_quota(node_id, dict(node.labels), f"create:{name}", parent)
        with self.lock:
            if name in self.nodes:
                raise AlreadyExists(f"Resource '{name}' already exists")
            created = types.Node(node)
            created.name = name
            created.create_time = self.clock.now()
            created.id = next(self._ids)
            created.api_version = types.Node.ApiVersion.V2
            if queued_resource:
                created.queued_resource = queued_resource
            created.network_endpoints = [{"ip_address": "127.0.0.1", "port": 8470} for _ in range(count)]
            log_dir = self.work_dir / "tpu" / node_id
            run = NodeRun(created, zone, project, [], slice_id=slice_id, num_slices=num_slices)
            created.multislice_node = num_slices > 1
            run.workers = [Worker(i, MetadataServer(i, self._attributes_of(run, i)), log_dir / f"worker-{i}.log")
                           for i in range(count)]
            self.all_workers.extend(run.workers)
            run.hostnames = ["127.0.0.1"] * count  # the workers' internal IPs (network_endpoints)
            self._make_devices(run)
            self._set_state(run, "CREATING")
            run.next_at = self._later(self.clock.monotonic(), self.config.latencies.tpu_create_seconds)
            op_name = self._op_name(parent)
            run.operation = op_name
            self.nodes[name] = run
            self.faults.job_created(name, node_id, dict(created.labels))
            return self.operations.start(op_name, self._metadata(run, "create"))

    def _attributes_of(self, run: NodeRun, index: int) -> Callable[[], dict[str, str]]:
        def attributes() -> dict[str, str]:
            attrs = dict(run.node.metadata)
            attrs.update({"agent-worker-number": str(index), "accelerator-type": run.node.accelerator_type,
                          "instance-id": f"{run.node.id}-{index}", "instance-name": f"worker-{index}",
                          "worker-network-endpoints": ",".join(f"{i}:127.0.0.1" for i in range(len(run.workers)))})
            return attrs

        return attributes

    def _check_quota(self, display: str, labels: dict[str, str], key: str, parent: str) -> None:
        """Refuse a create call with 429 RESOURCE_EXHAUSTED when a ``quota`` fault with ``service: tpu``
        fires (the call itself fails; compare a stockout, which fails the create operation)."""
        fault = self.faults.on_call(CREATE_KINDS, display, labels, key, parent, service="tpu")
        if fault is not None:
            raise ResourceExhausted(f"The following quota metrics exceed quota limits: {fault.quota_metric}")

    def _check_unavailable(self, calls: str, key: str, name: str, run: NodeRun | None = None) -> None:
        """Answer UNAVAILABLE when an ``unavailable`` fault with ``service: tpu`` fires for this call."""
        display, labels = (run.node.name.rsplit("/", 1)[-1], dict(run.node.labels)) if run else ("", {})
        if self.faults.on_call(GET_KINDS, display, labels, key, name, calls=calls, service="tpu") is not None:
            raise Unavailable("The service is currently unavailable.")

    def get_node(self, name: str) -> Any:
        with self.lock:
            run = self._run(name)
            self._check_unavailable("get", f"get:{name}", name, run)
            return _types().Node(run.node)

    def list_nodes(self, parent: str) -> list[Any]:
        self._check_unavailable("list", f"list:{parent}", parent)
        with self.lock:
            return [_types().Node(r.node) for n, r in self.nodes.items() if n.startswith(parent + "/")]

    def delete_node(self, name: str) -> Any:
        """DeleteNode: the node goes DELETING, then is gone after ``tpu_delete_seconds``.

        A node already DELETING refuses a second delete (FAILED_PRECONDITION) and keeps its one operation, so
        whoever asked first still sees that operation finish. An operation still in flight on the node (a
        create, a stop, a start) ends with ABORTED: a caller waiting on it is never left waiting forever.
        """
        with self.lock:
            run = self._run(name)
            if run.phase == "deleting":
                raise FailedPrecondition(f"Node {name} is DELETING; it will be gone shortly")
            if run.operation is not None:
                self.operations.finish(run.operation, error=(10, f"Node {name} is being deleted"))
            for worker in run.workers:
                worker.stop()
            self._set_state(run, "DELETING")
            run.phase = "deleting"
            run.next_at = self._later(self.clock.monotonic(), self.config.latencies.tpu_delete_seconds)
            run.operation = self._op_name(name.rsplit("/nodes/", 1)[0])
            return self.operations.start(run.operation, self._metadata(run, "delete"))

    def stop_node(self, name: str) -> Any:
        with self.lock:
            run = self._run(name)
            if run.phase not in ("ready",):
                raise FailedPrecondition(f"Node {name} is {run.node.state.name}; only a READY node can be stopped")
            for worker in run.workers:
                worker.stop()
            self._set_state(run, "STOPPING")
            run.phase = "stopping"
            run.next_at = self._later(self.clock.monotonic(), self.config.latencies.tpu_delete_seconds)
            run.operation = self._op_name(name.rsplit("/nodes/", 1)[0])
            return self.operations.start(run.operation, self._metadata(run, "stop"))

    def start_node(self, name: str) -> Any:
        with self.lock:
            run = self._run(name)
            if run.phase != "stopped":
                raise FailedPrecondition(f"Node {name} is {run.node.state.name}; only a STOPPED node can start")
            self._set_state(run, "STARTING")
            run.phase = "starting"
            run.next_at = self._later(self.clock.monotonic(), self.config.latencies.tpu_create_seconds / 3)
            run.operation = self._op_name(name.rsplit("/nodes/", 1)[0])
            return self.operations.start(run.operation, self._metadata(run, "start"))

    def get_guest_attributes(self, name: str, query_path: str, worker_ids: list[str]) -> list[Any]:
        types = _types()
        with self.lock:
            run = self._run(name)
            self._check_unavailable("get", f"attributes:{name}", name, run)
            wanted = {int(w) for w in worker_ids if str(w).isdigit()} if worker_ids and "all" not in worker_ids \
                else {w.index for w in run.workers}
            out = []
            for worker in run.workers:
                if worker.index not in wanted:
                    continue
                items = []
                for path, value in worker.metadata.guest(query_path).items():
                    namespace, _, key = path.partition("/")
                    items.append(types.GuestAttributesEntry(namespace=namespace, key=key, value=value))
                out.append(types.GuestAttributes(query_path=query_path,
                                                 query_value=types.GuestAttributesValue(items=items)))
            return out

    # ------------------------------------------------------------------ queued resources
    def create_queued_resource(self, parent: str, queued_resource_id: str, queued_resource: Any,
                               slices: tuple[int, str] | None = None) -> Any:
        """CreateQueuedResource (v2; v2alpha1 with ``slices``: its node spec's ``multi_node_params`` as
        ``(node_count, node_id_prefix)`` -- the group's nodes are ``<prefix>-0`` ... ``<prefix>-<count - 1>``)."""
        types = _types()
        name = f"{parent}/queuedResources/{queued_resource_id}"
        specs = list(queued_resource.tpu.node_spec)
        if len(specs) != 1:
            raise InvalidArgument("queued_resource.tpu.node_spec: exactly one node spec is supported")
        if slices is not None and (slices[0] < 2 or specs[0].node_id):
            raise InvalidArgument("queued_resource.tpu.node_spec[0]: multi_node_params.node_count must be > 1, and "
                                  "node_id must not be given with multi_node_params")
        spec = specs[0]
        node_id = f"{slices[1] or queued_resource_id}-0" if slices is not None else spec.node_id
        check_create(spec.parent or parent, node_id, spec.node.accelerator_type, spec.node.runtime_version)
        self._check_quota(queued_resource_id, dict(specs[0].node.labels), f"create:{name}", parent)
        with self.lock:
            if name in self.queued:
                raise AlreadyExists(f"Resource '{name}' already exists")
            qr = types.QueuedResource(queued_resource)
            qr.name = name
            qr.create_time = self.clock.now()
            qr.state = types.QueuedResourceState(state=types.QueuedResourceState.State.ACCEPTED)
            valid = qr.queueing_policy.valid_until_duration if "queueing_policy" in qr else None
            now = self.clock.monotonic()
            self.queued[name] = {"qr": qr, "phase": "accepted", "next_at": self._later(now, self.config.latencies.
                                                                                         tpu_queue_seconds),
                                 "expires_at": now + valid.total_seconds() if valid else None,
                                 "slices": (slices[0], slices[1] or queued_resource_id) if slices else None}
            self.faults.job_created(name, queued_resource_id, {})
            op_name = self._op_name(parent)
            self.operations.start(op_name, types.OperationMetadata.pb(types.OperationMetadata(
                create_time=self.clock.now(), target=name, verb="create", api_version="v2")))
            self.operations.finish(op_name, types.QueuedResource.pb(types.QueuedResource(qr)))
            return self.operations.get(op_name)

    def get_queued_resource(self, name: str) -> Any:
        with self.lock:
            entry = self.queued.get(name)
            if entry is None:
                raise NotFound(f"Resource '{name}' was not found")
            self._check_unavailable("get", f"get:{name}", name)
            return _types().QueuedResource(entry["qr"])

    def list_queued_resources(self, parent: str) -> list[Any]:
        self._check_unavailable("list", f"list-queued:{parent}", parent)
        with self.lock:
            return [_types().QueuedResource(e["qr"]) for n, e in self.queued.items() if n.startswith(parent + "/")]

    def delete_queued_resource(self, name: str, force: bool) -> Any:
        types = _types()
        with self.lock:
            entry = self.queued.get(name)
            if entry is None:
                raise NotFound(f"Resource '{name}' was not found")
            nodes = [n for n in entry.get("nodes", [entry.get("node")]) if n in self.nodes]
            if nodes and not force:
                raise FailedPrecondition(f"Queued resource {name} still has node {nodes[0]}: delete it first or "
                                         "use force")
            for node in nodes:
                if self.nodes[node].phase != "deleting":
                    self.delete_node(node)
            del self.queued[name]
            op_name = self._op_name(name.rsplit("/queuedResources/", 1)[0])
            self.operations.start(op_name, types.OperationMetadata.pb(types.OperationMetadata(target=name,
                                                                                                verb="delete")))
            self.operations.finish(op_name)
            return self.operations.get(op_name)

    def _advance_queued(self, name: str, entry: dict[str, Any], now: float) -> None:
        types = _types()
        qr, state = entry["qr"], types.QueuedResourceState.State
        if entry["phase"] in ("failed", "active"):
            if entry["phase"] == "active" and any(n not in self.nodes for n in entry["nodes"]):
                qr.state = types.QueuedResourceState(state=state.SUSPENDED)
            return
        if entry["expires_at"] is not None and now >= entry["expires_at"] and entry["phase"] != "provisioning":
            qr.state = types.QueuedResourceState(state=state.FAILED, failed_data={"error": {
                "code": 4, "message": "The queued resource expired: valid_until_duration passed before capacity "
                                      "was available."}})
            entry["phase"] = "failed"
            return
        if now < entry["next_at"]:
            return
        if entry["phase"] == "accepted":
            candidates = self.faults.candidates(QUEUED_RESOURCE_KINDS, name, 1)
            if any(self.faults.fire(i, f"{name}:queue") for i, _ in candidates) or entry.get("waiting"):
                entry["waiting"] = True
                qr.state = types.QueuedResourceState(state=state.WAITING_FOR_RESOURCES)
                return
            spec = qr.tpu.node_spec[0]
            count, prefix = entry["slices"] or (1, "")
            ids = [f"{prefix}-{i}" for i in range(count)] if entry["slices"] else [spec.node_id]
            for index, node_id in enumerate(ids):  # a multislice group: every slice at once, or none
                self.create_node(spec.parent, node_id, spec.node, queued_resource=name, slice_id=index,
                                 num_slices=count)
            entry["nodes"] = [f"{spec.parent}/nodes/{node_id}" for node_id in ids]
            entry["node"] = entry["nodes"][0]
            entry["phase"] = "provisioning"
            qr.state = types.QueuedResourceState(state=state.PROVISIONING)
        elif entry["phase"] == "provisioning":
            runs = [self.nodes.get(n) for n in entry["nodes"]]
            if any(run is None for run in runs):
                for node in entry["nodes"]:  # a group is granted whole: a slice without capacity fails them all
                    if node in self.nodes and self.nodes[node].phase != "deleting":
                        self.delete_node(node)
                qr.state = types.QueuedResourceState(state=state.FAILED, failed_data={"error": {
                    "code": 8, "message": "There is no more capacity in the zone."}})
                entry["phase"] = "failed"
            elif all(run is not None and run.phase == "ready" for run in runs):
                qr.state = types.QueuedResourceState(state=state.ACTIVE)
                entry["phase"] = "active"

    # ------------------------------------------------------------------ engine
    def _publish_clock(self) -> Path:
        """Write the platform's time to the VMs' clock file when it moved (write and rename: a reader never sees
        half a number); return the file. Under :attr:`lock`."""
        path = self.work_dir / "tpu" / "clock"
        now = self.clock.time()
        if self._vm_clock != (path, now):
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            partial.write_text(repr(now))
            partial.replace(path)
            self._vm_clock = (path, now)
        return path

    def tick(self, now: float | None = None) -> None:
        now = self.clock.monotonic() if now is None else now
        with self.lock:  # one resource's error never stops the others (it is logged once)
            if isinstance(self.clock, ManualClock) and any(w.alive() for r in self.nodes.values() for w in r.workers):
                self._publish_clock()  # (a VM that boots later gets it written then: _worker_env)
            for name, run in list(self.nodes.items()):
                with self._guarded(name):
                    self._advance(run, now)
                if run.phase == "gone":
                    del self.nodes[name]
            for name, entry in list(self.queued.items()):
                with self._guarded(name):
                    self._advance_queued(name, entry, now)

    @contextlib.contextmanager
    def _guarded(self, name: str) -> Iterator[None]:
        try:
            yield
        except Exception:
            if name not in self._broken:
                self._broken.add(name)
                log.exception("emulator: advancing %s failed", name)

    def _advance(self, run: NodeRun, now: float) -> None:
        types = _types()
        if run.phase == "creating" and now >= run.next_at:
            for index, _ in self.faults.candidates(PROVISIONING_KINDS, run.name, 1):
                if self.faults.fire(index, f"{run.name}:create"):
                    message = (f'There is no more capacity in the zone "{run.zone}"; you can try in another zone '
                               "where Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions)")
                    # A failed CreateNode is an Admin Activity entry (the call was the user's), unlike the
                    # system events of maintenance, which Google writes to system_event.
                    self.audit(run.project, method_name="google.cloud.tpu.v2.Tpu.CreateNode",
                               resource_name=run.name, severity="ERROR", status_code=8, status_message=message,
                               log=ACTIVITY_LOG)
                    assert run.operation is not None
                    self.operations.finish(run.operation, error=(8, message))
                    for worker in run.workers:
                        worker.metadata.stop()
                    run.phase = "gone"
                    return
            self._boot(run, now)
            assert run.operation is not None
            self.operations.finish(run.operation, types.Node.pb(types.Node(run.node)))
        elif run.phase == "ready":
            if run.window_at is not None and now >= run.window_at:
                self._maintain(run, now)
            else:
                self._strike(run, now)
        elif run.phase == "terminating" and run.term_deadline is not None and now >= run.term_deadline:
            for worker in run.workers:
                worker.stop()
            run.term_deadline = None
            run.phase = run.after_termination
            if run.down_state is not None:
                state, reason = run.down_state
                run.down_state = None
                self._set_state(run, state)
                self.audit(run.project, method_name="tpu.nodes.terminate", resource_name=run.name,
                           severity="NOTICE", terminate_reason=reason)
        elif run.phase == "repairing" and now >= run.next_at:
            self._boot(run, now)
        elif run.phase in ("stopping", "deleting", "starting") and now >= run.next_at:
            assert run.operation is not None
            if run.phase == "stopping":
                self._set_state(run, "STOPPED")
                run.phase = "stopped"
                self.operations.finish(run.operation, types.Node.pb(types.Node(run.node)))
            elif run.phase == "starting":
                self._boot(run, now)
                self.operations.finish(run.operation, types.Node.pb(types.Node(run.node)))
            else:
                for worker in run.workers:
                    worker.metadata.stop()
                run.phase = "gone"
                self.operations.finish(run.operation)

    def _strike(self, run: NodeRun, now: float) -> None:
        if run.node.labels.get(SPARE_LABEL) == "true":
            return  # a spare node runs no attempt yet: the faults of a job strike the node it runs on
        for index, fault in self.faults.candidates(TPU_RUNNING_KINDS, run.name, 1):
            if fault.kind == "hardware" and fault.at_step is None and fault.after_seconds is None:
                continue  # a boot fault (_strike_at_boot)
            once = (index, len(run.events))
            if once in run.fired or (fault.after_seconds is not None and now - run.ready_at < fault.after_seconds):
                continue
            if fault.at_step is not None and not self._reached(run, fault):
                continue
            run.fired.add(once)
            if not self.faults.fire(index, f"{run.name}:{len(run.events)}"):
                continue
            run.events.append(f"fault {fault.kind}")
            self._apply(run, fault, now)
            return

    def _reached(self, run: NodeRun, fault: Fault) -> bool:
        """Whether the worker reported (guest attribute ``resilient/step``) a step >= ``at_step``."""
        for worker in run.workers:
            step = worker.metadata.guest("resilient/step").get("resilient/step", "")
            if step.isdigit() and int(step) >= (fault.at_step or 0):
                return True
        return False

    def _terminate_workers(self, run: NodeRun, now: float, grace: float, then: str) -> None:
        """SIGTERM every worker (so workloads can checkpoint), SIGKILL after ``grace`` seconds, then ``then``."""
        for worker in run.workers:
            worker.signal_group(signal.SIGTERM)
        run.term_deadline = now + grace
        run.after_termination = then
        run.phase = "terminating"

    def _announce(self, run: NodeRun, fault: Fault, now: float) -> None:
        """A ``scheduled_maintenance`` fault: announce a window ``notice_seconds`` from now (PENDING)."""
        from datetime import timedelta

        start = self.clock.now() + timedelta(seconds=fault.notice_seconds)
        window = fault.window_seconds if fault.window_seconds is not None else self.config.scaled(
            self.config.latencies.tpu_repair_seconds)
        run.upcoming = {"type_": fault.maintenance_type, "can_reschedule": fault.can_reschedule,
                        "window_start_time": _rfc3339(start),
                        "window_end_time": _rfc3339(start + timedelta(seconds=window)),
                        "latest_window_start_time": _rfc3339(start), "maintenance_status": "PENDING"}
        run.window_at, run.window_seconds, run.window_grace = now + fault.notice_seconds, window, fault.grace_seconds
        run.events.append(f"maintenance announced for {run.upcoming['window_start_time']}")

    def _maintain(self, run: NodeRun, now: float, grace: float | None = None) -> None:
        """The announced window starts (or SimulateMaintenanceEvent): ONGOING, workers get SIGTERM, REPAIRING
        for the window, audit ``tpu.nodes.restart``; then READY again (most events recover)."""
        window = run.window_seconds if run.window_seconds is not None else self.config.scaled(
            self.config.latencies.tpu_repair_seconds)
        grace = run.window_grace if grace is None else grace
        if run.upcoming is None:
            run.upcoming = {"type_": "UNSCHEDULED", "can_reschedule": False,
                            "window_start_time": _rfc3339(self.clock.now())}
        run.upcoming["maintenance_status"] = "ONGOING"
        run.window_at = run.window_seconds = None
        self._set_state(run, "REPAIRING", "UNHEALTHY_MAINTENANCE")
        run.node.health_description = f"The TPU had a maintenance event at {self.clock.now().isoformat()}"
        self.audit(run.project, method_name="tpu.nodes.restart", resource_name=run.name, severity="NOTICE")
        self._terminate_workers(run, now, grace, "repairing")
        run.next_at = now + window + grace

    def simulate_maintenance_event(self, name: str, worker_ids: list[str]) -> Any:
        """v2alpha1 SimulateMaintenanceEvent: a maintenance event on the node now (every worker restarts: the
        emulator's node is one VM group); a node that is not READY refuses (FAILED_PRECONDITION)."""
        with self.lock:
            run = self._run(name)
            if run.phase != "ready":
                raise FailedPrecondition(f"Node {name} is {run.node.state.name}, not READY")
            run.events.append(f"simulated maintenance on workers {','.join(worker_ids) or '0'}")
            self._maintain(run, self.clock.monotonic())
            op_name = self._op_name(name.rsplit("/nodes/", 1)[0])
            operation = self.operations.start(op_name, self._metadata(run, "simulateMaintenanceEvent"))
            from google.cloud.tpu_v2alpha1 import types as alpha

            self.operations.finish(op_name, alpha.Node.pb(self.alpha_node(name)))
            return operation

    def alpha_node(self, name: str) -> Any:
        """The node as ``tpu_v2alpha1.Node``: the v2 fields, and ``upcoming_maintenance`` when announced."""
        from google.cloud.tpu_v2alpha1 import types as alpha

        with self.lock:
            run = self._run(name)
            node = alpha.Node.from_json(_types().Node.to_json(run.node), ignore_unknown_fields=True)
            if run.upcoming is not None:
                node.upcoming_maintenance = alpha.UpcomingMaintenance(**run.upcoming)
            return node

    def update_node(self, node: Any, update_mask: list[str]) -> Any:
        """UpdateNode: ``metadata``, ``labels`` and ``description`` (each replaced whole, as the mask names
        them); other paths are refused (INVALID_ARGUMENT)."""
        types = _types()
        allowed = {"metadata", "labels", "description"}
        if not update_mask or set(update_mask) - allowed:
            raise InvalidArgument(f"update_mask must name some of {sorted(allowed)}, got {list(update_mask)}")
        with self.lock:
            run = self._run(node.name)
            was_spare = run.node.labels.get(SPARE_LABEL) == "true"
            for path in update_mask:
                if path == "description":
                    run.node.description = node.description
                else:
                    getattr(run.node, path).clear()
                    getattr(run.node, path).update(dict(getattr(node, path)))
            if was_spare and run.node.labels.get(SPARE_LABEL) != "true":
                run.ready_at = self.clock.monotonic()  # an attempt took it: its faults count from now
            op_name = self._op_name(node.name.rsplit("/nodes/", 1)[0])
            operation = self.operations.start(op_name, self._metadata(run, "update"))
            self.operations.finish(op_name, types.Node.pb(types.Node(run.node)))
            return operation

    def _apply(self, run: NodeRun, fault: Fault, now: float) -> None:
        types = _types()
        if fault.kind == "scheduled_maintenance":
            self._announce(run, fault, now)
            return
        if fault.kind == "maintenance" and fault.recover:
            self._set_state(run, "REPAIRING", "UNHEALTHY_MAINTENANCE")
            run.node.health_description = f"The TPU had a maintenance event at {self.clock.now().isoformat()}"
            self.audit(run.project, method_name="tpu.nodes.restart", resource_name=run.name, severity="NOTICE")
            self._terminate_workers(run, now, fault.grace_seconds, "repairing")
            run.next_at = self._later(now, self.config.latencies.tpu_repair_seconds) + fault.grace_seconds
        elif fault.kind in ("maintenance", "preemption"):
            preempted = fault.kind == "preemption"
            reason = "Spot TPU preempted" if preempted else fault.terminate_reason
            run.down_state = ("PREEMPTED" if preempted else "TERMINATED", reason)
            self._terminate_workers(run, now, fault.grace_seconds, "down")
        elif fault.kind == "unhealthy":
            run.node.health = getattr(types.Node.Health, fault.health)
            run.node.symptoms = [{"symptom_type": s, "details": "injected", "create_time": self.clock.now()}
                                 for s in fault.symptoms]
            run.events.append(f"health {fault.health}")
        elif fault.kind == "hardware":
            self._lose_chips(run, fault)
        elif fault.kind in ("crash", "hang"):
            worker = run.workers[min(fault.worker, len(run.workers) - 1)]
            sig = signal.SIGSTOP if fault.kind == "hang" else _SIGNAL_FOR_EXIT.get(fault.exit_code or 0,
                                                                                    signal.SIGKILL)
            worker.signal_workload(sig)

    def shutdown(self) -> None:
        with self.lock:
            for run in self.nodes.values():
                for worker in run.workers:
                    worker.stop()
                    worker.metadata.stop()

    def reset(self) -> None:
        self.shutdown()
        with self.lock:
            self.nodes.clear()
            self.queued.clear()

    def processes(self) -> list[int]:
        """Every live process the emulated TPU VMs started: startup scripts, the training commands
        under them (also those in sessions of their own) and anything a stopped VM left behind."""
        with self.lock:
            return [pid for w in self.all_workers for pid in w.leftovers()]

    def worker_pids(self) -> list[int]:
        """The startup-script process of each worker VM whose script still runs (one per worker)."""
        with self.lock:
            return [w.proc.pid for w in self.all_workers if w.alive() and w.proc is not None]
