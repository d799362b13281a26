"""Hypothesis properties of the policy: budgets hold, permanent failures stop, decisions are reproducible,
fallbacks are consumed in order, and nothing raises on odd input."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.policy import (
    DEFAULT_BUDGETS,
    PERMANENT_CLASSES,
    Attempt,
    DecisionAction,
    Failure,
    FailureClass,
    Fallback,
    Incident,
    Platform,
    RetryPolicy,
    classify_ai_platform_job,
    classify_create_error,
    classify_error_message,
    classify_exit_status,
    classify_tpu_audit_entry,
    classify_tpu_node,
    classify_vertex_job,
    decide,
    history_from_json,
    history_to_json,
)
from airflow_provider_resilient.policy.repair import continues_wait

from .sim import run

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NODE_STATES = ["READY", "REPAIRING", "RESTARTING", "TERMINATED", "PREEMPTED", "STOPPED", "UNKNOWN", "weird"]

failures = st.builds(
    Failure,
    failure_class=st.sampled_from(list(FailureClass)),
    platform=st.sampled_from(list(Platform)),
    message=st.text(max_size=40),
    exit_code=st.none() | st.integers(min_value=-64, max_value=300),
    worker_id=st.none() | st.sampled_from(["0", "1", "2", "workerpool0-0"]),
    worker_restarts=st.none() | st.integers(min_value=0, max_value=8),
    node_state=st.none() | st.sampled_from(NODE_STATES),
    quota_metric=st.none() | st.text(max_size=10),
)

fallback_strategy = st.builds(
    Fallback,
    region=st.sampled_from(["us-east1", "europe-west4", "asia-east1"]),
    on=st.sets(st.sampled_from([FailureClass.CAPACITY_STOCKOUT, FailureClass.QUEUE_TIMEOUT,
                                FailureClass.PREEMPTION]), min_size=1).map(frozenset),
)

policies = st.builds(
    RetryPolicy.from_counts,
    transient_retries=st.none() | st.integers(0, 5),
    internal_retries=st.none() | st.integers(0, 5),
    stockout_retries=st.none() | st.integers(0, 5),
    worker_restarts=st.none() | st.integers(0, 6),
    job_retries=st.none() | st.integers(0, 4),
    node_recreates=st.none() | st.integers(0, 4),
    preflight_retries=st.none() | st.integers(1, 3),
    fallbacks=st.lists(fallback_strategy, max_size=3),
)


@SETTINGS
@given(seq=st.lists(failures, min_size=1, max_size=60), policy=policies, seed=st.integers(0, 2**32))
def test_no_budget_is_ever_exceeded(seq, policy, seed):
    decisions, history = run(seq, policy, seed=seed)
    budgets = policy.effective_budgets
    totals = Counter(d.budget for d in decisions if d.counts_against_budget)
    for name, used in totals.items():
        budget = budgets[name]
        if budget.max_retries is not None and not budget.per_worker:
            assert used <= budget.max_retries, (name, used)
    for attempt in history:  # per-worker budgets hold within each attempt
        per_worker = Counter((inc.decision.budget, inc.failure.worker_id) for inc in attempt.incidents
                             if inc.decision.counts_against_budget and budgets[inc.decision.budget].per_worker)
        for (name, _worker), used in per_worker.items():
            assert used <= budgets[name].max_retries
    for d in decisions:
        if d.budget_limit is not None and d.counts_against_budget:
            assert d.budget_used <= d.budget_limit


@SETTINGS
@given(seq=st.lists(failures, min_size=1, max_size=30), policy=policies)
def test_a_permanent_failure_is_never_retried(seq, policy):
    _, history = run(seq, policy)
    incidents = [inc for attempt in history for inc in attempt.incidents]
    for inc in incidents:
        if inc.failure.failure_class in PERMANENT_CLASSES:
            fallbacks_for_it = any(inc.failure.failure_class in fb.on for fb in policy.fallbacks)
            if not fallbacks_for_it:
                assert inc.decision.action == DecisionAction.FAIL, inc


@SETTINGS
@given(seq=st.lists(failures, min_size=1, max_size=30), policy=policies, seed=st.integers(0, 2**32),
       failure=failures)
def test_same_history_and_seed_give_the_same_decision(seq, policy, seed, failure):
    _, history = run(seq, policy, seed=seed)
    if history[-1].ended_at is not None and history[-1].incidents and \
            history[-1].incidents[-1].decision.action.is_terminal:
        history = (*history, Attempt(history[-1].number + 1))
    now = 2_000_000_000.0
    first = decide(history, failure, now, policy=policy, seed=seed)
    again = decide(history_from_json(history_to_json(history)), failure, now, policy=policy, seed=seed)
    assert first == again


@SETTINGS
@given(policy=policies, seq=st.lists(failures, min_size=1, max_size=60))
def test_fallbacks_are_used_in_order_and_never_repeated(policy, seq):
    decisions, history = run(seq, policy)
    switched = [d.fallback_index for d in decisions if d.failed_over]
    assert switched == sorted(switched) and len(switched) == len(set(switched))
    assert all(0 <= i < len(policy.fallbacks) for i in switched)
    indexes = [a.fallback_index for a in history]
    assert indexes == sorted(indexes)
    for inc in (inc for attempt in history for inc in attempt.incidents):
        if inc.decision.failed_over:  # only a fallback meant for this class is consumed
            assert inc.failure.failure_class in policy.fallbacks[inc.decision.fallback_index].on


def _segments(history):
    """The history cut where an attempt resumed from a newer checkpoint than every attempt before it
    (progress): a budget with ``reset_on_progress`` counts within one segment."""
    segments, best = [[]], -1
    for index, attempt in enumerate(history):
        step = -1 if attempt.resumed_from_step is None else attempt.resumed_from_step
        if step > best:
            if index > 0:
                segments.append([])
            best = step
        segments[-1].append(attempt)
    return segments


@SETTINGS
@given(seq=st.lists(failures, min_size=1, max_size=60), policy=policies, seed=st.integers(0, 2**32),
       steps=st.lists(st.none() | st.integers(0, 50), max_size=60))
def test_budgets_hold_between_checkpoint_progress(seq, policy, seed, steps):
    """With checkpoint progress, count budgets restart; between two progress points they still hold."""
    decisions, history = run(seq, policy, seed=seed, resume_steps=steps)
    budgets = policy.effective_budgets
    for segment in _segments(history):
        used = Counter(inc.decision.budget for attempt in segment for inc in attempt.incidents
                       if inc.decision.counts_against_budget)
        for name, count in used.items():
            budget = budgets[name]
            if budget.max_retries is not None and not budget.per_worker:
                limit = budget.max_retries if budget.reset_on_progress else None
                if limit is not None:
                    assert count <= limit, (name, count)
    for name, budget in budgets.items():  # budgets that ignore progress hold over the whole run
        if budget.max_retries is not None and not budget.per_worker and not budget.reset_on_progress:
            assert sum(1 for d in decisions if d.budget == name and d.counts_against_budget) <= budget.max_retries


@SETTINGS
@given(seq=st.lists(st.sampled_from([FailureClass.QUOTA_EXCEEDED, FailureClass.MAINTENANCE_EVENT]), min_size=1,
                    max_size=80),
       step_seconds=st.floats(min_value=1.0, max_value=900.0), seed=st.integers(0, 2**32))
def test_time_limited_budgets_end_once_their_time_is_spent(seq, step_seconds, seed):
    """Quota and maintenance waits are bounded by time: no decision keeps waiting past ``max_seconds``
    after the first decision of its streak (plus at most one backoff that started before the limit). A wait whose
    next look came long after it was over (``continues_wait``: the node was back in between) ends its streak."""
    failure_of = {FailureClass.QUOTA_EXCEEDED: Failure(FailureClass.QUOTA_EXCEEDED, Platform.VERTEX_AI),
                  FailureClass.MAINTENANCE_EVENT: Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU,
                                                          node_state="REPAIRING")}
    decisions, _ = run([failure_of[c] for c in seq], seed=seed, step_seconds=step_seconds)
    budgets = RetryPolicy().effective_budgets
    streak_start: dict[str, float] = {}
    previous, before = None, None
    for d in decisions:
        if d.budget is None or not d.counts_against_budget or d.budget != previous or (
                before.action == DecisionAction.WAIT and not continues_wait(Incident(failure_of[seq[0]], before),
                                                                            d.decided_at)):
            streak_start.clear()
        previous, before = (d.budget if d.counts_against_budget else None), d
        if d.budget is None or not d.counts_against_budget:
            continue
        limit = budgets[d.budget].max_seconds
        start = streak_start.setdefault(d.budget, d.decided_at)
        if limit is not None and not d.action.is_terminal:
            assert d.decided_at - start < limit, (d.budget, d.decided_at - start, limit)


@SETTINGS
@given(failure=failures, policy=policies, now=st.floats(min_value=0, max_value=4e9))
def test_delays_are_within_the_backoff_cap(failure, policy, now):
    decision = decide((Attempt(1),), failure, now, policy=policy)
    caps = [b.backoff.max_seconds for b in DEFAULT_BUDGETS.values() if b.backoff] + [policy.backoff.max_seconds]
    assert 0 <= decision.delay_seconds <= max(caps)
    if decision.action.is_terminal:
        assert decision.delay_seconds == 0


odd_values = (st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63)
              | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30)
              | st.binary(max_size=8) | st.lists(st.integers(), max_size=3)
              | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


@SETTINGS
@given(
    text=st.text(max_size=200),
    code=st.none() | st.integers(min_value=-(2**31), max_value=2**31),
    state=st.none() | st.text(max_size=20) | st.integers(-5, 40),
    entry=st.recursive(st.none() | st.text(max_size=10) | st.integers() | st.floats(),
                       lambda c: st.dictionaries(st.sampled_from(
                           ["protoPayload", "methodName", "metadata", "terminateReason", "status", "code",
                            "message", "severity", "proto_payload", "timestamp", "resourceName"]), c, max_size=4)
                       | st.lists(c, max_size=3), max_leaves=10),
)
def test_classifiers_never_raise_on_odd_input(text, code, state, entry):
    classify_error_message(text, rpc_code=code)
    classify_exit_status(code if code is None else code % 400 - 100)
    classify_vertex_job(state, code, text)
    classify_ai_platform_job(state if isinstance(state, str) else None, text)
    classify_create_error(code, text)
    classify_tpu_node(state, state, [state] if state is not None else [])
    classify_tpu_audit_entry(entry)


@SETTINGS
@given(a=odd_values, b=odd_values, c=odd_values, d=odd_values)
def test_classifiers_never_raise_on_values_of_the_wrong_type(a, b, c, d):
    """Module rule: odd input becomes UNKNOWN or None, never an exception (a classifier runs inside the
    loop that must keep a job alive; it cannot crash on a platform sending something unexpected)."""
    for failure in (classify_error_message(a, rpc_code=b), classify_create_error(a, b),
                    classify_vertex_job(a, b, c, started=d), classify_ai_platform_job(a, b),
                    classify_exit_status(a, signal=b, message=c), classify_tpu_node(a, b, c, d),
                    classify_tpu_audit_entry({"protoPayload": {"methodName": a, "status": b,
                                                               "metadata": {"terminateReason": c}},
                                              "timestamp": d})):
        assert failure is None or isinstance(failure.message, str)


@SETTINGS
@given(failure=failures)
def test_an_unmatched_failure_gives_up_instead_of_raising(failure):
    policy = RetryPolicy(include_default_rules=False)
    decision = decide((Attempt(1),), replace(failure), 0.0, policy=policy)
    assert decision.action == DecisionAction.GIVE_UP and decision.rule == ""
