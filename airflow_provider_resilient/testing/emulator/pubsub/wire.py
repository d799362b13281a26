"""``google.pubsub.v1.Publisher`` and ``google.pubsub.v1.Subscriber`` over gRPC (unary RPCs; no StreamingPull).

Request and reply types are the proto-plus messages of ``google.pubsub_v1.types``; every call goes through
:func:`..wire.generic_handler`, so it is recorded in the :class:`~..calls.CallLog` and a
:class:`~..errors.EmulatorError` reaches the client as its ``google.api_core.exceptions`` class. ``Pull`` waits at
most the call's remaining deadline (``context.time_remaining()``, less
:data:`~.service.PULL_REPLY_MARGIN_SECONDS`) and ends early, delivering nothing, when the client cancels it.
"""

from __future__ import annotations

from typing import Any

from ..calls import CallLog
from ..wire import Method, generic_handler
from .service import PULL_REPLY_MARGIN_SECONDS, PubSubStore

PUBLISHER = "google.pubsub.v1.Publisher"
SUBSCRIBER = "google.pubsub.v1.Subscriber"


def publisher_handler(store: PubSubStore, calls: CallLog) -> Any:
    """The generic handler for Publisher: CreateTopic, GetTopic, ListTopics, DeleteTopic, Publish."""
    from google.protobuf import empty_pb2
    from google.pubsub_v1 import types

    def by_topic(r: Any) -> tuple[str, str]:
        return f"topic={r.topic}", r.topic

    def list_topics(r: Any) -> Any:
        topics, token = store.list_topics(r.project, r.page_size, r.page_token)
        return types.ListTopicsResponse(topics=topics, next_page_token=token)

    def delete(r: Any) -> Any:
        store.delete_topic(r.topic)
        return empty_pb2.Empty()

    def publish(r: Any) -> Any:
        return types.PublishResponse(message_ids=store.publish_messages(r.topic, r.messages))

    methods = {
        "CreateTopic": Method(store.create_topic, types.Topic.deserialize, types.Topic.serialize,
                              lambda r: (f"name={r.name}", r.name)),
        "GetTopic": Method(lambda r: store.get_topic(r.topic), types.GetTopicRequest.deserialize,
                           types.Topic.serialize, by_topic),
        "ListTopics": Method(list_topics, types.ListTopicsRequest.deserialize, types.ListTopicsResponse.serialize,
                             lambda r: (f"project={r.project} page_size={r.page_size}", r.project)),
        "DeleteTopic": Method(delete, types.DeleteTopicRequest.deserialize, empty_pb2.Empty.SerializeToString,
                              by_topic),
        "Publish": Method(publish, types.PublishRequest.deserialize, types.PublishResponse.serialize,
                          lambda r: (f"topic={r.topic} messages={len(r.messages)}", r.topic)),
    }
    return generic_handler(PUBLISHER, methods, calls)


def subscriber_handler(store: PubSubStore, calls: CallLog) -> Any:
    """The generic handler for Subscriber: CreateSubscription, GetSubscription, ListSubscriptions,
    DeleteSubscription, Pull, Acknowledge, ModifyAckDeadline."""
    from google.protobuf import empty_pb2
    from google.pubsub_v1 import types

    empty = empty_pb2.Empty.SerializeToString

    def by_subscription(r: Any) -> tuple[str, str]:
        return f"subscription={r.subscription}", r.subscription

    def list_subscriptions(r: Any) -> Any:
        subs, token = store.list_subscriptions(r.project, r.page_size, r.page_token)
        return types.ListSubscriptionsResponse(subscriptions=subs, next_page_token=token)

    def delete(r: Any) -> Any:
        store.delete_subscription(r.subscription)
        return empty_pb2.Empty()

    def pull(r: Any, context: Any) -> Any:
        remaining = context.time_remaining()
        timeout = None if remaining is None else max(remaining - PULL_REPLY_MARGIN_SECONDS, 0.0)
        context.add_callback(store.wake)  # a cancelled call wakes its pull, which then sees it inactive
        received = store.pull(r.subscription, r.max_messages, r.return_immediately, timeout, context.is_active)
        return types.PullResponse(received_messages=received)

    def acknowledge(r: Any) -> Any:
        store.acknowledge(r.subscription, r.ack_ids)
        return empty_pb2.Empty()

    def modify(r: Any) -> Any:
        store.modify_ack_deadline(r.subscription, r.ack_ids, r.ack_deadline_seconds)
        return empty_pb2.Empty()

    methods = {
        "CreateSubscription": Method(store.create_subscription, types.Subscription.deserialize,
                                     types.Subscription.serialize,
                                     lambda r: (f"name={r.name} topic={r.topic}", r.name)),
        "GetSubscription": Method(lambda r: store.get_subscription(r.subscription),
                                  types.GetSubscriptionRequest.deserialize, types.Subscription.serialize,
                                  by_subscription),
        "ListSubscriptions": Method(list_subscriptions, types.ListSubscriptionsRequest.deserialize,
                                    types.ListSubscriptionsResponse.serialize,
                                    lambda r: (f"project={r.project} page_size={r.page_size}", r.project)),
        "DeleteSubscription": Method(delete, types.DeleteSubscriptionRequest.deserialize, empty, by_subscription),
        "Pull": Method(pull, types.PullRequest.deserialize, types.PullResponse.serialize,
                       lambda r: (f"subscription={r.subscription} max_messages={r.max_messages} "
                                  f"return_immediately={r.return_immediately}", r.subscription), with_context=True),
        "Acknowledge": Method(acknowledge, types.AcknowledgeRequest.deserialize, empty,
                              lambda r: (f"subscription={r.subscription} ack_ids={len(r.ack_ids)}", r.subscription)),
        "ModifyAckDeadline": Method(modify, types.ModifyAckDeadlineRequest.deserialize, empty,
                                    lambda r: (f"subscription={r.subscription} ack_ids={len(r.ack_ids)} "
                                               f"ack_deadline_seconds={r.ack_deadline_seconds}", r.subscription)),
    }
    return generic_handler(SUBSCRIBER, methods, calls)
