"""Cloud Logging sinks in the emulator, through the real ``ConfigServiceV2Client``: the sink RPCs, and entries routed
to a Pub/Sub topic as they are written ("Route logs to supported destinations",
https://cloud.google.com/logging/docs/export/configure_export_v2; the message is the LogEntry in JSON with the
``logging.googleapis.com/timestamp`` attribute: "View logs routed to Pub/Sub",
https://cloud.google.com/logging/docs/export/pubsub) -- entries written by a client, TPU audit events, and the
Vertex AI service's entry for a replica that exited with a non-zero status.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from google.api_core import exceptions
from google.cloud.logging_v2.services.config_service_v2 import ConfigServiceV2Client
from google.cloud.logging_v2.services.config_service_v2.transports import ConfigServiceV2GrpcTransport
from google.pubsub_v1 import PublisherClient, SubscriberClient
from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

from airflow_provider_resilient.testing.emulator.cloud_logging import LogStore
from airflow_provider_resilient.testing.emulator.cloud_logging.sinks import TIMESTAMP_ATTRIBUTE
from airflow_provider_resilient.testing.emulator.errors import NotFound
from airflow_provider_resilient.testing.emulator_clients import logging_gapic_client

from .conftest import PARENT, custom_job, pool

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)

PROJECT = "test-project"  # conftest's PARENT project: the Vertex AI jobs' logs are there
TOPIC = f"projects/{PROJECT}/topics/platform-events"
SUB = f"projects/{PROJECT}/subscriptions/watcher"
DESTINATION = f"pubsub.googleapis.com/{TOPIC}"
SINK = f"projects/{PROJECT}/sinks/platform-events"
TPU_FILTER = 'protoPayload.serviceName="tpu.googleapis.com"'
VERTEX_FILTER = 'resource.type="ml_job" AND severity>=ERROR'


@pytest.fixture
def config(channel: Any) -> ConfigServiceV2Client:
    return ConfigServiceV2Client(transport=ConfigServiceV2GrpcTransport(channel=channel))


@pytest.fixture
def subscription(channel: Any, subscriber: SubscriberClient) -> str:
    """The topic and a subscription of it that sees every routed entry."""
    PublisherClient(transport=PublisherGrpcTransport(channel=channel)).create_topic(name=TOPIC)
    subscriber.create_subscription(name=SUB, topic=TOPIC)
    return SUB


def sink(config: ConfigServiceV2Client, filter_text: str, name: str = "platform-events",
         parent: str = f"projects/{PROJECT}", destination: str = DESTINATION) -> Any:
    return config.create_sink(parent=parent, sink={"name": name, "destination": destination, "filter": filter_text})


def routed(subscriber: SubscriberClient) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """The entries on the subscription now (JSON data, attributes), acknowledged."""
    got = list(subscriber.pull(subscription=SUB, max_messages=100, return_immediately=True).received_messages)
    if got:
        subscriber.acknowledge(subscription=SUB, ack_ids=[r.ack_id for r in got])
    return [(json.loads(r.message.data), dict(r.message.attributes)) for r in got]


# ---------------------------------------------------------------------- the sink RPCs
def test_sinks_are_created_read_listed_updated_and_deleted(config):
    created = sink(config, "severity>=ERROR")
    assert created.name == "platform-events" and created.destination == DESTINATION
    assert created.filter == "severity>=ERROR"
    assert created.writer_identity.startswith("serviceAccount:service-")
    assert created.writer_identity.endswith("@gcp-sa-logging.iam.gserviceaccount.com")
    assert created.create_time == created.update_time
    assert config.get_sink(sink_name=SINK) == created
    sink(config, "", name="another")
    assert [s.name for s in config.list_sinks(parent=f"projects/{PROJECT}")] == ["another", "platform-events"]
    assert list(config.list_sinks(parent="projects/elsewhere")) == []
    updated = config.update_sink(sink_name=SINK, sink={"filter": "severity>=WARNING", "description": "ignored"},
                                 update_mask={"paths": ["filter"]})
    assert updated.filter == "severity>=WARNING" and updated.description == ""
    assert updated.writer_identity == created.writer_identity
    config.delete_sink(sink_name=SINK)
    with pytest.raises(exceptions.NotFound):
        config.get_sink(sink_name=SINK)
    with pytest.raises(exceptions.NotFound):
        config.delete_sink(sink_name=SINK)


def test_a_second_sink_of_the_same_name_is_already_exists(config):
    sink(config, "")
    with pytest.raises(exceptions.AlreadyExists):
        sink(config, "severity>=ERROR")


@pytest.mark.parametrize(("sink_fields", "field"), [
    ({"name": "s", "destination": DESTINATION, "filter": "severity>=ERROR AND ("}, "sink.filter"),
    ({"name": "s", "destination": DESTINATION, "filter": "a=1)"}, "sink.filter"),
    ({"name": "s", "destination": "pubsub.googleapis.com/topics/x", "filter": ""}, "sink.destination"),
    ({"name": "s", "destination": "", "filter": ""}, "sink.destination"),
    ({"name": "bad/name", "destination": DESTINATION, "filter": ""}, "sink.name"),
    ({"name": "s", "destination": DESTINATION, "exclusions": [{"name": "x", "filter": "("}]},
     "sink.exclusions[0].filter"),
], ids=["unclosed", "stray-paren", "destination", "no-destination", "name", "exclusion"])
def test_a_bad_sink_is_refused_naming_the_field(config, sink_fields, field):
    with pytest.raises(exceptions.InvalidArgument, match=f"^400 {re.escape(field)}: "):
        config.create_sink(parent=f"projects/{PROJECT}", sink=sink_fields)
    assert list(config.list_sinks(parent=f"projects/{PROJECT}")) == []


# ---------------------------------------------------------------------- routing
def test_a_matching_entry_arrives_on_the_topic_as_json_with_its_timestamp(config, subscription, subscriber,
                                                                          resilient_emulator):
    sink(config, 'severity>=ERROR AND logName:"trainer"')
    writer = logging_gapic_client(emulator=resilient_emulator.address)
    stamp = datetime(2026, 11, 21, 10, 0, 0, 123456, tzinfo=UTC)
    writer.write_log_entries(log_name=f"projects/{PROJECT}/logs/trainer", resource={"type": "global"},
                             labels={"run": "r1"},
                             entries=[{"text_payload": "loss exploded", "severity": "ERROR", "timestamp": stamp},
                                      {"text_payload": "step 1", "severity": "INFO"}])
    writer.write_log_entries(log_name=f"projects/{PROJECT}/logs/other", resource={"type": "global"},
                             entries=[{"text_payload": "not the trainer's", "severity": "ERROR"}])
    writer.write_log_entries(log_name="projects/other-project/logs/trainer", resource={"type": "global"},
                             entries=[{"text_payload": "another project's", "severity": "ERROR"}])
    [(entry, attributes)] = routed(subscriber)
    assert entry["textPayload"] == "loss exploded" and entry["severity"] == "ERROR"
    assert entry["logName"] == f"projects/{PROJECT}/logs/trainer"
    assert entry["resource"] == {"type": "global"} and entry["labels"] == {"run": "r1"}
    assert entry["timestamp"] == "2026-11-21T10:00:00.123456Z" and entry["insertId"] and entry["receiveTimestamp"]
    assert attributes == {TIMESTAMP_ATTRIBUTE: "2026-11-21T10:00:00.123456Z"}
    [stored], _ = resilient_emulator.logging.list_log_entries([f"projects/{PROJECT}"], "severity>=ERROR "
                                                              'logName:"trainer"')
    assert stored.insert_id == entry["insertId"]


def test_an_update_or_an_exclusion_changes_what_is_routed(config, subscription, subscriber, resilient_emulator):
    sink(config, "severity>=ERROR")
    store = resilient_emulator.logging

    def write(text: str, severity: str) -> None:
        store.write_log_entries(f"projects/{PROJECT}/logs/app", {"type": "global"}, None,
                                [{"text_payload": text, "severity": severity}])

    write("warned", "WARNING")
    assert routed(subscriber) == []
    config.update_sink(sink_name=SINK, sink={"filter": "severity>=WARNING",
                                             "exclusions": [{"name": "noise", "filter": 'textPayload:"noise"'}]},
                       update_mask={"paths": ["filter", "exclusions"]})
    write("warned again", "WARNING")
    write("noise", "ERROR")
    assert [e["textPayload"] for e, _ in routed(subscriber)] == ["warned again"]
    config.update_sink(sink_name=SINK, sink={"disabled": True}, update_mask={"paths": ["disabled"]})
    write("while disabled", "ERROR")
    assert routed(subscriber) == []


def test_an_entry_goes_to_every_matching_sink_and_a_missing_topic_drops_it_quietly(config, subscription,
                                                                                 subscriber, resilient_emulator,
                                                                                 caplog):
    sink(config, "severity>=ERROR", name="first")
    sink(config, 'textPayload:"boom"', name="second")
    sink(config, "", name="lost", destination=f"pubsub.googleapis.com/projects/{PROJECT}/topics/never-made")
    sink(config, "", name="bucket", destination="storage.googleapis.com/my-bucket")
    with caplog.at_level(logging.DEBUG, logger="airflow_provider_resilient.testing.emulator.cloud_logging"):
        resilient_emulator.logging.write_log_entries(f"projects/{PROJECT}/logs/app", {"type": "global"}, None,
                                                     [{"text_payload": "boom", "severity": "ERROR"}])
    assert [e["textPayload"] for e, _ in routed(subscriber)] == ["boom", "boom"]
    assert "never-made" in caplog.text


def test_a_tpu_maintenance_audit_entry_is_routed(config, subscription, subscriber, resilient_emulator):
    sink(config, TPU_FILTER)
    node = f"projects/{PROJECT}/locations/us-central2-b/nodes/my-node"
    resilient_emulator.logging.add_audit_entry(PROJECT, service_name="tpu.googleapis.com",
                                               method_name="tpu.nodes.terminate", resource_name=node,
                                               terminate_reason="Maintenance event: the TPU host is being updated.")
    resilient_emulator.logging.add_audit_entry(PROJECT, service_name="compute.googleapis.com",
                                               method_name="v1.compute.instances.stop", resource_name="vm")
    [(entry, attributes)] = routed(subscriber)
    payload = entry["protoPayload"]
    assert payload["@type"] == "type.googleapis.com/google.cloud.audit.AuditLog"
    assert payload["methodName"] == "tpu.nodes.terminate" and payload["resourceName"] == node
    assert payload["metadata"] == {"terminateReason": "Maintenance event: the TPU host is being updated."}
    assert entry["logName"] == f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fsystem_event"
    assert attributes[TIMESTAMP_ATTRIBUTE] == entry["timestamp"]


def test_a_log_store_alone_routes_nothing_and_a_failing_router_never_fails_a_write():
    store = LogStore()
    store.sinks.create_sink("projects/p", {"name": "s", "destination": "pubsub.googleapis.com/projects/p/topics/"
                                                                       "events", "filter": ""})
    entry = [{"text_payload": "x", "severity": "ERROR"}]
    store.write_log_entries("projects/p/logs/app", {"type": "global"}, None, entry)  # no router: nothing to do
    sent: list[tuple[str, bytes, dict[str, str]]] = []

    def router(topic: str, data: bytes, attributes: dict[str, str]) -> None:
        sent.append((topic, data, attributes))
        raise NotFound("Resource not found (resource=events).")

    store.router = router
    [written] = store.write_log_entries("projects/p/logs/app", {"type": "global"}, None, entry)
    assert [(t, json.loads(d)["insertId"]) for t, d, _ in sent] == [("projects/p/topics/events", written.insert_id)]
    store.router = lambda *args: 1 / 0
    store.write_log_entries("projects/p/logs/app", {"type": "global"}, None, entry)
    assert len(store.list_log_entries(["projects/p"])[0]) == 3
    store.reset()
    with pytest.raises(NotFound):
        store.sinks.get_sink("projects/p/sinks/s")


# ---------------------------------------------------------------------- the Vertex AI service's entries
def service_entries(emulator: Any, job_name: str) -> list[tuple[str, str]]:
    """(severity, text) of the job's ``service`` entries, in order."""
    from google.logging.type.log_severity_pb2 import LogSeverity

    job_id = job_name.split("/trials/")[0].rsplit("/", 1)[-1]
    entries, _ = emulator.logging.list_log_entries(
        [f"projects/{PROJECT}"], f'resource.labels.job_id="{job_id}" AND resource.labels.task_name="service"')
    return [(LogSeverity.Name(e.severity), e.text_payload) for e in entries]


def test_a_replica_that_exits_non_zero_is_an_error_entry_of_the_service_routed_by_a_sink(
        config, subscription, subscriber, submit, resilient_emulator):
    sink(config, VERTEX_FILTER)
    job = submit(custom_job("raise SystemExit(1)"))
    assert job.state.name == "JOB_STATE_FAILED"
    job_id = job.name.rsplit("/", 1)[-1]
    [(entry, attributes)] = routed(subscriber)
    assert entry["textPayload"] == job.error.message == ("The replica workerpool0-0 exited with a non-zero status "
                                                         "of 1. Termination reason: Error.")
    assert entry["severity"] == "ERROR"
    assert entry["logName"] == f"projects/{PROJECT}/logs/ml.googleapis.com%2F{job_id}"
    assert entry["resource"] == {"type": "ml_job",
                                 "labels": {"project_id": PROJECT, "job_id": job_id, "task_name": "service"}}
    assert "labels" not in entry  # not a trial
    assert attributes[TIMESTAMP_ATTRIBUTE] == entry["timestamp"]
    assert service_entries(resilient_emulator, job.name) == [("ERROR", job.error.message), ("INFO", "Job failed.")]


#: A primary that ends once the worker was restarted in place; a worker that marks its first start and says
#: ``step 1`` (where the fault strikes it) and, started again, marks the restart (the replicas share the job's log
#: directory as their working directory).
PRIMARY_WAITS_FOR_THE_RESTART = ("import os, time\nwhile not os.path.exists('restarted'):\n    time.sleep(0.01)\n"
                                 "print('done', flush=True)")
WORKER_MARKS_ITS_RESTART = ("import os, time\nif os.path.exists('started'):\n    open('restarted', 'w').close()\n"
                            "else:\n    open('started', 'w').close()\n    print('step 1', flush=True)\n"
                            "time.sleep(60)")


def test_a_replica_restarted_in_place_is_one_error_entry_and_the_job_ends_with_an_info_entry(submit,
                                                                                            resilient_emulator):
    resilient_emulator.add_fault({"kind": "worker_failure", "replica": "workerpool1-0", "times": 1, "at_step": 1,
                                  "step_source": "log"})
    job = submit(custom_job(pools=[pool(PRIMARY_WAITS_FOR_THE_RESTART), pool(WORKER_MARKS_ITS_RESTART)]))
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert "restart workerpool1-0 in place (1/5)" in resilient_emulator.job_events(job.name)
    assert service_entries(resilient_emulator, job.name) == [
        ("ERROR", "The replica workerpool1-0 exited with a non-zero status of 137. Termination reason: Error."),
        ("INFO", "Job completed successfully.")]


def test_a_trials_service_entries_carry_its_trial_id(client, resilient_emulator):
    tuning = client.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job={
        "display_name": "tune", "max_trial_count": 1, "parallel_trial_count": 1,
        "study_spec": {"metrics": [{"metric_id": "accuracy", "goal": "MAXIMIZE"}],
                       "parameters": [{"parameter_id": "lr",
                                       "double_value_spec": {"min_value": 0.1, "max_value": 0.3}}],
                       "algorithm": "GRID_SEARCH"},
        "trial_job_spec": custom_job("raise SystemExit(3)")["job_spec"],
    })
    resilient_emulator.wait_for_state(tuning.name, ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"], 60)
    job_id = tuning.name.rsplit("/", 1)[-1]
    entries, _ = resilient_emulator.logging.list_log_entries(
        [f"projects/{PROJECT}"], f'resource.labels.job_id="{job_id}" AND resource.labels.task_name="service" '
                                 "AND severity=ERROR")
    assert [(e.text_payload, dict(e.labels)) for e in entries] == [
        ("The replica workerpool0-0 exited with a non-zero status of 3. Termination reason: Error.",
         {"ml.googleapis.com/trial_id": "1"})]
    assert entries[0].log_name == f"projects/{PROJECT}/logs/ml.googleapis.com%2F{job_id}"
