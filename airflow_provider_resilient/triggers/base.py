"""What the provider's triggers share: the one ``on_kill``.

Airflow 3.3's triggerer calls a trigger's ``on_kill`` when a user acts on the deferred task (mark failed, mark
success, clear), not on its own shutdown or restart -- but also when a triggerer whose heartbeat lapsed wakes up
and cancels a trigger that moved to another triggerer meanwhile (the trigger goes on there, re-created from its
``serialize``). So ``on_kill`` first reads the task instance's state from Airflow (:mod:`.ownership`) and
releases nothing while it is still deferred, resumed or up for retry; on a real kill it releases what the
supervisor's kill rule says (:func:`~..supervisor.reconcile.releases_on_kill`) through
:func:`~..backends.kill.release_on_kill` -- the operators' way too -- in a worker thread (it blocks), within
:func:`~..backends.kill.kill_budget` of ``[triggerer] on_kill_timeout``. Releases are idempotent (cancel an ended
job, delete a deleted node: nothing changes), so two copies of one trigger are safe. A release requested but not
confirmed in time still happens: Google carries it out.

Airflow's triggerer cancels a trigger again at each of its syncs until the trigger has ended (its supervisor sends
the trigger's id in ``to_cancel`` every time, and ``TriggerRunner.cancel_triggers`` cancels the trigger's task
again), so an ``on_kill`` still reading the task instance's state a sync later is itself cancelled, and Airflow
swallows that. ``on_kill`` therefore runs its judgement and release as a task of their own, shielded: the repeated
cancel ends only the wait, and the judgement goes on to its end (within its budget).

Importing this module imports no Google library.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from airflow.triggers.base import BaseTrigger

from ..supervisor.reconcile import OwnedResource

log = logging.getLogger(__name__)

#: The kills still running after the triggerer cancelled the ``on_kill`` that started them: an event loop keeps only
#: weak references to its tasks, so these are held here until they end.
_ORPHANED_KILLS: set[asyncio.Task[None]] = set()


def _orphaned_kill_ended(task: asyncio.Task[None]) -> None:
    """Forget an orphaned kill once it ended, and log what it raised: nothing awaits it any more."""
    _ORPHANED_KILLS.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("A trigger's on_kill failed after the triggerer had stopped waiting for it",
                    exc_info=task.exception())


#: Modules ``on_kill`` needs, imported off the triggerer's event loop (``hooks.loading.load_off_loop``).
KILL_MODULES = ("airflow_provider_resilient.triggers.ownership", "airflow_provider_resilient.compat",
                "airflow_provider_resilient.backends.kill", "airflow_provider_resilient.backends.tpu",
                "airflow_provider_resilient.backends.vertex", "airflow_provider_resilient.backends.modelarts")


class SupervisedTrigger(BaseTrigger):
    """Base of the provider's triggers. A subclass sets :attr:`PLATFORM`, says what a kill would release
    (:meth:`_kill_resources`), and has the attributes ``gcp_conn_id``, ``impersonation_chain`` and ``emulator`` (its
    connection, serialized with it)."""

    #: The platform of :func:`~..backends.kill.release_on_kill`: ``"vertex_ai"``, ``"tpu"`` or ``"modelarts"``.
    PLATFORM = ""
    #: A job trigger's in-place restart allowance (``Limits.restart_seconds``): the Vertex AI trigger's argument.
    restart_timeout: float | None = None
    gcp_conn_id: str | None
    impersonation_chain: Any
    emulator: str | None

    def _observe_job(self, look: Any, summary: dict[str, Any]) -> dict[str, Any] | None:
        """A job trigger's one judgement of a live job (the Vertex AI and ModelArts triggers'): the pure observer
        (:func:`~..supervisor.observe.observe`) over ``look`` with the trigger's ``hang_timeout`` and
        ``queue_timeout``, its memory kept in ``_memory`` and the steps it saw added to ``_steps``; the ``hang`` or
        ``queue_timeout`` event's payload (the job's ``summary`` with the verdict keys) when it judged the job failed,
        else None. The job is left live: the supervisor commands its end."""
        from ..supervisor.observe import Limits, ledger_steps, observe
        from ..supervisor.vertex_look import stop_keys

        self._memory, verdict = observe(self._memory, look, self._clock(),
                                        Limits(hang_seconds=self.hang_timeout, queue_seconds=self.queue_timeout,
                                               restart_seconds=self.restart_timeout))
        self._steps.extend([at, step, 1] if start else [at, step]
                           for at, step, start in ledger_steps(verdict, self._memory, look))
        if verdict.failure is None:
            return None
        self.log.warning("%s: %s", self.job_name, verdict.failure.message)
        keys = stop_keys(verdict.failure)
        return {"status": "queue_timeout" if "queue_timeout" in keys else "hang", "job": summary, **keys}

    def _conn_id(self) -> str | None:
        """The Airflow connection a kill's release uses (Google's ``gcp_conn_id``; a ModelArts trigger's own)."""
        return self.gcp_conn_id

    async def _kill_connection(self) -> Any:
        """The connection object a kill's release is given, read on the event loop; None (default): the release
        reads its connection itself (a Google trigger's hook gets the emulator address from its operator)."""
        return None

    def _kill_resources(self) -> list[OwnedResource]:
        """The live resources of the watched attempt as the kill rule reads them (``keep`` set for those the
        user keeps: ``cancel_on_kill=False``, ``keep_node``)."""
        raise NotImplementedError

    async def on_kill(self) -> None:
        """The triggerer cancelled this trigger: when its task was really killed -- its task instance, read from
        Airflow now, was marked failed or success, cleared, or deleted (:func:`~.ownership.judge_cancel`) --
        release what the supervisor's kill rule says, in a worker thread, within
        :func:`~..backends.kill.kill_budget` (``"triggerer"``). A trigger moved to another triggerer (its task
        instance still deferred) releases nothing: the other copy goes on watching. Errors are logged with what
        to do, not raised (the triggerer would only log them).

        The judgement and release run as a task of their own that a cancel of ``on_kill`` does not reach: the
        triggerer cancels a trigger again at each sync until it ends (see the module's docstring), and the kill
        goes on to its end (within its budget) when that cancel ends this wait. Raises ``CancelledError`` then,
        as a cancelled coroutine does."""
        kill = asyncio.ensure_future(self._kill())
        try:
            await asyncio.shield(kill)
        except asyncio.CancelledError:
            if not kill.done():
                _ORPHANED_KILLS.add(kill)
                kill.add_done_callback(_orphaned_kill_ended)
                self.log.info("The triggerer cancelled on_kill again while it ran (it cancels a trigger at each "
                              "sync until the trigger ends); the kill goes on to its end")
            raise

    async def _kill(self) -> None:
        """:meth:`on_kill`'s judgement and release."""
        from ..hooks.loading import load_off_loop

        await load_off_loop(list(KILL_MODULES))  # never an import in the triggerer's event loop
        from ..backends.kill import kill_budget, release_on_kill
        from ..compat import conf
        from ..supervisor.reconcile import releases_on_kill
        from .ownership import judge_cancel

        live = self._kill_resources()
        todo = releases_on_kill(live)
        names = " and ".join(r.resource.name for r in todo)
        if not todo:
            if live:
                self.log.info("Trigger cancelled; keeping %s (as asked): end it yourself once the task is done",
                              live[-1].name)
            return
        judgement = await judge_cancel(self)
        if not judgement.kill:
            self.log.info("Trigger cancelled; leaving %s alone: %s", names, judgement.why)
            return
        budget = kill_budget("triggerer", conf)
        try:
            connection = await self._kill_connection()
        except Exception as exc:  # the release reads it itself and says what it could not do
            self.log.warning("Cannot read the connection on the event loop: %s", exc)
            connection = None
        self.log.info("The task was killed (%s): releasing %s (within %.0f s)", judgement.why, names, budget)
        try:
            await asyncio.wait_for(asyncio.to_thread(
                release_on_kill, self.PLATFORM, todo, budget, conn_id=self._conn_id(),
                impersonation_chain=self.impersonation_chain, emulator=self.emulator, connection=connection),
                budget + 1.0)
        except TimeoutError:
            self.log.warning("Releasing %s was not confirmed within %.0f s: check it and end it yourself if it is "
                             "live", names, budget)


__all__ = ["KILL_MODULES", "SupervisedTrigger"]
