"""``google.logging.v2.LoggingServiceV2`` over gRPC (WriteLogEntries, ListLogEntries, ListLogs) and the sink RPCs of
``google.logging.v2.ConfigServiceV2`` (CreateSink, GetSink, UpdateSink, DeleteSink, ListSinks).

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
CONFIG_SERVICE = "google.logging.v2.ConfigServiceV2"


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


def config_service_handler(store: LogStore, calls: CallLog) -> Any:
    """The generic handler for ConfigServiceV2's sink RPCs, calling the verbs of ``store.sinks``
    (:class:`~.sinks.SinkStore`)."""
    from google.cloud.logging_v2 import types
    from google.protobuf import empty_pb2

    sinks = store.sinks

    def by_sink_name(r: Any) -> tuple[str, str]:
        return f"sink_name={r.sink_name}", r.sink_name

    def create_summary(r: Any) -> tuple[str, str]:
        return (f"parent={r.parent} name={r.sink.name} destination={r.sink.destination} filter={r.sink.filter!r}",
                f"{r.parent}/sinks/{r.sink.name}")

    def update(r: Any) -> Any:
        mask = list(r.update_mask.paths) if "update_mask" in r else []
        return sinks.update_sink(r.sink_name, r.sink, mask, r.unique_writer_identity)

    def delete(r: Any) -> Any:
        sinks.delete_sink(r.sink_name)
        return empty_pb2.Empty()

    def list_sinks(r: Any) -> Any:
        found, token = sinks.list_sinks(r.parent, r.page_size, r.page_token)
        return types.ListSinksResponse(sinks=found, next_page_token=token)

    methods = {
        "CreateSink": Method(lambda r: sinks.create_sink(r.parent, r.sink, r.unique_writer_identity),
                             types.CreateSinkRequest.deserialize, types.LogSink.serialize, create_summary),
        "GetSink": Method(lambda r: sinks.get_sink(r.sink_name), types.GetSinkRequest.deserialize,
                          types.LogSink.serialize, by_sink_name),
        "UpdateSink": Method(update, types.UpdateSinkRequest.deserialize, types.LogSink.serialize, by_sink_name),
        "DeleteSink": Method(delete, types.DeleteSinkRequest.deserialize, empty_pb2.Empty.SerializeToString,
                             by_sink_name),
        "ListSinks": Method(list_sinks, types.ListSinksRequest.deserialize, types.ListSinksResponse.serialize,
                            lambda r: (f"parent={r.parent} page_size={r.page_size}", r.parent)),
    }
    return generic_handler(CONFIG_SERVICE, methods, calls)
