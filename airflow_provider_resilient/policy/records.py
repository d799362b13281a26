"""The attempt history's records: :class:`Attempt` (one submitted resource), :class:`Incident` (a failure seen
during it) and :class:`Decision` (what was decided about it). Pure data, read by :func:`~.decide.decide` and by the
modules that weigh the history (:mod:`.repair`, :mod:`.demotion`); :mod:`.history` stores them as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .failures import Failure
from .parts import DecisionAction


@dataclass(frozen=True)
class Decision:
    """What to do about one failure.

    Attributes:
        action: the :class:`DecisionAction`.
        rule: the name of the rule that matched ("" when none did).
        reason: one human-readable sentence for logs and the attempt history.
        delay_seconds: wait this long before carrying out the action (backoff); 0 for FAIL / GIVE_UP.
        budget: the budget this decision used, if any.
        budget_used: uses of that budget including this one (0 when no budget was used).
        budget_limit: the budget's ``max_retries`` (None when it is only time-limited).
        fallback_index: index into ``RetryPolicy.fallbacks`` that the next attempt must use (-1: the
            original target); carried over unchanged when no fail-over happens.
        failed_over: True when this decision moved to a new fallback (uses no budget).
        decided_at: the ``now`` it was decided at, seconds since the epoch (time-limited budgets
            measure their streak from it).
    """

    action: DecisionAction
    rule: str
    reason: str
    delay_seconds: float = 0.0
    budget: str | None = None
    budget_used: int = 0
    budget_limit: int | None = None
    fallback_index: int = -1
    failed_over: bool = False
    decided_at: float | None = None

    @property
    def counts_against_budget(self) -> bool:
        return self.budget is not None and not self.failed_over and not self.action.is_terminal


@dataclass(frozen=True)
class Incident:
    """A failure observed during an attempt and the decision taken about it."""

    failure: Failure
    decision: Decision


@dataclass(frozen=True)
class Attempt:
    """One submitted resource and what happened to it.

    Attributes:
        number: 1-based attempt number within the run.
        resource_name: the CustomJob / node resource name; None when the create call itself failed.
        fallback_index: which ``RetryPolicy.fallbacks`` entry it ran on (-1: the original target).
        started_at: when it was submitted, seconds since the epoch.
        ended_at: when it ended (None while it runs).
        resumed_from_step: checkpoint step it resumed from (None: from scratch).
        resumed_from_uri: checkpoint URI it resumed from.
        incidents: failures observed during it, in order, each with its decision.
        ended_by: who ended it when nothing failed: ``"clear"`` -- a person cleared the task while this
            attempt ran, and the next try ended it to start a new attempt (no failure, no budget spent);
            ``"maintenance"`` -- the run moved off its node before a maintenance window
            (:mod:`..supervisor.maintenance`).
        platform_restarts: how many times the platform restarted or re-issued the resource on its own, by its
            records (ModelArts' fault-tolerance re-issues, one stage record each); None: none known.
    """

    number: int
    resource_name: str | None = None
    fallback_index: int = -1
    started_at: float | None = None
    ended_at: float | None = None
    resumed_from_step: int | None = None
    resumed_from_uri: str | None = None
    incidents: tuple[Incident, ...] = field(default_factory=tuple)
    ended_by: str | None = None
    platform_restarts: int | None = None

    def with_incident(self, incident: Incident) -> Attempt:
        """A copy with ``incident`` appended."""
        return replace(self, incidents=(*self.incidents, incident))


__all__ = ["Attempt", "Decision", "Incident"]
