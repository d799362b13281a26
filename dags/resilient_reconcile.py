"""The reconciler: releases the jobs and nodes whose task instance has finished or is gone. Its projects, regions,
zones and schedule come from Airflow's configuration, section [resilient] (here: docker-compose.yaml's and
scripts/run_demo.py's AIRFLOW__RESILIENT__* variables); see airflow_provider_resilient.reconcile."""

from airflow_provider_resilient.reconcile import reconcile_dag

reconcile_dag()
