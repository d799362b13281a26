"""Extra links on the task: the live CustomJob's console page and its Cloud Logging query.

Airflow 3 reads an extra link from XCom under the link's ``xcom_key``; the operator pushes the full URL
there when an attempt is submitted (:func:`push_links`), so the links always point at the live job.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .base import XComLink


class VertexAICustomJobLink(XComLink):
    name = "Vertex AI CustomJob"
    format_str = "https://console.cloud.google.com/vertex-ai/locations/{region}/training/{job_id}/cpu?project={project}"


class VertexAICustomJobLogsLink(XComLink):
    name = "CustomJob logs"
    format_str = "https://console.cloud.google.com/logs/query;query={query}?project={project}"


def job_links(job_name: str) -> dict[str, str]:
    """``{xcom_key: url}`` for a job name ``projects/P/locations/R/customJobs/ID``."""
    _, project, _, region, _, job_id = job_name.split("/")
    query = quote(f'resource.type="ml_job"\nresource.labels.job_id="{job_id}"', safe="")
    return {
        VertexAICustomJobLink().xcom_key: VertexAICustomJobLink.format_str.format(region=region, job_id=job_id,
                                                                                  project=project),
        VertexAICustomJobLogsLink().xcom_key: VertexAICustomJobLogsLink.format_str.format(query=query,
                                                                                          project=project),
    }


def push_links(context: Any, job_name: str) -> None:
    """Push the links of ``job_name`` for the running task instance."""
    for key, url in job_links(job_name).items():
        context["ti"].xcom_push(key=key, value=url)


__all__ = ["VertexAICustomJobLink", "VertexAICustomJobLogsLink", "job_links", "push_links"]
