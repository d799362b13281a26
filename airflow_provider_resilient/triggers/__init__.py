"""Airflow triggers of the provider (one module per service)."""
