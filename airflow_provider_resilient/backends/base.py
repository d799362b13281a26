"""What a platform's backend is: the typed interface the operators' shared shell (:mod:`..operators.base`)
carries the supervisor's commands out through.

A backend knows one platform's resources -- a Vertex AI CustomJob (:mod:`.vertex`), a Cloud TPU node or
queued resource (:mod:`.tpu`) -- and nothing of Airflow: it finds an attempt's resource by its labels or
name, creates one, makes one look at it and says what the look means as a supervisor event, ends one and
waits until it has ended, and releases what a stopping run leaves. It decides nothing: whether to retry,
re-create, fall back or fail is the policy's, through :func:`~..supervisor.step`. Adding a platform is one
backend and a thin operator that builds it from its arguments.

Backends speak the supervisor's events (``Submitted``, ``JobFailed`` ...) and the observer's ``Look``: they
import those data types, and the supervisor imports nothing of them. Importing this module imports no Google
library (the triggers' modules import it in the triggerer's event loop).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..policy import Fallback, Platform
from ..supervisor import Ended, JobFailed, JobSucceeded, MoveOff, SubmitFailed, Submitted
from ..supervisor.observe import Limits, Look, Verdict
from ..supervisor.reconcile import OwnedResource, Owner

#: How a backend has a look judged: the operators' observer
#: (:meth:`~..operators.base.SupervisedOperator._observe`), which keeps its memory in the persisted run state.
Judge = Callable[[Look, Limits], Verdict]
#: What one look at a live attempt reports: an outcome, a move off the node before a maintenance window (TPU),
#: or None while it just runs (or waits for capacity).
LookResult = JobSucceeded | JobFailed | MoveOff | None


@dataclass(frozen=True)
class AttemptSpec:
    """What one ``Submit`` command asks a backend to create, built once for every platform by the operators'
    shell.

    Attributes:
        attempt: the attempt number (1-based).
        task: the Airflow task instance whose attempt it is (its resources carry it as labels, and its
            ``map_index`` is -1 when the task is not mapped).
        fallback: the target to run on instead of the operator's own (a stockout or queue timeout moved the
            run), or None; ``fallback_index`` its place in the policy's fallbacks (-1: none).
        labels: every label of the resource: the user's and the provider's (``own_labels``).
        own_labels: the provider's labels of this attempt (:func:`~..specs.common.job_labels`), by which a
            resource created by a call whose reply was lost is found again.
        owner: the task instance as the reconciler reads it back (:func:`~..supervisor.reconcile.owner_env`),
            put in the workers' environment and, on a TPU node, its metadata.
        env: the variables every worker gets besides the user's: ``owner`` and, once the checkpoints were looked
            up, the ``RESILIENT_*`` resume variables (:mod:`..specs.common`).
        resume_uri, resume_step: the latest complete checkpoint the attempt resumes from (None: from scratch).
    """

    attempt: int
    task: Owner
    fallback: Fallback | None = None
    fallback_index: int = -1
    labels: Mapping[str, str] = field(default_factory=dict)
    own_labels: Mapping[str, str] = field(default_factory=dict)
    owner: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    resume_uri: str | None = None
    resume_step: int | None = None


class Backend(Protocol):
    """One platform's resources as the supervisor's commands need them; the times it reports are its clock's
    (epoch seconds, injected: tests move it). Every method may raise
    ``google.api_core.exceptions.GoogleAPICallError`` for an API error its hook did not retry away (the
    task fails and a task retry reattaches)."""

    platform: Platform

    def find(self, spec: AttemptSpec) -> Submitted | None:
        """The resource attempt ``spec.attempt`` already has -- the task was interrupted after creating it, or
        the create call's reply was lost -- as ``Submitted`` (watch it instead of creating another), or None."""
        ...

    def live_owned(self) -> list[OwnedResource]:
        """Every live resource the provider created where this run may go (its region or zone and its
        fallbacks'), with owner and checkpoint directory: the supervisor's ``other_writers`` reads it."""
        ...

    def submit(self, spec: AttemptSpec) -> Submitted | SubmitFailed:
        """Create the attempt's resource (carry out ``Submit``). A refusal of the create call (quota, stockout,
        a bad request) is ``SubmitFailed`` with the classified failure; a resource granted later (a queued
        resource) is ``Submitted`` at once, and its wait is watched."""
        ...

    def look(self, name: str, judge: Judge, started_at: float | None = None) -> LookResult:
        """One look at the live attempt ``name``: ``JobSucceeded`` / ``JobFailed`` when something happened
        (``live=True`` when the resource still runs and must be ended: hung, queued too long, a node that
        failed), None while it runs. What the look means beyond the platform's states is ``judge``'s to say.
        ``started_at``: when the attempt was submitted (epoch seconds), where the platform's records of it
        begin."""
        ...

    def end(self, name: str, wait: bool = True) -> Ended:
        """End ``name`` (cancel the job, delete the node) and wait until the platform says it has ended (carry
        out ``EndAttempt``); ``Ended.succeeded`` when it finished successfully before the end took effect.
        ``wait=False`` (``EndAttempt.wait``: the resource runs nothing): a backend may request the end and return
        at once, as long as it is gone before the next attempt is watched (the TPU backend does; a job's
        cancel is always waited for)."""
        ...

    def release(self, name: str) -> None:
        """The run stops (``Succeed.end`` / ``Fail.end``) with ``name`` live: end it, as the platform's
        operator was asked (``keep_node`` keeps a TPU node)."""
        ...


def task_instance(dag_id: str, task_id: str, run_id: str, map_index: Any) -> Owner:
    """The task instance as an :class:`~..supervisor.reconcile.Owner`; ``map_index`` None or negative: not
    mapped (-1)."""
    index = -1 if map_index is None else int(map_index)
    return Owner(dag_id, task_id, run_id, index if index >= 0 else -1)


def airflow_task_states(dag_id: str, run_ids: list[str]) -> Mapping[str, Mapping[str, Any]]:
    """``RuntimeTaskInstance.get_task_states`` of the task SDK: the states of the DAG's task instances in
    ``run_ids`` (``{run_id: {task_key: state}}``), asked of Airflow's API server through the process's supervisor
    (in a worker: the task's; in the triggerer: the triggerer's own). Blocks: call it in a worker thread. What an
    operator's and a trigger's ``on_kill`` read before they release anything.

    Raises:
        Exception: whatever the task SDK raises when there is no supervisor to ask or the API server refused.
    """
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    states: Mapping[str, Mapping[str, Any]] = RuntimeTaskInstance.get_task_states(dag_id=dag_id, run_ids=run_ids)
    return states


__all__ = ["AttemptSpec", "Backend", "Judge", "LookResult", "airflow_task_states", "task_instance"]
