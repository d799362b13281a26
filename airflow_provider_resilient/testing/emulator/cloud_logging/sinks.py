"""Cloud Logging sinks (moto-style backend of ``google.logging.v2.ConfigServiceV2``'s sink RPCs): which entries go
where.

Verbs are named after the RPCs (``create_sink``, ``get_sink``, ``update_sink``, ``delete_sink``, ``list_sinks``),
take and return proto-plus ``google.cloud.logging_v2.types.LogSink`` messages and raise :mod:`..errors` values
(``InvalidArgument`` naming the request field, ``NotFound``, ``AlreadyExists``). The :class:`~.service.LogStore`
owns one :class:`SinkStore` (``LogStore.sinks``) and asks it, for each entry it stores, which Pub/Sub topics the
entry goes to (:meth:`SinkStore.destinations`); the LogStore's router publishes it there.

Theory of operation, after "Route logs to supported destinations"
(https://cloud.google.com/logging/docs/export/configure_export_v2) and "View logs routed to Pub/Sub"
(https://cloud.google.com/logging/docs/export/pubsub):

* A sink lives under a parent (``projects/P``; also ``organizations/O``, ``folders/F``, ``billingAccounts/B``) and
  is named ``<parent>/sinks/<SINK_ID>`` in GetSink, UpdateSink and DeleteSink; its ``name`` field is the bare
  ``SINK_ID`` (up to 100 letters, digits, ``_``, ``-`` and ``.``, starting with a letter or digit).
* ``destination`` is ``pubsub.googleapis.com/projects/P/topics/T``, ``storage.googleapis.com/BUCKET``,
  ``bigquery.googleapis.com/projects/P/datasets/D`` or ``logging.googleapis.com/projects/P/...``; only a Pub/Sub
  destination routes anything here, the others are stored.
* ``filter`` (and each exclusion's) is the Logging query language (:func:`..filters.compile_filter`), checked at
  create and update time; blank matches every entry.
* ``writer_identity`` is the service account Cloud Logging writes as, given to every sink as Google gives it to new
  ones: ``serviceAccount:service-<PROJECT_NUMBER>@gcp-sa-logging.iam.gserviceaccount.com`` (the emulator makes up
  a stable 12-digit project number from the parent). The emulator grants nothing and checks nothing with it.
* An entry goes to a sink's destination when its ``logName`` lies under the sink's parent, the sink is not
  ``disabled``, its filter matches the entry's filter view and no enabled exclusion does. The Pub/Sub message's
  data is the LogEntry in JSON (camelCase, the filter view), its attributes
  ``{"logging.googleapis.com/timestamp": <the entry's timestamp, RFC 3339>}`` (:func:`pubsub_message`).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import AlreadyExists, InvalidArgument, NotFound
from ..filters import FilterError, compile_filter

__all__ = ["TIMESTAMP_ATTRIBUTE", "SinkStore", "pubsub_message", "writer_identity"]

#: The attribute of a routed message holding the entry's timestamp ("View logs routed to Pub/Sub").
TIMESTAMP_ATTRIBUTE = "logging.googleapis.com/timestamp"
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
#: What UpdateSink changes when its ``update_mask`` is empty (the API's documented backward-compatible default).
DEFAULT_UPDATE_FIELDS = ("destination", "filter", "include_children")
UPDATABLE_FIELDS = frozenset({"destination", "filter", "description", "disabled", "exclusions",
                              "output_version_format", "include_children", "bigquery_options"})
_PARENT = re.compile(r"(?:projects|organizations|folders|billingAccounts)/[^/]+")
_SINK_NAME = re.compile(rf"({_PARENT.pattern})/sinks/([^/]+)")
_SINK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")
_LOG_NAME = re.compile(rf"({_PARENT.pattern})/logs/.+")
_PUBSUB = re.compile(r"pubsub\.googleapis\.com/(projects/[^/]+/topics/(?!goog)[A-Za-z][A-Za-z0-9\-_.~+%]{2,254})")
_OTHER_DESTINATIONS = re.compile(r"storage\.googleapis\.com/[^/]+|bigquery\.googleapis\.com/projects/[^/]+/datasets/"
                                 r"[^/]+|logging\.googleapis\.com/projects/[^/]+(?:/.+)?")


def _types() -> Any:
    from google.cloud.logging_v2 import types

    return types


def writer_identity(parent: str) -> str:
    """The service account a sink of ``parent`` writes as: ``serviceAccount:service-<12 digits>@gcp-sa-logging
    .iam.gserviceaccount.com``, the digits a stable made-up project number of ``parent``."""
    number = 100_000_000_000 + int(hashlib.sha256(parent.encode()).hexdigest(), 16) % 900_000_000_000
    return f"serviceAccount:service-{number}@gcp-sa-logging.iam.gserviceaccount.com"


def pubsub_message(view: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The Pub/Sub message a sink makes of an entry whose filter view is ``view``: (data, attributes) -- the
    LogEntry in JSON (camelCase, as ``MessageToJson`` writes it; ``severity`` always present) and
    ``{TIMESTAMP_ATTRIBUTE: <timestamp, RFC 3339>}``."""
    return json.dumps(view).encode(), {TIMESTAMP_ATTRIBUTE: str(view.get("timestamp", ""))}


@dataclass(frozen=True)
class _Sink:
    parent: str
    resource: Any  # google.cloud.logging_v2.types.LogSink, never handed out (copies are)
    matches: Callable[[Mapping[str, Any]], bool]
    excluded: tuple[Callable[[Mapping[str, Any]], bool], ...]
    topic: str | None  # projects/P/topics/T for a Pub/Sub destination


class SinkStore:
    """The sinks of every parent, by ``<parent>/sinks/<SINK_ID>``. Thread-safe.

    Args:
        clock: returns the current time (aware datetime): ``create_time``, ``update_time`` and relative times in
            filters (``timestamp>=now-1h`` is evaluated when an entry is routed).
    """

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(tz=UTC)) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._sinks: dict[str, _Sink] = {}

    def reset(self) -> None:
        """Forget every sink."""
        with self._lock:
            self._sinks.clear()

    # ------------------------------------------------------------------ verbs
    def create_sink(self, parent: str, sink: Any, unique_writer_identity: bool = False) -> Any:
        """CreateSink: store ``sink`` (a ``LogSink`` or dict) under ``parent``; return it with ``writer_identity``,
        ``create_time`` and ``update_time`` set. ``unique_writer_identity`` changes nothing here.

        Raises InvalidArgument (``parent``, ``sink.name``, ``sink.destination``, ``sink.filter``,
        ``sink.exclusions``), AlreadyExists.
        """
        if not _PARENT.fullmatch(parent or ""):
            raise InvalidArgument(f"parent: Invalid parent {parent!r}: expected projects/PROJECT_ID (or "
                                  "organizations/, folders/, billingAccounts/).")
        resource = _copy(sink)
        if not _SINK_ID.fullmatch(resource.name):
            raise InvalidArgument(f"sink.name: Invalid sink name {resource.name!r}: up to 100 letters, digits, '_', "
                                  "'-' and '.', starting with a letter or a digit.")
        now = self.clock()
        resource.writer_identity = writer_identity(parent)
        resource.create_time = now
        resource.update_time = now
        stored = self._compiled(parent, resource)
        key = f"{parent}/sinks/{resource.name}"
        with self._lock:
            if key in self._sinks:
                raise AlreadyExists(f"Sink {resource.name} already exists")
            self._sinks[key] = stored
        return _copy(resource)

    def get_sink(self, sink_name: str) -> Any:
        """GetSink (``<parent>/sinks/<SINK_ID>``). Raises InvalidArgument (``sink_name``), NotFound."""
        key = _key(sink_name)
        with self._lock:
            return _copy(self._get(key).resource)

    def update_sink(self, sink_name: str, sink: Any, update_mask: Iterable[str] | None = None,
                    unique_writer_identity: bool = False) -> Any:
        """UpdateSink: copy the fields of ``update_mask`` (snake_case or camelCase paths; empty:
        :data:`DEFAULT_UPDATE_FIELDS`) from ``sink`` onto the stored sink; return it.

        Raises InvalidArgument (``sink_name``, ``update_mask`` naming a field that cannot be updated,
        ``sink.destination``, ``sink.filter``, ``sink.exclusions``), NotFound.
        """
        key = _key(sink_name)
        given = _copy(sink)
        paths = [_snake(p) for p in (update_mask or ())] or list(DEFAULT_UPDATE_FIELDS)
        bad = [p for p in paths if p not in UPDATABLE_FIELDS]
        if bad:
            raise InvalidArgument(f"update_mask: {', '.join(bad)} cannot be updated (updatable: "
                                  f"{', '.join(sorted(UPDATABLE_FIELDS))}).")
        with self._lock:
            current = self._get(key)
            resource = _copy(current.resource)
            for path in paths:
                setattr(resource, path, getattr(given, path))
            resource.update_time = self.clock()
            self._sinks[key] = self._compiled(current.parent, resource)
        return _copy(resource)

    def delete_sink(self, sink_name: str) -> None:
        """DeleteSink. Raises InvalidArgument (``sink_name``), NotFound."""
        key = _key(sink_name)
        with self._lock:
            self._get(key)
            del self._sinks[key]

    def list_sinks(self, parent: str, page_size: int = 0, page_token: str = "") -> tuple[list[Any], str]:
        """ListSinks: one page of the sinks of ``parent``, by name, and the next page token ("" on the last).

        Raises InvalidArgument (``parent``, ``page_size``, ``page_token``).
        """
        if not _PARENT.fullmatch(parent or ""):
            raise InvalidArgument(f"parent: Invalid parent {parent!r}: expected projects/PROJECT_ID.")
        if page_size < 0:
            raise InvalidArgument(f"page_size: {page_size} is negative.")
        with self._lock:
            sinks = [_copy(s.resource) for k, s in sorted(self._sinks.items()) if s.parent == parent]
        if page_token and (not page_token.isdigit() or int(page_token) > len(sinks)):
            raise InvalidArgument(f"page_token: Invalid page token {page_token!r}.")
        start = int(page_token or 0)
        end = start + min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        return sinks[start:end], (str(end) if end < len(sinks) else "")

    # ------------------------------------------------------------------ routing
    def destinations(self, view: Mapping[str, Any]) -> list[str]:
        """The Pub/Sub topics (``projects/P/topics/T``) an entry whose filter view is ``view`` goes to: one per
        matching enabled sink of the entry's parent with a Pub/Sub destination (module docstring)."""
        match = _LOG_NAME.fullmatch(str(view.get("logName", "")))
        if match is None:
            return []
        with self._lock:
            sinks = [s for s in self._sinks.values()
                     if s.parent == match.group(1) and s.topic and not s.resource.disabled]
        return [str(s.topic) for s in sinks if s.matches(view) and not any(excluded(view) for excluded in s.excluded)]

    # ------------------------------------------------------------------ helpers
    def _get(self, key: str) -> _Sink:
        stored = self._sinks.get(key)
        if stored is None:
            raise NotFound(f"Sink {key.rsplit('/', 1)[-1]} does not exist")
        return stored

    def _compiled(self, parent: str, resource: Any) -> _Sink:
        """The sink with its filters compiled. Raises InvalidArgument for a bad destination or filter."""
        destination = resource.destination
        pubsub = _PUBSUB.fullmatch(destination)
        if not destination:
            raise InvalidArgument("sink.destination: Required field is not set.")
        if pubsub is None and not _OTHER_DESTINATIONS.fullmatch(destination):
            raise InvalidArgument(f"sink.destination: Invalid destination {destination!r}: expected "
                                  "pubsub.googleapis.com/projects/PROJECT_ID/topics/TOPIC_ID, "
                                  "storage.googleapis.com/BUCKET, bigquery.googleapis.com/projects/PROJECT_ID/"
                                  "datasets/DATASET or logging.googleapis.com/projects/PROJECT_ID/...")
        matches = self._filter("sink.filter", resource.filter)
        excluded = tuple(self._filter(f"sink.exclusions[{n}].filter", e.filter)
                         for n, e in enumerate(resource.exclusions) if not e.disabled)
        return _Sink(parent, resource, matches, excluded, pubsub.group(1) if pubsub else None)

    def _filter(self, field_name: str, text: str) -> Callable[[Mapping[str, Any]], bool]:
        try:
            return compile_filter(text or "", now=self.clock)
        except FilterError as exc:
            raise InvalidArgument(f"{field_name}: Invalid filter {text!r}: {exc}") from exc


def _key(sink_name: str) -> str:
    match = _SINK_NAME.fullmatch(sink_name or "")
    if match is None or not _SINK_ID.fullmatch(match.group(2)):
        raise InvalidArgument(f"sink_name: Invalid sink name {sink_name!r}: expected projects/PROJECT_ID/sinks/"
                              "SINK_ID (or organizations/, folders/, billingAccounts/).")
    return sink_name


def _snake(path: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", path).lower()


def _copy(sink: Any) -> Any:
    """A proto-plus copy of a LogSink given as proto-plus, raw protobuf or dict."""
    types = _types()
    if isinstance(sink, Mapping):
        return types.LogSink(sink)
    pb_class = types.LogSink.pb()
    pb = pb_class()
    pb.CopyFrom(sink if isinstance(sink, pb_class) else types.LogSink.pb(sink))
    return types.LogSink.wrap(pb)

