"""Airflow operators of the provider (one module per service)."""
