"""Vertex AI CustomJobs as the operator, its trigger, the sensor and the reconciler all read them: one
place for the job's facts, its terminal states, the live-job listing filter and what a look at a live job
means to the observer (:mod:`..supervisor.observe`). Importing it imports no Google library.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from ..policy import Failure, FailureClass, Platform
from ..supervisor.observe import CHECKPOINTS, Look

log = logging.getLogger(__name__)

TERMINAL_STATES = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED",
                             "JOB_STATE_EXPIRED", "JOB_STATE_PARTIALLY_SUCCEEDED"})
#: Keys of a trigger's event (and of the operator's job summary) when the job was cancelled for a reason:
#: a queue timeout (the failure's message, the state it waited in, when it was decided) or a hang (why,
#: since when).
STOP_KEYS = ("queue_timeout", "queued_state", "timed_out_at", "hang", "hang_since")


def job_summary(job: Any) -> dict[str, Any]:
    """The facts of a CustomJob (a ``google.cloud.aiplatform_v1.CustomJob``) the provider needs, as JSON:
    ``name``, ``state`` (JobState name), ``error_code``, ``error_message``, ``started`` (bool), and
    ``create_time`` / ``end_time`` in seconds since the epoch (None when unset)."""
    return {
        "name": job.name,
        "state": job.state.name,
        "error_code": int(job.error.code),
        "error_message": job.error.message,
        "started": "start_time" in job,
        "create_time": job.create_time.timestamp() if "create_time" in job else None,
        "end_time": job.end_time.timestamp() if "end_time" in job else None,
    }


def list_filter() -> str:
    """The ListCustomJobs filter for the live jobs the operator created: those carrying
    ``resilient-attempt`` (every job the operator creates, :mod:`..specs.common`) and not terminal, e.g.
    ``labels.resilient-attempt:* AND state!="JOB_STATE_CANCELLED" AND ...``. Only fields and operators that
    Vertex AI documents for this filter are used (``labels.key:*``, ``state!=``)."""
    from ..specs.common import LABEL_ATTEMPT

    return " AND ".join([f"labels.{LABEL_ATTEMPT}:*", *(f'state!="{s}"' for s in sorted(TERMINAL_STATES))])


def wants_checkpoints(summary: dict[str, Any], hang_timeout: float | None) -> bool:
    """Whether a look at the job of ``summary`` lists the checkpoints: only a RUNNING job is judged for a
    hang, and only with a ``hang_timeout`` (seconds)."""
    return hang_timeout is not None and summary["state"] == "JOB_STATE_RUNNING"


def job_look(summary: dict[str, Any], checkpoint_dir: str | None = None, checkpoint_marker: str | None = None) -> Look:
    """The observer's :class:`~..supervisor.observe.Look` at the job of ``summary`` (:func:`job_summary`): its
    state and since when it waits (``create_time``) and, given a ``checkpoint_dir`` (pass one only when
    :func:`wants_checkpoints`), the newest complete checkpoint's step there (None: none yet).

    With a ``checkpoint_dir`` this lists it -- blocking I/O: a trigger calls it in a thread. A listing that
    fails is logged and leaves the progress clock unjudged: it is no evidence of a hang.
    """
    look = Look(summary["name"], Platform.VERTEX_AI, summary["state"], summary.get("create_time"))
    if not checkpoint_dir:
        return look
    from ..checkpoints import find_latest_checkpoint

    try:
        found = find_latest_checkpoint(checkpoint_dir, marker=checkpoint_marker)
    except Exception as exc:  # any listing error: the clock is left unjudged, not a hang
        log.warning("Could not look for checkpoint progress of %s under %s: %s", summary["name"], checkpoint_dir,
                    exc)
        return look
    return replace(look, progress={CHECKPOINTS: found.step if found else None})


def stop_keys(failure: Failure) -> dict[str, Any]:
    """The :data:`STOP_KEYS` of a job cancelled for ``failure`` (a QUEUE_TIMEOUT or HANG verdict), as a trigger
    event carries them and :meth:`~..operators.vertex_ai.ResilientCustomJobOperator._outcome` reads them."""
    if failure.failure_class is FailureClass.QUEUE_TIMEOUT:
        return {"queue_timeout": failure.message, "queued_state": failure.terminate_reason,
                "timed_out_at": failure.timestamp}
    return {"hang": failure.message, "hang_since": failure.timestamp}


__all__ = ["STOP_KEYS", "TERMINAL_STATES", "job_look", "job_summary", "list_filter", "stop_keys",
           "wants_checkpoints"]
