"""The gRPC wire layer: unpack a request, call the backend verb, pack the reply -- nothing else.

Every RPC is recorded in the :class:`~.calls.CallLog` with the status code it got, and an
:class:`~.errors.EmulatorError` becomes ``context.abort(code, message)``, which the client library
raises as the matching ``google.api_core.exceptions`` class (NotFound, InvalidArgument ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .calls import CallLog, CallRecord
from .errors import EmulatorError


@dataclass(frozen=True)
class Method:
    """One RPC: the verb, how to read the request and write the reply, and a request summary.

    ``with_context``: the verb is called as ``verb(request, context)`` with the ``grpc.ServicerContext`` (for an
    RPC that needs the call's deadline, e.g. Pub/Sub's blocking ``Pull``); otherwise as ``verb(request)``.
    """

    verb: Callable[..., Any]
    request_deserializer: Callable[[bytes], Any]
    response_serializer: Callable[[Any], bytes]
    summary: Callable[[Any], tuple[str, str]]  # request -> (one-line summary, resource name)
    with_context: bool = False


def generic_handler(service: str, methods: dict[str, Method], calls: CallLog) -> Any:
    """A ``grpc.GenericRpcHandler`` serving ``methods`` of ``service`` (unary-unary)."""
    import grpc

    def wrap(name: str, method: Method) -> Any:
        def handle(request: Any, context: Any) -> Any:
            try:
                summary, resource = method.summary(request)
            except Exception:  # a summary must never break the call
                summary, resource = "", ""
            try:
                reply = method.verb(request, context) if method.with_context else method.verb(request)
            except EmulatorError as exc:
                calls.add(CallRecord(name, summary, resource, exc.code_name, calls.clock()))
                context.abort(getattr(grpc.StatusCode, exc.code_name), exc.message)
            calls.add(CallRecord(name, summary, resource, "OK", calls.clock()))
            return reply

        return grpc.unary_unary_rpc_method_handler(handle, request_deserializer=method.request_deserializer,
                                                   response_serializer=method.response_serializer)

    return grpc.method_handlers_generic_handler(service, {n: wrap(n, m) for n, m in methods.items()})


def operations_handler(store: Any, calls: CallLog) -> Any:
    """``google.longrunning.Operations`` over an :class:`~.operations.OperationStore`."""
    from google.longrunning import operations_pb2
    from google.protobuf import empty_pb2

    def name_of(request: Any) -> tuple[str, str]:
        return f"name={request.name}", request.name

    def list_ops(request: Any) -> Any:
        return operations_pb2.ListOperationsResponse(operations=store.list(request.name))

    def delete(request: Any) -> Any:
        store.delete(request.name)
        return empty_pb2.Empty()

    empty = empty_pb2.Empty.SerializeToString
    op = operations_pb2.Operation.SerializeToString
    methods = {
        "GetOperation": Method(lambda r: store.get(r.name), operations_pb2.GetOperationRequest.FromString, op,
                               name_of),
        "WaitOperation": Method(lambda r: store.get(r.name), operations_pb2.WaitOperationRequest.FromString, op,
                                name_of),
        "ListOperations": Method(list_ops, operations_pb2.ListOperationsRequest.FromString,
                                 operations_pb2.ListOperationsResponse.SerializeToString, name_of),
        "DeleteOperation": Method(delete, operations_pb2.DeleteOperationRequest.FromString, empty, name_of),
        "CancelOperation": Method(lambda r: empty_pb2.Empty(), operations_pb2.CancelOperationRequest.FromString,
                                  empty, name_of),
    }
    return generic_handler("google.longrunning.Operations", methods, calls)
