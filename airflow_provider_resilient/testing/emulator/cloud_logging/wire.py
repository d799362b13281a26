"""``google.logging.v2.LoggingServiceV2`` over gRPC: WriteLogEntries, ListLogEntries, ListLogs.

Request and reply types are the proto-plus messages of ``google.cloud.logging_v2.types``; every call goes through
:func:`..wire.generic_handler`, so it is recorded in the :class:`~..calls.CallLog` and a
:class:`~..errors.EmulatorError` reaches the client as its ``google.api_core.exceptions`` class.
"""

from __future__ import annotations

from typing import Any

from ..calls import CallLog
from ..wire import Method, generic_handler
from .service import LogStore

SERVICE = "google.logging.v2.LoggingServiceV2"


def logging_service_handler(store: LogStore, calls: CallLog) -> Any:
    """The generic handler for LoggingServiceV2, calling ``store``'s verbs."""
    from google.cloud.logging_v2 import types

    def write(r: Any) -> Any:
        resource = r.resource if "resource" in r else None
        store.write_log_entries(r.log_name, resource, dict(r.labels), r.entries, partial_success=r.partial_success,
                                dry_run=r.dry_run)
        return types.WriteLogEntriesResponse()

    def write_summary(r: Any) -> tuple[str, str]:
        names = sorted({e.log_name or r.log_name for e in r.entries})
        return f"log_name={r.log_name} entries={len(r.entries)} logs={','.join(names)}", names[0] if names else ""

    def list_entries(r: Any) -> Any:
        entries, token = store.list_log_entries(list(r.resource_names), r.filter, r.order_by, r.page_size,
                                                r.page_token)
        return types.ListLogEntriesResponse(entries=entries, next_page_token=token)

    def list_entries_summary(r: Any) -> tuple[str, str]:
        names = ",".join(r.resource_names)
        return f"resource_names={names} filter={r.filter!r} order_by={r.order_by!r} page_size={r.page_size}", names

    def list_logs(r: Any) -> Any:
        names, token = store.list_logs(list(r.resource_names) or [r.parent], r.page_size, r.page_token)
        return types.ListLogsResponse(log_names=names, next_page_token=token)

    def list_logs_summary(r: Any) -> tuple[str, str]:
        names = ",".join(r.resource_names) or r.parent
        return f"parent={r.parent} resource_names={names} page_size={r.page_size}", names

    methods = {
        "WriteLogEntries": Method(write, types.WriteLogEntriesRequest.deserialize,
                                  types.WriteLogEntriesResponse.serialize, write_summary),
        "ListLogEntries": Method(list_entries, types.ListLogEntriesRequest.deserialize,
                                 types.ListLogEntriesResponse.serialize, list_entries_summary),
        "ListLogs": Method(list_logs, types.ListLogsRequest.deserialize, types.ListLogsResponse.serialize,
                           list_logs_summary),
    }
    return generic_handler(SERVICE, methods, calls)
