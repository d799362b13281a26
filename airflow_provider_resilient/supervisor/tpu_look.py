"""What one look at a Cloud TPU attempt means: the TPU backend reads (:class:`QueuedReading`,
:class:`NodeReading`, the workers' reports, the announced maintenance), these pure functions judge, and the
backend carries out what they return (a checkpoint request on the nodes). Three stages, in the order the backend
reads:

1. :func:`judge_queue` -- the queued resource the node was requested through, while not granted: still waiting,
   failed (FAILED, SUSPENDED), waited past the queue timeout (the observer's), or granted.
2. :func:`judge_nodes` -- each node of the attempt (every slice of a multislice group) and the audit entries not
   seen before: a node gone, a node in a failed state (:func:`~..policy.classify_tpu_node`; its failure dated by
   the audit entry that names it, :func:`~..policy.node_events.dated_node_failure`), a maintenance event that came
   and went between two looks (an audit entry alone), or a node not READY yet.
3. :func:`judge_workers` -- the workers' reports on READY nodes: a runner that reported a failure, what the
   observer says of their progress and silence (hang, start-up deadline), success once every worker succeeded, and
   before an announced maintenance window a checkpoint request and / or a move.

Pure: no I/O, no clock (``now`` is epoch seconds); the observer is reached through ``judge`` (the operator's, which
keeps its memory in the run state).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..policy import Failure, FailureClass, Platform, classify_tpu_node, classify_worker_report
from ..policy.node_events import dated_node_failure, node_gone, queued_resource_failed
from .events import JobFailed, JobSucceeded, MoveOff
from .maintenance import MaintenanceSettings, Notice, next_look
from .observe import Limits, Look, Verdict, worker_key

#: How a look is judged by the observer (the operator's ``_observe``).
Judge = Callable[[Look, Limits], Verdict]
#: Queued resource states that wait for capacity; any other (ACTIVE, FAILED, SUSPENDED ...) is news.
QUEUE_WAITING_STATES = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING"})
#: The queued resource states that will never be granted (Cloud TPU, "Manage queued resources").
QUEUE_FAILED_STATES = frozenset({"FAILED", "SUSPENDED"})


@dataclass(frozen=True)
class QueuedReading:
    """The queued resource of an attempt, as read.

    Attributes:
        name: ``projects/P/locations/ZONE/queuedResources/ID``.
        state: its state name; None: it is gone (NotFound).
        created_at: its ``create_time`` (epoch seconds).
        error: ``failed_data.error.message`` (FAILED).
        node_state: while PROVISIONING, its node's state name (None: no node yet).
    """

    name: str
    state: str | None
    created_at: float = 0.0
    error: str = ""
    node_state: str | None = None


@dataclass(frozen=True)
class QueueJudgement:
    """:func:`judge_queue`'s answer: ``granted`` (look at the node next), else ``result`` (None: still waiting) and
    ``deadline`` (epoch seconds when the wait passes the queue timeout; None: no timeout)."""

    granted: bool
    result: JobFailed | None = None
    deadline: float | None = None


def judge_queue(queued: QueuedReading, judge: Judge, now: float, queue_limit: float | None) -> QueueJudgement:
    """Stage 1: granted when ACTIVE, gone, or PROVISIONING with its node past CREATING; a live QUEUE_TIMEOUT when
    FAILED or SUSPENDED, or when the observer judges the wait past ``queue_limit`` seconds (None: no limit, e.g. a
    ``valid_until`` the platform enforces); else still waiting."""
    state = queued.state
    if state is None or state == "ACTIVE":
        return QueueJudgement(True)
    if state in QUEUE_FAILED_STATES:
        return QueueJudgement(False, JobFailed(queued_resource_failed(queued.name, state, queued.error, now), now,
                                               live=True))
    if state == "PROVISIONING" and queued.node_state not in (None, "CREATING"):
        return QueueJudgement(True)
    deadline = queued.created_at + queue_limit if queue_limit is not None else None
    verdict = judge(Look(queued.name, Platform.TPU, state, queued_since=queued.created_at),
                    Limits(queue_seconds=queue_limit))
    if verdict.failure is not None:
        return QueueJudgement(False, JobFailed(verdict.failure, now, live=True), deadline)
    return QueueJudgement(False, None, deadline)


@dataclass(frozen=True)
class NodeReading:
    """One node of an attempt, as read.

    Attributes:
        name: ``projects/P/locations/ZONE/nodes/ID``.
        state: its state name; None: gone (NotFound).
        health: its health name.
        symptoms: its symptom type names.
        health_description: ``Node.health_description``.
        workers: how many worker VMs it has.
        checkpoint_request: the checkpoint request token in its metadata (None: none).
    """

    name: str
    state: str | None
    health: str = ""
    symptoms: tuple[str, ...] = ()
    health_description: str = ""
    workers: int = 1
    checkpoint_request: str | None = None


@dataclass(frozen=True)
class NodesJudgement:
    """:func:`judge_nodes`'s answer: ``result`` (an outcome, or None), ``failed`` (the index of a node in a failed
    state whose failure wants the audit entry that names its reason: the backend reads the node's new entries once
    more and calls :func:`node_failure`), ``ready`` (every node READY: its workers are looked at next) and
    ``stopped`` (every node of the attempt runs nothing: :data:`STOPPED_NODE_STATES` or gone)."""

    result: JobFailed | None = None
    failed: int | None = None
    failure: Failure | None = None
    ready: bool = False
    stopped: bool = False


#: Node states in which a node's VMs run no workload and, once its deletion is requested, never will again:
#: reclaimed, terminated, in repair or restarting (the workload would start again only after the repair or the
#: restart, which a node being deleted does not finish). ``JobFailed.stopped`` when every node of the attempt is
#: in one of them or gone.
STOPPED_NODE_STATES = frozenset({"PREEMPTED", "TERMINATED", "REPAIRING", "RESTARTING"})


def create_after_deletion(refusal: Failure) -> bool:
    """Whether a create refused with ``refusal`` (classified) while a node of the run is still being deleted
    (``EndAttempt(wait=False)``) is made once more when that deletion is done, instead of being a failure: a quota
    refusal -- the node being deleted may still count against the project's quota, and waiting for its deletion
    is what an end that waited would have done. A stockout is not: capacity is not the old node's to give back."""
    return refusal.failure_class == FailureClass.QUOTA_EXCEEDED


def slice_prefix(names: Sequence[str], index: int) -> str:
    """How a message names node ``index`` of a group (``"slice 1 (train-a1-1): "``); empty for a single node."""
    return f"slice {index} ({names[index].rsplit('/', 1)[1]}): " if len(names) > 1 else ""


def judge_nodes(nodes: Sequence[NodeReading], audits: Sequence[Failure], now: float) -> NodesJudgement:
    """Stage 2, over the attempt's nodes in slice order and the audit entries not seen before (classified,
    :func:`~..policy.node_events.classify_audit_entries`): a node gone is a maintenance failure (live when other
    slices of a group still bill); the first node in a failed state fails the attempt (dated by an entry that
    names its reason: :func:`node_failure`; ``failed`` set when none of ``audits`` does); an entry alone is a
    maintenance event that came and went; else ``ready`` when every node is READY."""
    names = [n.name for n in nodes]
    group = len(nodes) > 1
    stopped = all(n.state is None or n.state in STOPPED_NODE_STATES for n in nodes)
    for index, node in enumerate(nodes):
        if node.state is None:
            return NodesJudgement(JobFailed(node_gone(node.name, now, slice_prefix(names, index)), now, live=group,
                                            stopped=group and stopped))
        failure = classify_tpu_node(node.state, node.health, node.symptoms, node.health_description, timestamp=now)
        if failure is not None:
            told = [a for a in audits if a.terminate_reason]
            if not told:  # its entry may have come after the read
                return NodesJudgement(failed=index, failure=failure, stopped=stopped)
            return NodesJudgement(node_failure(failure, told, now, names, index, stopped))
    if audits:
        return NodesJudgement(JobFailed(audits[-1], now, live=True))
    return NodesJudgement(ready=all(n.state == "READY" for n in nodes))


def node_failure(failure: Failure, audits: Sequence[Failure], now: float, names: Sequence[str],
                 index: int, stopped: bool = False) -> JobFailed:
    """The live ``JobFailed`` of node ``index``'s ``failure``, dated by ``audits``
    (:func:`~..policy.node_events.dated_node_failure`), its message naming the slice of a group; ``stopped``:
    every node of the attempt runs nothing (:attr:`NodesJudgement.stopped`)."""
    failure = dated_node_failure(failure, audits, now)
    if len(names) > 1:
        failure = replace(failure, message=slice_prefix(names, index) + (failure.message
                                                                          or failure.failure_class.value))
    return JobFailed(failure, now, live=True, stopped=stopped)


@dataclass(frozen=True)
class WorkersJudgement:
    """:func:`judge_workers`'s answer.

    Attributes:
        result: ``JobFailed`` (a worker failed, hung, stayed silent), ``JobSucceeded`` (every worker succeeded;
            the node bills until deleted), ``MoveOff`` (before a maintenance window), or None while it runs.
        request: a checkpoint request token to set on every node now (before a maintenance window), or None.
        notice: the first announced maintenance window of the group (None: none).
        maintenance_due: epoch seconds when the window next needs a look (None: nothing due).
        reason: why the checkpoint request or the move (the maintenance step's), for the log.
    """

    result: JobFailed | JobSucceeded | MoveOff | None = None
    request: str | None = None
    notice: Notice | None = None
    maintenance_due: float | None = None
    reason: str = ""


def _step(report: Mapping[str, Any]) -> int | None:
    step = str(report.get("step") or "")
    return int(step) if step.isascii() and step.isdigit() and len(step) <= 15 else None


def judge_workers(name: str, nodes: Sequence[NodeReading], reports: Sequence[Sequence[Mapping[str, str]]],
                  notices: Sequence[Notice | None], judge: Judge, limits: Limits, now: float,
                  settings: MaintenanceSettings, ack_key: str) -> WorkersJudgement:
    """Stage 3, on READY nodes: ``reports`` per node (its workers' report dicts), ``notices`` per node (its announced
    maintenance). A worker whose runner reported a failure (:func:`~..policy.classify_worker_report`) fails the
    attempt; then the observer judges progress, heartbeats and silence (a group is one resource to it, its workers
    numbered slice by slice); every worker succeeded -> success; before an announced window the observer's
    maintenance step asks for a checkpoint and / or a move. ``ack_key``: the report key of a worker's
    acknowledged checkpoint request."""
    names = [n.name for n in nodes]
    pending = [n for n in notices if n is not None]
    notice = min(pending, key=lambda n: n.window_start or 0.0) if pending else None  # the first window
    flat = [r for node_reports in reports for r in node_reports]
    workers = 0
    silent, keys = [], []  # the group's workers, numbered slice by slice
    for index, (node, node_reports) in enumerate(zip(nodes, reports, strict=True)):
        count = max(len(node_reports), node.workers)
        keys += [(index, w) for w in range(len(node_reports))]
        silent += [worker_key(workers + w) for w in range(count)
                   if w >= len(node_reports) or not node_reports[w].get("status")]
        workers += count
    for number, report in enumerate(flat):
        index, worker = keys[number]
        failed = classify_worker_report(report, worker_id=str(number),
                                        label=f"{slice_prefix(names, index)}worker {worker}", timestamp=now)
        if failed is not None:
            return WorkersJudgement(JobFailed(failed, now, live=True), notice=notice)
    running = {worker_key(w): r for w, r in enumerate(flat) if r.get("status") == "running"}
    steps = {k: s for k, r in running.items() if (s := _step(r)) is not None}
    beats = {k: float(r.get("heartbeat") or 0) for k, r in running.items()}
    tokens = {n.checkpoint_request for n in nodes}
    requested = tokens.pop() if len(tokens) == 1 else None  # asked of every slice, or not yet
    acks = [r.get(ack_key, "") for r in flat] + [""] * (workers - len(flat))
    look = Look(name, Platform.TPU, nodes[0].state or "", progress=steps, heartbeats=beats, silent=silent,
                maintenance=notice, checkpoint_requested=requested, checkpoint_acks=acks)
    verdict = judge(look, limits)
    if verdict.failure is not None:
        return WorkersJudgement(JobFailed(verdict.failure, now, live=True), notice=notice)
    if all(reports) and all(r.get("status") == "succeeded" for r in flat):
        return WorkersJudgement(JobSucceeded(now, live=True), notice=notice)
    ahead = verdict.maintenance
    request = ahead.request if ahead is not None else None
    due = next_look(notice, settings, request or requested)
    move = MoveOff(now, ahead.reason) if ahead is not None and ahead.move else None
    return WorkersJudgement(move, request, notice, due, ahead.reason if ahead is not None else "")


__all__ = ["QUEUE_FAILED_STATES", "QUEUE_WAITING_STATES", "STOPPED_NODE_STATES", "Judge", "NodeReading",
           "NodesJudgement", "QueueJudgement", "QueuedReading", "WorkersJudgement", "create_after_deletion",
           "judge_nodes", "judge_queue", "judge_workers", "node_failure", "slice_prefix"]
