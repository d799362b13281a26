"""Cloud Pub/Sub (``google.pubsub.v1.Publisher`` / ``Subscriber``) for the emulator: topics, pull subscriptions.

* :class:`~.service.PubSubStore` -- topics, subscriptions, backlogs and the verbs (``create_topic``, ``publish``,
  ``create_subscription``, ``pull``, ``acknowledge``, ``modify_ack_deadline`` ...), the emulator's
  :attr:`~..server.Emulator.pubsub`; Cloud Logging sinks publish through :meth:`~.service.PubSubStore.publish`.
* :func:`~.wire.publisher_handler`, :func:`~.wire.subscriber_handler` -- the gRPC handlers serving them to the
  real client libraries (``google.pubsub_v1`` over a plain-text channel).
"""

from .service import PubSubStore
from .wire import publisher_handler, subscriber_handler

__all__ = ["PubSubStore", "publisher_handler", "subscriber_handler"]
