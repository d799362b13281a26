"""The README's first command runs this.

The full offline demo -- a real model trained through injected crashes, a stockout and an internal
error on the emulated Vertex AI -- arrives with the Vertex AI operator. Until then this is a smoke check
of the parts that exist, and it says so: the failure policy on a seed scenario, checkpoint discovery on
an emulated gs:// bucket, and the provider's registration with Airflow.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

from airflow_provider_resilient.checkpoints import find_latest_checkpoint
from airflow_provider_resilient.policy import (
    Attempt,
    Fallback,
    RetryPolicy,
    classify_create_error,
    classify_vertex_job,
    decide,
    format_history,
    record_incident,
)
from airflow_provider_resilient.testing.storage import StorageEmulator, patched_environ

SCENARIO = [
    ("FAILED", 3, "The replica workerpool0-0 exited with a non-zero status of 139. Termination reason: Error."),
    ("CREATE", 8, "Resources are insufficient in region: us-central1. Try a different region or use a different "
                  "accelerator."),
    ("FAILED", 13, "Internal error occurred for the current attempt."),
    ("FAILED", 3, "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error."),
]


def policy_demo() -> None:
    print("1. Failure policy on a seed 003 scenario (fallback: europe-west4)")
    policy = RetryPolicy(fallbacks=(Fallback(region="europe-west4"),))
    now = 1_800_000_000.0
    history = (Attempt(1, "customJobs/1001", started_at=now),)
    for kind, code, message in SCENARIO:
        now += 600
        failure = (classify_create_error(code, message) if kind == "CREATE"
                   else classify_vertex_job("JOB_STATE_FAILED", code, message))
        assert failure is not None
        decision = decide(history, failure, now, policy=policy, seed="demo")
        history = record_incident(history, failure, decision, now)
        print(f"   {failure.failure_class.value:<22} -> {decision.reason}")
        if decision.action.starts_new_attempt:
            n = history[-1].number + 1
            history = (*history, Attempt(n, f"customJobs/{1000 + n}", fallback_index=decision.fallback_index,
                                         started_at=now + decision.delay_seconds))
    print("   attempt history (no workload runs in this smoke check, so no checkpoint is resumed):")
    for line in format_history(history):
        print("     " + line)


def checkpoint_demo() -> None:
    print("2. Latest complete checkpoint on an emulated gs:// bucket (step_300 is torn: no COMMITTED marker)")
    with StorageEmulator() as gcs, patched_environ(gcs.env()):
        gcs.put_objects("demo-bucket", {
            "run/checkpoints/step_100/model.pkl": b"w100", "run/checkpoints/step_100/COMMITTED": b"",
            "run/checkpoints/step_200/model.pkl": b"w200", "run/checkpoints/step_200/COMMITTED": b"",
            "run/checkpoints/step_300/model.pkl": b"w3",
        })
        found = find_latest_checkpoint("gs://demo-bucket/run/checkpoints", marker="COMMITTED")
        assert found is not None and found.step == 200, found
        print(f"   found step {found.step} at {found.uri} ({found.format.value}); "
              f"listings made: {len(gcs.list_calls)}")


def registration_demo() -> None:
    print("3. Provider registration")
    eps = [ep for ep in entry_points(group="apache_airflow_provider")
           if ep.value.startswith("airflow_provider_resilient")]
    assert eps, "the apache_airflow_provider entry point is missing: reinstall with `make demo`"
    info = eps[0].load()()
    print(f"   {info['package-name']} {info['versions'][0]} is registered with Airflow")


def main() -> int:
    print("Smoke check: the offline training demo is not built yet (it comes with the Vertex AI operator).\n")
    policy_demo()
    checkpoint_demo()
    registration_demo()
    print("\nsmoke check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
