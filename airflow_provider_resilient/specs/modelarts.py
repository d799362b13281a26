"""Huawei Cloud ModelArts training jobs: the checks of an operator's arguments and the ``Job`` body of one attempt.

The body is the v2 API's (ModelArts API reference, "Creating a Training Job":
https://support.huaweicloud.com/intl/en-us/api-modelarts/CreateTrainingJob.html): ``kind`` ``job``, ``metadata``
(``name``, ``description``, ``workspace_id``, ``annotations``), ``algorithm`` (a custom image's ``command`` and
``engine.image_url``, or a preset engine's ``code_dir`` / ``boot_file`` / ``engine``; ``parameters``,
``environments``, ``inputs``, ``outputs``) and ``spec.resource`` (``flavor_id``, ``node_count``, ``pool_id``).
Every attempt's job gets its own name (ModelArts refuses a second job of a name, ``ModelArts.2751``:
:func:`attempt_job_name`), the provider's labels as ``RESILIENT_*`` environment variables (ModelArts has no labels
on a create: the backend tags the job right after, and finds a job whose tag call was lost by its name) and, with
``job_retry_num``, the ``fault-tolerance/job-retry-num`` annotation that turns on ModelArts' own environment
pre-check and re-issues ("Training Fault Tolerance Check":
https://support.huaweicloud.com/intl/en-us/develop-modelarts/modelarts_trouble_0003.html; "Unconditional Auto
Restart": https://support.huaweicloud.com/intl/en-us/develop-modelarts/develop-modelarts-0041.html).

Pure: no I/O, no Huawei Cloud import.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .common import LABEL_KEY_RE, SpecError

#: The annotation that turns on ModelArts' fault tolerance: how many times the platform re-issues the job on new
#: nodes after a failed environment pre-check or a hardware fault (0 / absent: never, and no pre-check).
JOB_RETRY_ANNOTATION = "fault-tolerance/job-retry-num"
#: The range of ``fault-tolerance/job-retry-num``: "Training Fault Tolerance Check" gives 1 to 3 re-issues;
#: "Unconditional Auto Restart" (the current page) accepts 1 to 128.
JOB_RETRY_MIN, JOB_RETRY_MAX = 1, 128
#: The annotations the provider writes itself (a user's ``annotations`` may not set them).
OWN_ANNOTATIONS = frozenset({JOB_RETRY_ANNOTATION})
#: A training job's name: 1 to 64 letters, digits, hyphens and underscores ("Creating a Training Job",
#: ``metadata.name``).
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: The longest prefix of an attempt's job name taken from the operator's ``name`` (the rest is ``-<run hash>-a<N>``).
NAME_PREFIX_CHARS = 40
#: ModelArts' regions (the endpoints of ``huaweicloudsdkmodelarts``' ``ModelArtsRegion``, as of 3.1.219).
REGIONS = frozenset({
    "cn-north-1", "cn-north-2", "cn-north-4", "cn-north-9", "cn-north-11", "cn-north-12", "cn-east-3", "cn-east-4",
    "cn-south-1", "cn-southwest-2", "cn-southwest-3", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3",
    "ap-southeast-4", "af-south-1", "af-north-1", "la-south-2", "la-north-2", "sa-brazil-1", "tr-west-1",
    "me-east-1"})
#: A ModelArts flavor id: ``modelarts.vm.cpu.8u``, ``modelarts.p3.large.public``, ``modelarts.pool.visual.xlarge``.
FLAVOR_RE = re.compile(r"^modelarts\.[a-z0-9]+(?:[._-][a-z0-9]+)+$")
#: An OBS URL (``obs://bucket/path``): a bucket name is 3 to 63 lower-case letters, digits, hyphens and periods.
OBS_URL_RE = re.compile(r"^obs://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:/.*)?$")


def attempt_job_name(name: str, run_key: str, attempt: int) -> str:
    """The training job name of one attempt: ``<name, at most 40 chars>-<8 hex of run_key>-a<attempt>``, unique per
    task instance and attempt (``run_key``: the task instance's labels, joined) and at most 64 characters."""
    digest = hashlib.sha256(run_key.encode()).hexdigest()[:8]
    return f"{name[:NAME_PREFIX_CHARS]}-{digest}-a{attempt}"


def job_retry_problems(value: Any) -> list[SpecError]:
    """Problems of ``job_retry_num`` (None: ModelArts' fault tolerance off)."""
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int) or not JOB_RETRY_MIN <= value <= JOB_RETRY_MAX:
        return [SpecError("job_retry_num", f"{value!r} is not an integer from {JOB_RETRY_MIN} to {JOB_RETRY_MAX} "
                                           f"(ModelArts' '{JOB_RETRY_ANNOTATION}'; None turns its re-issues off)")]
    return []


def _text_map_problems(field: str, value: Any) -> list[SpecError]:
    if not isinstance(value, Mapping):
        return [SpecError(field, f"{value!r} is not a dict of strings")]
    bad = [k for k, v in value.items() if not isinstance(k, str) or not k or not isinstance(v, str)]
    return [SpecError(field, f"entry {k!r} is not a non-empty string name with a string value")
            for k in bad[:3]]


def validate_training_job(*, name: Any, region: Any, flavor_id: Any, node_count: Any, command: Any,
                          image_url: Any, code_dir: Any, boot_file: Any, engine: Any, pool_id: Any,
                          parameters: Any, environments: Any, annotations: Any, job_retry_num: Any,
                          checkpoint_dir: Any, labels: Any, fallbacks: Sequence[Any] = (),
                          fallback_problems: Sequence[SpecError] = ()) -> None:
    """Check an operator's training job arguments before anything is submitted.

    Raises:
        SpecError: every problem at once, each naming the argument, the value and the fix.
    """
    problems: list[SpecError] = list(fallback_problems)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", name):
        problems.append(SpecError("name", f"{name!r} must be 1 to 40 letters, digits, '-' or '_' (each attempt's job "
                                          "is named <name>-<run hash>-a<attempt>, at most 64 characters)"))
    if region is not None and region not in REGIONS:
        problems.append(SpecError("region", f"{region!r} is not a ModelArts region; one of "
                                            f"{', '.join(sorted(REGIONS))} (or None: the connection's)"))
    if not isinstance(flavor_id, str) or not FLAVOR_RE.match(flavor_id):
        problems.append(SpecError("flavor_id", f"{flavor_id!r} is not a ModelArts flavor id, e.g. "
                                               "'modelarts.vm.cpu.8u' (list them: show_training_job_flavors)"))
    if isinstance(node_count, bool) or not isinstance(node_count, int) or node_count < 1:
        problems.append(SpecError("node_count", f"{node_count!r} is not a positive integer"))
    custom = command is not None or image_url is not None
    preset = code_dir is not None or boot_file is not None or engine is not None
    if custom and preset:
        problems.append(SpecError("command", "give a custom image (command and image_url) or a preset engine "
                                             "(code_dir, boot_file and engine), not both"))
    elif custom and not (isinstance(command, str) and command.strip() and isinstance(image_url, str)
                         and image_url.strip()):
        problems.append(SpecError("command", "a custom image job needs both a command and an image_url "
                                             "(ModelArts.2806: 'Custom image jobs command and engine.url cannot be "
                                             "empty')"))
    elif preset and not (isinstance(code_dir, str) and isinstance(boot_file, str) and isinstance(engine, Mapping)):
        problems.append(SpecError("code_dir", "a preset engine job needs code_dir, boot_file (OBS paths) and engine "
                                              "(a dict: engine_id, or engine_name and engine_version)"))
    elif not custom and not preset:
        problems.append(SpecError("command", "give command and image_url (a custom image) or code_dir, boot_file "
                                             "and engine (a preset engine)"))
    if pool_id is not None and (not isinstance(pool_id, str) or not pool_id.strip()):
        problems.append(SpecError("pool_id", f"{pool_id!r} is not a resource pool id (or None: the public pool)"))
    if parameters is not None:
        problems.extend(_text_map_problems("parameters", parameters))
    if environments is not None:
        problems.extend(_text_map_problems("environments", environments))
    if annotations is not None:
        problems.extend(_text_map_problems("annotations", annotations))
        if isinstance(annotations, Mapping):
            problems.extend(SpecError("annotations", f"{key!r} is the provider's: use job_retry_num")
                            for key in OWN_ANNOTATIONS & set(annotations))
    problems.extend(job_retry_problems(job_retry_num))
    if not isinstance(checkpoint_dir, str) or not (OBS_URL_RE.match(checkpoint_dir)
                                                   or checkpoint_dir.startswith("/")):
        problems.append(SpecError("checkpoint_dir", f"{checkpoint_dir!r} is not an OBS URL (obs://bucket/path; a local "
                                                    "absolute path only where the nodes share a disk, as the "
                                                    "emulator's do): new attempts resume from the checkpoints "
                                                    "written there"))
    if isinstance(labels, Mapping):
        problems.extend(SpecError("labels", f"{k!r} is not a label key (lower-case letters, digits, '_' and '-')")
                        for k in labels if not isinstance(k, str) or not LABEL_KEY_RE.match(k))
    elif labels is not None:
        problems.append(SpecError("labels", f"{labels!r} is not a dict"))
    for i, fallback in enumerate(fallbacks):
        changes = fallback.changes()
        other = sorted(set(changes) - {"flavor_id", "pool_id"})
        if other:
            problems.append(SpecError(f"fallbacks[{i}]", f"{', '.join(other)} do not apply to a ModelArts job: a "
                                                         "fallback names another flavor_id or pool_id (a region "
                                                         "has its own project id: run another task there)"))
        flavor = changes.get("flavor_id")
        if flavor is not None and not FLAVOR_RE.match(str(flavor)):
            problems.append(SpecError(f"fallbacks[{i}].flavor_id", f"{flavor!r} is not a ModelArts flavor id"))
    if problems:
        raise SpecError.of_many(problems)


def build_training_job(*, job_name: str, description: str | None, workspace_id: str | None, flavor_id: str,
                       node_count: int, pool_id: str | None, command: str | None, image_url: str | None,
                       code_dir: str | None, boot_file: str | None, engine: Mapping[str, Any] | None,
                       parameters: Mapping[str, str] | None, environments: Mapping[str, str],
                       inputs: Sequence[Mapping[str, Any]] | None, outputs: Sequence[Mapping[str, Any]] | None,
                       annotations: Mapping[str, str] | None, job_retry_num: int | None) -> dict[str, Any]:
    """The ``Job`` body (a dict in the API's JSON shape) of one attempt; ``environments`` already holds the
    attempt's ``RESILIENT_*`` variables."""
    meta: dict[str, Any] = {"name": job_name}
    if description:
        meta["description"] = description
    if workspace_id:
        meta["workspace_id"] = workspace_id
    notes = dict(annotations or {})
    if job_retry_num:
        notes[JOB_RETRY_ANNOTATION] = str(job_retry_num)
    if notes:
        meta["annotations"] = notes
    algorithm: dict[str, Any] = {"environments": dict(environments)}
    if command is not None:
        algorithm["command"] = command
        algorithm["engine"] = {"image_url": image_url}
    else:
        algorithm.update({"code_dir": code_dir, "boot_file": boot_file, "engine": dict(engine or {})})
    if parameters:
        algorithm["parameters"] = [{"name": k, "value": v} for k, v in parameters.items()]
    if inputs:
        algorithm["inputs"] = [dict(i) for i in inputs]
    if outputs:
        algorithm["outputs"] = [dict(o) for o in outputs]
    resource: dict[str, Any] = {"flavor_id": flavor_id, "node_count": node_count}
    if pool_id:
        resource["pool_id"] = pool_id
    return {"kind": "job", "metadata": meta, "algorithm": algorithm, "spec": {"resource": resource}}


__all__ = [
    "FLAVOR_RE",
    "JOB_RETRY_ANNOTATION",
    "OBS_URL_RE",
    "REGIONS",
    "attempt_job_name",
    "build_training_job",
    "job_retry_problems",
    "validate_training_job",
]
