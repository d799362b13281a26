"""The one way a kill releases a run's resources, from a worker (an operator's ``on_kill``) or from the triggerer
(a trigger's ``on_kill``): the same rule for how long it may take, and the same release call per platform.

A kill comes with a deadline that Airflow sets: the triggerer abandons a trigger's ``on_kill`` after
``[triggerer] on_kill_timeout`` seconds (default 30; Airflow 3.3, "Configuration Reference"), and the task's
supervisor sends SIGKILL ``[core] killed_task_cleanup_time`` seconds (default 60) after the SIGTERM whose
handler calls the operator's ``on_kill``. A kill spends :data:`KILL_SHARE` of that on its release -- the API
calls with their retries of transient errors, and for a TPU node the wait for the deletion -- and keeps the rest
for closing its client (:func:`kill_budget`). The release uses a client of its own (an operator's ``on_kill`` may
run in a signal handler that interrupted a call on the operator's client) built from the task's connection, and
never raises: what it could not release is logged with what to do.

Importing this module imports no Google library and nothing of Airflow (the triggers' modules import it in the
triggerer's event loop); the release functions import the platform's hook when called (in a worker thread).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..supervisor.reconcile import Release

log = logging.getLogger(__name__)

#: The share of the time Airflow gives a kill that the release may spend (the rest closes its client).
KILL_SHARE = 0.8

#: Where a kill runs, and the Airflow setting (section, key, default seconds) that bounds it there.
KILL_DEADLINES = {
    "triggerer": ("triggerer", "on_kill_timeout", 30.0),
    "worker": ("core", "killed_task_cleanup_time", 60.0),
}


def kill_budget(where: str, conf: Any = None) -> float:
    """Seconds a kill may spend releasing: :data:`KILL_SHARE` of the deadline Airflow sets where it runs.

    Args:
        where: ``"triggerer"`` (a trigger's ``on_kill``) or ``"worker"`` (an operator's).
        conf: Airflow's configuration (``compat.conf``); None: read it (imports Airflow's configuration).

    Raises:
        ValueError: ``where`` is neither.
    """
    if where not in KILL_DEADLINES:
        raise ValueError(f"kill_budget: where must be one of {sorted(KILL_DEADLINES)}, got {where!r}")
    if conf is None:
        from ..compat import conf
    section, key, default = KILL_DEADLINES[where]
    try:
        seconds = float(conf.getfloat(section, key, fallback=default))
    except (TypeError, ValueError):
        seconds = default
    return KILL_SHARE * (seconds if seconds > 0 else default)


def release_on_kill(platform: str, releases: Sequence[Release], budget: float, *, conn_id: str | None,
                    impersonation_chain: Any = None, emulator: str | None = None,
                    connection: Any = None) -> str | None:
    """Carry out a kill's ``Release`` commands (:func:`~..supervisor.reconcile.releases_on_kill`) with a client of
    its own whose retries stop within ``budget`` seconds: the platform backend's ``release_all`` -- the one way the
    provider cancels a job (:func:`.vertex.release_all`) or deletes a node or queued resource
    (:func:`.tpu.release_all`, which also waits for the deletions within ``budget``). Blocks: call it in a worker
    thread from an event loop.

    Args:
        platform: ``"vertex_ai"`` or ``"tpu"``.
        releases: what to release.
        budget: seconds (:func:`kill_budget`).
        gcp_conn_id, impersonation_chain, emulator: the task's connection (``emulator``: the emulator's
            ``host:port``, a trigger's; None: the connection's own setting).

    Returns:
        None when every release was carried out, else what went wrong and what to do (also logged).

    Raises:
        ValueError: an unknown ``platform`` (a programming error, raised before any call).
    """
    if platform == "vertex_ai":
        from ..hooks.vertex_ai import ResilientVertexAIHook
        from .vertex import release_all as release_jobs

        def release(hook: Any) -> None:
            release_jobs(hook, releases)

        make: Any = ResilientVertexAIHook
    elif platform == "tpu":
        from ..hooks.tpu import ResilientTPUHook
        from .tpu import release_all as release_nodes

        def release(hook: Any) -> None:
            release_nodes(hook, releases, budget)

        make = ResilientTPUHook
    elif platform == "modelarts":
        from ..hooks.modelarts import ResilientModelArtsHook
        from .modelarts import release_all as release_training_jobs

        def release(hook: Any) -> None:
            release_training_jobs(hook, releases)

        def make(conn_id: Any, _chain: Any, *, emulator: Any, api_retry_seconds: float) -> Any:
            return ResilientModelArtsHook(conn_id, api_retry_seconds=api_retry_seconds, connection=connection)
    else:
        raise ValueError(f"release_on_kill: platform must be 'vertex_ai', 'tpu' or 'modelarts', got {platform!r}")
    names = " and ".join(r.resource.name for r in releases)
    hook = None
    try:
        hook = make(conn_id, impersonation_chain, emulator=emulator, api_retry_seconds=budget)
        release(hook)
    except Exception as exc:  # a kill must end: say what may be left and what to do
        problem = (f"releasing {names} may not have finished within {budget:.0f} s "
                   f"({type(exc).__name__}: {exc or 'no detail'}): check it and end it yourself if it is live")
        log.warning("%s", problem)
        return problem
    finally:
        if hook is not None:
            hook.close()
    return None


__all__ = ["KILL_DEADLINES", "KILL_SHARE", "kill_budget", "release_on_kill"]
