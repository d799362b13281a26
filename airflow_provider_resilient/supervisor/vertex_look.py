"""What a Vertex AI job's reading means to the supervisor: the job's summary (its state and error, read by the
backend or a trigger, ``backends.vertex.job_summary``) becomes ``JobSucceeded`` / ``JobFailed``, and a verdict the
observer gave on a live job (a queue timeout or a hang, judged in the trigger or in a poll) travels in the summary
as its :data:`~.watch_event.VERDICT_KEYS`. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..policy import Failure, FailureClass, Platform, classify_vertex_job
from ..policy.job_states import TERMINAL_STATES
from .events import JobFailed, JobSucceeded


def stop_keys(failure: Failure) -> dict[str, Any]:
    """The verdict keys (:data:`~.watch_event.VERDICT_KEYS`) of a job to be ended for ``failure`` (a QUEUE_TIMEOUT
    or HANG verdict), as a trigger event carries them and :func:`job_event` reads them."""
    if failure.failure_class is FailureClass.QUEUE_TIMEOUT:
        return {"queue_timeout": failure.message, "queued_state": failure.terminate_reason,
                "timed_out_at": failure.timestamp}
    return {"hang": failure.message, "hang_since": failure.timestamp}


def job_event(summary: Mapping[str, Any], now: float) -> JobSucceeded | JobFailed:
    """What the job of ``summary`` (``backends.vertex.job_summary``, perhaps with the verdict keys,
    :data:`~.watch_event.VERDICT_KEYS`) means to the supervisor at ``now`` (epoch seconds): a queue timeout or hang
    judged while it ran (``live`` while it is not terminal: the supervisor ends it), success, or its classified failure
    (:func:`~..policy.classify_vertex_job`, dated when the platform ended it). PARTIALLY_SUCCEEDED is success."""
    live = summary["state"] not in TERMINAL_STATES
    if summary.get("queue_timeout"):  # decided when the wait passed the limit (the queue timeout)
        return JobFailed(Failure(FailureClass.QUEUE_TIMEOUT, Platform.VERTEX_AI, message=summary["queue_timeout"],
                                 terminate_reason=summary.get("queued_state"),
                                 timestamp=summary.get("timed_out_at") or now), now, live=live)
    if summary.get("hang"):  # the last progress is when the hang began
        return JobFailed(Failure(FailureClass.HANG, Platform.VERTEX_AI, message=summary["hang"],
                                 timestamp=summary.get("hang_since") or now), now, live=live)
    if summary["state"] == "JOB_STATE_SUCCEEDED":
        return JobSucceeded(now)
    # The failure happened when the platform ended the job; we learn of it now (detection, in the ledger).
    ended = summary.get("end_time") or now
    failure = classify_vertex_job(summary["state"], summary.get("error_code"), summary.get("error_message"),
                                  started=summary.get("started"), timestamp=min(ended, now))
    if failure is None:  # PARTIALLY_SUCCEEDED is not a failure of a CustomJob
        return JobSucceeded(now)
    return JobFailed(failure, now)


__all__ = ["job_event", "stop_keys"]
