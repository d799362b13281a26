"""Cloud TPU sensors: a node becoming READY and HEALTHY, and maintenance / preemption events.

Cloud TPU, "Manage maintenance events with Cloud TPU Pods" (https://cloud.google.com/tpu/docs/maintenance-events):
most maintenance events recover by themselves, and the System Event audit log names each one
(``tpu.nodes.terminate`` / ``tpu.nodes.restart``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import PokeReturnValue

from ..compat import AirflowFailException
from .base import DeferrableSensor

_GONE = ("TERMINATED", "PREEMPTED", "STOPPED", "STOPPING", "DELETING", "HIDDEN")
#: Health values of hardware that does not recover by itself (isolate the node and re-create it).
_UNHEALTHY = ("TIMEOUT", "UNHEALTHY_TENSORFLOW")


class TPUNodeHealthSensor(DeferrableSensor):
    """Wait until a TPU node is READY and HEALTHY (no symptoms).

    Args:
        node_name: ``projects/P/locations/ZONE/nodes/NODE``.
        fail_on_unhealthy: fail at once when the node reports health ``TIMEOUT`` or ``UNHEALTHY_TENSORFLOW``
            or any symptom (faulty hardware is isolated, not waited for; re-create the node).
            False: keep waiting for the node to become healthy again. A maintenance event in progress
            (REPAIRING, ``UNHEALTHY_MAINTENANCE``; most recover by themselves) is always waited for.
        deferrable, gcp_conn_id, impersonation_chain: as for the operators.

    Raises:
        AirflowFailException: the node is gone or cannot come back by itself (TERMINATED, PREEMPTED, STOPPED,
            DELETING, a ``PROJECT_ABUSE`` symptom), or -- with ``fail_on_unhealthy`` -- is unhealthy; the
            message names the state, health and symptoms.
    """

    template_fields: Sequence[str] = ("node_name",)

    def __init__(self, *, node_name: str, fail_on_unhealthy: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.node_name = node_name
        self.fail_on_unhealthy = fail_on_unhealthy

    def poke(self, context: Any) -> bool:
        from ..hooks.tpu import ResilientTPUHook

        node = ResilientTPUHook(self.gcp_conn_id, self.impersonation_chain).get_node(self.node_name)
        state, health = node.state.name, node.health.name
        symptoms = [s.symptom_type.name for s in node.symptoms]
        self.log.info("%s: %s / %s %s", self.node_name, state, health, symptoms or "")
        described = f"{self.node_name} is {state} (health {health}, symptoms {symptoms})"
        if state in _GONE or "PROJECT_ABUSE" in symptoms:
            raise AirflowFailException(f"{described}; it will not become healthy by itself: re-create it")
        if health in _UNHEALTHY or symptoms:
            if self.fail_on_unhealthy:
                raise AirflowFailException(f"{described}: the node is unhealthy; re-create it (or set "
                                           "fail_on_unhealthy=False to wait for it to recover)")
            return False
        return state == "READY" and health in ("HEALTHY", "HEALTH_UNSPECIFIED")


class TPUMaintenanceEventSensor(DeferrableSensor):
    """Fire when Cloud Audit Logs show a maintenance or preemption event for a node (the page's query
    ``"tpu.nodes.terminate" OR "tpu.nodes.restart"``, with ``protoPayload.metadata.terminateReason``).

    Args:
        project_id: the node's project.
        node_name: ``projects/P/locations/ZONE/nodes/NODE``.
        since: only events at or after this time (ISO 8601; templated). Default: when the task started,
            minus ``lookback_seconds``.
        lookback_seconds: entries reach Cloud Logging some seconds after the event (ingestion delay); this much
            before ``since`` is searched too (default 300).

    Returns (XCom): the events as ``{"method", "terminate_reason", "timestamp", "failure_class"}`` dicts.
    """

    template_fields: Sequence[str] = ("project_id", "node_name", "since")

    def __init__(self, *, project_id: str, node_name: str, since: str | None = None, lookback_seconds: float = 300.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.node_name = node_name
        self.since = since
        self.lookback_seconds = lookback_seconds

    def _since(self, context: Any) -> datetime:
        if self.since:
            start = datetime.fromisoformat(self.since.replace("Z", "+00:00"))
        else:
            ti = context.get("ti")
            start = getattr(ti, "start_date", None) or datetime.now(tz=UTC)
        start = start if start.tzinfo else start.replace(tzinfo=UTC)
        return start - timedelta(seconds=self.lookback_seconds)

    def poke(self, context: Any) -> PokeReturnValue:
        from ..hooks.tpu import AuditLogHook
        from ..policy import classify_tpu_audit_entry

        entries = AuditLogHook(self.gcp_conn_id, self.impersonation_chain).node_events(
            self.project_id, self.node_name, self._since(context))
        events = []
        for entry in entries:
            failure = classify_tpu_audit_entry(entry)
            if failure is None or failure.failure_class.value not in ("maintenance_event", "preemption"):
                continue
            payload = entry.get("protoPayload", {})
            events.append({"method": payload.get("methodName"), "terminate_reason": failure.terminate_reason,
                           "timestamp": entry.get("timestamp"), "failure_class": failure.failure_class.value})
        if events:
            self.log.info("Maintenance/preemption events for %s: %s", self.node_name, events)
        return PokeReturnValue(is_done=bool(events), xcom_value=events)


__all__ = ["TPUMaintenanceEventSensor", "TPUNodeHealthSensor"]
