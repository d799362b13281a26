"""Google API clients for the provider, with one endpoint switch for the emulator.

Every factory takes ``emulator``: ``host:port`` of an emulator, or None for Google. The hooks pass what the
Airflow connection says (its extra ``emulator_host``, :func:`emulator_host`); no environment variable switches a
client to an emulator. With an emulator, clients speak plain-text gRPC to that address with anonymous credentials
(``api_endpoint`` alone would open TLS and fail against a plain-text server). Without one, clients use Google's
regional endpoints and the credentials they are given (Application Default Credentials when None).

Google libraries are imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The Airflow connection extra that switches the emulator on (``host:port``).
EMULATOR_HOST_EXTRA = "emulator_host"


def emulator_host(override: str | None = None, extra: Mapping[str, Any] | None = None) -> str | None:
    """The emulator address to use, or None for Google: ``override`` when given, else the ``emulator_host`` of an
    Airflow connection's ``extra``. Nothing else (no environment variable) switches it on.

    Args:
        override: an explicit ``host:port``.
        extra: an Airflow connection's extra; its ``emulator_host`` key is read.
    """
    if override:
        return override
    if extra and extra.get(EMULATOR_HOST_EXTRA):
        return str(extra[EMULATOR_HOST_EXTRA])
    return None


def vertex_endpoint(region: str) -> str:
    """Vertex AI's regional endpoint, e.g. ``us-central1-aiplatform.googleapis.com``."""
    return f"{region}-aiplatform.googleapis.com"


def _options(region: str) -> Any:
    from google.api_core.client_options import ClientOptions

    return ClientOptions(api_endpoint=vertex_endpoint(region))


def vertex_job_client(region: str, *, credentials: Any = None, emulator: str | None = None) -> Any:
    """A ``google.cloud.aiplatform_v1.JobServiceClient`` for ``region`` (or the emulator)."""
    from google.cloud.aiplatform_v1 import JobServiceClient

    host = emulator_host(emulator)
    if host:
        import grpc
        from google.cloud.aiplatform_v1.services.job_service.transports.grpc import JobServiceGrpcTransport

        return JobServiceClient(transport=JobServiceGrpcTransport(channel=grpc.insecure_channel(host)))
    return JobServiceClient(credentials=credentials, client_options=_options(region))


def vertex_job_async_client(region: str, *, credentials: Any = None, emulator: str | None = None) -> Any:
    """A ``google.cloud.aiplatform_v1.JobServiceAsyncClient`` for ``region`` (or the emulator).

    Call it inside the event loop that will use it (the channel binds to the running loop).
    """
    from google.cloud.aiplatform_v1 import JobServiceAsyncClient

    host = emulator_host(emulator)
    if host:
        import grpc
        from google.cloud.aiplatform_v1.services.job_service.transports.grpc_asyncio import (
            JobServiceGrpcAsyncIOTransport,
        )

        channel = grpc.aio.insecure_channel(host)
        return JobServiceAsyncClient(transport=JobServiceGrpcAsyncIOTransport(channel=channel))
    return JobServiceAsyncClient(credentials=credentials, client_options=_options(region))


#: The Cloud TPU API versions the provider calls: v2 for nodes and queued resources, v2alpha1 for what only it has
#: (``Node.upcoming_maintenance``, ``SimulateMaintenanceEvent``, multislice ``multi_node_params``; Google's Cloud
#: TPU API reference, https://cloud.google.com/tpu/docs/reference/rest).
TPU_VERSIONS = ("v2", "v2alpha1")


def tpu_client(*, credentials: Any = None, emulator: str | None = None, version: str = "v2") -> Any:
    """A ``google.cloud.tpu_<version>.TpuClient`` (or one on the emulator); ``version``: one of :data:`TPU_VERSIONS`.

    Raises:
        ValueError: another version.
    """
    import importlib

    if version not in TPU_VERSIONS:
        raise ValueError(f"version must be one of {TPU_VERSIONS}, got {version!r}")
    module = importlib.import_module(f"google.cloud.tpu_{version}")
    host = emulator_host(emulator)
    if host:
        import grpc

        transports = importlib.import_module(f"google.cloud.tpu_{version}.services.tpu.transports.grpc")
        return module.TpuClient(transport=transports.TpuGrpcTransport(channel=grpc.insecure_channel(host)))
    return module.TpuClient(credentials=credentials)


def tpu_async_client(*, credentials: Any = None, emulator: str | None = None, version: str = "v2") -> Any:
    """A ``google.cloud.tpu_<version>.TpuAsyncClient`` (or one on the emulator); create it inside its event loop.

    Raises:
        ValueError: a version not in :data:`TPU_VERSIONS`.
    """
    import importlib

    if version not in TPU_VERSIONS:
        raise ValueError(f"version must be one of {TPU_VERSIONS}, got {version!r}")
    module = importlib.import_module(f"google.cloud.tpu_{version}")
    host = emulator_host(emulator)
    if host:
        import grpc

        transports = importlib.import_module(f"google.cloud.tpu_{version}.services.tpu.transports.grpc_asyncio")
        channel = grpc.aio.insecure_channel(host)
        return module.TpuAsyncClient(transport=transports.TpuGrpcAsyncIOTransport(channel=channel))
    return module.TpuAsyncClient(credentials=credentials)


def pubsub_subscriber_async_client(*, credentials: Any = None, emulator: str | None = None) -> Any:
    """A ``google.pubsub_v1.SubscriberAsyncClient`` (or one on the emulator); create it inside its event loop.

    The GAPIC client, not ``google.cloud.pubsub_v1.SubscriberClient``: the provider pulls (unary ``Pull``) from a
    trigger's event loop and needs neither the streaming-pull machinery nor its threads.
    """
    from google.pubsub_v1 import SubscriberAsyncClient

    host = emulator_host(emulator)
    if host:
        import grpc
        from google.pubsub_v1.services.subscriber.transports.grpc_asyncio import SubscriberGrpcAsyncIOTransport

        channel = grpc.aio.insecure_channel(host)
        return SubscriberAsyncClient(transport=SubscriberGrpcAsyncIOTransport(channel=channel))
    return SubscriberAsyncClient(credentials=credentials)


def serializable_chain(chain: str | Sequence[str] | None) -> str | list[str] | None:
    """An ``impersonation_chain`` as a trigger's JSON kwargs carry it: one account as is, several as a list
    (a tuple would come back as a list anyway), None as None."""
    if chain is None or isinstance(chain, str):
        return chain
    return list(chain)
