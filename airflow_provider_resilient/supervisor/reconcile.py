"""Which live cloud resources no task instance is running any more: the pure rule of the reconciler.

Rules of the module (as :mod:`.machine`): no I/O, no clock, no Airflow or Google imports.

Theory of operation. Each CustomJob, TPU node and queued resource the operators create names the task
instance that created it (``AIRFLOW_CTX_DAG_ID`` / ``AIRFLOW_CTX_TASK_ID`` / ``AIRFLOW_CTX_DAG_RUN_ID`` /
``AIRFLOW_CTX_MAP_INDEX`` in a job's environment, the same keys in a node's metadata; see
:func:`owner_env`). Normally the task instance releases what it created -- on success, on failure, through
its own ``on_kill`` or its trigger's. Airflow 3.3 leaves gaps (see the documentation's "UI actions" page): a task
marked failed or success before its trigger started, or while no triggerer runs, calls no ``on_kill``; a
deleted DAG run calls nothing; a worker killed with SIGKILL and never retried leaves what it started. The
reconciler (``operators.reconcile``) closes them: it lists the live resources that carry the provider's
labels, asks Airflow for the state of each owner, and this module says which to release::

    owner's task instance                                  the resource
    -----------------------                                ------------
    running, deferred, queued, scheduled, up_for_retry,    kept: the task (or its next try) still owns it --
      up_for_reschedule, restarting, or no state (cleared)   a cleared task's next try ends it itself
    success, failed, skipped, upstream_failed, removed     released (cancel the job / delete the node)
    gone (its DAG run was deleted)                         released
    unknown (the resource names no task instance)          kept, and reported: not ours to judge
    any, with keep_node (``resilient-keep`` label)         kept: the user asked to keep it

A finished task instance never needs its resources again: its next try, if a person clears it, starts a
new attempt from the latest checkpoint (a Clear of a finished run never reattaches to a live attempt).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Environment variables (a job's worker pools) and metadata keys (a TPU node) naming the owning task
#: instance. The first three are Airflow's own names for a task's context variables.
OWNER_KEYS = ("AIRFLOW_CTX_DAG_ID", "AIRFLOW_CTX_TASK_ID", "AIRFLOW_CTX_DAG_RUN_ID", "AIRFLOW_CTX_MAP_INDEX")

#: Task instance states in which the task will never use its resources again.
FINISHED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})

#: The owner's task instance does not exist (its DAG run was deleted).
GONE = "gone"


@dataclass(frozen=True)
class Owner:
    """The task instance that created a resource."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1


@dataclass(frozen=True)
class OwnedResource:
    """A live resource seen by the reconciler.

    Attributes:
        name: its resource name (``projects/P/locations/L/customJobs/ID``, ``.../nodes/ID``,
            ``.../queuedResources/ID``).
        kind: ``custom_job``, ``tpu_node`` or ``queued_resource``.
        owner: who created it; None when it names no task instance (created before owners were recorded,
            or by hand with our labels).
        keep: the user asked to keep it (``keep_node=True``).
        checkpoint_dir: where its workload writes checkpoints (``RESILIENT_CHECKPOINT_DIR`` in its environment
            or metadata), when known.
    """

    name: str
    kind: str
    owner: Owner | None
    keep: bool = False
    checkpoint_dir: str | None = None


@dataclass(frozen=True)
class Release:
    """Command: release ``resource`` (cancel the job; delete the node or queued resource), because ``why``."""

    resource: OwnedResource
    why: str


def owner_env(dag_id: str, task_id: str, run_id: str, map_index: int) -> dict[str, str]:
    """The :data:`OWNER_KEYS` of a task instance, as environment variables or node metadata."""
    return dict(zip(OWNER_KEYS, (dag_id, task_id, run_id, str(map_index)), strict=True))


def owner_from(values: Mapping[str, str]) -> Owner | None:
    """The :class:`Owner` that :func:`owner_env` wrote into ``values`` (a job's environment, a node's
    metadata), or None when they do not name one completely."""
    dag_id, task_id, run_id, map_index = (values.get(k) for k in OWNER_KEYS)
    if not (dag_id and task_id and run_id):
        return None
    try:
        index = int(map_index) if map_index not in (None, "") else -1
    except ValueError:
        return None
    return Owner(dag_id, task_id, run_id, index)


def releases(resources: Iterable[OwnedResource], states: Mapping[Owner, str | None]) -> list[Release]:
    """The resources to release (see the module docstring's table), in the order given.

    Args:
        resources: the live resources that carry the provider's labels.
        states: each owner's task instance state as Airflow reports it (None: no state, e.g. just cleared),
            or :data:`GONE` when the task instance does not exist. An owner missing from ``states`` was not
            looked up (e.g. the lookup failed): its resources are kept.
    """
    out = []
    for resource in resources:
        if resource.keep or resource.owner is None or resource.owner not in states:
            continue
        state = states[resource.owner]
        if state == GONE:
            out.append(Release(resource, f"its task instance no longer exists (DAG run {resource.owner.run_id} "
                                         "was deleted)"))
        elif state in FINISHED_STATES:
            out.append(Release(resource, f"its task instance is {state}"))
    return out


def _overlap(a: str, b: str) -> bool:
    """Whether two checkpoint locations are one directory or one holds the other."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def other_writers(resources: Iterable[OwnedResource], me: Owner, checkpoint_dir: str) -> list[OwnedResource]:
    """The live resources of *other* task instances whose workload writes checkpoints where ``me``'s would --
    the same directory, or one inside the other. Two runs in one checkpoint directory resume from each other's
    saves and overwrite them (an orphaned run of yesterday and today's run, two mapped tasks given one path):
    the operators refuse to submit beside them. Resources that name no owner or no checkpoint directory are not
    judged.

    Args:
        resources: the live resources that carry the provider's labels (the backends' ``live_owned``).
        me: the task instance about to submit (its own earlier attempts are not "other").
        checkpoint_dir: where it would write (``gs://...`` or a local path).
    """
    return [r for r in resources if r.owner is not None and r.owner != me and r.checkpoint_dir
            and _overlap(r.checkpoint_dir, checkpoint_dir)]


#: The order in which a stopping task's releases run: a queued resource before its node (deleting a queued
#: resource with ``force`` deletes its node too: the node's own deletion then finds it gone or going).
_RELEASE_ORDER = {"queued_resource": 0, "custom_job": 1, "tpu_node": 2}


def releases_on_kill(resources: Iterable[OwnedResource]) -> list[Release]:
    """Commands: what a kill of the task releases -- Airflow calls ``on_kill`` in the task's worker, or in the
    triggerer for a deferred task, when a person marks the task failed or success or clears it, or when it
    times out. Every live resource of the current attempt goes (a cleared task's next try starts a new attempt
    from the latest checkpoint: it never needs the old one), except one the user asked to keep
    (``keep_node``, or ``cancel_on_kill=False`` for a job); queued resources first (:data:`_RELEASE_ORDER`).

    This is the one rule the operators' and the triggers' ``on_kill`` carry out (through their backend's
    ``release_all``); the reconciler's rule for the kills that call no ``on_kill`` is :func:`releases`.

    Args:
        resources: the attempt's live resources as the killed operator or trigger knows them (``owner`` may be
            None: the task is the owner).
    """
    kept = sorted((r for r in resources if not r.keep), key=lambda r: _RELEASE_ORDER.get(r.kind, 3))
    return [Release(resource, "the task was killed (marked failed or success, cleared, or timed out)")
            for resource in kept]


#: The task instance's state could not be read (the trigger knows no task instance, or Airflow did not answer).
UNKNOWN = "unknown"

#: Task instance states in which a cancelled trigger's task still owns the job or node the trigger watched: the
#: task is deferred (on this trigger, re-created on another triggerer, or on a newer trigger of the same try), was
#: resumed by an event (scheduled, queued, running), or will be retried and reattach (up_for_retry,
#: up_for_reschedule). A trigger cancelled then was moved, not killed.
OWNED_STATES = frozenset({"deferred", "scheduled", "queued", "running", "up_for_retry", "up_for_reschedule"})


@dataclass(frozen=True)
class CancelJudgement:
    """Whether a trigger's cancellation was a kill of its task, and why (for the trigger's log line)."""

    kill: bool
    why: str


def judge_trigger_cancel(state: str | None) -> CancelJudgement:
    """Whether the triggerer's cancellation of a trigger means its task was killed -- judged by the task
    instance's state read from Airflow after the cancellation, never from the cancellation alone.

    Airflow's triggerer cancels a trigger when its task instance is no longer deferred on it (a person marked
    the task failed or success, or cleared it) but also when the trigger was re-assigned to another triggerer
    because this one's heartbeat lapsed (``[triggerer] triggerer_health_check_threshold``, 30 s by default: a
    long pause, a starved pod, a lost database connection): the stalled triggerer cancels the triggers it no
    longer owns when it wakes up, and Airflow 3.3 calls ``on_kill`` on that path too (``update_triggers`` and
    ``cancel_triggers`` in ``airflow/jobs/triggerer_job_runner.py``; apache/airflow pull request 73454). The
    trigger's copy on the other triggerer goes on watching the same job. So:

    ==============================================================  =======  =========================================
    task instance state                                             kill?    because
    ==============================================================  =======  =========================================
    success, failed, skipped, upstream_failed, removed              yes      a person marked it, or the run ended
    no state, restarting                                            yes      a person cleared it: its next try starts
                                                                             a new attempt (and ends this one itself)
    gone (:data:`GONE`)                                             yes      its DAG run was deleted
    deferred, scheduled, queued, running, up_for_retry,             no       the trigger was moved, or its task
    up_for_reschedule (:data:`OWNED_STATES`)                                 resumed: the task still owns it
    unknown (:data:`UNKNOWN`)                                       no       the reconciler releases it if the task
                                                                             has finished (``operators.reconcile``)
    ==============================================================  =======  =========================================

    A release done twice (two copies of one trigger, or a trigger and the task) is harmless: cancelling an ended
    job or deleting a deleted node changes nothing.

    Args:
        state: the task instance's state as Airflow reports it (``None``: no state), :data:`GONE` or
            :data:`UNKNOWN`.
    """
    if state == UNKNOWN:
        return CancelJudgement(False, "its task instance's state could not be read: keeping it (the reconciler "
                                      "releases it once the task instance has finished)")
    if state in OWNED_STATES:
        return CancelJudgement(False, f"its task instance is {state}: the trigger was moved (another triggerer "
                                      "watches it, or the task resumed), not killed")
    if state == GONE:
        return CancelJudgement(True, "its task instance no longer exists (its DAG run was deleted)")
    if state in FINISHED_STATES:
        return CancelJudgement(True, f"its task instance was marked {state}")
    return CancelJudgement(True, f"its task instance was cleared (state {state or 'none'})")


def judge_task_kill(state: str | None) -> CancelJudgement:
    """Whether a kill of the task in its worker -- Airflow's SIGTERM to the task process, or its
    ``execution_timeout`` -- means the task is over, so that ``on_kill`` releases its job or node; judged by the
    task instance's state read from Airflow when ``on_kill`` runs.

    Airflow's supervisor also stops a task process when the API server says the try should no longer run, and that
    is not always a person's action: a worker whose heartbeats did not reach the API server within
    ``[scheduler] task_instance_heartbeat_timeout`` (a loaded machine, a network blip) is taken for dead, its try
    marked for retry, and the next try reattaches to the same job -- which the old try's ``on_kill`` must not cancel
    (seen at 1,000 tasks on two cores: a healthy CustomJob cancelled, its task failed with ``cancelled``). So:

    ==============================================================  =======  =========================================
    task instance state                                             kill?    because
    ==============================================================  =======  =========================================
    running                                                         yes      this try itself is ending: its
                                                                             ``execution_timeout``, or its worker
                                                                             stopping it
    up_for_retry, up_for_reschedule, scheduled, queued, deferred    no       another try owns the job or node now:
                                                                             it reattaches
    unknown (:data:`UNKNOWN`)                                       no       the reconciler releases it once the task
                                                                             instance has finished
    anything else                                                   as :func:`judge_trigger_cancel`: marked
                                                                    failed or success, cleared, or deleted
    ==============================================================  =======  =========================================

    Args:
        state: the task instance's state (``None``: no state), :data:`GONE` or :data:`UNKNOWN`.
    """
    if state == "running":
        return CancelJudgement(True, "its try is ending (its execution_timeout, or its worker stopping it)")
    if state in OWNED_STATES:
        return CancelJudgement(False, f"its task instance is {state}: the next try reattaches to it")
    return judge_trigger_cancel(state)


def owner_states(owners: Iterable[Owner],
                 task_states: Callable[[str, list[str]], Mapping[str, Mapping[str, Any]]]) -> dict[Owner, str | None]:
    """Each owner's task instance state (None: no state), or :data:`GONE` when its DAG run or task instance
    does not exist. One ``task_states`` call per DAG.

    Args:
        owners: the task instances to look up.
        task_states: ``(dag_id, run_ids) -> {run_id: {task_key: state}}``, as ``RuntimeTaskInstance.get_task_states``
            answers (``task_key``: ``task_id``, or ``task_id_<map_index>`` for a mapped task).
    """
    owners = set(owners)
    runs: dict[str, set[str]] = {}
    for owner in owners:
        runs.setdefault(owner.dag_id, set()).add(owner.run_id)
    states: dict[Owner, str | None] = {}
    for dag_id, run_ids in runs.items():
        found = task_states(dag_id, sorted(run_ids))
        for owner in (o for o in owners if o.dag_id == dag_id):
            tasks = found.get(owner.run_id)
            key = owner.task_id if owner.map_index < 0 else f"{owner.task_id}_{owner.map_index}"
            states[owner] = GONE if tasks is None or key not in tasks else tasks[key]
    return states


__all__ = ["FINISHED_STATES", "GONE", "OWNED_STATES", "OWNER_KEYS", "UNKNOWN", "CancelJudgement", "OwnedResource",
           "Owner", "Release", "judge_task_kill", "judge_trigger_cancel", "other_writers", "owner_env", "owner_from",
           "owner_states", "releases", "releases_on_kill"]
