"""The one event the provider's triggers send back to their operator: :class:`WatchEvent`, typed and versioned.

Every trigger of the provider -- the Vertex AI job trigger, the TPU node trigger -- ends with one ``TriggerEvent``
whose payload is :meth:`WatchEvent.payload` (plain JSON, as Airflow stores it); the operators' one
``execute_complete`` reads it back with :meth:`WatchEvent.from_payload` and hands it to the platform's resume rule.
What a status means:

==================  ===========================================================================================
``terminal``        the job ended (``job``: its summary); the supervisor judges it
``hang``            the observer judged the live job hung (``verdict``: its :data:`VERDICT_KEYS`)
``queue_timeout``   the observer judged the job queued too long (``verdict`` likewise)
``changed``         the node, its queued resource or its workers changed: a full look decides
``look_again``      nothing changed, but a full look is due (audit log, progress, maintenance)
``gone``            the watched resource no longer exists: a full look decides
``error``           the trigger could not read the resource (``message``): a look decides
``timer``           a backoff's wait is over (nothing was watched)
==================  ===========================================================================================

Every event may carry ``steps`` (``[[time, step], ...]``, the progress the trigger saw, for the goodput ledger) and
``watch`` (the observer's memory, :meth:`~.observe.WatchMemory.to_json`, so hang clocks go on across deferrals).
The payload keeps each key at its top level (``status``, ``job``, ``message``, ``watch``, ``steps``, the verdict's
keys) and adds ``version`` and ``resource``. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The payload version this release writes and reads; a payload without one is version 1's shape.
WATCH_EVENT_VERSION = 1
#: The statuses an event may have (see the module docstring).
STATUSES = ("terminal", "hang", "queue_timeout", "changed", "look_again", "gone", "error", "timer")
#: The keys of an observer's verdict on a live job, kept at the payload's top level.
VERDICT_KEYS = ("queue_timeout", "queued_state", "timed_out_at", "hang", "hang_since")


class WatchEventTooNew(ValueError):
    """A payload written by a newer release of the provider (a triggerer upgraded before the workers)."""


@dataclass(frozen=True)
class WatchEvent:
    """What a trigger saw, for its operator to resume on.

    Attributes:
        status: one of :data:`STATUSES`.
        resource: the job or node watched (``projects/.../customJobs/ID`` or ``.../nodes/ID``).
        message: what happened, for the task log.
        job: a job's summary (``backends.vertex.job_summary``) with ``terminal`` / ``hang`` / ``queue_timeout``.
        verdict: the observer's verdict on a live job (:data:`VERDICT_KEYS`).
        watch: the observer's memory (``WatchMemory.to_json()``), or None.
        steps: ``(time, step)`` progress seen (epoch seconds, training step), oldest first.
    """

    status: str
    resource: str = ""
    message: str = ""
    job: Mapping[str, Any] | None = None
    verdict: Mapping[str, Any] = field(default_factory=dict)
    watch: Mapping[str, Any] | None = None
    steps: Sequence[Sequence[float]] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"WatchEvent.status: {self.status!r} is not one of {', '.join(STATUSES)}")

    def payload(self) -> dict[str, Any]:
        """The event as a ``TriggerEvent`` payload (plain JSON)."""
        data: dict[str, Any] = {"version": WATCH_EVENT_VERSION, "status": self.status, "resource": self.resource}
        if self.message:
            data["message"] = self.message
        if self.job is not None:
            data["job"] = dict(self.job)
        data.update({k: v for k, v in self.verdict.items() if k in VERDICT_KEYS and v is not None})
        if self.watch:
            data["watch"] = dict(self.watch)
        if self.steps:
            data["steps"] = [list(s) for s in self.steps]
        return data

    @classmethod
    def from_payload(cls, data: Any) -> WatchEvent | None:
        """The event of a payload (None for no payload: a ``DateTimeTrigger``'s, or ``airflow dags test``'s).

        Raises:
            WatchEventTooNew: written by a newer release (its ``version`` is above :data:`WATCH_EVENT_VERSION`).
            ValueError: not an event of the provider (no known ``status``).
        """
        if not isinstance(data, Mapping) or not data:
            return None
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"a trigger event's version must be a whole number, got {version!r}")
        if version > WATCH_EVENT_VERSION:
            raise WatchEventTooNew(f"a trigger event of version {version}; this release reads up to "
                                   f"{WATCH_EVENT_VERSION}: upgrade the provider on the workers")
        steps = data.get("steps") or ()
        return cls(status=str(data.get("status")), resource=str(data.get("resource") or data.get("node_name") or
                                                                 (data.get("job") or {}).get("name") or ""),
                   message=str(data.get("message") or ""), job=data.get("job"),
                   verdict={k: data[k] for k in VERDICT_KEYS if data.get(k) is not None},
                   watch=data.get("watch") if isinstance(data.get("watch"), Mapping) else None,
                   steps=tuple(tuple(s) for s in steps if isinstance(s, list | tuple)))


__all__ = ["STATUSES", "VERDICT_KEYS", "WATCH_EVENT_VERSION", "WatchEvent", "WatchEventTooNew"]
