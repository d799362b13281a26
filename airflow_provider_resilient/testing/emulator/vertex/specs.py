"""CustomJob specs: validation as Vertex AI does it, and the replicas' commands and environment.

Validation raises :class:`~..errors.InvalidArgument` naming the field, like Vertex AI's "List of found errors:
1.Field: job_spec.worker_pool_specs[0].machine_spec.machine_type; Message: Required field is not set." The replicas
get the environment Vertex AI gives them (Vertex AI, "Prepare training code",
https://cloud.google.com/vertex-ai/docs/training/code-requirements, and ``CustomJobSpec.baseOutputDirectory``):
``AIP_MODEL_DIR``, ``AIP_CHECKPOINT_DIR``, ``AIP_TENSORBOARD_LOG_DIR`` from ``base_output_directory``,
``CLOUD_ML_JOB_ID``, ``CLUSTER_SPEC``, ``TF_CONFIG``, PyTorch's ``RANK`` / ``WORLD_SIZE`` / ``MASTER_ADDR`` /
``MASTER_PORT``, the user's ``env``; plus ``STORAGE_EMULATOR_HOST`` so that ``gs://`` reaches the emulated bucket.
"""

from __future__ import annotations

import json
import re
import socket
import sys
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument

PARENT_RE = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)$")
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
#: Vertex AI's TF_CONFIG task types by worker pool index.
TF_TASK_TYPES = ("chief", "worker", "ps", "evaluator")
PYTHON_NAMES = frozenset({"python", "python3", "python3.11", "python3.12", "python3.13"})


def _invalid(field: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"List of found errors: 1.Field: {field}; Message: {message}")


def parse_parent(parent: str) -> tuple[str, str]:
    """(project, location) of ``projects/P/locations/L``."""
    match = PARENT_RE.match(parent or "")
    if not match:
        raise _invalid("parent", f"'{parent}' is not of the form projects/{{project}}/locations/{{location}}.")
    return match["project"], match["location"]


def validate_labels(labels: dict[str, str], field: str = "labels") -> None:
    """Vertex AI label rules: at most 64; keys start with a letter; lowercase letters, digits, ``_``, ``-``;
    keys and values at most 63 characters."""
    if len(labels) > 64:
        raise _invalid(field, f"at most 64 labels are allowed, got {len(labels)}.")
    for key, value in labels.items():
        if not LABEL_KEY_RE.match(key):
            raise _invalid(f"{field}[{key!r}]", "label keys must start with a lowercase letter and contain only "
                                                "lowercase letters, digits, '_' and '-' (at most 63 characters).")
        if not LABEL_VALUE_RE.match(value):
            raise _invalid(f"{field}[{key!r}]", f"label value {value!r} may contain only lowercase letters, digits, "
                                                "'_' and '-' (at most 63 characters).")


def _pool_is_empty(pool: Any) -> bool:
    return (not pool.replica_count and not pool.machine_spec.machine_type and "container_spec" not in pool
            and "python_package_spec" not in pool)


def validate_job_spec(spec: Any, field: str = "custom_job.job_spec") -> None:
    """Check a ``CustomJobSpec`` the way Vertex AI does before it accepts a job.

    Raises:
        InvalidArgument: naming the first bad field.
    """
    pools = list(spec.worker_pool_specs)
    if not pools:
        raise _invalid(f"{field}.worker_pool_specs", "at least one worker pool is required.")
    if pools[0].replica_count != 1:
        raise _invalid(f"{field}.worker_pool_specs[0].replica_count",
                       f"the first worker pool (the primary replica) must have replica_count 1, "
                       f"got {pools[0].replica_count}.")
    for i, pool in enumerate(pools):
        where = f"{field}.worker_pool_specs[{i}]"
        if i > 0 and _pool_is_empty(pool):
            continue  # Vertex AI allows empty placeholder pools after the first
        if not pool.machine_spec.machine_type:
            raise _invalid(f"{where}.machine_spec.machine_type", "Required field is not set.")
        has_container = "container_spec" in pool
        has_python = "python_package_spec" in pool
        if not has_container and not has_python:
            raise _invalid(f"{where}.container_spec", "Required field is not set: one of container_spec or "
                                                      "python_package_spec must be set.")
        if has_container and has_python:
            raise _invalid(where, "only one of container_spec or python_package_spec may be set.")
        if has_container:
            if not pool.container_spec.image_uri:
                raise _invalid(f"{where}.container_spec.image_uri", "Required field is not set.")
            if not pool.container_spec.command:
                raise _invalid(f"{where}.container_spec.command",
                               "the emulator ignores container images and runs the command: set it.")
        else:
            pps = pool.python_package_spec
            for name in ("executor_image_uri", "python_module"):
                if not getattr(pps, name):
                    raise _invalid(f"{where}.python_package_spec.{name}", "Required field is not set.")
            if not pps.package_uris:
                raise _invalid(f"{where}.python_package_spec.package_uris", "Required field is not set.")
        if pool.replica_count < 0:
            raise _invalid(f"{where}.replica_count", "must not be negative.")
    timeout = spec.scheduling.timeout if "scheduling" in spec else None
    if timeout is not None and timeout.total_seconds() < 0:
        raise _invalid(f"{field}.scheduling.timeout", "must not be negative.")


@dataclass(frozen=True)
class ReplicaPlan:
    """One replica to run: its name, command and environment."""

    name: str
    pool: int
    index: int
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    gpus: int = 0  # NVIDIA accelerators of its machine (the emulated VM shows as many /dev/nvidiaN)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _argv(pool: Any, extra_args: list[str]) -> list[str]:
    if "container_spec" in pool:
        command = list(pool.container_spec.command)
        args = list(pool.container_spec.args)
    else:
        command = ["python", "-m", pool.python_package_spec.python_module]
        args = list(pool.python_package_spec.args)
    if command and command[0] in PYTHON_NAMES:
        command[0] = sys.executable
    return command + args + extra_args


def _user_env(pool: Any) -> dict[str, str]:
    spec = pool.container_spec if "container_spec" in pool else pool.python_package_spec
    return {e.name: e.value for e in spec.env}


def output_dirs(base: str, trial_id: str | None = None) -> dict[str, str]:
    """Vertex AI's AIP_* directories under ``base_output_directory`` (tuning trials: ``<base>/<trial>/``)."""
    if not base:
        return {}
    root = base.rstrip("/") + (f"/{trial_id}" if trial_id else "")
    return {"AIP_MODEL_DIR": f"{root}/model/", "AIP_CHECKPOINT_DIR": f"{root}/checkpoints/",
            "AIP_TENSORBOARD_LOG_DIR": f"{root}/logs/"}


def plan_replicas(
    spec: Any,
    *,
    job_id: str,
    base_env: dict[str, str],
    extra_args: list[str] | None = None,
    trial_id: str | None = None,
) -> list[ReplicaPlan]:
    """Every replica of every non-empty worker pool, with its command and full environment.

    Args:
        spec: the ``CustomJobSpec``.
        job_id: the numeric job id (``CLOUD_ML_JOB_ID``).
        base_env: the emulator's environment for workloads (PATH, STORAGE_EMULATOR_HOST, ...).
        extra_args: appended to every replica's arguments (a tuning trial's parameters).
        trial_id: set for a tuning trial (``AIP_TRIAL_ID``, per-trial output directories).
    """
    pools = [(i, p) for i, p in enumerate(spec.worker_pool_specs) if p.replica_count > 0]
    hosts = {(i, j): f"127.0.0.1:{_free_port()}" for i, p in pools for j in range(p.replica_count)}
    cluster = {f"workerpool{i}": [hosts[(i, j)] for j in range(p.replica_count)] for i, p in pools}
    tf_cluster = {TF_TASK_TYPES[i]: cluster[f"workerpool{i}"] for i, _ in pools if i < len(TF_TASK_TYPES)}
    master_host, master_port = hosts[(0, 0)].rsplit(":", 1)
    world_size = sum(p.replica_count for i, p in pools if i in (0, 1))
    outputs = output_dirs(spec.base_output_directory.output_uri_prefix, trial_id)
    plans = []
    for i, pool in pools:
        for j in range(pool.replica_count):
            task = {"type": f"workerpool{i}", "index": j}
            if trial_id:
                task["trial"] = trial_id
            rank = 0 if i == 0 else (1 + j if i == 1 else None)
            env = dict(base_env)
            env.update(outputs)
            env.update({
                "CLOUD_ML_JOB_ID": job_id,
                "CLUSTER_SPEC": json.dumps({"cluster": cluster, "environment": "cloud", "task": task}),
                "TF_CONFIG": json.dumps({"cluster": tf_cluster, "environment": "cloud",
                                         "task": {"type": TF_TASK_TYPES[min(i, 3)], "index": j}}),
                "MASTER_ADDR": master_host,
                "MASTER_PORT": master_port,
                "WORLD_SIZE": str(world_size),
            })
            if rank is not None:
                env["RANK"] = str(rank)
            if trial_id:
                env["AIP_TRIAL_ID"] = trial_id
            env.update(_user_env(pool))
            argv = _argv(pool, extra_args or [])
            machine = pool.machine_spec
            gpus = machine.accelerator_count if machine.accelerator_type.name.startswith("NVIDIA_") else 0
            plans.append(ReplicaPlan(f"workerpool{i}-{j}", i, j, tuple(argv), tuple(env.items()), gpus))
    return plans
