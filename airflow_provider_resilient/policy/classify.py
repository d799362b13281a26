"""Classifiers: raw platform observations in, :class:`~.failures.Failure` records out.

One function per source of evidence:

* :func:`classify_exit_status` -- a worker process's exit status (our TPU worker runner, emulator).
* :func:`classify_error_message` -- an error text of Vertex AI or legacy AI Platform Training.
* :func:`classify_vertex_job` -- a Vertex AI CustomJob / HyperparameterTuningJob state + ``error``.
* :func:`classify_ai_platform_job` -- a legacy AI Platform Training ``Job`` state + ``errorMessage``.
* :func:`classify_create_error` -- an error returned by a create call (quota, stockout, bad request).
* :func:`classify_tpu_node` -- a Cloud TPU node's state, health and symptoms.
* :func:`classify_tpu_audit_entry` -- a Cloud Audit Logs entry about a TPU node.
* :func:`classify_queue_wait` -- a job or queued resource waiting for resources past the queue timeout.

Rules of the module: pure functions, no I/O, no Airflow or Google imports. Enum arguments are accepted
as proto-plus enums, as their names (with or without the ``JOB_STATE_`` prefix) or as numbers. Nothing
raises on odd input: what cannot be recognised becomes ``FailureClass.UNKNOWN`` carrying the raw text,
so the retry rules' documented default applies.

The texts are read by the patterns of :mod:`.messages` (each citing the public page its wording comes from), the
codes and enum values by the tables and readers of :mod:`.codes`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..worker.protocol import (  # the runner's report, and its exit-status rule: one copy, applied on the VM too
    KEY_ERROR,
    KEY_EXIT_CODE,
    KEY_HARDWARE,
    KEY_PREFLIGHT,
    KEY_RESTARTS,
    KEY_STATUS,
    PREFLIGHT_EXIT_CODE,
    STATUS_FAILED,
    STATUS_PREFLIGHT,
    STATUS_PREFLIGHT_FAILED,
)
from ..worker.protocol import classify_exit_status as exit_status_class
from ..worker.protocol import exit_code_signal as _exit_code_signal
from .codes import (
    MODELARTS_ERROR_CODES,
    MODELARTS_FAULT_SCENARIOS,
    PERMANENT_RPC_CODES,
    QUEUED_STATES,
    RETRYABLE_RPC_CODES,
    RPC_RESOURCE_EXHAUSTED,
    TPU_HEALTH,
    TPU_STATES,
    as_epoch,
    as_int,
    as_rpc_code,
    as_text,
    enum_name,
    symptom_name,
    vertex_state_name,
)
from .failures import Failure, FailureClass, Platform
from .messages import (
    EXIT_RE,
    INTERNAL_RE,
    MODELARTS_HARDWARE_RE,
    MODELARTS_PRECHECK_RE,
    MODELARTS_QUEUE_EXIT_RE,
    MODELARTS_SUSPENDED_RE,
    OOM_RE,
    OOM_TEXT_RE,
    START_ERROR_RE,
    named_class,
    quota_or_stockout,
)


def exit_code_signal(exit_code: int | None) -> int | None:
    """The signal behind an exit status, if any.

    ``-n`` (Python's ``returncode`` for a process killed by signal ``n``) and ``128 + n`` (a shell or
    container runtime reporting signal ``n``, for ``n`` from 1 to 64) both give ``n``. Raw 6 and 11 are
    the "ExitCode 6" / "ExitCode 11" forms of SIGABRT and SIGSEGV that Google's training service pages
    name.
    """
    return _exit_code_signal(as_int(exit_code))


def classify_exit_status(
    exit_code: int | None,
    *,
    platform: Platform = Platform.TPU,
    signal: int | None = None,
    worker_id: str | None = None,
    worker_restarts: int | None = None,
    message: str = "",
    timestamp: float | None = None,
    preflight_exit_code: int = PREFLIGHT_EXIT_CODE,
) -> Failure | None:
    """Classify a worker process's exit status.

    Args:
        exit_code: the status as reported: ``0`` success; ``6``/``11`` raw signal numbers; ``134``/
            ``139`` (``128 + n``); negative ``-n`` as Python's ``subprocess`` reports signal ``n``.
        signal: the killing signal when known separately; overrides the one derived from ``exit_code``.
        preflight_exit_code: the code our worker runner exits with when preflight fails.

    Returns:
        ``None`` for a clean exit (code 0 and no signal), otherwise a :class:`Failure`:
        6/134/11/139 -> TRANSIENT_CRASH; the preflight code -> PREFLIGHT_FAILURE;
        126/127/128 -> CONTAINER_START_ERROR; SIGKILL (137) and SIGTERM (143) -> WORKER_FAILURE (the
        infrastructure or the OOM killer; an explicit "ran out of memory" text is needed for
        OUT_OF_MEMORY); anything else -> PERMANENT_USER_ERROR. The rule is the worker protocol's
        (:func:`..worker.protocol.classify_exit_status`): one copy, applied on the VM and here alike.
    """
    exit_code, signal = as_int(exit_code), as_int(signal) or None  # signal 0 is no signal
    sig = signal if signal is not None else exit_code_signal(exit_code)
    name = exit_status_class(exit_code, sig, preflight_exit_code)
    if name is None:
        return None
    common: dict[str, Any] = {
        "platform": platform, "exit_code": exit_code, "signal": sig, "worker_id": worker_id,
        "worker_restarts": as_int(worker_restarts), "message": as_text(message), "timestamp": timestamp,
    }
    return Failure(failure_class=FailureClass(name), **common)


def classify_worker_report(
    report: Mapping[str, Any],
    *,
    worker_id: str | None = None,
    label: str = "worker",
    timestamp: float | None = None,
) -> Failure | None:
    """Classify one Cloud TPU worker's report, as the worker runner writes it to the node's guest attributes
    (the keys of :mod:`..worker.protocol`: ``status``, ``exit_code``, ``restarts``, ``hardware``, ``preflight``,
    ``error``).

    Args:
        report: the worker's keys and values (text, as guest attributes are).
        worker_id: the worker's number in the run (``Failure.worker_id``).
        label: how the message names the worker (e.g. ``"slice 1 worker 0"``).
        timestamp: when the report was read, seconds since the epoch.

    Returns:
        ``None`` for a worker that is starting, running, restarting in place or done; otherwise a :class:`Failure`:

        * ``hardware`` ``faulty: ...`` while the workload ran or when it failed -> NODE_UNHEALTHY, whatever
            the exit status says (isolate the faulty hardware -- a new node);
        * ``failed`` / ``preflight_failed`` -> :func:`classify_exit_status` of its ``exit_code`` (the
            pre-check's exit 78 -> PREFLIGHT_FAILURE), its message naming the failed check or the error.

        A fault the runner's pre-check found is the pre-check's verdict: the runner reports ``hardware`` a moment
        before ``status`` ``preflight_failed``, so a report read between the two (status still ``preflight``)
        is no failure yet -- calling it NODE_UNHEALTHY there made a failed pre-check a new node instead of a
        preflight failure (once in CI).
    """
    status = as_text(report.get(KEY_STATUS))
    hardware = as_text(report.get(KEY_HARDWARE))
    if hardware.startswith("faulty") and status not in (STATUS_PREFLIGHT, STATUS_PREFLIGHT_FAILED):
        return Failure(FailureClass.NODE_UNHEALTHY, Platform.TPU, worker_id=worker_id, timestamp=timestamp,
                       message=f"{label} hardware check failed: {hardware[len('faulty'):].lstrip(':').strip()}")
    if status not in (STATUS_FAILED, STATUS_PREFLIGHT_FAILED):
        return None
    code = as_int(report.get(KEY_EXIT_CODE)) or 1
    preflight = as_text(report.get(KEY_PREFLIGHT))
    why = f"preflight {preflight}" if status == STATUS_PREFLIGHT_FAILED and preflight else as_text(
        report.get(KEY_ERROR))
    return classify_exit_status(code, platform=Platform.TPU, worker_id=worker_id,
                                worker_restarts=as_int(report.get(KEY_RESTARTS)) or 0,
                                message=f"{label} {status} with exit {code}" + (f": {why}" if why else ""),
                                timestamp=timestamp)


def _by_text(text: str, base: dict[str, Any]) -> Failure | None:
    """What an error's text names beyond exit statuses: quota or capacity (:func:`~.messages.quota_or_stockout`), the
    platform's internal error, or a class the text names (:func:`~.messages.named_class`); None: nothing."""
    if failure := quota_or_stockout(text, base):
        return failure
    if INTERNAL_RE.search(text):
        return Failure(FailureClass.INTERNAL_ERROR, **base)
    if named := named_class(text):
        return Failure(named, **base)
    return None


def classify_error_message(
    message: str | None,
    *,
    platform: Platform = Platform.VERTEX_AI,
    rpc_code: int | None = None,
    timestamp: float | None = None,
) -> Failure:
    """Classify a Vertex AI or AI Platform Training error text (and its ``google.rpc`` code).

    The texts are matched first (Google's training service pages document them); the rpc code is only a
    fallback, since Google does not document which code each failure carries. In order: a replica that ran out of
    memory or a framework's out-of-memory error -> OUT_OF_MEMORY; a replica's exit status (StartError ->
    CONTAINER_START_ERROR, else :func:`classify_exit_status`); a quota -> QUOTA_EXCEEDED; a stockout ->
    CAPACITY_STOCKOUT; "Internal error occurred" -> INTERNAL_ERROR; a preemption, maintenance event or TPU that
    cannot be opened -> PREEMPTION / MAINTENANCE_EVENT / NODE_UNHEALTHY; a bad request (configuration, permission, API
    disabled) -> PERMANENT_USER_ERROR; then the rpc code: RESOURCE_EXHAUSTED -> CAPACITY_STOCKOUT, a retryable code ->
    INTERNAL_ERROR. Unrecognised text with no telling code -> UNKNOWN.
    """
    text = as_text(message)
    rpc_code = as_int(rpc_code)
    base: dict[str, Any] = {"platform": platform, "message": text, "rpc_code": rpc_code,
                            "timestamp": timestamp}
    if m := OOM_RE.search(text):
        code = int(m["code"]) if m["code"] else None
        return Failure(FailureClass.OUT_OF_MEMORY, exit_code=code, signal=exit_code_signal(code),
                       worker_id=m["replica"], **base)
    exited = EXIT_RE.search(text)
    if OOM_TEXT_RE.search(text):  # a framework's out-of-memory error, maybe in the exit message's log tail
        code = int(exited["code"]) if exited else None
        return Failure(FailureClass.OUT_OF_MEMORY, exit_code=code, signal=exit_code_signal(code),
                       worker_id=exited["replica"] if exited else None, **base)
    if m := exited:
        code = int(m["code"])
        reason = m["reason"]
        if reason and reason.lower() == "starterror":
            return Failure(FailureClass.CONTAINER_START_ERROR, exit_code=code, terminate_reason=reason,
                           worker_id=m["replica"], **base)
        by_code = classify_exit_status(code, platform=platform, worker_id=m["replica"], message=text,
                                       timestamp=timestamp)
        cls = by_code.failure_class if by_code else FailureClass.UNKNOWN
        return Failure(cls, exit_code=code, signal=exit_code_signal(code), terminate_reason=reason,
                       worker_id=m["replica"], **base)
    if START_ERROR_RE.search(text):
        return Failure(FailureClass.CONTAINER_START_ERROR, terminate_reason="StartError", **base)
    if failure := _by_text(text, base):
        return failure
    code = as_rpc_code(rpc_code)
    if code == RPC_RESOURCE_EXHAUSTED:
        return Failure(FailureClass.CAPACITY_STOCKOUT, **base)
    if code in RETRYABLE_RPC_CODES:  # incl. DEADLINE_EXCEEDED: the platform's own, not a hang of ours
        return Failure(FailureClass.INTERNAL_ERROR, **base)
    return Failure(FailureClass.UNKNOWN, **base)


def classify_vertex_job(
    state: Any,
    error_code: int | None = None,
    error_message: str | None = None,
    *,
    started: bool | None = None,
    timestamp: float | None = None,
) -> Failure | None:
    """Classify a Vertex AI CustomJob or HyperparameterTuningJob from its state and ``error``.

    Args:
        state: ``JobState`` (proto-plus enum, ``"JOB_STATE_FAILED"``, ``"FAILED"`` or ``5``).
        error_code: ``job.error.code`` (a ``google.rpc.Code`` number), if set.
        error_message: ``job.error.message``, if set.
        started: whether the job ever reached RUNNING (``job.start_time`` set); tells an EXPIRED job
            that never got capacity from one that ran past ``scheduling.timeout``.

    Returns:
        ``None`` unless the state is a failure: SUCCEEDED, PARTIALLY_SUCCEEDED and the non-terminal
        states (QUEUED, PENDING, RUNNING, CANCELLING, UPDATING, PAUSED) are not failures. CANCELLED ->
        CANCELLED; EXPIRED -> QUEUE_TIMEOUT when it never started (FLEX_START ``max_wait_duration``),
        otherwise PERMANENT_USER_ERROR (``scheduling.timeout`` reached: raise it or checkpoint); FAILED ->
        :func:`classify_error_message`; an unknown state -> UNKNOWN.
    """
    name = vertex_state_name(state)
    if name in ("SUCCEEDED", "PARTIALLY_SUCCEEDED", "QUEUED", "PENDING", "RUNNING", "CANCELLING",
                "UPDATING", "PAUSED"):
        return None
    message = as_text(error_message)
    error_code = as_int(error_code)
    if name == "CANCELLED":
        return Failure(FailureClass.CANCELLED, Platform.VERTEX_AI, message=message or "CustomJob was cancelled",
                       rpc_code=error_code, timestamp=timestamp)
    if name == "EXPIRED":
        if started:
            return Failure(FailureClass.PERMANENT_USER_ERROR, Platform.VERTEX_AI, rpc_code=error_code,
                           message=message or "Job ran longer than scheduling.timeout and expired.",
                           terminate_reason="EXPIRED", timestamp=timestamp)
        return Failure(FailureClass.QUEUE_TIMEOUT, Platform.VERTEX_AI, rpc_code=error_code,
                       message=message or "Job expired before it got resources (max_wait_duration).",
                       terminate_reason="EXPIRED", timestamp=timestamp)
    if name == "FAILED":
        return classify_error_message(message, platform=Platform.VERTEX_AI, rpc_code=error_code,
                                      timestamp=timestamp)
    return Failure(FailureClass.UNKNOWN, Platform.VERTEX_AI, message=f"unexpected job state {name!r}: {message}",
                   rpc_code=error_code, timestamp=timestamp)


def classify_queue_wait(
    state: Any,
    queued_since: float | None,
    now: float,
    limit_seconds: float,
    *,
    platform: Platform = Platform.VERTEX_AI,
    resource: str = "",
) -> Failure | None:
    """A job or queued resource that has waited for resources longer than the queue timeout.

    Huawei Cloud ModelArts, "Training Fault Tolerance Check": "If the waiting time exceeds 30 minutes, the
    training job will automatically exit"; Vertex AI, "Understand the custom training service": a job can sit
    in ``JOB_STATE_QUEUED`` until the project has quota again. The policy's
    ``queue-timeout`` rule then fails over to the next fallback, or fails with this message.

    Args:
        state: the job's ``JobState`` (Vertex AI: QUEUED or PENDING count as waiting), a legacy job's
            state (QUEUED, PREPARING) or a queued resource's state (ACCEPTED, WAITING_FOR_RESOURCES,
            PROVISIONING); proto-plus enum, name or number.
        queued_since: when the wait began (the job's ``create_time``), seconds since the epoch.
        now: the current time, seconds since the epoch.
        limit_seconds: ``RetryPolicy.queue_timeout_seconds``.
        resource: the job or queued resource name, for the message.

    Returns:
        A QUEUE_TIMEOUT :class:`Failure` once ``now - queued_since > limit_seconds`` in a waiting
        state; None otherwise (also for odd input).
    """
    name = vertex_state_name(state) if platform == Platform.VERTEX_AI else enum_name(state)
    since = as_epoch(queued_since)
    when = as_epoch(now)
    limit = as_epoch(limit_seconds)
    if since is None or when is None or limit is None or name not in QUEUED_STATES.get(platform, frozenset()):
        return None
    waited = when - since
    if waited <= limit:
        return None
    what = resource or "the job"
    return Failure(FailureClass.QUEUE_TIMEOUT, platform, terminate_reason=name, timestamp=when,
                   message=f"{what} waited {waited:.0f} s in {name}, longer than the queue timeout of "
                           f"{limit:.0f} s (RetryPolicy.queue_timeout_seconds; default 30 min)")


def classify_ai_platform_job(
    state: str | None, error_message: str | None = None, *, timestamp: float | None = None
) -> Failure | None:
    """Classify a legacy AI Platform Training ``Job`` (``state``, ``errorMessage``).

    States QUEUED, PREPARING, RUNNING, SUCCEEDED, CANCELLING are not failures (``None``); CANCELLED ->
    CANCELLED; FAILED -> :func:`classify_error_message` (e.g. ``The replica master 0 exited with a
    non-zero status of 1.`` -> PERMANENT_USER_ERROR); anything else -> UNKNOWN.
    """
    name = enum_name(state)
    if name in ("QUEUED", "PREPARING", "RUNNING", "SUCCEEDED", "CANCELLING", "STATE_UNSPECIFIED"):
        return None
    if name == "CANCELLED":
        return Failure(FailureClass.CANCELLED, Platform.AI_PLATFORM,
                       message=as_text(error_message) or "Job was cancelled", timestamp=timestamp)
    if name == "FAILED":
        return classify_error_message(error_message, platform=Platform.AI_PLATFORM, timestamp=timestamp)
    return Failure(FailureClass.UNKNOWN, Platform.AI_PLATFORM, message=f"unexpected job state {name!r}",
                   timestamp=timestamp)


def classify_create_error(
    code: int | None, message: str | None, *, platform: Platform = Platform.VERTEX_AI,
    timestamp: float | None = None,
) -> Failure:
    """Classify an error returned by a create call (CreateCustomJob, CreateNode, CreateQueuedResource).

    Args:
        code: the ``google.rpc.Code`` number, or an HTTP status (values >= 100 are read as HTTP: 429 is
            RESOURCE_EXHAUSTED, 5xx INTERNAL/UNAVAILABLE, 4xx a bad request).
        message: the error's text.

    The text first: an out-of-memory text (XLA's RESOURCE_EXHAUSTED memory errors) -> OUT_OF_MEMORY; a text naming
    a quota -> QUOTA_EXCEEDED (with the metric), whatever the code; a stockout text (Vertex AI region, Compute
    Engine zone, Cloud TPU zone or reservation) -> CAPACITY_STOCKOUT; a preemption text -> PREEMPTION; a bad
    request (a machine or accelerator type the zone does not offer, a field the API refuses, a permission, an API
    not enabled) -> PERMANENT_USER_ERROR. Then the code: any other RESOURCE_EXHAUSTED -> CAPACITY_STOCKOUT;
    INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, UNKNOWN -> INTERNAL_ERROR (only reached after the hook's own
    API retries); INVALID_ARGUMENT, PERMISSION_DENIED, NOT_FOUND, FAILED_PRECONDITION, UNAUTHENTICATED ->
    PERMANENT_USER_ERROR (the request itself is wrong); others -> UNKNOWN.
    """
    rpc = as_rpc_code(code)
    text = as_text(message)
    base: dict[str, Any] = {"platform": platform, "message": text, "rpc_code": rpc, "timestamp": timestamp}
    if OOM_RE.search(text) or OOM_TEXT_RE.search(text):
        return Failure(FailureClass.OUT_OF_MEMORY, **base)
    if failure := _by_text(text, base):
        return failure
    if rpc == RPC_RESOURCE_EXHAUSTED:
        return Failure(FailureClass.CAPACITY_STOCKOUT, **base)
    if rpc in RETRYABLE_RPC_CODES:
        return Failure(FailureClass.INTERNAL_ERROR, **base)
    if rpc in PERMANENT_RPC_CODES:
        return Failure(FailureClass.PERMANENT_USER_ERROR, **base)
    return Failure(FailureClass.UNKNOWN, **base)


def classify_modelarts_error(
    status: int | None, error_code: str | None, error_msg: str | None, *, timestamp: float | None = None,
) -> Failure:
    """Classify a ModelArts API error (a refused ``create_training_job``): the SDK's ``ServiceResponseException``
    ``status_code``, ``error_code`` (``ModelArts.2815``) and ``error_msg``.

    The code first (:data:`~.codes.MODELARTS_ERROR_CODES`, from ModelArts' "Error Codes" page: quota, sold-out
    resources, the platform's own errors, a wrong request); an unknown code by its text and HTTP status, as any
    create error (:func:`classify_create_error`: 429 and 5xx the platform's, other 4xx the request's).
    """
    code = as_text(error_code)
    text = as_text(error_msg)
    message = f"{code}: {text}" if code else text
    known = MODELARTS_ERROR_CODES.get(code)
    if known is not None:
        return Failure(known, Platform.MODELARTS, message=message, timestamp=timestamp)
    return classify_create_error(status, message, platform=Platform.MODELARTS, timestamp=timestamp)


def classify_modelarts_job(
    phase: str | None,
    *,
    secondary_phase: str | None = None,
    exit_code: int | None = None,
    message: str | None = None,
    fault_scenario: str | None = None,
    timestamp: float | None = None,
) -> Failure | None:
    """Classify a Huawei Cloud ModelArts training job from its status (ModelArts API reference, "Querying the Details
    About a Training Job": https://support.huaweicloud.com/intl/en-us/api-modelarts/ShowTrainingJobDetails.html).

    Args:
        phase: ``status.phase`` (Creating, Pending, Running, Failed, Completed, Terminating, Terminated, Abnormal).
        secondary_phase: ``status.secondary_phase`` (e.g. CreateFailed, Lost).
        exit_code: the first non-zero ``status.task_statuses[].exit_code``, if any.
        message: the failed task's ``message`` and the job's newest Error event, joined.
        fault_scenario: the newest run record's ``recover_records[].fault_scenario`` (chip_fault, node_fault,
            job_failed, job_hanged ...), when the platform's fault tolerance recorded one.
        timestamp: when the job failed, seconds since the epoch.

    Returns:
        None unless the phase is a failure (Creating, Pending, Running, Terminating and Completed are not).
        Terminated -> CANCELLED (a stop the provider did not ask for is a user's); Abnormal -> INTERNAL_ERROR (the
        platform's). Failed, in order: a chip or node fault -> NODE_UNHEALTHY and a hang -> HANG (the fault
        scenario, :data:`~.codes.MODELARTS_FAULT_SCENARIOS`: the platform's re-issues, when on, were spent); a failed
        environment pre-check -> PREFLIGHT_FAILURE; a hardware fault named in the text -> NODE_UNHEALTHY; a re-issued
        job that queued too long -> QUEUE_TIMEOUT ("Training Fault Tolerance Check"); a job the platform took for
        suspended -> HANG; an out-of-memory text -> OUT_OF_MEMORY; a quota, capacity, internal-error, preemption or
        bad-request text (:func:`_by_text`); the task's exit code (:func:`classify_exit_status`: 139 a transient
        crash, 1 the user's error); CreateFailed ->
        INTERNAL_ERROR, Lost -> WORKER_FAILURE; else UNKNOWN.
    """
    name = as_text(phase)
    if name in ("Creating", "Pending", "Running", "Terminating", "Completed"):
        return None
    text = as_text(message)
    base: dict[str, Any] = {"platform": Platform.MODELARTS, "message": text, "timestamp": timestamp}
    if name == "Terminated":
        return Failure(FailureClass.CANCELLED, **{**base, "message": text or "the training job was stopped"})
    if name == "Abnormal":
        return Failure(FailureClass.INTERNAL_ERROR, **{**base, "message": text or "the training job is Abnormal"})
    if name != "Failed":
        return Failure(FailureClass.UNKNOWN, **{**base, "message": f"unexpected training job phase {name!r}: {text}"})
    code = as_int(exit_code)
    scenario = MODELARTS_FAULT_SCENARIOS.get(as_text(fault_scenario))
    if scenario is not None:
        return Failure(scenario, exit_code=code, **base)
    if MODELARTS_PRECHECK_RE.search(text):
        return Failure(FailureClass.PREFLIGHT_FAILURE, exit_code=code, **base)
    if MODELARTS_HARDWARE_RE.search(text):
        return Failure(FailureClass.NODE_UNHEALTHY, exit_code=code, **base)
    if MODELARTS_QUEUE_EXIT_RE.search(text):
        return Failure(FailureClass.QUEUE_TIMEOUT, terminate_reason=as_text(secondary_phase) or None, **base)
    if MODELARTS_SUSPENDED_RE.search(text):
        return Failure(FailureClass.HANG, **base)
    if OOM_RE.search(text) or OOM_TEXT_RE.search(text):
        return Failure(FailureClass.OUT_OF_MEMORY, exit_code=code, signal=exit_code_signal(code), **base)
    if failure := _by_text(text, base):
        return failure
    if code:
        by_code = classify_exit_status(code, platform=Platform.MODELARTS, message=text, timestamp=timestamp)
        if by_code is not None:
            return by_code
    secondary = as_text(secondary_phase)
    if secondary == "CreateFailed":
        return Failure(FailureClass.INTERNAL_ERROR, terminate_reason=secondary, **base)
    if secondary == "Lost":
        return Failure(FailureClass.WORKER_FAILURE, terminate_reason=secondary, **base)
    return Failure(FailureClass.UNKNOWN, terminate_reason=secondary or None, **base)


def classify_tpu_node(
    state: Any,
    health: Any = None,
    symptoms: Iterable[Any] = (),
    health_description: str | None = None,
    *,
    timestamp: float | None = None,
) -> Failure | None:
    """Classify a Cloud TPU node from ``Node.state``, ``Node.health`` and ``Node.symptoms``.

    Args:
        state: ``Node.State`` (proto-plus enum, name or number).
        health: ``Node.Health`` (proto-plus enum, name or number), if reported.
        symptoms: ``Symptom`` messages, ``SymptomType`` values or names.
        health_description: ``Node.health_description`` (e.g. "The TPU had a maintenance event at ...").

    Returns:
        ``None`` for a node that is fine or on its way up (READY with HEALTHY or no health, CREATING,
        STARTING, REIMAGING). PREEMPTED -> PREEMPTION; TERMINATED, REPAIRING, RESTARTING or health
        UNHEALTHY_MAINTENANCE -> MAINTENANCE_EVENT (``node_state`` tells recovering from
        terminated); symptom OUT_OF_MEMORY / HBM_OUT_OF_MEMORY -> OUT_OF_MEMORY; PROJECT_ABUSE ->
        PERMANENT_USER_ERROR; health TIMEOUT / UNHEALTHY_TENSORFLOW or another symptom -> NODE_UNHEALTHY;
        STOPPING, STOPPED, DELETING, HIDING, HIDDEN -> CANCELLED (someone else stopped or removed it);
        UNKNOWN / unrecognised -> UNKNOWN.
    """
    state_name = enum_name(state, TPU_STATES)
    health_name = enum_name(health, TPU_HEALTH)
    if symptoms is None or isinstance(symptoms, (str, bytes, Mapping)) or not isinstance(symptoms, Iterable):
        symptoms = () if symptoms is None else (symptoms,)
    symptom_names = tuple(symptom_name(s) for s in symptoms)
    symptom_names = tuple(s for s in symptom_names if s and s != "SYMPTOM_TYPE_UNSPECIFIED")
    base: dict[str, Any] = {"platform": Platform.TPU, "node_state": state_name or None,
                            "node_health": health_name or None, "symptoms": symptom_names,
                            "message": as_text(health_description), "timestamp": timestamp}
    if state_name == "PREEMPTED":
        return Failure(FailureClass.PREEMPTION, **base)
    if state_name in ("TERMINATED", "REPAIRING", "RESTARTING") or health_name == "UNHEALTHY_MAINTENANCE":
        return Failure(FailureClass.MAINTENANCE_EVENT, **base)
    if state_name in ("STOPPING", "STOPPED", "DELETING", "HIDING", "HIDDEN"):
        return Failure(FailureClass.CANCELLED, **base)
    if {"OUT_OF_MEMORY", "HBM_OUT_OF_MEMORY"} & set(symptom_names):
        return Failure(FailureClass.OUT_OF_MEMORY, **base)
    if "PROJECT_ABUSE" in symptom_names:
        return Failure(FailureClass.PERMANENT_USER_ERROR, **base)
    if health_name in ("TIMEOUT", "UNHEALTHY_TENSORFLOW") or symptom_names:
        return Failure(FailureClass.NODE_UNHEALTHY, **base)
    if state_name in ("READY", "CREATING", "STARTING", "REIMAGING", "UNHIDING", "STATE_UNSPECIFIED", ""):
        return None
    return Failure(FailureClass.UNKNOWN, **base)


def _get(mapping: Any, *keys: str) -> Any:
    """``mapping[k1][k2]...`` accepting camelCase or snake_case keys; None where absent."""
    current = mapping
    for key in keys:
        if not isinstance(current, Mapping):
            return None
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
        current = current.get(key, current.get(snake))
    return current


def classify_tpu_audit_entry(entry: Mapping[str, Any]) -> Failure | None:
    """Classify a Cloud Audit Logs entry about a TPU node (Cloud TPU, "Manage maintenance events with Cloud TPU
    Pods": ``tpu.nodes.terminate`` / ``tpu.nodes.restart``).

    Args:
        entry: a LogEntry as a mapping (``LogEntry.to_dict()``, the REST JSON, or the high-level
            client's ``entry.to_api_repr()``), camelCase or snake_case keys. The fields read are
            ``protoPayload.methodName``, ``protoPayload.resourceName``,
            ``protoPayload.metadata.terminateReason``, ``protoPayload.status``, ``severity`` and
            ``timestamp`` (RFC 3339 text, a ``datetime`` or epoch seconds; it becomes
            ``Failure.timestamp``, the time of the event rather than of our look).

    Returns:
        ``tpu.nodes.terminate`` -> MAINTENANCE_EVENT with node_state TERMINATED and the terminate reason
        (PREEMPTION when the reason says preempted); ``tpu.nodes.restart`` -> MAINTENANCE_EVENT with
        node_state RESTARTING; a CreateNode / CreateQueuedResource entry with an error status (severity
        ERROR or worse) -> :func:`classify_create_error` (a stockout or a quota error); anything else
        -> ``None``.
    """
    payload = _get(entry, "protoPayload")
    if not isinstance(payload, Mapping):
        return None
    method = str(_get(payload, "methodName") or "")
    resource = str(_get(payload, "resourceName") or "")
    node = resource.rsplit("/", 1)[-1] if resource else None
    reason = as_text(_get(payload, "metadata", "terminateReason")) or None
    when = as_epoch(_get(entry, "timestamp"))
    message = f"{method} on {resource}" + (f": {reason}" if reason else "")
    if method == "tpu.nodes.terminate":
        preempted = reason is not None and "preempt" in reason.lower()
        return Failure(FailureClass.PREEMPTION if preempted else FailureClass.MAINTENANCE_EVENT,
                       Platform.TPU, message=message, terminate_reason=reason,
                       node_state="PREEMPTED" if preempted else "TERMINATED", worker_id=None, timestamp=when)
    if method == "tpu.nodes.restart":
        return Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, message=message,
                       terminate_reason=reason, node_state="RESTARTING", timestamp=when)
    status = _get(payload, "status")
    severity = enum_name(_get(entry, "severity"))
    failed = bool(status and (_get(status, "code") or _get(status, "message"))) or severity in (
        "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
    if failed and (method.endswith("CreateNode") or method.endswith("CreateQueuedResource")):
        code = _get(status, "code") if status else None
        failure = classify_create_error(code, as_text(_get(status, "message")) if status else message,
                                        platform=Platform.TPU, timestamp=when)
        return Failure(failure.failure_class, Platform.TPU, message=failure.message or message,
                       rpc_code=failure.rpc_code, region=failure.region, quota_metric=failure.quota_metric,
                       terminate_reason=node, timestamp=when)
    return None
