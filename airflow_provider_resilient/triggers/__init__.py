"""Airflow triggers of the provider (one module per service)."""

#: The module every trigger's ``on_kill`` asks whether its task was really killed (:mod:`.ownership`), imported off
#: the triggerer's event loop (``hooks.loading.load_off_loop``) when a trigger is cancelled.
OWNERSHIP_MODULE = "airflow_provider_resilient.triggers.ownership"
