"""Failure classes and the failure record.

Every failure the provider observes -- a Vertex AI CustomJob that ended FAILED, a legacy AI Platform
Training ``errorMessage``, a Cloud TPU node that went TERMINATED, an audit-log entry, a worker process
exit status -- is turned into one :class:`Failure` with one :class:`FailureClass`. The retry rules
(:mod:`.rules`) match on these records only, never on raw API objects, so the same rules serve every
platform.

The classes are the rows of the retry rules table (the documentation's "Failure policy" page); each
member's docstring names the public page the row comes from:

* Vertex AI, "Understand the custom training service":
  https://cloud.google.com/vertex-ai/docs/training/understanding-training-service
* AI Platform Training, "Understanding the AI Platform Training service":
  https://cloud.google.com/ai-platform/training/docs/understanding-training-service
* Cloud TPU, "Manage maintenance events with Cloud TPU Pods": https://cloud.google.com/tpu/docs/maintenance-events
* Huawei Cloud ModelArts, "Training Fault Tolerance Check":
  https://support.huaweicloud.com/intl/en-us/develop-modelarts/modelarts_trouble_0003.html
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Platform(enum.StrEnum):
    """Where a failure was observed."""

    VERTEX_AI = "vertex_ai"
    AI_PLATFORM = "ai_platform"
    """Legacy AI Platform Training (``ml.googleapis.com/v1``), shut down 2025-01-31; old specs live on."""
    TPU = "tpu"
    MODELARTS = "modelarts"
    """Huawei Cloud ModelArts training jobs (the v2 training job API)."""


class FailureClass(enum.StrEnum):
    """What kind of failure happened. One member per row of the retry rules table.

    The default rule for each class is in :data:`.rules.DEFAULT_RULES`.
    """

    TRANSIENT_CRASH = "transient_crash"
    """User code died of SIGABRT or SIGSEGV: exit code 6 or 134, 11 or 139.
    Vertex AI and AI Platform Training, "Understand(ing) the training service": "ExitCode 6, ExitCode 134
    (custom containers), ExitCode 11, ExitCode 139" are the "potentially transient" codes for which the
    platform retries the job up to three times."""

    PERMANENT_USER_ERROR = "permanent_user_error"
    """User code exited non-zero with any other code (a Python traceback exits 1). Vertex AI, "Understand
    the custom training service": a worker that fails because of a common error is treated as a permanent
    error and the whole job is shut down. Also a create call the platform refuses as wrong -- a machine or
    accelerator type the zone does not offer, a field the API rejects, a missing permission or service account, an
    API not enabled -- by its text or its rpc code."""

    OUT_OF_MEMORY = "out_of_memory"
    """"The replica REPLICA_NAME ran out of memory and exited with a non-zero status of EXIT_CODE."
    (Vertex AI, "Understand the custom training service"; legacy AI Platform Training wrote "ran out-of-memory"),
    and the frameworks' own wordings: XLA's "RESOURCE_EXHAUSTED: ... Ran out of memory in memory space hbm" (device
    memory, not a quota nor capacity), "CUDA out of memory", "OOMKilled". Retrying on the same machine type fails the
    same way."""

    CAPACITY_STOCKOUT = "capacity_stockout"
    """"Resources are insufficient in region: REGION_NAME. Try a different region or use a different
    accelerator." (Vertex AI and AI Platform Training, "Understand(ing) the training service") -- Compute
    Engine is out of the chosen CPU/GPU/TPU in that region; "not related to project quota". Likewise a zone out of
    capacity: ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS), "The zone '...' does not have enough resources available
    to fulfill the request" (Compute Engine, "Troubleshooting resource availability errors"), Cloud TPU's "There is
    no more capacity in the zone", "Insufficient reserved capacity"; and a RESOURCE_EXHAUSTED that names no
    quota."""

    QUOTA_EXCEEDED = "quota_exceeded"
    """A project quota is used up: Vertex AI's "The following quota metrics exceed quota limits: ...", Compute
    Engine's and Cloud TPU's "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: ..." / "Quota limit '...' has been
    exceeded", legacy AI Platform Training's "Quota failure for project ..." -- whatever the rpc code (429 /
    RESOURCE_EXHAUSTED come with capacity errors too; a text naming a quota is never a stockout). Quota frees as
    the project's other jobs end (Vertex AI, "Understand the custom training service": a job may stay QUEUED
    until there is enough quota)."""

    CONTAINER_START_ERROR = "container_start_error"
    """The container never ran the user's code: "Termination reason: StartError", exit 126 (not
    executable), 127 (command not found) or 128 (invalid exit / runtime start failure)."""

    INTERNAL_ERROR = "internal_error"
    """"Internal error occurred for the current attempt." Vertex AI, "Understand the custom training
    service": the platform restarts the job twice (three attempts in total) before reporting it."""

    WORKER_FAILURE = "worker_failure"
    """A worker was lost for a non-permanent reason that is not the user's code: SIGKILL (137) without an
    out-of-memory report, SIGTERM (143), a lost VM, an injected infrastructure fault. AI Platform Training
    and Vertex AI, "Understand(ing) the training service": the platform restarts such a worker in place up
    to five times, then retries the whole job up to three times."""

    MAINTENANCE_EVENT = "maintenance_event"
    """A Cloud TPU maintenance event (Cloud TPU, "Manage maintenance events with Cloud TPU Pods"): audit
    log ``tpu.nodes.restart`` / ``tpu.nodes.terminate``, health UNHEALTHY_MAINTENANCE, state REPAIRING /
    RESTARTING, or TERMINATED, or a health description "The TPU had a maintenance event at ...". Most recover by
    themselves;
    some do not and the TPU must be deleted and re-created."""

    PREEMPTION = "preemption"
    """A Spot / preemptible resource was reclaimed: TPU node state PREEMPTED, an audit entry whose terminate reason
    says preempted, or Compute Engine's "Instance failed to start due to preemption."."""

    NODE_UNHEALTHY = "node_unhealthy"
    """A TPU node reports health TIMEOUT or UNHEALTHY_TENSORFLOW, or a hardware symptom (EXECUTE_TIMED_OUT,
    MESH_BUILD_FAIL, LOW_MEMORY), or its TPU devices cannot be opened ("TPU initialization failed: ... Couldn't
    open device"). Like the periodic hardware check of ModelArts' "Training Fault Tolerance Check": isolate the node
    and start afresh."""

    PREFLIGHT_FAILURE = "preflight_failure"
    """The worker's preflight check failed before user code ran (DNS, disk space, ulimit, GPU checks: the
    environment pre-check of ModelArts' "Training Fault Tolerance Check", which isolates the faulty node and
    re-issues the job, 1 to 3 times)."""

    WORKER_SILENT = "worker_silent"
    """A TPU worker's runner never reported within the start-up deadline (the operator's
    ``startup_timeout``): the setup script broke, the runner could not start, the VM never came up. None of
    the user's code ran. Like a faulty node in ModelArts' "Training Fault Tolerance Check": release the node
    and re-issue the job on a new one."""

    QUEUE_TIMEOUT = "queue_timeout"
    """The job or queued resource waited for capacity longer than the limit. ModelArts, "Training Fault
    Tolerance Check": "If the waiting time exceeds 30 minutes, the training job will automatically
    exit"."""

    HANG = "hang"
    """No heartbeat or no checkpoint progress for longer than the configured limit. Treated as a
    transient crash and shares its budget."""

    CANCELLED = "cancelled"
    """Someone cancelled the job or stopped / deleted the node. Never retried."""

    CHECKPOINT_RESTORE = "checkpoint_restore"
    """A checkpoint that looks complete but will not load: an attempt that resumed from step N failed before
    it made any progress past N, with a restore error in its message, with a permanent error (a traceback
    right after loading), or for the second time in a row from N. Never produced by a classifier: the rule is
    :func:`.demotion.checkpoint_to_demote`, over the attempt's resume point and progress; the supervisor
    (:func:`..supervisor.machine.step`) asks it when an attempt fails, demotes step N -- it is never resumed
    from again -- and the next attempt resumes from the newest complete checkpoint before it."""

    UNKNOWN = "unknown"
    """Nothing above matched. The default rule retries it once from the checkpoint, then gives up."""


#: Classes that retrying on the same spec cannot fix. Used by the default rules and by tests.
PERMANENT_CLASSES: frozenset[FailureClass] = frozenset(
    {
        FailureClass.PERMANENT_USER_ERROR,
        FailureClass.OUT_OF_MEMORY,
        FailureClass.CONTAINER_START_ERROR,
        FailureClass.CANCELLED,
    }
)


@dataclass(frozen=True)
class Failure:
    """One observed failure, reduced to the facts the retry rules match on.

    All fields but ``failure_class`` and ``platform`` are optional: a classifier fills in what its
    source shows. The record is JSON-serialisable through :func:`.history.history_to_json`.

    Attributes:
        failure_class: the class assigned by the classifier.
        platform: where it was observed.
        message: the error text as the platform gave it (e.g. ``CustomJob.error.message``).
        exit_code: the process exit status as reported (``128 + n`` for signal ``n`` in containers).
        signal: the signal number that killed the process, when known (6 SIGABRT, 9 SIGKILL, 11 SIGSEGV,
            15 SIGTERM).
        rpc_code: the ``google.rpc.Code`` number of the job's ``error`` or of the failed API call
            (3 INVALID_ARGUMENT, 8 RESOURCE_EXHAUSTED, 13 INTERNAL, 14 UNAVAILABLE ...).
        terminate_reason: the audit log's ``protoPayload.metadata.terminateReason`` or the container's
            "Termination reason" (``Error``, ``StartError`` ...).
        node_state: Cloud TPU ``Node.State`` name (``READY``, ``REPAIRING``, ``TERMINATED`` ...).
        node_health: Cloud TPU ``Node.Health`` name (``HEALTHY``, ``UNHEALTHY_MAINTENANCE`` ...).
        symptoms: Cloud TPU ``Symptom.SymptomType`` names reported on the node.
        worker_id: the replica (``workerpool0-0``, ``master 0``) or TPU worker index (``0``, ``1`` ...).
        worker_restarts: how many times that worker was already restarted in place (by the platform or
            by our worker runner), when reported.
        region: the region named by a stockout message.
        quota_metric: the quota metric named by a quota error, e.g.
            ``aiplatform.googleapis.com/custom_model_training_cpus``.
        timestamp: when it happened, in seconds since the Unix epoch.
    """

    failure_class: FailureClass
    platform: Platform
    message: str = ""
    exit_code: int | None = None
    signal: int | None = None
    rpc_code: int | None = None
    terminate_reason: str | None = None
    node_state: str | None = None
    node_health: str | None = None
    symptoms: tuple[str, ...] = field(default_factory=tuple)
    worker_id: str | None = None
    worker_restarts: int | None = None
    region: str | None = None
    quota_metric: str | None = None
    timestamp: float | None = None

    def summary(self) -> str:
        """One line for logs: the class and the most telling detail."""
        parts = [self.failure_class.value]
        if self.exit_code is not None:
            parts.append(f"exit {self.exit_code}")
        if self.node_state:
            parts.append(f"node {self.node_state}")
        if self.terminate_reason:
            parts.append(f"reason {self.terminate_reason}")
        if self.quota_metric:
            parts.append(f"quota {self.quota_metric}")
        if self.worker_id is not None:
            parts.append(f"worker {self.worker_id}")
        text = ", ".join(parts)
        if self.message:
            text += f": {self.message[:200]}"
        return text
