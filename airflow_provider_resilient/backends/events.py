"""Detection by event: Cloud Logging entries routed to Pub/Sub wake a trigger before its next poll.

A poll every ``poll_interval`` seconds finds a failure on average half an interval after it happened. Google
writes the failures the triggers watch for to Cloud Logging as they happen -- a Vertex AI replica that exited
(resource ``ml_job``, label ``job_id``) and Cloud TPU's system events, such as a maintenance event or a preemption
that terminated a node (an audit entry whose ``protoPayload.resourceName`` is the node) -- and a Cloud Logging
sink routes the entries it matches to a Pub/Sub topic as they are written ("Route logs to supported
destinations", https://cloud.google.com/logging/docs/export/configure_export_v2; each message's data is the
LogEntry in JSON: "View logs routed to Pub/Sub", https://cloud.google.com/logging/docs/export/pubsub). With
``event_topic`` set, a trigger also listens on that topic and looks at its job or node at once when a message
names it.

An event is a hint, never a verdict: the trigger still reads the job or node from its API and judges what it
reads, exactly as after a poll, so a lost, late, duplicated or forged message costs at most one early look, and
polling stays the fallback (a message that never comes leaves the trigger where it was: one look per
``poll_interval``).

Theory of operation. The triggers of one event loop (the triggerer runs one) that listen on the same topic with
the same credentials share one :class:`EventFeed`, a task of that loop. The feed creates a pull subscription of
its own (:func:`subscription_name`: the topic's project, the host, the process id and a counter, so two
triggerers never split one subscription's messages between them) with a one-day expiration policy, so that
Pub/Sub deletes it a day after a triggerer that died last pulled from it; it pulls (one ``Pull`` at a time, at
most :data:`PULL_TIMEOUT_SECONDS` each), acknowledges what it got, and sets the ``woke`` event of every listener
whose resource a message names (:func:`entry_keys`, :func:`event_key`). When the last listener leaves, the feed
deletes its subscription and stops. A feed that cannot subscribe (no such topic, no permission) logs why once and
stops: its listeners poll as they would without it, and the next listener to come tries again.

The subscription is transport, like the trigger's gRPC channel -- not a resource of the run: no attempt runs on
it, it costs nothing idle, and nothing of the run depends on it. So it is the feed's to create and delete, not
the supervisor's.

Importing this module imports no Google library (the feed's hook imports them in a worker thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import re
import socket
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from .loops import PerLoop

log = logging.getLogger(__name__)

#: Seconds one ``Pull`` may wait for messages (Pub/Sub returns sooner when some are there).
PULL_TIMEOUT_SECONDS = 30.0
#: Messages asked for per ``Pull``.
MAX_MESSAGES = 100
#: After an event, the watch looks at once and again after these fractions of its ``poll_interval`` (1/16, 1/8,
#: 1/4, 1/2 of it: about 2, 4, 8 and 15 s at the default 30 s), then every ``poll_interval`` as before.
FOLLOW_UP_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2)
#: Seconds the feed waits after a failed ``Pull`` before the next one: doubled up to the last.
PULL_BACKOFF_SECONDS = (1.0, 60.0)

#: (topic, gcp_conn_id, impersonation chain, emulator): the listeners that may share a feed.
FeedKey: TypeAlias = tuple[str, str | None, str | tuple[str, ...] | None, str | None]


def event_key(resource_name: str) -> str | None:
    """What a message must name for the watch of ``resource_name`` to wake: ``customJobs/ID`` for a Vertex AI
    CustomJob (``projects/P/locations/R/customJobs/ID``), ``locations/ZONE/nodes/NODE`` for a Cloud TPU node
    (``projects/P/locations/ZONE/nodes/NODE``); None for any other name. The project is left out: log entries name
    it by number or by id."""
    parts = resource_name.split("/")
    if len(parts) == 6 and parts[0] == "projects" and parts[2] == "locations":
        if parts[4] == "customJobs":
            return f"customJobs/{parts[5]}"
        if parts[4] == "nodes":
            return f"locations/{parts[3]}/nodes/{parts[5]}"
    return None


def entry_keys(entry: Mapping[str, Any]) -> set[str]:
    """The watch keys (:func:`event_key`) a LogEntry in JSON names: a Vertex AI job's ``resource.labels.job_id``
    (resource type ``ml_job``), an audit entry's ``protoPayload.resourceName``. Empty for anything else."""
    keys: set[str] = set()
    resource = entry.get("resource") or {}
    labels = resource.get("labels") or {}
    if resource.get("type") == "ml_job" and labels.get("job_id"):
        keys.add(f"customJobs/{labels['job_id']}")
    payload = entry.get("protoPayload") or {}
    name = payload.get("resourceName")
    if isinstance(name, str) and (key := event_key(name)):
        keys.add(key)
    return keys


def message_keys(data: bytes) -> set[str]:
    """:func:`entry_keys` of one Pub/Sub message's data (a LogEntry in JSON); empty when it is not one."""
    try:
        entry = json.loads(data)
    except ValueError:
        return set()
    return entry_keys(entry) if isinstance(entry, dict) else set()


_COUNTER = itertools.count(1)


def subscription_name(topic: str, host: str | None = None, pid: int | None = None) -> str:
    """A subscription name of this process's own for ``topic``: ``projects/<topic's project>/subscriptions/
    resilient-<host>-<pid>-<n>`` (the host cut to the characters a subscription id allows, at most 255 in all)."""
    project = topic.split("/")[1]
    host = re.sub(r"[^-\w.~+%]", "-", host if host is not None else socket.gethostname())[:180] or "host"
    return (f"projects/{project}/subscriptions/resilient-{host}-{os.getpid() if pid is None else pid}"
            f"-{next(_COUNTER)}")


class Listener:
    """One watch's interest in a feed: ``woke`` is set when a message names ``key``; the watch clears it."""

    __slots__ = ("key", "woke")

    def __init__(self, key: str) -> None:
        self.key = key
        self.woke = asyncio.Event()


class EventFeed:
    """One pull subscription of one event loop, shared by the listeners of one topic (see the module docstring).

    Args:
        key: the :data:`FeedKey` (its topic first).
        hook: an :class:`~..hooks.pubsub.AsyncPubSubHook` (or anything with its ``open``, ``ensure_subscription``,
            ``pull``, ``acknowledge``, ``delete_subscription`` and ``close``).
        on_idle: called when the last listener left (the registry forgets the feed).
        sleep: how the feed waits after a failed pull (replaced in tests).
    """

    def __init__(self, key: FeedKey, hook: Any, on_idle: Callable[[], None],
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.key = key
        self.topic = key[0]
        self.hook = hook
        self._on_idle = on_idle
        self._sleep = sleep
        self.subscription = subscription_name(self.topic)
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None
        #: Set once the subscription exists (tests and the detection benchmark wait for it: messages published
        #: before it are not delivered).
        self.subscribed = asyncio.Event()
        #: Messages received so far.
        self.received = 0

    def listen(self, resource_name: str) -> Listener | None:
        """Wake on messages that name ``resource_name`` (a CustomJob or a TPU node); None for a name no event
        names (:func:`event_key`). Starts the feed at the first listener."""
        key = event_key(resource_name)
        if key is None:
            return None
        listener = Listener(key)
        self._listeners.append(listener)
        if self._task is None or self._task.done():  # none yet, or one that could not subscribe: try (again)
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"events {self.topic}")
        return listener

    def leave(self, listener: Listener) -> None:
        """Stop waking ``listener``; the last to leave stops the feed (its subscription is deleted). Idempotent."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)
        if not self._listeners and self._task is not None:
            self._task.cancel()
            self._task = None
            self._on_idle()

    async def leave_and_wait(self, listener: Listener, timeout: float = 10.0) -> None:
        """:meth:`leave`, and when that stopped the feed, wait (at most ``timeout`` seconds) until it has deleted its
        subscription -- before a test's or a short-lived process's event loop closes under it."""
        task = self._task
        self.leave(listener)
        if task is not None and self._task is None:
            await asyncio.wait({task}, timeout=timeout)

    async def _run(self) -> None:
        from google.api_core import exceptions as gexc

        created = False
        try:
            await self.hook.open()
            try:
                await self.hook.ensure_subscription(self.subscription, self.topic)
                created = True
            except gexc.GoogleAPICallError as exc:
                log.warning("Cannot subscribe to %s (the watches poll without events): %s", self.topic, exc)
                return
            self.subscribed.set()
            log.info("Listening for events on %s (subscription %s)", self.topic, self.subscription)
            await self._pull_loop()
        finally:
            if created:
                with contextlib.suppress(Exception):  # Pub/Sub's expiration policy deletes it otherwise
                    await asyncio.shield(self.hook.delete_subscription(self.subscription))
            with contextlib.suppress(Exception):
                await self.hook.close()

    async def _pull_loop(self) -> None:
        from google.api_core import exceptions as gexc

        backoff = PULL_BACKOFF_SECONDS[0]
        while self._listeners:
            try:
                received = await self.hook.pull(self.subscription, MAX_MESSAGES, PULL_TIMEOUT_SECONDS)
                if received:
                    await self.hook.acknowledge(self.subscription, [m.ack_id for m in received])
            except gexc.GoogleAPICallError as exc:
                log.warning("Pull from %s failed (retrying in %.0f s): %s", self.subscription, backoff, exc)
                if isinstance(exc, gexc.NotFound):  # deleted behind our back: subscribe again
                    with contextlib.suppress(gexc.GoogleAPICallError):
                        await self.hook.ensure_subscription(self.subscription, self.topic)
                await self._sleep(backoff)
                backoff = min(backoff * 2, PULL_BACKOFF_SECONDS[1])
                continue
            backoff = PULL_BACKOFF_SECONDS[0]
            self.deliver([m.message.data for m in received])

    def deliver(self, messages: list[bytes]) -> None:
        """Wake every listener one of ``messages`` (LogEntries in JSON) names."""
        self.received += len(messages)
        named = set().union(*(message_keys(data) for data in messages)) if messages else set()
        for listener in self._listeners:
            if listener.key in named:
                listener.woke.set()


#: The feeds of each event loop (the triggerer has one loop; tests may run several, one after another).
_FEEDS: PerLoop[FeedKey, EventFeed] = PerLoop()


def feed_for(key: FeedKey, make_hook: Callable[[], Any]) -> EventFeed:
    """The running event loop's feed for ``key``, created with ``make_hook()`` when there is none."""
    return _FEEDS.get(key, lambda forget: EventFeed(key, make_hook(), forget))


def active_feeds() -> dict[FeedKey, EventFeed]:
    """The feeds of the running event loop that have listeners (for tests and diagnostics)."""
    return _FEEDS.active()


class EventListening:
    """What a trigger with an ``event_topic`` does to listen: :meth:`_listen` when its watch starts, :meth:`_pause`
    instead of a plain sleep between two looks, :meth:`_stop_listening` when the watch ends. Without an
    ``event_topic`` the pause is the plain sleep. The trigger has ``event_topic``, ``gcp_conn_id``,
    ``impersonation_chain`` and ``emulator`` attributes."""

    event_topic: str | None
    gcp_conn_id: str | None
    impersonation_chain: Any
    emulator: str | None
    _listener: Listener | None = None
    _feed: EventFeed | None = None
    _follow_ups: tuple[float, ...] | list[float] = ()  # the pauses left after the last event

    def _listen(self, resource_name: str) -> Listener | None:
        """Start listening for events that name ``resource_name``; None without an ``event_topic``."""
        if not self.event_topic:
            return None
        key = feed_key(self.event_topic, self.gcp_conn_id, self.impersonation_chain, self.emulator)
        self._feed = feed_for(key, pubsub_hook_maker(self.gcp_conn_id, self.impersonation_chain, self.emulator))
        self._listener = self._feed.listen(resource_name)
        self._follow_ups = []
        return self._listener

    async def _stop_listening(self) -> None:
        """Stop listening (the last listener of the feed waits until it deleted its subscription)."""
        feed, listener = self._feed, self._listener
        self._feed = self._listener = None
        if feed is not None and listener is not None:
            await feed.leave_and_wait(listener)

    async def _pause(self, seconds: float, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> bool:
        """Wait ``seconds`` (with ``sleep``), or less: until an event names the watched resource, or, after one did,
        until the next follow-up look (:func:`follow_ups`). True when an event cut the wait short."""
        listener = self._listener
        if listener is None:
            await sleep(seconds)
            return False
        if self._follow_ups:
            seconds = min(seconds, self._follow_ups[0])
            self._follow_ups = self._follow_ups[1:]
        if listener.woke.is_set():
            woke = True
        else:
            sleeping = asyncio.ensure_future(sleep(seconds))
            waking = asyncio.ensure_future(listener.woke.wait())
            try:
                await asyncio.wait({sleeping, waking}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (sleeping, waking):
                    task.cancel()
            woke = listener.woke.is_set()
        if woke:
            listener.woke.clear()
            self._follow_ups = follow_ups(float(getattr(self, "poll_interval", seconds)))
        return woke


def follow_ups(poll_interval: float) -> list[float]:
    """The pauses after an event, before the watch is back to one look per ``poll_interval`` (seconds):
    :data:`FOLLOW_UP_FRACTIONS` of it. An event can come before what it reports is readable from the API -- a
    replica's exit is logged before its job is FAILED -- so one look at once is not enough."""
    return [poll_interval * fraction for fraction in FOLLOW_UP_FRACTIONS]


class ThreadedListener:
    """Detection by event for an operator that polls in its worker (``deferrable=False``): an :class:`EventFeed` of
    its own, in an event loop on a thread of its own, listening for messages that name ``resource_name``;
    :meth:`pause` replaces the operator's sleep between two looks. Close it when the watch ends (the feed's
    subscription is deleted then).

    Args:
        key: the :data:`FeedKey` (topic, gcp_conn_id, impersonation chain, emulator).
        resource_name: the CustomJob or TPU node watched (:func:`event_key`).
        poll_interval: the operator's, seconds: the follow-up looks after an event are fractions of it
            (:func:`follow_ups`).
        make_hook: builds the feed's :class:`~..hooks.pubsub.AsyncPubSubHook` (called on the feed's thread).
    """

    def __init__(self, key: FeedKey, resource_name: str, poll_interval: float, make_hook: Callable[[], Any]) -> None:
        self.poll_interval = poll_interval
        self._woke = threading.Event()
        self._follow_ups: list[float] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="resilient-events", daemon=True)
        self._thread.start()
        self.feed: EventFeed | None = None
        self._listener: Listener | None = None
        self._relay: asyncio.Future[None] | None = None
        asyncio.run_coroutine_threadsafe(self._start(key, resource_name, make_hook), self._loop).result(timeout=60)

    async def _start(self, key: FeedKey, resource_name: str, make_hook: Callable[[], Any]) -> None:
        self.feed = EventFeed(key, make_hook(), lambda: None)
        self._listener = self.feed.listen(resource_name)
        if self._listener is not None:
            self._relay = asyncio.ensure_future(self._forward(self._listener))

    async def _forward(self, listener: Listener) -> None:
        while True:
            await listener.woke.wait()
            listener.woke.clear()
            self._woke.set()

    def pause(self, seconds: float) -> bool:
        """Block ``seconds``, or less: until a message names the resource, or, after one did, until the next
        follow-up look. True when an event cut the wait short."""
        if self._follow_ups:
            seconds = min(seconds, self._follow_ups.pop(0))
        woke = self._woke.wait(seconds)
        if woke:
            self._woke.clear()
            self._follow_ups = follow_ups(self.poll_interval)
        return woke

    def close(self, timeout: float = 30.0) -> None:
        """Stop listening: the feed deletes its subscription (within ``timeout`` seconds) and the thread ends.
        Idempotent."""
        if self._loop.is_closed():
            return

        async def stop() -> None:
            if self._relay is not None:
                self._relay.cancel()
            if self.feed is not None and self._listener is not None:
                await self.feed.leave_and_wait(self._listener, timeout)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()


def feed_key(topic: str, gcp_conn_id: str | None, impersonation_chain: Any, emulator: str | None) -> FeedKey:
    """The :data:`FeedKey` of a watch's topic and connection."""
    chain = impersonation_chain
    return topic, gcp_conn_id, tuple(chain) if isinstance(chain, list | tuple) else chain, emulator


def pubsub_hook_maker(gcp_conn_id: str | None, impersonation_chain: Any, emulator: str | None) -> Callable[[], Any]:
    """What builds a feed's :class:`~..hooks.pubsub.AsyncPubSubHook` for these credentials (imported when called)."""
    def make_hook() -> Any:
        from ..hooks.pubsub import AsyncPubSubHook

        return AsyncPubSubHook(gcp_conn_id, impersonation_chain, emulator=emulator)

    return make_hook


__all__ = ["MAX_MESSAGES", "PULL_TIMEOUT_SECONDS", "EventFeed", "EventListening", "FeedKey", "Listener",
           "ThreadedListener", "active_feeds", "entry_keys", "event_key", "feed_for", "feed_key", "follow_ups",
           "message_keys", "pubsub_hook_maker", "subscription_name"]
