"""Extra links of the TPU operator: the live node's console page and its audit-log (maintenance) query."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .base import XComLink


class TPUNodeLink(XComLink):
    name = "Cloud TPU node"
    format_str = "https://console.cloud.google.com/compute/tpus/details/{zone}/{node}?project={project}"


class TPUAuditLogLink(XComLink):
    name = "TPU maintenance events"
    format_str = "https://console.cloud.google.com/logs/query;query={query}?project={project}"


def node_links(node_name: str) -> dict[str, str]:
    """``{xcom_key: url}`` for ``projects/P/locations/ZONE/nodes/NODE``."""
    _, project, _, zone, _, node = node_name.split("/")
    query = quote(f'protoPayload.resourceName="{node_name}"\n("tpu.nodes.terminate" OR "tpu.nodes.restart")',
                  safe="")
    return {TPUNodeLink().xcom_key: TPUNodeLink.format_str.format(zone=zone, node=node, project=project),
            TPUAuditLogLink().xcom_key: TPUAuditLogLink.format_str.format(query=query, project=project)}


def push_node_links(context: Any, node_name: str) -> None:
    for key, url in node_links(node_name).items():
        context["ti"].xcom_push(key=key, value=url)


__all__ = ["TPUAuditLogLink", "TPUNodeLink", "node_links", "push_node_links"]
