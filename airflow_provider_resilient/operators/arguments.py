"""The arguments every supervised operator takes, checked as the DAG is parsed: each problem named by its field,
with the fix, in one ``AirflowFailException`` line (:class:`~..specs.common.SpecError`) -- never a raw
``TypeError`` or ``ValueError`` out of an operator's constructor, and never a create call.

Also the helpers on arguments the operators share: whether a value still holds a Jinja template (checked after
rendering instead), and masking the secret values of an environment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..policy import FailureClass, Fallback, RetryPolicy
from ..policy.checks import members
from ..specs.common import SpecError, flag_problems, seconds_problems
from ..supervisor.launch import TORN_CHECKPOINT_CHOICES


def has_template(value: Any) -> bool:
    """Whether ``value`` (a string, or lists / tuples / dicts of them, keys included) holds a Jinja expression
    or statement: such an argument is checked after Airflow renders it, not when the DAG is parsed."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(has_template(k) or has_template(v) for k, v in value.items())
    if isinstance(value, list | tuple | set):
        return any(has_template(v) for v in value)
    return False


def mask_sensitive_env(entries: Sequence[tuple[str, str]]) -> list[str]:
    """Register with Airflow's secrets masker (``mask_secret``) the value of each ``(name, value)`` whose name
    Airflow deems sensitive -- its own rule for the keys of a dict it redacts (``[core] sensitive_var_conn_names``
    extends it) -- so that the task log and the rendered fields shown in the UI hold ``***`` instead. Returns
    the names masked."""
    from airflow.sdk._shared.secrets_masker import should_hide_value_for_key
    from airflow.sdk.log import mask_secret

    masked = []
    for name, value in entries:
        if value and should_hide_value_for_key(name):
            mask_secret(value, name)
            masked.append(name)
    return masked


def policy_with_fallbacks(policy: Any, fallbacks: Sequence[Fallback | Mapping[str, Any]]) -> RetryPolicy:
    """``policy`` (default: the default rules) with ``fallbacks`` appended: Fallback objects, or dicts of its fields
    that :func:`~..specs.fallbacks.fallbacks_of` found well formed (``on``: failure classes or their names).

    Raises:
        SpecError: naming ``resilience_policy`` when it is not a :class:`~..policy.RetryPolicy`.
    """
    if policy is not None and not isinstance(policy, RetryPolicy):
        raise SpecError("resilience_policy", (
            f"{type(policy).__name__} {policy!r:.60} is not a RetryPolicy: build one with "
            "airflow_provider_resilient.policy.RetryPolicy(...) or RetryPolicy.from_counts(...)"))
    policy = policy or RetryPolicy()
    extra = [f if isinstance(f, Fallback) else Fallback(**{k: (member_set(v) if k == "on" else v)
                                                           for k, v in f.items()}) for f in fallbacks]
    return replace(policy, fallbacks=policy.fallbacks + tuple(extra)) if extra else policy


def member_set(values: Any) -> frozenset[FailureClass]:
    """The failure classes ``values`` name (members, values or names in any case)."""
    return members(FailureClass, "fallbacks.on", values)


def common_problems(operator: Any) -> list[SpecError]:
    """Problems of the arguments every supervised operator takes (:class:`~.base.SupervisedOperator`), those
    still holding a template left for after rendering."""
    from ..goodput.events import LOG_ID_RE

    problems = [*seconds_problems("poll_interval", operator.poll_interval),
                *seconds_problems("min_defer_seconds", operator.min_defer_seconds, strict=False),
                *seconds_problems("checkpoint_interval_cap", operator.checkpoint_interval_cap, optional=True),
                *flag_problems("deferrable", operator.deferrable),
                *flag_problems("rerun_after_success", operator.rerun_after_success)]
    if operator.torn_checkpoints not in TORN_CHECKPOINT_CHOICES:
        problems.append(SpecError("torn_checkpoints", f"{operator.torn_checkpoints!r} is not one of "
                                                      f"{', '.join(map(repr, TORN_CHECKPOINT_CHOICES))}"))
    for name in ("gcp_conn_id", "checkpoint_marker", "network", "service_account"):
        value = getattr(operator, name, None)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            problems.append(SpecError(name, f"{value!r} is not a non-empty string (or None)"))
    chain = operator.impersonation_chain
    if chain is not None and not (isinstance(chain, str) and chain.strip()) and not (
            isinstance(chain, Sequence) and not isinstance(chain, str) and chain
            and all(isinstance(c, str) and c.strip() for c in chain)):
        problems.append(SpecError("impersonation_chain", f"{chain!r} is not a service account email or a list of "
                                                         "them"))
    job, logger = operator.goodput_job_name, operator.goodput_logger_name
    if logger is not None and job is None:
        problems.append(SpecError("goodput_logger_name", f"{logger!r} needs goodput_job_name (the job_name the "
                                                         "workload gives GoodputRecorder)"))
    if job is not None and (not isinstance(job, str) or not job.strip()):
        problems.append(SpecError("goodput_job_name", f"{job!r} is not a non-empty string"))
    if logger is not None and (not isinstance(logger, str)
                               or not (has_template(logger) or LOG_ID_RE.fullmatch(logger))):
        problems.append(SpecError("goodput_logger_name", f"{logger!r} is not a Cloud Logging log ID: use letters, "
                                                         "digits and '/_-.', at most 512 characters"))
    topic = getattr(operator, "event_topic", None)
    if topic is not None:
        from ..specs.common import topic_problem

        why = topic_problem(topic)
        if why and not (isinstance(topic, str) and has_template(topic)):
            problems.append(SpecError("event_topic", why))
    return problems


__all__ = [
    "TORN_CHECKPOINT_CHOICES",
    "common_problems",
    "flag_problems",
    "has_template",
    "mask_sensitive_env",
    "member_set",
    "policy_with_fallbacks",
    "seconds_problems",
]
