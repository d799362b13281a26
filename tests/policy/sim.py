"""Runs of the real supervisor (:func:`airflow_provider_resilient.supervisor.step`) fed a list of failures:
the policy tests check the decisions of the one attempt loop the operators run, not of a second one."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace

from airflow_provider_resilient.policy import DEFAULT_POLICY, Attempt, Decision, Failure, RetryPolicy
from airflow_provider_resilient.supervisor import (
    Fail,
    JobFailed,
    Phase,
    RunState,
    Sleep,
    Submit,
    Submitted,
    Watch,
    WokeUp,
    step,
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
    """Feed failures one by one to a running attempt until the supervisor fails the run or they run out.

    Each failure arrives ``step_seconds`` after the previous command was carried out (time stamped then);
    a Sleep advances time by its seconds and wakes the supervisor; a Submit creates ``attempt-<n>``,
    resuming from the next of ``resume_steps`` (None once they run out: no checkpoint). Returns the
    decisions made (not those already in ``history``), in order, and the history.
    """
    steps = iter(resume_steps)
    history = history or (Attempt(1, "attempt-1", started_at=start),)
    state = RunState(phase=Phase.RUNNING, history=history, job_name=history[-1].resource_name or "attempt-1")
    now = start
    for failure in failures:
        now += step_seconds
        state, command = step(state, JobFailed(replace(failure, timestamp=now), now), policy, seed)
        if isinstance(command, Fail):
            break
        if isinstance(command, Sleep):
            now += command.seconds
            state, command = step(state, WokeUp(now), policy, seed)
        if isinstance(command, Submit):
            state, command = step(state, Submitted(f"attempt-{command.attempt}", now, next(steps, None)), policy,
                                  seed)
        assert isinstance(command, Watch), command
    decisions = [incident.decision for attempt in state.history for incident in attempt.incidents]
    return decisions[sum(len(attempt.incidents) for attempt in history):], state.history


def repeat(failure: Failure, limit: int = 200) -> Iterable[Failure]:
    """The same failure over and over (bounded)."""
    return itertools.repeat(failure, limit)
