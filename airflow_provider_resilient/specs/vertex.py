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
from .common import (  # noqa: F401 -- shared by every platform; importable from here as before
    ENV_ATTEMPT,
    ENV_CHECKPOINT_DIR,
    ENV_FAILURE_CLASS,
    ENV_RESUME_FROM,
    ENV_RESUME_STEP,
    LABEL_ATTEMPT,
    LABEL_DAG,
    LABEL_KEEP,
    LABEL_KEY_RE,
    LABEL_MAP_INDEX,
    LABEL_RUN,
    LABEL_TASK,
    LABEL_VALUE_RE,
    MAX_LABELS,
    OUR_LABELS,
    SpecError,
    job_labels,
    label_value,
    resume_env,
)

REGION_RE = re.compile(r"^[a-z]+(?:-[a-z]+)+\d+$")
PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
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
) -> None:
    """Check the operator's arguments the way Vertex AI would, and a bit more.

    Raises:
        SpecError: naming the first bad field and how to fix it.
    """
    if not project_id or not PROJECT_RE.match(project_id):
        raise SpecError("project_id", f"{project_id!r} is not a Google Cloud project id (6-30 characters: "
                                      "lowercase letters, digits, hyphens; starts with a letter)")
    for name, value in [("region", region)] + [(f"fallbacks[{i}].region", f.region) for i, f in
                                                enumerate(fallbacks) if f.region]:
        if not value or not REGION_RE.match(value):
            raise SpecError(name, f"{value!r} is not a region name like 'us-central1' or 'europe-west4'")
    if not display_name or len(display_name) > 128:
        raise SpecError("display_name", "must be 1 to 128 characters")
    if not worker_pool_specs:
        raise SpecError("worker_pool_specs", "at least one worker pool is needed; the first runs the primary replica")
    for i, pool in enumerate(worker_pool_specs):
        where = f"worker_pool_specs[{i}]"
        if not isinstance(pool, Mapping):
            raise SpecError(where, f"must be a dict or a WorkerPoolSpec, got {type(pool).__name__}")
        if i > 0 and not pool:
            continue  # an empty placeholder pool, as Vertex AI allows
        replicas = pool.get("replica_count", 1 if i == 0 else 0)
        if i == 0 and replicas != 1:
            raise SpecError(f"{where}.replica_count", f"the first pool runs the primary replica: it must be 1, "
                                                      f"got {replicas}")
        if not (pool.get("machine_spec") or {}).get("machine_type"):
            raise SpecError(f"{where}.machine_spec.machine_type", "is required, e.g. 'n1-standard-8'")
        container, package = pool.get("container_spec"), pool.get("python_package_spec")
        if bool(container) == bool(package):
            raise SpecError(where, "set exactly one of container_spec or python_package_spec")
        if container:
            if not container.get("image_uri"):
                raise SpecError(f"{where}.container_spec.image_uri", "is required (the training container image)")
            if not container.get("command"):
                raise SpecError(f"{where}.container_spec.command",
                                "is required: the command each replica runs, e.g. ['python', '-m', 'trainer.task'] "
                                "(the operator does not rely on the image's ENTRYPOINT, which the emulator cannot "
                                "run); or use a python_package_spec pool")
        elif package:
            for key in ("executor_image_uri", "python_module", "package_uris"):
                if not package.get(key):
                    raise SpecError(f"{where}.python_package_spec.{key}", "is required")
    if base_output_dir is not None and not base_output_dir.startswith("gs://"):
        raise SpecError("base_output_dir", f"{base_output_dir!r} must be a gs:// URI (Vertex AI writes there)")
    for key, value in labels.items():
        if key in OUR_LABELS:
            raise SpecError(f"labels[{key!r}]", "is set by the operator itself; choose another key")
        if not LABEL_KEY_RE.match(key):
            raise SpecError(f"labels[{key!r}]", "keys start with a lowercase letter and hold only lowercase "
                                                "letters, digits, '_' and '-' (at most 63 characters)")
        if not isinstance(value, str) or not LABEL_VALUE_RE.match(value):
            raise SpecError(f"labels[{key!r}]", f"value {value!r} may hold only lowercase letters, digits, '_' and "
                                                "'-' (at most 63 characters)")
    if len(labels) + len(OUR_LABELS) > MAX_LABELS:
        raise SpecError("labels", f"at most {MAX_LABELS - len(OUR_LABELS)} labels (the operator adds "
                                  f"{len(OUR_LABELS)} of its own)")
    if strategy is not None and strategy.upper() not in STRATEGIES:
        raise SpecError("scheduling.strategy", f"{strategy!r} is not one of {', '.join(STRATEGIES)}")
    if max_wait_duration is not None and (strategy or "").upper() != "FLEX_START":
        raise SpecError("scheduling.max_wait_duration", "applies only with strategy 'FLEX_START'")
    for name, value in (("scheduling.timeout", timeout), ("scheduling.max_wait_duration", max_wait_duration)):
        if value is not None and duration_seconds(value) <= 0:
            raise SpecError(name, f"must be a positive duration, got {value!r}")


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
) -> dict[str, Any]:
    """The CustomJob (dict form) for one attempt: the user's spec, the fallback's changes, our labels
    and the resume environment on every pool."""
    pools = copy.deepcopy([dict(p) for p in worker_pool_specs])
    for pool in pools:
        if not pool:
            continue
        if fallback is not None:
            machine = pool.setdefault("machine_spec", {})
            for key in ("machine_type", "accelerator_type", "accelerator_count"):
                value = getattr(fallback, key)
                if value is not None:
                    machine[key] = value
        spec = pool[_pool_code(pool)]
        own = [e for e in spec.get("env", []) if e.get("name") not in env]
        spec["env"] = own + [{"name": k, "value": v} for k, v in env.items()]
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


def primary_env(job: Any) -> dict[str, str]:
    """The environment of a created CustomJob's primary pool (container or Python package spec), as a dict;
    {} for a job without pools."""
    pools = job.job_spec.worker_pool_specs
    if not pools:
        return {}
    spec = pools[0].container_spec if "container_spec" in pools[0] else pools[0].python_package_spec
    return {e.name: e.value for e in spec.env}
