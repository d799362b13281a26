"""What a training job's reading means to the supervisor: the job's summary (its state and error, read by the
backend or a trigger: a Vertex AI CustomJob's, ``backends.vertex.job_summary``, or a Huawei Cloud ModelArts training
job's, ``backends.modelarts.job_summary``, which says ``"platform": "modelarts"``) becomes ``JobSucceeded`` /
``JobFailed``, and a verdict the observer gave on a live job (a queue timeout or a hang, judged in the trigger or in
a poll) travels in the summary as its :data:`~.watch_event.VERDICT_KEYS`. Each platform is one row of
:data:`JOB_READINGS`: its terminal and successful states and its classifier. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..policy import Failure, FailureClass, Platform, classify_modelarts_job, classify_vertex_job
from ..policy.job_states import MODELARTS_SUCCEEDED_PHASES, MODELARTS_TERMINAL_PHASES, TERMINAL_STATES
from .events import JobFailed, JobSucceeded


class JobReading(NamedTuple):
    """How one platform's job summary is read: the states after which it never changes, those that are success,
    and its classifier (``(summary, timestamp) -> Failure | None``)."""

    terminal: frozenset[str]
    succeeded: frozenset[str]
    classify: Callable[[Mapping[str, Any], float], Failure | None]


#: The platforms whose jobs :func:`job_event` reads, by the summary's ``platform`` (default Vertex AI).
JOB_READINGS: Mapping[Platform, JobReading] = {
    Platform.VERTEX_AI: JobReading(
        TERMINAL_STATES, frozenset({"JOB_STATE_SUCCEEDED"}),
        lambda s, at: classify_vertex_job(s["state"], s.get("error_code"), s.get("error_message"),
                                          started=s.get("started"), timestamp=at)),
    Platform.MODELARTS: JobReading(
        MODELARTS_TERMINAL_PHASES, MODELARTS_SUCCEEDED_PHASES,
        lambda s, at: classify_modelarts_job(s["state"], secondary_phase=s.get("secondary_phase"),
                                             exit_code=s.get("error_code"), message=s.get("error_message"),
                                             fault_scenario=s.get("fault_scenario"), timestamp=at)),
}


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
    platform = Platform(summary.get("platform") or Platform.VERTEX_AI)
    reading = JOB_READINGS[platform]
    live = summary["state"] not in reading.terminal
    if summary.get("queue_timeout"):  # decided when the wait passed the limit (the queue timeout)
        return JobFailed(Failure(FailureClass.QUEUE_TIMEOUT, platform, message=summary["queue_timeout"],
                                 terminate_reason=summary.get("queued_state"),
                                 timestamp=summary.get("timed_out_at") or now), now, live=live)
    if summary.get("hang"):  # the last progress is when the hang began
        return JobFailed(Failure(FailureClass.HANG, platform, message=summary["hang"],
                                 timestamp=summary.get("hang_since") or now), now, live=live)
    restarts = summary.get("reissues") or None  # the platform's own, by its records (ModelArts' stages)
    if summary["state"] in reading.succeeded:
        return JobSucceeded(now, platform_restarts=restarts)
    # The failure happened when the platform ended the job; we learn of it now (detection, in the ledger).
    ended = summary.get("end_time") or now
    failure = reading.classify(summary, min(ended, now))
    if failure is None:  # PARTIALLY_SUCCEEDED is not a failure of a CustomJob
        return JobSucceeded(now, platform_restarts=restarts)
    return JobFailed(failure, now, platform_restarts=restarts)


__all__ = ["JOB_READINGS", "JobReading", "job_event", "stop_keys"]
