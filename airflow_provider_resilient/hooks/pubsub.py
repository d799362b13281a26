"""Cloud Pub/Sub for the triggers' event feed (:mod:`..backends.events`): a subscription of the triggerer's own,
pulled from the event loop.

Google's pages this follows: "Pull subscriptions" (https://cloud.google.com/pubsub/docs/pull) -- a unary ``Pull``
returns the messages available, each to be acknowledged within the subscription's ack deadline or delivered
again; "Subscription properties" (https://cloud.google.com/pubsub/docs/subscription-properties) -- an expiration
policy deletes a subscription that had no subscriber activity for its ``ttl`` (at least 1 day), and message
retention is at least 10 minutes.

Importing this module imports no Google library (:meth:`AsyncPubSubHook.open` does, in a worker thread).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from .base import AsyncGoogleApiHook, GoogleApiHook

log = logging.getLogger(__name__)

#: Pub/Sub's smallest expiration policy: a subscription left behind by a triggerer that died is deleted by
#: Pub/Sub one day after its last pull ("Subscription properties", expiration period).
SUBSCRIPTION_TTL_SECONDS = 24 * 3600
#: Pub/Sub's smallest message retention (10 minutes): an event older than that is stale for a watch anyway.
MESSAGE_RETENTION_SECONDS = 600
#: Seconds a pulled message may stay unacknowledged before Pub/Sub delivers it again (Pub/Sub's default).
ACK_DEADLINE_SECONDS = 10
#: The label every subscription of the feed carries (``gcloud pubsub subscriptions list --filter=labels.…``).
SUBSCRIPTION_LABEL = "resilient-event-feed"


class AsyncPubSubHook(AsyncGoogleApiHook):
    """Pub/Sub subscriptions and pulls for a trigger's event loop, with the credentials and the emulator switch of
    every hook of the provider (:class:`~.base.GoogleApiHook`: ``gcp_conn_id``, ``impersonation_chain``,
    ``emulator``). Admin calls retry transient API errors for up to ``api_retry_seconds``; :meth:`pull` does not
    (the feed's loop backs off itself).

    Create and use it inside one event loop (the gRPC channel binds to it) and :meth:`close` it there.
    """

    MODULES = ("google.pubsub_v1", "google.api_core.exceptions")

    def __init__(self, gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | Sequence[str] | None = None, *, emulator: str | None = None,
                 api_retry_seconds: float = 60.0) -> None:
        super().__init__(GoogleApiHook(gcp_conn_id, impersonation_chain, emulator=emulator,
                                       api_retry_seconds=api_retry_seconds))
        self._client: Any = None

    def client(self) -> Any:
        """The ``google.pubsub_v1.SubscriberAsyncClient``; after :meth:`open` (the calls await it)."""
        if self._client is None:
            from ..clients import pubsub_subscriber_async_client

            self._client = pubsub_subscriber_async_client(credentials=self.sync.credentials,
                                                          emulator=self.sync.emulator)
        return self._client

    async def ensure_subscription(self, name: str, topic: str) -> bool:
        """Create the pull subscription ``name`` (``projects/P/subscriptions/S``) of ``topic``
        (``projects/P/topics/T``), with :data:`SUBSCRIPTION_TTL_SECONDS`, :data:`MESSAGE_RETENTION_SECONDS`,
        :data:`ACK_DEADLINE_SECONDS` and the label :data:`SUBSCRIPTION_LABEL`. Returns True when it was created,
        False when it already existed.

        Raises:
            google.api_core.exceptions.NotFound: the topic does not exist.
            google.api_core.exceptions.PermissionDenied: the credentials may not subscribe to it
                (``roles/pubsub.editor`` on the project, or ``roles/pubsub.subscriber`` on the topic plus the
                right to create subscriptions).
        """
        from google.api_core import exceptions as gexc

        request = {"name": name, "topic": topic, "ack_deadline_seconds": ACK_DEADLINE_SECONDS,
                   "message_retention_duration": {"seconds": MESSAGE_RETENTION_SECONDS},
                   "expiration_policy": {"ttl": {"seconds": SUBSCRIPTION_TTL_SECONDS}},
                   "labels": {SUBSCRIPTION_LABEL: "true"}}
        try:
            await self.call(lambda: self.client().create_subscription(request=request, retry=None))
        except gexc.AlreadyExists:
            return False
        return True

    async def pull(self, subscription: str, max_messages: int, timeout: float) -> list[Any]:
        """One ``Pull``: the ``ReceivedMessage`` list Pub/Sub returns within ``timeout`` seconds (empty when none
        came: a deadline exceeded is no error here). Not retried.

        Raises:
            google.api_core.exceptions.GoogleAPICallError: any other error (NotFound: the subscription is gone).
        """
        from google.api_core import exceptions as gexc

        await self.open()
        try:
            response = await self.client().pull(request={"subscription": subscription, "max_messages": max_messages},
                                                retry=None, timeout=timeout)
        except gexc.DeadlineExceeded:
            return []
        return list(response.received_messages)

    async def acknowledge(self, subscription: str, ack_ids: Sequence[str]) -> None:
        """Acknowledge ``ack_ids`` (unknown or expired ids are ignored by Pub/Sub)."""
        if ack_ids:
            await self.call(lambda: self.client().acknowledge(
                request={"subscription": subscription, "ack_ids": list(ack_ids)}, retry=None))

    async def delete_subscription(self, name: str) -> None:
        """Delete subscription ``name``; one already gone is fine."""
        from google.api_core import exceptions as gexc

        with contextlib.suppress(gexc.NotFound):
            await self.call(lambda: self.client().delete_subscription(request={"subscription": name}, retry=None))

    async def close(self) -> None:
        """Close the gRPC channel of the client made so far (in the event loop that used it). Idempotent."""
        client, self._client = self._client, None
        if client is not None:
            await client.transport.close()


__all__ = ["ACK_DEADLINE_SECONDS", "MESSAGE_RETENTION_SECONDS", "SUBSCRIPTION_LABEL", "SUBSCRIPTION_TTL_SECONDS",
           "AsyncPubSubHook"]
