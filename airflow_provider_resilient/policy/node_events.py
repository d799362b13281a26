"""What a Cloud TPU node's events mean, beyond its own state (:func:`~.classify.classify_tpu_node`): a node that
vanished, a queued resource that failed, and when a node's failure happened (dated by the audit entry that names
it). Pure: no I/O, no clock.

Sources: Cloud TPU, "Manage maintenance events with Cloud TPU Pods"
(https://cloud.google.com/tpu/docs/maintenance-events) -- a node may be terminated by a maintenance event and
must then be re-created; "Manage queued resources" (https://cloud.google.com/tpu/docs/queued-resources) -- a
queued resource in state FAILED or SUSPENDED will not be granted (its ``failedData.error`` says why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .classify import classify_tpu_audit_entry
from .failures import Failure, FailureClass, Platform


def node_gone(node_name: str, now: float, where: str = "") -> Failure:
    """A node that the TPU API no longer knows (NotFound) while its attempt was live: a maintenance event that
    terminated it (node state TERMINATED), to be re-created. ``where``: a prefix naming the slice of a group."""
    return Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="TERMINATED",
                   message=f"{where}node {node_name} disappeared", timestamp=now)


def queued_resource_failed(name: str, state: str, error: str, now: float) -> Failure:
    """A queued resource in state FAILED or SUSPENDED: it will not be granted -- a QUEUE_TIMEOUT, which fails over
    like a request that waited too long (``terminate_reason`` is the state; the message the API's error)."""
    return Failure(FailureClass.QUEUE_TIMEOUT, Platform.TPU, message=error or f"queued resource {name} is {state}",
                   terminate_reason=state, timestamp=now)


def classify_audit_entries(entries: Iterable[Mapping[str, Any]]) -> list[Failure]:
    """The audit entries (Cloud Audit Logs entries about a node) that mean a failure, classified
    (:func:`~.classify.classify_tpu_audit_entry`); the others dropped."""
    return [f for e in entries if (f := classify_tpu_audit_entry(e)) is not None]


def dated_node_failure(failure: Failure, audits: Sequence[Failure], now: float) -> Failure:
    """``failure`` (a node's state, seen at ``now``) with the terminate reason of the newest audit entry that gives
    one, and -- when that entry is of the same class -- its time: the node's state only says the event happened by
    now, and a look late by an outage (no triggerer) would count the time in between as lost work. Never after
    ``now`` (an entry younger than the look: the event struck while it ran)."""
    told = next((a for a in reversed(audits) if a.terminate_reason), None)
    if told is None:
        return failure
    when = failure.timestamp
    if told.timestamp is not None and told.failure_class == failure.failure_class:
        when = min(now, told.timestamp)
    return replace(failure, terminate_reason=told.terminate_reason, timestamp=when)


__all__ = ["classify_audit_entries", "dated_node_failure", "node_gone", "queued_resource_failed"]
