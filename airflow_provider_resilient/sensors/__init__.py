"""Airflow sensors of the provider (one module per service)."""
