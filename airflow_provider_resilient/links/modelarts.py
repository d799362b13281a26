"""Extra link on the task: the live ModelArts training job's page in the Huawei Cloud console.

The operator pushes the full URL to XCom under the link's ``xcom_key`` when an attempt is submitted
(:func:`push_links`), so the link always points at the live job.
"""

from __future__ import annotations

from typing import Any

from .base import XComLink


class ModelArtsTrainingJobLink(XComLink):
    """The training job's detail page of the ModelArts console (``region`` and job id)."""

    name = "ModelArts training job"
    format_str = "https://console.huaweicloud.com/modelarts/?region={region}#/training/detail/{job_id}"


def push_links(context: Any, job_name: str) -> None:
    """Push the link of ``job_name`` (``modelarts/<region>/<project>/<job id>``) to XCom."""
    _, region, _, job_id = job_name.split("/", 3)
    link = ModelArtsTrainingJobLink()
    context["ti"].xcom_push(key=link.xcom_key, value=link.format_str.format(region=region, job_id=job_id))


__all__ = ["ModelArtsTrainingJobLink", "push_links"]
