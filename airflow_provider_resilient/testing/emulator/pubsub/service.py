"""Cloud Pub/Sub topics, subscriptions and messages (moto-style backend): an in-memory, thread-safe store.

Verbs are named after the RPCs of ``google.pubsub.v1.Publisher`` (``create_topic``, ``get_topic``, ``list_topics``,
``delete_topic``, ``publish_messages``) and ``google.pubsub.v1.Subscriber`` (``create_subscription``,
``get_subscription``, ``list_subscriptions``, ``delete_subscription``, ``pull``, ``acknowledge``,
``modify_ack_deadline``), take and return proto-plus messages of ``google.pubsub_v1.types``, and raise
:mod:`..errors` values (``InvalidArgument``, ``NotFound``, ``AlreadyExists``); the wire layer (:mod:`.wire`) only
unpacks and packs. :meth:`PubSubStore.publish` is the same Publish for the emulator's own parts (a Cloud Logging
sink routes entries through it).

Theory of operation, after Google's "Pub/Sub: Pull subscriptions" (https://cloud.google.com/pubsub/docs/pull) and
"Subscription properties" (https://cloud.google.com/pubsub/docs/subscription-properties):

* Names are ``projects/P/topics/T`` and ``projects/P/subscriptions/S``; an ID starts with a letter, is 3 to 255
  of ``[A-Za-z0-9-_.~+%]`` and does not start with ``goog`` ("Resource names",
  https://cloud.google.com/pubsub/docs/pubsub-basics#resource_names). A bad one is InvalidArgument naming the
  request field; a second create of a name is AlreadyExists; a missing topic or subscription is NotFound.
* Publish gives each message a numeric ``message_id`` and a ``publish_time`` from the emulator's clock and puts a
  copy in the backlog of every subscription the topic has at that moment: every subscription gets every message,
  and a subscription gets only what was published after it was created.
* A backlog message is *available* when it was never delivered or its ack deadline (emulator clock, monotonic
  seconds) has passed. Pull delivers up to ``max_messages`` available messages, oldest first, each under a fresh
  ``ack_id`` and a deadline of the subscription's ``ack_deadline_seconds`` (default 10) from now. Acknowledge
  removes a message; ModifyAckDeadline moves its deadline (0: available again at once). Only the ack id of a
  message's latest delivery counts; unknown or stale ack ids are ignored, as Pub/Sub does.
* A Pull with ``return_immediately=False`` blocks (a :class:`threading.Condition`, real time) until a message is
  available or its bounded wait is over -- the smaller of the caller's ``timeout`` (the wire layer gives the
  call's remaining gRPC deadline) and :data:`MAX_PULL_WAIT_SECONDS` -- then returns what there is, possibly
  nothing. Publish, ModifyAckDeadline to 0, deleting the subscription, :meth:`PubSubStore.reset` and
  :meth:`PubSubStore.wake` (the emulator calls it after moving a manual clock on) wake waiting pulls at once, so a
  subscriber learns of a message within milliseconds of its publication. A pull whose subscription was deleted
  while it waited raises NotFound.
* Deleting a topic leaves its subscriptions, whose ``topic`` becomes ``_deleted-topic_`` and which get nothing
  more (Pub/Sub's rule).
* ``labels``, ``expiration_policy``, ``message_retention_duration`` and the other configuration fields are stored
  and returned as given; they are not enforced (no expiry, no retention limit, no dead-lettering, no push).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock, SystemClock
from ..errors import AlreadyExists, InvalidArgument, NotFound

__all__ = ["DEFAULT_ACK_DEADLINE_SECONDS", "DELETED_TOPIC", "MAX_PULL_WAIT_SECONDS", "PubSubStore"]

#: The longest a blocking Pull waits for a message (real seconds), whatever the call's deadline.
MAX_PULL_WAIT_SECONDS = 5.0
#: Seconds before the call's gRPC deadline at which a blocking Pull returns, so that its answer arrives in time.
PULL_REPLY_MARGIN_SECONDS = 0.05
#: A subscription's ack deadline when created with 0 (Pub/Sub's default), and the bounds of the setting.
DEFAULT_ACK_DEADLINE_SECONDS = 10
MIN_ACK_DEADLINE_SECONDS = 10
MAX_ACK_DEADLINE_SECONDS = 600
#: The most messages one Pull returns (Pub/Sub's own cap).
MAX_PULL_MESSAGES = 1000
#: What a subscription's ``topic`` reads once its topic was deleted.
DELETED_TOPIC = "_deleted-topic_"
DEFAULT_PAGE_SIZE = 100
_ID = r"(?!goog)[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}"
_TOPIC = re.compile(rf"projects/[^/]+/topics/{_ID}")
_SUBSCRIPTION = re.compile(rf"projects/[^/]+/subscriptions/{_ID}")
_PROJECT = re.compile(r"projects/[^/]+")
_NAMES_DOC = "https://cloud.google.com/pubsub/docs/pubsub-basics#resource_names"


def _types() -> Any:
    from google.pubsub_v1 import types

    return types


@dataclass
class _Pending:
    """One message in one subscription's backlog."""

    message: Any  # google.pubsub_v1.types.PubsubMessage
    ack_id: str = ""  # of the latest delivery; "" before the first
    deadline: float | None = None  # emulator monotonic seconds; None: never delivered
    deliveries: int = 0


@dataclass
class _Subscription:
    resource: Any  # google.pubsub_v1.types.Subscription
    serial: int
    backlog: dict[str, _Pending] = field(default_factory=dict)  # message_id -> pending, in publish order
    acks: dict[str, str] = field(default_factory=dict)  # ack_id -> message_id (latest deliveries only)


class PubSubStore:
    """All topics, subscriptions and unacknowledged messages of the emulator.

    Args:
        clock: the emulator's clock (:mod:`..clock`): ``publish_time`` reads its ``now()``, ack deadlines its
            ``monotonic()`` seconds. Default: real time. A blocking Pull's wait is always real time.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self._changed = threading.Condition(threading.Lock())
        self._topics: dict[str, Any] = {}  # name -> google.pubsub_v1.types.Topic
        self._subscriptions: dict[str, _Subscription] = {}
        self._message_ids = itertools.count(1)
        self._serials = itertools.count(1)
        self._waiting: dict[str, int] = {}  # subscription -> pulls waiting in it
        self._closed = False

    def reset(self) -> None:
        """Forget every topic, subscription and message; waiting pulls end (NotFound)."""
        with self._changed:
            self._topics.clear()
            self._subscriptions.clear()
            self._changed.notify_all()

    def wake(self) -> None:
        """Make every waiting pull look again (after the emulator's manual clock moved on: a deadline may be over)."""
        with self._changed:
            self._changed.notify_all()

    def waiting(self, subscription: str) -> int:
        """How many pulls wait in ``subscription`` now (blocked for a message): what a test waits for before it
        publishes, to see a waiting pull woken."""
        with self._changed:
            return self._waiting.get(subscription, 0)

    def shutdown(self) -> None:
        """End every waiting pull at once, now and later (the emulator is stopping)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    # ------------------------------------------------------------------ Publisher verbs
    def create_topic(self, topic: Any) -> Any:
        """CreateTopic: store ``topic`` (a ``Topic`` or dict; ``name`` required) as given; return a copy.

        Raises InvalidArgument (``name``), AlreadyExists.
        """
        types = _types()
        topic = _copy(types.Topic, topic)
        _check(_TOPIC, "name", topic.name, "topics/TOPIC_ID")
        with self._changed:
            if topic.name in self._topics:
                raise AlreadyExists(f"Resource already exists in the project (resource={_short(topic.name)}).")
            self._topics[topic.name] = topic
            return _copy(types.Topic, topic)

    def get_topic(self, topic: str) -> Any:
        """GetTopic. Raises InvalidArgument (``topic``), NotFound."""
        _check(_TOPIC, "topic", topic, "topics/TOPIC_ID")
        with self._changed:
            return _copy(_types().Topic, self._topic(topic))

    def list_topics(self, project: str, page_size: int = 0, page_token: str = "") -> tuple[list[Any], str]:
        """ListTopics: one page of the topics of ``project`` (``projects/P``), by name, and the next page token
        ("" on the last page). Raises InvalidArgument (``project``, ``page_token``)."""
        _check(_PROJECT, "project", project, "")
        with self._changed:
            topics = [_copy(_types().Topic, t) for n, t in sorted(self._topics.items()) if n.startswith(project + "/")]
        return _page(topics, page_size, page_token)

    def delete_topic(self, topic: str) -> None:
        """DeleteTopic: its subscriptions stay, detached (``topic`` = :data:`DELETED_TOPIC`).

        Raises InvalidArgument (``topic``), NotFound.
        """
        _check(_TOPIC, "topic", topic, "topics/TOPIC_ID")
        with self._changed:
            self._topic(topic)
            del self._topics[topic]
            for sub in self._subscriptions.values():
                if sub.resource.topic == topic:
                    sub.resource.topic = DELETED_TOPIC

    def publish_messages(self, topic: str, messages: Iterable[Any]) -> list[str]:
        """Publish: add ``messages`` (``PubsubMessage`` or dicts) to the backlog of every subscription of
        ``topic``; return their message ids, in order.

        Raises InvalidArgument (``topic``; no messages; a message with neither data nor attributes), NotFound.
        """
        types = _types()
        _check(_TOPIC, "topic", topic, "topics/TOPIC_ID")
        given = [_copy(types.PubsubMessage, m) for m in messages]
        if not given:
            raise InvalidArgument("messages: The request must contain at least one message.")
        if any(not m.data and not m.attributes for m in given):
            raise InvalidArgument("messages: Some messages are empty: each message must contain non-empty data, "
                                  "or at least one attribute.")
        now = self.clock.now()
        with self._changed:
            self._topic(topic)
            subscribers = [s for s in self._subscriptions.values() if s.resource.topic == topic]
            ids = []
            for message in given:
                message.message_id = str(next(self._message_ids))
                message.publish_time = now
                ids.append(message.message_id)
                for sub in subscribers:
                    sub.backlog[message.message_id] = _Pending(_copy(types.PubsubMessage, message))
            if subscribers:
                self._changed.notify_all()
        return ids

    def publish(self, topic: str, data: bytes, attributes: Mapping[str, str] | None = None) -> str:
        """Publish one message (``data`` bytes, ``attributes``) to ``topic``; return its message id. The emulator's
        own parts call this (a Cloud Logging sink's router).

        Raises InvalidArgument (``topic``; empty data without attributes), NotFound (no such topic).
        """
        return self.publish_messages(topic, [{"data": data, "attributes": dict(attributes or {})}])[0]

    # ------------------------------------------------------------------ Subscriber verbs
    def create_subscription(self, subscription: Any) -> Any:
        """CreateSubscription: a pull subscription ``name`` of ``topic``, which gets every message published to
        the topic from now on. ``ack_deadline_seconds`` 0 means :data:`DEFAULT_ACK_DEADLINE_SECONDS`; the other
        fields are stored as given. Returns the subscription (``state`` ACTIVE).

        Raises InvalidArgument (``name``, ``topic``, ``ack_deadline_seconds`` outside 10..600, a ``filter``, which
        the emulator does not evaluate), NotFound (no such topic), AlreadyExists.
        """
        types = _types()
        sub = _copy(types.Subscription, subscription)
        _check(_SUBSCRIPTION, "name", sub.name, "subscriptions/SUBSCRIPTION_ID")
        _check(_TOPIC, "topic", sub.topic, "topics/TOPIC_ID")
        if sub.ack_deadline_seconds == 0:
            sub.ack_deadline_seconds = DEFAULT_ACK_DEADLINE_SECONDS
        if not MIN_ACK_DEADLINE_SECONDS <= sub.ack_deadline_seconds <= MAX_ACK_DEADLINE_SECONDS:
            raise InvalidArgument(f"ack_deadline_seconds: {sub.ack_deadline_seconds} is outside "
                                  f"{MIN_ACK_DEADLINE_SECONDS}..{MAX_ACK_DEADLINE_SECONDS} seconds.")
        if sub.filter:
            raise InvalidArgument(f"filter: the emulator does not evaluate subscription filters ({sub.filter!r}).")
        sub.state = types.Subscription.State.ACTIVE
        with self._changed:
            self._topic(sub.topic)
            if sub.name in self._subscriptions:
                raise AlreadyExists(f"Resource already exists in the project (resource={_short(sub.name)}).")
            self._subscriptions[sub.name] = _Subscription(sub, next(self._serials))
            return _copy(types.Subscription, sub)

    def get_subscription(self, subscription: str) -> Any:
        """GetSubscription. Raises InvalidArgument (``subscription``), NotFound."""
        _check(_SUBSCRIPTION, "subscription", subscription, "subscriptions/SUBSCRIPTION_ID")
        with self._changed:
            return _copy(_types().Subscription, self._subscription(subscription).resource)

    def list_subscriptions(self, project: str, page_size: int = 0, page_token: str = "") -> tuple[list[Any], str]:
        """ListSubscriptions: one page of the subscriptions of ``project`` (``projects/P``), by name, and the next
        page token. Raises InvalidArgument (``project``, ``page_token``)."""
        _check(_PROJECT, "project", project, "")
        with self._changed:
            subs = [_copy(_types().Subscription, s.resource) for n, s in sorted(self._subscriptions.items())
                    if n.startswith(project + "/")]
        return _page(subs, page_size, page_token)

    def delete_subscription(self, subscription: str) -> None:
        """DeleteSubscription: its messages are gone and its waiting pulls end (NotFound).

        Raises InvalidArgument (``subscription``), NotFound.
        """
        _check(_SUBSCRIPTION, "subscription", subscription, "subscriptions/SUBSCRIPTION_ID")
        with self._changed:
            self._subscription(subscription)
            del self._subscriptions[subscription]
            self._changed.notify_all()

    def pull(self, subscription: str, max_messages: int, return_immediately: bool = False,
             timeout: float | None = None, active: Callable[[], bool] | None = None) -> list[Any]:
        """Pull: up to ``max_messages`` (1..1000 are served) available messages as ``ReceivedMessage``, each with a
        new ``ack_id`` and an ack deadline of the subscription's ``ack_deadline_seconds`` from now.

        Args:
            return_immediately: answer at once, even with nothing.
            timeout: otherwise wait at most this many real seconds for a message (capped at
                :data:`MAX_PULL_WAIT_SECONDS`, which None means); then return what there is, possibly nothing.
            active: False once the caller has gone (its call was cancelled): the pull then ends without
                delivering anything.

        Raises InvalidArgument (``subscription``, ``max_messages`` < 1), NotFound (no such subscription, also
        one deleted while the pull waited).
        """
        _check(_SUBSCRIPTION, "subscription", subscription, "subscriptions/SUBSCRIPTION_ID")
        if max_messages <= 0:
            raise InvalidArgument(f"max_messages: must be a positive integer, got {max_messages}.")
        limit = MAX_PULL_WAIT_SECONDS if timeout is None else min(max(timeout, 0.0), MAX_PULL_WAIT_SECONDS)
        give_up = time.monotonic() + (0.0 if return_immediately else limit)
        with self._changed:
            sub = self._subscription(subscription)
            while True:
                if self._subscriptions.get(subscription) is not sub:
                    raise NotFound(f"Resource not found (resource={_short(subscription)}).")
                if active is not None and not active():
                    return []
                now = self.clock.monotonic()
                ready = [p for p in sub.backlog.values() if p.deadline is None or p.deadline <= now]
                left = give_up - time.monotonic()
                if ready or left <= 0 or self._closed:
                    return self._deliver(sub, ready[:min(max_messages, MAX_PULL_MESSAGES)], now)
                # Wake for a publish, or when the earliest deadline is due (a real clock moves by itself).
                due = [p.deadline - now for p in sub.backlog.values() if p.deadline is not None]
                self._waiting[subscription] = self._waiting.get(subscription, 0) + 1
                try:
                    self._changed.wait(min([left, *due]))
                finally:
                    self._waiting[subscription] -= 1

    def acknowledge(self, subscription: str, ack_ids: Iterable[str]) -> None:
        """Acknowledge: remove the messages of ``ack_ids`` (unknown and stale ids are ignored).

        Raises InvalidArgument (``subscription``, no ``ack_ids``), NotFound.
        """
        _check(_SUBSCRIPTION, "subscription", subscription, "subscriptions/SUBSCRIPTION_ID")
        ids = list(ack_ids)
        if not ids:
            raise InvalidArgument("ack_ids: No ack ids specified.")
        with self._changed:
            sub = self._subscription(subscription)
            for ack_id in ids:
                message_id = sub.acks.pop(ack_id, None)
                if message_id is not None:
                    sub.backlog.pop(message_id, None)

    def modify_ack_deadline(self, subscription: str, ack_ids: Iterable[str], ack_deadline_seconds: int) -> None:
        """ModifyAckDeadline: the messages of ``ack_ids`` are due ``ack_deadline_seconds`` (0..600) from now; 0
        makes them available again at once. Unknown and stale ids are ignored.

        Raises InvalidArgument (``subscription``, no ``ack_ids``, ``ack_deadline_seconds``), NotFound.
        """
        _check(_SUBSCRIPTION, "subscription", subscription, "subscriptions/SUBSCRIPTION_ID")
        ids = list(ack_ids)
        if not ids:
            raise InvalidArgument("ack_ids: No ack ids specified.")
        if not 0 <= ack_deadline_seconds <= MAX_ACK_DEADLINE_SECONDS:
            raise InvalidArgument(f"ack_deadline_seconds: {ack_deadline_seconds} is outside "
                                  f"0..{MAX_ACK_DEADLINE_SECONDS} seconds.")
        with self._changed:
            sub = self._subscription(subscription)
            now = self.clock.monotonic()
            for ack_id in ids:
                pending = sub.backlog.get(sub.acks.get(ack_id, ""))
                if pending is not None:
                    pending.deadline = now + ack_deadline_seconds
            if ack_deadline_seconds == 0:
                self._changed.notify_all()

    # ------------------------------------------------------------------ helpers (under the lock)
    def _topic(self, name: str) -> Any:
        topic = self._topics.get(name)
        if topic is None:
            raise NotFound(f"Resource not found (resource={_short(name)}).")
        return topic

    def _subscription(self, name: str) -> _Subscription:
        sub = self._subscriptions.get(name)
        if sub is None:
            raise NotFound(f"Resource not found (resource={_short(name)}).")
        return sub

    def _deliver(self, sub: _Subscription, pending: list[_Pending], now: float) -> list[Any]:
        types = _types()
        received = []
        counted = "dead_letter_policy" in sub.resource  # Pub/Sub counts deliveries only with dead-lettering on
        for item in pending:
            item.deliveries += 1
            sub.acks.pop(item.ack_id, None)
            item.ack_id = f"{sub.serial}-{item.message.message_id}-{item.deliveries}"
            item.deadline = now + sub.resource.ack_deadline_seconds
            sub.acks[item.ack_id] = item.message.message_id
            received.append(types.ReceivedMessage(ack_id=item.ack_id, message=_copy(types.PubsubMessage, item.message),
                                                  delivery_attempt=item.deliveries if counted else 0))
        return received


def _copy(message_type: Any, value: Any) -> Any:
    """A proto-plus copy of ``value`` (proto-plus, raw protobuf or dict) as ``message_type``."""
    if isinstance(value, Mapping):
        return message_type(value)
    pb = message_type.pb()()
    pb.CopyFrom(value if isinstance(value, message_type.pb()) else message_type.pb(value))
    return message_type.wrap(pb)


def _check(pattern: re.Pattern[str], field_name: str, value: str, shape: str) -> None:
    if not pattern.fullmatch(value or ""):
        expected = f"projects/PROJECT_ID/{shape}" if shape else "projects/PROJECT_ID"
        raise InvalidArgument(f"{field_name}: Invalid resource name given ({field_name}={value!r}): expected "
                              f"{expected}, an ID of 3 to 255 letters, digits and -_.~+% starting with a letter and "
                              f"not with 'goog'. Refer to {_NAMES_DOC} for more information.")


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _page(items: list[Any], page_size: int, page_token: str) -> tuple[list[Any], str]:
    if page_size < 0:
        raise InvalidArgument(f"page_size: {page_size} is negative.")
    if page_token and (not page_token.isdigit() or int(page_token) > len(items)):
        raise InvalidArgument(f"page_token: Invalid page token {page_token!r}.")
    start = int(page_token or 0)
    end = start + (page_size or DEFAULT_PAGE_SIZE)
    return items[start:end], (str(end) if end < len(items) else "")
