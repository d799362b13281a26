"""Airflow links of the provider (one module per service)."""
