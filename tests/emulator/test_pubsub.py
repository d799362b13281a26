"""Cloud Pub/Sub in the emulator, through the real google-cloud-pubsub GAPIC clients (``google.pubsub_v1``) over a
plain-text gRPC channel, as the provider builds them for an emulator: topics, pull subscriptions, fan-out, ack
deadlines on the emulator's manual clock, and the blocking Pull that lets a subscriber learn of a message at once.
"""

from __future__ import annotations

import asyncio
import time
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.pubsub_v1 import PublisherClient, SubscriberAsyncClient, SubscriberClient
from google.pubsub_v1.services.subscriber.transports.grpc_asyncio import SubscriberGrpcAsyncIOTransport

from airflow_provider_resilient.testing.emulator.pubsub import service as pubsub_service

pytestmark = pytest.mark.resilient_emulator(clock="manual", time_scale=1.0)

PROJECT = "test-project"
TOPIC = f"projects/{PROJECT}/topics/events"
SUB = f"projects/{PROJECT}/subscriptions/feed"
OTHER_SUB = f"projects/{PROJECT}/subscriptions/audit"


@pytest.fixture
def topic(publisher: PublisherClient) -> str:
    publisher.create_topic(name=TOPIC)
    return TOPIC


def pull_now(subscriber: SubscriberClient, subscription: str = SUB, max_messages: int = 10) -> list[Any]:
    """What a Pull that does not wait gets."""
    return list(subscriber.pull(subscription=subscription, max_messages=max_messages,
                                return_immediately=True).received_messages)


def datas(received: list[Any]) -> list[bytes]:
    return [r.message.data for r in received]


def test_topics_and_subscriptions_are_created_read_listed_and_deleted(publisher, subscriber, resilient_emulator):
    created = publisher.create_topic(request={"name": TOPIC, "labels": {"team": "ml"}})
    assert created.name == TOPIC and dict(created.labels) == {"team": "ml"}
    assert publisher.get_topic(topic=TOPIC) == created
    assert [t.name for t in publisher.list_topics(project=f"projects/{PROJECT}")] == [TOPIC]
    sub = subscriber.create_subscription(request={
        "name": SUB, "topic": TOPIC, "labels": {"resilient-event-feed": "true"},
        "expiration_policy": {"ttl": {"seconds": 86400}}, "message_retention_duration": {"seconds": 600}})
    assert sub.ack_deadline_seconds == 10  # Pub/Sub's default for 0
    assert sub.state.name == "ACTIVE" and dict(sub.labels) == {"resilient-event-feed": "true"}
    assert sub.expiration_policy.ttl.total_seconds() == 86400
    assert sub.message_retention_duration.total_seconds() == 600
    assert subscriber.get_subscription(subscription=SUB) == sub
    assert [s.name for s in subscriber.list_subscriptions(project=f"projects/{PROJECT}")] == [SUB]
    subscriber.delete_subscription(subscription=SUB)
    with pytest.raises(exceptions.NotFound):
        subscriber.get_subscription(subscription=SUB)
    publisher.delete_topic(topic=TOPIC)
    with pytest.raises(exceptions.NotFound):
        publisher.get_topic(topic=TOPIC)
    assert [c.code for c in resilient_emulator.calls.list("CreateSubscription")] == ["OK"]


def test_a_deleted_topic_leaves_its_subscriptions_detached(publisher, subscriber, topic):
    subscriber.create_subscription(name=SUB, topic=topic)
    publisher.delete_topic(topic=topic)
    assert subscriber.get_subscription(subscription=SUB).topic == "_deleted-topic_"
    publisher.create_topic(name=topic)  # a new topic of the same name: the old subscription is not its
    publisher.publish(topic=topic, messages=[{"data": b"new"}])
    assert pull_now(subscriber) == []


def test_duplicates_are_already_exists_and_missing_resources_not_found(publisher, subscriber, topic):
    subscriber.create_subscription(name=SUB, topic=topic)
    with pytest.raises(exceptions.AlreadyExists, match="events"):
        publisher.create_topic(name=topic)
    with pytest.raises(exceptions.AlreadyExists, match="feed"):
        subscriber.create_subscription(name=SUB, topic=topic)
    missing_topic = f"projects/{PROJECT}/topics/nowhere"
    missing_sub = f"projects/{PROJECT}/subscriptions/nobody"
    with pytest.raises(exceptions.NotFound):
        publisher.get_topic(topic=missing_topic)
    with pytest.raises(exceptions.NotFound):
        publisher.publish(topic=missing_topic, messages=[{"data": b"x"}])
    with pytest.raises(exceptions.NotFound):
        subscriber.create_subscription(name=missing_sub, topic=missing_topic)
    for call in (lambda: subscriber.get_subscription(subscription=missing_sub),
                 lambda: subscriber.pull(subscription=missing_sub, max_messages=1, return_immediately=True),
                 lambda: subscriber.acknowledge(subscription=missing_sub, ack_ids=["1-1-1"]),
                 lambda: subscriber.delete_subscription(subscription=missing_sub)):
        with pytest.raises(exceptions.NotFound):
            call()


@pytest.mark.parametrize(("rpc", "field"), [
    (lambda pub, sub: pub.create_topic(name="events"), "name"),
    (lambda pub, sub: pub.create_topic(name=f"projects/{PROJECT}/topics/go"), "name"),  # under 3 characters
    (lambda pub, sub: pub.create_topic(name=f"projects/{PROJECT}/topics/google-events"), "name"),
    (lambda pub, sub: pub.create_topic(name=f"projects/{PROJECT}/topics/9events"), "name"),
    (lambda pub, sub: pub.get_topic(topic=f"projects/{PROJECT}/subscriptions/feed"), "topic"),
    (lambda pub, sub: sub.create_subscription(name=f"projects/{PROJECT}/topics/feed", topic=TOPIC), "name"),
    (lambda pub, sub: sub.create_subscription(name=SUB, topic="events"), "topic"),
    (lambda pub, sub: sub.create_subscription(request={"name": SUB, "topic": TOPIC, "ack_deadline_seconds": 5}),
     "ack_deadline_seconds"),
    (lambda pub, sub: sub.get_subscription(subscription="feed"), "subscription"),
    (lambda pub, sub: sub.pull(subscription=SUB, max_messages=0, return_immediately=True), "max_messages"),
    (lambda pub, sub: pub.publish(topic=TOPIC, messages=[{"data": b""}]), "messages"),
    (lambda pub, sub: sub.modify_ack_deadline(subscription=SUB, ack_ids=["x"], ack_deadline_seconds=601),
     "ack_deadline_seconds"),
], ids=["no-project", "short", "goog", "digit", "kind", "sub-name", "sub-topic", "deadline", "sub", "max", "empty",
        "modify"])
def test_bad_requests_are_invalid_argument_naming_the_field(publisher, subscriber, topic, rpc, field):
    subscriber.create_subscription(name=SUB, topic=topic)
    with pytest.raises(exceptions.InvalidArgument, match=rf"^400 {field}: "):
        rpc(publisher, subscriber)


def test_every_subscription_gets_every_message_stamped_by_the_emulator_clock(publisher, subscriber, topic,
                                                                              resilient_emulator):
    subscriber.create_subscription(name=SUB, topic=topic)
    subscriber.create_subscription(name=OTHER_SUB, topic=topic)
    ids = publisher.publish(topic=topic, messages=[{"data": b"one", "attributes": {"k": "v"}},
                                                   {"attributes": {"only": "attributes"}}]).message_ids
    assert len(ids) == 2 and len(set(ids)) == 2
    for subscription in (SUB, OTHER_SUB):
        got = pull_now(subscriber, subscription)
        assert [r.message.message_id for r in got] == list(ids)
        assert datas(got) == [b"one", b""] and dict(got[0].message.attributes) == {"k": "v"}
        assert got[0].message.publish_time == resilient_emulator.clock.now()  # the manual clock stands still
    assert pull_now(subscriber, SUB) == pull_now(subscriber, OTHER_SUB) == []  # both delivered, awaiting acks


def test_a_subscription_gets_only_what_is_published_after_it_was_created(publisher, subscriber, topic,
                                                                          resilient_emulator):
    resilient_emulator.pubsub.publish(topic, b"before", {"n": "1"})
    subscriber.create_subscription(name=SUB, topic=topic)
    assert pull_now(subscriber) == []
    resilient_emulator.pubsub.publish(topic, b"after", {"n": "2"})
    assert datas(pull_now(subscriber)) == [b"after"]


def test_pull_delivers_at_most_max_messages_oldest_first(publisher, subscriber, topic):
    subscriber.create_subscription(name=SUB, topic=topic)
    publisher.publish(topic=topic, messages=[{"data": str(n).encode()} for n in range(5)])
    assert datas(pull_now(subscriber, max_messages=2)) == [b"0", b"1"]
    assert datas(pull_now(subscriber, max_messages=10)) == [b"2", b"3", b"4"]


def test_an_acknowledged_message_is_gone_and_an_unacknowledged_one_comes_back_after_its_deadline(
        publisher, subscriber, topic, resilient_emulator):
    subscriber.create_subscription(name=SUB, topic=topic)
    publisher.publish(topic=topic, messages=[{"data": b"acked"}, {"data": b"dropped"}])
    first = pull_now(subscriber)
    assert datas(first) == [b"acked", b"dropped"]
    subscriber.acknowledge(subscription=SUB, ack_ids=[first[0].ack_id, "unknown-ack-id"])  # unknown: ignored
    resilient_emulator.advance(9)
    assert pull_now(subscriber) == []  # within the 10 s ack deadline
    resilient_emulator.advance(1)
    again = pull_now(subscriber)
    assert datas(again) == [b"dropped"] and again[0].ack_id != first[1].ack_id
    subscriber.acknowledge(subscription=SUB, ack_ids=[first[1].ack_id])  # the stale ack id of the first delivery
    resilient_emulator.advance(10)
    assert datas(pull_now(subscriber)) == [b"dropped"]


def test_modify_ack_deadline_zero_makes_a_message_available_at_once_and_a_longer_one_holds_it(
        publisher, subscriber, topic, resilient_emulator):
    subscriber.create_subscription(name=SUB, topic=topic)
    publisher.publish(topic=topic, messages=[{"data": b"m"}])
    [received] = pull_now(subscriber)
    subscriber.modify_ack_deadline(subscription=SUB, ack_ids=[received.ack_id], ack_deadline_seconds=0)
    [again] = pull_now(subscriber)
    assert again.message.message_id == received.message.message_id
    subscriber.modify_ack_deadline(subscription=SUB, ack_ids=[again.ack_id], ack_deadline_seconds=60)
    resilient_emulator.advance(30)
    assert pull_now(subscriber) == []
    resilient_emulator.advance(30)
    assert datas(pull_now(subscriber)) == [b"m"]


def wait_until_waiting(emulator: Any, subscription: str = SUB) -> None:
    """Until a pull waits in ``subscription`` (the emulator says so), or fail after 30 s."""
    deadline = time.monotonic() + 30
    while emulator.pubsub.waiting(subscription) == 0:
        assert time.monotonic() < deadline, "the pull never waited"
        time.sleep(0.005)


def test_a_blocking_pull_returns_with_a_message_published_while_it_waits(subscriber, topic, resilient_emulator,
                                                                         monkeypatch):
    monkeypatch.setattr(pubsub_service, "MAX_PULL_WAIT_SECONDS", 60.0)  # only the publish can end this pull
    subscriber.create_subscription(name=SUB, topic=topic)
    with futures.ThreadPoolExecutor(1) as pool:
        pulling = pool.submit(subscriber.pull, subscription=SUB, max_messages=10, timeout=60)
        wait_until_waiting(resilient_emulator)
        resilient_emulator.pubsub.publish(topic, b"woke", {})
        got = pulling.result(timeout=30)
    assert datas(list(got.received_messages)) == [b"woke"]


def test_a_blocking_pull_with_nothing_to_deliver_returns_empty_after_its_bounded_wait(subscriber, topic,
                                                                                      resilient_emulator,
                                                                                      monkeypatch):
    monkeypatch.setattr(pubsub_service, "MAX_PULL_WAIT_SECONDS", 0.2)
    subscriber.create_subscription(name=SUB, topic=topic)
    started = time.monotonic()
    got = subscriber.pull(subscription=SUB, max_messages=10, timeout=60)
    assert list(got.received_messages) == []
    assert time.monotonic() - started >= 0.2  # it waited, and returned long before the call's 60 s deadline
    assert [c.code for c in resilient_emulator.calls.list("Pull")] == ["OK"]


def test_deleting_a_subscription_ends_its_waiting_pull(subscriber, topic, resilient_emulator, monkeypatch):
    monkeypatch.setattr(pubsub_service, "MAX_PULL_WAIT_SECONDS", 60.0)
    subscriber.create_subscription(name=SUB, topic=topic)
    with futures.ThreadPoolExecutor(1) as pool:
        pulling = pool.submit(subscriber.pull, subscription=SUB, max_messages=10, timeout=60)
        wait_until_waiting(resilient_emulator)
        resilient_emulator.pubsub.delete_subscription(SUB)
        with pytest.raises(exceptions.NotFound):
            pulling.result(timeout=30)


def test_the_async_subscriber_pulls_and_acknowledges(resilient_emulator, publisher, subscriber, topic):
    """``SubscriberAsyncClient`` on a ``grpc.aio`` channel, as the provider's trigger feed uses it."""
    subscriber.create_subscription(request={"name": SUB, "topic": topic, "ack_deadline_seconds": 10})

    async def scenario() -> list[bytes]:
        channel = grpc.aio.insecure_channel(resilient_emulator.address)
        client = SubscriberAsyncClient(transport=SubscriberGrpcAsyncIOTransport(channel=channel))
        try:
            pulling = asyncio.ensure_future(client.pull(subscription=SUB, max_messages=10, timeout=30))
            await asyncio.to_thread(wait_until_waiting, resilient_emulator)
            resilient_emulator.pubsub.publish(topic, b"async", {"k": "v"})
            got = list((await pulling).received_messages)
            await client.acknowledge(subscription=SUB, ack_ids=[r.ack_id for r in got])
            return datas(got)
        finally:
            await channel.close()

    assert asyncio.run(scenario()) == [b"async"]
    resilient_emulator.advance(10)
    assert pull_now(subscriber) == []  # acknowledged: no redelivery after the deadline


def test_reset_forgets_topics_and_subscriptions(publisher, subscriber, topic, resilient_emulator):
    subscriber.create_subscription(name=SUB, topic=topic)
    resilient_emulator.reset()
    with pytest.raises(exceptions.NotFound):
        publisher.get_topic(topic=topic)
    with pytest.raises(exceptions.NotFound):
        subscriber.get_subscription(subscription=SUB)
