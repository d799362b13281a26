"""The provider's client factories on a running emulator, for tests, benchmarks and the emulator's own tools.

Each function is its namesake of :mod:`..clients` / :mod:`..logging_clients` with ``emulator`` defaulting to the
address the emulator exports (``RESILIENT_EMULATOR_HOST``, :meth:`~.emulator.server.Emulator.env`; the
``resilient_emulator`` fixture exports it for the test). They never reach Google: without an address they raise.
The provider's operators and hooks do not read that variable; they use an emulator only when their Airflow
connection says so (extra ``emulator_host``).
"""

from __future__ import annotations

import os
from typing import Any

#: The emulator's address as :meth:`~.emulator.server.Emulator.env` exports it (``host:port``).
EMULATOR_HOST_ENV = "RESILIENT_EMULATOR_HOST"


def emulator_address(emulator: str | None = None) -> str:
    """``emulator``, else ``RESILIENT_EMULATOR_HOST``.

    Raises:
        RuntimeError: neither is set (these clients only ever talk to an emulator).
    """
    address = emulator or os.environ.get(EMULATOR_HOST_ENV)
    if not address:
        raise RuntimeError(f"no emulator: pass emulator='host:port' or export {EMULATOR_HOST_ENV} "
                           "(Emulator.env(); the resilient_emulator fixture does)")
    return address


def vertex_job_client(region: str, *, emulator: str | None = None) -> Any:
    """A ``JobServiceClient`` on the emulator (:func:`..clients.vertex_job_client`)."""
    from .. import clients

    return clients.vertex_job_client(region, emulator=emulator_address(emulator))


def vertex_job_async_client(region: str, *, emulator: str | None = None) -> Any:
    """A ``JobServiceAsyncClient`` on the emulator; create it inside its event loop."""
    from .. import clients

    return clients.vertex_job_async_client(region, emulator=emulator_address(emulator))


def tpu_client(*, emulator: str | None = None, version: str = "v2") -> Any:
    """A ``TpuClient`` of ``version`` on the emulator (:func:`..clients.tpu_client`)."""
    from .. import clients

    return clients.tpu_client(emulator=emulator_address(emulator), version=version)


def tpu_async_client(*, emulator: str | None = None, version: str = "v2") -> Any:
    """A ``TpuAsyncClient`` of ``version`` on the emulator; create it inside its event loop."""
    from .. import clients

    return clients.tpu_async_client(emulator=emulator_address(emulator), version=version)


def logging_gapic_client(*, emulator: str | None = None) -> Any:
    """A ``LoggingServiceV2Client`` on the emulator (:func:`..logging_clients.logging_gapic_client`)."""
    from .. import logging_clients

    return logging_clients.logging_gapic_client(emulator=emulator_address(emulator))


def logging_client(project: str, *, emulator: str | None = None) -> Any:
    """A ``google.cloud.logging.Client`` for ``project`` on the emulator (:func:`..logging_clients.logging_client`)."""
    from .. import logging_clients

    return logging_clients.logging_client(project, emulator=emulator_address(emulator))


#: The sink filter of docs/detection.md: the Vertex AI service's entries of a job (a replica's non-zero exit, the
#: job's end) and Cloud TPU's system events (maintenance events, preemptions).
FAILURE_EVENTS_FILTER = ('(resource.type="ml_job" AND resource.labels.task_name="service") OR '
                         '(logName:"cloudaudit.googleapis.com%2Fsystem_event" '
                         'AND protoPayload.serviceName="tpu.googleapis.com")')


def route_failure_events(topic: str, *, emulator: str | None = None, sink_id: str = "resilient-events",
                         create_topic: bool = True) -> str:
    """On the emulator, what docs/detection.md sets up once per project, with the real clients: the Pub/Sub topic
    ``topic`` (``projects/P/topics/T``; unless ``create_topic`` is False) and a Cloud Logging sink ``sink_id`` in
    project P routing :data:`FAILURE_EVENTS_FILTER` to it. Returns the sink's writer identity.

    Raises:
        google.api_core.exceptions.AlreadyExists: the topic or the sink exists already.
    """
    import grpc
    from google.cloud.logging_v2.services.config_service_v2 import ConfigServiceV2Client
    from google.cloud.logging_v2.services.config_service_v2.transports import ConfigServiceV2GrpcTransport
    from google.pubsub_v1 import PublisherClient
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    channel = grpc.insecure_channel(emulator_address(emulator))
    try:
        if create_topic:
            PublisherClient(transport=PublisherGrpcTransport(channel=channel)).create_topic(name=topic)
        sink = ConfigServiceV2Client(transport=ConfigServiceV2GrpcTransport(channel=channel)).create_sink(
            parent="/".join(topic.split("/")[:2]), sink={"name": sink_id, "filter": FAILURE_EVENTS_FILTER,
                                                         "destination": f"pubsub.googleapis.com/{topic}"})
        return str(sink.writer_identity)
    finally:
        channel.close()


__all__ = ["EMULATOR_HOST_ENV", "FAILURE_EVENTS_FILTER", "emulator_address", "logging_client", "logging_gapic_client",
           "route_failure_events", "tpu_async_client", "tpu_client", "vertex_job_async_client", "vertex_job_client"]
