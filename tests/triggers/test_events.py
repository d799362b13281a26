"""Detection by event (``backends/events.py``): what a routed log entry names, how a watch's pause is cut short, and
the triggers on the emulator -- a Cloud Logging sink routes the platform's failure entries to Pub/Sub, the real
google-cloud-pubsub client pulls them -- fire long before their next poll.

The triggers' polls here are 600 real seconds apart and every wait is bounded by ``TIMEOUT`` (60 s): a trigger that
only polled would time out, so each test fails without the event feed. No time is measured.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from airflow_provider_resilient.backends.events import (
    FOLLOW_UP_FRACTIONS,
    EventListening,
    Listener,
    entry_keys,
    event_key,
    follow_ups,
    message_keys,
    subscription_name,
)
from airflow_provider_resilient.specs.common import topic_problem

NODE = "projects/test-project/locations/us-central2-b/nodes/n1"
JOB = "projects/test-project/locations/us-central1/customJobs/123"


# ------------------------------------------------------------------ what an entry names
def test_a_custom_job_and_a_node_have_event_keys_without_their_project():
    assert event_key(JOB) == "customJobs/123"
    assert event_key(NODE) == "locations/us-central2-b/nodes/n1"
    assert event_key("projects/1234/locations/us-central2-b/nodes/n1") == event_key(NODE)  # project number
    assert event_key("projects/p/locations/us-central1/hyperparameterTuningJobs/9") is None
    assert event_key("nonsense") is None


def test_a_vertex_job_entry_and_a_tpu_audit_entry_name_their_resource():
    vertex = {"resource": {"type": "ml_job", "labels": {"job_id": "123", "task_name": "service"}},
              "severity": "ERROR", "textPayload": "The replica workerpool0-0 exited with a non-zero status of 1."}
    tpu = {"resource": {"type": "audited_resource", "labels": {"service": "tpu.googleapis.com"}},
           "protoPayload": {"methodName": "tpu.nodes.terminate", "resourceName": NODE}}
    assert entry_keys(vertex) == {"customJobs/123"}
    assert entry_keys(tpu) == {"locations/us-central2-b/nodes/n1"}
    assert entry_keys({"resource": {"type": "gce_instance", "labels": {"job_id": "123"}}}) == set()
    assert message_keys(json.dumps(tpu).encode()) == {"locations/us-central2-b/nodes/n1"}
    assert message_keys(b"not json") == set() and message_keys(b"[1, 2]") == set()


def test_each_feed_subscribes_under_a_name_of_its_own_in_the_topics_project():
    first = subscription_name("projects/p1/topics/events", host="triggerer-0.example", pid=7)
    second = subscription_name("projects/p1/topics/events", host="triggerer-0.example", pid=7)
    assert first.startswith("projects/p1/subscriptions/resilient-triggerer-0.example-7-") and first != second
    assert "/" not in subscription_name("projects/p/topics/t", host="a/b c").split("/subscriptions/")[1]


def test_a_topic_name_is_checked():
    assert topic_problem("projects/p/topics/resilient-events") is None
    for bad in ("resilient-events", "projects/p/subscriptions/s", "projects/p/topics/9x", None):
        assert "projects/PROJECT/topics/TOPIC" in str(topic_problem(bad))


# ------------------------------------------------------------------ the pause between two looks
class Watch(EventListening):
    poll_interval = 32.0
    event_topic = None
    gcp_conn_id = None
    impersonation_chain = None
    emulator = None


async def never(seconds: float) -> None:
    """A sleep that never ends: only an event can end the pause (or the test's timeout)."""
    await asyncio.Event().wait()


def test_without_a_listener_the_pause_is_the_sleep():
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    assert asyncio.run(Watch()._pause(5.0, sleep)) is False and slept == [5.0]


def test_an_event_cuts_the_pause_short_and_the_follow_up_looks_come_sooner():
    async def scenario() -> tuple[bool, list[float]]:
        watch = Watch()
        watch._listener = Listener("locations/z/nodes/n")
        pausing = asyncio.ensure_future(watch._pause(32.0, never))
        await asyncio.sleep(0)
        watch._listener.woke.set()
        woke = await asyncio.wait_for(pausing, 5)
        slept: list[float] = []

        async def sleep(seconds: float) -> None:
            slept.append(seconds)

        for _ in range(len(FOLLOW_UP_FRACTIONS) + 1):
            assert await watch._pause(32.0, sleep) is False
        return woke, slept

    woke, slept = asyncio.run(scenario())
    assert woke is True
    assert slept == [*follow_ups(32.0), 32.0] == [2.0, 4.0, 8.0, 16.0, 32.0]


def test_an_event_that_came_while_the_watch_was_looking_ends_the_next_pause_at_once():
    async def scenario() -> bool:
        watch = Watch()
        watch._listener = Listener("customJobs/1")
        watch._listener.woke.set()
        return await asyncio.wait_for(watch._pause(32.0, never), 5)

    assert asyncio.run(scenario()) is True


def test_a_watch_without_an_event_topic_makes_no_feed():
    assert Watch()._listen(NODE) is None


@pytest.mark.parametrize("name", ["nonsense", "projects/p/locations/l/datasets/1"])
def test_a_resource_no_event_names_gets_no_listener(name: str):
    from airflow_provider_resilient.backends.events import EventFeed

    feed = EventFeed(("projects/p/topics/t", None, None, None), hook=None, on_idle=lambda: None)
    assert feed.listen(name) is None


def test_the_feed_wakes_only_the_listeners_a_message_names():
    from airflow_provider_resilient.backends.events import EventFeed

    async def scenario() -> tuple[bool, bool, int]:
        feed = EventFeed(("projects/p/topics/t", None, None, None), hook=None, on_idle=lambda: None)
        mine, other = Listener("locations/us-central2-b/nodes/n1"), Listener("customJobs/9")
        feed._listeners += [mine, other]
        entry: dict[str, Any] = {"protoPayload": {"resourceName": NODE}}
        feed.deliver([json.dumps(entry).encode(), b"garbage"])
        return mine.woke.is_set(), other.woke.is_set(), feed.received

    assert asyncio.run(scenario()) == (True, False, 2)


# ------------------------------------------------------------------ on the emulator: a sink, a topic, the real clients
REAL_TIME = pytest.mark.resilient_emulator(time_scale=0.002)
PROJECT = "test-project"
TOPIC = f"projects/{PROJECT}/topics/resilient-events"
#: Real seconds between two polls of a trigger under test: longer than any test may take (see the module docstring).
SLOW_POLL = 600.0
TIMEOUT = 60.0


def route_events(emulator: Any, topic: bool = True) -> None:
    """docs/detection.md's topic and sink, with the real clients (``topic=False``: the sink only)."""
    from airflow_provider_resilient.testing.emulator_clients import route_failure_events

    route_failure_events(TOPIC, emulator=emulator.address, create_topic=topic)


def subscriptions(emulator: Any) -> list[str]:
    found, _ = emulator.pubsub.list_subscriptions(f"projects/{PROJECT}")
    return [s.name for s in found]


def ready_node(emulator: Any, node_id: str) -> str:
    from airflow_provider_resilient.testing.emulator_clients import tpu_client

    client = tpu_client(emulator=emulator.address)
    operation = client.create_node(parent=f"projects/{PROJECT}/locations/us-central2-b", node_id=node_id, node={
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "sleep 600"}})
    name = str(operation.result(timeout=TIMEOUT).name)
    client.transport.close()
    return name


def running_job(emulator: Any, seconds: float = 600) -> str:
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    client = vertex_job_client("us-central1", emulator=emulator.address)
    job = client.create_custom_job(parent=f"projects/{PROJECT}/locations/us-central1", custom_job={
        "display_name": "events", "job_spec": {"scheduling": {"disable_retries": True}, "worker_pool_specs": [{
            "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": "x",
                               "command": ["python", "-c", f"import time; time.sleep({seconds})"]}}]}})
    client.transport.close()
    return str(job.name)


async def first_payload(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        payload: dict[str, Any] = event.payload
        return payload
    raise AssertionError("the trigger ended without an event")


async def when_subscribed(make: Any, act: Any) -> dict[str, Any]:
    """Run the trigger ``make()`` returns; once its feed has subscribed, ``act()``; its first event."""
    from airflow_provider_resilient.backends.events import active_feeds

    async def run() -> dict[str, Any]:
        fired = asyncio.ensure_future(first_payload(make()))
        while not any(feed.subscribed.is_set() for feed in active_feeds().values()):
            assert not fired.done(), fired.result()
            await asyncio.sleep(0.01)
        act()
        return await fired

    return await asyncio.wait_for(run(), TIMEOUT)


@REAL_TIME
def test_a_preempted_node_wakes_its_trigger_long_before_its_next_poll(resilient_emulator):
    import time

    from airflow_provider_resilient.triggers.tpu import TPUNodeTrigger

    route_events(resilient_emulator)
    name = ready_node(resilient_emulator, "events")
    payload = asyncio.run(when_subscribed(
        lambda: TPUNodeTrigger(name, look_again_at=time.time() + 3600, poll_interval=SLOW_POLL, gcp_conn_id=None,
                               emulator=resilient_emulator.address, event_topic=TOPIC),
        lambda: resilient_emulator.add_fault({"kind": "preemption", "grace_seconds": 0.0})))
    assert payload["status"] == "changed" and "PREEMPTED" in payload["message"]
    assert subscriptions(resilient_emulator) == []  # the feed deleted its subscription as the watch ended
    assert len(resilient_emulator.calls.list("CreateSubscription")) == 1


@REAL_TIME
@pytest.mark.parametrize("shared_poller", [True, False])
def test_a_crashed_replica_wakes_the_job_trigger_long_before_its_next_poll(resilient_emulator, shared_poller):
    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

    route_events(resilient_emulator)
    name = running_job(resilient_emulator)
    payload = asyncio.run(when_subscribed(
        lambda: CustomJobTrigger(name, SLOW_POLL, gcp_conn_id=None, emulator=resilient_emulator.address,
                                 shared_poller=shared_poller, event_topic=TOPIC),
        lambda: resilient_emulator.add_fault({"kind": "crash", "exit_code": 139})))
    assert payload["status"] == "terminal" and payload["job"]["state"] == "JOB_STATE_FAILED"
    assert "exited with a non-zero status of 139" in payload["job"]["error_message"]
    assert subscriptions(resilient_emulator) == []


@REAL_TIME
def test_without_its_topic_the_trigger_polls_as_before(resilient_emulator):
    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

    route_events(resilient_emulator, topic=False)
    name = running_job(resilient_emulator, seconds=0.5)
    trigger = CustomJobTrigger(name, 0.05, gcp_conn_id=None, emulator=resilient_emulator.address, event_topic=TOPIC)
    payload = asyncio.run(asyncio.wait_for(first_payload(trigger), TIMEOUT))
    assert payload["status"] == "terminal" and payload["job"]["state"] == "JOB_STATE_SUCCEEDED"
    assert [c.code for c in resilient_emulator.calls.list("CreateSubscription")] == ["NOT_FOUND"]


@REAL_TIME
def test_two_triggerers_each_get_every_event_through_subscriptions_of_their_own(resilient_emulator):
    """Two event loops (two triggerers) watch one node: Pub/Sub hands a subscription's message to one subscriber
    only, so each feed must have its own subscription for both to wake."""
    import threading
    import time

    from airflow_provider_resilient.triggers.tpu import TPUNodeTrigger

    route_events(resilient_emulator)
    name = ready_node(resilient_emulator, "twice")
    results: list[dict[str, Any]] = []

    def triggerer() -> None:
        trigger = TPUNodeTrigger(name, look_again_at=time.time() + 3600, poll_interval=SLOW_POLL, gcp_conn_id=None,
                                 emulator=resilient_emulator.address, event_topic=TOPIC)
        results.append(asyncio.run(asyncio.wait_for(first_payload(trigger), TIMEOUT)))

    threads = [threading.Thread(target=triggerer, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + TIMEOUT
    while len(subscriptions(resilient_emulator)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(set(subscriptions(resilient_emulator))) == 2
    resilient_emulator.add_fault({"kind": "preemption", "grace_seconds": 0.0})
    for thread in threads:
        thread.join(TIMEOUT)
    assert [r["status"] for r in results] == ["changed", "changed"]
    assert subscriptions(resilient_emulator) == []


@REAL_TIME
def test_a_polling_operator_listens_between_its_looks_and_resumes_the_crashed_job_at_once(resilient_emulator):
    """deferrable=False: the worker's ThreadedListener cuts the 600 s poll short; the retry then succeeds."""
    from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator
    from airflow_provider_resilient.policy import Backoff, RetryPolicy
    from airflow_provider_resilient.testing.standalone import standalone_context

    route_events(resilient_emulator)
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "match": {"nth": 1}, "after_seconds": 0.2})
    fast = Backoff(initial_seconds=0.05, max_seconds=0.05, jitter=0.0)
    op = ResilientCustomJobOperator(
        task_id="events", project_id=PROJECT, region="us-central1", display_name="events",
        worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                            "container_spec": {"image_uri": "x", "command": ["python", "-c",
                                                                            "import time; time.sleep(1)"]}}],
        base_output_dir="gs://events/run", deferrable=False, poll_interval=SLOW_POLL, event_topic=TOPIC,
        disable_retries=True,
        resilience_policy=RetryPolicy(backoff=fast, failover_backoff=fast))
    looks: list[float] = []
    op._sleep = lambda seconds: looks.append(seconds)  # the polls between attempts' looks never sleep 600 s
    result: dict[str, Any] = {}
    import threading

    worker = threading.Thread(target=lambda: result.update(op.execute(standalone_context("events"))), daemon=True)
    worker.start()
    worker.join(TIMEOUT * 2)
    assert not worker.is_alive(), "the operator waited for its next poll: no event woke it"
    first, second = result["attempts"]
    assert first["incidents"][0]["failure"]["failure_class"] == "transient_crash" and not second["incidents"]
    assert subscriptions(resilient_emulator) == []


@REAL_TIME
def test_a_feed_that_could_not_subscribe_tries_again_for_the_next_trigger_and_wakes_them_all(resilient_emulator):
    """The topic is made after the first trigger's feed found none: the next trigger of the loop subscribes, and
    an event then wakes the first trigger too."""
    import time

    from google.pubsub_v1 import PublisherClient
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    from airflow_provider_resilient.backends.events import active_feeds
    from airflow_provider_resilient.triggers.tpu import TPUNodeTrigger

    route_events(resilient_emulator, topic=False)
    name = ready_node(resilient_emulator, "retry")

    def make() -> TPUNodeTrigger:
        return TPUNodeTrigger(name, look_again_at=time.time() + 3600, poll_interval=SLOW_POLL, gcp_conn_id=None,
                              emulator=resilient_emulator.address, event_topic=TOPIC)

    async def scenario() -> list[dict[str, Any]]:
        first = asyncio.ensure_future(first_payload(make()))
        while not resilient_emulator.calls.list("CreateSubscription"):
            await asyncio.sleep(0.01)
        import grpc

        channel = grpc.insecure_channel(resilient_emulator.address)
        PublisherClient(transport=PublisherGrpcTransport(channel=channel)).create_topic(name=TOPIC)
        channel.close()
        second = asyncio.ensure_future(first_payload(make()))
        while not any(feed.subscribed.is_set() for feed in active_feeds().values()):
            await asyncio.sleep(0.01)
        resilient_emulator.add_fault({"kind": "preemption", "grace_seconds": 0.0})
        return list(await asyncio.gather(first, second))

    payloads = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert [p["status"] for p in payloads] == ["changed", "changed"]
    assert [c.code for c in resilient_emulator.calls.list("CreateSubscription")] == ["NOT_FOUND", "OK"]
    assert subscriptions(resilient_emulator) == []
