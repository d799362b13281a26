"""A spare node: made before it is needed, taken by the next attempt instead of a create. Pure: no I/O, no clock.

A TPU attempt that fails on a node that runs nothing (preempted, terminated, unhealthy, in repair) is re-created,
and a create is the largest share of a recovery: Cloud TPU takes minutes to make a node READY. A *spare* is the next
attempt's node made while the current attempt still trains. Its startup script waits; when the next attempt comes,
the operator hands it that attempt's startup script (UpdateNode of its metadata) instead of creating a node, and it
starts at once. Its machine time is the price: a spare is billed from READY on, as every node is. So it is opt-in
(:class:`SpareWhen`): ``always`` while an attempt runs, or ``at_risk`` -- only while the run has a reason to expect a
failure soon: a maintenance window Cloud TPU announced for the node, or an interruption less than
``risk_seconds`` ago (failures that come in bursts: a flapping host, a zone being reclaimed).

This module decides; the shells carry out :class:`CreateSpare` and :class:`ReleaseSpare`, as every other side
effect of the provider (:mod:`.machine`). :func:`tend_spare` is asked before each look at the running attempt and
when the run stops; the spare it remembers (:class:`Spare`) lives in the task state store beside the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .state import Phase, RunState


class SpareWhen(StrEnum):
    """When a run holds a spare node (the TPU operator's ``spare_node``)."""

    #: never (the default): each new attempt creates its node after the failure.
    NEVER = "never"
    #: while an announced maintenance window is pending, or an interruption struck less than ``risk_seconds`` ago.
    AT_RISK = "at_risk"
    #: whenever an attempt runs: the fastest recovery, at the price of a second node's machine time throughout.
    ALWAYS = "always"


#: How long after an interruption a run with ``spare_node="at_risk"`` holds a spare (seconds): an hour.
DEFAULT_RISK_SECONDS = 3600.0


@dataclass(frozen=True)
class SpareSettings:
    """The operator's spare arguments, checked.

    Args:
        when: a :class:`SpareWhen` (or its value).
        risk_seconds: with ``at_risk``, how long after an interruption the run stays at risk (seconds, > 0).

    Raises:
        ValueError: ``when`` is not one of :class:`SpareWhen`, or ``risk_seconds`` is not a positive number.
    """

    when: SpareWhen = SpareWhen.NEVER
    risk_seconds: float = DEFAULT_RISK_SECONDS

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "when", SpareWhen(self.when))
        except ValueError:
            raise ValueError(f"spare_node={self.when!r}: use one of "
                             f"{', '.join(repr(w.value) for w in SpareWhen)}") from None
        if isinstance(self.risk_seconds, bool) or not isinstance(self.risk_seconds, int | float) \
                or not self.risk_seconds > 0:
            raise ValueError(f"spare_risk_seconds={self.risk_seconds!r}: give a positive number of seconds")


@dataclass(frozen=True)
class Spare:
    """A spare node the run holds: its resource ``name``, the ``attempt`` it was made for (the node id of that
    attempt) and when it was requested (``created_at``, epoch seconds)."""

    name: str
    attempt: int
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "attempt": self.attempt, "created_at": self.created_at}

    @classmethod
    def from_json(cls, data: Any) -> Spare | None:
        """The inverse of :meth:`to_json`; None for empty or unreadable data (a spare then forgotten is still
        found by its label when its attempt comes, and released by the reconciler when the task ends)."""
        try:
            return cls(str(data["name"]), int(data["attempt"]), float(data["created_at"]))
        except (TypeError, KeyError, ValueError):
            return None


@dataclass(frozen=True)
class CreateSpare:
    """Create the node of attempt ``attempt`` as a spare (its startup script waits for the attempt's)."""

    attempt: int
    reason: str


@dataclass(frozen=True)
class ReleaseSpare:
    """Delete the spare ``name`` (not waited for: it runs nothing)."""

    name: str
    reason: str


def risk(state: RunState, now: float, settings: SpareSettings, *, maintenance_pending: bool = False) -> str | None:
    """Why the run is at risk now, in words (None: it is not, or ``settings`` never hold a spare).

    Args:
        state: the run.
        now: epoch seconds.
        settings: the operator's :class:`SpareSettings`.
        maintenance_pending: Cloud TPU announced a maintenance window for the running node
            (``Node.upcoming_maintenance``) that has not passed.
    """
    if settings.when == SpareWhen.NEVER:
        return None
    if settings.when == SpareWhen.ALWAYS:
        return "spare_node='always'"
    if maintenance_pending:
        return "a maintenance window is announced for the node"
    last = last_interruption(state)
    if last is not None and now - last < settings.risk_seconds:
        return (f"an interruption {now - last:.0f} s ago (the run stays at risk for spare_risk_seconds="
                f"{settings.risk_seconds:g})")
    return None


def last_interruption(state: RunState) -> float | None:
    """When the run's latest interruption struck (epoch seconds): the latest incident of an attempt that ran; None
    when none. A create refused for capacity says nothing of the next failure of a running node, nor does a move off
    an announced maintenance window (no incident: the window itself is the risk while it is pending)."""
    times = [incident.decision.decided_at for attempt in state.history if attempt.resource_name
             for incident in attempt.incidents if incident.decision.decided_at is not None]
    return max(times) if times else None


def tend_spare(state: RunState, spare: Spare | None, now: float, settings: SpareSettings, *,
               maintenance_pending: bool = False) -> tuple[Spare | None, CreateSpare | ReleaseSpare | None]:
    """What to do about the spare before a look at the running attempt or as the run stops: the spare the run
    holds after it (the one it held; None once the attempt it was made for has taken it) and the one command to
    carry out (None: nothing).

    * The run has stopped (succeeded, failed): release the spare.
    * The running attempt is the spare's (``state.job_name == spare.name``): it was taken; nothing is held.
    * The spare was made for another attempt than the next one (an attempt whose create was refused counts, or the
      next attempt moved to a fallback's zone and was created there): release it.
    * No longer at risk (:func:`risk`): release it. At risk, running, none held: create one for the next attempt.

    Args:
        state: the run after its latest step.
        spare: the spare the run holds (:class:`Spare`), or None.
        now: epoch seconds.
        settings: the operator's :class:`SpareSettings`.
        maintenance_pending: see :func:`risk`.
    """
    if spare is not None and state.job_name == spare.name and state.phase not in (Phase.SUCCEEDED, Phase.FAILED):
        spare = None  # the attempt it was made for runs on it
    following = len(state.history) + 1
    if spare is not None:
        if state.phase in (Phase.SUCCEEDED, Phase.FAILED):
            return spare, ReleaseSpare(spare.name, f"the run {state.phase}")
        if spare.attempt != following:
            return spare, ReleaseSpare(spare.name, f"it was made for attempt {spare.attempt}; attempt {following} "
                                                   "is next")
        if risk(state, now, settings, maintenance_pending=maintenance_pending) is None:
            return spare, ReleaseSpare(spare.name, "the run is no longer at risk")
        return spare, None
    if state.phase != Phase.RUNNING or not state.job_name:
        return None, None
    reason = risk(state, now, settings, maintenance_pending=maintenance_pending)
    return None, (CreateSpare(following, reason) if reason else None)


def review_at(state: RunState, settings: SpareSettings) -> float | None:
    """When a held spare's risk passes (epoch seconds) -- a deferred watch comes back by then to release it; None
    when it does not pass on its own (``always``, or no interruption yet)."""
    if settings.when != SpareWhen.AT_RISK:
        return None
    last = last_interruption(state)
    return last + settings.risk_seconds if last is not None else None


__all__ = [
    "DEFAULT_RISK_SECONDS",
    "CreateSpare",
    "ReleaseSpare",
    "Spare",
    "SpareSettings",
    "SpareWhen",
    "last_interruption",
    "review_at",
    "risk",
    "tend_spare",
]
