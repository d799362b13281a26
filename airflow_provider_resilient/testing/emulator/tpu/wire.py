"""``google.cloud.tpu.v2.Tpu`` over gRPC: nodes (long-running operations), guest attributes, queued resources;
and the ``google.cloud.tpu.v2alpha1.Tpu`` methods the provider reads maintenance through
(``Node.upcoming_maintenance`` and ``SimulateMaintenanceEvent`` exist in v2alpha1 only)."""

from __future__ import annotations

from typing import Any

from ..calls import CallLog
from ..wire import Method, generic_handler
from .backend import TpuBackend

SERVICE = "google.cloud.tpu.v2.Tpu"
SERVICE_V2ALPHA1 = "google.cloud.tpu.v2alpha1.Tpu"


def tpu_service_handler(backend: TpuBackend, calls: CallLog) -> Any:
    """The generic handler for the TPU API, calling ``backend``'s verbs."""
    from google.cloud.tpu_v2.types import cloud_tpu as t
    from google.longrunning import operations_pb2

    operation = operations_pb2.Operation.SerializeToString

    def by_name(r: Any) -> tuple[str, str]:
        return f"name={r.name}", r.name

    def by_parent(r: Any) -> tuple[str, str]:
        return f"parent={r.parent}", r.parent

    def create_summary(r: Any) -> tuple[str, str]:
        node_id = getattr(r, "node_id", "") or getattr(r, "queued_resource_id", "")
        return f"parent={r.parent} id={node_id}", f"{r.parent}/{node_id}"

    def list_nodes(r: Any) -> Any:
        return t.ListNodesResponse(nodes=backend.list_nodes(r.parent))

    def list_queued(r: Any) -> Any:
        return t.ListQueuedResourcesResponse(queued_resources=backend.list_queued_resources(r.parent))

    def guest(r: Any) -> Any:
        return t.GetGuestAttributesResponse(
            guest_attributes=backend.get_guest_attributes(r.name, r.query_path, list(r.worker_ids)))

    methods = {
        "CreateNode": Method(lambda r: backend.create_node(r.parent, r.node_id, r.node),
                             t.CreateNodeRequest.deserialize, operation, create_summary),
        "GetNode": Method(lambda r: backend.get_node(r.name), t.GetNodeRequest.deserialize, t.Node.serialize,
                          by_name),
        "ListNodes": Method(list_nodes, t.ListNodesRequest.deserialize, t.ListNodesResponse.serialize, by_parent),
        "UpdateNode": Method(lambda r: backend.update_node(r.node, list(r.update_mask.paths)),
                             t.UpdateNodeRequest.deserialize, operation,
                             lambda r: (f"name={r.node.name}", r.node.name)),
        "DeleteNode": Method(lambda r: backend.delete_node(r.name), t.DeleteNodeRequest.deserialize, operation,
                             by_name),
        "StopNode": Method(lambda r: backend.stop_node(r.name), t.StopNodeRequest.deserialize, operation, by_name),
        "StartNode": Method(lambda r: backend.start_node(r.name), t.StartNodeRequest.deserialize, operation,
                            by_name),
        "GetGuestAttributes": Method(guest, t.GetGuestAttributesRequest.deserialize,
                                     t.GetGuestAttributesResponse.serialize, by_name),
        "CreateQueuedResource": Method(
            lambda r: backend.create_queued_resource(r.parent, r.queued_resource_id, r.queued_resource),
            t.CreateQueuedResourceRequest.deserialize, operation, create_summary),
        "GetQueuedResource": Method(lambda r: backend.get_queued_resource(r.name),
                                    t.GetQueuedResourceRequest.deserialize, t.QueuedResource.serialize, by_name),
        "ListQueuedResources": Method(list_queued, t.ListQueuedResourcesRequest.deserialize,
                                      t.ListQueuedResourcesResponse.serialize, by_parent),
        "DeleteQueuedResource": Method(lambda r: backend.delete_queued_resource(r.name, r.force),
                                       t.DeleteQueuedResourceRequest.deserialize, operation, by_name),
    }
    return generic_handler(SERVICE, methods, calls)


def tpu_v2alpha1_handler(backend: TpuBackend, calls: CallLog) -> Any:
    """The v2alpha1 TPU API's GetNode (the v2 node with ``upcoming_maintenance``) and SimulateMaintenanceEvent."""
    from google.cloud.tpu_v2alpha1.types import cloud_tpu as t
    from google.longrunning import operations_pb2

    def get_node(r: Any) -> Any:
        backend.get_node(r.name)  # NOT_FOUND and injected UNAVAILABLE answers, as for v2
        return backend.alpha_node(r.name)

    def by_name(r: Any) -> tuple[str, str]:
        return f"name={r.name}", r.name

    def create_queued(r: Any) -> Any:
        """A v2alpha1 CreateQueuedResource -- the only way to ask for a multislice group (``multi_node_params``)."""
        from google.cloud.tpu_v2.types import cloud_tpu as t2
        from google.protobuf import any_pb2

        specs = list(r.queued_resource.tpu.node_spec)
        multi = specs[0].multi_node_params if specs and "multi_node_params" in specs[0] else None
        body = t2.QueuedResource.from_json(t.QueuedResource.to_json(r.queued_resource), ignore_unknown_fields=True)
        operation = backend.create_queued_resource(r.parent, r.queued_resource_id, body,
                                                   (multi.node_count, multi.node_id_prefix) if multi else None)
        answer = operations_pb2.Operation()
        answer.CopyFrom(operation)
        if answer.done and answer.HasField("response"):  # the v2alpha1 client reads a v2alpha1 QueuedResource
            packed = any_pb2.Any()
            packed.Pack(t.QueuedResource.pb(t.QueuedResource.from_json(
                t2.QueuedResource.to_json(backend.get_queued_resource(f"{r.parent}/queuedResources/"
                                                                      f"{r.queued_resource_id}")),
                ignore_unknown_fields=True)))
            answer.response.CopyFrom(packed)
        return answer

    def create_summary(r: Any) -> tuple[str, str]:
        return f"parent={r.parent} id={r.queued_resource_id}", f"{r.parent}/{r.queued_resource_id}"

    methods = {
        "CreateQueuedResource": Method(create_queued, t.CreateQueuedResourceRequest.deserialize,
                                       operations_pb2.Operation.SerializeToString, create_summary),
        "GetNode": Method(get_node, t.GetNodeRequest.deserialize, t.Node.serialize, by_name),
        "SimulateMaintenanceEvent": Method(
            lambda r: backend.simulate_maintenance_event(r.name, list(r.worker_ids)),
            t.SimulateMaintenanceEventRequest.deserialize, operations_pb2.Operation.SerializeToString, by_name),
    }
    return generic_handler(SERVICE_V2ALPHA1, methods, calls)
