"""Google's error texts: the message patterns the classifiers read, and the helpers that class a text by them.

Each pattern below cites the public page its wording comes from: Vertex AI, "Understand the custom training service"
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
come with both): :func:`quota_or_stockout` looks for a quota first. XLA's and CUDA's out-of-memory errors
(``RESOURCE_EXHAUSTED: ... Ran out of memory in memory space hbm``) are OUT_OF_MEMORY (:data:`OOM_TEXT_RE`).

Rules of the module: regular expressions and pure functions of a text; no I/O, no Airflow or Google imports. The
classifiers of :mod:`.classify` apply them, in the order their docstrings give.
"""

from __future__ import annotations

import re
from typing import Any

from .failures import Failure, FailureClass

#: A replica's exit status, with the termination reason where Vertex AI gives one (Vertex AI and AI Platform
#: Training, "Understand(ing) the training service"): "The replica workerpool0-0 exited with a non-zero status of
#: 139. Termination reason: Error."; legacy: "The replica master 0 exited with a non-zero status of 1."
EXIT_RE = re.compile(
    r"The replica (?P<replica>.+?) exited with a non-zero status of (?P<code>-?\d+)"
    r"(?:\.\s*Termination reason:\s*(?P<reason>[A-Za-z_]+))?",
)
#: A container that could not start (the termination reason ``StartError`` of the exit text).
START_ERROR_RE = re.compile(r"Termination reason:\s*StartError", re.IGNORECASE)

#: A replica that ran out of memory. Vertex AI, "Understand the custom training service": "The replica
#: REPLICA_NAME ran out of memory and exited with a non-zero status of EXIT_CODE."; legacy AI Platform Training
#: wrote it hyphenated, "The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)"
#: (github.com/tensorflow/models/issues/5591).
OOM_RE = re.compile(
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
OOM_TEXT_RE = re.compile(
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
QUOTA_RE = re.compile(
    r"quota metrics? exceeds? quota limits?|Quota exceeded for quota metric|\bQuota '?[\w.-]+'? (?:exceeded|exhausted)"
    r"|\bQuota limit '[^']+' has been exceeded|\bInsufficient '[^']+' quota|\bQuota exceeded for \S+"
    r"|\bfollowing quotas? (?:are|is) exceeded|\bQuota failure\b|\bQUOTA_EXCEEDED\b|\bquotaExceeded\b"
    r"|\bquota exceeded\b|\bexceed(?:s|ed)? (?:the |your )?quota|\bper project per (?:region|zone)\b"
    r"|PerProjectPer(?:Region|Zone)",
    re.IGNORECASE,
)
#: The quota a quota error names, where its text gives one (searched apart from ``QUOTA_RE``, so that a code
#: before the sentence, "QUOTA_EXCEEDED: Quota 'CPUS' exceeded", still yields the metric).
QUOTA_METRIC_RE = re.compile(
    r"quota metrics? exceeds? quota limits?:?\s*(?P<m1>[\w./-]+)"
    r"|Quota exceeded for quota metric '(?P<m2>[^']+)'"
    r"|\bQuota '?(?P<m3>[\w.-]+)'? (?:exceeded|exhausted)"
    r"|\bQuota limit '(?P<m4>[^']+)' has been exceeded"
    r"|\bInsufficient '(?P<m5>[^']+)' quota"
    r"|\bQuota exceeded for (?P<m6>[a-z][\w.-]*\.googleapis\.com/[\w./-]+)"
    r"|\bfollowing quotas? (?:are|is) exceeded:?\s*(?P<m7>[\w./-]+)",
    re.IGNORECASE,
)
QUOTA_METRIC_GROUPS = ("m1", "m2", "m3", "m4", "m5", "m6", "m7")

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
STOCKOUT_RE = re.compile(
    r"Resources are insufficient in region:?\s*(?P<region>[a-z0-9-]*)"
    r"|\bno more capacity in the zone\b|\bZONE_RESOURCE_POOL_EXHAUSTED|\bdoes not have enough resources available"
    r"|\bis currently unavailable in the [\w-]+ zone\b|\bSTOCKOUT\b|\binsufficient (?:reserved )?capacity\b"
    r"|\binsufficientCapacity\b|\bout of capacity\b",
    re.IGNORECASE,
)

#: Vertex AI / AI Platform Training, "Understand(ing) the training service".
INTERNAL_RE = re.compile(r"Internal error occurred for the current attempt", re.IGNORECASE)

#: A Spot / preemptible VM that the platform took back: Compute Engine's "Instance failed to start due to
#: preemption." (github.com/GoogleCloudPlatform/PerfKitBenchmarker, providers/gcp/gce_virtual_machine.py).
#: "preemptible" alone (a setting) is not a preemption.
PREEMPTION_RE = re.compile(r"\bdue to preemption\b|\bwas preempted\b", re.IGNORECASE)

#: Cloud TPU, "Manage maintenance events with Cloud TPU Pods": a node's health description "The TPU had a
#: maintenance event at 2022-01-26T03:44:36Z".
MAINTENANCE_RE = re.compile(r"\bhad a maintenance event\b", re.IGNORECASE)

#: The TPU VM's chips cannot be opened: "TPU initialization failed: open(/dev/accel3): ... Couldn't open device:
#: /dev/accel3" (github.com/marin-community/levanter/pull/1127), "TPU platform initialization failed: NOT_FOUND: No
#: ba16c7433 device found." (github.com/jax-ml/jax/issues/12416) -- a new node, not the user's code.
NODE_UNHEALTHY_RE = re.compile(
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
CONFIG_ERROR_RE = re.compile(
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


#: ModelArts' environment pre-check that failed (ModelArts, "Viewing Training Job Events":
#: https://support.huaweicloud.com/intl/en-us/usermanual-standard-modelarts/develop-modelarts-0092.html -- "[worker-0]
#: ... Pre-check failed. Exception: ..."; "Training Fault Tolerance Check": a failed item is logged under the ``item``
#: keyword): a PREFLIGHT_FAILURE.
MODELARTS_PRECHECK_RE = re.compile(r"\bpre-?check failed\b|\bitem\b[^\n]*\bfail", re.IGNORECASE)
#: A re-issued ModelArts job that queued too long and exited ("Training Fault Tolerance Check": "If the waiting time
#: exceeds 30 minutes, the training job will automatically exit"; "Viewing Training Job Events": "Failed to be
#: queued"): a QUEUE_TIMEOUT.
MODELARTS_QUEUE_EXIT_RE = re.compile(r"\bfailed to be queued\b|\bwaiting time exceeds\b|\bqueu\w*[^\n]{0,40}"
                                     r"\b(?:exceed\w*|timed? ?out)\b", re.IGNORECASE)
#: A ModelArts node whose hardware failed ("Training Fault Tolerance Check": a "hardware fault" found by the
#: pre-check or the periodic hardware check; "isolate the faulty node"; a run record's ``chip_fault`` / ``node_fault``
#: scenario): NODE_UNHEALTHY -- a job on new nodes.
MODELARTS_HARDWARE_RE = re.compile(r"\bhardware (?:fault|failure)\b|\b(?:chip|node|npu|gpu)[ _]fault\b|"
                                   r"\bfaulty (?:node|hardware)\b", re.IGNORECASE)
#: A ModelArts job the platform took for suspended ("Viewing Training Job Events": "The system detects that your
#: training job may be suspended"): a HANG.
MODELARTS_SUSPENDED_RE = re.compile(r"\bmay be suspended\b|\bjob (?:is )?hang", re.IGNORECASE)


def quota_or_stockout(text: str, base: dict[str, Any]) -> Failure | None:
    """QUOTA_EXCEEDED for a text naming a quota (with its metric), else CAPACITY_STOCKOUT for a capacity text (with
    its region), else None. Quota is looked for first: a quota error must never be read as a stockout. ``base``
    holds the Failure's other fields (platform, message, rpc_code, timestamp)."""
    if QUOTA_RE.search(text):
        m = QUOTA_METRIC_RE.search(text)
        metric = next((m[g] for g in QUOTA_METRIC_GROUPS if m[g]), None) if m else None
        return Failure(FailureClass.QUOTA_EXCEEDED, quota_metric=metric, **base)
    if m := STOCKOUT_RE.search(text):
        return Failure(FailureClass.CAPACITY_STOCKOUT, region=m["region"] or None, **base)
    return None


def named_class(text: str) -> FailureClass | None:
    """The class a preemption, maintenance, unhealthy-node or bad-request text names; None for other texts."""
    if PREEMPTION_RE.search(text):
        return FailureClass.PREEMPTION
    if MAINTENANCE_RE.search(text):
        return FailureClass.MAINTENANCE_EVENT
    if NODE_UNHEALTHY_RE.search(text):
        return FailureClass.NODE_UNHEALTHY
    if CONFIG_ERROR_RE.search(text):
        return FailureClass.PERMANENT_USER_ERROR
    return None
