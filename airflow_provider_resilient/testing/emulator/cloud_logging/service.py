"""Cloud Logging entries and verbs (moto-style backend): an in-memory, thread-safe store of log entries.

Verbs are named after the ``google.logging.v2.LoggingServiceV2`` RPCs and take and return proto-plus
``google.cloud.logging_v2.types.LogEntry`` messages; the wire layer only unpacks and packs. Errors are
:mod:`..errors` values (``InvalidArgument``).

Theory of operation:

* ``write_log_entries`` completes each entry from the request's defaults (``log_name``, ``resource``,
  ``labels``; the entry's own values win), stamps ``receive_timestamp``, defaults ``timestamp`` to now and
  assigns an ``insert_id``, then stores it together with the dict the filter language sees.
* ``list_log_entries`` keeps the entries whose ``log_name`` lies under one of ``resource_names``
  (``projects/P`` holds ``projects/P/logs/...``), applies the filter (:func:`..filters.compile_filter`),
  orders by ``timestamp`` (ties in write order) and pages with an offset token.
* The dict a filter sees is ``MessageToDict`` of the entry's protobuf, camelCase, as in Cloud Logging's
  filter language, e.g. for an audit entry (:meth:`LogStore.add_audit_entry`)::

    {"logName": "projects/P/logs/cloudaudit.googleapis.com%2Fsystem_event",
     "resource": {"type": "audited_resource",
                  "labels": {"project_id": "P", "service": "tpu.googleapis.com", "method": "tpu.nodes.terminate"}},
     "protoPayload": {"@type": "type.googleapis.com/google.cloud.audit.AuditLog",
                      "serviceName": "tpu.googleapis.com", "methodName": "tpu.nodes.terminate",
                      "resourceName": "projects/P/locations/us-central2-b/nodes/my-node",
                      "metadata": {"terminateReason": "..."},
                      "status": {"code": 8, "message": "..."}},          # errors only
     "timestamp": "2026-11-21T10:00:00.123456Z", "receiveTimestamp": "...", "severity": "NOTICE",
     "insertId": "...", "labels": {...}}

  ``severity`` is always present (``DEFAULT`` when unset) so ``severity=DEFAULT`` and ``severity<...`` work.
* Filters from the high-level ``google.cloud.logging.Client`` carry ``timestamp>="...+0000"`` (strftime's
  ``%z``, no colon); the filter language reads that offset form too.
* Sinks (:attr:`LogStore.sinks`, a :class:`~.sinks.SinkStore`) route what ``write_log_entries`` stores, as Cloud
  Logging routes each entry it receives ("Route logs to supported destinations",
  https://cloud.google.com/logging/docs/export/configure_export_v2): once the entries are stored, and outside the
  store's lock, each entry that a sink with a Pub/Sub destination matches is handed to :attr:`LogStore.router` as
  ``(topic, data, attributes)`` (:func:`~.sinks.pubsub_message`: the entry in JSON and its timestamp). The store
  knows nothing of Pub/Sub: the emulator wires the router to its Pub/Sub's ``publish``; without a router (a
  LogStore alone) nothing is routed. A topic that does not exist, or any other error of the router, drops the
  entry for that sink (Cloud Logging records a sink error; here a debug line) and never fails the write.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import EmulatorError, InvalidArgument, Unavailable
from ..faults import GET_KINDS
from ..filters import FilterError, compile_filter, index_key, required_values
from .sinks import SinkStore, pubsub_message

__all__ = ["ACTIVITY_LOG", "AUDIT_LOG_TYPE", "SYSTEM_EVENT_LOG", "LogStore"]

SYSTEM_EVENT_LOG = "cloudaudit.googleapis.com%2Fsystem_event"  # TPU maintenance events
ACTIVITY_LOG = "cloudaudit.googleapis.com%2Factivity"  # Admin Activity: the user's own calls, e.g. CreateNode
AUDIT_LOG_TYPE = "type.googleapis.com/google.cloud.audit.AuditLog"
DEFAULT_PAGE_SIZE = 50  # the API's documented default and maximum for ListLogEntries
MAX_PAGE_SIZE = 1000
MAX_LOG_ID = 512
_PARENT = re.compile(r"(projects|organizations|folders|billingAccounts)/[^/]+")
_LOG_NAME = re.compile(r"((?:projects|organizations|folders|billingAccounts)/[^/]+)/logs/(.+)")
_ORDER = {"": False, "timestamp asc": False, "timestamp desc": True}

log = logging.getLogger(__name__)

#: Where routed entries go: ``(topic, data, attributes)`` -> anything (the emulator's ``PubSubStore.publish``).
Router = Callable[[str, bytes, dict[str, str]], Any]


def _types() -> Any:
    from google.cloud.logging_v2 import types

    return types


def _now() -> datetime:
    return datetime.now(tz=UTC)


@dataclass(frozen=True)
class _Stored:
    seq: int
    timestamp: datetime
    entry: Any  # google.cloud.logging_v2.types.LogEntry, never handed out (copies are)
    view: dict[str, Any]  # what filters see


class LogStore:
    """All log entries of the emulator, keyed by nothing but write order.

    Args:
        clock: returns the current time (aware datetime); used for default timestamps,
            ``receive_timestamp`` and relative filter times (``now-24h``).
        faults: a FaultBook: ``unavailable`` faults with ``service: logging``.
        router: where the entries that sinks route go, as ``router(topic, data, attributes)`` (module
            docstring); None: nowhere. May be set later (:attr:`router`).
    """

    def __init__(self, clock: Callable[[], datetime] = _now, faults: Any = None, router: Router | None = None) -> None:
        self.clock = clock
        self.faults = faults  # a FaultBook: ``unavailable`` faults with ``service: logging``
        self.router = router
        #: The sinks (ConfigServiceV2's CreateSink ...): which stored entries go to which Pub/Sub topic.
        self.sinks = SinkStore(clock)
        self._lock = threading.Lock()
        self._entries: list[_Stored] = []
        #: The entries by ``logName``, ``resource.type`` and each ``resource.labels`` value (:func:`_index_keys`),
        #: in write order: a filter that requires one of them (``resource.labels.job_id="123"``, what a job's
        #: log reader sends) is evaluated on those entries only, not on every entry of the emulator.
        self._index: dict[tuple[tuple[str, ...], tuple[str, Any]], list[_Stored]] = {}
        self._seq = itertools.count(1)

    def reset(self) -> None:
        """Forget every entry and every sink."""
        with self._lock:
            self._entries.clear()
            self._index.clear()
        self.sinks.reset()

    # ------------------------------------------------------------------ verbs
    def write_log_entries(self, log_name: str = "", resource: Any = None, labels: Mapping[str, str] | None = None,
                          entries: Iterable[Any] = (), *, partial_success: bool = False,
                          dry_run: bool = False) -> list[Any]:
        """WriteLogEntries: store ``entries`` (LogEntry messages or dicts), completed from the request defaults.

        Args:
            log_name: default ``projects/P/logs/LOG_ID`` (LOG_ID URL-encoded, < 512 chars).
            resource: default ``google.api.MonitoredResource`` (message or ``{"type", "labels"}`` dict).
            labels: default labels, merged under each entry's own.
            partial_success: write the valid entries even if some are invalid (the call still fails).
            dry_run: validate only.

        Returns the stored entries (copies), after handing those that sinks match to :attr:`router` (module
        docstring). Raises InvalidArgument for no entries, or an entry without a valid log name or a resource
        (naming each bad entry by index).
        """
        types = _types()
        entries = list(entries)
        if not entries:
            raise InvalidArgument("entries: Required field is not set.")
        now = self.clock()
        ready: list[tuple[Any, dict[str, Any]]] = []
        errors: list[str] = []
        for index, given in enumerate(entries):
            entry = _copy(types.LogEntry(given) if isinstance(given, Mapping) else given)
            problem = self._complete(entry, log_name, resource, labels or {}, now)
            if problem:
                errors.append(f"entries[{index}]: {problem}")
            else:
                ready.append((entry, _filter_view(entry)))
        if (errors and not partial_success) or dry_run:
            ready = []
        with self._lock:
            for entry, view in ready:
                seq = next(self._seq)
                if not entry.insert_id:
                    entry.insert_id = f"{seq:012x}"
                    view["insertId"] = entry.insert_id
                stored = _Stored(seq, _aware(entry.timestamp), entry, view)
                self._entries.append(stored)
                for key in _index_keys(view):
                    self._index.setdefault(key, []).append(stored)
        self._route([view for _, view in ready])
        if errors:
            raise InvalidArgument("Log entries with invalid fields: " + "; ".join(errors))
        return [_copy(entry) for entry, _ in ready]

    def list_log_entries(self, resource_names: Iterable[str], filter_text: str = "", order_by: str = "",
                         page_size: int = 0, page_token: str = "") -> tuple[list[Any], str]:
        """ListLogEntries: one page of matching entries and the next page token ("" on the last page).

        Args:
            resource_names: ``projects/P`` (also ``organizations/O``, ``folders/F``, ``billingAccounts/B``;
                a log view ``projects/P/locations/L/buckets/B/views/V`` counts as ``projects/P``).
            filter_text: Cloud Logging filter (:mod:`..filters`); blank matches everything.
            order_by: ``timestamp asc`` (default) or ``timestamp desc``.
            page_size: 1..1000, 0 for the default 50.
            page_token: a token from the previous page.

        Raises InvalidArgument for no or bad resource names, a bad filter, order or page token.
        """
        parents = _parents(resource_names)
        if self.faults is not None:
            key = f"list-logs:{','.join(sorted(parents))}:{page_token}"
            if self.faults.on_call(GET_KINDS, "", {}, key, "", calls="list", service="logging") is not None:
                raise Unavailable("The service is currently unavailable.")
        descending = _ORDER.get(" ".join(order_by.lower().split()))
        if descending is None:
            raise InvalidArgument(f"Invalid order_by {order_by!r}: use 'timestamp asc' or 'timestamp desc'.")
        if page_size < 0:
            raise InvalidArgument(f"Invalid page_size {page_size}.")
        matches = self._compile(filter_text)
        lookups = [(indexed, index_key(value)) for path, value in required_values(filter_text or "").items()
                   if (indexed := _indexed_path(path)) is not None]
        with self._lock:
            candidates = min((self._index.get(key, []) for key in lookups), key=len, default=self._entries)
            stored = [s for s in candidates if _parent_of(s.entry.log_name) in parents]
        # Order first (cheap), then match lazily: a page needs its entries and one more (is there a next page?),
        # not every match -- the newest 20 step lines of a long job are at the end.
        ordered = sorted(stored, key=lambda s: (s.timestamp, s.seq), reverse=descending)
        start = int(page_token) if page_token.isdigit() else 0
        end = start + min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        found = list(itertools.islice((s for s in ordered if matches(s.view)), end + 1))
        _offset(page_token, len(found))  # a token past the matches is invalid
        return [_copy(s.entry) for s in found[start:end]], (str(end) if end < len(found) else "")

    def list_logs(self, resource_names: Iterable[str], page_size: int = 0,
                  page_token: str = "") -> tuple[list[str], str]:
        """ListLogs: the distinct log names under ``resource_names``, sorted, paged like ListLogEntries."""
        parents = _parents(resource_names)
        with self._lock:
            names = sorted({s.entry.log_name for s in self._entries if _parent_of(s.entry.log_name) in parents})
        start = _offset(page_token, len(names))
        end = start + min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        return names[start:end], (str(end) if end < len(names) else "")

    def add_audit_entry(self, project: str, *, service_name: str, method_name: str, resource_name: str,
                        severity: str = "NOTICE", terminate_reason: str | None = None,
                        status_code: int | None = None, status_message: str | None = None,
                        timestamp: datetime | str | None = None, log: str = SYSTEM_EVENT_LOG,
                        resource_type: str = "audited_resource",
                        resource_labels: Mapping[str, str] | None = None) -> Any:
        """Write one Cloud Audit Logs entry as Google writes TPU events (Cloud TPU,
        "Manage maintenance events with Cloud TPU Pods": ``tpu.nodes.terminate`` / ``tpu.nodes.restart``).

        ``logName`` is ``projects/{project}/logs/{log}``; ``resource`` is ``{resource_type}`` with labels
        ``project_id``, ``service`` (= ``service_name``), ``method`` (= ``method_name``), updated by
        ``resource_labels``; ``protoPayload`` is a ``google.cloud.audit.AuditLog`` with ``serviceName``,
        ``methodName``, ``resourceName``, ``metadata.terminateReason`` (when given) and ``status``
        (``google.rpc.Status``, when ``status_code`` is given, e.g. 8 RESOURCE_EXHAUSTED for a stockout).

        Examples: maintenance ``method_name="tpu.nodes.terminate"`` or ``"tpu.nodes.restart"``; a stockout
        ``method_name="google.cloud.tpu.v2.Tpu.CreateNode", severity="ERROR", status_code=8,
        log="cloudaudit.googleapis.com%2Factivity"``. Returns the stored LogEntry.
        """
        from google.cloud.audit import audit_log_pb2
        from google.protobuf import any_pb2

        audit = audit_log_pb2.AuditLog(service_name=service_name, method_name=method_name,
                                       resource_name=resource_name)
        if terminate_reason is not None:
            audit.metadata.update({"terminateReason": terminate_reason})
        if status_code is not None:
            audit.status.code = status_code
            audit.status.message = status_message or ""
        payload = any_pb2.Any()
        payload.Pack(audit)
        labels = {"project_id": project, "service": service_name, "method": method_name, **(resource_labels or {})}
        entry = _types().LogEntry(log_name=f"projects/{project}/logs/{log}", severity=severity.upper(),
                                  resource={"type": resource_type, "labels": labels}, proto_payload=payload)
        if timestamp is not None:
            entry.timestamp = _parse_time(timestamp)
        return self.write_log_entries(entries=[entry])[0]

    # ------------------------------------------------------------------ helpers
    def _route(self, views: list[dict[str, Any]]) -> None:
        """Hand each stored entry (by its filter view) to :attr:`router` once per sink that routes it; never
        raises. Called outside the store's lock."""
        router = self.router
        if router is None:
            return
        for view in views:
            topics = self.sinks.destinations(view)
            if not topics:
                continue
            data, attributes = pubsub_message(view)
            for topic in topics:
                try:
                    router(topic, data, dict(attributes))
                except EmulatorError as exc:  # e.g. NotFound: the sink's topic does not exist
                    log.debug("sink to %s dropped entry %s: %s", topic, view.get("insertId"), exc.message)
                except Exception:  # a router's own bug must not fail the write
                    log.warning("sink to %s dropped entry %s", topic, view.get("insertId"), exc_info=True)

    def _complete(self, entry: Any, log_name: str, resource: Any, labels: Mapping[str, str],
                  now: datetime) -> str:
        """Fill ``entry`` from the request defaults in place; return a problem, or "" when it is valid."""
        entry.log_name = (entry.log_name or log_name).removeprefix("/")  # a leading "/" is dropped, per the API
        match = _LOG_NAME.fullmatch(entry.log_name)
        if not match:
            return f"log_name {entry.log_name!r} is not projects/PROJECT_ID/logs/LOG_ID"
        if len(match.group(2)) >= MAX_LOG_ID:
            return f"log id of {entry.log_name!r} is {MAX_LOG_ID} characters or more"
        pb = type(entry).pb(entry)
        if not pb.HasField("resource"):
            if resource is None or (not isinstance(resource, Mapping) and not resource.type):
                return "resource: Required field is not set."
            entry.resource = resource
        entry.labels = {**labels, **entry.labels}
        if not pb.HasField("timestamp"):
            entry.timestamp = now
        entry.receive_timestamp = now
        return ""

    def _compile(self, filter_text: str) -> Callable[[Mapping[str, Any]], bool]:
        text = filter_text or ""
        try:
            predicate = compile_filter(text, now=self.clock)
        except FilterError as exc:
            raise InvalidArgument(f"Invalid filter {filter_text!r}: {exc}") from exc
        return predicate


def _indexed_path(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The path a filter's ``path`` has in the index (:func:`_index_keys`), or None when it is not indexed."""
    if path in (("logName",), ("log_name",)):
        return ("logName",)
    if path == ("resource", "type") or (len(path) == 3 and path[:2] == ("resource", "labels")):
        return path
    return None


def _index_keys(view: Mapping[str, Any]) -> list[tuple[tuple[str, ...], tuple[str, Any]]]:
    """Where an entry is filed: its ``logName``, ``resource.type`` and ``resource.labels`` values."""
    keys: list[tuple[tuple[str, ...], tuple[str, Any]]] = []
    if "logName" in view:
        keys.append((("logName",), index_key(view["logName"])))
    resource = view.get("resource") or {}
    if "type" in resource:
        keys.append((("resource", "type"), index_key(resource["type"])))
    keys += [(("resource", "labels", name), index_key(value)) for name, value in (resource.get("labels") or {}).items()
             if isinstance(value, str | int | float | bool)]
    return keys


def _filter_view(entry: Any) -> dict[str, Any]:
    """The entry as the filter language sees it (module docstring); an unknown Any payload keeps its ``@type``."""
    from google.cloud.audit import audit_log_pb2  # noqa: F401 -- registers AuditLog so the Any unpacks
    from google.protobuf.json_format import MessageToDict

    pb = type(entry).pb(entry)
    view: dict[str, Any]
    try:
        view = MessageToDict(pb)
    except TypeError:  # an Any payload of a type this process does not know
        bare = type(pb)()
        bare.CopyFrom(pb)
        bare.ClearField("proto_payload")
        view = MessageToDict(bare)
        view["protoPayload"] = {"@type": pb.proto_payload.type_url}
    view.setdefault("severity", "DEFAULT")
    return view


def _copy(entry: Any) -> Any:
    """A proto-plus copy of a LogEntry given as proto-plus or raw protobuf."""
    types = _types()
    pb_class = types.LogEntry.pb()
    pb = pb_class()
    pb.CopyFrom(entry if isinstance(entry, pb_class) else types.LogEntry.pb(entry))
    return types.LogEntry.wrap(pb)


def _parents(resource_names: Iterable[str]) -> set[str]:
    names = list(resource_names)
    if not names:
        raise InvalidArgument("resource_names: Required field is not set.")
    parents = set()
    for name in names:
        match = _PARENT.match(name)
        if not match:
            raise InvalidArgument(f"Invalid resource name {name!r}: expected projects/PROJECT_ID (or organizations/, "
                                  "folders/, billingAccounts/).")
        parents.add(match.group(0))
    return parents


def _parent_of(log_name: str) -> str:
    match = _LOG_NAME.fullmatch(log_name)
    return match.group(1) if match else ""


def _offset(page_token: str, total: int) -> int:
    if not page_token:
        return 0
    if not page_token.isdigit() or int(page_token) > total:
        raise InvalidArgument(f"Invalid page_token {page_token!r}.")
    return int(page_token)


def _aware(stamp: datetime) -> datetime:
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _parse_time(value: datetime | str) -> datetime:
    """An aware datetime from a datetime or an RFC 3339 string (``Z`` or an offset)."""
    if isinstance(value, datetime):
        return _aware(value)
    try:
        return _aware(datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00")))
    except ValueError as exc:
        raise InvalidArgument(f"Invalid timestamp {value!r}: expected RFC 3339.") from exc

