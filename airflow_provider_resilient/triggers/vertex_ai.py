"""Trigger that watches a Vertex AI CustomJob from the triggerer until it ends.

Events: ``{"status": "terminal", "job": {...}}`` with the job's name, state, error and start time when
it reached a terminal state; ``{"status": "error", "message": ...}`` when the job can no longer be read
(deleted, permission lost). Transient API errors are retried by the async hook and never end the
trigger. ``on_kill`` (a user marking the deferred task failed/success or clearing it; Airflow 3.3 does
not call it on triggerer restarts or reassignment) cancels the job when ``cancel_on_kill``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

TERMINAL_STATES = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED",
                             "JOB_STATE_EXPIRED", "JOB_STATE_PARTIALLY_SUCCEEDED"})


def job_summary(job: Any) -> dict[str, Any]:
    """The facts of a CustomJob the operator needs, as JSON (name, state, error, whether it started, when it
    ended in seconds since the epoch)."""
    return {
        "name": job.name,
        "state": job.state.name,
        "error_code": int(job.error.code),
        "error_message": job.error.message,
        "started": "start_time" in job,
        "end_time": job.end_time.timestamp() if "end_time" in job else None,
    }


class CustomJobTrigger(BaseTrigger):
    """Poll one CustomJob every ``poll_interval`` seconds until it is terminal.

    Args:
        job_name: ``projects/P/locations/R/customJobs/ID``.
        poll_interval: seconds between GetCustomJob calls.
        gcp_conn_id, impersonation_chain, emulator: as for :class:`~..hooks.vertex_ai.ResilientVertexAIHook`.
        cancel_on_kill: cancel the job when a user kills the deferred task.
    """

    #: The constructor's arguments; ``serialize`` is derived from this one list.
    FIELDS = ("job_name", "poll_interval", "gcp_conn_id", "impersonation_chain", "emulator", "cancel_on_kill")

    def __init__(self, job_name: str, poll_interval: float = 30.0, gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | list[str] | None = None, emulator: str | None = None,
                 cancel_on_kill: bool = True) -> None:
        super().__init__()
        self.job_name = job_name
        self.poll_interval = poll_interval
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.emulator = emulator
        self.cancel_on_kill = cancel_on_kill

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {f: getattr(self, f) for f in self.FIELDS}

    def _hook(self) -> Any:
        from ..hooks.vertex_ai import AsyncResilientVertexAIHook

        return AsyncResilientVertexAIHook(self.gcp_conn_id, self.impersonation_chain, emulator=self.emulator)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from google.api_core import exceptions as gexc

        hook = self._hook()
        while True:
            try:
                job = await hook.get_custom_job(self.job_name)
            except gexc.GoogleAPICallError as exc:
                yield TriggerEvent({"status": "error", "message": f"cannot read {self.job_name}: {exc}"})
                return
            if job.state.name in TERMINAL_STATES:
                yield TriggerEvent({"status": "terminal", "job": job_summary(job)})
                return
            self.log.debug("%s is %s", self.job_name, job.state.name)
            await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        if self.cancel_on_kill:
            self.log.info("The task was killed by a user: cancelling %s", self.job_name)
            await self._hook().cancel_custom_job(self.job_name)
