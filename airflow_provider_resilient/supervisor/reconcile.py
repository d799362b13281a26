"""Which live cloud resources no task instance is running any more: the pure rule of the reconciler.

Rules of the module (as :mod:`.machine`): no I/O, no clock, no Airflow or Google imports.

Theory of operation. Each CustomJob, TPU node and queued resource the operators create names the task
instance that created it (``AIRFLOW_CTX_DAG_ID`` / ``AIRFLOW_CTX_TASK_ID`` / ``AIRFLOW_CTX_DAG_RUN_ID`` /
``AIRFLOW_CTX_MAP_INDEX`` in a job's environment, the same keys in a node's metadata; see
:func:`owner_env`). Normally the task instance releases what it created -- on success, on failure, through
its own ``on_kill`` or its trigger's. Airflow 3.3 leaves gaps (see the README, "What a click does"): a task
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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


__all__ = ["FINISHED_STATES", "GONE", "OWNER_KEYS", "OwnedResource", "Owner", "Release", "other_writers", "owner_env",
           "owner_from", "releases", "releases_on_kill"]
