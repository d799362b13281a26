"""``CustomJobStateSensor``: wait until a Vertex AI CustomJob reaches a terminal state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..compat import AirflowException, AirflowFailException
from .base import DeferrableSensor

DEFAULT_TARGET_STATES = ("JOB_STATE_SUCCEEDED",)


class CustomJobStateSensor(DeferrableSensor):
    """Wait for ``job_name`` to reach one of ``target_states``; fail if it ends in another terminal state.

    Args:
        job_name: ``projects/P/locations/R/customJobs/ID`` (templated; e.g. from the operator's XCom).
        target_states: JobState names that count as done (default: ``JOB_STATE_SUCCEEDED``).
        deferrable: wait in the triggerer (default ``[operators] default_deferrable``).
        poll_interval: seconds between reads in deferrable mode (``poke_interval`` otherwise).
        gcp_conn_id, impersonation_chain: credentials and the emulator switch, as for the operator.

    Returns the job's final summary (name, state, error) as XCom.

    Raises:
        AirflowFailException: the job ended in a terminal state not in ``target_states`` (no retry helps).
    """

    template_fields: Sequence[str] = ("job_name", "impersonation_chain")

    def __init__(self, *, job_name: str, target_states: Sequence[str] = DEFAULT_TARGET_STATES,
                 poll_interval: float = 30.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_name = job_name
        self.target_states = tuple(s if s.startswith("JOB_STATE_") else f"JOB_STATE_{s}" for s in target_states)
        self.poll_interval = poll_interval
        self._summary: dict[str, Any] | None = None

    def _hook(self) -> Any:
        from ..hooks.vertex_ai import ResilientVertexAIHook

        return ResilientVertexAIHook(self.gcp_conn_id, self.impersonation_chain)

    def _judge(self, summary: dict[str, Any]) -> bool:
        from ..policy.job_states import TERMINAL_STATES

        if summary["state"] in self.target_states:
            self._summary = summary
            return True
        if summary["state"] in TERMINAL_STATES:
            raise AirflowFailException(f"{summary['name']} ended {summary['state']}, not one of "
                                       f"{list(self.target_states)}: {summary.get('error_message') or ''}")
        return False

    def poke(self, context: Any) -> bool:
        from ..backends.vertex import job_summary

        return self._judge(job_summary(self._hook().get_custom_job(self.job_name)))

    def _result(self, value: Any) -> Any:
        return self._summary

    def _resumed(self, context: Any, event: Any) -> tuple[bool, Any]:
        """The trigger's event (a :class:`~..supervisor.watch_event.WatchEvent` payload: ``terminal`` with the job's
        summary), or -- no event: the first look -- one poke."""
        if event is None:
            return self.poke(context), None
        if not isinstance(event, dict) or event.get("status") != "terminal":
            raise AirflowException(f"the trigger could not watch {self.job_name}: {event}")
        return self._judge(event["job"]), None

    def _defer(self, context: Any) -> None:
        """Wait in a :class:`~..triggers.vertex_ai.CustomJobTrigger` (which cancels nothing on a kill)."""
        from ..clients import serializable_chain
        from ..triggers.vertex_ai import CustomJobTrigger

        chain = serializable_chain(self.impersonation_chain)
        self.defer(trigger=CustomJobTrigger(self.job_name, self.poll_interval, self.gcp_conn_id, chain,
                                            self._hook().emulator, cancel_on_kill=False),
                   method_name="execute_complete")


__all__ = ["DEFAULT_TARGET_STATES", "CustomJobStateSensor"]
