"""Cloud Logging (``google.logging.v2.LoggingServiceV2``, the sinks of ``ConfigServiceV2``) for the emulator:
entries, filters, TPU audit events, sinks routing entries to Pub/Sub.

* :class:`~.service.LogStore` -- the entries and the verbs (``write_log_entries``, ``list_log_entries``,
  ``list_logs``, ``add_audit_entry``, ``reset``); its ``router`` receives what sinks route.
* :class:`~.sinks.SinkStore` -- ``LogStore.sinks``: ``create_sink``, ``get_sink``, ``update_sink``,
  ``delete_sink``, ``list_sinks``.
* :func:`~.wire.logging_service_handler`, :func:`~.wire.config_service_handler` -- the gRPC handlers serving them
  to the real client libraries.
"""

from .service import LogStore
from .sinks import SinkStore
from .wire import config_service_handler, logging_service_handler

__all__ = ["LogStore", "SinkStore", "config_service_handler", "logging_service_handler"]
