"""Provider metadata for Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

Kept free of imports so that ``airflow providers list`` and DAG parsing pay nothing for it. Later
capabilities add their hooks, triggers, extra links and connection types to the lists below.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_resilient import __version__

PACKAGE_NAME = "airflow-provider-resilient"
PKG = "airflow_provider_resilient"
VERTEX = "Resilient Vertex AI training"
TPU = "Resilient Cloud TPU training"
MODELARTS = "Resilient Huawei Cloud ModelArts training"


def get_provider_info() -> dict[str, Any]:
    """The provider's description, in the shape of Airflow's ``provider_info.schema.json``."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Resilient ML training on Google Cloud",
        "description": (
            "Operators, sensors and triggers that run ML training on Vertex AI, Cloud TPU and Huawei Cloud "
            "ModelArts and make it finish despite crashes, stockouts, internal errors, preemptions and maintenance "
            "events: failures are classified, retried by rule and resumed from the latest complete checkpoint."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": VERTEX,
                "external-doc-url": "https://cloud.google.com/vertex-ai/docs/training/understanding-training-service",
                "tags": ["gcp"],
            },
            {
                "integration-name": TPU,
                "external-doc-url": "https://cloud.google.com/tpu/docs/maintenance-events",
                "tags": ["gcp"],
            },
            {
                "integration-name": MODELARTS,
                "external-doc-url": "https://support.huaweicloud.com/intl/en-us/develop-modelarts/modelarts_trouble_0003.html",
                "tags": ["software"],
            },
        ],
        "operators": [{"integration-name": VERTEX, "python-modules": [f"{PKG}.operators.vertex_ai",
                                                                       f"{PKG}.operators.vertex_ai_tuning",
                                                                       f"{PKG}.operators.ai_platform",
                                                                       f"{PKG}.operators.reconcile"]},
                      {"integration-name": TPU, "python-modules": [f"{PKG}.operators.tpu"]},
                      {"integration-name": MODELARTS, "python-modules": [f"{PKG}.operators.modelarts"]}],
        "sensors": [{"integration-name": VERTEX, "python-modules": [f"{PKG}.sensors.vertex_ai"]},
                    {"integration-name": TPU, "python-modules": [f"{PKG}.sensors.tpu"]},
                    {"integration-name": MODELARTS, "python-modules": [f"{PKG}.sensors.modelarts"]}],
        "hooks": [{"integration-name": VERTEX, "python-modules": [f"{PKG}.hooks.vertex_ai"]},
                  {"integration-name": TPU, "python-modules": [f"{PKG}.hooks.tpu"]},
                  {"integration-name": MODELARTS, "python-modules": [f"{PKG}.hooks.modelarts"]}],
        "triggers": [{"integration-name": VERTEX, "python-modules": [f"{PKG}.triggers.vertex_ai"]},
                     {"integration-name": TPU, "python-modules": [f"{PKG}.triggers.tpu"]},
                     {"integration-name": MODELARTS, "python-modules": [f"{PKG}.triggers.modelarts"]}],
        "extra-links": [f"{PKG}.links.vertex_ai.VertexAICustomJobLink",
                        f"{PKG}.links.vertex_ai.VertexAICustomJobLogsLink",
                        f"{PKG}.links.tpu.TPUNodeLink", f"{PKG}.links.tpu.TPUAuditLogLink",
                        f"{PKG}.links.modelarts.ModelArtsTrainingJobLink"],
        "config": {
            "resilient": {
                "description": (
                    "The reconciler DAG that airflow_provider_resilient.reconcile.reconcile_dag() makes: it releases "
                    "the Vertex AI jobs and Cloud TPU nodes whose task instance has finished or is gone."),
                "options": {
                    "reconcile_projects": _option(
                        "Google Cloud project ids whose jobs and nodes the reconciler checks (separated by commas "
                        "or spaces).", "my-project, my-other-project"),
                    "reconcile_regions": _option(
                        "Vertex AI regions the resilient tasks use, fallbacks included (separated by commas or "
                        "spaces).", "us-central1, europe-west4"),
                    "reconcile_zones": _option(
                        "Cloud TPU zones the resilient tasks use, fallbacks included (separated by commas or "
                        "spaces).", "us-central2-b"),
                    "reconcile_schedule": _option(
                        "How often the reconciler runs: seconds between runs, or a cron expression or preset "
                        "such as @hourly.", "*/5 * * * *", default="300"),
                },
            },
        },
    }


def _option(description: str, example: str, *, default: str | None = None) -> dict[str, Any]:
    """One option of the provider's configuration section, as Airflow's provider_info schema describes it."""
    return {"description": description, "version_added": "0.1.0", "type": "string", "example": example,
            "default": default}
