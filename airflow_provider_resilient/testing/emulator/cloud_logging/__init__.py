"""Cloud Logging (``google.logging.v2.LoggingServiceV2``) for the emulator: entries, filters, TPU audit events.

* :class:`~.service.LogStore` -- the entries and the verbs (``write_log_entries``, ``list_log_entries``,
  ``list_logs``, ``add_audit_entry``, ``reset``).
* :func:`~.wire.logging_service_handler` -- the gRPC handler serving them to the real client libraries.
"""

from .service import LogStore
from .wire import logging_service_handler

__all__ = ["LogStore", "logging_service_handler"]
