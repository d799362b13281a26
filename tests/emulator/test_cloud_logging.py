"""Cloud Logging in the emulator: the LogStore verbs, and the real clients over gRPC finding TPU audit events.

The TPU events are the ones seed 002 tells operators to look for ("In den Audit-Logs zu Systemereignissen ...
suchen Sie ... ``"tpu.nodes.terminate" OR "tpu.nodes.restart"`` ... der Grund ... in
``protoPayload.metadata.terminateReason``"), plus a stockout: a failed CreateNode with severity ERROR and
status 8 RESOURCE_EXHAUSTED (REFERENCE.md "Cloud Logging").
"""

from __future__ import annotations

import subprocess
import sys
from concurrent import futures
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_provider_resilient.logging_clients import logging_client, logging_gapic_client
from airflow_provider_resilient.testing.emulator.calls import CallLog
from airflow_provider_resilient.testing.emulator.cloud_logging import LogStore, logging_service_handler
from airflow_provider_resilient.testing.emulator.errors import InvalidArgument
from airflow_provider_resilient.testing.emulator_clients import EMULATOR_HOST_ENV

PROJECT = "my-project"
ZONE = "us-central2-b"
NODE = f"projects/{PROJECT}/locations/{ZONE}/nodes/my-node"
OTHER_NODE = f"projects/{PROJECT}/locations/{ZONE}/nodes/other-node"
SYSTEM_EVENT = f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fsystem_event"
TERMINATE_REASON = "Maintenance event: the TPU host is being updated."
STOCKOUT = (f'There is no more capacity in the zone "{ZONE}"; you can try in another zone where Cloud TPU Nodes '
            "are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0x1a2b3c4d]")
CREATE_NODE = "google.cloud.tpu.v2.Tpu.CreateNode"
T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def rfc3339(stamp: datetime) -> str:
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def add_tpu_events(store: LogStore, now: datetime) -> None:
    """Seed 002's maintenance events and a stockout, 3 h, 2 h and 1 h before ``now``."""
    tpu = "tpu.googleapis.com"
    store.add_audit_entry(PROJECT, service_name=tpu, method_name="tpu.nodes.terminate", resource_name=NODE,
                          terminate_reason=TERMINATE_REASON, timestamp=now - timedelta(hours=3))
    store.add_audit_entry(PROJECT, service_name=tpu, method_name="tpu.nodes.restart", resource_name=OTHER_NODE,
                          timestamp=now - timedelta(hours=2))
    store.add_audit_entry(PROJECT, service_name=tpu, method_name=CREATE_NODE, resource_name=NODE,
                          severity="ERROR", status_code=8, status_message=STOCKOUT,
                          log="cloudaudit.googleapis.com%2Factivity", timestamp=now - timedelta(hours=1))


def audit_method(entry: Any) -> str:
    """``protoPayload.methodName`` of an entry from either client."""
    payload = getattr(entry, "payload", None)
    if isinstance(payload, dict):  # high-level ProtobufEntry
        return str(payload["methodName"])
    from google.cloud.audit import audit_log_pb2

    audit = audit_log_pb2.AuditLog()
    assert entry.proto_payload.Unpack(audit)
    return audit.method_name


# ---------------------------------------------------------------------- the LogStore verbs
@pytest.fixture
def store() -> LogStore:
    return LogStore(clock=lambda: T0)


def severity_name(entry: Any) -> str:
    from google.logging.type.log_severity_pb2 import LogSeverity

    return str(LogSeverity.Name(entry.severity))


def names(entries: list[Any]) -> list[str]:
    return [e.text_payload for e in entries]


def write_texts(store: LogStore, *texts: str, log: str = "app", project: str = PROJECT, **kw: Any) -> None:
    store.write_log_entries(f"projects/{project}/logs/{log}", {"type": "global"}, None,
                            [{"text_payload": t, **kw} for t in texts])


def test_write_completes_entries_from_the_request_defaults_and_entries_override_them(store):
    written = store.write_log_entries(
        f"projects/{PROJECT}/logs/default", {"type": "global", "labels": {"project_id": PROJECT}},
        {"team": "ml", "env": "dev"},
        [{"text_payload": "plain"},
         {"text_payload": "own", "log_name": f"projects/{PROJECT}/logs/own", "labels": {"env": "prod"},
          "resource": {"type": "tpu_worker"}, "timestamp": T0 - timedelta(minutes=5), "insert_id": "mine"}])
    plain, own = written
    assert plain.log_name.endswith("/logs/default") and plain.resource.type == "global"
    assert dict(plain.labels) == {"team": "ml", "env": "dev"}
    assert plain.timestamp == T0 == plain.receive_timestamp and plain.insert_id
    assert own.log_name.endswith("/logs/own") and own.resource.type == "tpu_worker"
    assert dict(own.labels) == {"team": "ml", "env": "prod"}
    assert own.timestamp == T0 - timedelta(minutes=5) and own.receive_timestamp == T0 and own.insert_id == "mine"


def test_write_rejects_entries_without_a_log_name_or_resource_unless_partial_success(store):
    good = {"text_payload": "good", "log_name": f"projects/{PROJECT}/logs/app", "resource": {"type": "global"}}
    bad = [{"text_payload": "no log"}, {"text_payload": "no resource", "log_name": f"projects/{PROJECT}/logs/x"},
           {"text_payload": "bad name", "log_name": "logs/x", "resource": {"type": "global"}}]
    with pytest.raises(InvalidArgument, match=r"entries\[1\].*entries\[2\].*entries\[3\]"):
        store.write_log_entries(entries=[good, *bad])
    assert store.list_log_entries([f"projects/{PROJECT}"])[0] == []
    with pytest.raises(InvalidArgument):
        store.write_log_entries(entries=[good, *bad], partial_success=True)
    assert names(store.list_log_entries([f"projects/{PROJECT}"])[0]) == ["good"]
    store.write_log_entries(entries=[good], dry_run=True)
    assert len(store.list_log_entries([f"projects/{PROJECT}"])[0]) == 1
    with pytest.raises(InvalidArgument, match="entries"):
        store.write_log_entries(f"projects/{PROJECT}/logs/app", {"type": "global"}, None, [])


def test_list_returns_only_entries_under_the_resource_names(store):
    write_texts(store, "a1", "a2", project="a")
    write_texts(store, "b1", project="b")
    assert names(store.list_log_entries(["projects/a"])[0]) == ["a1", "a2"]
    assert names(store.list_log_entries(["projects/b", "projects/a"])[0]) == ["a1", "a2", "b1"]
    assert names(store.list_log_entries(["projects/b/locations/global/buckets/_Default/views/_AllLogs"])[0]) == ["b1"]
    assert store.list_logs(["projects/a"]) == (["projects/a/logs/app"], "")
    for bad in ([], ["my-project"]):
        with pytest.raises(InvalidArgument, match="resource"):
            store.list_log_entries(bad)


def test_list_orders_by_timestamp_and_pages(store):
    for minutes, text in ((2, "second"), (3, "third"), (1, "first")):
        write_texts(store, text, timestamp=T0 + timedelta(minutes=minutes))
    parent = [f"projects/{PROJECT}"]
    assert names(store.list_log_entries(parent)[0]) == ["first", "second", "third"]
    assert names(store.list_log_entries(parent, order_by="timestamp desc")[0]) == ["third", "second", "first"]
    seen, token = [], ""
    for _ in range(3):
        page, token = store.list_log_entries(parent, page_size=1, page_token=token)
        seen += names(page)
    assert seen == ["first", "second", "third"] and token == ""
    with pytest.raises(InvalidArgument, match="order_by"):
        store.list_log_entries(parent, order_by="severity")
    with pytest.raises(InvalidArgument, match="page_token"):
        store.list_log_entries(parent, page_token="nonsense")


@pytest.mark.parametrize("filter_text", [
    'resource.labels.job_id="7"', "resource.labels.job_id=7.0",  # numbers compare by value: "07" matches too
    'resource.type="ml_job" AND resource.labels.task_name="workerpool0-1" AND textPayload=~"step [0-9]+"',
    'logName="projects/my-project/logs/workerpool0-0" resource.labels.job_id=8',
    'log_name="projects/my-project/logs/other" OR resource.labels.job_id=8',  # an OR: no index
    'resource.labels.job_id="7" AND resource.labels.job_id="8"',  # contradictory: nothing
    "-resource.labels.job_id=7", "resource.labels.missing=1", "",
])
@pytest.mark.parametrize("order", ["timestamp asc", "timestamp desc"])
def test_indexed_listing_finds_what_evaluating_every_entry_finds(store, filter_text, order):
    """The store looks up ``logName``, ``resource.type`` and ``resource.labels`` restrictions in an index and
    matches lazily up to the page; every page must still be what filtering every entry gives."""
    from airflow_provider_resilient.testing.emulator.filters import compile_filter

    for n in range(40):
        job = ("7", "07", "8", "9")[n % 4]
        store.write_log_entries(f"projects/{PROJECT}/logs/{'workerpool0-0' if n % 3 else 'other'}",
                                {"type": "ml_job" if n % 5 else "global",
                                 "labels": {"job_id": job, "task_name": f"workerpool0-{n % 2}"}}, None,
                                [{"text_payload": f"step {n}" if n % 7 else "hello",
                                  "timestamp": T0 + timedelta(seconds=(n * 17) % 40)}])  # not in write order
    predicate = compile_filter(filter_text)
    everything = sorted(((e.timestamp, i, e) for i, e in enumerate(store.list_log_entries(
        [f"projects/{PROJECT}"], page_size=1000)[0])), key=lambda x: x[:2], reverse=order.endswith("desc"))
    expected = [e.text_payload for _, _, e in everything if predicate(store_view(e))]
    pages, token = [], ""
    while True:
        page, token = store.list_log_entries([f"projects/{PROJECT}"], filter_text, order, page_size=3, page_token=token)
        pages += names(page)
        if not token:
            break
    assert pages == expected


def store_view(entry: Any) -> dict[str, Any]:
    from airflow_provider_resilient.testing.emulator.cloud_logging.service import _filter_view

    return _filter_view(entry)


def test_audit_entry_has_the_shape_of_a_tpu_system_event(store):
    add_tpu_events(store, T0)
    terminate, restart, create = store.list_log_entries([f"projects/{PROJECT}"])[0]
    assert terminate.log_name == restart.log_name == SYSTEM_EVENT
    assert create.log_name == f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Factivity"
    assert terminate.resource.type == "audited_resource"
    assert dict(terminate.resource.labels) == {"project_id": PROJECT, "service": "tpu.googleapis.com",
                                               "method": "tpu.nodes.terminate"}
    assert (severity_name(terminate), severity_name(create)) == ("NOTICE", "ERROR")
    from google.cloud.audit import audit_log_pb2

    audit = audit_log_pb2.AuditLog()
    assert terminate.proto_payload.Unpack(audit)
    assert (audit.service_name, audit.method_name, audit.resource_name) == ("tpu.googleapis.com",
                                                                            "tpu.nodes.terminate", NODE)
    assert audit.metadata["terminateReason"] == TERMINATE_REASON
    assert create.proto_payload.Unpack(audit) and (audit.status.code, audit.status.message) == (8, STOCKOUT)


@pytest.mark.parametrize(("filter_text", "expected"), [
    ('protoPayload.methodName="tpu.nodes.terminate"', ["tpu.nodes.terminate"]),
    ('"tpu.nodes.terminate" OR "tpu.nodes.restart"', ["tpu.nodes.terminate", "tpu.nodes.restart"]),
    ('resource.type="audited_resource" AND severity>=ERROR', [CREATE_NODE]),
    ('protoPayload.resourceName:"nodes/my-node"', ["tpu.nodes.terminate", CREATE_NODE]),
    ("protoPayload.metadata.terminateReason:*", ["tpu.nodes.terminate"]),
    ("protoPayload.status.code=8", [CREATE_NODE]),
    (f'logName="{SYSTEM_EVENT}"', ["tpu.nodes.terminate", "tpu.nodes.restart"]),
    (f'timestamp>="{rfc3339(T0 - timedelta(minutes=90))}"', [CREATE_NODE]),
    ('timestamp>="2026-11-21T07:30:00.000000+0000"', ["tpu.nodes.restart", CREATE_NODE]),  # the client's %z form
    ('timestamp>="now-150m" AND severity=NOTICE', ["tpu.nodes.restart"]),
    ("severity=DEFAULT", []),
])  # fmt: skip
def test_filters_see_entries_as_cloud_logging_does(store, filter_text, expected):
    add_tpu_events(store, T0)
    write_texts(store, "unrelated text", log="app", severity="INFO", timestamp=T0 - timedelta(hours=5))
    assert [audit_method(e) for e in store.list_log_entries([f"projects/{PROJECT}"], filter_text)[0]] == expected


def test_an_entry_without_severity_is_default(store):
    write_texts(store, "quiet")
    assert names(store.list_log_entries([f"projects/{PROJECT}"], "severity=DEFAULT")[0]) == ["quiet"]
    assert names(store.list_log_entries([f"projects/{PROJECT}"], "severity<INFO")[0]) == ["quiet"]


def test_a_bad_filter_is_invalid_argument(store):
    with pytest.raises(InvalidArgument, match="Invalid filter"):
        store.list_log_entries([f"projects/{PROJECT}"], 'protoPayload.methodName="unterminated')


def test_reset_forgets_every_entry(store):
    add_tpu_events(store, T0)
    store.reset()
    assert store.list_log_entries([f"projects/{PROJECT}"]) == ([], "")


# ---------------------------------------------------------------------- the real clients over gRPC
@dataclass
class Served:
    store: LogStore
    calls: CallLog
    host: str


@pytest.fixture
def served() -> Any:
    import grpc

    store, calls = LogStore(), CallLog()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((logging_service_handler(store, calls),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield Served(store, calls, f"127.0.0.1:{port}")
    server.stop(grace=None)


@pytest.fixture
def gapic(served: Served) -> Any:
    return logging_gapic_client(emulator=served.host)


@pytest.fixture
def client(served: Served) -> Any:
    return logging_client(PROJECT, emulator=served.host)


@pytest.fixture
def tpu_events(served: Served) -> datetime:
    now = datetime.now(UTC)
    add_tpu_events(served.store, now)
    return now


def list_with(which: str, gapic: Any, client: Any, filter_text: str, **kw: Any) -> list[Any]:
    if which == "gapic":  # page_size is not a flattened argument of the generated method
        request = {"resource_names": [f"projects/{PROJECT}"], "filter": filter_text, **kw}
        return list(gapic.list_log_entries(request=request))
    return list(client.list_entries(filter_=filter_text, **kw))


def test_generated_client_writes_and_lists_entries(served, gapic):
    from google.cloud.logging_v2.types import LogEntry

    gapic.write_log_entries(log_name=f"projects/{PROJECT}/logs/trainer", resource={"type": "global"},
                            labels={"dag": "train"},
                            entries=[LogEntry(text_payload="step 1", severity="INFO"),
                                     LogEntry(text_payload="step 2 failed", severity="ERROR")])
    found = list(gapic.list_log_entries(resource_names=[f"projects/{PROJECT}"],
                                        filter='labels.dag="train" AND severity>=ERROR'))
    assert [(e.text_payload, e.log_name) for e in found] == [("step 2 failed", f"projects/{PROJECT}/logs/trainer")]
    assert [c.code for c in served.calls.list()] == ["OK", "OK"]
    assert [c.method for c in served.calls.list()] == ["WriteLogEntries", "ListLogEntries"]
    assert list(gapic.list_logs(parent=f"projects/{PROJECT}")) == [f"projects/{PROJECT}/logs/trainer"]


def test_high_level_client_round_trips_struct_and_text_entries(client):
    logger = client.logger("trainer")  # the emulator's client skips the metadata-server probe: resource global
    assert (logger.default_resource.type, logger.default_resource.labels) == ("global", {"project_id": PROJECT})
    logger.log_struct({"event": "checkpoint", "step": 1200}, severity="warning", labels={"dag": "train"})
    logger.log_text("resumed from step 1200")
    structs = list(client.list_entries(filter_='jsonPayload.event="checkpoint"'))
    assert [(e.payload, e.severity, e.labels) for e in structs] == [
        ({"event": "checkpoint", "step": 1200.0}, "WARNING", {"dag": "train"})]
    texts = list(logger.list_entries(filter_='textPayload:"resumed"'))
    assert [(e.payload, e.log_name) for e in texts] == [("resumed from step 1200", f"projects/{PROJECT}/logs/trainer")]


@pytest.mark.parametrize("which", ["gapic", "high-level"])
@pytest.mark.parametrize(("filter_text", "expected"), [
    ('protoPayload.methodName="tpu.nodes.terminate"', ["tpu.nodes.terminate"]),
    ('"tpu.nodes.terminate" OR "tpu.nodes.restart"', ["tpu.nodes.terminate", "tpu.nodes.restart"]),
    ('resource.type="audited_resource" AND severity>=ERROR', [CREATE_NODE]),
    ('protoPayload.resourceName:"nodes/my-node"', ["tpu.nodes.terminate", CREATE_NODE]),
])  # fmt: skip
def test_both_clients_find_tpu_events_with_seed_filters(tpu_events, gapic, client, which, filter_text, expected):
    assert [audit_method(e) for e in list_with(which, gapic, client, filter_text)] == expected


@pytest.mark.parametrize("which", ["gapic", "high-level"])
def test_both_clients_filter_on_timestamps_and_order_descending(tpu_events, gapic, client, which):
    since = f'timestamp>="{rfc3339(tpu_events - timedelta(minutes=150))}"'
    assert [audit_method(e) for e in list_with(which, gapic, client, since)] == ["tpu.nodes.restart", CREATE_NODE]
    audited = 'resource.type="audited_resource"'
    descending = list_with(which, gapic, client, audited, order_by="timestamp desc")
    assert [audit_method(e) for e in descending] == [CREATE_NODE, "tpu.nodes.restart", "tpu.nodes.terminate"]


def test_high_level_client_default_time_window_is_24_hours(served, client, tpu_events):
    served.store.add_audit_entry(PROJECT, service_name="tpu.googleapis.com", method_name="tpu.nodes.terminate",
                                 resource_name=NODE, timestamp=tpu_events - timedelta(hours=48))
    seed_filter = '"tpu.nodes.terminate"'
    assert len(list(client.list_entries(filter_=seed_filter))) == 1
    assert 'timestamp>="' in served.calls.list("ListLogEntries")[-1].request  # added by the library
    week = f'{seed_filter} AND timestamp>="{rfc3339(tpu_events - timedelta(days=7))}"'
    assert len(list(client.list_entries(filter_=week))) == 2


@pytest.mark.parametrize("which", ["gapic", "high-level"])
def test_both_clients_page_one_entry_at_a_time(served, tpu_events, gapic, client, which):
    entries = list_with(which, gapic, client, 'protoPayload.serviceName="tpu.googleapis.com"', page_size=1)
    assert [audit_method(e) for e in entries] == ["tpu.nodes.terminate", "tpu.nodes.restart", CREATE_NODE]
    assert served.calls.count("ListLogEntries") == 3


def test_high_level_entry_payload_carries_the_terminate_reason(tpu_events, client):
    (entry,) = client.list_entries(filter_='protoPayload.methodName="tpu.nodes.terminate"')
    assert type(entry).__name__ == "ProtobufEntry"
    assert entry.payload["@type"] == "type.googleapis.com/google.cloud.audit.AuditLog"
    assert entry.payload["metadata"]["terminateReason"] == TERMINATE_REASON
    assert (entry.log_name, entry.severity, entry.resource.type) == (SYSTEM_EVENT, "NOTICE", "audited_resource")
    (stockout,) = client.list_entries(filter_="severity>=ERROR")
    assert stockout.payload["status"] == {"code": 8, "message": STOCKOUT}


@pytest.mark.parametrize("which", ["gapic", "high-level"])
def test_a_bad_filter_raises_invalid_argument(served, gapic, client, which):
    from google.api_core.exceptions import InvalidArgument as ApiInvalidArgument

    with pytest.raises(ApiInvalidArgument, match="Invalid filter"):
        list_with(which, gapic, client, "protoPayload.methodName=(")
    assert served.calls.list("ListLogEntries")[-1].code == "INVALID_ARGUMENT"


# ---------------------------------------------------------------------- logging_clients
def test_the_emulators_clients_follow_its_environment_variable_and_the_providers_do_not(served, tpu_events,
                                                                                        monkeypatch):
    from google.auth.credentials import AnonymousCredentials

    from airflow_provider_resilient.testing import emulator_clients

    monkeypatch.setenv(EMULATOR_HOST_ENV, served.host)
    assert len(list(emulator_clients.logging_gapic_client().list_log_entries(
        resource_names=[f"projects/{PROJECT}"]))) == 3
    assert len(list(emulator_clients.logging_client(PROJECT).list_entries())) == 3
    # The provider's own factory goes to Google unless told otherwise: the variable switches nothing there.
    assert logging_gapic_client(credentials=AnonymousCredentials()).api_endpoint == "logging.googleapis.com"
    monkeypatch.delenv(EMULATOR_HOST_ENV)
    with pytest.raises(RuntimeError, match="no emulator"):
        emulator_clients.logging_client(PROJECT)


def test_without_override_the_generated_client_uses_google(monkeypatch):
    from google.auth.credentials import AnonymousCredentials

    monkeypatch.delenv(EMULATOR_HOST_ENV, raising=False)
    assert logging_gapic_client(credentials=AnonymousCredentials()).api_endpoint == "logging.googleapis.com"


def test_importing_logging_clients_imports_no_google_library():
    code = ("import sys, airflow_provider_resilient.logging_clients;"
            "bad = [m for m in sys.modules if m.startswith(('google.', 'grpc')) and m != 'google.cloud'];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
