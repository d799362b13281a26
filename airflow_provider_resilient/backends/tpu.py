"""Cloud TPU nodes as the TPU operator and its trigger read them: the baseline a deferred watch compares
with, what in the workers' reports is news, and how often a deferred operator comes back for a full look.
Importing it imports nothing (it runs in the triggerer's event loop as its trigger is loaded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Worker report statuses that end a runner (see :mod:`..worker.runner`).
END_STATUSES = frozenset({"succeeded", "failed", "terminated", "preflight_failed"})
#: A node baseline's ``state`` while the node's queued resource still waits for capacity (no node yet, or one
#: still CREATING): a trigger then watches the request, not the node.
QUEUED = "QUEUED"
#: Queued resource states that wait for capacity; any other (ACTIVE, FAILED, SUSPENDED ...) is news.
QUEUE_WAITING_STATES = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING"})
#: The longest pause between two full looks of the operator at a quiet node (seconds).
DEFAULT_LOOK_AGAIN_SECONDS = 300.0


def look_again_seconds(poll_interval: float, hang_timeout: float | None) -> float:
    """Seconds between two full looks of a deferred operator at a quiet node: ``hang_timeout / 2`` capped at
    :data:`DEFAULT_LOOK_AGAIN_SECONDS`, never below ``poll_interval`` (see the module docstring)."""
    wanted = DEFAULT_LOOK_AGAIN_SECONDS if hang_timeout is None else min(DEFAULT_LOOK_AGAIN_SECONDS,
                                                                         hang_timeout / 2)
    return max(float(poll_interval), wanted)


def node_baseline(node: Any, reports: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """What the operator saw in its look, as the trigger's JSON baseline: ``{"state", "health", "symptoms",
    "workers": [{"status", "restarts"}, ...]}`` (``node``: a ``google.cloud.tpu_v2.Node``)."""
    return {"state": node.state.name, "health": node.health.name,
            "symptoms": sorted(s.symptom_type.name for s in node.symptoms),
            "workers": [{"status": r.get("status", ""), "restarts": r.get("restarts", "0")} for r in reports]}


def _restarts(report: Mapping[str, Any]) -> int:
    value = str(report.get("restarts") or "0")
    return int(value) if value.isdigit() else 0


def worker_change(baseline: Sequence[Mapping[str, Any]], reports: Sequence[Mapping[str, str]]) -> str | None:
    """Why the workers' reports are news against ``baseline`` (see the module docstring), or None."""
    for index, report in enumerate(reports):
        before = baseline[index] if index < len(baseline) else {}
        status = report.get("status", "")
        if status != before.get("status") and (status in END_STATUSES or status == "restarting"):
            return f"worker {index} is {status} (exit code {report.get('exit_code', '?')})"
        if _restarts(report) > _restarts(before):
            return f"worker {index} was restarted in place ({_restarts(report)} restart(s))"
    return None


__all__ = ["DEFAULT_LOOK_AGAIN_SECONDS", "END_STATUSES", "QUEUED", "QUEUE_WAITING_STATES",
           "look_again_seconds", "node_baseline", "worker_change"]
