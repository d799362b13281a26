"""The attempt loop as a pure state machine: ``step(state, event, policy) -> (state, command)``.

Rules of the module (after h11's ``_state.py``): no I/O, no clock, no logging, no Airflow or Google
imports. Time and randomness arrive inside events (``now``) and the policy seed. An event that makes no
sense in the current phase raises :class:`IllegalTransition` naming both, and the caller's state is
left unchanged (states are immutable).

Theory of operation. The operator (or trigger) is the shell: it feeds events in, carries out the one
command each step returns, and persists :class:`~.state.RunState` (JSON, see :func:`.state.state_to_json`)
after every step, so that a task retry, a deferral or a "Clear" continue from where the run was. The events and
commands are the records of :mod:`.events`. The machine is the table :data:`TRANSITIONS` -- one function per
legal (:class:`~.state.Phase`, event type) pair -- summed up here::

    phase        event                    command
    -----        -----                    -------
    new          Started                  Submit(attempt 1)
    submitting   Submitted(job)           Watch(job)
    submitting   SubmitFailed(failure)    policy: Sleep(delay) then Submit | Fail
    running      JobSucceeded(live)       Succeed(job, end=live)    -- a live resource is ended as the run stops
    running      JobFailed(failure)       policy: Sleep(delay) then Submit | Sleep then Watch (WAIT) | Fail
    running      JobFailed(live)          policy: EndAttempt(job), then as above | Fail(end=job)
    running      JobFailed(live, stopped) policy: EndAttempt(job, wait=False), then as above
    sleeping     WakeUp                   Submit(next attempt) | Watch(job)
    succeeded    Started                  Succeed(job)              -- a cleared successful task reruns nothing
    failed       Started                  Submit(attempt n + 1)     -- a cleared failed task resumes, fresh budgets
    running      Started(cleared)         EndAttempt(job)           -- a Clear of the running task: end it first
    running      MoveOff                  EndAttempt(job), then Submit  -- before a maintenance window (no budget)
    sleeping     Started(cleared)         EndAttempt(job) | Submit  -- (a backoff with no live attempt: submit now)
    ending       Ended                    Submit(attempt n + 1)     -- after a Clear: fresh budgets, "Clear" noted
    ending       Ended                    Sleep(the rest) | Submit  -- after a failure: the decided next attempt
    ending       Ended(succeeded)         Succeed(job)              -- it finished before it could be ended
    running      Started                  Watch(job)                -- a task retry reattaches
    submitting   Started                  the same Submit           -- found by its labels if it was created
    sleeping     Started                  Sleep(the rest)           -- a task retry keeps the backoff's end
    ending       Started                  EndAttempt(job)           -- the try that was ending it died

Never two attempts at once, nothing left behind: every side effect on a cloud resource is a command here.
A failed attempt whose resource is still live (``JobFailed(live=True)``: a CustomJob judged hung, a TPU
node whose workload failed) is ended by :class:`EndAttempt` before the backoff and the next attempt; a run
that stops ends what is still live (``Fail.end``, ``Succeed.end``). The shells only carry these out. A live
resource that runs nothing (``JobFailed(stopped=True)``: TPU nodes PREEMPTED, TERMINATED or in repair) cannot
write beside the next attempt once its deletion is requested: ``EndAttempt(wait=False)`` lets the next node's
create overlap that deletion.

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

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeAlias

from ..policy import Attempt, Decision, DecisionAction, Failure, FailureClass, RetryPolicy, decide, record_incident
from ..policy.decide import DEFAULT_POLICY
from ..policy.demotion import checkpoint_to_demote, demoted_failure, demotions_spent
from .events import (
    Action,
    EndAttempt,
    Ended,
    Event,
    Fail,
    JobFailed,
    JobSucceeded,
    MoveOff,
    Sleep,
    Started,
    Submit,
    SubmitFailed,
    Submitted,
    Succeed,
    Watch,
    WokeUp,
)
from .state import Phase, RunState

#: What :func:`step` returns: the new state and the one command to carry out next.
Step: TypeAlias = tuple[RunState, Action]


class IllegalTransition(ValueError):
    """An event that cannot happen in the current phase (or a state that lacks what its phase implies)."""

    def __init__(self, state: RunState, event: Event) -> None:
        super().__init__(f"event {type(event).__name__} is not allowed in phase {str(state.phase)!r}")
        self.phase = state.phase
        self.event = event


# ------------------------------------------------------------------------------------------ transitions


def _submit(state: RunState, attempt: int, fallback_index: int, failure_class: str | None) -> Step:
    action = Submit(attempt, fallback_index, failure_class)
    return replace(state, phase=Phase.SUBMITTING, next_submit=action, wake_at=None), action


def _next_attempt(state: RunState) -> int:
    return len(state.history) + 1


def _new_segment(state: RunState) -> RunState:
    """``state`` with a new segment starting after its last attempt: fresh budgets, the history kept."""
    return replace(state, segment_start=len(state.history))


def _after_decision(state: RunState, failure: Failure, decision: Decision, now: float, live: bool = False,
                    stopped: bool = False) -> Step:
    """Record the incident and carry out ``decision``. ``live``: the failed attempt's resource still exists:
    a new attempt (or the backoff before it) comes only after :class:`EndAttempt` has ended it, and a
    terminal decision ends it as the run stops (``Fail.end``). ``stopped``: that resource runs nothing
    (``JobFailed.stopped``): its end is requested, not waited for (``EndAttempt(wait=False)``)."""
    history = record_incident(state.history, failure, decision, now)
    state = replace(state, history=history)
    if decision.action.is_terminal:
        return (replace(state, phase=Phase.FAILED, next_submit=None),
                Fail(_failure_message(state, decision), decision.action.value,
                     end=state.job_name if live else None))
    if decision.action in (DecisionAction.WAIT, DecisionAction.RESTART_WORKERS):
        # The platform (or the worker runner) recovers in place: look again after the delay.
        return (replace(state, phase=Phase.SLEEPING, next_submit=None, wake_at=now + decision.delay_seconds),
                Sleep(decision.delay_seconds, decision.reason))
    submit = Submit(_next_attempt(state), decision.fallback_index, failure.failure_class.value)
    if live and state.job_name:  # never two attempts at once: end this one first
        wake_at = now + decision.delay_seconds if decision.delay_seconds > 0 else None
        return (replace(state, phase=Phase.ENDING, next_submit=submit, wake_at=wake_at),
                EndAttempt(state.job_name, f"{failure.failure_class.value}: {decision.reason}", wait=not stopped))
    if decision.delay_seconds > 0:
        return (replace(state, phase=Phase.SLEEPING, next_submit=submit, wake_at=now + decision.delay_seconds),
                Sleep(decision.delay_seconds, decision.reason))
    return replace(state, phase=Phase.SUBMITTING, next_submit=submit, wake_at=None), submit


def _end_for_clear(state: RunState) -> Step:
    """A person cleared the task while ``state.job_name`` ran: end that attempt before the next one."""
    assert state.job_name is not None
    return (replace(state, phase=Phase.ENDING, next_submit=None, wake_at=None),
            EndAttempt(state.job_name, "the task was cleared while this attempt ran"))


def _failure_message(state: RunState, decision: Decision) -> str:
    from ..policy import format_history

    lines = "\n".join(format_history(state.history))
    return f"{decision.reason}\nAttempt history:\n{lines}"


class _Context:
    """What a transition may use besides the state and the event: the policy and the jitter seed."""

    __slots__ = ("policy", "seed")

    def __init__(self, policy: RetryPolicy, seed: int | str) -> None:
        self.policy = policy
        self.seed = seed


def _need(state: RunState, event: Event, condition: object) -> None:
    """A state that lacks what its phase implies (a hand-made or corrupted one) cannot take the event."""
    if not condition:
        raise IllegalTransition(state, event)


# One function per legal (phase, event type) pair; the table below is the whole machine.

def _start_new(state: RunState, event: Started, ctx: _Context) -> Step:
    return _submit(state, 1, -1, None)


def _start_submitting(state: RunState, event: Started, ctx: _Context) -> Step:
    _need(state, event, state.next_submit)
    assert state.next_submit is not None
    return state, state.next_submit  # a retried try issues the same Submit (found by its labels if created)


def _start_running(state: RunState, event: Started, ctx: _Context) -> Step:
    _need(state, event, state.job_name)
    assert state.job_name is not None
    if event.cleared:
        return _end_for_clear(state)
    return state, Watch(state.job_name)


def _start_sleeping(state: RunState, event: Started, ctx: _Context) -> Step:
    if event.cleared and state.next_submit is not None:
        # A backoff between attempts (nothing runs): the person's Clear starts the next one now.
        nxt = state.next_submit
        return _submit(_new_segment(state), nxt.attempt, nxt.fallback_index, nxt.failure_class)
    if event.cleared and state.job_name:  # a wait for the platform to recover the running attempt
        return _end_for_clear(state)
    return state, Sleep(max(0.0, (state.wake_at or event.now) - event.now), "resuming the backoff")


def _start_ending(state: RunState, event: Started, ctx: _Context) -> Step:
    _need(state, event, state.job_name)
    assert state.job_name is not None
    if state.next_submit is not None and not event.cleared:  # a retried try goes on ending it after a failure
        return state, EndAttempt(state.job_name, "ending the failed attempt before the next one")
    return _end_for_clear(state)  # the try that was ending it died, or a person cleared the task: end it


def _start_succeeded(state: RunState, event: Started, ctx: _Context) -> Step:
    if state.job_name and not event.rerun:
        return state, Succeed(state.job_name)  # a cleared successful task reruns nothing
    return _submit(_new_segment(state), _next_attempt(state), -1, None)


def _start_failed(state: RunState, event: Started, ctx: _Context) -> Step:
    return _submit(_new_segment(state), _next_attempt(state), -1, None)


def _submitted(state: RunState, event: Submitted, ctx: _Context) -> Step:
    _need(state, event, state.next_submit)
    assert state.next_submit is not None
    attempt = Attempt(state.next_submit.attempt, event.job_name, state.next_submit.fallback_index,
                      started_at=event.now, resumed_from_step=event.resumed_from_step,
                      resumed_from_uri=event.resumed_from_uri)
    return (replace(state, phase=Phase.RUNNING, history=(*state.history, attempt), job_name=event.job_name,
                    next_submit=None), Watch(event.job_name))


def _submit_failed(state: RunState, event: SubmitFailed, ctx: _Context) -> Step:
    _need(state, event, state.next_submit)
    assert state.next_submit is not None
    attempt = Attempt(state.next_submit.attempt, None, state.next_submit.fallback_index, started_at=event.now)
    state = replace(state, history=(*state.history, attempt))
    decision = decide(state.segment, event.failure, event.now, policy=ctx.policy, seed=ctx.seed)
    return _after_decision(state, event.failure, decision, event.now)


def _job_succeeded(state: RunState, event: JobSucceeded, ctx: _Context) -> Step:
    _need(state, event, state.job_name and state.history)
    assert state.job_name is not None
    last = replace(state.history[-1], ended_at=event.now,
                   platform_restarts=event.platform_restarts or state.history[-1].platform_restarts)
    return (replace(state, phase=Phase.SUCCEEDED, history=(*state.history[:-1], last)),
            Succeed(state.job_name, end=event.live))


def _job_failed(state: RunState, event: JobFailed, ctx: _Context) -> Step:
    failure = event.failure
    if event.platform_restarts and state.history:
        last = replace(state.history[-1], platform_restarts=event.platform_restarts)
        state = replace(state, history=(*state.history[:-1], last))
    segment = state.segment
    before = segment[-2] if len(segment) >= 2 else None
    demote = checkpoint_to_demote(
        failure, segment[-1].resumed_from_step if segment else None, _steps_seen(state), demoted=state.demoted,
        spent=demotions_spent(segment), resumed_before=before.resumed_from_step if before else None,
        failed_before=before.incidents[-1].failure.failure_class if before and before.incidents else None,
        policy=ctx.policy)
    if demote is not None:  # a checkpoint that looks complete but will not load (policy/demotion.py)
        failure = demoted_failure(failure, demote)
        state = replace(state, demoted=(*state.demoted, demote))
    decision = decide(segment, failure, event.now, policy=ctx.policy, seed=ctx.seed, spare_ready=event.spare_ready)
    return _after_decision(state, failure, decision, event.now, live=event.live, stopped=event.stopped)


def _steps_seen(state: RunState) -> tuple[int, ...] | None:
    """The steps the observer saw in the running attempt (its progress clocks'), or None when its memory is not
    of that attempt or holds nothing (the attempt's progress is unknown)."""
    watch = state.watch
    if watch.resource is None or watch.resource != state.job_name or not watch.clocks:
        return None
    return tuple(clock.step for _, clock in watch.clocks if clock.step is not None)


def _move_off(state: RunState, event: MoveOff, ctx: _Context) -> Step:
    _need(state, event, state.job_name and state.history)
    assert state.job_name is not None
    last = replace(state.history[-1], ended_by="maintenance")
    submit = Submit(_next_attempt(state), last.fallback_index, FailureClass.MAINTENANCE_EVENT.value)
    return (replace(state, phase=Phase.ENDING, history=(*state.history[:-1], last), next_submit=submit,
                    wake_at=None), EndAttempt(state.job_name, event.reason))


def _woke_up(state: RunState, event: WokeUp, ctx: _Context) -> Step:
    if state.next_submit is not None:
        return replace(state, phase=Phase.SUBMITTING, wake_at=None), state.next_submit
    _need(state, event, state.job_name)  # the WAIT path: look at the same attempt again
    assert state.job_name is not None
    return replace(state, phase=Phase.RUNNING, wake_at=None), Watch(state.job_name)


def _ended(state: RunState, event: Ended, ctx: _Context) -> Step:
    _need(state, event, state.job_name and state.history)
    assert state.job_name is not None
    last = replace(state.history[-1], ended_at=event.now)
    if event.succeeded:  # it finished before the cancel took effect: that is the result
        return (replace(state, phase=Phase.SUCCEEDED, next_submit=None, wake_at=None,
                        history=(*state.history[:-1], last)), Succeed(state.job_name))
    if state.next_submit is not None:  # ended after a failure: the decided backoff, then the next attempt
        if state.wake_at is not None and state.wake_at > event.now:
            return (replace(state, phase=Phase.SLEEPING),
                    Sleep(state.wake_at - event.now, "backoff before the next attempt"))
        return replace(state, phase=Phase.SUBMITTING, wake_at=None), state.next_submit
    last = replace(last, ended_by="clear")
    state = _new_segment(replace(state, history=(*state.history[:-1], last)))
    return _submit(state, _next_attempt(state), last.fallback_index, None)


#: The machine: every legal (phase, event type) pair and its transition. Any other pair raises
#: :class:`IllegalTransition` (h11's ``_state.py`` keeps its table the same way).
TRANSITIONS: dict[tuple[Phase, type], Callable[[RunState, Any, _Context], Step]] = {
    (Phase.NEW, Started): _start_new,
    (Phase.SUBMITTING, Started): _start_submitting,
    (Phase.SUBMITTING, Submitted): _submitted,
    (Phase.SUBMITTING, SubmitFailed): _submit_failed,
    (Phase.RUNNING, Started): _start_running,
    (Phase.RUNNING, JobSucceeded): _job_succeeded,
    (Phase.RUNNING, JobFailed): _job_failed,
    (Phase.RUNNING, MoveOff): _move_off,
    (Phase.SLEEPING, Started): _start_sleeping,
    (Phase.SLEEPING, WokeUp): _woke_up,
    (Phase.ENDING, Started): _start_ending,
    (Phase.ENDING, Ended): _ended,
    (Phase.SUCCEEDED, Started): _start_succeeded,
    (Phase.FAILED, Started): _start_failed,
}


def step(state: RunState, event: Event, policy: RetryPolicy = DEFAULT_POLICY, seed: int | str = 0) -> Step:
    """Process one event: the new state and the one command to carry out next.

    Args:
        state: the run so far (not modified: states are immutable).
        event: what happened; its ``now`` is seconds since the epoch.
        policy: the retry rules (default: :data:`~..policy.DEFAULT_POLICY`).
        seed: the jitter seed of the run (e.g. ``"dag/task/run/map_index"``), so a retried process draws the
            same delays.

    Raises:
        IllegalTransition: when ``event`` cannot happen in ``state.phase`` (see :data:`TRANSITIONS`), or the
            state lacks what its phase implies; ``state`` is unchanged.
    """
    transition = TRANSITIONS.get((Phase(state.phase), type(event)))
    if transition is None:
        raise IllegalTransition(state, event)
    return transition(state, event, _Context(policy, seed))


__all__ = [
    "TRANSITIONS",
    "IllegalTransition",
    "Step",
    "step",
]
