"""Vertex AI CustomJob specs: checks before submission, fallbacks, and the job built for each attempt.

Pure (no Airflow, no Google imports): the operator calls :func:`validate_custom_job` before anything is
submitted and :func:`build_custom_job` for every attempt. Worker pools are plain dicts in the
``google.cloud.aiplatform_v1.WorkerPoolSpec`` shape (proto-plus messages are converted by the operator).

Every replica gets the ``RESILIENT_*`` variables of :mod:`.common` (``RESILIENT_CHECKPOINT_DIR`` is Vertex's
``AIP_CHECKPOINT_DIR`` by default); the labels and the environment are the same on every platform.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from ..policy import Fallback
from .catalog import catalog
from .common import (
    PROJECT_RE,
    SpecError,
    checkpoint_dir_problems,
    label_problems,
    location_problems,
    service_account_problems,
)
from .preflight import Preflight, preflight_of, wrap_container_command
from .vertex_pools import (
    ACCELERATOR_TYPES,
    MACHINE_TYPE_RE,
    accelerator_problem,
    check_worker_pools,
    machine_type_problem,
)

REGION_RE = re.compile(r"^[a-z]+(?:-[a-z]+)+\d+$")
#: Vertex AI's regions for custom training (:mod:`.catalog`, from cloud.google.com/vertex-ai/docs/general/locations).
#: A region Google adds later is accepted when named in ``RESILIENT_EXTRA_REGIONS`` (comma-separated) -- the escape
#: hatch.
VERTEX_REGIONS: frozenset[str] = catalog().vertex_regions
STRATEGIES = ("STANDARD", "SPOT", "FLEX_START", "ON_DEMAND", "LOW_COST")


def labels_filter(labels: Mapping[str, str]) -> str:
    """A ListCustomJobs filter matching every label, e.g. ``labels.a="x" AND labels.b="y"``."""
    return " AND ".join(f'labels.{k}="{v}"' for k, v in sorted(labels.items()))


def _pool_code(pool: Mapping[str, Any]) -> str:
    return "container_spec" if pool.get("container_spec") else "python_package_spec"


def validate_custom_job(
    *,
    project_id: str,
    region: str,
    display_name: str,
    worker_pool_specs: Sequence[Mapping[str, Any]],
    base_output_dir: str | None,
    labels: Mapping[str, str],
    strategy: str | None,
    max_wait_duration: Any,
    timeout: Any,
    fallbacks: Sequence[Fallback],
    checkpoint_dir: Any = None,
    extra_regions: str = "",
    service_account: object = None,
    extra_machine_types: str | None = None,
    fallback_problems: Sequence[SpecError] = (),
) -> None:
    """Check the operator's arguments the way Vertex AI would, and a bit more.

    Every check runs, and types are checked before values, so a bad argument is never a raw ``TypeError``.
    ``extra_machine_types``: machine types Google added after this release (comma-separated; None: the
    ``RESILIENT_EXTRA_MACHINE_TYPES`` environment variable). ``fallback_problems``: what is wrong with the shape of
    the ``fallbacks`` argument (:func:`~.fallbacks.fallbacks_of`), reported with the rest.

    Raises:
        SpecError: every problem, one per line (field, value, fix); ``field`` names the first.
    """
    problems: list[SpecError] = []

    def check(field: str, ok: bool, message: str) -> None:
        if not ok:
            problems.append(SpecError(field, message))

    check("project_id", isinstance(project_id, str) and bool(PROJECT_RE.match(project_id)),
          f"{project_id!r} is not a Google Cloud project id (6-30 characters: lowercase letters, digits, hyphens; "
          "starts with a letter)")
    for name, value in [("region", region)] + [(f"fallbacks[{i}].region", f.region) for i, f in
                                                enumerate(fallbacks) if f.region]:
        problems += location_problems(name, value, REGION_RE, VERTEX_REGIONS, "Vertex AI region", "us-central1",
                                      "RESILIENT_EXTRA_REGIONS", extra_regions)
    check("display_name", isinstance(display_name, str) and 0 < len(display_name) <= 128,
          f"{display_name!r}: give a string of 1 to 128 characters")
    try:
        check_worker_pools(worker_pool_specs, extra_machine_types=extra_machine_types)
    except SpecError as exc:
        problems.append(exc)
    problems += service_account_problems(service_account)
    problems += list(fallback_problems)
    for i, fb in enumerate(fallbacks):  # what a fallback changes must be as valid as the pool it changes
        for name in ("flavor_id", "pool_id"):
            if getattr(fb, name, None) is not None:
                check(f"fallbacks[{i}].{name}", False, "a ModelArts fallback's; a Vertex AI fallback changes region, "
                                                       "machine_type, accelerator_type, accelerator_count or strategy")
        if fb.zone is not None:
            check(f"fallbacks[{i}].zone", False, f"{fb.zone!r}: a zone is a Cloud TPU fallback's; a Vertex AI "
                                                 "fallback changes region, machine_type, accelerator_type, "
                                                 "accelerator_count or strategy")
        if fb.machine_type is not None:
            if not isinstance(fb.machine_type, str) or not re.match(MACHINE_TYPE_RE, fb.machine_type):
                check(f"fallbacks[{i}].machine_type", False,
                      f"{fb.machine_type!r}: give a Compute Engine machine type, e.g. 'n1-highmem-16'")
            elif problem := machine_type_problem(fb.machine_type, extra_machine_types):
                check(f"fallbacks[{i}].machine_type", False, problem)
        if fb.accelerator_type is not None:
            check(f"fallbacks[{i}].accelerator_type", fb.accelerator_type in ACCELERATOR_TYPES,
                  f"{fb.accelerator_type!r}: give one of {', '.join(ACCELERATOR_TYPES)}")
        if fb.machine_type is not None or fb.accelerator_type is not None:
            problems += _fallback_accelerator_problems(i, fb, worker_pool_specs)
        if fb.accelerator_count is not None:
            check(f"fallbacks[{i}].accelerator_count", type(fb.accelerator_count) is int and fb.accelerator_count >= 1,
                  f"{fb.accelerator_count!r}: give a whole number >= 1")
    problems += checkpoint_dir_problems(checkpoint_dir)
    check("base_output_dir", base_output_dir is None or (isinstance(base_output_dir, str) and
                                                        base_output_dir.startswith("gs://")),
          f"{base_output_dir!r} must be a gs:// URI (Vertex AI writes there)")
    problems += label_problems(labels)
    check("scheduling.strategy", strategy is None or (isinstance(strategy, str) and strategy.upper() in STRATEGIES),
          f"{strategy!r} is not one of {', '.join(STRATEGIES)}")
    check("scheduling.max_wait_duration", max_wait_duration is None or
          (isinstance(strategy, str) and strategy.upper() == "FLEX_START"), "applies only with strategy 'FLEX_START'")
    for name, value in (("scheduling.timeout", timeout), ("scheduling.max_wait_duration", max_wait_duration)):
        if value is None:
            continue
        try:
            check(name, duration_seconds(value) > 0, f"must be a positive duration, got {value!r}")
        except ValueError as exc:
            problems.append(SpecError(name, str(exc)))
    if problems:
        raise SpecError.of_many(problems)


def _fallback_accelerator_problems(i: int, fb: Fallback, worker_pool_specs: Any) -> list[SpecError]:
    """The fallback's machine type and accelerator type on each pool it changes (build_custom_job sets them on every
    non-empty pool): one problem, at the first pool where the pair does not fit."""
    for j, pool in enumerate(worker_pool_specs if isinstance(worker_pool_specs, list | tuple) else ()):
        machine = pool.get("machine_spec") if isinstance(pool, Mapping) else None
        if not isinstance(machine, Mapping):
            continue
        machine_type = fb.machine_type if fb.machine_type is not None else machine.get("machine_type")
        accelerator = fb.accelerator_type if fb.accelerator_type is not None else machine.get("accelerator_type")
        if problem := accelerator_problem(machine_type, accelerator):
            field = "accelerator_type" if fb.accelerator_type is not None else "machine_type"
            return [SpecError(f"fallbacks[{i}].{field}", f"on worker_pool_specs[{j}]: {problem}")]
    return []


def env_entries(worker_pool_specs: Any) -> list[tuple[str, str]]:
    """``(name, value)`` of every ``{"name", "value"}`` environment entry of every worker pool's
    ``container_spec`` or ``python_package_spec`` (string names and values only; malformed specs give what
    they can: this never raises)."""
    found = []
    for pool in worker_pool_specs if isinstance(worker_pool_specs, list | tuple) else ():
        if not isinstance(pool, Mapping):
            continue
        for code in ("container_spec", "python_package_spec"):
            spec = pool.get(code)
            entries = spec.get("env") if isinstance(spec, Mapping) else None
            for entry in entries if isinstance(entries, list | tuple) else ():
                if isinstance(entry, Mapping) and isinstance(entry.get("name"), str) and \
                        isinstance(entry.get("value"), str):
                    found.append((entry["name"], entry["value"]))
    return found


def duration_seconds(value: Any) -> float:
    """Seconds in a timedelta, a number of seconds, or a protobuf duration string like ``"3600s"``.

    Raises:
        ValueError: for anything else.
    """
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and re.fullmatch(r"\d+(\.\d+)?s", value):
        return float(value[:-1])
    raise ValueError(f"not a duration: {value!r} (use a timedelta, seconds, or a string like '3600s')")


def build_custom_job(
    *,
    display_name: str,
    worker_pool_specs: Sequence[Mapping[str, Any]],
    labels: Mapping[str, str],
    base_output_dir: str | None,
    scheduling: Mapping[str, Any],
    service_account: str | None,
    network: str | None,
    fallback: Fallback | None,
    env: Mapping[str, str],
    preflight: Preflight | None = None,
    runner_source: str = "",
    checkpoint_on_notice: bool = False,
    helper_source: str = "",
    watchdog: Sequence[str] = (),
) -> dict[str, Any]:
    """The CustomJob (dict form) for one attempt: the user's spec, the fallback's changes, our labels
    and the resume environment on every pool. With ``preflight`` or ``checkpoint_on_notice`` every container's
    command runs under the worker runner (:func:`~.preflight.wrap_container_command`, ``runner_source``: the
    runner's text): ``preflight`` runs the fault-tolerance checks first, a pool with NVIDIA accelerators expecting
    to see its ``accelerator_count`` GPUs (``gpu-check``); ``checkpoint_on_notice`` puts the checkpoint-request
    helper (``helper_source``) on the command's ``PYTHONPATH``, so the runner's request on the replica's SIGTERM
    reaches the workload; ``watchdog``, the runner's liveness watchdog options (:func:`~.preflight.watchdog_args`),
    wraps the chief's command (the first pool, ``workerpool0``) too: the chief prints the steps the provider reads,
    and a collective that never returns stops every rank, the chief with them -- the other pools' ranks often print
    no steps at all (only rank 0 logs), and a watchdog there would abort them."""
    # Each pool copied on its own: pools that share a dict (``[pool, {**pool, "replica_count": 2}]``) must not
    # share the copy, or one pool's wrapped command would be the other's too.
    pools = [copy.deepcopy(dict(p)) for p in worker_pool_specs]
    for index, pool in enumerate(pools):
        if not pool:
            continue
        watch = list(watchdog) if index == 0 else []
        if fallback is not None:
            machine = pool.setdefault("machine_spec", {})
            for key in ("machine_type", "accelerator_type", "accelerator_count"):
                value = getattr(fallback, key)
                if value is not None:
                    machine[key] = value
        spec = pool[_pool_code(pool)]
        own = [e for e in spec.get("env", []) if e.get("name") not in env]
        spec["env"] = own + [{"name": k, "value": v} for k, v in env.items()]
        if (preflight is not None or checkpoint_on_notice or watch) and "container_spec" in pool:
            machine = pool.get("machine_spec") or {}
            gpus = int(machine.get("accelerator_count") or 0) if str(
                machine.get("accelerator_type") or "").startswith("NVIDIA_") else 0
            spec["command"] = wrap_container_command(
                list(spec.get("command") or []), list(spec.get("args") or []), runner_source=runner_source,
                runner_args=[*(preflight.runner_args(expect_gpus=gpus) if preflight is not None else []), *watch],
                helper_source=helper_source if checkpoint_on_notice else "")
            spec.pop("args", None)
    sched = {k: v for k, v in scheduling.items() if v is not None}
    if fallback is not None and fallback.strategy:
        sched["strategy"] = fallback.strategy.upper()
    for key in ("timeout", "max_wait_duration"):
        if key in sched:
            sched[key] = f"{duration_seconds(sched[key]):.0f}s"
    job_spec: dict[str, Any] = {"worker_pool_specs": pools}
    if sched:
        job_spec["scheduling"] = sched
    if base_output_dir:
        job_spec["base_output_directory"] = {"output_uri_prefix": base_output_dir}
    if service_account:
        job_spec["service_account"] = service_account
    if network:
        job_spec["network"] = network
    return {"display_name": display_name, "labels": dict(labels), "job_spec": job_spec}


def preflight_problems(worker_pool_specs: Any, preflight: object,
                       checkpoint_on_notice: object = False, worker_hang_timeout: object = None) -> list[SpecError]:
    """What stops the worker runner from wrapping these pools' commands: a bad ``preflight`` value
    (:func:`~.preflight.preflight_of`) or ``checkpoint_on_notice`` flag, and -- with either on, or a
    ``worker_hang_timeout`` -- a
    ``python_package_spec`` pool (its command is Vertex AI's, it cannot be wrapped; a ``container_spec`` always has
    a command: :func:`validate_custom_job`) -- for ``worker_hang_timeout`` the first pool's only (the chief's)."""
    problems: list[SpecError] = []
    off = {"worker_hang_timeout": "None"}  # each argument's "off" value, for the fix
    try:
        checks = preflight_of(preflight)
    except SpecError as exc:
        problems.append(exc)
        checks = None
    if not isinstance(checkpoint_on_notice, bool):
        problems.append(SpecError("checkpoint_on_notice", f"give True or False, got {checkpoint_on_notice!r}"))
        checkpoint_on_notice = False
    wanted = [name for name, on in (("preflight", checks is not None), ("checkpoint_on_notice", checkpoint_on_notice),
                                    ("worker_hang_timeout", worker_hang_timeout is not None)) if on]
    if not wanted or not isinstance(worker_pool_specs, list | tuple):
        return problems
    for i, pool in enumerate(worker_pool_specs):
        if not isinstance(pool, Mapping) or not pool:
            continue
        here = [w for w in wanted if i == 0 or w != "worker_hang_timeout"]  # the watchdog wraps the chief's only
        if "python_package_spec" in pool and here:
            problems.append(SpecError(f"worker_pool_specs[{i}].python_package_spec", f"{' and '.join(here)} "
                                      "wraps a container_spec's command in the worker runner; Vertex AI runs a python "
                                      "package itself: use a container_spec with the pre-built image and its command, "
                                      "or set " + " and ".join(f"{w}={off.get(w, 'False')}" for w in here)))
    return problems


def primary_env(job: Any) -> dict[str, str]:
    """The environment of a created CustomJob's primary pool (container or Python package spec), as a dict;
    {} for a job without pools. For a HyperparameterTuningJob, that of its ``trial_job_spec``."""
    pools = (job.trial_job_spec if hasattr(job, "trial_job_spec") else job.job_spec).worker_pool_specs
    if not pools:
        return {}
    spec = pools[0].container_spec if "container_spec" in pools[0] else pools[0].python_package_spec
    return {e.name: e.value for e in spec.env}
