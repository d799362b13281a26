"""Whether a trigger's cancellation was a person's kill of its task: the check every ``on_kill`` of ours makes
before it releases a job or a node.

Airflow's triggerer cancels a trigger for two reasons and, in Airflow 3.3, calls ``on_kill`` for both: its
task instance is no longer deferred on it (a person marked the task failed or success, or cleared it), or the
trigger was re-assigned to another triggerer while this one's heartbeat had lapsed -- the other triggerer
goes on watching the same job, and the stalled one cancels its copy when it wakes up. Only the task
instance's state tells the two apart, so :func:`judge_cancel` reads it from Airflow (through the triggerer's
own connection to the API server, as the Google provider's and the Kubernetes provider's triggers do in their
``safe_to_cancel``) and hands it to the pure rule :func:`~..supervisor.reconcile.judge_trigger_cancel`.

Importing this module imports no Google library and nothing of Airflow's task runner (that happens in a
worker thread when a trigger is cancelled).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..backends.base import airflow_task_states
from ..supervisor.reconcile import UNKNOWN, CancelJudgement, Owner, judge_trigger_cancel, owner_states

log = logging.getLogger(__name__)

#: ``(dag_id, run_ids) -> {run_id: {task_key: state}}``: how a task instance's state is read.
TaskStates = Callable[[str, list[str]], Mapping[str, Mapping[str, Any]]]


def owner_of(trigger: Any) -> Owner | None:
    """The task instance the triggerer runs ``trigger`` for (``trigger.task_instance``, set by the triggerer), or
    None when it has none (a trigger run outside a triggerer)."""
    ti = getattr(trigger, "task_instance", None)
    dag_id, task_id, run_id = (getattr(ti, key, None) for key in ("dag_id", "task_id", "run_id"))
    if not (isinstance(dag_id, str) and isinstance(task_id, str) and isinstance(run_id, str)):
        return None
    map_index = getattr(ti, "map_index", None)
    return Owner(dag_id, task_id, run_id, map_index if isinstance(map_index, int) else -1)


async def task_instance_state(owner: Owner, task_states: TaskStates | None = None) -> str | None:
    """The state of ``owner``'s task instance now (None: no state), ``GONE`` when it no longer exists, or
    ``UNKNOWN`` when it cannot be read. ``task_states`` (default :func:`airflow_task_states`) runs in a worker
    thread. Never raises."""
    try:
        states = await asyncio.to_thread(owner_states, [owner], task_states or airflow_task_states)
    except Exception as exc:  # no supervisor, the API server down or refusing: say so, decide nothing
        log.warning("Cannot read the state of task instance %s: %s", owner, exc)
        return UNKNOWN
    return states[owner]


async def judge_cancel(trigger: Any, task_states: TaskStates | None = None) -> CancelJudgement:
    """Whether the triggerer's cancellation of ``trigger`` is a kill of its task (release what it watches) or a
    move (keep it): :func:`~..supervisor.reconcile.judge_trigger_cancel` of its task instance's state, read with
    ``task_states`` (default :func:`airflow_task_states`).

    A trigger with no task instance was not run by a triggerer for a task (its ``on_kill`` was called directly,
    e.g. by a user's own code): there is nothing to tell apart, and the kill is taken as asked.
    """
    owner = owner_of(trigger)
    if owner is None:
        return CancelJudgement(True, "on_kill was called directly, not by a triggerer for a task instance")
    return judge_trigger_cancel(await task_instance_state(owner, task_states))


__all__ = ["TaskStates", "airflow_task_states", "judge_cancel", "owner_of", "task_instance_state"]
