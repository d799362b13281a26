"""Cloud TPU workload specs: node ids, the startup script that runs the workload under the worker runner.

Pure (no Airflow, no Google imports). The startup script runs at every boot of every worker VM (Compute Engine,
"About startup scripts", https://cloud.google.com/compute/docs/instances/startup-scripts):
it exports the attempt's ``RESILIENT_*`` variables (see :mod:`.vertex`), runs the user's ``setup_script``,
writes the stdlib worker runner (:mod:`..worker.runner`) to a temporary file and executes the user's
command under it, so the command is restarted in place on non-permanent exits (up to 5 times, as AI Platform
Training restarts a worker: "Understanding the AI Platform Training service")
and every worker reports status, exit code, restarts, heartbeat and step through guest attributes.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from .catalog import catalog, closest, extra
from .common import (
    PROJECT_RE,
    SpecError,
    checkpoint_dir_problems,
    label_problems,
    location_problems,
    seconds_problems,
    service_account_problems,
)
from .preflight import preflight_of

NODE_ID_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
ZONE_RE = re.compile(r"^[a-z]+(?:-[a-z]+)+\d+-[a-z]$")
RUNTIME_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
#: An environment variable name the startup script can export: a shell identifier (POSIX: letters, digits
#: and ``_``, not starting with a digit). Anything else would be pasted into the script as code.
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_problems(env: Mapping[str, object]) -> list[str]:
    """What is wrong with ``env`` for a startup script, one message per bad entry, naming the key and the
    fix but never the value (it may be a secret); empty when every key is a shell identifier and every
    value a string."""
    problems = []
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_KEY_RE.match(key):
            problems.append(f"env[{key!r}]: not a shell variable name (letters, digits and '_', not starting "
                            "with a digit); it would be run as code in the startup script")
        elif not isinstance(value, str):
            problems.append(f"env[{key!r}]: the value must be a string, got {type(value).__name__} "
                            "(quote numbers: '8', not 8)")
    return problems
HEREDOC = "RESILIENT_RUNNER_EOF"
#: A Secret Manager secret (``projects/P/secrets/S``) or one of its versions (``.../versions/3``, ``latest``).
SECRET_RE = re.compile(r"^projects/[a-z0-9-]+/secrets/[A-Za-z0-9_-]{1,255}(?:/versions/(?:latest|[1-9][0-9]*))?$")


def secret_version(reference: str) -> str:
    """The secret version a ``secret_env`` value names: ``projects/P/secrets/S`` means its ``latest``."""
    return reference if "/versions/" in reference else f"{reference}/versions/latest"


def node_id_for(base: str | None, dag_id: str, task_id: str, run_id: str, map_index: int, attempt: int) -> str:
    """The node id of an attempt: ``<base>-a<attempt>``, ``base`` defaulting to the DAG and task names plus a
    hash of the run (deterministic, so a retried task finds its node by name)."""
    if not base:
        stem = re.sub(r"[^a-z0-9-]", "-", f"{dag_id}-{task_id}".lower()).strip("-")[:40] or "resilient"
        if not stem[0].isalpha():
            stem = f"r-{stem}"[:40]
        digest = hashlib.sha256(f"{run_id}/{map_index}".encode()).hexdigest()[:8]
        base = f"{stem}-{digest}"
    return f"{base}-a{attempt}"


def queued_resource_name(node_name: str) -> str:
    """The queued resource the operator requests a node through: same project, zone and id
    (``projects/P/locations/Z/nodes/N`` -> ``projects/P/locations/Z/queuedResources/N``)."""
    return node_name.replace("/nodes/", "/queuedResources/")


def startup_script(*, command: str | Sequence[str], env: Mapping[str, str], setup_script: str | None,
                   runner_source: str, max_restarts: int, checkpoint_dir: str,
                   heartbeat_seconds: float = 10.0, secret_env: Mapping[str, str] | None = None,
                   runner_args: Sequence[str] = (), helper_source: str = "") -> str:
    """The ``startup-script`` metadata of a node for one attempt (bash). ``secret_env`` (``NAME`` -> Secret
    Manager secret version, :func:`secret_version`) goes to the runner as ``--secret-env``: the script holds
    the secrets' names, never their values (the runner reads them on the VM). ``runner_args``: more runner
    options (the preflight checks, :meth:`~.preflight.Preflight.runner_args`), quoted for the shell.
    ``helper_source``: the workload's checkpoint-request helper (:mod:`..worker.checkpoint_request`), written as
    ``resilient_checkpoint.py`` into a directory put first on the command's ``PYTHONPATH``.

    Raises:
        ValueError: an ``env`` key that is not a shell identifier or a value that is not a string
            (:func:`env_problems`; the message never holds a value), or a runner source holding the heredoc
            marker.
    """
    if problems := env_problems(env):
        raise ValueError("; ".join(problems))
    if HEREDOC in runner_source or HEREDOC in helper_source:
        raise ValueError(f"the runner or helper source contains the heredoc marker {HEREDOC}")
    exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in env.items())
    secrets = "".join(f"\n    --secret-env {shlex.quote(f'{k}={secret_version(v)}')} \\"
                      for k, v in (secret_env or {}).items())
    cmd = command if isinstance(command, str) else " ".join(shlex.quote(c) for c in command)
    extra = f"\n    {' '.join(shlex.quote(a) for a in runner_args)} \\" if runner_args else ""
    helper = f"""RESILIENT_HELPERS="$(mktemp -d -t resilient-helpers-XXXXXX)"
cat > "$RESILIENT_HELPERS/resilient_checkpoint.py" <<'{HEREDOC}'
{helper_source}
{HEREDOC}
export PYTHONPATH="$RESILIENT_HELPERS${{PYTHONPATH:+:$PYTHONPATH}}"
""" if helper_source else ""
    return f"""#!/bin/bash
# Written by airflow-provider-resilient: runs at every boot of every worker VM.
{exports}
{setup_script or ''}
{helper}RESILIENT_RUNNER="$(mktemp -t resilient-runner-XXXXXX.py)"
cat > "$RESILIENT_RUNNER" <<'{HEREDOC}'
{runner_source}
{HEREDOC}
exec python3 "$RESILIENT_RUNNER" --max-restarts {int(max_restarts)} --heartbeat-seconds {float(heartbeat_seconds)} \\
    --checkpoint-dir {shlex.quote(checkpoint_dir)} \\{extra}{secrets}
    -- bash -c {shlex.quote(cmd)}
"""


#: The metadata attribute a spare node's startup script waits for (:func:`spare_startup_script`): the startup script
#: of the attempt that takes the node, which the operator writes with UpdateNode.
ATTEMPT_SCRIPT_ATTRIBUTE = "resilient-attempt-script"


def spare_startup_script(poll_seconds: float = 2.0) -> str:
    """The ``startup-script`` of a spare node (:mod:`..supervisor.spare`), run at every boot of every worker VM: it
    reads the node's metadata attribute :data:`ATTEMPT_SCRIPT_ATTRIBUTE` from the metadata server (Compute Engine,
    "About VM metadata", https://cloud.google.com/compute/docs/metadata/overview: ``GET
    /computeMetadata/v1/instance/attributes/<key>`` with ``Metadata-Flavor: Google``; ``GCE_METADATA_HOST`` when
    set) every ``poll_seconds`` (> 0) until the operator has written it, then runs it with bash: from then on the
    node is the attempt's, and a reboot (a repair) finds the script at once.

    Raises:
        ValueError: ``poll_seconds`` is not a positive number.
    """
    if isinstance(poll_seconds, bool) or not isinstance(poll_seconds, int | float) or not poll_seconds > 0:
        raise ValueError(f"poll_seconds={poll_seconds!r}: give a positive number of seconds")
    url = ('"http://${GCE_METADATA_HOST:-metadata.google.internal}/computeMetadata/v1/instance/attributes/'
           f'{ATTEMPT_SCRIPT_ATTRIBUTE}"')
    return f"""#!/bin/bash
# Written by airflow-provider-resilient: a spare node. It waits until an attempt takes it (metadata attribute
# {ATTEMPT_SCRIPT_ATTRIBUTE}, written by the operator), then runs that attempt's startup script.
RESILIENT_ATTEMPT_SCRIPT="$(mktemp -t resilient-attempt-XXXXXX.sh)"
until curl -sf --noproxy '*' -H 'Metadata-Flavor: Google' -o "$RESILIENT_ATTEMPT_SCRIPT" {url}; do
  sleep {float(poll_seconds):g}
done
exec bash "$RESILIENT_ATTEMPT_SCRIPT"
"""


#: The largest slice of each family (its size unit: TensorCores for v2-v5p, chips for v5e/v6e), from the Cloud
#: TPU documentation (:mod:`.catalog`): a v2 pod has 512 TensorCores, v3 2048, v4 4096 chips (8192 TensorCores), v5p
#: 8960 chips, v5e (API name ``v5litepod``) and v6e 256 chips.
MAX_SLICE: dict[str, int] = {name: family.largest for name, family in catalog().tpu_families.items()}
_TYPE_RE = re.compile(rf"^(?P<family>{'|'.join(sorted(MAX_SLICE, key=len, reverse=True))})-(?P<size>\d+)$")


#: The most slices one multislice group may have here (Cloud TPU's own limit depends on the quota).
MAX_SLICES = 64


def worker_count(accelerator_type: str) -> int:
    """Worker VMs (hosts) of ``accelerator_type``, e.g. 4 for ``v4-32``. The one table of it:
    v2, v3, v4 and v5p types count TensorCores (v2/v3) or chips x 2 (v4, v5p): 8 per host, so
    ``v4-8`` has 1 worker VM, ``v4-16`` 2, ``v4-32`` 4. v5e (``v5litepod-N``) and v6e (``v6e-N``) count chips:
    up to 8 chips fit one host (``v5litepod-8``: 1 VM), larger slices use 4-chip hosts (``v5litepod-16``: 4).
    No slice is larger than its family's pod (:data:`MAX_SLICE`).


    Raises:
        ValueError: for a name that is not a TPU accelerator type (``v4-12`` is not one either).
    """
    match = _TYPE_RE.match(accelerator_type) if isinstance(accelerator_type, str) else None
    if not match:
        raise ValueError(f"{accelerator_type!r} is not a TPU accelerator type like 'v4-8' or 'v5litepod-16'")
    family, size = match["family"], int(match["size"])
    if size > MAX_SLICE[family]:
        raise ValueError(f"{accelerator_type!r} is larger than the largest {family} slice, "
                         f"{family}-{MAX_SLICE[family]}")
    sizes = catalog().tpu_families[family]
    if not sizes.offers(size):
        raise ValueError(f"{accelerator_type!r} is not a TPU slice size Google offers: {family} comes in "
                         + (f"sizes {', '.join(map(str, sizes.sizes))}" if sizes.sizes is not None else
                            f"multiples of 8 up to {sizes.largest}"))
    if family in ("v5litepod", "v6e"):
        if size in (1, 4, 8):
            return 1
        if size % 4 == 0 and size >= 16:
            return size // 4
    elif size % 8 == 0 and size >= 8:
        return size // 8
    raise ValueError(f"{accelerator_type!r} is not a TPU slice size Google offers")


def chips_per_host(accelerator_type: str) -> int:
    """TPU chips on each worker VM of ``accelerator_type`` -- what the runner's ``tpu-check`` expects to see:
    4 on v2, v3, v4 and v5p hosts (v2/v3 count 8 TensorCores per host, 2 per chip; v4/v5p sizes count 2
    TensorCores per chip), and on v5e / v6e the slice's chips on a single host (1, 4 or 8) and 4 per host above.

    Raises:
        ValueError: as :func:`worker_count`.
    """
    workers = worker_count(accelerator_type)
    family, size = accelerator_type.rsplit("-", 1)
    if family in ("v5litepod", "v6e"):
        return int(size) // workers
    return 4


#: Cloud TPU zones (:mod:`.catalog`, from cloud.google.com/tpu/docs/regions-zones), each with the accelerator types
#: and runtime versions it offers. A zone Google adds later -- or a type Google now offers in a zone -- is accepted
#: when the zone is named in ``RESILIENT_EXTRA_ZONES`` (comma-separated) -- the escape hatch; a runtime version
#: Google adds goes in ``RESILIENT_EXTRA_RUNTIME_VERSIONS``.
TPU_ZONES: frozenset[str] = frozenset(catalog().tpu_zones)
#: The Fallback fields a TPU run can use: the others are Vertex AI's.
TPU_FALLBACK_FIELDS = ("zone", "accelerator_type")


def _offered_anywhere(accelerator_type: str) -> bool:
    try:
        worker_count(accelerator_type)
    except ValueError:
        return False
    return True


def accelerator_in_zone_problems(field: str, accelerator_type: object, zone: object,
                                 extra_zones: str = "") -> list[SpecError]:
    """``accelerator_type`` as a Cloud TPU type (:func:`worker_count`) offered in ``zone`` (:mod:`.catalog`); a zone
    named in ``extra_zones`` (or not a catalog zone: :func:`~.common.location_problems` says so) takes any type."""
    try:
        worker_count(accelerator_type)  # type: ignore[arg-type]  # it refuses a non-string itself
    except ValueError as exc:
        return [SpecError(field, str(exc))]
    assert isinstance(accelerator_type, str)
    if not isinstance(zone, str) or zone not in TPU_ZONES or zone in extra("zone", extra_zones):
        return []
    if catalog().zone_offers(zone, accelerator_type):
        return []
    offered = catalog().tpu_zones[zone]
    families = ", ".join(f"{f} ({'all sizes' if sizes is None else ', '.join(f'{f}-{n}' for n in sizes)})"
                         for f, sizes in offered.items()) or "none of the families this provider knows"
    elsewhere = sorted(z for z in TPU_ZONES if catalog().zone_offers(z, accelerator_type))
    return [SpecError(field, f"{accelerator_type!r} is not offered in {zone} (it offers {families}); "
                             f"{accelerator_type} is offered in {', '.join(elsewhere) or 'no zone'} (Cloud TPU, "
                             "\"TPU regions and zones\"); if Google offers it there now, name the zone in "
                             "RESILIENT_EXTRA_ZONES")]


def runtime_version_problems(runtime_version: object, zone: object, extra_zones: str = "",
                             extra_runtime_versions: str | None = None) -> list[SpecError]:
    """``runtime_version`` as a TPU VM software version (:mod:`.catalog`) offered in ``zone`` (with one of the
    families the zone offers), or named in ``extra_runtime_versions`` (comma-separated; None: the
    ``RESILIENT_EXTRA_RUNTIME_VERSIONS`` environment variable)."""
    if not isinstance(runtime_version, str) or not RUNTIME_RE.match(runtime_version):
        return [SpecError("runtime_version", f"{runtime_version!r} is not a TPU VM image name like "
                                             "'tpu-ubuntu2204-base'")]
    known = catalog().runtime_versions
    if runtime_version in extra("runtime_version", extra_runtime_versions):
        return []
    if runtime_version not in known:
        return [SpecError("runtime_version", f"{runtime_version!r} is not a TPU software version"
                                             f"{closest(runtime_version, known)} (Cloud TPU, \"TPU software "
                                             "versions\"); if Google has just added it, name it in "
                                             "RESILIENT_EXTRA_RUNTIME_VERSIONS (comma-separated)")]
    if not isinstance(zone, str) or zone not in TPU_ZONES or zone in extra("zone", extra_zones):
        return []
    offered = catalog().runtime_versions_in(zone)
    if runtime_version in offered:
        return []
    return [SpecError("runtime_version", f"{runtime_version!r} runs on {', '.join(known[runtime_version].families)}, "
                                         f"which {zone} does not offer; there: "
                                         f"{', '.join(offered[:6]) or 'none'}{', ...' if len(offered) > 6 else ''}")]


def validate_tpu_workload(*, project_id: object, zone: object, accelerator_type: object, runtime_version: object,
                          command: object, checkpoint_dir: object, setup_script: object, env: object,
                          tpu_node_id: object, labels: object, spot: object, reserved: object,
                          queued_resource: object, keep_node: object, valid_until_duration: object,
                          max_worker_restarts: object, heartbeat_seconds: object, hang_timeout: object,
                          startup_timeout: object, fallbacks: Sequence[Any], extra_zones: str = "",
                          secret_env: object = None, preflight: object = True,
                          maintenance_policy: object = "ride_out", maintenance_lead_seconds: object = 600.0,
                          maintenance_move_seconds: object = 600.0, slices: object = 1,
                          deferrable: object = False, expect_steps: object = False, service_account: object = None,
                          checkpoint_on_notice: object = True, extra_runtime_versions: str | None = None,
                          fallback_problems: Sequence[SpecError] = ()) -> None:
    """Check the TPU operator's arguments before any node is requested, types first, so that a bad value is
    never a raw ``TypeError`` (nor a 28 KB error holding the node's startup script) later. The accelerator type and
    the runtime version must be offered in the zone (:mod:`.catalog`; a zone named in ``extra_zones`` takes any);
    ``extra_runtime_versions``: runtime versions Google added after this release (comma-separated; None: the
    ``RESILIENT_EXTRA_RUNTIME_VERSIONS`` environment variable). ``fallback_problems``: what is wrong with the shape
    of the ``fallbacks`` argument (:func:`~.fallbacks.fallbacks_of`), reported with the rest.

    Raises:
        SpecError: every problem, one per line (field, value, fix; never an ``env`` value); ``field`` names the
            first.
    """
    problems: list[SpecError] = []
    if not isinstance(project_id, str) or not PROJECT_RE.match(project_id):
        problems.append(SpecError("project_id", f"{project_id!r} is not a Google Cloud project id"))
    problems += location_problems("zone", zone, ZONE_RE, TPU_ZONES, "Cloud TPU zone", "us-central2-b",
                                  "RESILIENT_EXTRA_ZONES", extra_zones)
    problems += accelerator_in_zone_problems("accelerator_type", accelerator_type, zone, extra_zones)
    problems += runtime_version_problems(runtime_version, zone, extra_zones, extra_runtime_versions)
    problems += service_account_problems(service_account)
    problems += list(fallback_problems)
    if isinstance(command, str):
        ok = bool(command.strip())
    else:
        ok = isinstance(command, list | tuple) and bool(command) and all(isinstance(c, str) for c in command)
    if not ok:
        problems.append(SpecError("command", f"{command!r}: give the training command run on every worker, a "
                                             "shell string or a list of strings"))
    problems += checkpoint_dir_problems(checkpoint_dir, required=True)
    if setup_script is not None and not isinstance(setup_script, str):
        problems.append(SpecError("setup_script", "give a shell script as a string, got "
                                                  f"{type(setup_script).__name__}"))
    if not isinstance(env, Mapping):
        problems.append(SpecError("env", f"give a dict of variable names to values, got {type(env).__name__}"))
    else:
        problems += [SpecError(line.split("]: ", 1)[0] + "]", "", line=line) for line in env_problems(env)]
    if secret_env is not None and not isinstance(secret_env, Mapping):
        problems.append(SpecError("secret_env", f"give a dict of variable names to Secret Manager secrets, got "
                                                f"{type(secret_env).__name__}"))
    for key, reference in (secret_env.items() if isinstance(secret_env, Mapping) else ()):
        if not isinstance(key, str) or not ENV_KEY_RE.match(key):
            problems.append(SpecError(f"secret_env[{key!r}]", "not a shell variable name (letters, digits and '_', "
                                                              "not starting with a digit)"))
        elif isinstance(env, Mapping) and key in env:
            problems.append(SpecError(f"secret_env[{key!r}]", "is in env too: give it in one of them"))
        if not isinstance(reference, str) or not SECRET_RE.match(reference):
            problems.append(SpecError(f"secret_env[{key!r}]", f"{reference!r}: give a Secret Manager secret, "
                                                              "'projects/P/secrets/S' or '.../versions/N'"))
    if tpu_node_id is not None and not (isinstance(tpu_node_id, str) and NODE_ID_RE.match(f"{tpu_node_id}-a99")):
        problems.append(SpecError("tpu_node_id", f"{tpu_node_id!r}: lowercase letters, digits and '-', starting with "
                                                 "a letter, at most 59 characters"))
    problems += label_problems(labels)
    for name, flag in (("spot", spot), ("reserved", reserved), ("queued_resource", queued_resource),
                       ("keep_node", keep_node), ("expect_steps", expect_steps),
                       ("checkpoint_on_notice", checkpoint_on_notice)):
        if not isinstance(flag, bool):
            problems.append(SpecError(name, f"{flag!r}: give True or False"))
    if spot is True and reserved is True:
        problems.append(SpecError("spot", "and reserved exclude each other: a node is spot (preemptible capacity) "
                                          "or from a reservation; set one"))
    problems += seconds_problems("valid_until_duration", valid_until_duration, optional=True)
    if max_worker_restarts is not None and (type(max_worker_restarts) is not int or max_worker_restarts < 0):
        problems.append(SpecError("max_worker_restarts", f"{max_worker_restarts!r}: give a whole number >= 0"))
    for name, value in (("heartbeat_seconds", heartbeat_seconds), ("hang_timeout", hang_timeout),
                        ("startup_timeout", startup_timeout)):
        problems += seconds_problems(name, value)
    for i, fallback in enumerate(fallbacks):
        for name in ("region", "machine_type", "accelerator_count", "strategy", "flavor_id", "pool_id"):
            if getattr(fallback, name, None) is not None:
                problems.append(SpecError(f"fallbacks[{i}].{name}", "does not apply to a TPU node: a TPU fallback "
                                                                    "changes zone and/or accelerator_type"))
        if fallback.zone is not None:
            problems += location_problems(f"fallbacks[{i}].zone", fallback.zone, ZONE_RE, TPU_ZONES,
                                          "Cloud TPU zone", "us-central2-b", "RESILIENT_EXTRA_ZONES", extra_zones)
        if fallback.zone is not None or fallback.accelerator_type is not None:
            if any(p.field == f"fallbacks[{i}].zone" for p in problems):
                continue  # not a TPU zone: said already
            changed = fallback.accelerator_type is not None
            if not changed and not (isinstance(accelerator_type, str) and _offered_anywhere(accelerator_type)):
                continue  # the node's own type is refused above
            problems += accelerator_in_zone_problems(
                f"fallbacks[{i}].{'accelerator_type' if changed else 'zone'}",
                fallback.accelerator_type if changed else accelerator_type,
                fallback.zone if fallback.zone is not None else zone, extra_zones)
            if fallback.zone is not None and not runtime_version_problems(runtime_version, zone, extra_zones,
                                                                          extra_runtime_versions):
                problems += [SpecError(f"fallbacks[{i}].zone", str(p).split(": ", 1)[1] + " (a fallback keeps the "
                                                                                      "node's runtime_version)")
                             for p in runtime_version_problems(runtime_version, fallback.zone, extra_zones,
                                                               extra_runtime_versions)]
    try:
        preflight_of(preflight)
    except SpecError as exc:
        problems.append(exc)
    from ..supervisor.maintenance import MaintenancePolicy

    policies = [p.value for p in MaintenancePolicy]
    if maintenance_policy not in policies:
        problems.append(SpecError("maintenance_policy", f"{maintenance_policy!r}: give one of {', '.join(policies)} "
                                                        "(ride_out: wait out the event after the early checkpoint)"))
    for name, value, what in (("maintenance_lead_seconds", maintenance_lead_seconds,
                                "before a window to ask for a checkpoint; 0: never ask"),
                               ("maintenance_move_seconds", maintenance_move_seconds,
                                "what a move to a fresh node costs")):
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            problems.append(SpecError(name, f"{value!r}: give a number of seconds >= 0 ({what})"))
    if type(slices) is not int or not 1 <= slices <= MAX_SLICES:
        problems.append(SpecError("slices", f"{slices!r}: give a whole number of slices from 1 to {MAX_SLICES} "
                                            "(1: one node; more: a multislice group)"))
    elif slices > 1 and deferrable is True:
        problems.append(SpecError("slices", f"{slices} slices with deferrable=True: a multislice run is watched "
                                            "in the worker for now; set deferrable=False"))
    if problems:
        raise SpecError.of_many(problems)
