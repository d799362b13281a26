"""Cloud Logging clients for the provider, with the emulator switch of :mod:`.clients`.

``emulator`` (``host:port``, what the hooks read from the connection's extra ``emulator_host``): the clients speak
plain-text gRPC to that address with anonymous credentials (the Cloud Logging client libraries have no
``*_EMULATOR_HOST`` variable, and ``api_endpoint`` alone would open TLS). None: they use
``logging.googleapis.com`` and the credentials they are given (Application Default Credentials when None).

* :func:`logging_gapic_client` -- the generated ``LoggingServiceV2Client`` (``list_log_entries`` with
  ``resource_names``, ``filter``, ``order_by``, ``page_size``; returns a pager of ``LogEntry``).
* :func:`logging_client` -- the high-level ``google.cloud.logging.Client`` (``list_entries``,
  ``logger(name).log_struct`` ...). Its ``list_entries`` adds ``timestamp>="<now-24h>"`` when the filter has
  no ``timestamp`` term (the library's own default); pass a timestamp term to look further back.

Audit-log entries (``protoPayload`` of type ``google.cloud.audit.AuditLog``, Cloud Audit Logs) reach the high-level
client as a ``ProtobufEntry`` whose ``payload`` is a dict -- provided ``google.cloud.audit.audit_log_pb2`` is
imported, which both functions do.

Google libraries are imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import functools
from typing import Any

from .clients import emulator_host

__all__ = ["logging_client", "logging_gapic_client"]


def _register_audit_log() -> None:
    """Register ``google.cloud.audit.AuditLog`` so Any payloads of that type parse into dicts."""
    from google.cloud.audit import audit_log_pb2  # noqa: F401


def logging_gapic_client(*, credentials: Any = None, emulator: str | None = None) -> Any:
    """A ``google.cloud.logging_v2.services.logging_service_v2.LoggingServiceV2Client`` (or the emulator's)."""
    from google.cloud.logging_v2.services.logging_service_v2 import LoggingServiceV2Client

    _register_audit_log()
    host = emulator_host(emulator)
    if host:
        import grpc
        from google.cloud.logging_v2.services.logging_service_v2.transports.grpc import (
            LoggingServiceV2GrpcTransport,
        )

        return LoggingServiceV2Client(transport=LoggingServiceV2GrpcTransport(channel=grpc.insecure_channel(host)))
    return LoggingServiceV2Client(credentials=credentials)


def logging_client(project: str, *, credentials: Any = None, emulator: str | None = None) -> Any:
    """A ``google.cloud.logging.Client`` for ``project`` (or the emulator's).

    With the emulator, the client is built for gRPC with anonymous credentials and its entries API
    (``client.logging_api``, a ``google.cloud.logging_v2._gapic._LoggingAPI``) is replaced by one around
    :func:`logging_gapic_client` on the plain-text channel -- the library's own ``make_logging_api`` would
    build a TLS client. Only the entries API is redirected: sinks and metrics are not emulated.

    Also with the emulator, ``client.logger(name)`` defaults the resource to ``global`` (what the library
    detects off Google Cloud) instead of probing the GCE metadata server: the library does that probe for
    every new log name ``list_entries`` meets, and each probe can wait 5 s for DNS.
    """
    from google.cloud import logging

    _register_audit_log()
    host = emulator_host(emulator)
    if not host:
        return logging.Client(project=project, credentials=credentials)  # type: ignore[no-untyped-call]
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.logging_v2 import _gapic

    anonymous = AnonymousCredentials()  # type: ignore[no-untyped-call]
    client = _emulator_client_class()(project=project, credentials=anonymous, _use_grpc=True)
    client._logging_api = _gapic._LoggingAPI(logging_gapic_client(emulator=host), client)  # type: ignore[no-untyped-call]
    return client


@functools.cache
def _emulator_client_class() -> Any:
    """``google.cloud.logging.Client`` whose loggers default to the ``global`` resource (no metadata probe)."""
    from google.cloud import logging

    class EmulatorLoggingClient(logging.Client):
        def logger(self, name: str, *, labels: Any = None, resource: Any = None) -> Any:
            resource = resource or logging.Resource(type="global", labels={"project_id": self.project})
            return super().logger(name, labels=labels, resource=resource)  # type: ignore[no-untyped-call]

    return EmulatorLoggingClient
