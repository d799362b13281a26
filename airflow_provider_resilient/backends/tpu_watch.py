"""What a deferred TPU watch compares with and when it comes back: the baseline of the operator's last look at a node
(:func:`node_baseline`), what in the workers' reports is news to the trigger (:func:`worker_change`), the announced
maintenance as the core's :class:`~..supervisor.maintenance.Notice` (:func:`notice_of`), and how often a deferred
operator comes back for a full look (:func:`look_again_seconds`). Shared by the TPU backend and its trigger;
importing it imports no Google library (the trigger's module imports it in the triggerer's event loop).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..supervisor.maintenance import Notice
from ..supervisor.tpu_look import QUEUE_WAITING_STATES
from ..worker.protocol import KEY_CHECKPOINT_ACK

#: Worker report statuses that end a runner (see :mod:`..worker.runner`).
END_STATUSES = frozenset({"succeeded", "failed", "terminated", "preflight_failed"})
#: A node baseline's ``state`` while the node's queued resource still waits for capacity (no node yet, or one
#: still CREATING): a trigger then watches the request, not the node.
QUEUED = "QUEUED"
#: The longest pause between two full looks of the operator at a quiet node (seconds).
DEFAULT_LOOK_AGAIN_SECONDS = 300.0


def look_again_seconds(poll_interval: float, hang_timeout: float | None) -> float:
    """Seconds between two full looks of a deferred operator at a quiet node: ``hang_timeout / 2`` capped at
    :data:`DEFAULT_LOOK_AGAIN_SECONDS`, never below ``poll_interval`` (see the module docstring)."""
    wanted = DEFAULT_LOOK_AGAIN_SECONDS if hang_timeout is None else min(DEFAULT_LOOK_AGAIN_SECONDS,
                                                                         hang_timeout / 2)
    return max(float(poll_interval), wanted)


def node_baseline(node: Any, reports: Sequence[Mapping[str, str]], maintenance: Notice | None = None
                  ) -> dict[str, Any]:
    """What the operator saw in its look, as the trigger's JSON baseline: ``{"state", "health", "symptoms",
    "workers": [{"status", "restarts", "checkpoint_ack"}, ...], "maintenance"}`` (``node``: a
    ``google.cloud.tpu_v2.Node``; ``maintenance``: its announced maintenance, as :meth:`Notice.summary`)."""
    return {"state": node.state.name, "health": node.health.name,
            "symptoms": sorted(s.symptom_type.name for s in node.symptoms),
            "workers": [{"status": r.get("status", ""), "restarts": r.get("restarts", "0"),
                         "checkpoint_ack": r.get(KEY_CHECKPOINT_ACK, "")} for r in reports],
            "maintenance": maintenance.summary() if maintenance else ""}


def _epoch(text: str) -> float | None:
    """An RFC 3339 timestamp of the TPU API as epoch seconds (None: empty or unreadable)."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def notice_of(upcoming: Any) -> Notice | None:
    """A ``tpu_v2alpha1.UpcomingMaintenance`` (or None) as the pure :class:`~..supervisor.maintenance.Notice`."""
    if upcoming is None:
        return None
    return Notice(kind=upcoming.type_.name, status=upcoming.maintenance_status.name,
                  window_start=_epoch(upcoming.window_start_time), window_end=_epoch(upcoming.window_end_time),
                  latest_window_start=_epoch(upcoming.latest_window_start_time),
                  can_reschedule=bool(upcoming.can_reschedule))


def _restarts(report: Mapping[str, Any]) -> int:
    value = str(report.get("restarts") or "0")
    return int(value) if value.isascii() and value.isdigit() else 0


def worker_change(baseline: Sequence[Mapping[str, Any]], reports: Sequence[Mapping[str, str]]) -> str | None:
    """Why the workers' reports are news against ``baseline`` (see the module docstring), or None."""
    for index, report in enumerate(reports):
        before = baseline[index] if index < len(baseline) else {}
        status = report.get("status", "")
        if status != before.get("status") and (status in END_STATUSES or status == "restarting"):
            return f"worker {index} is {status} (exit code {report.get('exit_code', '?')})"
        if _restarts(report) > _restarts(before):
            return f"worker {index} was restarted in place ({_restarts(report)} restart(s))"
        ack = report.get(KEY_CHECKPOINT_ACK, "")
        if "checkpoint_ack" in before and ack != before["checkpoint_ack"]:
            return f"worker {index} saved its checkpoint on request ({ack})"
    return None


__all__ = ["DEFAULT_LOOK_AGAIN_SECONDS", "END_STATUSES", "QUEUED", "QUEUE_WAITING_STATES", "look_again_seconds",
           "node_baseline", "notice_of", "worker_change"]
