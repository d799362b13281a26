"""Pure failure policy: classify a failure, then decide what to do about it.

No Airflow and no Google imports here (checked by a test): the operators, triggers and the supervisor
feed platform observations in through :mod:`.classify` (which reads Google's error texts with the patterns
of :mod:`.messages`, and the platforms' codes and enum values with :mod:`.codes`) and carry out the
:class:`Decision` that :func:`decide` returns. The default rules and the public pages they come from are in
:mod:`.rules`; the documentation's "Failure policy" page lists them as a table.
"""

from .classify import (
    classify_ai_platform_job,
    classify_create_error,
    classify_error_message,
    classify_exit_status,
    classify_modelarts_error,
    classify_modelarts_job,
    classify_queue_wait,
    classify_tpu_audit_entry,
    classify_tpu_node,
    classify_vertex_job,
    classify_worker_report,
)
from .decide import DEFAULT_POLICY, decide, record_incident
from .failures import PERMANENT_CLASSES, Failure, FailureClass, Platform
from .history import format_history, history_from_json, history_table, history_to_json
from .parts import Backoff, Budget, DecisionAction, Fallback, Rule, RuleAction
from .records import Attempt, Decision, Incident
from .rules import (
    DEFAULT_BUDGETS,
    DEFAULT_FAILOVER_BACKOFF,
    DEFAULT_QUEUE_TIMEOUT_SECONDS,
    DEFAULT_RULES,
    RetryPolicy,
    is_permanent,
)

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_FAILOVER_BACKOFF",
    "DEFAULT_POLICY",
    "DEFAULT_QUEUE_TIMEOUT_SECONDS",
    "DEFAULT_RULES",
    "PERMANENT_CLASSES",
    "Attempt",
    "Backoff",
    "Budget",
    "Decision",
    "DecisionAction",
    "Failure",
    "FailureClass",
    "Fallback",
    "Incident",
    "Platform",
    "RetryPolicy",
    "Rule",
    "RuleAction",
    "classify_ai_platform_job",
    "classify_create_error",
    "classify_error_message",
    "classify_exit_status",
    "classify_modelarts_error",
    "classify_modelarts_job",
    "classify_queue_wait",
    "classify_tpu_audit_entry",
    "classify_tpu_node",
    "classify_vertex_job",
    "classify_worker_report",
    "decide",
    "format_history",
    "history_from_json",
    "history_table",
    "history_to_json",
    "is_permanent",
    "record_incident",
]
