"""What the emulated Cloud TPU API offers in each zone: accelerator types, runtime versions, locations.

Read from the provider's platform data file (``airflow_provider_resilient/specs/catalog.json``: Cloud TPU's public
pages, "TPU regions and zones" https://cloud.google.com/tpu/docs/regions-zones, the system architecture and
per-version pages, "TPU software versions" https://cloud.google.com/tpu/docs/runtimes), as a file: the emulator
shares the data with the provider's parse-time checks, never their code (this module reads it on its own, so a
test comparing the two catches a mistake in either reading). The slice sizes a family comes in and their hosts
stay :mod:`.topology`'s.

A zone Google has just added, or a type it now offers in a zone, is accepted when the zone is named in
``RESILIENT_EXTRA_ZONES``; a runtime version in ``RESILIENT_EXTRA_RUNTIME_VERSIONS`` (the provider's escape hatches:
the emulator stands for the platform as it is now).
"""

from __future__ import annotations

import json
import os
import re
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument, NotFound
from .topology import worker_count

#: The data file, as a path (not an import of the provider's specs).
CATALOG_FILE = Path(__file__).resolve().parents[3] / "specs" / "catalog.json"
#: Cloud TPU's ``Node`` id rule (RFC 1035: ``nodeId`` of projects.locations.nodes.create,
#: https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes/create).
NODE_ID_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
#: ``AcceleratorConfig.Type`` of each family.
CONFIG_TYPE = {"v2": "V2", "v3": "V3", "v4": "V4", "v5litepod": "V5LITE_POD", "v5p": "V5P", "v6e": "V6E"}


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))
    return data


def _extra(variable: str) -> set[str]:
    return {v.strip() for v in os.environ.get(variable, "").split(",") if v.strip()}


def zones() -> list[str]:
    """Every Cloud TPU zone (sorted), the escape hatch's included."""
    return sorted(set(_data()["tpu_zones"]["zones"]) | _extra("RESILIENT_EXTRA_ZONES"))


def _family_sizes(family: str) -> list[int]:
    spec = _data()["tpu_accelerator_types"]["families"][family]
    if isinstance(spec["sizes"], list):
        return [int(s) for s in spec["sizes"]]
    return list(range(8, int(spec["max"]) + 1, 8))  # "multiples of 8"


def accelerator_types(zone: str) -> list[str]:
    """The accelerator types ``zone`` offers, by family and size; every type of every family in a zone of the
    escape hatch."""
    offered = _data()["tpu_zones"]["zones"].get(zone)
    if zone in _extra("RESILIENT_EXTRA_ZONES") or offered is None:
        offered = {family: "all" for family in CONFIG_TYPE} if zone in _extra("RESILIENT_EXTRA_ZONES") else {}
    out = []
    for family, sizes in offered.items():
        out += [f"{family}-{size}" for size in (_family_sizes(family) if sizes == "all" else sizes)]
    return out


def runtime_versions(zone: str) -> list[str]:
    """The runtime versions ``zone`` offers: those of the families it offers (every one in a zone of the escape
    hatch), and those of ``RESILIENT_EXTRA_RUNTIME_VERSIONS``."""
    every = _data()["tpu_runtime_versions"]["versions"]
    if zone in _extra("RESILIENT_EXTRA_ZONES"):
        names = [v["name"] for v in every]
    elif zone in _data()["tpu_zones"]["zones"]:
        families = set(_data()["tpu_zones"]["zones"][zone])
        names = [v["name"] for v in every if families & set(v["families"])]
    else:
        return []
    return names + sorted(_extra("RESILIENT_EXTRA_RUNTIME_VERSIONS") - set(names))


@lru_cache(maxsize=4096)
def topology(accelerator_type: str) -> str:
    """The chip topology of a slice, as ``AcceleratorConfig.topology`` gives it: 2D (``AxB``) on v2, v3, v5e and
    v6e, 3D (``AxBxC``) on v4 and v5p -- the most even split of the chips into powers of two and their
    multiples (``v4-8``: 4 chips, ``2x2x1``; ``v4-32``: ``2x2x4``; ``v2-8``: ``2x2``)."""
    family, size = accelerator_type.rsplit("-", 1)
    chips = int(size) // 2 if family in ("v2", "v3", "v4", "v5p") else int(size)
    divisors = [d for d in range(1, chips + 1) if chips % d == 0]
    shapes: list[tuple[int, ...]]
    if family in ("v4", "v5p"):
        shapes = [(a, b, chips // a // b) for a in divisors for b in divisors if a <= b <= chips // a // b and
                  (chips // a) % b == 0]
    else:
        shapes = [(a, chips // a) for a in divisors if a <= chips // a]
    shape = min(shapes, key=lambda s: s[-1] - s[0])
    return "x".join(map(str, [d for d in shape if d > 1] + [d for d in shape if d == 1]))


def check_create(parent: str, node_id: str, accelerator_type: str, runtime_version: str) -> None:
    """Refuse what Cloud TPU refuses in a node's create call: a location that is not a Cloud TPU zone (NOT_FOUND),
    a node id that is not an RFC 1035 name, an accelerator type or a runtime version the zone does not offer
    (INVALID_ARGUMENT). The wording is the emulator's: Google does not publish the service's."""
    zone = parent.rsplit("/", 1)[-1]
    if zone not in zones():
        raise NotFound(f"Location {parent!r} is not a Cloud TPU zone (Cloud TPU, \"TPU regions and zones\")")
    if not NODE_ID_RE.match(node_id or ""):
        raise InvalidArgument(f"node_id {node_id!r} is not a valid resource name: 1-63 characters, a lowercase "
                              "letter first, then lowercase letters, digits or '-', not ending with '-' (RFC 1035)")
    try:
        worker_count(accelerator_type)
    except ValueError as exc:
        raise InvalidArgument(f"node.accelerator_type: {exc}") from exc
    if accelerator_type not in accelerator_types(zone):
        raise InvalidArgument(f"node.accelerator_type: {accelerator_type!r} is not available in {zone}; "
                              f"ListAcceleratorTypes on {parent} lists what is")
    if not runtime_version:
        raise InvalidArgument("node.runtime_version is required, e.g. 'tpu-ubuntu2204-base'")
    if runtime_version not in runtime_versions(zone):
        raise InvalidArgument(f"node.runtime_version: {runtime_version!r} is not available in {zone}; "
                              f"ListRuntimeVersions on {parent} lists what is")


__all__ = ["CATALOG_FILE", "NODE_ID_RE", "accelerator_types", "check_create", "runtime_versions", "topology", "zones"]
