"""The platform names the specs check against, read from one data file, ``catalog.json`` (package data).

Pure and cheap to import (stdlib only: no Airflow, no Google imports). Each list in the file gives the public page
it was copied from (``source``) and when (``retrieved``):

* Vertex AI machine types for custom training, by family, with the accelerator types each family takes
  (https://cloud.google.com/vertex-ai/docs/training/configure-compute);
* Vertex AI's ``AcceleratorType`` names (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/MachineSpec);
* Vertex AI regions (https://cloud.google.com/vertex-ai/docs/general/locations);
* Cloud TPU accelerator families and their slice sizes (https://cloud.google.com/tpu/docs/system-architecture-tpu-vm
  and the per-version pages), the zones and what each offers (https://cloud.google.com/tpu/docs/regions-zones), the
  TPU VM runtime versions and the families they run on (https://cloud.google.com/tpu/docs/runtimes);
* the service account email formats (https://cloud.google.com/iam/docs/service-accounts-create,
  https://cloud.google.com/iam/docs/service-agents).

Google adds names after a release: each check has an escape hatch, a comma-separated environment variable of names
to accept as well (:data:`EXTRA_ENV`), read when the check runs. The emulator serves its Cloud TPU catalog
(``ListAcceleratorTypes``, ``ListRuntimeVersions``, ``ListLocations``) from the same file.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

#: The escape hatches: names Google added after this release, comma-separated, accepted as well.
EXTRA_ENV = {"region": "RESILIENT_EXTRA_REGIONS", "zone": "RESILIENT_EXTRA_ZONES",
             "machine_type": "RESILIENT_EXTRA_MACHINE_TYPES", "runtime_version": "RESILIENT_EXTRA_RUNTIME_VERSIONS"}
#: The sizes of a TPU family given as a rule rather than a list (v4, v5p): every multiple of 8 up to the largest.
MULTIPLES_OF_8 = "multiples of 8"


@dataclass(frozen=True)
class MachineFamily:
    """A Vertex AI machine family (``n1-standard``): its machine types and the accelerator types they take
    (``()``: none; ``None``: not checked)."""

    name: str
    machine_types: tuple[str, ...]
    accelerators: tuple[str, ...] | None


@dataclass(frozen=True)
class TpuFamily:
    """A Cloud TPU family (``v4``): its slice sizes (TensorCores or chips: ``unit``) and largest slice."""

    name: str
    unit: str
    sizes: tuple[int, ...] | None  # None: every multiple of 8 up to ``largest``
    largest: int

    def offers(self, size: int) -> bool:
        if self.sizes is None:
            return size % 8 == 0 and 8 <= size <= self.largest
        return size in self.sizes

    def all_sizes(self) -> tuple[int, ...]:
        return self.sizes if self.sizes is not None else tuple(range(8, self.largest + 1, 8))


@dataclass(frozen=True)
class RuntimeVersion:
    """A TPU VM runtime version (software image) and the families it runs on."""

    name: str
    families: tuple[str, ...]


@dataclass(frozen=True)
class ServiceAccountKind:
    kind: str
    pattern: re.Pattern[str]
    example: str


@dataclass(frozen=True)
class Catalog:
    """Everything in ``catalog.json``; ``sources``: list name -> (source URL, retrieved date)."""

    machine_families: dict[str, MachineFamily]
    vertex_accelerator_types: tuple[str, ...]
    vertex_regions: frozenset[str]
    tpu_families: dict[str, TpuFamily]
    tpu_zones: dict[str, dict[str, tuple[int, ...] | None]]  # zone -> family -> sizes (None: all of them)
    runtime_versions: dict[str, RuntimeVersion]
    service_accounts: tuple[ServiceAccountKind, ...]
    sources: dict[str, tuple[str, str]]

    # ------------------------------------------------------------------ Vertex AI
    @property
    def machine_types(self) -> frozenset[str]:
        return frozenset(t for f in self.machine_families.values() for t in f.machine_types)

    def machine_family(self, machine_type: str) -> MachineFamily | None:
        for family in self.machine_families.values():
            if machine_type in family.machine_types:
                return family
        return None

    # ------------------------------------------------------------------ Cloud TPU
    def tpu_types_in(self, zone: str) -> tuple[str, ...]:
        """The accelerator types ``zone`` offers (empty for a zone not in the catalog)."""
        out = []
        for family, sizes in self.tpu_zones.get(zone, {}).items():
            for size in sizes if sizes is not None else self.tpu_families[family].all_sizes():
                out.append(f"{family}-{size}")
        return tuple(out)

    def zone_offers(self, zone: str, accelerator_type: str) -> bool:
        family, _, size = accelerator_type.rpartition("-")
        offered = self.tpu_zones.get(zone, {})
        if family not in offered or not size.isdigit():
            return False
        sizes = offered[family]
        return self.tpu_families[family].offers(int(size)) and (sizes is None or int(size) in sizes)

    def runtime_versions_in(self, zone: str) -> tuple[str, ...]:
        """The runtime versions ``zone`` offers: those of the families it offers."""
        families = set(self.tpu_zones.get(zone, {}))
        return tuple(v.name for v in self.runtime_versions.values() if families & set(v.families))


def _sized(sizes: Any) -> tuple[int, ...] | None:
    return None if sizes in ("all", MULTIPLES_OF_8) else tuple(sizes)


@cache
def catalog() -> Catalog:
    """The catalog, read once from the package's ``catalog.json``."""
    here = resources.files(__package__ or "airflow_provider_resilient.specs")
    data = json.loads(here.joinpath("catalog.json").read_text(encoding="utf-8"))
    machines = data["vertex_machine_types"]
    tpu = data["tpu_accelerator_types"]
    return Catalog(
        machine_families={name: MachineFamily(name, tuple(f["machine_types"]),
                                              None if f["accelerators"] is None else tuple(f["accelerators"]))
                          for name, f in machines["families"].items()},
        vertex_accelerator_types=tuple(data["vertex_accelerator_types"]["accelerator_types"]),
        vertex_regions=frozenset(data["vertex_regions"]["regions"]),
        tpu_families={name: TpuFamily(name, f["unit"], _sized(f["sizes"]), f["max"])
                      for name, f in tpu["families"].items()},
        tpu_zones={zone: {family: _sized(sizes) for family, sizes in offered.items()}
                   for zone, offered in data["tpu_zones"]["zones"].items()},
        runtime_versions={v["name"]: RuntimeVersion(v["name"], tuple(v["families"]))
                          for v in data["tpu_runtime_versions"]["versions"]},
        service_accounts=tuple(ServiceAccountKind(k["kind"], re.compile(k["pattern"]), k["example"])
                               for k in data["service_accounts"]["kinds"]),
        sources={key: (value["source"], value["retrieved"]) for key, value in data.items() if isinstance(value, dict)},
    )


def extra(what: str, given: str | None = None) -> frozenset[str]:
    """The names of the escape hatch for ``what`` (a key of :data:`EXTRA_ENV`): ``given`` (comma-separated), or
    the environment variable's value when ``given`` is None."""
    text = os.environ.get(EXTRA_ENV[what], "") if given is None else given
    return frozenset(v.strip() for v in text.split(",") if v.strip())


def closest(value: str, known: Any, n: int = 3) -> str:
    """``" (closest: 'a', 'b')"`` -- the known names nearest ``value``; empty when none is near."""
    near = difflib.get_close_matches(value, sorted(known), n=n, cutoff=0.6)
    return f" (closest: {', '.join(repr(v) for v in near)})" if near else ""


__all__ = ["EXTRA_ENV", "Catalog", "MachineFamily", "RuntimeVersion", "ServiceAccountKind", "TpuFamily", "catalog",
           "closest", "extra"]
