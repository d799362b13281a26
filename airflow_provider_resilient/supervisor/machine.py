"""The attempt loop as a pure state machine: ``step(state, event, policy) -> (state, actions)``.

Rules of the module (after h11's ``_state.py``): no I/O, no clock, no logging, no Airflow or Google
imports. Time and randomness arrive inside events (``now``) and the policy seed. An event that makes no
sense in the current phase raises :class:`IllegalTransition` naming both, and the caller's state is
left unchanged (states are immutable).

Theory of operation. The operator (or trigger) is the shell: it feeds events in, carries the actions
out, and persists :class:`RunState` (JSON, see :func:`state_to_json`) after every step, so that a task
retry, a deferral or a "Clear" continue from where the run was::

    phase        event                    actions
    -----        -----                    -------
    new          Started                  Submit(attempt 1)
    submitting   Submitted(job)           Watch(job)
    submitting   SubmitFailed(failure)    policy: Sleep(delay) then Submit | Fail
    running      JobSucceeded             Succeed(job)
    running      JobFailed(failure)       policy: Sleep(delay) then Submit | Sleep then Watch (WAIT) | Fail
    sleeping     WakeUp                   Submit(next attempt) | Watch(job)
    succeeded    Started                  Succeed(job)              -- a cleared successful task reruns nothing
    failed       Started                  Submit(attempt n + 1)     -- a cleared failed task resumes, fresh budgets
    running      Started(cleared)         EndAttempt(job)           -- a Clear of the running task: end it first
    sleeping     Started(cleared)         EndAttempt(job) | Submit  -- (a backoff with no live attempt: submit now)
    ending       Ended                    Submit(attempt n + 1)     -- fresh budgets, the history says "Clear"
    ending       Ended(succeeded)         Succeed(job)              -- it finished before it could be ended

Budgets are counted by :func:`~..policy.decide` from the history of the current *segment*: a task
retry that finds the run in progress continues the segment (and its budgets); a new try after the run
ended in failure -- only a person clearing the task does that, since failures raise
``AirflowFailException`` -- starts a new segment with fresh budgets, keeping the whole history.

A Clear of a running (or deferred) task. Airflow gives the next try no reason, so the shell tells the
supervisor whether this try is the first one after a Clear (``Started(cleared=True)``; Airflow's own rule:
``try_number == max_tries - retries + 1`` past the first try, see ``operators.base``). A cleared task whose
run is still in progress must not reattach to the old attempt -- the old trigger's ``on_kill`` cancels it
(Airflow 3.3 calls it on a Clear too), and the new try would see a user's cancel -- nor count what the
Clear did as a failure. So the supervisor commands :class:`EndAttempt` (cancel the job / delete the node,
and wait until it has ended), marks that attempt ``ended_by="clear"``, and submits the next attempt in a
new segment: no incident, no budget spent, and it resumes from the latest complete checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..policy import (
    Attempt,
    Decision,
    DecisionAction,
    Failure,
    RetryPolicy,
    decide,
    record_incident,
)
from ..policy.decide import DEFAULT_POLICY

# ---------------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Started:
    """The task (re)started: first try, Airflow retry, or a user's Clear. ``rerun``: a cleared task that
    had succeeded trains again instead of returning the earlier result. ``cleared``: this try is the first
    after a person cleared the task (not an Airflow retry)."""

    now: float
    rerun: bool = False
    cleared: bool = False


@dataclass(frozen=True)
class Ended:
    """The attempt that :class:`EndAttempt` ended has ended (terminal job, node gone); ``succeeded``: it had
    finished successfully before the cancel took effect."""

    now: float
    succeeded: bool = False


@dataclass(frozen=True)
class Submitted:
    """The create call returned (or a live job of the pending attempt was found by its labels)."""

    job_name: str
    now: float
    resumed_from_step: int | None = None
    resumed_from_uri: str | None = None


@dataclass(frozen=True)
class SubmitFailed:
    """The create call itself failed (quota, stockout, bad request), after the hook's own API retries."""

    failure: Failure
    now: float


@dataclass(frozen=True)
class JobSucceeded:
    now: float


@dataclass(frozen=True)
class JobFailed:
    """The watched job reached a failed terminal state (classified by the shell)."""

    failure: Failure
    now: float


@dataclass(frozen=True)
class WokeUp:
    """The backoff delay of the last Sleep action is over."""

    now: float


Event = Started | Submitted | SubmitFailed | JobSucceeded | JobFailed | WokeUp | Ended

# --------------------------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Submit:
    """Create attempt ``attempt`` on ``fallback_index`` (-1: the original target), resuming from the latest
    complete checkpoint (the shell looks it up just before the create call)."""

    attempt: int
    fallback_index: int
    failure_class: str | None = None  # what ended the previous attempt, for RESILIENT_FAILURE_CLASS


@dataclass(frozen=True)
class Watch:
    job_name: str


@dataclass(frozen=True)
class Sleep:
    seconds: float
    reason: str


@dataclass(frozen=True)
class EndAttempt:
    """End the attempt running as ``job_name`` -- cancel the CustomJob, delete the TPU node -- and report
    :class:`Ended` once the platform says it has ended (never two attempts at once)."""

    job_name: str
    reason: str


@dataclass(frozen=True)
class Succeed:
    job_name: str


@dataclass(frozen=True)
class Fail:
    """Stop with this message (the attempt history). Never retried by Airflow."""

    message: str
    decision: str


Action = Submit | Watch | Sleep | EndAttempt | Succeed | Fail

# ----------------------------------------------------------------------------------------------- state


@dataclass(frozen=True)
class RunState:
    """Everything the loop knows; JSON through :func:`state_to_json`.

    Attributes:
        phase: new, submitting, running, sleeping, ending (a cleared task ends its old attempt), succeeded,
            failed.
        history: every attempt of every segment, oldest first.
        segment_start: index in ``history`` where the current segment's attempts begin.
        job_name: the job being watched (or the last one).
        next_submit: after a sleep, the Submit to issue (None: watch ``job_name`` again).
        wake_at: when the current sleep ends, seconds since the epoch.
    """

    phase: str = "new"
    history: tuple[Attempt, ...] = ()
    segment_start: int = 0
    job_name: str | None = None
    next_submit: Submit | None = None
    wake_at: float | None = None

    @property
    def segment(self) -> tuple[Attempt, ...]:
        return self.history[self.segment_start:]

    @property
    def pending_attempt(self) -> int | None:
        """The attempt number being submitted (phase submitting), for finding it by its labels."""
        return self.next_submit.attempt if self.phase == "submitting" and self.next_submit else None


class IllegalTransition(ValueError):
    """An event that cannot happen in the current phase."""

    def __init__(self, state: RunState, event: Event) -> None:
        super().__init__(f"event {type(event).__name__} is not allowed in phase {state.phase!r}")
        self.phase = state.phase
        self.event = event


# ------------------------------------------------------------------------------------------ transitions


def _submit(state: RunState, attempt: int, fallback_index: int,
            failure_class: str | None) -> tuple[RunState, list[Action]]:
    action = Submit(attempt, fallback_index, failure_class)
    return replace(state, phase="submitting", next_submit=action, wake_at=None), [action]


def _next_attempt(state: RunState) -> int:
    return len(state.history) + 1


def _after_decision(state: RunState, failure: Failure, decision: Decision,
                    now: float) -> tuple[RunState, list[Action]]:
    history = record_incident(state.history, failure, decision, now)
    state = replace(state, history=history)
    if decision.action.is_terminal:
        return replace(state, phase="failed", next_submit=None), [Fail(_failure_message(state, decision),
                                                                      decision.action.value)]
    if decision.action in (DecisionAction.WAIT, DecisionAction.RESTART_WORKERS):
        # The platform (or the worker runner) recovers in place: look again after the delay.
        return (replace(state, phase="sleeping", next_submit=None, wake_at=now + decision.delay_seconds),
                [Sleep(decision.delay_seconds, decision.reason)])
    submit = Submit(_next_attempt(state), decision.fallback_index, failure.failure_class.value)
    if decision.delay_seconds > 0:
        return (replace(state, phase="sleeping", next_submit=submit, wake_at=now + decision.delay_seconds),
                [Sleep(decision.delay_seconds, decision.reason)])
    return replace(state, phase="submitting", next_submit=submit, wake_at=None), [submit]


def _end_for_clear(state: RunState) -> tuple[RunState, list[Action]]:
    """A person cleared the task while ``state.job_name`` ran: end that attempt before the next one."""
    assert state.job_name is not None
    return (replace(state, phase="ending", next_submit=None, wake_at=None),
            [EndAttempt(state.job_name, "the task was cleared while this attempt ran")])


def _failure_message(state: RunState, decision: Decision) -> str:
    from ..policy import format_history

    lines = "\n".join(format_history(state.history))
    return f"{decision.reason}\nAttempt history:\n{lines}"


def step(state: RunState, event: Event, policy: RetryPolicy = DEFAULT_POLICY,
         seed: int | str = 0) -> tuple[RunState, list[Action]]:
    """Process one event. Returns the new state and the actions to carry out, in order.

    Raises:
        IllegalTransition: when ``event`` cannot happen in ``state.phase``; ``state`` is unchanged.
    """
    phase = state.phase
    if isinstance(event, Started):
        if event.cleared and state.job_name and (phase == "running" or (phase == "sleeping" and
                                                                       state.next_submit is None)):
            return _end_for_clear(state)
        if event.cleared and phase == "sleeping" and state.next_submit is not None:
            # A backoff between attempts (nothing runs): the person's Clear starts the next one now.
            new_segment = replace(state, segment_start=len(state.history))
            return _submit(new_segment, state.next_submit.attempt, state.next_submit.fallback_index,
                           state.next_submit.failure_class)
        if phase == "ending" and state.job_name:  # the try that was ending it died: end it again
            return _end_for_clear(state)
        if phase == "new":
            return _submit(state, 1, -1, None)
        if phase == "succeeded" and state.job_name and not event.rerun:
            return state, [Succeed(state.job_name)]
        if phase in ("failed", "succeeded"):
            new_segment = replace(state, segment_start=len(state.history))
            return _submit(new_segment, _next_attempt(state), -1, None)
        if phase == "running" and state.job_name:
            return state, [Watch(state.job_name)]
        if phase == "submitting" and state.next_submit:
            return state, [state.next_submit]
        if phase == "sleeping":
            return state, [Sleep(max(0.0, (state.wake_at or event.now) - event.now), "resuming the backoff")]
        raise IllegalTransition(state, event)

    if isinstance(event, Submitted) and phase == "submitting" and state.next_submit:
        attempt = Attempt(state.next_submit.attempt, event.job_name, state.next_submit.fallback_index,
                          started_at=event.now, resumed_from_step=event.resumed_from_step,
                          resumed_from_uri=event.resumed_from_uri)
        return (replace(state, phase="running", history=(*state.history, attempt), job_name=event.job_name,
                        next_submit=None), [Watch(event.job_name)])

    if isinstance(event, SubmitFailed) and phase == "submitting" and state.next_submit:
        attempt = Attempt(state.next_submit.attempt, None, state.next_submit.fallback_index, started_at=event.now)
        state = replace(state, history=(*state.history, attempt))
        decision = decide(state.segment, event.failure, event.now, policy=policy, seed=seed)
        return _after_decision(state, event.failure, decision, event.now)

    if isinstance(event, JobSucceeded) and phase == "running" and state.job_name:
        last = replace(state.history[-1], ended_at=event.now)
        return (replace(state, phase="succeeded", history=(*state.history[:-1], last)),
                [Succeed(state.job_name)])

    if isinstance(event, JobFailed) and phase == "running":
        decision = decide(state.segment, event.failure, event.now, policy=policy, seed=seed)
        return _after_decision(state, event.failure, decision, event.now)

    if isinstance(event, Ended) and phase == "ending" and state.job_name:
        last = replace(state.history[-1], ended_at=event.now)
        if event.succeeded:
            return (replace(state, phase="succeeded", next_submit=None, history=(*state.history[:-1], last)),
                    [Succeed(state.job_name)])
        last = replace(last, ended_by="clear")
        state = replace(state, history=(*state.history[:-1], last), segment_start=len(state.history))
        return _submit(state, _next_attempt(state), last.fallback_index, None)

    if isinstance(event, WokeUp) and phase == "sleeping":
        if state.next_submit is not None:
            return replace(state, phase="submitting", wake_at=None), [state.next_submit]
        if state.job_name:
            return replace(state, phase="running", wake_at=None), [Watch(state.job_name)]

    raise IllegalTransition(state, event)


# ------------------------------------------------------------------------------------------ JSON


def state_to_json(state: RunState) -> dict[str, Any]:
    """``state`` as JSON-compatible data without None values (Airflow's task state store takes no None)."""
    from ..policy import history_to_json

    data: dict[str, Any] = {"phase": state.phase, "history": history_to_json(state.history),
                            "segment_start": state.segment_start}
    if state.job_name:
        data["job_name"] = state.job_name
    if state.next_submit:
        data["next_submit"] = {k: v for k, v in vars(state.next_submit).items() if v is not None}
    if state.wake_at is not None:
        data["wake_at"] = state.wake_at
    return data


def state_from_json(data: Any) -> RunState:
    """The inverse of :func:`state_to_json`; empty data gives a new state.

    Raises:
        ValueError: naming what is wrong when ``data`` is not a state written by :func:`state_to_json`.
    """
    from ..policy import history_from_json

    if not data:
        return RunState()
    if not isinstance(data, dict) or "phase" not in data:
        raise ValueError(f"not a supervisor state: {str(data)[:200]}")
    submit = data.get("next_submit")
    return RunState(
        phase=str(data["phase"]),
        history=history_from_json(data.get("history") or []),
        segment_start=int(data.get("segment_start", 0)),
        job_name=data.get("job_name"),
        next_submit=Submit(**submit) if submit else None,
        wake_at=data.get("wake_at"),
    )


__all__ = [
    "Action", "EndAttempt", "Ended", "Event", "Fail", "IllegalTransition", "JobFailed", "JobSucceeded", "RunState",
    "Sleep", "Started",
    "Submit", "SubmitFailed", "Submitted", "Succeed", "Watch", "WokeUp", "state_from_json", "state_to_json", "step",
]
