"""Whether a kill in the worker is a real one: an operator's ``on_kill`` asks Airflow about its task instance
before it releases anything (:func:`~..supervisor.reconcile.judge_task_kill` decides from the state).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..backends.base import airflow_task_states
from ..supervisor.reconcile import OwnedResource, Owner

#: Seconds ``on_kill`` waits for Airflow to tell the task instance's state before it keeps the job or node.
KILL_STATE_SECONDS = 10.0

Reader = Callable[[str, list[str]], Mapping[str, Mapping[str, Any]]]


def in_task_runner() -> bool:
    """Whether this process runs a task under Airflow's supervisor (the task SDK's channel to it is set up)."""
    runner = sys.modules.get("airflow.sdk.execution_time.task_runner")
    return runner is not None and getattr(runner, "SUPERVISOR_COMMS", None) is not None


def judge_kill(owner: Owner | None, reader: Reader, log: logging.Logger | Any) -> Any:
    """Whether ``on_kill`` should release the task's job or node: :func:`~..supervisor.reconcile.judge_task_kill` of
    the task instance's state, read from Airflow by ``reader`` (:func:`~..backends.base.airflow_task_states`:
    through the task process's supervisor) in a thread bounded by :data:`KILL_STATE_SECONDS` (``on_kill`` may run
    in a signal handler that interrupted a call to the supervisor: then the read times out, and the state is
    unknown). Outside Airflow's task runner (no supervisor: ``on_kill`` called directly, a unit test), or before
    the run was loaded (``owner`` None), the kill is taken as asked. Never raises.

    Returns:
        a :class:`~..supervisor.reconcile.CancelJudgement`.
    """
    import concurrent.futures

    from ..supervisor.reconcile import UNKNOWN, CancelJudgement, judge_task_kill, owner_states

    if owner is None or (reader is airflow_task_states and not in_task_runner()):
        return CancelJudgement(True, "on_kill was called outside Airflow's task runner")
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="resilient-kill-state")
    try:
        state = pool.submit(owner_states, [owner], reader).result(timeout=KILL_STATE_SECONDS)[owner]
    except Exception as exc:  # the API server down or busy, the supervisor's channel held: decide nothing
        log.warning("Cannot read the state of task instance %s: %s", owner, exc or type(exc).__name__)
        state = UNKNOWN
    finally:
        pool.shutdown(wait=False)
    return judge_task_kill(state)


def release_on_task_kill(live: Sequence[OwnedResource], judge: Callable[[], Any], platform: str,
                         conn_id: str | None, impersonation_chain: Any, log: logging.Logger | Any) -> None:
    """An operator's ``on_kill``: release what the supervisor's kill rule says of ``live``
    (:func:`~..supervisor.reconcile.releases_on_kill`: nothing marked ``keep``) when ``judge()`` (:func:`judge_kill`)
    says the task instance is really over, through :func:`~..backends.kill.release_on_kill` within
    :func:`~..backends.kill.kill_budget` (``"worker"``). Never raises."""
    from ..backends.kill import kill_budget, release_on_kill
    from ..compat import conf
    from ..supervisor.reconcile import releases_on_kill

    todo = releases_on_kill(live)
    if not todo:
        if live:
            log.info("Task killed; keeping %s (as asked): end it yourself", live[-1].name)
        return
    names = " and ".join(r.resource.name for r in todo)
    judgement = judge()
    if not judgement.kill:
        log.info("Task process stopped; leaving %s: %s", names, judgement.why)
        return
    release_on_kill(platform, todo, kill_budget("worker", conf), conn_id=conn_id,
                    impersonation_chain=impersonation_chain)


__all__ = ["KILL_STATE_SECONDS", "in_task_runner", "judge_kill", "release_on_task_kill"]
