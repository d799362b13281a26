"""``google.cloud.tpu.v2.Tpu`` over gRPC: nodes (long-running operations), guest attributes, queued resources, the
read-only catalog (accelerator types and runtime versions of each zone, :mod:`.catalog`); the
``google.cloud.location.Locations`` mixin the v2 client exposes (Cloud TPU's zones); and the
``google.cloud.tpu.v2alpha1.Tpu`` methods the provider reads maintenance through
(``Node.upcoming_maintenance`` and ``SimulateMaintenanceEvent`` exist in v2alpha1 only)."""

from __future__ import annotations

import re
from typing import Any

from ..calls import CallLog
from ..errors import InvalidArgument, NotFound
from ..wire import Method, generic_handler
from . import catalog
from .service import TpuService

SERVICE = "google.cloud.tpu.v2.Tpu"
SERVICE_V2ALPHA1 = "google.cloud.tpu.v2alpha1.Tpu"
LOCATIONS_SERVICE = "google.cloud.location.Locations"
#: Cloud TPU's locations resource name: ``projects/P/locations/Z``.
_LOCATION_RE = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)$")


def _page(items: list[Any], page_size: int, page_token: str) -> tuple[list[Any], str]:
    """One page of ``items`` (``page_size`` 0: up to 1000) and the next page's token ("" after the last one)."""
    if page_token and not page_token.isdigit():
        raise InvalidArgument(f"Invalid page_token {page_token!r}.")
    if page_size < 0:
        raise InvalidArgument(f"page_size must be >= 0, got {page_size}")
    start = int(page_token or 0)
    end = start + (page_size or 1000)
    return items[start:end], (str(end) if end < len(items) else "")


def _zone_of(parent: str) -> str:
    """The zone of ``projects/P/locations/Z``; NOT_FOUND when Z is not a Cloud TPU zone."""
    match = _LOCATION_RE.match(parent)
    if not match:
        raise InvalidArgument(f"parent {parent!r} is not a location name like 'projects/P/locations/us-central2-b'")
    if match["zone"] not in catalog.zones():
        raise NotFound(f"Location {parent!r} is not a Cloud TPU zone (Cloud TPU, \"TPU regions and zones\")")
    return match["zone"]


def _child(name: str, collection: str) -> tuple[str, str]:
    """``(parent, id)`` of ``projects/P/locations/Z/<collection>/ID``."""
    parent, _, rest = name.partition(f"/{collection}/")
    if not rest or "/" in rest:
        raise InvalidArgument(f"name {name!r} is not like 'projects/P/locations/Z/{collection}/ID'")
    return parent, rest


def tpu_service_handler(backend: TpuService, calls: CallLog) -> Any:
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

    def accelerator_type(parent: str, name: str) -> Any:
        return t.AcceleratorType(name=f"{parent}/acceleratorTypes/{name}", type_=name, accelerator_configs=[
            t.AcceleratorConfig(type_=catalog.CONFIG_TYPE[name.rsplit("-", 1)[0]], topology=catalog.topology(name))])

    def list_accelerator_types(r: Any) -> Any:
        page, token = _page(catalog.accelerator_types(_zone_of(r.parent)), r.page_size, r.page_token)
        return t.ListAcceleratorTypesResponse(accelerator_types=[accelerator_type(r.parent, n) for n in page],
                                              next_page_token=token)

    def get_accelerator_type(r: Any) -> Any:
        parent, name = _child(r.name, "acceleratorTypes")
        if name not in catalog.accelerator_types(_zone_of(parent)):
            raise NotFound(f"Resource '{r.name}' was not found")
        return accelerator_type(parent, name)

    def list_runtime_versions(r: Any) -> Any:
        page, token = _page(catalog.runtime_versions(_zone_of(r.parent)), r.page_size, r.page_token)
        return t.ListRuntimeVersionsResponse(runtime_versions=[
            t.RuntimeVersion(name=f"{r.parent}/runtimeVersions/{v}", version=v) for v in page], next_page_token=token)

    def get_runtime_version(r: Any) -> Any:
        parent, version = _child(r.name, "runtimeVersions")
        if version not in catalog.runtime_versions(_zone_of(parent)):
            raise NotFound(f"Resource '{r.name}' was not found")
        return t.RuntimeVersion(name=r.name, version=version)

    methods = {
        "ListAcceleratorTypes": Method(list_accelerator_types, t.ListAcceleratorTypesRequest.deserialize,
                                       t.ListAcceleratorTypesResponse.serialize, by_parent),
        "GetAcceleratorType": Method(get_accelerator_type, t.GetAcceleratorTypeRequest.deserialize,
                                     t.AcceleratorType.serialize, by_name),
        "ListRuntimeVersions": Method(list_runtime_versions, t.ListRuntimeVersionsRequest.deserialize,
                                      t.ListRuntimeVersionsResponse.serialize, by_parent),
        "GetRuntimeVersion": Method(get_runtime_version, t.GetRuntimeVersionRequest.deserialize,
                                    t.RuntimeVersion.serialize, by_name),
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


def locations_handler(calls: CallLog) -> Any:
    """``google.cloud.location.Locations`` (``TpuClient.list_locations`` / ``get_location``): Cloud TPU's zones.
    One gRPC server holds one service of a name: the emulator's Locations are Cloud TPU's (the Vertex AI
    client's mixin would get them too)."""
    from google.cloud.location import locations_pb2

    def location(project: str, zone: str) -> Any:
        return locations_pb2.Location(name=f"projects/{project}/locations/{zone}", location_id=zone,
                                      display_name=zone)

    def list_locations(r: Any) -> Any:
        match = re.match(r"^projects/([^/]+)$", r.name)
        if not match:
            raise InvalidArgument(f"name {r.name!r} is not a project like 'projects/P'")
        if r.filter:
            raise InvalidArgument("filter: the emulator lists every location and takes no filter")
        page, token = _page(catalog.zones(), r.page_size, r.page_token)
        return locations_pb2.ListLocationsResponse(locations=[location(match[1], z) for z in page],
                                                   next_page_token=token)

    def get_location(r: Any) -> Any:
        zone = _zone_of(r.name)
        return location(r.name.split("/")[1], zone)

    methods = {
        "ListLocations": Method(list_locations, locations_pb2.ListLocationsRequest.FromString,
                                locations_pb2.ListLocationsResponse.SerializeToString,
                                lambda r: (f"name={r.name}", r.name)),
        "GetLocation": Method(get_location, locations_pb2.GetLocationRequest.FromString,
                              locations_pb2.Location.SerializeToString, lambda r: (f"name={r.name}", r.name)),
    }
    return generic_handler(LOCATIONS_SERVICE, methods, calls)


def tpu_v2alpha1_handler(backend: TpuService, calls: CallLog) -> Any:
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
