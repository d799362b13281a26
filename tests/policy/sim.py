"""A minimal attempt loop over the pure policy, as the supervisor will run it: decide, record, resubmit."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace

from airflow_provider_resilient.policy import (
    DEFAULT_POLICY,
    Attempt,
    Decision,
    Failure,
    RetryPolicy,
    decide,
    record_incident,
)


def run(
    failures: Iterable[Failure],
    policy: RetryPolicy = DEFAULT_POLICY,
    *,
    start: float = 1_800_000_000.0,
    step_seconds: float = 60.0,
    seed: int | str = 0,
    history: tuple[Attempt, ...] | None = None,
    resume_steps: Iterable[int | None] = (),
) -> tuple[list[Decision], tuple[Attempt, ...]]:
    """Feed failures one by one until a terminal decision or the failures run out.

    Time advances ``step_seconds`` per failure plus each decision's delay. New attempts are opened on
    RESUBMIT / RECREATE_NODE with the decision's fallback index, resuming from the next of
    ``resume_steps`` (None once they run out: no checkpoint).
    """
    steps = iter(resume_steps)
    history = history or (Attempt(1, "attempt-1", started_at=start),)
    now = start
    decisions: list[Decision] = []
    for failure in failures:
        now += step_seconds
        failure = replace(failure, timestamp=now)
        decision = decide(history, failure, now, policy=policy, seed=seed)
        decisions.append(decision)
        history = record_incident(history, failure, decision, now)
        if decision.action.is_terminal:
            break
        now += decision.delay_seconds
        if decision.action.starts_new_attempt:
            number = history[-1].number + 1
            history = (*history, Attempt(number, f"attempt-{number}", fallback_index=decision.fallback_index,
                                         started_at=now, resumed_from_step=next(steps, None)))
    return decisions, history


def repeat(failure: Failure, limit: int = 200) -> Iterable[Failure]:
    """The same failure over and over (bounded)."""
    return itertools.repeat(failure, limit)
