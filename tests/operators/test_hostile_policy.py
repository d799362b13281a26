"""Hostile input, second round (issue 31): the arguments every operator shares -- durations, flags, connection names,
the goodput names -- and the policy objects (``resilience_policy``, ``fallbacks`` as dicts or objects, failure class
names) given with a typo or as the wrong type are refused as the DAG is parsed by an AirflowFailException naming each
bad field, alone or together with the platform's own bad fields; never a raw TypeError / ValueError, never a create
call.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from airflow_provider_resilient.compat import AirflowFailException
from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator
from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator
from airflow_provider_resilient.policy import Fallback, RetryPolicy

from .test_hostile_input import TPU_VALID, VALID, drawn_mutations, refused_naming_each_field

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)

#: (path into the arguments, the field the error must name, bad values): what every supervised operator takes.
SHARED: list[tuple[tuple[Any, ...], str, list[Any]]] = [
    (("poll_interval",), "poll_interval", ["30", None, 0, -1, float("nan"), float("inf"), True, [30]]),
    (("min_defer_seconds",), "min_defer_seconds", ["10", -1, None, float("nan")]),
    (("checkpoint_interval_cap",), "checkpoint_interval_cap", ["1h", 0, -5, [60]]),
    (("torn_checkpoints",), "torn_checkpoints", ["ignore", 5, None, "FAIL"]),
    (("deferrable",), "deferrable", ["no", 1, None]),
    (("rerun_after_success",), "rerun_after_success", ["yes", 0]),
    (("gcp_conn_id",), "gcp_conn_id", [5, "", ["google_cloud_default"]]),
    (("impersonation_chain",), "impersonation_chain", [5, [], [5], {"sa": 1}, ""]),
    (("checkpoint_marker",), "checkpoint_marker", [5, "", ["COMMITTED"]]),
    (("goodput_job_name",), "goodput_job_name", [5, " ", ["run"]]),
    (("resilience_policy",), "resilience_policy", ["default", {"fallbacks": []}, 5, [RetryPolicy()]]),
    (("fallbacks",), "fallbacks", ["europe-west4", {"region": "europe-west4"}, 5, Fallback(region="europe-west4")]),
    (("fallbacks", 0), "fallbacks[0]", [5, "europe-west4", ["europe-west4"], {}, {"regoin": "europe-west4"},
                                        {"region": "europe-west4", "on": ["stockuot"]},
                                        {"region": "europe-west4", "on": "capacity_stockout"},
                                        {"strategy": 5}, {"accelerator_count": "2"}, {"strategy": "CHEAP"}]),
]


def with_shared(table: list[tuple[tuple[Any, ...], str, list[Any]]], valid: dict[str, Any]
                ) -> tuple[dict[str, Any], list[tuple[tuple[Any, ...], str, list[Any]]]]:
    """``valid`` with one valid fallback (so ``fallbacks[0]`` can be spoilt) and ``table`` with :data:`SHARED`."""
    fallback = {"region": "europe-west4"} if "region" in valid else {"zone": "us-central2-b"}
    return {**valid, "fallbacks": [fallback]}, [*table, *SHARED]


VERTEX_VALID, VERTEX_TABLE = with_shared([
    (("hang_timeout",), "hang_timeout", ["1h", -1, 0, [600]]),  # (0.01: only wrong beside poll_interval)
    (("cancel_on_kill",), "cancel_on_kill", ["no", 0]),
    (("read_step_logs",), "read_step_logs", ["yes", 1]),
], VALID)
TPU_VALID_, TPU_TABLE = with_shared([
    (("keep_node",), "keep_node", ["no", 1]),
    (("expect_steps",), "expect_steps", ["yes", 0]),
    (("maintenance_policy",), "maintenance_policy", ["sometimes", 5]),
    (("maintenance_lead_seconds",), "maintenance_lead_seconds", ["5", -1]),
], TPU_VALID)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn_mutations(VERTEX_TABLE))
def test_shared_arguments_and_policy_objects_are_refused_naming_each_field(resilient_emulator, drawn):
    refused_naming_each_field(ResilientCustomJobOperator, VERTEX_VALID, VERTEX_TABLE, drawn, resilient_emulator)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn_mutations(TPU_TABLE))
def test_the_tpu_operator_refuses_them_the_same_way(resilient_emulator, drawn):
    refused_naming_each_field(ResilientTPUWorkloadOperator, TPU_VALID_, TPU_TABLE, drawn, resilient_emulator)


@pytest.mark.parametrize(("fallback", "message"), [
    ({"regoin": "europe-west4"}, r"fallbacks\[0\]\.regoin: unknown key -- did you mean 'region'\?"),
    ({"region": "europe-west4", "on": ["stockuot"]},
     r"fallbacks\[0\]\.on\[0\]: 'stockuot' is not a failure class -- did you mean 'capacity_stockout'\?"),
])
def test_a_misspelt_key_or_failure_class_is_named_with_the_closest_one(fallback, message):
    with pytest.raises(AirflowFailException, match=message):
        ResilientCustomJobOperator(**{**VALID, "fallbacks": [fallback]})


def test_a_failure_class_may_be_given_by_its_name_in_any_case():
    op = ResilientCustomJobOperator(**{**VALID, "fallbacks": [{"region": "europe-west4",
                                                                 "on": ["CAPACITY_STOCKOUT", "out_of_memory"]}]})
    assert {c.value for c in op.resilience_policy.fallbacks[-1].on} == {"capacity_stockout", "out_of_memory"}
