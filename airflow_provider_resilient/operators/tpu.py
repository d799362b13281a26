"""``ResilientTPUWorkloadOperator``: a training command on a Cloud TPU VM / pod slice, through maintenance
events, preemptions, unhealthy hardware, stockouts and crashes (Cloud TPU, "Manage maintenance events with Cloud
TPU Pods", https://cloud.google.com/tpu/docs/maintenance-events).

Each attempt is a node of its own (``<node_id>-a<attempt>``, fresh hardware: the isolation of a faulty node, as in
ModelArts' "Training Fault Tolerance Check") whose startup script runs the command under the worker runner
(:mod:`..worker.runner`) on every worker VM: the runner restarts the command in place on non-permanent exits (up to
5 times, as AI Platform Training restarts a worker), forwards SIGTERM so the workload can checkpoint, and reports
status, exit code, restarts, heartbeat and step through guest attributes. The operator watches the node's state and
health, the workers' reports and the audit log, and asks the policy:

* a maintenance event that recovers (REPAIRING, ``tpu.nodes.restart``) is waited out -- the startup
  script runs again after the repair and the workload resumes from its checkpoint on its own;
* TERMINATED, PREEMPTED, unhealthy hardware, a node not back in time or a worker out of restarts: the
  node is deleted and the next attempt re-creates it, resuming from the latest complete checkpoint;
* a stockout on create backs off and walks the ``fallbacks`` (zones, accelerator types);
* a permanent error of the command fails the task.

Success: every worker reports ``succeeded`` (all hosts of a multi-host slice must finish). Every node the
operator created is deleted on success, on failure and on kill, unless ``keep_node``. A retried or
cleared task reattaches to its node by name. Importing this module imports no Google library.

Deferrable mode: between two full looks the task waits in a :class:`~..triggers.tpu.TPUNodeTrigger`,
which watches the node and the workers' reports from the triggerer and brings the task back when
something changes, or after the look-again interval (:func:`~..backends.tpu_watch.look_again_seconds`);
backoffs while a node of the run still exists wait in the same trigger without watching. Either way a
user's kill of the deferred task deletes the node and its queued resource (the trigger's ``on_kill``).
What the looks must remember between two processes -- the audit entries already seen, each worker's
last step and since when (hang detection), the step reports of the ledger -- is kept in the task state
store.

Kills while the task runs in a worker (the shared :meth:`~.base.SupervisedOperator.on_kill`) delete the queued
resource by name -- also while it still waits for capacity -- and the node, with a fresh client, within the
kill budget (:func:`~..backends.kill.kill_budget`: 80 % of ``[core] killed_task_cleanup_time``, 60 s by default,
after which Airflow sends SIGKILL).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any

from ..backends.base import AttemptSpec
from ..links.tpu import TPUAuditLogLink, TPUNodeLink, push_node_links
from ..policy import history_to_json
from ..policy.rules import align_worker_restarts
from ..specs.common import ENV_CHECKPOINT_DIR, LABEL_KEEP, SpecError
from ..specs.preflight import Preflight, preflight_of, watchdog_args, watchdog_problems
from ..specs.tpu import (
    chips_per_host,
    node_id_for,
    queued_resource_name,
    startup_script,
    validate_tpu_workload,
)
from ..supervisor import RunState
from .arguments import has_template
from .base import SupervisedOperator

STATE_KEY = "resilient_tpu_workload"


class ResilientTPUWorkloadOperator(SupervisedOperator):
    """Run ``command`` on every worker of a Cloud TPU node until it succeeds, re-creating the node as needed.

    Args:
        zone: TPU zone, e.g. ``us-central2-b``.
        accelerator_type: e.g. ``v4-8``, ``v4-32``, ``v5litepod-16``.
        runtime_version: the TPU VM image, e.g. ``tpu-ubuntu2204-base``.
        command: the training command (a shell string or an argv list), run on every worker VM.
        setup_script: bash run before the command at every boot (installs, mounts ...).
        env: environment variables of the command (names must be shell identifiers). They travel in the node's
            metadata: no secrets here.
        secret_env: variables read from Secret Manager on each worker VM, ``{NAME: "projects/P/secrets/S"}`` (its
            latest version) or ``".../versions/N"``: the node's metadata and the startup script hold the secret's
            name only; the worker runner reads the value with the node's service account (which needs
            ``roles/secretmanager.secretAccessor``) and puts it in the command's environment. A secret that
            cannot be read fails the run as a permanent user error naming it.
        checkpoint_dir: required here (see :class:`~.base.SupervisedOperator`): every new node resumes from
            the latest complete checkpoint under it (``RESILIENT_CHECKPOINT_DIR`` on the workers).
        tpu_node_id: the node id stem (attempt n runs on ``<tpu_node_id>-a<n>``); default: DAG, task and a
            run hash. (Not ``node_id``: that name is BaseOperator's.)
        spot: request Spot capacity (preemptible); ``reserved``: use a reservation.
        queued_resource: request each node through a queued resource (waits for capacity instead of failing
            with a stockout); implied by ``valid_until_duration``.
        valid_until_duration: seconds (or timedelta) the queued resource may wait for capacity; past it, the
            request FAILs and the attempt counts as a queue timeout (fail over along ``fallbacks``, or fail).
        fallbacks: as on :class:`~.base.SupervisedOperator`; a TPU fallback takes ``zone`` and
            ``accelerator_type``.
        max_worker_restarts: in-place restarts per worker by the runner, and the policy's ``worker_restarts``
            budget (one limit: :func:`~..policy.rules.align_worker_restarts`); None (default): the policy's
            budget, 5 by default.
        hang_timeout: seconds without a heartbeat from a worker's runner, or without a new step from a workload
            that reports steps, before the worker counts as hung (a transient failure: a new node). A workload
            reports steps by printing lines like ``step 120`` (the runner's ``--step-pattern``); once a worker
            has reported one, on any attempt of the run, a later attempt's worker that runs ``hang_timeout``
            without reporting its first step is hung too (restore and compile time count: size the timeout for
            them).
        worker_hang_timeout: seconds a worker's command may go without a step line before the worker runner
            aborts it (SIGABRT, exit 134, a transient crash) and restarts it in place on the same VM (the runner's
            liveness watchdog, as PyTorch's NCCL watchdog tears down a process whose collective timed out): a hang
            costs this many seconds and an in-place restart instead of ``hang_timeout`` and a new node. A command
            is watched from its first step line on; with ``expect_steps`` from its start, with ``hang_timeout`` for
            its start-up and restore (a worker whose workload prints no steps -- only process 0 logs -- is then
            never aborted). Set it above the longest gap between two step lines (a step and a checkpoint save, an
            evaluation); it must be less than ``hang_timeout``, which stays the fallback for a hang of the whole VM
            (the runner frozen too). None (default): no watchdog.
        expect_steps: every worker's workload reports steps from its very first attempt, so one that hangs
            before its first step on attempt 1 is caught too (default False: a workload is only expected to
            report steps once it has; one that never does is judged by its runner's heartbeat alone).
        heartbeat_seconds: how often each worker reports its heartbeat and step (guest attributes).
        startup_timeout: seconds a worker may stay silent -- no report at all from its runner -- on a node that
            is READY (default 1800: the setup script and the image's boot count). Past it the worker counts as
            silent (a WORKER_SILENT failure: the ``silent-worker`` rule releases the node and re-creates it,
            twice by default), so a node whose runner never starts is not watched for ever.
        maintenance_policy: what the run does before a maintenance window Cloud TPU announced
            (``Node.upcoming_maintenance``; :mod:`~..supervisor.maintenance`): it always asks the workload for a
            checkpoint ``maintenance_lead_seconds`` before the window (the runner passes the request on; the
            workload saves with :mod:`~..worker.checkpoint_request`), then ``"ride_out"`` (default; most events
            recover by themselves: Cloud TPU, "Manage maintenance events with Cloud TPU Pods") waits the event out,
            ``"move"`` moves the run to a fresh node once the checkpoint is saved (no budget spent), ``"auto"``
            moves when the window is longer than ``maintenance_move_seconds`` (what a move costs: create, boot,
            restore; default 600 s).
        slices: Multislice (default 1: one node). With ``slices=N`` each attempt is a group of N slices of
            ``accelerator_type`` requested as one queued resource (``multi_node_params``: nodes ``<node id>-0`` ...
            ``-<N-1>``, through the ``tpu_v2alpha1`` API), and every worker gets Cloud TPU's multislice
            environment (``MEGASCALE_COORDINATOR_ADDRESS``, ``MEGASCALE_NUM_SLICES``, ``MEGASCALE_SLICE_ID``,
            ``MEGASCALE_PORT``). A failure of any slice -- maintenance, preemption, unhealthy hardware, a worker
            out of restarts -- ends the whole group and the next attempt requests a new one, resuming from the
            latest complete checkpoint: the slices' collectives span the group, so the healthy slices must restart
            from the same checkpoint anyway, and a queued resource is granted and deleted as one (the API has no
            call that replaces one of its nodes). Not with ``deferrable=True`` yet.
        maintenance_lead_seconds: seconds before the window's start to request the checkpoint (default 600); 0: never
            request one (the workload learns of the event from its SIGTERM) and never move.
        checkpoint_on_notice: checkpoint on the notice the VM gets (default True): a Spot node's preemption notice
            is a SIGTERM 30 seconds before the machine stops (Compute Engine, "Preemptible VM instances",
            preemption process, https://cloud.google.com/compute/docs/instances/preemptible#preemption-process),
            a maintenance event's a SIGTERM too. The worker runner then asks the workload for a checkpoint (token
            ``notice-<time>``) before it forwards the SIGTERM, and the helper ``resilient_checkpoint`` keeps the
            SIGTERM from ending a workload that has no handler of its own until it saved at its next step (then it
            ends with 143). Only a save that fits in the notice helps: a longer one is cut off and the previous
            checkpoint stands. False: the SIGTERM is only forwarded, as before.
        maintenance_move_seconds: see ``maintenance_policy``.
        preflight: fault-tolerance checks on every worker VM (:class:`~..specs.preflight.Preflight`, after
            ModelArts' "Training Fault Tolerance Check"): ``True`` (default) -- its items and thresholds before the
            command (``dns``, ``disk-size root/shm/cache``, ``ulimit``, ``tpu-check``: the slice's chips are
            visible) and a device check every minute while it runs; a :class:`~..specs.preflight.Preflight` or a
            dict of its fields -- other thresholds; ``False`` -- none (ModelArts' ``job-retry-num`` 0). A failed
            check isolates the node: the ``preflight-failure`` rule (re-issues: the policy's ``preflight`` budget,
            0 to 3) or, for a chip lost while training, ``node-unhealthy`` -- a new node resumes from the latest
            checkpoint.
        keep_node: keep the last node (and its queued resource) after the task ends, by success, failure or
            kill (for debugging); the nodes of earlier attempts are deleted all the same. Default: delete every
            node.
        spare_node: keep the next attempt's node made before it is needed (:mod:`~..supervisor.spare`): a *spare*
            node, created while the attempt trains, whose startup script waits; when a failure ends the attempt on
            the same zone and accelerator type, the next attempt takes the spare (UpdateNode hands it the attempt's
            startup script) instead of waiting minutes for a create. ``"never"`` (default); ``"always"``: while an
            attempt runs -- the fastest recovery, for a second node's machine time throughout; ``"at_risk"``: while a
            maintenance window is announced for the node, or for ``spare_risk_seconds`` after an interruption. The
            spare carries the attempt's labels and ``resilient-spare=true``, is billed from READY on, and is deleted
            when the run ends, when its risk passes, on a kill and by the reconciler. Single nodes only (not with
            ``queued_resource`` or ``slices`` > 1).
        spare_risk_seconds: with ``spare_node="at_risk"``, how long after an interruption the run holds a spare
            (seconds, default 3600).
        deferrable: free the worker slot between looks (each look runs briefly in a worker); the task waits in
            a :class:`~..triggers.tpu.TPUNodeTrigger`, which polls the node every ``poll_interval`` and brings
            the task back on a change, or after :func:`~..backends.tpu_watch.look_again_seconds` for a full look.

    ``project_id``, ``checkpoint_marker``, ``labels``, ``network``, ``service_account``, ``resilience_policy``,
    ``poll_interval``, ``rerun_after_success``, ``gcp_conn_id``, ``impersonation_chain`` and ``min_defer_seconds``
    are the arguments every operator of the provider shares, documented once on
    :class:`~.base.SupervisedOperator`.

    Returns: ``{"node_name", "state", "checkpoint", "attempts"}``; the history also goes to XCom
    ``attempt_history``.

    Raises:
        AirflowFailException: bad arguments (before anything is created), a permanent failure or a spent budget.
    """

    STATE_KEY = STATE_KEY
    PLATFORM = "tpu"
    operator_extra_links = (TPUNodeLink(), TPUAuditLogLink())
    template_fields: Sequence[str] = ("project_id", "zone", "accelerator_type", "runtime_version", "command",
                                      "setup_script", "env", "secret_env", "checkpoint_dir", "tpu_node_id",
                                      "labels", "goodput_job_name", "goodput_logger_name")

    def __init__(self, *, zone: str, accelerator_type: str, runtime_version: str, command: str | Sequence[str],
                 checkpoint_dir: str, setup_script: str | None = None, env: Mapping[str, str] | None = None,
                 tpu_node_id: str | None = None, spot: bool = False, reserved: bool = False,
                 queued_resource: bool = False, valid_until_duration: float | timedelta | None = None,
                 max_worker_restarts: int | None = None, hang_timeout: float = 1800.0,
                 heartbeat_seconds: float = 10.0, startup_timeout: float = 1800.0, keep_node: bool = False,
                 secret_env: Mapping[str, str] | None = None,
                 preflight: Preflight | Mapping[str, Any] | bool | None = True,
                 maintenance_policy: str = "ride_out", maintenance_lead_seconds: float = 600.0,
                 maintenance_move_seconds: float = 600.0, slices: int = 1, expect_steps: bool = False,
                 checkpoint_on_notice: bool = True, spare_node: str = "never", spare_risk_seconds: float = 3600.0,
                 worker_hang_timeout: float | None = None, **kwargs: Any) -> None:
        super().__init__(checkpoint_dir=checkpoint_dir, **kwargs)  # required here: new nodes resume from it
        # Bad types are kept as given, for _validate to name -- the constructor never fails on them itself.
        self.max_worker_restarts_argument = max_worker_restarts
        cap = max_worker_restarts if type(max_worker_restarts) is int and max_worker_restarts >= 0 else None
        self.resilience_policy, self.max_worker_restarts = align_worker_restarts(self.resilience_policy, cap)
        self.zone = zone
        self.accelerator_type = accelerator_type
        self.runtime_version = runtime_version
        self.command = command
        self.setup_script = setup_script
        self.env = dict(env) if isinstance(env, Mapping) else ({} if env is None else env)
        self.secret_env = dict(secret_env) if isinstance(secret_env, Mapping) else ({} if secret_env is None
                                                                                   else secret_env)
        self.tpu_node_id = tpu_node_id
        self.spot = spot
        self.valid_until_duration = valid_until_duration
        self.valid_until_seconds = (valid_until_duration.total_seconds() if isinstance(valid_until_duration, timedelta)
                                    else valid_until_duration)
        self.slices = slices
        # Multislice groups exist only as queued resources (multi_node_params).
        self.queued_resource = (queued_resource or self.valid_until_seconds is not None
                                or (type(slices) is int and slices > 1))
        self.reserved = reserved
        self.hang_timeout = hang_timeout
        self.worker_hang_timeout = worker_hang_timeout
        self.expect_steps = expect_steps
        self.heartbeat_seconds = heartbeat_seconds
        self.startup_timeout = startup_timeout
        self.keep_node = keep_node
        self.preflight = preflight
        self.maintenance_policy = maintenance_policy
        self.maintenance_lead_seconds = maintenance_lead_seconds
        self.maintenance_move_seconds = maintenance_move_seconds
        self.checkpoint_on_notice = checkpoint_on_notice
        self.spare_node = spare_node
        self.spare_risk_seconds = spare_risk_seconds
        # Literal arguments are checked as the DAG is parsed; templated ones after rendering, in execute.
        self._validate(skip={name for name in self.template_fields if has_template(getattr(self, name))})

    # ------------------------------------------------------------------ Airflow entry points
    def execute(self, context: Any) -> Any:
        self._validate()
        self._log_endpoint(self._tpu())
        return self._start(context)

    def _resumed(self, context: Any, state: RunState, event: Any) -> Any:
        """The TPUNodeTrigger saw a change, or the look-again interval passed: a full look at the node (audit log,
        progress, maintenance) decides."""
        return self._watch(context, state, str(state.job_name))

    def _live_resources(self) -> list[Any]:
        """The queued resource (also while it still waits for capacity) and the node this process knows of, kept
        with ``keep_node``."""
        from ..backends.tpu import live_resources

        return live_resources(self._live_node, self._live_queued, keep=self.keep_node, spare=self._built("spare"))

    def _spare_settings(self) -> Any:
        """The pure :class:`~..supervisor.spare.SpareSettings` of ``spare_node`` and ``spare_risk_seconds``."""
        from ..supervisor.spare import SpareSettings

        return SpareSettings(self.spare_node, self.spare_risk_seconds)  # type: ignore[arg-type]

    def _tend_spare(self, context: Any, state: RunState) -> None:
        """Carry out the supervisor's word on the spare node (:func:`~..supervisor.spare.tend_spare`): create one for
        the next attempt (on the running attempt's zone and accelerator type) or release the one held; the spare
        held is kept in the task state store."""
        from ..supervisor import Submit
        from ..supervisor.spare import CreateSpare, ReleaseSpare, Spare, tend_spare
        from .launch import attempt_spec

        settings = self._spare_settings()
        backend = self._backend()
        if settings.when == "never" and not backend.spare:
            return  # (no read of the task state store per look for the runs that hold none)
        held = self._store.spare(context)
        if held is None and backend.spare:  # found by this process (its attempt's name, a rebuilt run)
            held = Spare(backend.spare, backend.spare_attempt or 0, self._clock())
        before, now = held, self._clock()
        held, command = tend_spare(state, held, now, settings, maintenance_pending=backend.maintenance_due is not None)
        ended = "taken" if before is not None and held is None else None
        if ended:
            self._store.keep_spare(context, None, ended=ended, now=now)
            before = None
        if isinstance(command, CreateSpare):
            index = state.history[-1].fallback_index if state.history else -1
            spec = attempt_spec(Submit(command.attempt, index, None), self._task_instance(context),
                                self.resilience_policy.fallbacks, self.labels)
            if backend.submit_spare(spec, command.reason):
                held = Spare(backend.node_name(spec), command.attempt, self._clock())
        elif isinstance(command, ReleaseSpare):
            from google.api_core import exceptions as gexc

            self.log.info("Releasing spare node %s: %s", command.name, command.reason)
            try:
                backend.release_spare(command.name, command.reason)
            except gexc.GoogleAPICallError as exc:  # the run goes on; the next look, or the reconciler, deletes it
                self.log.warning("Spare node %s not deleted yet (%s): asked again at the next look, and the "
                                 "reconciler deletes it once the task is over", command.name, exc)
                return
            self._store.keep_spare(context, None, ended="released", now=now)
            return
        if held != before:
            self._store.keep_spare(context, held)

    def _summary_extra(self, context: Any) -> dict[str, Any]:
        """The spare nodes' cost (``spare_node``: :meth:`~.run_store.RunStore.spare_costs`, with ``host_seconds`` at
        most: held seconds x the worker VMs of a node), logged; nothing without spares."""
        costs = self._store.spare_costs(context)
        if self.spare_node == "never" and not costs["held_seconds"]:
            return {}
        from ..specs.tpu import worker_count

        hosts = worker_count(self.accelerator_type)
        costs = {**costs, "host_seconds": costs["held_seconds"] * hosts}
        self.log.info("Spare nodes (spare_node=%r): %d taken, %d released, held %.0f s from request to hand-over or "
                      "deletion (at most %.0f host-s billed)", self.spare_node, costs["taken"], costs["released"],
                      costs["held_seconds"], costs["host_seconds"])
        return {"spare_nodes": costs}

    # ------------------------------------------------------------------ the shell
    def _hook_emulator(self) -> str | None:
        return self._tpu().emulator  # type: ignore[no-any-return]

    def _tpu(self) -> Any:
        if not hasattr(self, "_tpu_hook"):
            from ..hooks.tpu import ResilientTPUHook

            self._tpu_hook = ResilientTPUHook(self.gcp_conn_id, self.impersonation_chain, sleep=self._sleep)
        return self._tpu_hook

    def _audit(self) -> Any:
        if not hasattr(self, "_audit_hook"):
            from ..hooks.tpu import AuditLogHook

            self._audit_hook = AuditLogHook(self.gcp_conn_id, self.impersonation_chain, sleep=self._sleep)
        return self._audit_hook

    def _make_backend(self) -> Any:
        """The run's :class:`~..backends.tpu.TPUNodeBackend` (on :meth:`_tpu` and :meth:`_audit`)."""
        from ..backends.tpu import TPUNodeBackend

        return TPUNodeBackend(
            lambda: (self._tpu(), self._audit()), project_id=self.project_id, zone=self.zone,
            accelerator_type=self.accelerator_type, node_id=self._node_id, node=self._node,
            queued_resource=self.queued_resource, spot=self.spot, valid_until_seconds=self.valid_until_seconds,
            queue_timeout=self.resilience_policy.queue_timeout_seconds, hang_timeout=self.hang_timeout,
            startup_timeout=self.startup_timeout, keep_node=self.keep_node, clock=lambda: self._clock(),
            fallback_zones=[f.zone for f in self.resilience_policy.fallbacks if f.zone],
            maintenance=self._maintenance_settings(), slices=self.slices, expect_steps=self.expect_steps)

    def _maintenance_settings(self) -> Any:
        """The pure :class:`~..supervisor.maintenance.MaintenanceSettings` of the operator's arguments."""
        from ..supervisor.maintenance import MaintenancePolicy, MaintenanceSettings

        return MaintenanceSettings(MaintenancePolicy(self.maintenance_policy), float(self.maintenance_lead_seconds),
                                   float(self.maintenance_move_seconds))

    def _built(self, name: str) -> Any:
        """``name`` of the backend, when it has been built (None otherwise: nothing was looked at yet)."""
        return getattr(self._backend_built, name) if self._backend_built is not None else None

    @property
    def _live_node(self) -> str | None:
        """The node a kill deletes (the backend's)."""
        return self._built("live_node")

    @property
    def _live_queued(self) -> str | None:
        """The queued resource a kill deletes (the backend's)."""
        return self._built("live_queued")

    def _node_id(self, spec: AttemptSpec) -> str:
        """The node id of the attempt of ``spec``: ``<tpu_node_id>-a<n>``, by default the DAG, task and a hash of
        the run (:func:`~..specs.tpu.node_id_for`)."""
        task = spec.task
        return node_id_for(self.tpu_node_id, task.dag_id, task.task_id, task.run_id, task.map_index, spec.attempt)

    def _runner_args(self, accelerator: str) -> list[str]:
        """The worker runner's preflight options for a node of ``accelerator`` (none with ``preflight=False``) and
        ``--no-notice-checkpoint`` with ``checkpoint_on_notice=False``."""
        checks = preflight_of(self.preflight)
        args = checks.runner_args(expect_tpu_chips=chips_per_host(accelerator)) if checks else []
        args += watchdog_args(self.worker_hang_timeout, self.hang_timeout if self.expect_steps else None)
        return args if self.checkpoint_on_notice else [*args, "--no-notice-checkpoint"]

    def _node(self, spec: AttemptSpec, accelerator: str) -> dict[str, Any]:
        """The node body of one attempt: its accelerator type, the attempt's labels (and ``resilient-keep``
        with ``keep_node``), and the startup script that runs the command under the worker runner with the
        user's ``env`` and the attempt's ``RESILIENT_*`` variables."""
        from ..worker import helper_source, runner_source

        labels = dict(spec.labels)
        if self.keep_node:
            labels[LABEL_KEEP] = "true"
        node: dict[str, Any] = {
            "accelerator_type": accelerator, "runtime_version": self.runtime_version, "labels": labels,
            "metadata": {**spec.owner, ENV_CHECKPOINT_DIR: str(self.checkpoint_dir), "startup-script": startup_script(
                command=self.command, env={**self.env, **spec.env}, setup_script=self.setup_script,
                runner_source=runner_source(), max_restarts=self.max_worker_restarts,
                checkpoint_dir=self.checkpoint_dir, heartbeat_seconds=self.heartbeat_seconds,
                secret_env=self.secret_env, runner_args=self._runner_args(accelerator),
                helper_source=helper_source())},
            "scheduling_config": {"spot": self.spot, "reserved": self.reserved},
        }
        if self.network:
            node["network_config"] = {"network": self.network}
        if self.service_account:
            node["service_account"] = {"email": self.service_account}
        return node

    def _recover(self, context: Any, state: RunState) -> RunState:
        """Rebuild the run from this task instance's live nodes when the task state store holds none
        (:meth:`~..backends.tpu.TPUNodeBackend.rebuild`; Airflow 3.1 and 3.2 have no task state store); none:
        ``state`` unchanged (a first try)."""
        fallbacks = self.resilience_policy.fallbacks

        def fallback_index(zone: str) -> int:
            return -1 if zone == self.zone else next((i for i, f in enumerate(fallbacks) if f.zone == zone), -1)

        return self._backend().rebuild(self._task_instance(context), fallback_index) or state

    def _begin_watch(self, context: Any, state: RunState, node_name: str) -> None:
        """Push the node's links and remember it (and its queued resource) for ``on_kill``; the first look is
        made at once."""
        push_node_links(context, self._backend().slice_names(node_name)[0])  # a multislice group: its slice 0
        self._backend().watching(node_name)

    def _trigger_args(self, node_name: str) -> dict[str, Any]:
        from ..clients import serializable_chain

        chain = serializable_chain(self.impersonation_chain)
        return {"node_name": node_name, "poll_interval": self.poll_interval, "keep_node": self.keep_node,
                "queued_resource": queued_resource_name(node_name) if self.queued_resource else None,
                "spare": self._built("spare"),
                "gcp_conn_id": self.gcp_conn_id, "impersonation_chain": chain, "emulator": self._tpu().emulator,
                "event_topic": self.event_topic}

    def _defer_watch(self, state: RunState, node_name: str) -> None:
        """Wait in a :class:`~..triggers.tpu.TPUNodeTrigger` for a change, or for the look-again interval."""
        from ..backends.tpu_watch import look_again_seconds
        from ..triggers.tpu import TPUNodeTrigger

        backend = self._backend()
        look_again_at = self._clock() + look_again_seconds(self.poll_interval, self.hang_timeout)
        if backend.queue_deadline is not None:  # a request waiting for capacity: back for its queue timeout
            look_again_at = min(look_again_at, max(backend.queue_deadline, self._clock() + self.poll_interval))
        if backend.maintenance_due is not None:  # back in time to request the checkpoint (or move) before a window
            look_again_at = min(look_again_at, max(backend.maintenance_due, self._clock() + self.poll_interval))
        if backend.spare and (due := self._spare_review_at(state)) is not None:  # back to release it as risk passes
            look_again_at = min(look_again_at, max(due, self._clock() + self.poll_interval))
        trigger = TPUNodeTrigger(look_again_at=look_again_at, baseline=backend.baseline,
                                 fire_not_before=self._fire_not_before(), **self._trigger_args(node_name))
        self.defer(trigger=trigger, method_name="execute_complete")

    def _spare_review_at(self, state: RunState) -> float | None:
        from ..supervisor.spare import review_at

        return review_at(state, self._spare_settings())

    def _defer_for(self, seconds: float) -> None:
        """A backoff while a node of the run may still exist (a maintenance wait, the pause before a re-create)
        waits in a non-watching :class:`~..triggers.tpu.TPUNodeTrigger`, so that a kill deletes that node;
        with no node, in the base class's ``DateTimeTrigger``."""
        memory = self._store.last
        # A wait for in-place recovery keeps the node (no next Submit); a backoff before a re-create follows
        # its end (EndAttempt), and then no node of the run exists.
        node = memory.job_name if memory is not None and memory.next_submit is None else None
        if not node:
            super()._defer_for(seconds)
            return
        from ..triggers.tpu import TPUNodeTrigger

        trigger = TPUNodeTrigger(look_again_at=self._clock() + seconds, watch_node=False, **self._trigger_args(node))
        self.defer(trigger=trigger, method_name="execute_complete")

    def _checkpoint_location(self) -> str | None:
        return str(self.checkpoint_dir)

    def _finish(self, context: Any, state: RunState, node_name: str) -> dict[str, Any]:
        from ..checkpoints import find_latest_checkpoint

        found = find_latest_checkpoint(self.checkpoint_dir, marker=self.checkpoint_marker)
        return {"node_name": node_name, "state": "SUCCEEDED",
                "checkpoint": {"uri": found.uri, "step": found.step} if found else None,
                "attempts": history_to_json(state.history)}

    def _validate(self, skip: Collection[str] = ()) -> None:
        """:func:`~..specs.tpu.validate_tpu_workload` of the arguments (``RESILIENT_EXTRA_ZONES``: zones Google
        added after this release).

        Raises:
            AirflowFailException: one line per problem, naming the field, the value and the fix.
        """
        problems = self._common_problems()
        try:
            validate_tpu_workload(
                project_id=self.project_id, zone=self.zone, accelerator_type=self.accelerator_type,
                runtime_version=self.runtime_version, command=self.command, checkpoint_dir=self.checkpoint_dir,
                setup_script=self.setup_script, env=self.env, tpu_node_id=self.tpu_node_id, labels=self.labels,
                spot=self.spot, reserved=self.reserved, queued_resource=self.queued_resource,
                keep_node=self.keep_node, valid_until_duration=self.valid_until_duration,
                max_worker_restarts=self.max_worker_restarts_argument, heartbeat_seconds=self.heartbeat_seconds,
                hang_timeout=self.hang_timeout, startup_timeout=self.startup_timeout,
                fallbacks=self.resilience_policy.fallbacks, extra_zones=os.environ.get("RESILIENT_EXTRA_ZONES", ""),
                secret_env=self.secret_env, preflight=self.preflight, maintenance_policy=self.maintenance_policy,
                maintenance_lead_seconds=self.maintenance_lead_seconds,
                maintenance_move_seconds=self.maintenance_move_seconds, slices=self.slices,
                deferrable=self.deferrable, expect_steps=self.expect_steps,
                checkpoint_on_notice=self.checkpoint_on_notice, service_account=self.service_account,
                fallback_problems=self.fallback_problems)
        except SpecError as exc:
            problems = [*exc.errors, *problems]
        problems += self._spare_problems() + watchdog_problems(self.worker_hang_timeout, self.hang_timeout)
        self._refuse(problems, skip)

    def _spare_problems(self) -> list[SpecError]:
        """``spare_node`` and ``spare_risk_seconds`` checked (:class:`~..supervisor.spare.SpareSettings`), and a spare
        asked of a run whose nodes come through a queued resource or as a multislice group (not supported)."""
        try:
            settings = self._spare_settings()
        except ValueError as exc:
            field = "spare_risk_seconds" if str(exc).startswith("spare_risk") else "spare_node"
            return [SpecError(field, str(exc).split(": ", 1)[1])]
        if settings.when != "never" and (self.queued_resource or (type(self.slices) is int and self.slices > 1)):
            return [SpecError("spare_node", f"{self.spare_node!r} needs single nodes created directly: drop "
                                            "queued_resource / valid_until_duration and slices, or use "
                                            "spare_node='never'")]
        return []


__all__ = ["STATE_KEY", "ResilientTPUWorkloadOperator"]
