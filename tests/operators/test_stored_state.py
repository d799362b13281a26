"""The stored run carries a schema version: a run stored by the release before versions existed is read, upgraded
and resumed; one stored by a newer release is refused with the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_provider_resilient.compat import AirflowException, AirflowFailException
from airflow_provider_resilient.operators.run_store import steps_from_json, steps_to_json
from airflow_provider_resilient.operators.vertex_ai import STATE_KEY, ResilientCustomJobOperator
from airflow_provider_resilient.policy import Backoff, RetryPolicy
from airflow_provider_resilient.supervisor import (
    STATE_SCHEMA_VERSION,
    Phase,
    StateSchemaTooNew,
    state_from_json,
    state_to_json,
)

from .test_vertex_operator_unit import Store, context

JOB_1 = "projects/test-project/locations/us-central1/customJobs/1000000000000000000"

#: What the release before ``schema_version`` stored (version 1, no version field), verbatim: the run of
#: ResilientCustomJobOperator "train" whose attempt 1 crashed with exit 139 and which sleeps before attempt 2
#: (written by that release's code against the emulator, its worker killed during the backoff). The step reports
#: are that release's bare ``[[time, step], ...]`` list.
PREVIOUS_SCHEMA: dict[str, Any] = {
    "resilient_custom_job": {
        "history": [
            {
                "ended_at": 1795719863.538209,
                "fallback_index": -1,
                "incidents": [
                    {
                        "decision": {
                            "action": "resubmit",
                            "budget": "transient_crash",
                            "budget_limit": 3,
                            "budget_used": 1,
                            "decided_at": 1795719863.538209,
                            "delay_seconds": 25.625361564634638,
                            "failed_over": False,
                            "fallback_index": -1,
                            "reason": ("transient_crash: resubmit in 26s (rule transient-crash, budget "
                                       "transient_crash 1/3)"),
                            "rule": "transient-crash",
                        },
                        "failure": {
                            "exit_code": 139,
                            "failure_class": "transient_crash",
                            "message": ("The replica workerpool0-0 exited with a non-zero status of 139. "
                                        "Termination reason: Error."),
                            "platform": "vertex_ai",
                            "rpc_code": 3,
                            "signal": 11,
                            "symptoms": [],
                            "terminate_reason": "Error",
                            "timestamp": 1795719863.537507,
                            "worker_id": "workerpool0-0",
                        },
                    },
                ],
                "number": 1,
                "resource_name": JOB_1,
                "started_at": 1795719863.0526989,
            },
        ],
        "job_name": JOB_1,
        "next_submit": {"attempt": 2, "failure_class": "transient_crash", "fallback_index": -1},
        "phase": "sleeping",
        "segment_start": 0,
        "wake_at": 1795719889.1635706,
        "watch": {"resource": JOB_1},
    },
    "resilient_step_reports": [[1795719863.3, 10], [1795719863.4, 20]],
}


def operator() -> ResilientCustomJobOperator:
    return ResilientCustomJobOperator(
        task_id="train", project_id="test-project", region="us-central1", display_name="unit",
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "python:3.11", "command": ["python", "-c", "print(1)"]}}],
        base_output_dir="gs://unit-bucket/run", deferrable=False, poll_interval=0.05, min_defer_seconds=0.0,
        resilience_policy=RetryPolicy(backoff=Backoff(initial_seconds=30, max_seconds=30)))


@pytest.mark.resilient_emulator(time_scale=0.002)
def test_a_run_stored_by_the_previous_schema_is_upgraded_and_resumed(resilient_emulator):
    store = Store()
    store.data.update(copy.deepcopy(PREVIOUS_SCHEMA))
    op = operator()
    slept: list[float] = []
    op._sleep = slept.append  # what is left of the stored backoff passes at once
    result = op.execute(context(store))

    # It went on where the stored run was: attempt 1's incident kept, attempt 2 submitted once and finished.
    assert [a["number"] for a in result["attempts"]] == [1, 2]
    assert result["attempts"][0] == PREVIOUS_SCHEMA[STATE_KEY]["history"][0]
    assert result["state"] == "JOB_STATE_SUCCEEDED"
    (created,) = resilient_emulator.calls.list("CreateCustomJob")
    assert created.code == "OK"
    # What is stored now is the current schema, with what the old record held.
    stored = store.data[STATE_KEY]
    assert stored["schema_version"] == STATE_SCHEMA_VERSION == 2 and stored["phase"] == "succeeded"
    steps = store.data[ResilientCustomJobOperator.STEPS_KEY]
    assert steps["schema_version"] == STATE_SCHEMA_VERSION
    assert steps["reports"][:2] == PREVIOUS_SCHEMA["resilient_step_reports"]


def test_the_previous_schema_reads_back_as_the_same_run():
    old = PREVIOUS_SCHEMA[STATE_KEY]
    state = state_from_json(old)
    assert state.phase == Phase.SLEEPING and state.next_submit is not None and state.next_submit.attempt == 2
    assert state.job_name == JOB_1 and state.watch.resource == JOB_1
    assert state_to_json(state) == {**old, "schema_version": 2}  # the upgrade adds the version, changes nothing
    assert [(r.time, r.step) for r in steps_from_json(PREVIOUS_SCHEMA["resilient_step_reports"])] == [
        (1795719863.3, 10), (1795719863.4, 20)]
    assert steps_from_json(steps_to_json(steps_from_json(PREVIOUS_SCHEMA["resilient_step_reports"]))) == \
        steps_from_json(PREVIOUS_SCHEMA["resilient_step_reports"])


def test_a_run_stored_by_a_newer_release_is_refused_naming_its_version_and_the_fix(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", '{"conn_type": "google_cloud_platform"}')  # no API call
    newer = {**PREVIOUS_SCHEMA[STATE_KEY], "schema_version": STATE_SCHEMA_VERSION + 1}
    with pytest.raises(StateSchemaTooNew, match=f"schema_version {STATE_SCHEMA_VERSION + 1}.*upgrade the provider"):
        state_from_json(newer)
    with pytest.raises(StateSchemaTooNew):
        state_from_json({"schema_version": 99, "something": "else"})  # refused as newer, whatever its fields
    with pytest.raises(StateSchemaTooNew):
        steps_from_json({"schema_version": 99, "reports": []})
    with pytest.raises(ValueError, match="is not a version"):
        state_from_json({**newer, "schema_version": "2"})

    store = Store()
    store.data[STATE_KEY] = newer
    # Retryable (a retry may run on an upgraded worker), and the stored run is left as it was.
    with pytest.raises(AirflowException, match="upgrade the provider") as raised:
        operator().execute(context(store))
    assert not isinstance(raised.value, AirflowFailException)
    assert store.data[STATE_KEY] == newer
