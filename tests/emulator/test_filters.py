"""The Google list-filter subset used by the emulator: Vertex AI job listings and Cloud Logging entries."""

from __future__ import annotations

import doctest
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.testing.emulator import filters
from airflow_provider_resilient.testing.emulator.filters import FilterError, compile_filter

JOB: dict[str, Any] = {
    "name": "projects/p/locations/us-central1/customJobs/123",
    "displayName": "my job",
    "state": "JOB_STATE_RUNNING",
    "createTime": "2026-11-21T10:00:00.123456789Z",
    "labels": {"airflow-dag": "my_dag", "team": "ml", "env": "prod", "empty": ""},
    "jobSpec": {
        "workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"},
            {"machineSpec": {"machineType": "a2-highgpu-1g", "acceleratorCount": 2}, "replicaCount": "10"},
        ],
        "enableWebAccess": True,
    },
}
SNAKE_JOB: dict[str, Any] = {
    "display_name": "my job",
    "state": "JOB_STATE_FAILED",
    "create_time": "2026-11-20T08:00:00Z",
    "labels": {"airflow_dag": "other_dag"},
}
CANCELLED_JOB = {**JOB, "state": "JOB_STATE_CANCELLED"}

SYSTEM_EVENT = "projects/p/logs/cloudaudit.googleapis.com%2Fsystem_event"
ENTRY: dict[str, Any] = {
    "logName": SYSTEM_EVENT,
    "resource": {"type": "audited_resource", "labels": {"node_id": "my-node", "service": "tpu.googleapis.com"}},
    "timestamp": "2026-11-21T10:00:00.123456Z",
    "severity": "NOTICE",
    "protoPayload": {
        "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
        "methodName": "tpu.nodes.terminate",
        "resourceName": "projects/p/locations/us-central1-a/nodes/my-node",
        "metadata": {"terminateReason": "MAINTENANCE"},
    },
}
RESTART = {**ENTRY, "protoPayload": {**ENTRY["protoPayload"], "methodName": "tpu.nodes.restart"}}
CREATE = {**ENTRY, "protoPayload": {**ENTRY["protoPayload"], "methodName": "tpu.nodes.create"}}
SNAKE_ENTRY = {"proto_payload": {"method_name": "tpu.nodes.terminate"}, "severity": 500}
ERROR_ENTRY = {**ENTRY, "severity": "ERROR"}
AUDIT = f'logName="{SYSTEM_EVENT}" AND protoPayload.methodName="tpu.nodes.terminate" AND timestamp>='
ABC = {"a": 1, "b": 0, "c": 3}

CASES: list[tuple[str, Mapping[str, Any], bool]] = [
    # Vertex AI ListCustomJobs / ListHyperparameterTuningJobs
    ("", JOB, True),
    ("   \t", JOB, True),
    ("labels.airflow-dag=my_dag AND state=JOB_STATE_RUNNING", JOB, True),
    ("labels.airflow-dag=my_dag AND state=JOB_STATE_FAILED", JOB, False),
    ("labels.airflow-dag=my_da", JOB, False),
    ("labels.team:*", JOB, True),
    ("labels.x:*", JOB, False),
    ("labels.empty:*", JOB, False),
    ("labels:team", JOB, True),
    ("labels:x", JOB, False),
    ("NOT labels.x:*", JOB, True),
    ("NOT labels.team:*", JOB, False),
    ("-labels.x:*", JOB, True),
    ("NOT NOT labels.team:*", JOB, True),
    ('display_name="my job"', JOB, True),
    ('displayName="my job"', SNAKE_JOB, True),
    ('display_name="My Job"', JOB, False),
    ("display_name:JOB", JOB, True),
    ('create_time>"2026-11-21T00:00:00Z"', JOB, True),
    ('create_time>"2026-11-21T00:00:00Z"', SNAKE_JOB, False),
    ("create_time>2026-11-21T10:00:00.1Z", JOB, True),
    ('create_time<"2026-11-21T12:00:00+01:00"', JOB, True),
    ('create_time>"2026-11-21T12:00:00+01:00"', JOB, False),
    ('create_time>="2026-11-21"', JOB, True),
    ("state=JOB_STATE_FAILED OR state=JOB_STATE_CANCELLED", JOB, False),
    ("state=JOB_STATE_FAILED OR state=JOB_STATE_CANCELLED", SNAKE_JOB, True),
    ("state=JOB_STATE_FAILED OR state=JOB_STATE_CANCELLED", CANCELLED_JOB, True),
    ("state!=JOB_STATE_RUNNING", JOB, False),
    ("labels.x!=foo", JOB, True),
    ("labels.x=foo", JOB, False),
    ("labels.x<foo", JOB, False),
    ("(a=1 OR b=2) AND c=3", ABC, True),
    ("(a=1 OR b=2) AND c=3", {"a": 0, "b": 2, "c": 3}, True),
    ("(a=1 OR b=2) AND c=3", {"a": 1, "b": 2, "c": 4}, False),
    ("a=1 AND b=2 OR c=3", ABC, True),  # a=1 AND (b=2 OR c=3)
    ("a=1 AND b=2 OR c=3", {"a": 0, "b": 2, "c": 3}, False),  # would be True if AND bound tighter
    ("a=1 b=2 OR c=3", ABC, True),  # implicit AND, same precedence as AND
    ("a=1 b=2", ABC, False),
    ("a=1 or b=2", ABC, False),  # lower-case "or" is a global restriction, not a keyword
    ("a=1 OR b=2", ABC, True),
    ("state=NOT", {"state": "NOT"}, True),
    ("job_spec.worker_pool_specs.machine_spec.accelerator_count>=2", JOB, True),
    ("jobSpec.workerPoolSpecs.machineSpec.machineType=a2-highgpu-1g", JOB, True),
    ("jobSpec.workerPoolSpecs.replicaCount=1", JOB, True),
    ("jobSpec.workerPoolSpecs.replicaCount>9", JOB, True),  # "10" > 9 numerically
    ("jobSpec.workerPoolSpecs.replicaCount>10", JOB, False),
    ("n>-5", {"n": -1}, True),
    ("job_spec.enable_web_access=true", JOB, True),
    ("job_spec.enable_web_access=false", JOB, False),
    ("name:customJobs/123", JOB, True),
    # Cloud Logging ListLogEntries
    (AUDIT + '"2026-11-21T00:00:00Z"', ENTRY, True),
    (AUDIT + '"2026-11-22T00:00:00Z"', ENTRY, False),
    (AUDIT + '"2026-11-21T00:00:00Z"', RESTART, False),
    ('resource.type="audited_resource" severity>=NOTICE', ENTRY, True),
    ('resource.type="audited_resource" severity>=WARNING', ENTRY, False),
    ("severity>=warning", ERROR_ENTRY, True),
    ("severity>ERROR", ERROR_ENTRY, False),
    ("severity=NOTICE", ENTRY, True),
    ("severity>=300", ENTRY, True),
    ("severity<INFO", {"severity": 100}, True),
    ("severity>=ERROR", SNAKE_ENTRY, True),
    ("severity>=DEFAULT", {"textPayload": "x"}, False),
    ('protoPayload.resourceName=~"nodes/my-node$"', ENTRY, True),
    ('protoPayload.resourceName=~"nodes/other$"', ENTRY, False),
    ('protoPayload.resourceName!~"nodes/other$"', ENTRY, True),
    ('protoPayload.resourceName=~"locations/[a-z]+-central1-\\w$"', ENTRY, False),
    ('protoPayload.resourceName=~"locations/[a-z]+-central1-\\w/"', ENTRY, True),
    ('protoPayload.resourceName:"NODES/MY-NODE"', ENTRY, True),
    ('"tpu.nodes.terminate" OR "tpu.nodes.restart"', ENTRY, True),
    ('"tpu.nodes.terminate" OR "tpu.nodes.restart"', RESTART, True),
    ('"tpu.nodes.terminate" OR "tpu.nodes.restart"', CREATE, False),
    ("tpu.nodes.terminate OR tpu.nodes.restart", ENTRY, True),
    ('"TPU.Nodes.Terminate"', ENTRY, True),
    ('-"tpu.nodes.terminate"', ENTRY, False),
    ('protoPayload.methodName="tpu.nodes.terminate"', SNAKE_ENTRY, True),
    ('proto_payload.method_name="tpu.nodes.terminate"', ENTRY, True),
    ("protoPayload.metadata.terminateReason=MAINTENANCE", ENTRY, True),
    ("resource.labels.node_id=my-node", ENTRY, True),
    ('timestamp>="2026-11-21T10:00:00.123456Z"', ENTRY, True),
    ('timestamp>"2026-11-21T10:00:00.123456Z"', ENTRY, False),
    ('timestamp>="2026-11-21T00:00:00Z"', {"timestamp": datetime(2026, 11, 21, 1, tzinfo=UTC)}, True),
]


@pytest.mark.parametrize(("text", "resource", "expected"), CASES, ids=[f"{i}:{c[0][:60]}" for i, c in enumerate(CASES)])
def test_filter(text: str, resource: Mapping[str, Any], expected: bool) -> None:
    assert compile_filter(text)(resource) is expected


@pytest.mark.parametrize(
    ("text", "now", "expected"),
    [
        ('timestamp>="now-1h"', datetime(2026, 11, 21, 10, 30, tzinfo=UTC), True),
        ('timestamp>="now-1h"', datetime(2026, 11, 21, 12, 0, tzinfo=UTC), False),
        ("timestamp>=now-30m", datetime(2026, 11, 21, 10, 29, tzinfo=UTC), True),
        ('timestamp>="now-24h"', datetime(2026, 11, 22, 9, 0), True),  # naive clock is taken as UTC
        ('timestamp>="now-7d"', datetime(2026, 11, 29, 9, 0, tzinfo=UTC), False),
        ("timestamp<now", datetime(2026, 11, 21, 10, 1, tzinfo=UTC), True),
    ],
)
def test_relative_time_uses_injected_clock(text: str, now: datetime, expected: bool) -> None:
    assert compile_filter(text, now=lambda: now)(ENTRY) is expected


def test_clock_is_read_at_evaluation_time() -> None:
    clock = [datetime(2026, 11, 21, 10, 30, tzinfo=UTC)]
    predicate = compile_filter('timestamp>="now-1h"', now=lambda: clock[0])
    assert predicate(ENTRY)
    clock[0] = datetime(2026, 11, 21, 23, 0, tzinfo=UTC)
    assert not predicate(ENTRY)


def test_precedence_tree() -> None:
    def parse(text: str) -> filters.Node:
        return filters._Parser(text).parse()

    assert parse("a=1 AND b=2 OR c=3") == parse("a=1 AND (b=2 OR c=3)")
    assert parse("a=1 b=2 OR c=3 AND d=4") == parse("(a=1 (b=2 OR c=3)) AND d=4")
    assert parse("NOT a=1 OR b=2") == parse("(NOT a=1) OR b=2")


@pytest.mark.parametrize(
    ("text", "position", "token"),
    [
        ("a=", 2, "end of input"),
        ("(a=1", 4, "end of input"),
        ("a=1)", 3, "')'"),
        ("AND b=1", 0, "'AND'"),
        ("a=1 AND", 7, "end of input"),
        ("a=1 OR OR b=2", 7, "'OR'"),
        ("NOT", 3, "end of input"),
        ("()", 1, "')'"),
        ("a==b", 2, "'='"),
        ("a ! b", 2, "'!'"),
        ('"unterminated', 0, "'\"unterminated'"),
        ('"x"=1', 0, "'x'"),
        ("a..b=1", 0, "'a..b'"),
        ('a=~"("', 3, "'('"),
        ("(" * 500 + "a=1" + ")" * 500, 100, "'('"),
    ],
)
def test_syntax_errors_name_position_and_token(text: str, position: int, token: str) -> None:
    with pytest.raises(FilterError) as caught:
        compile_filter(text)
    assert isinstance(caught.value, ValueError)
    assert (caught.value.position, caught.value.token) == (position, token)
    assert f"at position {position}" in str(caught.value)
    assert token in str(caught.value)


def test_module_docstring_examples() -> None:
    assert doctest.testmod(filters).failed == 0


PIECES = [*'ab.=!<>:~()"\\-* _', "AND", "OR", "NOT", "now-1h", "2026-01-01T00:00:00Z", "severity", "labels"]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), st.lists(st.sampled_from(PIECES), max_size=30).map("".join)))
def test_only_filter_error_escapes(text: str) -> None:
    try:
        predicate = compile_filter(text)
    except FilterError:
        return
    for resource in (JOB, ENTRY, {}, {"a": [1, None, {"b": "*"}], "severity": "oops"}):
        assert isinstance(predicate(resource), bool)


@pytest.mark.parametrize(("text", "expected"), [
    ('resource.type="ml_job" AND resource.labels.job_id=42 (a=1 OR b=2) -c=3',
     {("resource", "type"): "ml_job", ("resource", "labels", "job_id"): "42"}),
    ("a=1 b=x (c=y AND d=z)", {("a",): "1", ("b",): "x", ("c",): "y", ("d",): "z"}),  # nested ANDs are conjuncts
    ("a=1 OR b=2", {}), ("NOT a=1", {}), ("a:1 b=~x c!=2 d>1", {}),  # only '=' restricts to one value
    ("severity=ERROR e=2026-01-02T03:04:05Z f=* g=now-1h", {}),  # rank, timestamps, presence, relative times
    ("", {}),
])
def test_required_values_are_the_equalities_every_match_meets(text, expected):
    assert filters.required_values(text) == expected


@given(st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                 st.text(st.characters(blacklist_characters='"\\'), max_size=8)),
       st.text(st.characters(blacklist_characters='"\\'), max_size=8))
def test_index_keys_agree_with_equality(value, text):
    """A stored scalar that ``v="text"`` finds has the index key of ``text`` whenever the filter is looked up in an
    index at all (:func:`required_values`), so the index never hides a match (colliding keys only widen it)."""
    looked_up = filters.required_values(f'v="{text}"')
    if looked_up and compile_filter(f'v="{text}"')({"v": value}):
        assert filters.index_key(value) == filters.index_key(looked_up[("v",)])


def test_long_integer_ids_compare_exactly():
    """Vertex AI job ids have 19 digits; as floats 1000000000000003015 and 1000000000000003019 are one number, so a
    log reader filtering on one job's id got every job's lines (ours' hang clock saw other jobs' steps)."""
    entry = {"resource": {"labels": {"job_id": "1000000000000003019"}}}
    assert not compile_filter('resource.labels.job_id="1000000000000003015"')(entry)
    assert compile_filter("resource.labels.job_id=1000000000000003019")(entry)
    assert compile_filter("resource.labels.job_id>1000000000000003015")(entry)
    assert compile_filter("n=1.5e0")({"n": "1.50"}) and compile_filter("n=42")({"n": 42.0})
    assert filters.index_key("1000000000000003015") != filters.index_key("1000000000000003019")
    assert filters.index_key("42") == filters.index_key(42.0)
