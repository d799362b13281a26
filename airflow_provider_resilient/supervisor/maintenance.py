"""Upcoming maintenance: what the run does before a Cloud TPU maintenance window. Pure.

Cloud TPU announces maintenance ahead of time in ``Node.upcoming_maintenance`` (``tpu_v2alpha1``: type
SCHEDULED / UNSCHEDULED, the window's start and end, ``latest_window_start_time``, ``can_reschedule``, status
PENDING / ONGOING; scheduled events get about 7 days' notice: the ``google.cloud.tpu_v2alpha1`` API reference,
https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/projects.locations.nodes). Without a plan the workload
learns of the event from the SIGTERM at its start and loses what it trained since its last checkpoint (Cloud
TPU's "Manage maintenance events with Cloud TPU Pods", https://cloud.google.com/tpu/docs/maintenance-events,
advises checkpoints about every hour: up to an hour lost per event). With a plan:

1. **Checkpoint now.** ``lead_seconds`` before the window starts (at once when the notice comes later than
   that), the run asks the workload for a checkpoint: the operator sets the node's metadata
   ``resilient-checkpoint-request`` to the window's token (:attr:`Notice.token`), each worker's runner passes it
   on, and the workload saves and acknowledges (:mod:`..worker.checkpoint_request`). The token lives on the
   node, so the request is made once per window whatever happens to the task.
2. **Ride it out or move.** ``policy``:

   * ``ride_out`` (default) -- the same page: most maintenance events recover automatically and training
     continues without manual intervention: the node is REPAIRING for the window, its
     startup script runs again and the workload resumes from the early checkpoint.
   * ``move`` -- once every worker acknowledged the checkpoint (or half the lead has passed without it: the
     workload does not use the helper), the attempt ends and the next one starts on a fresh node before the
     window: no failure, no budget spent (``ended_by="maintenance"``).
   * ``auto`` -- move when the window (its end minus its start: the expected wait) is longer than
     ``move_seconds`` (what a move costs: a new node's create, boot and restore), ride out otherwise.

An ONGOING event is not planned for: the node's own state (REPAIRING) and the retry rules take it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum


class MaintenancePolicy(StrEnum):
    """What the run does about an announced maintenance window, after the early checkpoint."""

    RIDE_OUT = "ride_out"
    MOVE = "move"
    AUTO = "auto"


#: Default seconds before a window's start at which the checkpoint is requested: a save (seconds to a few
#: minutes: Cloud TPU, "Manage maintenance events with Cloud TPU Pods") and a few looks fit.
DEFAULT_LEAD_SECONDS = 600.0
#: Default cost of a move (seconds): creating a TPU VM, booting it and restoring the checkpoint.
DEFAULT_MOVE_SECONDS = 600.0


@dataclass(frozen=True)
class Notice:
    """``Node.upcoming_maintenance`` as read (times in epoch seconds; None: not given).

    Attributes:
        kind: ``SCHEDULED`` or ``UNSCHEDULED``.
        status: ``PENDING`` or ``ONGOING``.
        window_start, window_end, latest_window_start: the window (``latest_window_start``: the latest it may
            start, for a window the customer may move).
        can_reschedule: the customer may trigger it earlier (``PerformMaintenance``).
    """

    kind: str
    status: str
    window_start: float | None
    window_end: float | None = None
    latest_window_start: float | None = None
    can_reschedule: bool = False

    @property
    def token(self) -> str:
        """What names this window in the checkpoint request: ``scheduled maintenance at 2026-11-25T22:00:00Z``."""
        when = (datetime.fromtimestamp(self.window_start, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                if self.window_start is not None else "an unknown time")
        return f"{self.kind.lower()} maintenance at {when}"

    def summary(self) -> str:
        """One line for logs and the trigger's baseline: ``SCHEDULED PENDING 2026-11-25T22:00:00Z..22:10:00Z``."""
        def iso(t: float | None) -> str:
            return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else "?"

        return f"{self.kind} {self.status} {iso(self.window_start)}..{iso(self.window_end)}"


@dataclass(frozen=True)
class MaintenanceSettings:
    """The operator's maintenance options (seconds).

    Attributes:
        policy: :class:`MaintenancePolicy`.
        lead_seconds: how long before the window's start the checkpoint is requested; 0: never ask (the workload
            learns of the event from its SIGTERM, as without this provider -- and nothing moves).
        move_seconds: what a move costs, for ``auto`` (>= 0).
    """

    policy: MaintenancePolicy = MaintenancePolicy.RIDE_OUT
    lead_seconds: float = DEFAULT_LEAD_SECONDS
    move_seconds: float = DEFAULT_MOVE_SECONDS


@dataclass(frozen=True)
class MaintenanceStep:
    """What to do now: request a checkpoint (``request``: the token to set), and/or move the run off the node."""

    request: str | None = None
    move: bool = False
    reason: str = ""


def moves(notice: Notice, settings: MaintenanceSettings) -> bool:
    """Whether the run leaves the node before ``notice``'s window (see the module docstring)."""
    if settings.policy == MaintenancePolicy.MOVE:
        return True
    if settings.policy != MaintenancePolicy.AUTO:
        return False
    if notice.window_start is None or notice.window_end is None:
        return True  # a wait of unknown length: a fresh node is the bounded cost
    return notice.window_end - notice.window_start > settings.move_seconds


def plan(notice: Notice | None, now: float, settings: MaintenanceSettings, *, requested: str | None,
         acked: Sequence[str]) -> MaintenanceStep | None:
    """The step to take at ``now`` (epoch seconds) about ``notice``, or None.

    Args:
        notice: the node's announced maintenance (None: none).
        settings: the operator's options.
        requested: the checkpoint request token already set on the node (None: none).
        acked: per worker, the token of the last request it acknowledged (``""``: none).
    """
    if notice is None or notice.status != "PENDING" or notice.window_start is None or settings.lead_seconds <= 0:
        return None
    token, until = notice.token, notice.window_start - now
    if requested != token:
        if until > settings.lead_seconds:
            return None
        return MaintenanceStep(request=token, reason=f"{notice.summary()}: the window starts in {max(0.0, until):.0f} s"
                                                      f" -- checkpoint now")
    if not moves(notice, settings):
        return None
    saved = bool(acked) and all(a == token for a in acked)
    if saved or until <= settings.lead_seconds / 2:
        why = "the workload saved its checkpoint" if saved else "no acknowledgement of the checkpoint in half the lead"
        return MaintenanceStep(move=True, reason=f"{notice.summary()}: {why}; moving to a fresh node before the window "
                                                 f"(maintenance_policy {settings.policy.value})")
    return None


def next_look(notice: Notice | None, settings: MaintenanceSettings, requested: str | None) -> float | None:
    """When ``notice``'s window next needs a look (epoch seconds), so that a deferred watch comes back in time:
    the checkpoint request's time (``lead_seconds`` before the window) while not yet requested, then -- with a
    policy that moves -- half the lead before the window (:func:`plan`'s move without an acknowledgement); None:
    nothing is due (no pending window, lead 0, or riding out once requested)."""
    if notice is None or notice.status != "PENDING" or notice.window_start is None or settings.lead_seconds <= 0:
        return None
    if requested != notice.token:
        return notice.window_start - settings.lead_seconds
    return notice.window_start - settings.lead_seconds / 2 if moves(notice, settings) else None


__all__ = ["DEFAULT_LEAD_SECONDS", "DEFAULT_MOVE_SECONDS", "MaintenancePolicy", "MaintenanceSettings",
           "MaintenanceStep", "Notice", "moves", "next_look", "plan"]
