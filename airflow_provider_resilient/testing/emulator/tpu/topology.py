"""The TPU topology table lives with the specs: :func:`airflow_provider_resilient.specs.tpu.worker_count`."""

from ....specs.tpu import worker_count

__all__ = ["worker_count"]
