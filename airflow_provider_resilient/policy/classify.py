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

The message patterns live in one block below (``_OOM_RE`` ... ``_CONFIG_ERROR_RE``), each citing the public page
its wording comes from: Vertex AI, "Understand the custom training service"
(https://cloud.google.com/vertex-ai/docs/training/understanding-training-service), AI Platform Training,
"Understanding the AI Platform Training service"
(https://cloud.google.com/ai-platform/training/docs/understanding-training-service), Compute Engine,
"Troubleshooting resource availability errors"
(https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability), and public issue
threads quoting Cloud TPU, Compute Engine and Vertex AI errors. tests/policy/error_texts.py holds over a hundred
real texts with their sources; every one is classified in tests/policy/test_error_texts.py. For example:

* ``The replica workerpool0-0 exited with a non-zero status of 139. Termination reason: Error.``
* ``The replica workerpool0-0 ran out of memory and exited with a non-zero status of 137.``
* ``Resources are insufficient in region: us-central1. Try a different region or use a different
  accelerator.``
* ``Internal error occurred for the current attempt.``
* legacy: ``The replica master 0 exited with a non-zero status of 1.``
* Compute Engine: ``The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill
  the request. Try a different zone, or try again later.`` (capacity); ``Quota 'GPUS_ALL_REGIONS' exceeded. Limit:
  0.0 globally.`` (quota).

A text naming a quota is QUOTA_EXCEEDED, never CAPACITY_STOCKOUT, whatever its rpc code (RESOURCE_EXHAUSTED / 429
come with both); only a RESOURCE_EXHAUSTED with no telling text falls back to CAPACITY_STOCKOUT. XLA's and CUDA's
out-of-memory errors (``RESOURCE_EXHAUSTED: ... Ran out of memory in memory space hbm``) are OUT_OF_MEMORY.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
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
from .failures import Failure, FailureClass, Platform

_EXIT_RE = re.compile(
    r"The replica (?P<replica>.+?) exited with a non-zero status of (?P<code>-?\d+)"
    r"(?:\.\s*Termination reason:\s*(?P<reason>[A-Za-z_]+))?",
)
_START_ERROR_RE = re.compile(r"Termination reason:\s*StartError", re.IGNORECASE)

# -- The message patterns, in one place. ---------------------------------------------------------------------------
# Each alternative names the public page its wording comes from; tests/policy/error_texts.py holds the full texts
# with their sources, and tests/policy/test_error_texts.py runs every one of them through the classifiers.

#: A replica that ran out of memory. Vertex AI, "Understand the custom training service": "The replica
#: REPLICA_NAME ran out of memory and exited with a non-zero status of EXIT_CODE."; legacy AI Platform Training
#: wrote it hyphenated, "The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)"
#: (github.com/tensorflow/models/issues/5591).
_OOM_RE = re.compile(
    r"(?:The replica (?P<replica>.+?) )?ran out[ -]of[ -]memory"
    r"(?: and exited with a non-zero status of (?P<code>-?\d+))?",
    re.IGNORECASE,
)
#: Other out-of-memory wordings: the framework's, inside a worker's error text. XLA reports exhausted TPU/GPU
#: memory under RESOURCE_EXHAUSTED -- memory, never quota nor capacity:
#: "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm"
#: (github.com/erfanzar/EasyDeL/issues/78), "RESOURCE_EXHAUSTED: Failed to allocate request for 32.00MiB ... on
#: device ordinal 0" (github.com/kingoflolz/mesh-transformer-jax/issues/237), "RESOURCE_EXHAUSTED: Attempting to
#: reserve 6.48G at the bottom of memory" (github.com/pytorch/xla/issues/3470); PyTorch's "CUDA out of memory" /
#: "CUDA error: out of memory" (github.com/med-air/CMC/issues/9, github.com/Lu-Feng/DHE-VPR/issues/2);
#: "CUDA_ERROR_OUT_OF_MEMORY" (github.com/google-research/vision_transformer/issues/40); Kubernetes' termination
#: reason "OOMKilled" (Kubernetes,
#: "Assign Memory Resources to Containers and Pods", https://kubernetes.io/docs/tasks/configure-pod-container/
#: assign-memory-resource/).
_OOM_TEXT_RE = re.compile(
    r"\bout of memory\b|\bOutOfMemoryError\b|\bCUDA_ERROR_OUT_OF_MEMORY\b|\bOOMKilled\b"
    r"|\bFailed to allocate request for\b|\bAttempting to reserve \S+ at the bottom of memory\b"
    r"|\bExceeded (?:hbm|vmem) capacity\b",
    re.IGNORECASE,
)

#: A quota of the project. Checked before capacity everywhere: a text naming a quota is a quota error, whatever
#: its rpc code (RESOURCE_EXHAUSTED and 429 come with both).
#: * Vertex AI, create and job errors: "The following quota metrics exceed quota limits:
#:   aiplatform.googleapis.com/custom_model_training_tpu_v2" (github.com/google-deepmind/xmanager/issues/29);
#:   "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model"
#:   (github.com/cline/cline/issues/651); "The following quotas are exceeded:
#:   AutoMLImageClassificationDeployedModelNodes" (github.com/GoogleCloudPlatform/vertex-ai-samples/issues/264);
#:   "Quota exceeded for quota metric '...'" (the form the previous classifier read).
#: * Compute Engine: "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally." (github.com/fastai/course-v3/
#:   pull/165), "Quota 'NVIDIA_A100_80GB_GPUS' exceeded.  Limit: 0.0 in region us-east5."
#:   (github.com/skypilot-org/skypilot/issues/2126), "Quota C2_CPUS exceeded. Limit: 24.0 in region us-west1."
#:   (github.com/verilog-to-routing/vtr-verilog-to-routing/issues/1874), return code QUOTA_EXCEEDED
#:   (github.com/skypilot-org/skypilot/pull/4333), reason quotaExceeded ("Troubleshooting bulk instance
#:   creation", https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-bulk-vm-creation); Dataproc's
#:   "Insufficient 'CPUS' quota. Requested 404.0, available 12.0."
#:   (github.com/GoogleCloudPlatform/data-science-on-gcp/issues/163).
#: * Cloud TPU: "RESOURCE_EXHAUSTED: Quota limit 'TPUV2sPodPerProjectPerRegionForTPUAPI,...' has been exceeded"
#:   (github.com/BioMedBERT/biomedbert, nohup.out); a queued resource's "Quota
#:   'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI' exhausted. Limit 20800 in region us-central2"
#:   (github.com/marin-community/marin/issues/87); quotas are "cores per project per region" (Cloud TPU, "Quotas",
#:   https://cloud.google.com/tpu/docs/quota).
#: * Legacy AI Platform Training: "Quota failure for project P. The request for 2 K80 accelerators exceeds the
#:   allowed maximum of ..." (github.com/GoogleCloudPlatform/training-data-analyst/issues/2284).
_QUOTA_RE = re.compile(
    r"quota metrics? exceeds? quota limits?|Quota exceeded for quota metric|\bQuota '?[\w.-]+'? (?:exceeded|exhausted)"
    r"|\bQuota limit '[^']+' has been exceeded|\bInsufficient '[^']+' quota|\bQuota exceeded for \S+"
    r"|\bfollowing quotas? (?:are|is) exceeded|\bQuota failure\b|\bQUOTA_EXCEEDED\b|\bquotaExceeded\b"
    r"|\bquota exceeded\b|\bexceed(?:s|ed)? (?:the |your )?quota|\bper project per (?:region|zone)\b"
    r"|PerProjectPer(?:Region|Zone)",
    re.IGNORECASE,
)
#: The quota a quota error names, where its text gives one (searched apart from ``_QUOTA_RE``, so that a code
#: before the sentence, "QUOTA_EXCEEDED: Quota 'CPUS' exceeded", still yields the metric).
_QUOTA_METRIC_RE = re.compile(
    r"quota metrics? exceeds? quota limits?:?\s*(?P<m1>[\w./-]+)"
    r"|Quota exceeded for quota metric '(?P<m2>[^']+)'"
    r"|\bQuota '?(?P<m3>[\w.-]+)'? (?:exceeded|exhausted)"
    r"|\bQuota limit '(?P<m4>[^']+)' has been exceeded"
    r"|\bInsufficient '(?P<m5>[^']+)' quota"
    r"|\bQuota exceeded for (?P<m6>[a-z][\w.-]*\.googleapis\.com/[\w./-]+)"
    r"|\bfollowing quotas? (?:are|is) exceeded:?\s*(?P<m7>[\w./-]+)",
    re.IGNORECASE,
)
_QUOTA_METRIC_GROUPS = ("m1", "m2", "m3", "m4", "m5", "m6", "m7")

#: Google is out of the hardware (capacity, not the project's quota):
#: * Vertex AI and AI Platform Training, "Understand(ing) the training service": "Resources are insufficient in
#:   region: REGION. Try a different region or use a different accelerator."; Vertex AI's "Unable to submit
#:   request because the service is temporarily out of capacity" (github.com/googleapis/google-cloud-java/
#:   issues/11195).
#: * Compute Engine, "Troubleshooting resource availability errors"
#:   (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability):
#:   ZONE_RESOURCE_POOL_EXHAUSTED, ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS, "The zone 'projects/P/zones/Z' does
#:   not have enough resources available to fulfill the request. Try a different zone, or try again later.",
#:   "A VM_TYPE VM instance with ... is currently unavailable in the ZONE zone.", "(state:STOCKOUT"; the bulk API's
#:   reason insufficientCapacity ("Troubleshooting bulk instance creation").
#: * Cloud TPU: "There is no more capacity in the zone "Z"; you can try in another zone where Cloud TPU Nodes are
#:   offered" (github.com/thevasudevgupta/gsoc-wav2vec2/issues/11); "Insufficient reserved capacity. Contact
#:   customer support to increase your reservation." (github.com/skypilot-org/skypilot/issues/4579).
_STOCKOUT_RE = re.compile(
    r"Resources are insufficient in region:?\s*(?P<region>[a-z0-9-]*)"
    r"|\bno more capacity in the zone\b|\bZONE_RESOURCE_POOL_EXHAUSTED|\bdoes not have enough resources available"
    r"|\bis currently unavailable in the [\w-]+ zone\b|\bSTOCKOUT\b|\binsufficient (?:reserved )?capacity\b"
    r"|\binsufficientCapacity\b|\bout of capacity\b",
    re.IGNORECASE,
)

#: Vertex AI / AI Platform Training, "Understand(ing) the training service".
_INTERNAL_RE = re.compile(r"Internal error occurred for the current attempt", re.IGNORECASE)

#: A Spot / preemptible VM that the platform took back: Compute Engine's "Instance failed to start due to
#: preemption." (github.com/GoogleCloudPlatform/PerfKitBenchmarker, providers/gcp/gce_virtual_machine.py).
#: "preemptible" alone (a setting) is not a preemption.
_PREEMPTION_RE = re.compile(r"\bdue to preemption\b|\bwas preempted\b", re.IGNORECASE)

#: Cloud TPU, "Manage maintenance events with Cloud TPU Pods": a node's health description "The TPU had a
#: maintenance event at 2022-01-26T03:44:36Z".
_MAINTENANCE_RE = re.compile(r"\bhad a maintenance event\b", re.IGNORECASE)

#: The TPU VM's chips cannot be opened: "TPU initialization failed: open(/dev/accel3): ... Couldn't open device:
#: /dev/accel3" (github.com/marin-community/levanter/pull/1127), "TPU platform initialization failed: NOT_FOUND: No
#: ba16c7433 device found." (github.com/jax-ml/jax/issues/12416) -- a new node, not the user's code.
_NODE_UNHEALTHY_RE = re.compile(
    r"\bTPU initialization failed\b.*\bCouldn't open device\b"
    r"|\bTPU platform initialization failed: NOT_FOUND: No \w+ device found\b",
    re.IGNORECASE | re.DOTALL,
)

#: The request itself is wrong (configuration, permission, an API not enabled): retrying cannot help.
#: * Compute Engine: "Invalid value for field 'resource.machineType': ... Machine type with name 'f1-micro' does
#:   not exist in zone 'europe-west8-a'." (github.com/gruntwork-io/terratest/issues/1132); "The resource
#:   '.../acceleratorTypes/nvidia-tesla-k80' was not found" (github.com/hashicorp/terraform-provider-google/
#:   issues/5860); "Invalid machine type "e2-standard-4" in zone "us-central2-b": GCE_NOT_FOUND"
#:   (github.com/keras-team/kinetic/issues/305); "Unknown zone."; "The referenced snapshot resource cannot be
#:   found."; "Instance properties must provide existing machine type".
#: * Cloud TPU: "Cloud TPU received a bad request. the accelerator v4-128 was not found in zone us-central2-b"
#:   (github.com/skypilot-org/skypilot/issues/3840); "Cloud TPU received an invalid argument. The field
#:   "TensorflowVersion" cannot be "2.4"." (github.com/tensorflow/tpu/issues/877); "Your request to provision TPU
#:   Node has been denied." (github.com/skypilot-org/skypilot/pull/5593).
#: * Permissions, any Google API: "Permission denied on resource project P." (github.com/tensorflow/tpu/issues/859),
#:   "Permission 'tpu.nodes.get' denied on ...", "Read access to project 'P' was denied", "not found or permission
#:   denied", "Required 'compute.instanceTemplates.create' permission for ..." (github.com/GoogleCloudPlatform/
#:   ml-on-gcp, dlvm/nvidia/README.md), "Permission iam.serviceAccounts.create is required to perform this
#:   operation" (github.com/jetstack/terraform-google-gke-cluster/issues/51), "You do not have permission to act as
#:   service_account: SA. (or it may not exist)." (github.com/dzlab/deeplearning.ai/issues/5), "Service account SA
#:   does not exist."; a disabled API: "X API has not been used in project N before or it is disabled." / "Project N
#:   is not found and cannot be used for API calls" (accessNotConfigured).
#: * Vertex AI: "List of found errors: 1.Field: job_spec...; Message: Accelerators are not supported for this
#:   project." (github.com/GoogleCloudPlatform/generative-ai/issues/151); "Accelerator "NVIDIA_TESLA_K80" is not
#:   supported for machine type "n1-standard-4"" (github.com/GoogleCloudPlatform/vertex-ai-samples/issues/213).
#: * Legacy AI Platform Training, a field violation: "Field: model.regions Error: ..."
#:   (github.com/rstudio/cloudml/issues/95), "Field: version.machine_type Error: Unsupported machine type ..."
#:   (github.com/GoogleCloudPlatform/ai-platform-samples/issues/242), "Invalid JSON payload received. Unknown name
#:   "parameter_server_type" at 'job': Cannot find field." (github.com/tensorflow/models/issues/2093).
_CONFIG_ERROR_RE = re.compile(
    r"\bInvalid value for field\b|\bdoes not exist in zone\b|\bwas not found\b|\bInvalid machine type\b"
    r"|\bUnknown zone\b|\bresource cannot be found\b|\bmust provide existing\b"
    r"|\bCloud TPU received (?:a bad request|an invalid argument)\b|\brequest to provision TPU Node has been denied\b"
    r"|\bPermission denied on resource project\b|\bPermission '[^']+' denied\b|\bPERMISSION_DENIED\b"
    r"|\bRead access to project '[^']+' was denied\b|\bnot found or permission denied\b"
    r"|\bdo not have permission to act as service_account\b|\bService account \S+ does not exist\b"
    r"|\bRequired '[^']+' permission for\b|\bPermission \S+ is required to perform this operation\b"
    r"|\bhas not been used in project \S+ before or it is disabled\b|\bcannot be used for API calls\b"
    r"|\bList of found errors:|\bis not supported\b|\bare not supported\b"
    r"|\bField: [\w.\[\]]+ Error:|\bInvalid JSON payload received\b",
    re.IGNORECASE,
)

# google.rpc.Code numbers.
RPC_OK = 0
RPC_UNKNOWN = 2
RPC_INVALID_ARGUMENT = 3
RPC_DEADLINE_EXCEEDED = 4
RPC_NOT_FOUND = 5
RPC_ALREADY_EXISTS = 6
RPC_PERMISSION_DENIED = 7
RPC_RESOURCE_EXHAUSTED = 8
RPC_FAILED_PRECONDITION = 9
RPC_ABORTED = 10
RPC_OUT_OF_RANGE = 11
RPC_UNIMPLEMENTED = 12
RPC_INTERNAL = 13
RPC_UNAVAILABLE = 14
RPC_UNAUTHENTICATED = 16

_PERMANENT_RPC_CODES = frozenset(
    {RPC_INVALID_ARGUMENT, RPC_NOT_FOUND, RPC_PERMISSION_DENIED, RPC_FAILED_PRECONDITION,
     RPC_OUT_OF_RANGE, RPC_UNIMPLEMENTED, RPC_UNAUTHENTICATED}
)
_RETRYABLE_RPC_CODES = frozenset(
    {RPC_UNKNOWN, RPC_DEADLINE_EXCEEDED, RPC_ABORTED, RPC_INTERNAL, RPC_UNAVAILABLE}
)
_HTTP_TO_RPC = {400: RPC_INVALID_ARGUMENT, 401: RPC_UNAUTHENTICATED, 403: RPC_PERMISSION_DENIED,
                404: RPC_NOT_FOUND, 409: RPC_ALREADY_EXISTS, 429: RPC_RESOURCE_EXHAUSTED,
                500: RPC_INTERNAL, 503: RPC_UNAVAILABLE, 504: RPC_DEADLINE_EXCEEDED}

_VERTEX_STATES = ("UNSPECIFIED", "QUEUED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING",
                  "CANCELLED", "PAUSED", "EXPIRED", "UPDATING", "PARTIALLY_SUCCEEDED")
_TPU_STATES = {0: "STATE_UNSPECIFIED", 1: "CREATING", 2: "READY", 3: "RESTARTING", 4: "REIMAGING",
               5: "DELETING", 6: "REPAIRING", 8: "STOPPED", 9: "STOPPING", 10: "STARTING",
               11: "PREEMPTED", 12: "TERMINATED", 13: "HIDING", 14: "HIDDEN", 15: "UNHIDING",
               16: "UNKNOWN"}
_TPU_HEALTH = {0: "HEALTH_UNSPECIFIED", 1: "HEALTHY", 3: "TIMEOUT", 4: "UNHEALTHY_TENSORFLOW",
               5: "UNHEALTHY_MAINTENANCE"}
_TPU_SYMPTOMS = {0: "SYMPTOM_TYPE_UNSPECIFIED", 1: "LOW_MEMORY", 2: "OUT_OF_MEMORY",
                 3: "EXECUTE_TIMED_OUT", 4: "MESH_BUILD_FAIL", 5: "HBM_OUT_OF_MEMORY", 6: "PROJECT_ABUSE"}


def _as_int(value: Any) -> int | None:
    """An integer from an int, an integral float, a numeric string or an int-valued enum; None otherwise.

    Booleans, NaN, infinities and text that is not a number give None, so odd input never raises.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    number = getattr(value, "value", None)
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def _as_text(value: Any) -> str:
    """A message as stripped text: None -> ``""``, anything else through ``str()``."""
    if value is None:
        return ""
    return (value if isinstance(value, str) else str(value)).strip()


def _as_epoch(value: Any) -> float | None:
    """Seconds since the epoch from a number, a ``datetime`` or an RFC 3339 text; None when unreadable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        text = value.strip()
        match = re.fullmatch(r"(.*?T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?", text)
        if match is None:
            return None
        fraction = (match[2] or "")[:7]  # datetime reads microseconds; RFC 3339 may give nanoseconds
        zone = "+00:00" if match[3] in (None, "Z") else match[3]
        try:
            return datetime.fromisoformat(match[1] + fraction + zone).timestamp()
        except ValueError:
            return None
    return None


def _enum_name(value: Any, by_number: Mapping[int, str] | None = None, prefix: str = "") -> str:
    """Normalise a proto-plus enum, a name or a number to a bare upper-case name."""
    if value is None:
        return ""
    name = getattr(value, "name", None)
    if isinstance(name, str):
        text = name
    elif isinstance(value, int) and by_number is not None:
        text = by_number.get(value, str(value))
    else:
        text = str(value)
    text = text.strip().upper()
    if prefix and text.startswith(prefix):
        text = text[len(prefix):]
    return text


def vertex_state_name(state: Any) -> str:
    """``JobState`` as a bare name (``FAILED``), from a proto-plus enum, ``JOB_STATE_FAILED``, or 5."""
    return _enum_name(state, dict(enumerate(_VERTEX_STATES)), "JOB_STATE_")


def exit_code_signal(exit_code: int | None) -> int | None:
    """The signal behind an exit status, if any.

    ``-n`` (Python's ``returncode`` for a process killed by signal ``n``) and ``128 + n`` (a shell or
    container runtime reporting signal ``n``, for ``n`` from 1 to 64) both give ``n``. Raw 6 and 11 are
    the "ExitCode 6" / "ExitCode 11" forms of SIGABRT and SIGSEGV that Google's training service pages
    name.
    """
    return _exit_code_signal(_as_int(exit_code))


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
    exit_code, signal = _as_int(exit_code), _as_int(signal) or None  # signal 0 is no signal
    sig = signal if signal is not None else exit_code_signal(exit_code)
    name = exit_status_class(exit_code, sig, preflight_exit_code)
    if name is None:
        return None
    common: dict[str, Any] = {
        "platform": platform, "exit_code": exit_code, "signal": sig, "worker_id": worker_id,
        "worker_restarts": _as_int(worker_restarts), "message": _as_text(message), "timestamp": timestamp,
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
    status = _as_text(report.get(KEY_STATUS))
    hardware = _as_text(report.get(KEY_HARDWARE))
    if hardware.startswith("faulty") and status not in (STATUS_PREFLIGHT, STATUS_PREFLIGHT_FAILED):
        return Failure(FailureClass.NODE_UNHEALTHY, Platform.TPU, worker_id=worker_id, timestamp=timestamp,
                       message=f"{label} hardware check failed: {hardware[len('faulty'):].lstrip(':').strip()}")
    if status not in (STATUS_FAILED, STATUS_PREFLIGHT_FAILED):
        return None
    code = _as_int(report.get(KEY_EXIT_CODE)) or 1
    preflight = _as_text(report.get(KEY_PREFLIGHT))
    why = f"preflight {preflight}" if status == STATUS_PREFLIGHT_FAILED and preflight else _as_text(
        report.get(KEY_ERROR))
    return classify_exit_status(code, platform=Platform.TPU, worker_id=worker_id,
                                worker_restarts=_as_int(report.get(KEY_RESTARTS)) or 0,
                                message=f"{label} {status} with exit {code}" + (f": {why}" if why else ""),
                                timestamp=timestamp)


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
    text = _as_text(message)
    rpc_code = _as_int(rpc_code)
    base: dict[str, Any] = {"platform": platform, "message": text, "rpc_code": rpc_code,
                            "timestamp": timestamp}
    if m := _OOM_RE.search(text):
        code = int(m["code"]) if m["code"] else None
        return Failure(FailureClass.OUT_OF_MEMORY, exit_code=code, signal=exit_code_signal(code),
                       worker_id=m["replica"], **base)
    exited = _EXIT_RE.search(text)
    if _OOM_TEXT_RE.search(text):  # a framework's out-of-memory error, maybe in the exit message's log tail
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
    if _START_ERROR_RE.search(text):
        return Failure(FailureClass.CONTAINER_START_ERROR, terminate_reason="StartError", **base)
    if failure := _quota_or_stockout(text, base):
        return failure
    if _INTERNAL_RE.search(text):
        return Failure(FailureClass.INTERNAL_ERROR, **base)
    if named := _named_class(text):
        return Failure(named, **base)
    code = _as_rpc_code(rpc_code)
    if code == RPC_RESOURCE_EXHAUSTED:
        return Failure(FailureClass.CAPACITY_STOCKOUT, **base)
    if code in _RETRYABLE_RPC_CODES:  # incl. DEADLINE_EXCEEDED: the platform's own, not a hang of ours
        return Failure(FailureClass.INTERNAL_ERROR, **base)
    return Failure(FailureClass.UNKNOWN, **base)


def _quota_or_stockout(text: str, base: dict[str, Any]) -> Failure | None:
    """QUOTA_EXCEEDED for a text naming a quota (with its metric), else CAPACITY_STOCKOUT for a capacity text, else
    None. Quota is looked for first: a quota error must never be read as a stockout."""
    if _QUOTA_RE.search(text):
        m = _QUOTA_METRIC_RE.search(text)
        metric = next((m[g] for g in _QUOTA_METRIC_GROUPS if m[g]), None) if m else None
        return Failure(FailureClass.QUOTA_EXCEEDED, quota_metric=metric, **base)
    if m := _STOCKOUT_RE.search(text):
        return Failure(FailureClass.CAPACITY_STOCKOUT, region=m["region"] or None, **base)
    return None


def _named_class(text: str) -> FailureClass | None:
    """The class a preemption, maintenance, unhealthy-node or bad-request text names; None for other texts."""
    if _PREEMPTION_RE.search(text):
        return FailureClass.PREEMPTION
    if _MAINTENANCE_RE.search(text):
        return FailureClass.MAINTENANCE_EVENT
    if _NODE_UNHEALTHY_RE.search(text):
        return FailureClass.NODE_UNHEALTHY
    if _CONFIG_ERROR_RE.search(text):
        return FailureClass.PERMANENT_USER_ERROR
    return None


def _as_rpc_code(code: int | None) -> int | None:
    """A google.rpc code; HTTP statuses (>= 100) are mapped to the matching rpc code."""
    code = _as_int(code)
    if code is None:
        return None
    if code >= 100:
        if code in _HTTP_TO_RPC:
            return _HTTP_TO_RPC[code]
        return RPC_INTERNAL if code >= 500 else RPC_INVALID_ARGUMENT
    return code


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
    message = _as_text(error_message)
    error_code = _as_int(error_code)
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


#: States in which a job or queued resource waits for capacity or quota, by platform (Vertex AI, "Understand
#: the custom training service": a job "might remain in the JOB_STATE_QUEUED state" until quota frees; Cloud
#: TPU queued resources wait in WAITING_FOR_RESOURCES; ModelArts, "Training Fault Tolerance Check": queuing
#: over 30 minutes ends the job).
QUEUED_STATES: Mapping[Platform, frozenset[str]] = {
    Platform.VERTEX_AI: frozenset({"QUEUED", "PENDING"}),
    Platform.AI_PLATFORM: frozenset({"QUEUED", "PREPARING"}),
    Platform.TPU: frozenset({"ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "CREATING"}),
}


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
    name = vertex_state_name(state) if platform == Platform.VERTEX_AI else _enum_name(state)
    since = _as_epoch(queued_since)
    when = _as_epoch(now)
    limit = _as_epoch(limit_seconds)
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
    name = _enum_name(state)
    if name in ("QUEUED", "PREPARING", "RUNNING", "SUCCEEDED", "CANCELLING", "STATE_UNSPECIFIED"):
        return None
    if name == "CANCELLED":
        return Failure(FailureClass.CANCELLED, Platform.AI_PLATFORM,
                       message=_as_text(error_message) or "Job was cancelled", timestamp=timestamp)
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
    rpc = _as_rpc_code(code)
    text = _as_text(message)
    base: dict[str, Any] = {"platform": platform, "message": text, "rpc_code": rpc, "timestamp": timestamp}
    if _OOM_RE.search(text) or _OOM_TEXT_RE.search(text):
        return Failure(FailureClass.OUT_OF_MEMORY, **base)
    if failure := _quota_or_stockout(text, base):
        return failure
    if _INTERNAL_RE.search(text):
        return Failure(FailureClass.INTERNAL_ERROR, **base)
    if named := _named_class(text):
        return Failure(named, **base)
    if rpc == RPC_RESOURCE_EXHAUSTED:
        return Failure(FailureClass.CAPACITY_STOCKOUT, **base)
    if rpc in _RETRYABLE_RPC_CODES:
        return Failure(FailureClass.INTERNAL_ERROR, **base)
    if rpc in _PERMANENT_RPC_CODES:
        return Failure(FailureClass.PERMANENT_USER_ERROR, **base)
    return Failure(FailureClass.UNKNOWN, **base)


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
    state_name = _enum_name(state, _TPU_STATES)
    health_name = _enum_name(health, _TPU_HEALTH)
    if symptoms is None or isinstance(symptoms, (str, bytes, Mapping)) or not isinstance(symptoms, Iterable):
        symptoms = () if symptoms is None else (symptoms,)
    symptom_names = tuple(_symptom_name(s) for s in symptoms)
    symptom_names = tuple(s for s in symptom_names if s and s != "SYMPTOM_TYPE_UNSPECIFIED")
    base: dict[str, Any] = {"platform": Platform.TPU, "node_state": state_name or None,
                            "node_health": health_name or None, "symptoms": symptom_names,
                            "message": _as_text(health_description), "timestamp": timestamp}
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


def _symptom_name(symptom: Any) -> str:
    kind = getattr(symptom, "symptom_type", symptom)
    if isinstance(symptom, Mapping):
        kind = symptom.get("symptom_type", symptom.get("symptomType"))
    return _enum_name(kind, _TPU_SYMPTOMS)


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
    reason = _as_text(_get(payload, "metadata", "terminateReason")) or None
    when = _as_epoch(_get(entry, "timestamp"))
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
    severity = _enum_name(_get(entry, "severity"))
    failed = bool(status and (_get(status, "code") or _get(status, "message"))) or severity in (
        "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
    if failed and (method.endswith("CreateNode") or method.endswith("CreateQueuedResource")):
        code = _get(status, "code") if status else None
        failure = classify_create_error(code, _as_text(_get(status, "message")) if status else message,
                                        platform=Platform.TPU, timestamp=when)
        return Failure(failure.failure_class, Platform.TPU, message=failure.message or message,
                       rpc_code=failure.rpc_code, region=failure.region, quota_metric=failure.quota_metric,
                       terminate_reason=node, timestamp=when)
    return None
