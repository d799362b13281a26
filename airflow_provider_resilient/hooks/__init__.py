"""Airflow hooks of the provider (one module per service)."""
