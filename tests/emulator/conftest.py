"""Helpers for emulator tests: job specs and the real clients wired to the ``resilient_emulator`` fixture."""

from __future__ import annotations

import sys
from typing import Any

import pytest

PARENT = "projects/test-project/locations/us-central1"
#: The emulator's pytest plugin, as a user opts into it (``-p``): it never loads itself.
PLUGIN = "airflow_provider_resilient.testing.emulator.pytest_plugin"
TERMINAL = ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"]


def pool(code: str, *, replicas: int = 1, env: dict[str, str] | None = None, args: list[str] | None = None,
         machine_type: str = "n1-standard-4") -> dict[str, Any]:
    """A worker pool running ``python -c code``."""
    return {
        "machine_spec": {"machine_type": machine_type},
        "replica_count": replicas,
        "container_spec": {"image_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
                           "command": ["python", "-c", code], "args": args or [],
                           "env": [{"name": k, "value": v} for k, v in (env or {}).items()]},
    }


def custom_job(code: str = "print('ok')", *, display_name: str = "test-job", labels: dict[str, str] | None = None,
               pools: list[dict[str, Any]] | None = None, scheduling: dict[str, Any] | None = None,
               base_output_dir: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"worker_pool_specs": pools or [pool(code)]}
    if scheduling:
        spec["scheduling"] = scheduling
    if base_output_dir:
        spec["base_output_directory"] = {"output_uri_prefix": base_output_dir}
    return {"display_name": display_name, "labels": labels or {}, "job_spec": spec}


@pytest.fixture
def client(resilient_emulator: Any) -> Any:
    """The real ``JobServiceClient``, built by the provider's client factory on the fixture's emulator."""
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    return vertex_job_client("us-central1")


@pytest.fixture
def submit(client: Any, resilient_emulator: Any) -> Any:
    """Create a CustomJob and wait for a terminal state; returns (final job, emulator events)."""

    def run(job: dict[str, Any], *, timeout: float = 60.0, wait: bool = True) -> Any:
        created = client.create_custom_job(parent=PARENT, custom_job=job)
        if not wait:
            return created
        resilient_emulator.wait_for_state(created.name, TERMINAL, timeout)
        return client.get_custom_job(name=created.name)

    return run


PYTHON = sys.executable


# ------------------------------------------------------------------ the real Pub/Sub clients on the emulator
@pytest.fixture
def channel(resilient_emulator: Any) -> Any:
    """A plain-text gRPC channel to the emulator, closed after the test."""
    import grpc

    channel = grpc.insecure_channel(resilient_emulator.address)
    yield channel
    channel.close()


@pytest.fixture
def publisher(channel: Any) -> Any:
    """The real ``google.pubsub_v1.PublisherClient`` on the emulator."""
    from google.pubsub_v1 import PublisherClient
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    return PublisherClient(transport=PublisherGrpcTransport(channel=channel))


@pytest.fixture
def subscriber(channel: Any) -> Any:
    """The real ``google.pubsub_v1.SubscriberClient`` on the emulator."""
    from google.pubsub_v1 import SubscriberClient
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    return SubscriberClient(transport=SubscriberGrpcTransport(channel=channel))
