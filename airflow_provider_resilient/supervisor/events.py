"""What goes in and out of the supervisor's machine (:mod:`.machine`): the events the shells feed in and the
commands (actions) :func:`.machine.step` returns, one per step.

Every event carries ``now`` (seconds since the epoch): the machine reads no clock. Every side effect on a cloud
resource is an action here; the shells carry them out and decide nothing. Plain frozen records, no behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..policy import Failure

# ---------------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Started:
    """The task (re)started: first try, Airflow retry, or a user's Clear. ``rerun``: a cleared task that
    had succeeded trains again instead of returning the earlier result. ``cleared``: this try is the first
    after a person cleared the task (not an Airflow retry)."""

    now: float
    rerun: bool = False
    cleared: bool = False


@dataclass(frozen=True)
class Ended:
    """The attempt that :class:`EndAttempt` ended has ended (terminal job, node gone); ``succeeded``: it had
    finished successfully before the cancel took effect."""

    now: float
    succeeded: bool = False


@dataclass(frozen=True)
class Submitted:
    """The create call returned (or a live job of the pending attempt was found by its labels)."""

    job_name: str
    now: float
    resumed_from_step: int | None = None
    resumed_from_uri: str | None = None


@dataclass(frozen=True)
class SubmitFailed:
    """The create call itself failed (quota, stockout, bad request), after the hook's own API retries."""

    failure: Failure
    now: float


@dataclass(frozen=True)
class JobSucceeded:
    """The watched attempt finished successfully. ``live``: its resource still exists and bills until it is
    ended (a TPU node whose workers are done); a CustomJob that SUCCEEDED is over (False). ``platform_restarts``:
    the restarts or re-issues the platform made of it on its own, by its records (None: none known)."""

    now: float
    live: bool = False
    platform_restarts: int | None = None


@dataclass(frozen=True)
class JobFailed:
    """The watched attempt failed (classified by the shell). ``live``: its resource still exists and must
    be ended before another attempt starts or the run stops -- a CustomJob the observer judged hung or
    queued too long (still RUNNING / QUEUED), a TPU node whose workload failed; False when the platform
    already ended it (a FAILED CustomJob, a node that is gone). ``platform_restarts``: as for
    :class:`JobSucceeded` (a ModelArts job the platform re-issued before it gave up). ``stopped``: the live
    resource runs no workload and cannot run one again (every TPU node of the attempt PREEMPTED, TERMINATED or in
    repair, or gone): it cannot write beside the next attempt once its end is requested, so the next attempt need
    not wait for that end to finish (:class:`EndAttempt` ``wait=False``). ``spare_ready``: a spare node for the next
    attempt is READY (:mod:`.spare`): a node in repair is not waited for."""

    failure: Failure
    now: float
    live: bool = False
    platform_restarts: int | None = None
    stopped: bool = False
    spare_ready: bool = False


@dataclass(frozen=True)
class WokeUp:
    """The backoff delay of the last Sleep action is over."""

    now: float


@dataclass(frozen=True)
class MoveOff:
    """Leave the watched attempt's node before an announced maintenance window (:mod:`.maintenance`): end it
    and start the next attempt on a fresh node at once -- nothing failed, no budget is spent."""

    now: float
    reason: str


Event = Started | Submitted | SubmitFailed | JobSucceeded | JobFailed | WokeUp | Ended | MoveOff

# --------------------------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Submit:
    """Create attempt ``attempt`` on ``fallback_index`` (-1: the original target), resuming from the latest
    complete checkpoint (the shell looks it up just before the create call)."""

    attempt: int
    fallback_index: int
    failure_class: str | None = None  # what ended the previous attempt, for RESILIENT_FAILURE_CLASS


@dataclass(frozen=True)
class Watch:
    job_name: str


@dataclass(frozen=True)
class Sleep:
    seconds: float
    reason: str


@dataclass(frozen=True)
class EndAttempt:
    """End the attempt running as ``job_name`` -- cancel the CustomJob, delete the TPU node -- and report
    :class:`Ended` once the platform says it has ended: never two attempts at once. Issued when a person
    cleared the running task, and after a failure whose attempt is still live, before the next attempt (or
    the backoff before it: nothing bills while the run waits). ``wait=False`` (after ``JobFailed(stopped=True)``:
    a node that runs nothing): request the end and report :class:`Ended` at once -- the next node is created while
    the old one is deleted; the shell still makes sure it is gone before it watches the next attempt."""

    job_name: str
    reason: str
    wait: bool = True


@dataclass(frozen=True)
class Succeed:
    """The run succeeded with ``job_name``. ``end``: its resource is still live; end it (delete the TPU
    node) before the task ends."""

    job_name: str
    end: bool = False


@dataclass(frozen=True)
class Fail:
    """Stop with this message (the attempt history). Never retried by Airflow. ``end``: the resource of
    the last attempt, still live; end it (cancel the job, delete the node) before the task ends. None:
    nothing of the run is live."""

    message: str
    decision: str
    end: str | None = None


Action = Submit | Watch | Sleep | EndAttempt | Succeed | Fail


__all__ = [
    "Action",
    "EndAttempt",
    "Ended",
    "Event",
    "Fail",
    "JobFailed",
    "JobSucceeded",
    "MoveOff",
    "Sleep",
    "Started",
    "Submit",
    "SubmitFailed",
    "Submitted",
    "Succeed",
    "Watch",
    "WokeUp",
]
