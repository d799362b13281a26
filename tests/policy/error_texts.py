"""Real error texts of the platforms the provider's creates and watches touch, with the class each must get.

Every text is verbatim from its public source (a Google Cloud documentation page or a public GitHub issue /
pull request / file), with at most a project, zone or replica name substituted, or cut after a complete
sentence. Google's documentation pages give message templates (``The replica REPLICA_NAME exited with a
non-zero status of EXIT_CODE``); the cases citing them fill the placeholders with a documented value.

Fields:
    text: the message as the platform gave it.
    entry: which classifier reads it -- ``message`` (:func:`classify_error_message`), ``create``
        (:func:`classify_create_error`), ``vertex_job`` (:func:`classify_vertex_job`, state FAILED) or
        ``ai_platform_job`` (:func:`classify_ai_platform_job`, state FAILED).
    code: the ``google.rpc.Code`` number or HTTP status the source shows with it (None where it shows none).
    surface: where the text comes from: ``vertex_ai``, ``ai_platform`` (legacy ``ml.googleapis.com``),
        ``compute_engine`` (GPU / CPU VMs, also behind Dataflow, GKE and Dataproc), ``cloud_tpu`` (TPU VMs and
        nodes), ``tpu_queued_resources`` (a queued resource's request) or ``google_api`` (a wording every Google API
        shares, e.g. a disabled service).
    expected: the failure class.
    source: the public page the text is quoted from.
"""

from __future__ import annotations

from typing import NamedTuple

from airflow_provider_resilient.policy import FailureClass as FC


class ErrorText(NamedTuple):
    text: str
    entry: str
    code: int | None
    surface: str
    expected: FC
    source: str


VERTEX_SERVICE = "https://cloud.google.com/vertex-ai/docs/training/understanding-training-service"
LEGACY_SERVICE = "https://cloud.google.com/ai-platform/training/docs/understanding-training-service"
CE_AVAILABILITY = "https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability"
TPU_MAINTENANCE = "https://cloud.google.com/tpu/docs/maintenance-events"
GH = "https://github.com/"

V, L, CE, TPU, QR, API = "vertex_ai", "ai_platform", "compute_engine", "cloud_tpu", "tpu_queued_resources", "google_api"

CASES: list[ErrorText] = [
    # ---------------------------------------------------------------- QUOTA_EXCEEDED -----------------------------
    ErrorText(
        "The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_tpu_v2",
        "create",
        429,
        V,
        FC.QUOTA_EXCEEDED,
        GH + "google-deepmind/xmanager/issues/29",
    ),
    ErrorText(
        "The following quota metrics exceed quota limits: "
        "aiplatform.googleapis.com/custom_model_training_nvidia_k80_gpus",
        "vertex_job",
        8,
        V,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/vertex-ai-samples/issues/700",
    ),
    ErrorText(
        "The following quota metrics exceed quota limits: "
        "aiplatform.googleapis.com/custom_model_training_nvidia_k80_gpus",
        "message",
        8,
        V,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/vertex-ai-samples/issues/700",
    ),
    ErrorText(
        "com.google.cloud.ai.platform.common.errors.AiPlatformException: code=RESOURCE_EXHAUSTED, message=The "
        "following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_cpus,",
        "message",
        None,
        V,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/vertex-ai-samples/issues/3479",
    ),
    ErrorText(
        "The following quota metrics exceed quota limits: "
        "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus",
        "create",
        429,
        V,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/stable-diffusion-on-gcp/issues/12",
    ),
    ErrorText(
        "The following quotas are exceeded: AutoMLImageClassificationDeployedModelNodes",
        "create",
        8,
        V,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/vertex-ai-samples/issues/264",
    ),
    ErrorText(
        "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: "
        "anthropic-claude-3-5-sonnet-v2. Please submit a quota increase request. "
        "https://cloud.google.com/vertex-ai/docs/generative-ai/quotas-genai.",
        "create",
        429,
        V,
        FC.QUOTA_EXCEEDED,
        GH + "cline/cline/issues/651",
    ),
    ErrorText(
        "Quota failure for project qwiklabs-gcp-XXXXXXXX. The request for 2 K80 accelerators exceeds the allowed "
        "maximum of 0 A100, 0 K80, 0 P100, 0 P4, 0 T4, 0 TPU_V2, 0 TPU_V2_POD, 0 TPU_V3, 0 TPU_V3_POD, 0 V100 "
        "accelerators. To read more about Cloud ML Engine quota, see https://cloud.google.com/ml-engine/quotas.",
        "create",
        429,
        L,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/training-data-analyst/issues/2284",
    ),
    ErrorText(
        "Error creating the job. Quota failure for project fmltc-400415. The request for 1 K80 accelerators "
        "exceeds the allowed maximum of 0 A100, 0 K80, 0 P100, 0 P4, 0 T4, 0 TPU_V2, 0 TPU_V2_POD, 0 TPU_V3, "
        "0 TPU_V3_POD, 0 V100 accelerators. To read more about Cloud ML Engine quota, see "
        "https://cloud.google.com/ml-engine/quotas.",
        "create",
        None,
        L,
        FC.QUOTA_EXCEEDED,
        GH + "FIRST-Tech-Challenge/fmltc/issues/318",
    ),
    ErrorText(
        "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.",
        "create",
        403,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "fastai/course-v3/pull/165",
    ),
    ErrorText(
        "Quota 'SSD_TOTAL_GB' exceeded.  Limit: 500.0 in region us-central1",
        "create",
        None,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "skypilot-org/skypilot/pull/4333",
    ),
    ErrorText(
        "Quota 'NVIDIA_A100_80GB_GPUS' exceeded.  Limit: 0.0 in region us-east5.",
        "create",
        None,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "skypilot-org/skypilot/issues/2126",
    ),
    ErrorText(
        "Quota 'CPUS_ALL_REGIONS' exceeded.",
        "create",
        None,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/ai-on-gke/issues/849",
    ),
    ErrorText(
        "Quota 'N2_CPUS' exceeded.",
        "create",
        None,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/ai-on-gke/issues/849",
    ),
    ErrorText(
        "Insufficient 'CPUS' quota. Requested 404.0, available 12.0.",
        "create",
        None,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/data-science-on-gcp/issues/163",
    ),
    ErrorText(
        "Insufficient 'CPUS_ALL_REGIONS' quota. Requested 52.0, available 20.0.",
        "create",
        None,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/data-science-on-gcp/issues/163",
    ),
    ErrorText(
        "RESOURCE_EXHAUSTED: Quota limit 'TPUV2sPodPerProjectPerRegionForTPUAPI,"
        "TPUV2sPodPerProjectPerZoneForTPUAPI' has been exceeded. Limit: 0,0 in region us-central1,zone "
        "us-central1-a.",
        "create",
        8,
        TPU,
        FC.QUOTA_EXCEEDED,
        GH + "BioMedBERT/biomedbert/blob/master/nohup.out",
    ),
    ErrorText(
        "RESOURCE_EXHAUSTED: Quota limit 'TPUV2sPodPerProjectPerRegionForTPUAPI,"
        "TPUV2sPodPerProjectPerZoneForTPUAPI' has been exceeded. Limit: 0,0 in region us-central1,zone "
        "us-central1-a.",
        "message",
        None,
        TPU,
        FC.QUOTA_EXCEEDED,
        GH + "BioMedBERT/biomedbert/blob/master/nohup.out",
    ),
    ErrorText(
        "Quota 'NVIDIA_A100_80GB_GPUS' exceeded.  Limit: 0.0 in region us-east5.",
        "message",
        None,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "skypilot-org/skypilot/issues/2126",
    ),
    ErrorText(
        "Quota 'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI' exhausted.\n      Limit 20800 in region us-central2",
        "create",
        None,
        QR,
        FC.QUOTA_EXCEEDED,
        GH + "marin-community/marin/issues/87",
    ),
    ErrorText(
        "Quota 'TPUV5sPreemptibleLitepodPerProjectPerRegionForTPUAPI' exhausted.\n      Limit 10000 in region us-west4",
        "create",
        8,
        QR,
        FC.QUOTA_EXCEEDED,
        GH + "marin-community/marin/issues/87",
    ),
    ErrorText(
        "Quota limit 'TPUV6EPreemptiblePerProjectPerRegionForTPUAPI' has been exceeded. Limit: 0 in region us-east5.",
        "create",
        429,
        TPU,
        FC.QUOTA_EXCEEDED,
        GH + "marin-community/marin/pull/1612",
    ),
    ErrorText(
        "Quota C2_CPUS exceeded. Limit: 24.0 in region us-west1.",
        "create",
        None,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "verilog-to-routing/vtr-verilog-to-routing/issues/1874",
    ),
    ErrorText(
        "QUOTA_EXCEEDED: Instance 'deeplearning-instances-6gck' creation failed: Quota 'NVIDIA_T4_GPUS' exceeded.  "
        "Limit: 1.0 in region us-central1.",
        "create",
        None,
        CE,
        FC.QUOTA_EXCEEDED,
        GH + "GoogleCloudPlatform/ml-on-gcp/blob/master/dlvm/nvidia/README.md",
    ),
    # ---------------------------------------------------------------- CAPACITY_STOCKOUT --------------------------
    ErrorText(
        "Resources are insufficient in region: us-central1. Try a different region or use a different accelerator.",
        "vertex_job",
        None,
        V,
        FC.CAPACITY_STOCKOUT,
        VERTEX_SERVICE,
    ),
    ErrorText(
        "Resources are insufficient in region: us-central1. Try a different region or use a different accelerator.",
        "ai_platform_job",
        None,
        L,
        FC.CAPACITY_STOCKOUT,
        LEGACY_SERVICE,
    ),
    ErrorText(
        "Resources are insufficient in region: us-central1",
        "message",
        None,
        V,
        FC.CAPACITY_STOCKOUT,
        GH + "openreview/openreview-expertise/issues/401",
    ),
    ErrorText(
        "RESOURCE_EXHAUSTED: Unable to submit request because the service is temporarily out of capacity. "
        "Try again later.",
        "create",
        8,
        V,
        FC.CAPACITY_STOCKOUT,
        GH + "googleapis/google-cloud-java/issues/11195",
    ),
    ErrorText(
        "Unable to submit request because the service is temporarily out of capacity. Try again later.",
        "create",
        None,
        V,
        FC.CAPACITY_STOCKOUT,
        GH + "googleapis/google-cloud-java/issues/10983",
    ),
    ErrorText("ZONE_RESOURCE_POOL_EXHAUSTED", "create", None, CE, FC.CAPACITY_STOCKOUT, CE_AVAILABILITY),
    ErrorText("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "create", None, CE, FC.CAPACITY_STOCKOUT, CE_AVAILABILITY),
    ErrorText(
        "The zone 'projects/my-project/zones/us-central1-a' does not have enough resources available to fulfill "
        "the request. Try a different zone, or try again later.",
        "create",
        503,
        CE,
        FC.CAPACITY_STOCKOUT,
        CE_AVAILABILITY,
    ),
    ErrorText(
        "A a2-highgpu-1g VM instance with 1 nvidia-tesla-a100 accelerator(s) is currently unavailable in the "
        "us-central1-a zone. Capacity changes frequently, so try your request in a different zone, with a "
        "different VM hardware configuration, or at a later time. For more options, see troubleshooting "
        "documentation.",
        "create",
        None,
        CE,
        FC.CAPACITY_STOCKOUT,
        CE_AVAILABILITY,
    ),
    ErrorText(
        "The zone 'projects/graceful-castle-301212/zones/us-central1-a' does not have enough resources available "
        "to fulfill the request. Try a different zone, or try again later.",
        "create",
        None,
        CE,
        FC.CAPACITY_STOCKOUT,
        GH + "Zhen-Dong/HAWQ/issues/4",
    ),
    ErrorText(
        "Could not fetch resource: - The zone 'projects/asdasdasd/zones/us-central1-a' does not have enough "
        "resources available to fulfill the request.  Try a different zone, or try again later.",
        "create",
        None,
        CE,
        FC.CAPACITY_STOCKOUT,
        GH + "GoogleCloudPlatform/compute-image-tools/issues/1960",
    ),
    ErrorText(
        "Failed to start: UNKNOWN: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS The zone "
        "'projects/cirrus-ci-community/zones/us-central1-f' does not have enough resources available to fulfill "
        "the request. '(resource type:pd-standard)'.",
        "create",
        2,
        CE,
        FC.CAPACITY_STOCKOUT,
        GH + "cirruslabs/cirrus-ci-docs/issues/131",
    ),
    ErrorText(
        "ZONE_RESOURCE_POOL_EXHAUSTED: Instance creation failed: The zone 'projects/project/zones/europe-west1-c' "
        "does not have enough resources available to fulfill the request.  Try a different zone, or try again "
        "later.",
        "create",
        None,
        CE,
        FC.CAPACITY_STOCKOUT,
        GH + "GoogleCloudPlatform/pontem/issues/251",
    ),
    ErrorText(
        "The zone 'projects/k8s-infra-e2e-boskos-gpu-06/zones/us-central1-b' does not have enough resources "
        "available to fulfill the request.  'NULL:0/NULL:0/NULL:0 (state:STOCKOUT",
        "create",
        None,
        CE,
        FC.CAPACITY_STOCKOUT,
        GH + "kubernetes/k8s.io/issues/9834",
    ),
    ErrorText(
        "A n1-standard-4 VM instance with 1 nvidia-tesla-t4 accelerator(s) is currently unavailable in the "
        "us-central1-b zone. Consider trying your request in the us-central1-a, us-central1-f zone(s), which "
        "currently has capacity to accommodate your request. Alternatively, you can try your request again with "
        "a different VM hardware configuration or at a later time. For more information, see the "
        "troubleshooting documentation.",
        "create",
        None,
        CE,
        FC.CAPACITY_STOCKOUT,
        GH + "kubernetes/k8s.io/issues/9834",
    ),
    ErrorText(
        "A e2-standard-2 VM instance is currently unavailable in the europe-west4-a zone. Alternatively, you can "
        "try your request again with a different VM hardware configuration or at a later time. For more "
        "information, see the troubleshooting documentation.",
        "create",
        None,
        CE,
        FC.CAPACITY_STOCKOUT,
        GH + "GoogleCloudPlatform/ai-on-gke/issues/849",
    ),
    ErrorText(
        "n1-standard-4 VM instance with nvidia-tesla-t4 accelerator(s) is currently unavailable in the us-east1-c "
        "zone.",
        "create",
        None,
        CE,
        FC.CAPACITY_STOCKOUT,
        GH + "davidADSP/Generative_Deep_Learning_2nd_Edition/issues/31",
    ),
    ErrorText(
        'There is no more capacity in the zone "europe-west4-a"; you can try in another zone where Cloud TPU '
        "Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0xba393c906974e61]",
        "create",
        None,
        TPU,
        FC.CAPACITY_STOCKOUT,
        GH + "thevasudevgupta/gsoc-wav2vec2/issues/11",
    ),
    ErrorText(
        'There is no more capacity in the zone "us-central1-b"; you can try in another zone where Cloud TPU '
        "Nodes are offered (see https://cloud.google.com/tpu/docs/regions)",
        "create",
        8,
        TPU,
        FC.CAPACITY_STOCKOUT,
        GH + "GoogleCloudPlatform/magic-modules/pull/7297",
    ),
    ErrorText(
        "Insufficient reserved capacity. Contact customer support to increase your reservation. "
        "[EID: 0x7adf6d58c08b0aa4]",
        "create",
        8,
        TPU,
        FC.CAPACITY_STOCKOUT,
        GH + "skypilot-org/skypilot/issues/4579",
    ),
    ErrorText(
        "Insufficient reserved capacity. Contact customer support to increase your reservation. "
        "[EID: 0x7adf6d58c08b0aa4]",
        "message",
        None,
        TPU,
        FC.CAPACITY_STOCKOUT,
        GH + "skypilot-org/skypilot/issues/4579",
    ),
    ErrorText(
        'There is no more capacity in the zone "europe-west4-a"; you can try in another zone where Cloud TPU '
        "Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0xba393c906974e61]",
        "message",
        None,
        TPU,
        FC.CAPACITY_STOCKOUT,
        GH + "thevasudevgupta/gsoc-wav2vec2/issues/11",
    ),
    ErrorText(
        'Error code 8, message: There is no more capacity in the zone "us-central1-c"; you can try in another zone '
        "where Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0x9f48947a7d57c8d]",
        "create",
        8,
        TPU,
        FC.CAPACITY_STOCKOUT,
        GH + "hashicorp/terraform-provider-google/issues/21243",
    ),
    ErrorText(
        "The zone 'projects/****/zones/us-central1-a' does not have enough resources available to fulfill the "
        "request.  Try a different zone, or try again later.",
        "create",
        None,
        CE,
        FC.CAPACITY_STOCKOUT,
        GH + "CCExtractor/sample-platform/issues/901",
    ),
    # A bare RESOURCE_EXHAUSTED that names no quota keeps the documented default (capacity, backed off).
    ErrorText(
        "Resource exhausted. Please try again later. Please refer to "
        "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.",
        "create",
        429,
        V,
        FC.CAPACITY_STOCKOUT,
        GH + "google-gemini/gemini-cli/issues/14831",
    ),
    # ---------------------------------------------------------------- PERMANENT_USER_ERROR -----------------------
    ErrorText(
        "Cloud TPU received a bad request. the accelerator v4-128 was not found in zone us-central2-b "
        "[EID: 0x945ef875d10e8e13]",
        "create",
        None,
        TPU,
        FC.PERMANENT_USER_ERROR,
        GH + "skypilot-org/skypilot/issues/3840",
    ),
    ErrorText(
        "Cloud TPU received a bad request. the accelerator v4-128 was not found in zone us-central2-b "
        "[EID: 0x945ef875d10e8e13]",
        "create",
        3,
        TPU,
        FC.PERMANENT_USER_ERROR,
        GH + "skypilot-org/skypilot/issues/3840",
    ),
    ErrorText(
        'googleapi: Error 400: Cloud TPU received an invalid argument. The field "TensorflowVersion" cannot be '
        '"2.4". [EID: 0x90dfdfda32f61e59], badRequest',
        "create",
        None,
        TPU,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/tpu/issues/877",
    ),
    ErrorText(
        "FAILED_PRECONDITION: Your request to provision TPU Node has been denied. Please migrate to TPU VM "
        "Architecture or contact Cloud TPU team to gain TPU Node access. "
        "https://cloud.google.com/tpu/docs/system-architecture-tpu-vm#from-tpu-node-to-tpu-vm",
        "create",
        None,
        TPU,
        FC.PERMANENT_USER_ERROR,
        GH + "skypilot-org/skypilot/pull/5593",
    ),
    ErrorText(
        "Permission denied on resource project Data-Mining.",
        "create",
        403,
        TPU,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/tpu/issues/859",
    ),
    ErrorText(
        "Permission denied on resource project Data-Mining.",
        "create",
        None,
        TPU,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/tpu/issues/859",
    ),
    ErrorText(
        "Project 'Data-Mining' not found or permission denied.",
        "create",
        None,
        TPU,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/tpu/issues/859",
    ),
    ErrorText(
        "PERMISSION_DENIED: Read access to project 'annotator-1286' was denied",
        "create",
        None,
        TPU,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/tpu/issues/227",
    ),
    ErrorText(
        "Permission 'tpu.nodes.get' denied on 'projects/directed-sensor-172921/locations/us-central1-b/nodes/ai'",
        "create",
        None,
        TPU,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/tpu/issues/296",
    ),
    ErrorText(
        "Invalid value for field 'resource.machineType': 'zones/europe-west8-a/machineTypes/f1-micro'. Machine "
        "type with name 'f1-micro' does not exist in zone 'europe-west8-a'., invalid",
        "create",
        400,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "gruntwork-io/terratest/issues/1132",
    ),
    ErrorText(
        "Invalid value for field 'resource.machineType': 'zones/us-east4-a/machineTypes/n2-highcpu-16'. Machine "
        "type with name 'n2-highcpu-16' does not exist in zone 'us-east4-a'.",
        "create",
        None,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "taskcluster/community-tc-config/pull/75",
    ),
    ErrorText(
        "Invalid value for field 'resource.properties.machineType': 'c2-standard-2'. Instance properties must "
        "provide existing machine type., invalid",
        "create",
        None,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/magic-modules/pull/15255",
    ),
    ErrorText(
        "Invalid value for field 'properties.scheduling.preemptible': 'true'.  Scheduling must have preemptible "
        "be false when OnHostMaintenance isn't TERMINATE.",
        "create",
        None,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "lighttransport/francine/issues/5",
    ),
    ErrorText(
        "Invalid value for field 'zone': 'us-east1'. Unknown zone.",
        "create",
        400,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "inspec/inspec-gcp/issues/301",
    ),
    ErrorText(
        'googleapi: Error 400: Invalid machine type "e2-standard-4" in zone "us-central2-b": GCE_NOT_FOUND',
        "create",
        None,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "keras-team/kinetic/issues/305",
    ),
    ErrorText(
        "googleapi: Error 400: The resource "
        "'projects/ci-test-project-188019/zones/us-central1-f/acceleratorTypes/nvidia-tesla-k80' was not found, "
        "badRequest",
        "create",
        None,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "hashicorp/terraform-provider-google/issues/5860",
    ),
    ErrorText(
        "Could not fetch resource:\n - The resource "
        "'projects/static-protocol-256618/zones/us-west1-b/acceleratorTypes/nvidia-tesla-p4' was not found",
        "create",
        None,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "fastai/course-v3/pull/430",
    ),
    ErrorText(
        "Invalid value for field 'resource.sourceSnapshot': 'projects/...../global/snapshots/my_snapshot'. The "
        "referenced snapshot resource cannot be found.",
        "create",
        400,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "binary-com/gce-manager/issues/8",
    ),
    ErrorText(
        "Project 1008....82 is not found and cannot be used for API calls. If it is recently created, enable "
        "Compute Engine API by visiting https://console.developers.google.com/apis/api/compute.googleapis.com/"
        "overview?project=1008....82 then retry. If you enabled this API recently, wait a few minutes for the "
        "action to propagate to our systems and retry., accessNotConfigured",
        "create",
        None,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "midl-dev/tezos-on-gke/issues/7",
    ),
    ErrorText(
        "Service Usage API has not been used in project 1021909506549 before or it is disabled. Enable it by "
        "visiting https://console.developers.google.com/apis/api/serviceusage.googleapis.com/overview?project="
        "1021909506549 then retry. If you enabled this API recently, wait a few minutes for the action to "
        "propagate to our systems and retry., accessNotConfigured",
        "create",
        None,
        API,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/community/pull/884",
    ),
    ErrorText(
        "PERMISSION_DENIED: Stackdriver Error Reporting API has not been used in project 563584335869 before or "
        "it is disabled. Enable it by visiting https://console.developers.google.com/apis/api/"
        "clouderrorreporting.googleapis.com/overview?project=563584335869 then retry. If you enabled this API "
        "recently, wait a few minutes for the action to propagate to our systems and retry.",
        "create",
        7,
        API,
        FC.PERMANENT_USER_ERROR,
        GH + "googleapis/google-cloud-java/issues/4561",
    ),
    ErrorText(
        "INVALID_ARGUMENT: Service account thorstenstaerk-search-compute@developer.gserviceaccount.com does not exist.",
        "create",
        None,
        API,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/generative-ai/issues/944",
    ),
    ErrorText(
        "You do not have permission to act as service_account: "
        "635965284211-compute@developer.gserviceaccount.com. (or it may not exist).",
        "create",
        3,
        V,
        FC.PERMANENT_USER_ERROR,
        GH + "dzlab/deeplearning.ai/issues/5",
    ),
    ErrorText(
        "You do not have permission to act as service_account: "
        "635965284211-compute@developer.gserviceaccount.com. (or it may not exist).",
        "create",
        None,
        V,
        FC.PERMANENT_USER_ERROR,
        GH + "dzlab/deeplearning.ai/issues/5",
    ),
    ErrorText(
        "com.google.cloud.ai.platform.common.errors.AiPlatformException: code=INVALID_ARGUMENT, message=List of "
        "found errors: 1.Field: job_spec.worker_pool_specs[0].machine_spec.accelerator_count; Message: "
        "Accelerators are not supported for this project. , cause=null; Failed to create custom job.",
        "create",
        None,
        V,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/generative-ai/issues/151",
    ),
    ErrorText(
        'Accelerator "NVIDIA_TESLA_K80" is not supported for machine type "n1-standard-4"',
        "create",
        400,
        V,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/vertex-ai-samples/issues/213",
    ),
    ErrorText(
        'Accelerator "NVIDIA_TESLA_K80" is not supported for machine type "n1-standard-4"',
        "create",
        None,
        V,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/vertex-ai-samples/issues/213",
    ),
    ErrorText(
        "Permission denied on resource project {PROJECT}.",
        "create",
        403,
        V,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/mlops-with-vertex-ai/issues/5",
    ),
    ErrorText(
        "INVALID_ARGUMENT: Invalid JSON payload received. Unknown name \"parameter_server_type\" at 'job': Cannot "
        "find field.",
        "create",
        None,
        L,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/models/issues/2093",
    ),
    ErrorText(
        "FAILED_PRECONDITION: Field: model.regions Error: Your project needs to be whitelisted to use region "
        "'us-east1'. Please contact Cloud ML Engine team for whitelisting. Other available regions are "
        "[europe-west1, us-central1].",
        "create",
        None,
        L,
        FC.PERMANENT_USER_ERROR,
        GH + "rstudio/cloudml/issues/95",
    ),
    ErrorText(
        "INVALID_ARGUMENT: Field: version.machine_type Error: Unsupported machine type 'mls1-c1-m2' for model "
        "explanation, must be Compute Engine machine types, see the full list in "
        "https://cloud.google.com/ml-engine/docs/machine-types#compute-engine-machine-types.",
        "create",
        None,
        L,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/ai-platform-samples/issues/242",
    ),
    ErrorText(
        "FAILED_PRECONDITION: Field: uri Error: The total size of files in "
        "gs://gbsc-gcp-project-mvp-cloudml/models/1000-genomes-super-population/export/Servo/1495692639 is "
        "440979953 bytes, which exceeds the allowed maximum of 262144000 bytes",
        "create",
        None,
        L,
        FC.PERMANENT_USER_ERROR,
        GH + "googlegenomics/cloudml-examples/issues/5",
    ),
    ErrorText(
        "The replica master 0 exited with a non-zero status of 1.",
        "ai_platform_job",
        None,
        L,
        FC.PERMANENT_USER_ERROR,
        GH + "rstudio/cloudml/issues/130",
    ),
    ErrorText(
        "The replica master 0 exited with a non-zero status of 1. Termination reason: Error. Traceback (most "
        'recent call last): File "/usr/lib/python2.7/runpy.py", line 174, in _run_module_as_main',
        "ai_platform_job",
        None,
        L,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/models/issues/4294",
    ),
    ErrorText(
        "The replica ps 0 exited with a non-zero status of 1. Termination reason: Error. The replica ps 1 exited "
        "with a non-zero status of 1. Termination reason: Error.",
        "ai_platform_job",
        None,
        L,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/models/issues/5845",
    ),
    ErrorText(
        "The replica worker 2 exited with a non-zero status of 1. Termination reason: Error. Traceback (most "
        "recent call last): [...]",
        "ai_platform_job",
        None,
        L,
        FC.PERMANENT_USER_ERROR,
        GH + "tensorflow/models/issues/4342",
    ),
    ErrorText(
        "The replica workerpool1-1 exited with a non-zero status of 1. Termination reason: Error. \nTraceback "
        "(most recent call last):\n  [...]",
        "vertex_job",
        3,
        V,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/vertex-ai-samples/pull/1504",
    ),
    ErrorText(
        "Required 'compute.instanceTemplates.create' permission for "
        "'projects/<Project name>/global/instanceTemplates/tf-inference-template'",
        "create",
        None,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "GoogleCloudPlatform/ml-on-gcp/blob/master/dlvm/nvidia/README.md",
    ),
    ErrorText(
        "Error 403: Required 'compute.networks.create' permission for "
        "'projects/<GCP_PROJECT>/global/networks/vpc-network', forbidden",
        "create",
        None,
        CE,
        FC.PERMANENT_USER_ERROR,
        GH + "jetstack/terraform-google-gke-cluster/issues/51",
    ),
    ErrorText(
        "Permission iam.serviceAccounts.create is required to perform this operation on project "
        "projects/<GCP_PROJECT>., forbidden",
        "create",
        None,
        API,
        FC.PERMANENT_USER_ERROR,
        GH + "jetstack/terraform-google-gke-cluster/issues/51",
    ),
    # ---------------------------------------------------------------- OUT_OF_MEMORY ------------------------------
    ErrorText(
        "The replica workerpool0-0 ran out of memory and exited with a non-zero status of 137.",
        "vertex_job",
        None,
        V,
        FC.OUT_OF_MEMORY,
        VERTEX_SERVICE,
    ),
    ErrorText(
        "The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)",
        "ai_platform_job",
        None,
        L,
        FC.OUT_OF_MEMORY,
        GH + "tensorflow/models/issues/5591",
    ),
    ErrorText(
        "The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)",
        "message",
        None,
        L,
        FC.OUT_OF_MEMORY,
        GH + "tensorflow/models/issues/5591",
    ),
    ErrorText(
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 32.00MiB "
        "(33554432B) on device ordinal 0: while running replica 0 and partition 0 of a replicated computation "
        "(other replicas may have failed as well).",
        "message",
        8,
        TPU,
        FC.OUT_OF_MEMORY,
        GH + "kingoflolz/mesh-transformer-jax/issues/237",
    ),
    ErrorText(
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
        "memory in memory space hbm. Used 21.90G of 7.48G hbm. Exceeded hbm capacity by 14.42G.",
        "message",
        8,
        TPU,
        FC.OUT_OF_MEMORY,
        GH + "erfanzar/EasyDeL/issues/78",
    ),
    ErrorText(
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
        "memory in memory space hbm. Used 21.95G of 15.48G hbm.",
        "message",
        None,
        TPU,
        FC.OUT_OF_MEMORY,
        GH + "LargeWorldModel/LWM/issues/60",
    ),
    ErrorText(
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
        "memory in memory space vmem. Used 32.42M of 16.00M vmem. Exceeded vmem capacity by 16.42M",
        "message",
        None,
        TPU,
        FC.OUT_OF_MEMORY,
        GH + "pytorch/xla/issues/9524",
    ),
    ErrorText(
        "RESOURCE_EXHAUSTED: Attempting to reserve 6.48G at the bottom of memory. That was not possible. There "
        "are 6.78G free, 0B reserved, and 3.33G reservable.",
        "message",
        8,
        TPU,
        FC.OUT_OF_MEMORY,
        GH + "pytorch/xla/issues/3470",
    ),
    ErrorText(
        "RESOURCE_EXHAUSTED: Attempting to reserve 10.51G at the bottom of memory. That was not possible. There "
        "are 8.97G free, 0B reserved, and 8.97G reservable.",
        "message",
        None,
        TPU,
        FC.OUT_OF_MEMORY,
        GH + "huggingface/transformers/issues/22328",
    ),
    ErrorText(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 28.00 MiB. GPU 1 has a total capacity of "
        "8.00 GiB of which 0 bytes is free.",
        "message",
        None,
        V,
        FC.OUT_OF_MEMORY,
        GH + "mindverse/Second-Me/issues/209",
    ),
    ErrorText(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 43.09 GiB. GPU",
        "message",
        None,
        V,
        FC.OUT_OF_MEMORY,
        GH + "med-air/CMC/issues/9",
    ),
    ErrorText(
        "RuntimeError: CUDA error: out of memory", "message", None, V, FC.OUT_OF_MEMORY, GH + "Lu-Feng/DHE-VPR/issues/2"
    ),
    ErrorText(
        "RuntimeError: Internal: Failed to load in-memory CUBIN: CUDA_ERROR_OUT_OF_MEMORY: out of memory: while "
        "running replica 0 and partition 0 of a replicated computation (other replicas may have failed as",
        "message",
        None,
        V,
        FC.OUT_OF_MEMORY,
        GH + "google-research/vision_transformer/issues/40",
    ),
    ErrorText(
        "Memory cgroup out of memory: Kill process 1371 (node) score 2081 or sacrifice child",
        "message",
        None,
        CE,
        FC.OUT_OF_MEMORY,
        GH + "kubernetes/kubernetes/issues/60492",
    ),
    # ---------------------------------------------------------------- TRANSIENT_CRASH / WORKER_FAILURE -----------
    ErrorText(
        "The replica workerpool0-0 exited with a non-zero status of 139. Termination reason: Error.",
        "vertex_job",
        None,
        V,
        FC.TRANSIENT_CRASH,
        VERTEX_SERVICE,
    ),
    ErrorText(
        "The replica workerpool0-0 exited with a non-zero status of 134. Termination reason: Error.",
        "vertex_job",
        None,
        V,
        FC.TRANSIENT_CRASH,
        VERTEX_SERVICE,
    ),
    ErrorText(
        "The replica master 0 exited with a non-zero status of 11.",
        "ai_platform_job",
        None,
        L,
        FC.TRANSIENT_CRASH,
        LEGACY_SERVICE,
    ),
    ErrorText(
        "The replica workerpool1-0 exited with a non-zero status of 137. Termination reason: Error.",
        "vertex_job",
        None,
        V,
        FC.WORKER_FAILURE,
        VERTEX_SERVICE,
    ),
    ErrorText(
        "The replica worker 1 exited with a non-zero status of 143.",
        "ai_platform_job",
        None,
        L,
        FC.WORKER_FAILURE,
        LEGACY_SERVICE,
    ),
    # ---------------------------------------------------------------- CONTAINER_START_ERROR ----------------------
    ErrorText(
        "The replica workerpool0-0 exited with a non-zero status of 128. Termination reason: StartError.",
        "vertex_job",
        3,
        V,
        FC.CONTAINER_START_ERROR,
        GH + "GoogleCloudPlatform/vertex-ai-samples/issues/1898",
    ),
    ErrorText(
        "The replica workerpool0-0 exited with a non-zero status of 128. Termination reason: StartError.",
        "message",
        None,
        V,
        FC.CONTAINER_START_ERROR,
        GH + "GoogleCloudPlatform/vertex-ai-samples/issues/1898",
    ),
    # ---------------------------------------------------------------- INTERNAL_ERROR -----------------------------
    ErrorText(
        "Internal error occurred for the current attempt.",
        "vertex_job",
        None,
        V,
        FC.INTERNAL_ERROR,
        GH + "GoogleCloudPlatform/t5x-on-vertex-ai/issues/2",
    ),
    ErrorText(
        "Internal error occurred for the current attempt.",
        "ai_platform_job",
        None,
        L,
        FC.INTERNAL_ERROR,
        LEGACY_SERVICE,
    ),
    ErrorText(
        "Please refer to our documentation for checking logs and other troubleshooting tips.",
        "vertex_job",
        13,
        V,
        FC.INTERNAL_ERROR,
        GH + "googleapis/python-aiplatform/issues/6463",
    ),
    # ---------------------------------------------------------------- PREEMPTION / MAINTENANCE / NODE_UNHEALTHY --
    ErrorText(
        "Instance failed to start due to preemption.",
        "create",
        None,
        CE,
        FC.PREEMPTION,
        GH + "GoogleCloudPlatform/PerfKitBenchmarker/blob/master/perfkitbenchmarker/providers/gcp/"
        "gce_virtual_machine.py",
    ),
    ErrorText(
        "Instance failed to start due to preemption.",
        "message",
        None,
        CE,
        FC.PREEMPTION,
        GH + "GoogleCloudPlatform/PerfKitBenchmarker/blob/master/perfkitbenchmarker/providers/gcp/"
        "gce_virtual_machine.py",
    ),
    ErrorText(
        "The TPU had a maintenance event at 2022-01-26T03:44:36Z",
        "message",
        None,
        TPU,
        FC.MAINTENANCE_EVENT,
        TPU_MAINTENANCE,
    ),
    ErrorText(
        "jaxlib._jax.XlaRuntimeError: UNKNOWN: TPU initialization failed: open(/dev/accel3): Operation not "
        "permitted: Operation not permitted; Couldn't open device: /dev/accel3; [/dev/accel3]",
        "message",
        None,
        TPU,
        FC.NODE_UNHEALTHY,
        GH + "marin-community/levanter/pull/1127",
    ),
    ErrorText(
        "TPU platform initialization failed: NOT_FOUND: No ba16c7433 device found.",
        "message",
        None,
        TPU,
        FC.NODE_UNHEALTHY,
        GH + "jax-ml/jax/issues/12416",
    ),
    # ---------------------------------------------------------------- UNKNOWN (nothing telling) ------------------
    ErrorText(
        "Requested minimum count of 1 VMs could not be created",
        "create",
        None,
        CE,
        FC.UNKNOWN,
        GH + "skypilot-org/skypilot/pull/4333",
    ),
    ErrorText(
        "Please refer to our documentation for checking logs and other troubleshooting tips.",
        "message",
        None,
        V,
        FC.UNKNOWN,
        GH + "googleapis/python-aiplatform/issues/6463",
    ),
    ErrorText("Job failed.", "message", None, V, FC.UNKNOWN, GH + "GoogleCloudPlatform/t5x-on-vertex-ai/issues/2"),
]
