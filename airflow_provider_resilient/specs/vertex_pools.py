"""The shape of Vertex AI worker pools, checked field by field before anything is submitted.

Pure (pydantic, no Airflow, no Google imports). :func:`check_worker_pools` reads ``worker_pool_specs`` as the
``aiplatform_v1`` REST/proto shape (``WorkerPoolSpec``: ``machine_spec``, ``replica_count``,
``container_spec`` or ``python_package_spec``, ``disk_spec``, ``nfs_mounts``, ``lustre_mounts``) with strict
types: proto-plus would turn ``command="python train.py"`` into a list of characters and ``replica_count="1"``
into a string the API refuses after the create call, so neither is accepted here. Each problem becomes one line
naming the field (``worker_pool_specs[0].container_spec.command``), the value (never an ``env`` value: it may be
a secret) and the fix. The field lists are the ``aiplatform_v1`` protos' (``tests/operators`` compares them).

Limits, from the Vertex AI API reference (``CustomJobSpec`` and ``WorkerPoolSpec``,
https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec):

* ``replica_count``: a whole number >= 0 (the first pool's must be 1: it runs the primary replica);
* ``machine_spec.machine_type``: a machine type Vertex AI offers for custom training (:mod:`.catalog`, or named
  in ``RESILIENT_EXTRA_MACHINE_TYPES``: the escape hatch for one Google has just added);
* ``machine_spec.accelerator_type``: an ``AcceleratorType`` name (:data:`ACCELERATOR_TYPES`) that the machine's
  family takes (an A100 on an ``a2-highgpu``, an L4 on a ``g2-standard``, a T4 on an ``n1``), with
  ``accelerator_count`` >= 1, and a count without a type is refused;
* ``disk_spec.boot_disk_size_gb``: 100 to 65536 (GB; Vertex AI's default is 100);
* ``container_spec.command`` / ``args``, ``python_package_spec.package_uris`` / ``args``: lists of strings;
* ``env``: a list of ``{"name": ..., "value": ...}`` with a name a process environment can hold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from .catalog import catalog, closest, extra
from .common import SpecError

#: ``google.cloud.aiplatform_v1.AcceleratorType`` names a training pool may ask for (:mod:`.catalog`).
ACCELERATOR_TYPES: tuple[str, ...] = catalog().vertex_accelerator_types
#: A Compute Engine machine type name: ``n1-standard-8``, ``a2-highgpu-1g``, ``ct5lp-hightpu-4t``, ``cloud-tpu``.
MACHINE_TYPE_RE = r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)+$"
#: An environment variable name a container can be given (no ``=``, no NUL, not empty).
ENV_NAME_RE = r"^[^=\x00]+$"

Text = Annotated[str, StringConstraints(min_length=1)]
Strings = list[str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class EnvVar(_Strict):
    name: Annotated[str, StringConstraints(pattern=ENV_NAME_RE)]
    value: str


class MachineSpec(_Strict):
    machine_type: Annotated[str, StringConstraints(pattern=MACHINE_TYPE_RE)]
    accelerator_type: Literal[ACCELERATOR_TYPES] | None = None  # type: ignore[valid-type]
    accelerator_count: Annotated[int, Field(ge=0)] = 0
    gpu_partition_size: str | None = None
    tpu_topology: str | None = None
    reservation_affinity: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _accelerators(self) -> MachineSpec:
        if self.accelerator_count and not self.accelerator_type:
            raise ValueError("accelerator_count without accelerator_type: name the accelerator, e.g. "
                             "'NVIDIA_TESLA_T4'")
        if self.accelerator_type and self.accelerator_count < 1:
            raise ValueError("accelerator_type without accelerator_count >= 1: say how many per replica")
        return self


class ContainerSpec(_Strict):
    image_uri: Text
    command: Strings = []
    args: Strings = []
    env: list[EnvVar] = []


class PythonPackageSpec(_Strict):
    executor_image_uri: Text
    package_uris: Annotated[Strings, Field(min_length=1)]
    python_module: Text
    args: Strings = []
    env: list[EnvVar] = []


class DiskSpec(_Strict):
    boot_disk_type: Text = "pd-ssd"
    boot_disk_size_gb: Annotated[int, Field(ge=100, le=65536)] = 100


class WorkerPoolSpec(_Strict):
    machine_spec: MachineSpec
    replica_count: Annotated[int, Field(ge=0)] = 0
    container_spec: ContainerSpec | None = None
    python_package_spec: PythonPackageSpec | None = None
    disk_spec: DiskSpec | None = None
    nfs_mounts: list[dict[str, Any]] = []
    lustre_mounts: list[dict[str, Any]] = []


#: The fix for each kind of pydantic error (its ``type``), said after the field and the value; other kinds
#: (a pattern, a bound) say pydantic's own message, which names the limit.
_FIXES = {
    "list_type": "give a list, e.g. ['python', '-m', 'trainer.task'] (a string would reach Vertex AI split into "
                 "single characters)",
    "int_type": "give a whole number, e.g. 1 (not a string or a fraction)",
    "string_type": "give a string",
    "dict_type": "give a dict",
    "model_type": "give a dict of its fields",
    "missing": "is required",
    "extra_forbidden": "is not a field of it (check the spelling against the aiplatform_v1 reference)",
    "literal_error": f"give one of {', '.join(ACCELERATOR_TYPES)}",
    "string_too_short": "must not be empty",
}


def _path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _describe(error: Any, where: str) -> str:
    loc = error["loc"]
    field = where + _path(loc)
    hidden = "env" in loc and loc[-1] == "value"
    value = "" if error["type"] == "missing" or hidden else f" {_short(error['input'])}"
    fix = _FIXES.get(error["type"], "")
    if error["type"] == "string_pattern_mismatch" and loc and loc[-1] == "machine_type":
        fix = "give a Compute Engine machine type, e.g. 'n1-standard-8' or 'a2-highgpu-1g'"
    elif error["type"] == "list_type" and loc and loc[-1] == "env":
        fix = "give a list of {'name': ..., 'value': ...} (a {NAME: value} dict is the TPU operator's env shape)"
    message = fix or str(error["msg"]).removeprefix("Value error, ")
    return f"{field}:{value}: {message}" if value else f"{field}: {message}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _pool_rules(pool: dict[str, Any], i: int, at: str) -> list[tuple[str, str]]:
    """Vertex AI's rules across a pool's fields (read from the raw dict: they hold even when a field's type is
    wrong, which the model reports)."""
    found = []
    if i == 0 and "replica_count" in pool and pool["replica_count"] != 1:
        found.append((f"{at}.replica_count", f"{at}.replica_count: {_short(pool['replica_count'])}: the first pool "
                                             "runs the primary replica: it must be 1"))
    container, package = pool.get("container_spec"), pool.get("python_package_spec")
    if (container is None) == (package is None):
        found.append((at, f"{at}: set exactly one of container_spec or python_package_spec"))
    elif isinstance(container, dict) and not container.get("command"):
        found.append((f"{at}.container_spec.command",
                      f"{at}.container_spec.command: is required: the command each replica runs, e.g. "
                      "['python', '-m', 'trainer.task'] (the operator does not rely on the image's ENTRYPOINT, "
                      "which the emulator cannot run); or use a python_package_spec pool"))
    return found


def machine_type_problem(machine_type: object, extra_machine_types: str | None = None) -> str | None:
    """What is wrong with ``machine_type`` as a Vertex AI machine type for custom training (None: nothing); a
    non-string or a malformed name is left to the pool model, which names its type."""
    if not isinstance(machine_type, str) or not re.match(MACHINE_TYPE_RE, machine_type):
        return None
    if machine_type in catalog().machine_types or machine_type in extra("machine_type", extra_machine_types):
        return None
    family = machine_type.rsplit("-", 1)[0]
    known = catalog().machine_families.get(family)
    what = (f"{family} comes in {', '.join(known.machine_types)}" if known else
            f"{family!r} is not a machine family Vertex AI offers for custom training")
    return (f"{machine_type!r}: {what}{closest(machine_type, catalog().machine_types)}; if Google has just added it, "
            "name it in RESILIENT_EXTRA_MACHINE_TYPES (comma-separated)")


def accelerator_problem(machine_type: object, accelerator_type: object) -> str | None:
    """What is wrong with ``accelerator_type`` on ``machine_type`` (None: nothing, or a machine the catalog does
    not know -- an escape-hatch one -- or whose accelerators it does not check)."""
    if not isinstance(machine_type, str) or accelerator_type not in ACCELERATOR_TYPES:
        return None
    family = catalog().machine_family(machine_type)
    if family is None or family.accelerators is None or accelerator_type in family.accelerators:
        return None
    takes = (f"the {family.name} family takes {', '.join(family.accelerators)}" if family.accelerators else
             f"the {family.name} family takes no accelerators")
    fits = sorted(f.name for f in catalog().machine_families.values() if f.accelerators and
                  accelerator_type in f.accelerators)
    return (f"{accelerator_type!r} does not attach to {machine_type!r}: {takes}; {accelerator_type} comes on "
            f"{', '.join(fits) or 'no machine family here'} (Vertex AI, \"Configure compute resources for custom "
            "training\")")


def _machine_rules(pool: dict[str, Any], at: str, extra_machine_types: str | None) -> list[tuple[str, str]]:
    machine = pool.get("machine_spec")
    if not isinstance(machine, dict):
        return []
    found = []
    if problem := machine_type_problem(machine.get("machine_type"), extra_machine_types):
        found.append((f"{at}.machine_spec.machine_type", f"{at}.machine_spec.machine_type: {problem}"))
    elif problem := accelerator_problem(machine.get("machine_type"), machine.get("accelerator_type")):
        found.append((f"{at}.machine_spec.accelerator_type", f"{at}.machine_spec.accelerator_type: {problem}"))
    return found


def check_worker_pools(pools: Any, where: str = "worker_pool_specs", extra_machine_types: str | None = None) -> None:
    """Check ``pools`` (a list of ``WorkerPoolSpec`` dicts) against the models above and Vertex AI's rules for a
    CustomJob: at least one pool; the first has ``replica_count`` 1 (the primary); each non-empty pool has
    exactly one of ``container_spec`` / ``python_package_spec``; a container pool gives its ``command`` (the
    emulator cannot run an image's ENTRYPOINT); each machine type is one Vertex AI offers (or named in
    ``extra_machine_types``, comma-separated; None: the ``RESILIENT_EXTRA_MACHINE_TYPES`` environment variable) and
    takes the pool's accelerator type.

    Raises:
        SpecError: every problem found, one per line in the message, the first one's field as ``field``.
    """
    if not isinstance(pools, list | tuple):
        raise SpecError(where, f"{_short(pools)}: give a list of worker pools (dicts), the first for the primary "
                               "replica")
    if not pools:
        raise SpecError(where, "at least one worker pool is needed; the first runs the primary replica")
    problems: list[tuple[str, str]] = []
    for i, pool in enumerate(pools):
        at = f"{where}[{i}]"
        if not isinstance(pool, dict):
            problems.append((at, f"{at}: {_short(pool)}: give a dict (a WorkerPoolSpec's fields)"))
            continue
        if i > 0 and not pool:
            continue  # an empty placeholder pool, as Vertex AI allows
        try:
            WorkerPoolSpec.model_validate(pool)
        except ValidationError as exc:
            for error in exc.errors():
                problems.append((at + _path(error["loc"]), _describe(error, at)))
        problems += _pool_rules(pool, i, at)
        problems += _machine_rules(pool, at, extra_machine_types)
    if problems:
        raise SpecError.of_many([SpecError(field, "", line=line) for field, line in problems])


__all__ = ["ACCELERATOR_TYPES", "ContainerSpec", "DiskSpec", "EnvVar", "MachineSpec", "PythonPackageSpec",
           "WorkerPoolSpec", "accelerator_problem", "check_worker_pools", "machine_type_problem"]
