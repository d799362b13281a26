"""The report the demo DAGs print after training (:func:`report_task`; the DAGs folder is on ``sys.path`` in
Airflow's processes). No DAG here."""

from __future__ import annotations

import json
from typing import Any


def print_report(result: dict[str, Any], goodput: dict[str, Any] | None, output: str, label: str = "") -> float:
    """Print the attempt history, the run's goodput ledger and checkpoint advice (XCom ``goodput``) and the
    model's held-out accuracy read from ``<output>/model/metrics.json``; return the accuracy.

    ``label`` prefixes every heading (``"TPU "``); ``scripts/run_demo.py`` and ``tests/test_demo.py`` read
    the ``=== ... ===`` lines.
    """
    import fsspec

    from airflow_provider_resilient.goodput import Ledger
    from airflow_provider_resilient.policy import history_table

    print(f"=== {label}ATTEMPT HISTORY ===")
    for line in history_table(result["attempts"]):
        print(line)
    if goodput:
        ledger = Ledger.from_dict(goodput)
        print(f"=== {label}GOODPUT: {ledger.summary()} ===")
        print(f"=== {label}BADPUT (ml-goodput-measurement types, % of the run): "
              + ", ".join(f"{kind} {share:.1f}" for kind, share in ledger.badput_breakdown().items()) + " ===")
        if "checkpoint_advice" in goodput:
            print(f"=== {label}CHECKPOINTING: {goodput['checkpoint_advice']['summary']} ===")
    with fsspec.open(f"{output}/model/metrics.json") as metrics_file:
        accuracy = float(json.load(metrics_file)["test_accuracy"])
    print(f"=== {label}FINAL HELD-OUT ACCURACY: {accuracy:.4f} (checkpoint {result['checkpoint']['uri']}) ===")
    return accuracy


def report_run(result: dict[str, Any], output: str, label: str = "") -> float:
    """:func:`print_report` from inside the report task: the ``train`` task's goodput (XCom ``goodput``) and this
    run's output directory, ``<output>/<run_id>``."""
    from airflow.sdk import get_current_context

    context = get_current_context()
    goodput = context["ti"].xcom_pull(task_ids="train", key="goodput")
    return print_report(result, goodput, f"{output}/{context['run_id']}", label=label)


def report_task(output: str, label: str = "") -> Any:
    """The example DAGs' ``report`` task: print the attempt history, the goodput ledger and checkpoint advice,
    and the held-out accuracy of the model the ``train`` task wrote under ``<output>/<run_id>``
    (:func:`report_run`); call it on ``train.output``."""
    from airflow.sdk import task

    @task(task_id="report")
    def report(result: dict[str, Any]) -> float:
        return report_run(result, output, label=label)

    return report


def print_study(result: dict[str, Any], goodput: dict[str, Any] | None) -> float:
    """Print a tuning study's attempt history, every trial (attempt, trial id, parameters, state, metric), the
    counts and the best trial, and the best trial's held-out accuracy read from its ``metrics.json``; return it."""
    import fsspec

    from airflow_provider_resilient.goodput import Ledger
    from airflow_provider_resilient.policy import history_table

    print("=== ATTEMPT HISTORY ===")
    for line in history_table(result["attempts"]):
        print(line)
    if goodput:
        print(f"=== GOODPUT: {Ledger.from_dict(goodput).summary()} ===")
    print("=== TRIALS ===")
    print("attempt  trial  parameters                state       metric   failure")
    for trial in result["trials"]:
        params = ", ".join(f"{k}={v}" for k, v in trial["parameters"].items())
        metric = f"{trial['metric']:.4f}" if trial["metric"] is not None else "-"
        print(f"{trial['attempt']:<8} {trial['trial_id']:<6} {params:<25} {trial['state']:<11} {metric:<8} "
              f"{trial['failure_class'] or ''}")
    best = result["best_trial"]
    print(f"=== STUDY: {result['trials_run']} trials run, {result['trials_succeeded']} succeeded, "
          f"{result['trials_failed_permanently']} failed permanently, {result['trials_rerun']} re-run ===")
    seconds = result["trial_seconds"]
    print(f"=== TRIAL TIME: {seconds['kept']:.0f} s kept, {seconds['lost']:.0f} s lost to failed or stopped trials "
          f"(goodput {100 * seconds['goodput']:.1f}%) ===")
    print(f"=== BEST TRIAL: {best['parameters']} {result['metric_id']} {best['metric']:.4f} (trial {best['trial_id']} "
          f"of attempt {best['attempt']}, {best['job_name']}) ===")
    with fsspec.open(f"{best['model_dir']}/metrics.json") as metrics_file:
        accuracy = float(json.load(metrics_file)["test_accuracy"])
    print(f"=== FINAL HELD-OUT ACCURACY: {accuracy:.4f} (checkpoint {best['checkpoint']['uri']}) ===")
    return accuracy


def study_report_task() -> Any:
    """The tuning example's ``report`` task: :func:`print_study` of the ``train`` task's result and goodput."""
    from airflow.sdk import get_current_context, task

    @task(task_id="report")
    def report(result: dict[str, Any]) -> float:
        goodput = get_current_context()["ti"].xcom_pull(task_ids="train", key="goodput")
        return print_study(result, goodput)

    return report
