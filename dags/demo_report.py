"""The report the demo DAGs print after training (imported by their ``report`` tasks at run time; the
DAGs folder is on ``sys.path`` in Airflow's processes). No DAG here."""

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
        print(f"=== {label}GOODPUT: {Ledger.from_dict(goodput).summary()} ===")
        if "checkpoint_advice" in goodput:
            print(f"=== {label}CHECKPOINTING: {goodput['checkpoint_advice']['summary']} ===")
    with fsspec.open(f"{output}/model/metrics.json") as metrics_file:
        accuracy = float(json.load(metrics_file)["test_accuracy"])
    print(f"=== {label}FINAL HELD-OUT ACCURACY: {accuracy:.4f} (checkpoint {result['checkpoint']['uri']}) ===")
    return accuracy
