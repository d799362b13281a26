"""``decide(history, failure, now) -> Decision``: the one pure function behind every retry.

Theory of operation:

* The **attempt history** is a tuple of :class:`Attempt` records, oldest first. An attempt is one
  submitted resource (a CustomJob, a TPU node run); it carries the :class:`Incident` list -- each
  failure observed during it and the :class:`Decision` taken. WAIT and RESTART_WORKERS decisions keep
  the attempt open; RESUBMIT / RECREATE_NODE end it and the caller opens the next one.
* **Budgets are counted from the history alone** -- there is no counter anywhere else -- so a task retry
  or a "Clear" that reloads the history from the task state store continues the count where it was.
* ``decide`` never mutates anything and reads no clock: ``now`` (seconds since the epoch) and ``seed``
  (for backoff jitter) are inputs, so the same history, failure, time and seed give the same decision.
  The caller appends ``Incident(failure, decision)`` to the current attempt.
* Odd input never raises: a failure no rule matches gets GIVE_UP with the reason "no rule matched".
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from .failures import Failure, FailureClass, Platform
from .parts import Budget, DecisionAction, Fallback, Rule, RuleAction
from .records import Attempt, Decision, Incident
from .repair import continues_wait, repair_outlook
from .rules import RetryPolicy

DEFAULT_POLICY = RetryPolicy()


def _incidents(history: Sequence[Attempt]) -> list[tuple[int, Incident]]:
    return [(a.number, inc) for a in history for inc in a.incidents]


def _last_progress(history: Sequence[Attempt]) -> int:
    """Index of the newest attempt that resumed from a newer checkpoint than all before it (0: none)."""
    last, best = 0, -1
    for index, attempt in enumerate(history):
        step = -1 if attempt.resumed_from_step is None else attempt.resumed_from_step
        if step > best:
            if index > 0:
                last = index
            best = step
    return last


def _budget_use(history: Sequence[Attempt], budget_name: str, budget: Budget, failure: Failure,
                now: float) -> tuple[int, float | None]:
    """(uses so far, seconds since the current streak started) for ``budget_name``."""
    incidents = _incidents(history[_last_progress(history):] if budget.reset_on_progress else history)
    if budget.per_worker:
        current = history[-1].number if history else None
        used = sum(1 for number, inc in incidents
                   if number == current and inc.decision.budget == budget_name
                   and inc.decision.counts_against_budget and inc.failure.worker_id == failure.worker_id)
        used = max(used, failure.worker_restarts or 0)
    else:
        used = sum(1 for _, inc in incidents
                   if inc.decision.budget == budget_name and inc.decision.counts_against_budget)
    streak_start: float | None = None
    later = now
    for _, inc in reversed(incidents):
        if inc.decision.budget != budget_name or not inc.decision.counts_against_budget:
            break
        # A wait whose next look came long after it was over: the condition cleared in between (a node back
        # from its repair), and what came later is a new streak.
        if inc.decision.action == DecisionAction.WAIT and not continues_wait(inc, later):
            break
        start = inc.decision.decided_at if inc.decision.decided_at is not None else inc.failure.timestamp
        if start is not None:
            streak_start = later = start
    elapsed = None if streak_start is None else max(0.0, now - streak_start)
    return used, elapsed


def _current_fallback(history: Sequence[Attempt]) -> int:
    indexes = [a.fallback_index for a in history]
    indexes += [inc.decision.fallback_index for _, inc in _incidents(history)]
    return max(indexes, default=-1)


def _next_fallback(history: Sequence[Attempt], failure: Failure,
                   fallbacks: Sequence[Fallback]) -> tuple[int, Fallback] | None:
    start = _current_fallback(history) + 1
    for index in range(start, len(fallbacks)):
        if failure.failure_class in fallbacks[index].on:
            return index, fallbacks[index]
    return None


def _platform_action(action: RuleAction, platform: Platform) -> DecisionAction:
    """RESTART_WORKERS and RECREATE_NODE exist only on TPU; elsewhere a new attempt is RESUBMIT."""
    if platform != Platform.TPU and action in (RuleAction.RESTART_WORKERS, RuleAction.RECREATE_NODE):
        return DecisionAction.RESUBMIT
    return DecisionAction(action.value)


def _jitter(seed: int | str, history: Sequence[Attempt], rule: Rule) -> float:
    # A string seed makes random.Random deterministic across processes (no hash randomisation).
    key = f"{seed}:{sum(len(a.incidents) for a in history)}:{len(history)}:{rule.name}"
    return random.Random(key).random()


def decide(
    history: Sequence[Attempt],
    failure: Failure,
    now: float,
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
    seed: int | str = 0,
    spare_ready: bool = False,
) -> Decision:
    """Decide what to do about ``failure``, given everything that happened before.

    Args:
        history: the attempts so far, oldest first; the last one is the attempt ``failure`` belongs to.
        failure: the classified failure (see :mod:`.classify`).
        now: the current time in seconds since the epoch (for time-limited budgets).
        policy: the rules, budgets, backoff and fallbacks.
        seed: seeds the backoff jitter; the same inputs and seed give the same decision.
        spare_ready: a spare node is READY for the next attempt (:mod:`..supervisor.spare`): a TPU node in repair
            is re-created at once (the next attempt takes the spare), whatever the repairs seen so far.

    Returns:
        A :class:`Decision`. FAIL for a permanent failure; GIVE_UP when the matching rule's budget is
        spent (or no rule matched); otherwise the rule's action, mapped to the platform (RESUBMIT off TPU
        for RESTART_WORKERS / RECREATE_NODE), with a backoff delay.
    """
    return _decide(policy.effective_rules, history, failure, now, policy, seed, spare_ready)


def _decide(rules: Sequence[Rule], history: Sequence[Attempt], failure: Failure, now: float, policy: RetryPolicy,
            seed: int | str, spare_ready: bool = False) -> Decision:
    """:func:`decide` over ``rules`` (the policy's, in order)."""
    current_fallback = _current_fallback(history)
    for position, rule in enumerate(rules):
        if not rule.matches(failure):
            continue
        if rule.fail_over and (nxt := _next_fallback(history, failure, policy.fallbacks)):
            index, fallback = nxt
            action = DecisionAction.RECREATE_NODE if failure.platform == Platform.TPU else DecisionAction.RESUBMIT
            delay = policy.failover_backoff.delay(index, _jitter(seed, history, rule))
            return Decision(
                action, rule.name,
                f"{failure.failure_class.value}: failing over to fallback {index + 1}/{len(policy.fallbacks)} "
                f"({fallback.describe()}) in {delay:.0f}s",
                delay_seconds=delay, fallback_index=index, failed_over=True, decided_at=now,
            )
        if rule.action == RuleAction.FAIL:
            return Decision(DecisionAction.FAIL, rule.name,
                            f"not retried (rule {rule.name}): {failure.summary()}",
                            fallback_index=current_fallback, decided_at=now)
        assert rule.budget is not None  # Rule.__post_init__ guarantees it
        budget = policy.budget(rule.budget)
        used, elapsed = _budget_use(history, rule.budget, budget, failure, now)
        spent = (budget.max_retries is not None and used >= budget.max_retries) or (
            budget.max_seconds is not None and elapsed is not None and elapsed >= budget.max_seconds)
        if spent:
            if rule.fall_through:
                continue
            limit = (f"{used}/{budget.max_retries} retries" if budget.max_retries is not None
                     else f"{elapsed:.0f}s of {budget.max_seconds:.0f}s")
            return Decision(DecisionAction.GIVE_UP, rule.name,
                            f"budget {rule.budget} is spent ({limit}); giving up on {failure.summary()}",
                            budget=rule.budget, budget_used=used,
                            budget_limit=budget.max_retries, fallback_index=current_fallback, decided_at=now)
        if (policy.weigh_repairs and rule.action == RuleAction.WAIT and rule.fall_through
                and failure.failure_class == FailureClass.MAINTENANCE_EVENT and failure.platform == Platform.TPU):
            outlook = repair_outlook(history, now, spare_ready=spare_ready)
            if outlook is not None and outlook.recreate:
                instead = _decide(rules[position + 1:], history, failure, now, policy, seed)
                if not instead.action.is_terminal:  # (a spent re-create budget: the repair is still waited for)
                    return replace(instead, reason=f"{instead.reason}; not waiting out the repair: {outlook.why}")
            weighed = f"; {outlook.why}" if outlook is not None else ""
        else:
            weighed = ""
        backoff = budget.backoff or policy.backoff
        delay = backoff.delay(used, _jitter(seed, history, rule))
        action = _platform_action(rule.action, failure.platform)
        limit_text = f"{used + 1}/{budget.max_retries}" if budget.max_retries is not None else f"{used + 1}"
        return Decision(
            action, rule.name,
            f"{failure.failure_class.value}: {action.value.replace('_', ' ')} in {delay:.0f}s "
            f"(rule {rule.name}, budget {rule.budget} {limit_text}){weighed}",
            delay_seconds=delay, budget=rule.budget, budget_used=used + 1,
            budget_limit=budget.max_retries, fallback_index=current_fallback, decided_at=now,
        )
    return Decision(DecisionAction.GIVE_UP, "", f"no rule matched {failure.summary()}; giving up",
                    fallback_index=current_fallback, decided_at=now)


def record_incident(history: Sequence[Attempt], failure: Failure, decision: Decision,
                    now: float) -> tuple[Attempt, ...]:
    """The history with ``Incident(failure, decision)`` appended to its last attempt.

    When the decision ends the attempt (RESUBMIT, RECREATE_NODE, FAIL, GIVE_UP) the attempt is closed
    with ``ended_at=now``. Opening the next attempt is the caller's job, once it has submitted it (it
    knows the resource name and the checkpoint it resumed from).

    Raises:
        ValueError: when ``history`` is empty (an incident belongs to an attempt).
    """
    if not history:
        raise ValueError("record_incident: the history has no attempt to record the incident in")
    last = history[-1].with_incident(Incident(failure, decision))
    if decision.action.starts_new_attempt or decision.action.is_terminal:
        last = replace(last, ended_at=now)
    return (*history[:-1], last)
