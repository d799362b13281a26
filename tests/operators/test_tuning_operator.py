"""``ResilientHyperparameterTuningJobOperator`` end to end on the emulator: the demo model's learning rate tuned
through trial crashes, internal errors and permanent failures -- completed trials never run again, an interrupted
trial resumes from its own checkpoint, and the result is the best trial across every attempt."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_resilient.compat import AirflowFailException
from airflow_provider_resilient.operators.vertex_ai_tuning import ResilientHyperparameterTuningJobOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy

from ..platform_time import PlatformTime, manual
from .test_vertex_operator_unit import context

#: The platform's time is stepped with the operator's (tests/platform_time.py): a trial's queue, provisioning
#: and error delay take no real time. A trial's run fails at its first fault: the platform's own retries of a
#: crash or an internal error are the emulator's rules (tests/emulator/test_platform_rules.py), and each would
#: cost a workload start here.
pytestmark = manual(platform={"transient_job_retries": 0, "internal_retries": 0})
WORKLOAD = Path(__file__).parents[2] / "dags" / "workloads" / "train_digits.py"
RATES = [0.0003, 0.001, 0.003, 0.01]
#: A trial's checkpoints are under its parameters, not AIP_CHECKPOINT_DIR: faults see its steps in its log.
BY_LOG = {"step_source": "log", "log_pattern": r"saved checkpoint .*step_(\d+)"}
FAST = RetryPolicy(backoff=Backoff(initial_seconds=0.05, max_seconds=0.1),
                   failover_backoff=Backoff(initial_seconds=0.05, max_seconds=0.1))


def tuning(**overrides: Any) -> ResilientHyperparameterTuningJobOperator:
    arguments: dict[str, Any] = dict(
        task_id="tune", project_id="test-project", region="us-central1", display_name="tune-digits",
        study_spec={"metrics": [{"metric_id": "accuracy", "goal": "MAXIMIZE"}],
                    "parameters": [{"parameter_id": "learning_rate", "discrete_value_spec": {"values": RATES},
                                    "scale_type": "UNIT_LOG_SCALE"}],
                    "algorithm": "GRID_SEARCH"},
        max_trial_count=4,
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "python:3.11", "command": [
                                sys.executable, str(WORKLOAD), "--epochs", "6", "--checkpoint-every", "2",
                                "--epoch-seconds", "0.02"]}}],
        base_output_dir="gs://tune-bucket/run", resilience_policy=FAST, poll_interval=5.0, min_defer_seconds=0.0,
        deferrable=False)
    arguments.update(overrides)
    return ResilientHyperparameterTuningJobOperator(**arguments)


def trial_logs(emulator: Any) -> dict[str, str]:
    return {str(p.relative_to(emulator.work_dir)): p.read_text()
            for p in sorted(emulator.work_dir.rglob("trial-*/*.log"))}


def test_a_crashed_trial_is_run_again_from_its_checkpoint_and_finished_trials_never(resilient_emulator):
    # A study of 3 trials; trial 2 (learning rate 0.001) crashes with SIGSEGV past step 4 in attempt 1: the job
    # SUCCEEDS short of one trial, with a trial finished before and one after the crashed one.
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "at_step": 4, **BY_LOG,
                                  "match": {"display_name": "tune-digits-trial-2"}})
    result = PlatformTime(resilient_emulator).wire(tuning(max_trial_count=3)).execute(context())
    assert [a["incidents"][0]["failure"]["failure_class"] for a in result["attempts"] if a["incidents"]] == [
        "transient_crash"]
    assert result["trials_rerun"] == 0 and result["trials_succeeded"] == 3
    by_attempt = [(t["attempt"], t["parameters"]["learning_rate"], t["state"]) for t in result["trials"]]
    assert by_attempt == [(1, 0.0003, "SUCCEEDED"), (1, 0.001, "INFEASIBLE"), (1, 0.003, "SUCCEEDED"),
                          (2, 0.001, "SUCCEEDED")]
    best = result["best_trial"]
    scored = {t["parameters"]["learning_rate"]: t["metric"] for t in result["trials"] if t["metric"] is not None}
    assert best["metric"] == max(scored.values()) and best["parameters"]["learning_rate"] == max(scored, key=scored.get)
    assert best["checkpoint"]["step"] == 6 and best["checkpoint"]["uri"].endswith(f"trials/{best['key']}/step_6")
    logs = trial_logs(resilient_emulator)
    rerun = [text for name, text in logs.items() if "trial-1" in name and "learning_rate=0.001" in text]
    starts = [int(m) for text in rerun for m in re.findall(r"resuming from step (\d+)", text)]
    assert starts and max(starts) >= 4  # attempt 2's trial resumed from attempt 1's checkpoint of that trial


def test_an_internal_error_fails_the_job_and_the_next_attempt_runs_only_the_owed_trials(resilient_emulator):
    # Every run of attempt 1's trial 2.
    resilient_emulator.add_fault({"kind": "internal_error", "at_step": 4, "times": None, **BY_LOG,
                                  "match": {"display_name": "tune-digits-trial-2",
                                            "labels": {"resilient-attempt": "1"}}})
    result = PlatformTime(resilient_emulator).wire(tuning(max_trial_count=3, max_failed_trial_count=1)).execute(
        context())
    incidents = [i for a in result["attempts"] for i in a["incidents"]]
    assert [i["failure"]["failure_class"] for i in incidents] == ["internal_error"]
    assert "trial 2 (learning_rate=0.001)" in incidents[0]["failure"]["message"]
    second = [t for t in result["trials"] if t["attempt"] == 2]
    assert sorted(t["parameters"]["learning_rate"] for t in second) == [0.001, 0.003]  # trial 3 never started
    assert result["trials_rerun"] == 0 and result["trials_succeeded"] == 3


def test_permanent_trial_failures_count_toward_max_failed_trial_count_and_fail_the_run(resilient_emulator):
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 1, "times": None,
                                  "match": {"display_name": "tune-digits-trial-[12]"}})
    with pytest.raises(AirflowFailException, match=r"2 trial\(s\) failed permanently, reaching "
                                                   r"max_failed_trial_count 2"):
        PlatformTime(resilient_emulator).wire(tuning(max_failed_trial_count=2)).execute(context())


@pytest.mark.parametrize(("overrides", "field"), [
    ({"study_spec": {"metrics": [], "parameters": []}}, "study_spec.metrics"),
    ({"max_trial_count": 5}, "max_trial_count"),  # more than the grid's 4 points
    ({"study_spec": {"metrics": [{"metric_id": "a", "goal": "MAXIMIZE"}], "algorithm": "GRID_SEARCH",
                     "parameters": [{"parameter_id": "lr", "double_value_spec": {"min_value": 0.1, "max_value": 1}}]}},
     "study_spec.parameters[0].double_value_spec"),
    ({"parallel_trial_count": 0}, "parallel_trial_count"),
    ({"goodput_job_name": "study"}, "goodput_job_name"),  # each trial is its own goodput job
    ({"worker_hang_timeout": 60.0}, "worker_hang_timeout: not taken by a study"),
])
def test_bad_study_arguments_are_refused_when_the_dag_is_parsed(overrides, field):
    with pytest.raises(AirflowFailException, match=re.escape(field)):
        tuning(**overrides)


def test_a_deferred_study_survives_a_crash_and_a_kill_cancels_the_tuning_job(resilient_emulator):
    """Deferred: the trigger (re-created from its serialization, as the triggerer does) watches the tuning job,
    and a fresh operator judges its trials; a user's kill of the deferred task cancels the tuning job."""
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    from .test_tpu_operator import Killed, run_deferred

    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "at_step": 4, **BY_LOG,
                                  "match": {"display_name": "tune-digits-trial-1"}})
    platform = PlatformTime(resilient_emulator)
    events: list[dict] = []
    with platform.passing():  # the trigger looks every 0.05 s of real time while the platform's time passes
        result = run_deferred(lambda: platform.wire(tuning(deferrable=True, max_trial_count=2, poll_interval=0.05)),
                              context(), events=events)
    assert {e["status"] for e in events if isinstance(e, dict)} == {"terminal"}  # (and the backoffs' DateTimes)
    assert [(t["attempt"], t["parameters"]["learning_rate"], t["state"]) for t in result["trials"]] == [
        (1, 0.0003, "INFEASIBLE"), (1, 0.001, "SUCCEEDED"), (2, 0.0003, "SUCCEEDED")]
    assert result["trials_rerun"] == 0 and result["best_trial"]["metric"] > 0.9

    ctx = context()
    ctx["run_id"] = "manual__2026-01-02T00:00:00+00:00"
    with pytest.raises(Killed):
        run_deferred(lambda: tuning(deferrable=True), ctx, kill_at=0)
    client = vertex_job_client("us-central1")
    jobs = list(client.list_hyperparameter_tuning_jobs(parent="projects/test-project/locations/us-central1"))
    killed = [j for j in jobs if j.state.name not in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED")]
    assert len(killed) == 1 and killed[0].state.name in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")


def test_a_killed_worker_reattaches_and_an_emptied_store_rebuilds_the_study_from_the_platform(resilient_emulator):
    """The task's process dies while attempt 1 runs: the retried task reattaches to the same tuning job (one
    create); the task state store emptied after a crashed trial: the run is rebuilt from the jobs by their labels,
    and the new attempt still asks only for the owed trial."""
    from airflow_provider_resilient.operators.vertex_ai_tuning import STATE_KEY

    from .test_vertex_operator_unit import Killed, dies_at_poll

    ctx = context()
    platform = PlatformTime(resilient_emulator)
    first = tuning(max_trial_count=2)
    first._sleep = dies_at_poll(3)
    with pytest.raises(Killed):
        first.execute(ctx)
    assert ctx["task_state_store"].data[STATE_KEY]["phase"] == "running"
    result = platform.wire(tuning(max_trial_count=2)).execute(ctx)
    assert len(resilient_emulator.calls.list("CreateHyperparameterTuningJob")) == 1
    assert result["trials_succeeded"] == 2 and len(result["attempts"]) == 1

    # A second run: attempt 1's trial 2 crashes for good; the store is emptied before the task is cleared.
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "at_step": 4, **BY_LOG,
                                  "match": {"display_name": "tune-digits-trial-2",
                                            "labels": {"resilient-attempt": "1"}}})
    ctx = context()
    ctx["run_id"] = "manual__2026-01-03T00:00:00+00:00"
    policy = RetryPolicy(backoff=Backoff(initial_seconds=0.05, max_seconds=0.1),
                         failover_backoff=Backoff(initial_seconds=0.05, max_seconds=0.1),
                         budgets={"transient_crash": Budget(max_retries=0)})  # the run fails at the crash
    second = {"max_trial_count": 2, "base_output_dir": "gs://tune-bucket/run2"}  # each run its own checkpoints
    with pytest.raises(AirflowFailException, match="transient"):
        platform.wire(tuning(resilience_policy=policy, **second)).execute(ctx)
    ctx["task_state_store"].data.clear()
    result = platform.wire(tuning(**second)).execute(ctx)  # cleared: rebuilt from the platform's jobs
    assert [(t["attempt"], t["parameters"]["learning_rate"], t["state"]) for t in result["trials"]] == [
        (1, 0.0003, "SUCCEEDED"), (1, 0.001, "INFEASIBLE"), (2, 0.001, "SUCCEEDED")]
    assert result["trials_rerun"] == 0


@pytest.mark.resilient_emulator(time_scale=0.002)  # real time: trial 1's error delay passes while trial 2 trains
def test_parallel_trials_stopped_by_a_failed_job_are_owed_not_counted(resilient_emulator):
    """A study of two trials, both at once: attempt 1's trial 1 meets internal errors, which fail the job at
    max_failed_trial_count 1 while trial 2 still runs. The platform stops trial 2 ("stopped because its
    HyperparameterTuningJob failed"): owed, like the failed one, and neither counts toward the limit."""
    resilient_emulator.add_fault({"kind": "internal_error", "at_step": 2, "times": None, **BY_LOG,
                                  "match": {"display_name": "tune-digits-trial-1",
                                            "labels": {"resilient-attempt": "1"}}})
    slow = [sys.executable, str(WORKLOAD), "--epochs", "12", "--checkpoint-every", "2", "--epoch-seconds", "0.2"]
    pools = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
              "container_spec": {"image_uri": "python:3.11", "command": slow}}]
    # disable_retries: no in-place retry of the internal error, so trial 1 fails (~0.4 s of training) while
    # trial 2 still trains (2.4 s)
    result = tuning(max_trial_count=2, parallel_trial_count=2, max_failed_trial_count=1, disable_retries=True,
                    poll_interval=0.05, worker_pool_specs=pools).execute(context())
    first = [(t["state"], t["failure_class"]) for t in result["trials"] if t["attempt"] == 1]
    assert first == [("INFEASIBLE", "internal_error"), ("INFEASIBLE", "cancelled")], first
    assert result["trials_succeeded"] == 2 and result["trials_failed_permanently"] == 0
    assert result["trials_rerun"] == 0
    assert sorted(t["parameters"]["learning_rate"] for t in result["trials"] if t["attempt"] == 2) == RATES[:2]
