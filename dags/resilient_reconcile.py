"""Release the CustomJobs and TPU nodes whose task instance no longer runs them (copy this DAG next to yours).

Airflow 3.3 calls no ``on_kill`` when a deferred task is marked failed or success before its trigger has
started or while no triggerer runs, when a DAG run is deleted, or when a worker is SIGKILLed and the task
is not retried; this DAG releases what such a task left behind, within its schedule interval plus one run
(the documentation's "Reconciler" and "UI actions" pages). List every region and zone your resilient tasks use,
fallbacks included.
"""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import dag

from airflow_provider_resilient.operators.reconcile import ResilientReconcileOperator

INTERVAL = timedelta(seconds=float(os.environ.get("RESILIENT_RECONCILE_SECONDS", "60")))


@dag(schedule=INTERVAL, catchup=False, max_active_runs=1, tags=["resilient", "maintenance"],
     dagrun_timeout=timedelta(minutes=10))
def resilient_reconcile():
    ResilientReconcileOperator(
        task_id="release_orphans",
        project_id=os.environ.get("RESILIENT_DEMO_PROJECT", "resilient-demo"),
        regions=["us-central1", "europe-west4"],  # the Vertex AI demo's region and fallback
        zones=["us-central2-b"],  # the TPU demo's zone
        retries=0,  # the next scheduled run is the retry
    )


resilient_reconcile()
