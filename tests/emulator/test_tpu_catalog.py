"""The real google-cloud-tpu v2 client against the emulated Cloud TPU catalog and its refusals.

Cloud TPU refuses a node id that is not an RFC 1035 name (projects.locations.nodes.create,
https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes/create), a location that is not a TPU
zone, and an accelerator type or runtime version the zone does not offer; it lists what each zone offers
(``ListAcceleratorTypes``, ``ListRuntimeVersions``) and its zones (the ``google.cloud.location`` mixin). The
emulator serves all of it from the provider's data file (``specs/catalog.json``), which the parse-time checks
(``specs.tpu``) read on their own: the last tests hold the two readings to each other.
"""

from __future__ import annotations

import pytest
from google.api_core import exceptions

from airflow_provider_resilient.specs import tpu as spec
from airflow_provider_resilient.specs.catalog import catalog
from airflow_provider_resilient.testing.emulator_clients import tpu_client

pytestmark = [pytest.mark.resilient_emulator(clock="manual", time_scale=1.0)]
PROJECT = "projects/test-project"
ZONE = f"{PROJECT}/locations/us-central2-b"


@pytest.fixture(autouse=True)
def _no_escape_hatches(monkeypatch):
    for variable in ("RESILIENT_EXTRA_ZONES", "RESILIENT_EXTRA_RUNTIME_VERSIONS"):
        monkeypatch.delenv(variable, raising=False)


def node(accelerator_type: str = "v4-8", runtime_version: str = "tpu-ubuntu2204-base") -> dict:
    return {"accelerator_type": accelerator_type, "runtime_version": runtime_version,
            "metadata": {"startup-script": "true"}}


@pytest.mark.parametrize("node_id", ["Train-Node", "9lives", "node-", "-node", "node_1", "node.1", "x" * 64, "nöde"])
def test_a_node_id_that_is_not_an_rfc_1035_name_is_refused(resilient_emulator, node_id):
    client = tpu_client()
    with pytest.raises(exceptions.InvalidArgument, match="RFC 1035"):
        client.create_node(parent=ZONE, node_id=node_id, node=node())
    with pytest.raises(exceptions.InvalidArgument, match="RFC 1035"):  # the queued resource's node, at its create
        client.create_queued_resource(parent=ZONE, queued_resource_id="qr", queued_resource={
            "tpu": {"node_spec": [{"parent": ZONE, "node_id": node_id, "node": node()}]}})
    assert list(client.list_nodes(parent=ZONE)) == [] and list(client.list_queued_resources(parent=ZONE)) == []


@pytest.mark.parametrize("node_id", ["a", "x" * 63, "train-01"])
def test_the_longest_and_shortest_names_are_taken(resilient_emulator, node_id):
    tpu_client().create_node(parent=ZONE, node_id=node_id, node=node())
    assert tpu_client().get_node(name=f"{ZONE}/nodes/{node_id}").state.name == "CREATING"


@pytest.mark.parametrize(("parent", "accelerator_type", "runtime_version", "error", "says"), [
    (f"{PROJECT}/locations/mars-north1-a", "v4-8", "tpu-ubuntu2204-base", exceptions.NotFound, "not a Cloud TPU zone"),
    (f"{PROJECT}/locations/us-central2", "v4-8", "tpu-ubuntu2204-base", exceptions.NotFound, "not a Cloud TPU zone"),
    (ZONE, "v5litepod-8", "v2-alpha-tpuv5-lite", exceptions.InvalidArgument, "'v5litepod-8' is not available in "
                                                                             "us-central2-b"),
    (ZONE, "v4-12", "tpu-ubuntu2204-base", exceptions.InvalidArgument, "multiples of 8"),
    (ZONE, "v4-8", "v2-alpha-tpuv6e", exceptions.InvalidArgument, "'v2-alpha-tpuv6e' is not available"),
    (ZONE, "v4-8", "tpu-ubuntu2404-basee", exceptions.InvalidArgument, "ListRuntimeVersions"),
    (f"{PROJECT}/locations/us-central1-b", "v2-32", "tpu-ubuntu2204-base", exceptions.InvalidArgument,
     "'v2-32' is not available in us-central1-b"),  # v2-8 only there; v2-32 in us-central1-a
])
def test_what_the_zone_does_not_offer_is_refused(resilient_emulator, parent, accelerator_type, runtime_version,
                                                 error, says):
    client = tpu_client()
    with pytest.raises(error, match=says):
        client.create_node(parent=parent, node_id="train", node=node(accelerator_type, runtime_version))
    with pytest.raises(error, match=says):
        client.create_queued_resource(parent=parent, queued_resource_id="qr", queued_resource={
            "tpu": {"node_spec": [{"parent": parent, "node_id": "train", "node": node(accelerator_type,
                                                                                      runtime_version)}]}})
    assert [c.code for c in resilient_emulator.calls.list("CreateNode")] == [error.grpc_status_code.name]


def test_the_escape_hatches_stand_for_what_google_offers_now(resilient_emulator, monkeypatch):
    monkeypatch.setenv("RESILIENT_EXTRA_ZONES", "us-central2-b")  # v6e offered there now
    monkeypatch.setenv("RESILIENT_EXTRA_RUNTIME_VERSIONS", "tpu-ubuntu2404-base")
    tpu_client().create_node(parent=ZONE, node_id="new", node=node("v6e-8", "tpu-ubuntu2404-base"))
    assert "v6e-8" in {t.type_ for t in tpu_client().list_accelerator_types(parent=ZONE)}


def test_accelerator_types_are_listed_page_by_page_and_got_one_by_one(resilient_emulator):
    client = tpu_client()
    listed = list(client.list_accelerator_types(request={"parent": ZONE, "page_size": 100}))
    assert [t.type_ for t in listed] == [f"v4-{n}" for n in range(8, 8193, 8)]  # every v4 slice, nothing else
    assert resilient_emulator.calls.count("ListAcceleratorTypes") == 11  # 1024 types, 100 a page
    v4_32 = next(t for t in listed if t.type_ == "v4-32")
    assert v4_32.name == f"{ZONE}/acceleratorTypes/v4-32"
    assert [(c.type_.name, c.topology) for c in v4_32.accelerator_configs] == [("V4", "2x2x4")]
    got = client.get_accelerator_type(name=f"{ZONE}/acceleratorTypes/v4-8")
    assert got.type_ == "v4-8" and got.accelerator_configs[0].topology == "2x2x1"
    europe = f"{PROJECT}/locations/europe-west4-b"
    assert client.get_accelerator_type(name=f"{europe}/acceleratorTypes/v5litepod-16").accelerator_configs[0].topology \
        == "4x4"
    with pytest.raises(exceptions.NotFound):
        client.get_accelerator_type(name=f"{ZONE}/acceleratorTypes/v5litepod-8")  # not offered in the zone
    with pytest.raises(exceptions.NotFound):
        client.get_accelerator_type(name=f"{PROJECT}/locations/mars-north1-a/acceleratorTypes/v4-8")
    with pytest.raises(exceptions.NotFound):
        list(client.list_accelerator_types(parent=f"{PROJECT}/locations/us-central1"))  # a region, not a zone


def test_runtime_versions_are_listed_and_got(resilient_emulator):
    client = tpu_client()
    lite = f"{PROJECT}/locations/us-west4-a"  # v5e only
    assert [v.version for v in client.list_runtime_versions(parent=lite)] == ["v2-alpha-tpuv5-lite"]
    listed = list(client.list_runtime_versions(request={"parent": ZONE, "page_size": 2}))
    assert "tpu-ubuntu2204-base" in {v.version for v in listed} and "v2-alpha-tpuv6e" not in {v.version for v in listed}
    assert resilient_emulator.calls.count("ListRuntimeVersions") == 1 + (len(listed) + 1) // 2
    got = client.get_runtime_version(name=f"{ZONE}/runtimeVersions/tpu-ubuntu2204-base")
    assert (got.name, got.version) == (f"{ZONE}/runtimeVersions/tpu-ubuntu2204-base", "tpu-ubuntu2204-base")
    with pytest.raises(exceptions.NotFound):
        client.get_runtime_version(name=f"{lite}/runtimeVersions/tpu-ubuntu2204-base")


def test_locations_are_cloud_tpus_zones(resilient_emulator):
    client = tpu_client()
    listed = client.list_locations(request={"name": PROJECT})
    assert [loc.location_id for loc in listed.locations] == sorted(spec.TPU_ZONES)
    assert listed.locations[0].name == f"{PROJECT}/locations/{listed.locations[0].location_id}"
    page = client.list_locations(request={"name": PROJECT, "page_size": 5})  # the mixin does not page: the token
    assert len(page.locations) == 5 and page.next_page_token
    rest = client.list_locations(request={"name": PROJECT, "page_token": page.next_page_token})
    assert [loc.location_id for loc in page.locations] + [loc.location_id for loc in rest.locations] == \
        sorted(spec.TPU_ZONES)
    assert client.get_location(request={"name": ZONE}).location_id == "us-central2-b"
    with pytest.raises(exceptions.NotFound):
        client.get_location(request={"name": f"{PROJECT}/locations/us-central1"})


def _candidates() -> list[str]:
    """Every name of every family up to its largest slice (v4 / v5p: every multiple of 4), and a few that are not
    types at all."""
    names = ["v5e-8", "v7-8", "v4-0", "V4-8"]
    for family, largest in spec.MAX_SLICE.items():
        step = 4 if family in ("v4", "v5p") else 1
        names += [f"{family}-{n}" for n in range(step, largest + 1, step)]
    return names


def test_the_parse_time_checks_accept_in_each_zone_exactly_what_the_emulator_serves_there(resilient_emulator):
    client, candidates = tpu_client(), _candidates()
    runtimes = [*catalog().runtime_versions, "tpu-ubuntu2404-base", "tpu-vm-tf-9.9.9"]
    for zone in sorted(spec.TPU_ZONES):
        parent = f"{PROJECT}/locations/{zone}"
        served = {t.type_ for t in client.list_accelerator_types(request={"parent": parent, "page_size": 1000})}
        accepted = {t for t in candidates if not spec.accelerator_in_zone_problems("accelerator_type", t, zone)}
        assert served == accepted, (zone, sorted(served ^ accepted)[:10])
        served_runtimes = {v.version for v in client.list_runtime_versions(parent=parent)}
        accepted_runtimes = {r for r in runtimes if not spec.runtime_version_problems(r, zone)}
        assert served_runtimes == accepted_runtimes, (zone, sorted(served_runtimes ^ accepted_runtimes))
    assert any(catalog().tpu_types_in(z) for z in spec.TPU_ZONES)
