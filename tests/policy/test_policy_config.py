"""RetryPolicy configuration: user rules, overrides, and clear errors for bad settings."""

from __future__ import annotations

import pytest

from airflow_provider_resilient.policy import (
    Attempt,
    Backoff,
    Budget,
    DecisionAction,
    Failure,
    FailureClass,
    Fallback,
    Platform,
    RetryPolicy,
    Rule,
    RuleAction,
    classify_vertex_job,
    decide,
)

from .sim import repeat, run

CRASH_1 = "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error."


def test_a_user_rule_goes_before_the_defaults():
    """A workload that exits 1 on a flaky data loader: retry exit 1 twice, only when the message says so."""
    flaky = Rule("flaky-loader", RuleAction.RESUBMIT, frozenset({FailureClass.PERMANENT_USER_ERROR}),
                 exit_codes=frozenset({1}), message_pattern=r"workerpool0-0", budget="flaky")
    policy = RetryPolicy(rules=(flaky,), budgets={"flaky": Budget(max_retries=2)})
    failure = classify_vertex_job("JOB_STATE_FAILED", 3, CRASH_1)
    decisions, _ = run(repeat(failure), policy)
    assert [d.action for d in decisions] == [DecisionAction.RESUBMIT] * 2 + [DecisionAction.GIVE_UP]
    assert decisions[0].rule == "flaky-loader"


def test_a_user_rule_named_like_a_default_replaces_it():
    policy = RetryPolicy(rules=(Rule("out-of-memory", RuleAction.RESUBMIT, frozenset({FailureClass.OUT_OF_MEMORY}),
                                     budget="unknown"),))
    assert [r.name for r in policy.effective_rules].count("out-of-memory") == 1
    oom = Failure(FailureClass.OUT_OF_MEMORY, Platform.VERTEX_AI)
    assert decide((Attempt(1),), oom, 0.0, policy=policy).action == DecisionAction.RESUBMIT


def test_from_counts_changes_only_the_named_budgets():
    policy = RetryPolicy.from_counts(transient_retries=5)
    assert policy.budget("transient_crash").max_retries == 5
    assert policy.budget("internal_error").max_retries == 2


def test_queue_timeout_bounds_the_quota_wait():
    assert RetryPolicy(queue_timeout_seconds=600).budget("quota_wait").max_seconds == 600


def test_rule_lookup_names_the_valid_rules():
    with pytest.raises(KeyError, match="transient-crash"):
        RetryPolicy().rule("no-such-rule")


@pytest.mark.parametrize(("make", "message"), [
    (lambda: RetryPolicy(rules=(Rule("x", RuleAction.RESUBMIT, budget="nope"),)), "budget 'nope'"),
    (lambda: RetryPolicy(rules=(Rule("x", RuleAction.FAIL), Rule("x", RuleAction.FAIL))), "unique"),
    (lambda: RetryPolicy.from_counts(preflight_retries=4), "job-retry-num"),
    (lambda: RetryPolicy.from_counts(preflight_retries=-1), "from_counts: preflight_retries must be >= 0"),
    (lambda: RetryPolicy.from_counts(stockout_retries="3"), r"stockout_retries: '3' is not a whole number"),
    (lambda: RetryPolicy(queue_timeout_seconds=0), "queue_timeout_seconds"),
    (lambda: Rule("x", RuleAction.RESUBMIT), "needs a budget"),
    (lambda: Rule("x", RuleAction.FAIL, message_pattern="("), "message_pattern"),
    (lambda: Rule("", RuleAction.FAIL), "Rule.name"),
    (lambda: Fallback(), "at least one"),
    (lambda: Fallback(strategy="CHEAP"), "Fallback.strategy"),
    (lambda: Backoff(multiplier=0.5), "multiplier"),
    (lambda: Backoff(jitter=2), "jitter"),
    (lambda: Backoff(initial_seconds=-1), "initial_seconds"),
    (lambda: Budget(), "max_retries or max_seconds"),
    (lambda: Budget(max_retries=-1), "max_retries"),
    # the wrong type, or a misspelt name, anywhere in a policy object: named, never a raw TypeError
    (lambda: Budget(max_retries="3"), r"Budget\.max_retries: '3' is not a whole number"),
    (lambda: Budget(max_retries=True), r"Budget\.max_retries: True is not a whole number"),
    (lambda: Budget(max_seconds=float("nan")), r"Budget\.max_seconds: nan is not a number of seconds"),
    (lambda: Budget(max_retries=1, per_worker="yes"), r"Budget\.per_worker: 'yes' is not a bool"),
    (lambda: Budget(max_retries=1, backoff=30), r"Budget\.backoff: 30 is not a Backoff"),
    (lambda: Backoff(initial_seconds="30"), r"Backoff\.initial_seconds: '30' is not a number of seconds"),
    (lambda: Fallback(strategy=5), r"Fallback\.strategy: 5 is not a non-empty string"),
    (lambda: Fallback(region="x", on=["stockuot"]), r"Fallback\.on\[0\]: 'stockuot' is not a FailureClass"),
    (lambda: Fallback(region="x", on="capacity_stockout"), r"Fallback\.on: 'capacity_stockout' is not a collection"),
    (lambda: Fallback(accelerator_count="2"), r"Fallback\.accelerator_count: '2' is not a whole number"),
    (lambda: Fallback(accelerator_count=0), r"Fallback\.accelerator_count must be >= 1"),
    (lambda: Rule("x", "retyr", budget="b"), r"Rule 'x': action: 'retyr' is not a RuleAction"),
    (lambda: Rule("x", RuleAction.FAIL, classes={"oom"}), r"Rule 'x': classes\[0\]: 'oom' is not a FailureClass"),
    (lambda: Rule("x", RuleAction.FAIL, classes="capacity_stockout"), r"Rule 'x': classes: .* not a collection"),
    (lambda: Rule("x", RuleAction.FAIL, exit_codes={"137"}), r"Rule 'x': exit_codes: '137' is not a whole number"),
    (lambda: Rule("x", RuleAction.FAIL, platforms={"gcp"}), r"Rule 'x': platforms\[0\]: 'gcp' is not a Platform"),
    (lambda: Rule("x", RuleAction.FAIL, node_states="PREEMPTED"), r"Rule 'x': node_states: .* not a collection"),
    (lambda: Rule("x", RuleAction.FAIL, fail_over="yes"), r"Rule 'x': fail_over: 'yes' is not a bool"),
    (lambda: Rule(5, RuleAction.FAIL), r"Rule\.name: 5 is not a non-empty string"),
    (lambda: RetryPolicy(budgets={"stockout": 3}), r"RetryPolicy\.budgets\['stockout'\]: 3 is not a Budget"),
    (lambda: RetryPolicy(budgets=[("stockout", 3)]), r"RetryPolicy\.budgets: .* is not a dict"),
    (lambda: RetryPolicy(rules=[{"name": "x"}]), r"RetryPolicy\.rules\[0\]: .* is not a Rule"),
    (lambda: RetryPolicy(rules=Rule("x", RuleAction.FAIL)), r"RetryPolicy\.rules: .* is not a list of Rule"),
    (lambda: RetryPolicy(fallbacks=[{"region": "x"}]), r"RetryPolicy\.fallbacks\[0\]: .* is not a Fallback"),
    (lambda: RetryPolicy(queue_timeout_seconds="1800"), r"queue_timeout_seconds: '1800' is not a number of seconds"),
    (lambda: RetryPolicy(backoff=None), r"RetryPolicy\.backoff: None is not a Backoff"),
    (lambda: RetryPolicy(include_default_rules="no"), r"RetryPolicy\.include_default_rules: 'no' is not a bool"),
])
def test_bad_settings_fail_at_construction_naming_the_field(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_backoff_grows_exponentially_to_the_cap_with_bounded_jitter():
    backoff = Backoff(initial_seconds=10, multiplier=2, max_seconds=100, jitter=0.5)
    assert [backoff.delay(n, 0.0) for n in range(6)] == [10, 20, 40, 80, 100, 100]
    assert backoff.delay(0, 0.999) == pytest.approx(5.005)


def test_a_misspelt_budget_name_is_refused_with_the_likely_one():
    """Issue 13: a budget no rule spends was silently ignored -- the run kept the default count."""
    with pytest.raises(ValueError, match=r"RetryPolicy.budgets\['stockot'\]: .* did you mean 'stockout'\?"):
        RetryPolicy(budgets={"stockot": Budget(max_retries=9)})
