"""The pure observer: what one look at a live attempt means, and what must be remembered between looks.

Every platform's shell (the Vertex AI operator polling, its trigger, the TPU operator) reads the platform
and hands the reading over as a :class:`Look`; :func:`observe` returns the new :class:`WatchMemory` and a
:class:`Verdict`. The rules live here once: every memory of what was observed -- hang clocks, queue waits,
audit entries seen, step progress -- lives in the one persisted run state, updated by this pure observer:

* **Queue timeout** -- a job or queued resource waiting for resources past ``Limits.queue_seconds`` since
  it was created (Huawei Cloud ModelArts, "Training Fault Tolerance Check": "If the waiting time exceeds 30
  minutes, the training job will automatically exit"; the rule and its message are
  :func:`~..policy.classify_queue_wait`'s).
* **Hang** -- no heartbeat or no checkpoint progress for a set time is a hang (the failure policy's ``HANG``
  class), treated as a transient crash. A *progress clock* per key (``"checkpoints"`` for the newest complete
  checkpoint of a CustomJob, ``"worker N"`` for the step a TPU worker reports) starts when a step is first
  seen and restarts when it changes; a clock older than ``Limits.hang_seconds`` is a hang. A runner's
  heartbeat older than that is one too (the VM or its runner is gone). A TPU worker whose runner is running
  the workload but has no step to report yet -- it hangs before its first step, a deadlock in the first
  collective, a restore that never ends -- gets a clock from the first look that finds it so, when its
  workload is known to log steps: it logged one earlier in the run (on any attempt; the memory keeps the
  keys, :attr:`WatchMemory.stepping`), or the operator declared it (``Limits.expect_steps``). A workload that
  never logs a step is judged by its runner's heartbeat alone. A CustomJob whose chief replica logs steps
  (``step N`` lines in Cloud Logging, clock key :data:`LOGGED`) is judged by them the same way, and from its
  first logged step on, by them instead of its checkpoints.
* **In-place restart allowance** -- Vertex AI restarts a lost replica in place: the job stays RUNNING while the
  replica's container starts again and the workload restores its checkpoint, and no step is logged meanwhile. With
  ``Limits.restart_seconds``, a look that reads the start of a restart (``Look.restarts``: a replica's exit, the
  service's ``The replica workerpool0-0 exited with a non-zero status of N`` entry; or the worker runner starting
  the command again, the one sign of a job retried after an internal error, which the service does not log) no
  older than the job's newest logged step starts a *restart clock* (:data:`RESTARTING`); until a step is logged
  after it, the job is judged by that clock against ``restart_seconds`` instead of by its progress clocks against
  ``hang_seconds``. So ``hang_timeout`` can be a few step times while a restore may take minutes -- the split of
  Kubernetes' startup and liveness probes ("Configure Liveness, Readiness and Startup Probes",
  https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/). The clock
  starts at the first restart after a step: restarts again and again without a step in between (a crash loop) do not
  extend it. With ``restart_seconds`` a job's start is judged the same way: a progress clock with no step yet (no
  step logged by this job, no checkpoint) is judged against ``restart_seconds``, not ``hang_seconds``.
* **Start-up deadline** -- a worker whose runner has not reported at all (the setup script broke
  PATH, the runner never started) gets a *silence clock* from the first look that finds it silent; past
  ``Limits.startup_seconds`` that is a WORKER_SILENT failure, and the node is released.
* **Audit-log de-duplication** -- each audit entry (by ``insertId``) is handed back as fresh once.
* **Step progress** -- every new step seen is handed back for the goodput ledger.
* **Upcoming maintenance** -- a TPU node's announced window: request a checkpoint before it, and move the
  run off the node or ride the event out (:func:`.maintenance.plan`).

The memory belongs to one attempt (:attr:`WatchMemory.resource`): a look at another resource starts the
clocks afresh (the audit ids seen are kept). Pure: no I/O, no clock; ``now`` is seconds since the epoch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..policy import Failure, FailureClass, Platform, classify_queue_wait
from .maintenance import MaintenanceSettings, MaintenanceStep, Notice, plan

#: The clock key of a CustomJob's checkpoint progress.
CHECKPOINTS = "checkpoints"
#: The clock key of the step a CustomJob's chief replica last logged (its ``step N`` lines in Cloud Logging). Once
#: the run has seen one, it is the job's progress clock and the checkpoint clock is no longer judged: a step is a
#: finer sign of progress than a save, so ``hang_timeout`` can be shorter than the checkpoint interval.
LOGGED = "logged step"
#: The clock key of a CustomJob restarting (see the module's "In-place restart allowance"): since the look that first
#: read the start of a restart no older than the newest logged step.
RESTARTING = "restarting"
#: How many audit entry ids the memory keeps (the newest): enough for any node's events between two looks.
AUDIT_IDS_KEPT = 500


def worker_key(worker: int) -> str:
    """The clock key of TPU worker ``worker`` (0-based): ``"worker 0"``."""
    return f"worker {worker}"


@dataclass(frozen=True)
class Limits:
    """When a live attempt must be stopped. Seconds; None: never.

    Attributes:
        hang_seconds: the longest a progress clock or a heartbeat may stand still (``hang_timeout``).
        queue_seconds: the longest a job may wait for resources (``RetryPolicy.queue_timeout_seconds``).
        startup_seconds: the longest a worker may stay silent -- no report at all from its runner -- on a
            node that is up (``startup_timeout``).
        restart_seconds: the longest a CustomJob may go from the start of a restart (``Look.restarts``) to its next
            logged step, and from its start to its first progress (``restart_timeout``); None: no
            allowance, ``hang_seconds`` throughout.
    """

    hang_seconds: float | None = None
    queue_seconds: float | None = None
    startup_seconds: float | None = None
    restart_seconds: float | None = None
    maintenance: MaintenanceSettings | None = None
    expect_steps: bool = False


@dataclass(frozen=True)
class ProgressClock:
    """A progress clock: the step last seen (None: no checkpoint yet) and since when (epoch seconds)."""

    step: int | None
    since: float


@dataclass(frozen=True)
class WatchMemory:
    """What the observer remembers of the attempt being watched; JSON through :meth:`to_json`.

    Attributes:
        resource: the attempt's job or node name (None: nothing watched yet).
        clocks: progress clock per key (:data:`CHECKPOINTS`, :func:`worker_key`), as sorted pairs.
        audit_seen: ids of the audit entries already handed back, the newest :data:`AUDIT_IDS_KEPT`.
        stepping: the worker clock keys that have reported a step in this run, sorted. Kept, like
            ``audit_seen``, when a new attempt starts: a worker of a workload that logs steps is judged from its
            first look on every later attempt, before its first step.
    """

    resource: str | None = None
    clocks: tuple[tuple[str, ProgressClock], ...] = ()
    audit_seen: tuple[str, ...] = ()
    stepping: tuple[str, ...] = ()

    def clock(self, key: str) -> ProgressClock | None:
        """The clock of ``key``, or None."""
        return dict(self.clocks).get(key)

    def to_json(self) -> dict[str, Any]:
        """JSON-compatible data with no None values (Airflow's task state store takes no None)."""
        data: dict[str, Any] = {}
        if self.resource:
            data["resource"] = self.resource
        if self.clocks:
            data["clocks"] = {k: ([c.step] if c.step is not None else []) + [c.since] for k, c in self.clocks}
        if self.audit_seen:
            data["audit_seen"] = list(self.audit_seen)
        if self.stepping:
            data["stepping"] = list(self.stepping)
        return data

    @classmethod
    def from_json(cls, data: Any) -> WatchMemory:
        """The inverse of :meth:`to_json`; unreadable parts are dropped (they only restart a clock early).

        A clock is ``[step, since]`` or ``[since]`` (no checkpoint yet)."""
        if not isinstance(data, Mapping):
            return cls()
        clocks = []
        for key, value in (data.get("clocks") or {}).items():
            try:
                *step, since = value
                clocks.append((str(key), ProgressClock(int(step[0]) if step else None, float(since))))
            except (TypeError, ValueError, IndexError):
                continue
        seen, stepping = data.get("audit_seen"), data.get("stepping")
        return cls(resource=data.get("resource") or None, clocks=tuple(sorted(clocks)),
                   audit_seen=tuple(str(i) for i in seen) if isinstance(seen, list) else (),
                   stepping=tuple(sorted({str(k) for k in stepping})) if isinstance(stepping, list) else ())


@dataclass(frozen=True)
class Look:
    """One reading of a live attempt, as the shell made it.

    Attributes:
        resource: the job or node name.
        platform: whose states ``state`` names.
        state: the platform's state name (``JOB_STATE_QUEUED``, ``WAITING_FOR_RESOURCES`` ...).
        queued_since: when the job (or queued resource) was created, epoch seconds; None: unknown.
        progress: the step seen now per clock key, only for the keys looked at this time (None: no
            checkpoint yet; for another key, no step logged yet). A key not given keeps its clock and is not
            judged.
        heartbeats: per clock key of a worker whose runner runs the workload, when the runner last reported
            (epoch seconds; 0: never). A key here and not in ``progress`` has no step to report yet.
        audit_ids: ids of the audit entries read this time, oldest first.
        silent: the clock keys of the workers with no report at all from their runner, when the workers were
            looked at (None: they were not; a worker not listed has spoken and its silence clock stops).
        maintenance: the node's announced maintenance (None: none, or not looked at).
        checkpoint_requested: the checkpoint request token set on the node (None: none).
        checkpoint_acks: per worker, the token of the last checkpoint request it acknowledged (``""``: none).
        step_lines: the lead's logged lines read this time, ``(time, step, start)`` oldest first (epoch seconds;
            ``start``: a process of the workload started then, resuming from ``step``): for the goodput ledger
            (:func:`ledger_steps`), and to tell whether a step was logged after a replica's exit.
        restarts: when a restart of the job's replicas began, per entry read this time (epoch seconds, oldest
            first): Vertex AI's ``The replica ... exited with a non-zero status`` entries, the worker runner's
            start of the command (see "In-place restart allowance").
    """

    resource: str
    platform: Platform = Platform.VERTEX_AI
    state: str = ""
    queued_since: float | None = None
    progress: Mapping[str, int | None] = field(default_factory=dict)
    heartbeats: Mapping[str, float] = field(default_factory=dict)
    audit_ids: Sequence[str] = ()
    silent: Sequence[str] | None = None
    maintenance: Notice | None = None
    checkpoint_requested: str | None = None
    checkpoint_acks: Sequence[str] = ()
    step_lines: Sequence[tuple[float, int, bool]] = ()
    restarts: Sequence[float] = ()


#: The prefix of a silence clock's key: ``"silent worker 1"``.
SILENT = "silent "


@dataclass(frozen=True)
class Verdict:
    """What a look means.

    Attributes:
        failure: a QUEUE_TIMEOUT, HANG or WORKER_SILENT failure when the live attempt must be ended (the shell cancels
            it, waits until it has ended, and reports the failure); None while it may go on.
        progressed: ``(key, step, at)`` for every clock that started or moved (a first look with no
            checkpoint gives step 0), for the goodput ledger.
        fresh_audit: the ids of ``Look.audit_ids`` not handed back before, in their order.
        maintenance: before an announced maintenance window, request a checkpoint and/or move (None: nothing).
    """

    failure: Failure | None = None
    progressed: tuple[tuple[str, int, float], ...] = ()
    fresh_audit: tuple[str, ...] = ()
    maintenance: MaintenanceStep | None = None


def observe(memory: WatchMemory, look: Look, now: float, limits: Limits) -> tuple[WatchMemory, Verdict]:
    """Judge ``look`` at ``now`` (epoch seconds) against ``limits``, given what was seen before.

    Returns the new memory (the argument is not changed) and the verdict. The queue timeout is judged
    first, then heartbeats, then the progress clocks (the first stalled key, in sorted order, is named).
    """
    if look.resource != memory.resource:
        memory = WatchMemory(resource=look.resource, audit_seen=memory.audit_seen, stepping=memory.stepping)
    seen = set(memory.audit_seen)
    fresh = tuple(dict.fromkeys(i for i in look.audit_ids if i not in seen))
    clocks = dict(memory.clocks)
    progressed = []
    stepped = {key for key, step in look.progress.items() if step is not None or key == CHECKPOINTS}
    for key in sorted(stepped):
        step = look.progress[key]
        clock = clocks.get(key)
        if clock is None or clock.step != step:
            clocks[key] = ProgressClock(step, now)
            progressed.append((key, step or 0, now))
    # Running, with no step yet (a TPU worker's runner heartbeats; no step line in a job's log): judged only once
    # the workload is known to log steps; a clock from the first such look, and no progress for the ledger.
    stepless = sorted(key for key in {*look.heartbeats, *look.progress} if key not in stepped
                      and (limits.expect_steps or key in memory.stepping))
    for key in stepless:
        clocks.setdefault(key, ProgressClock(None, now))
    stepping = tuple(sorted((stepped - {CHECKPOINTS}).union(memory.stepping)))
    if limits.restart_seconds is not None:
        _restart_clock(clocks, look, now)
    if look.silent is not None:
        silent = {SILENT + key for key in look.silent}
        clocks = {k: c for k, c in clocks.items() if not k.startswith(SILENT) or k in silent}
        clocks.update({key: ProgressClock(None, now) for key in silent if key not in clocks})
    memory = WatchMemory(resource=look.resource, clocks=tuple(sorted(clocks.items())),
                         audit_seen=(memory.audit_seen + fresh)[-AUDIT_IDS_KEPT:], stepping=stepping)
    judged = {*stepped, *stepless} - ({CHECKPOINTS} if LOGGED in stepping else set())
    failure = _failure(memory, look, now, limits, judged=sorted(judged))
    ahead = None if failure is not None or limits.maintenance is None else plan(
        look.maintenance, now, limits.maintenance, requested=look.checkpoint_requested, acked=look.checkpoint_acks)
    return memory, Verdict(failure, tuple(progressed), fresh, ahead)


def _restart_clock(clocks: dict[str, ProgressClock], look: Look, now: float) -> None:
    """Start the :data:`RESTARTING` clock in ``clocks`` (in place) on a restart no older than every step line of
    ``look`` (kept, not restarted, on another restart before a step); stop it on a step line newer than every
    restart."""
    stepped_at = max((at for at, _, start in look.step_lines if not start), default=None)
    restarted_at = max(look.restarts, default=None)
    if restarted_at is not None and (stepped_at is None or restarted_at >= stepped_at):  # shipped together: it last
        clocks.setdefault(RESTARTING, ProgressClock(None, now))
    elif stepped_at is not None:
        clocks.pop(RESTARTING, None)


def _failure(memory: WatchMemory, look: Look, now: float, limits: Limits, judged: Sequence[str]) -> Failure | None:
    """The first failure of the look (see :func:`observe`); ``judged``: the progress clock keys judged, sorted."""
    if limits.queue_seconds is not None:
        waited = classify_queue_wait(look.state, look.queued_since, now, limits.queue_seconds,
                                     platform=look.platform, resource=look.resource)
        if waited is not None:
            return waited
    if limits.startup_seconds is not None:
        for key in sorted(look.silent or ()):
            clock = memory.clock(SILENT + key)
            if clock is not None and now - clock.since > limits.startup_seconds:
                worker = key.removeprefix("worker ") if key.startswith("worker ") else None
                return Failure(FailureClass.WORKER_SILENT, look.platform, worker_id=worker, timestamp=clock.since,
                               message=f"{key}: no report from its runner for {now - clock.since:.0f} s on a node "
                                       f"that is up (startup_timeout {limits.startup_seconds:.0f} s)")
    hang = limits.hang_seconds
    if hang is None:
        return None
    for key, beat in sorted(look.heartbeats.items()):
        if beat and now - beat > hang:
            return _hang(look, key, f"{key}: no heartbeat for {now - beat:.0f} s", beat)
    allowance = limits.restart_seconds
    restarting = memory.clock(RESTARTING) if allowance is not None else None
    if allowance is not None and restarting is not None:  # the restart clock alone, until a step after the restart
        stalled = now - restarting.since
        if stalled <= allowance:
            return None
        return _hang(look, RESTARTING, f"restarting: no step logged in the {stalled:.0f} s since a restart was read "
                                       f"(restart_timeout {allowance:.0f} s)", restarting.since)
    for key in judged:
        clock = memory.clock(key)
        # before the job's first progress (its start: the container, the restore), the start-up's allowance
        limit, name = ((allowance, "restart_timeout") if allowance is not None and clock is not None
                       and clock.step is None else (hang, "hang_timeout"))
        if clock is None or now - clock.since <= limit:
            continue
        stalled = now - clock.since
        if key == CHECKPOINTS:
            where = f"step {clock.step}" if clock.step is not None else "no checkpoint"
            message = f"no new checkpoint past {where} for {stalled:.0f} s ({name} {limit:.0f} s)"
        elif clock.step is None:
            message = f"{key}: running {stalled:.0f} s without logging a step ({name} {limit:.0f} s)"
        else:
            message = f"{key}: no progress past step {clock.step} for {stalled:.0f} s ({name} {limit:.0f} s)"
        return _hang(look, key, message, clock.since)
    return None


def _hang(look: Look, key: str, message: str, since: float) -> Failure:
    """A HANG failure dated when the stall began (the last progress or heartbeat)."""
    worker = key.removeprefix("worker ") if key.startswith("worker ") else None
    return Failure(FailureClass.HANG, look.platform, worker_id=worker, message=message, timestamp=since)


def ledger_steps(verdict: Verdict, memory: WatchMemory, look: Look | None = None) -> list[tuple[float, int, bool]]:
    """The ``(time, step, start)`` reports of ``verdict`` for the goodput ledger (``start``: a process started,
    resuming from ``step``): the run's lead only -- worker 0 of a TPU slice; a CustomJob's logged steps once it has
    logged one (``memory`` is the one the verdict came with), else its checkpoints (mixing the two would read as
    steps going back). A CustomJob's logged steps are the lines ``look`` read (``Look.step_lines``: each at its
    own time, process starts among them) when it read any, else the step the look saw, at the look's time. A start
    line read before the job's first logged step (the read fell between a process's ``resuming from step N`` and
    its first ``step`` line) is reported all the same: it is the process's start, not a step to mix up."""
    lead = {worker_key(0), LOGGED if LOGGED in memory.stepping else CHECKPOINTS}
    lines = list(look.step_lines) if look is not None else []
    if LOGGED not in lead:
        lines = [line for line in lines if line[2]]
    return sorted([*((at, step, False) for key, step, at in verdict.progressed
                     if key in lead and not (lines and key == LOGGED)),
                   *((float(at), int(step), bool(start)) for at, step, start in lines)])


__all__ = [
    "AUDIT_IDS_KEPT",
    "CHECKPOINTS",
    "LOGGED",
    "SILENT",
    "Limits",
    "Look",
    "ProgressClock",
    "Verdict",
    "WatchMemory",
    "ledger_steps",
    "observe",
    "worker_key",
]
