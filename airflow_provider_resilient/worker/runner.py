"""Worker runner: runs the training command on a Cloud TPU VM worker and keeps it going.

This file runs ON the worker VM, where ``airflow_provider_resilient`` is not installed: the TPU operator
inlines its text into the node's startup script and runs ``python3 runner.py [options] -- COMMAND``.
Rules of the file: standard library only, Python 3.8 syntax, nothing happens at import time
(``main()`` sits behind ``if __name__ == "__main__"``), so tests and the provider can import it. Its one import
of the package is :mod:`.protocol` (report keys and statuses, exit codes, the exit-status rule: the contract with
the provider), which ``runner_source()`` inlines: the text it ships is one standalone file. In the source tree,
run it as ``python3 -m airflow_provider_resilient.worker.runner``.

Command line::

    python3 runner.py [--preflight] [--hosts H1,H2] [--dns-timeout S] [--root-dir DIR]
                      [--min-root-free-bytes N] [--min-shm-free-bytes N] [--cache-dir DIR]
                      [--min-cache-free-bytes N] [--checkpoint-dir DIR] [--min-open-files N]
                      [--infiniband auto|yes|no] [--expect-gpus N] [--expect-tpu-chips N]
                      [--hardware-check-seconds S]
                      [--max-restarts N] [--restart-delay S] [--grace-seconds S]
                      [--namespace NS] [--heartbeat-seconds S] [--step-pattern REGEX]
                      [--checkpoint-signal NAME] [--hang-seconds S] [--start-seconds S]
                      -- COMMAND [ARGS...]

Theory of operation:

1. Preflight (``--preflight``, the environment pre-check of Huawei Cloud ModelArts' "Training Fault Tolerance
   Check", https://support.huaweicloud.com/intl/en-us/develop-modelarts/modelarts_trouble_0003.html): every
   check item of that page under its log keyword -- ``dns``, ``disk-size root``, ``disk-size shm``, ``disk-size
   cache``, ``ulimit`` (its InfiniBand limits when InfiniBand is used), ``gpu-check`` -- plus ours,
   ``checkpoint-dir`` and ``tpu-check`` (the TPU chips are visible); see :func:`preflight_checks` for each item's
   rule. Each item prints ``preflight <ok|failed|skipped>: item <item>: <detail>``; as on that page, search the
   logs for the keyword "item" to find a failed check. Any failure ends the runner with
   :data:`PREFLIGHT_EXIT_CODE` before the command runs, so the operator isolates the node: the job is re-created
   on new nodes.
1b. Hardware check while running (the page's periodic hardware check): every
   ``--hardware-check-seconds`` the device items run again; on a failure the runner reports guest attribute
   ``hardware`` = ``faulty: <item>: <detail>``, sends the command SIGTERM (it may checkpoint) and ends
   ``failed`` with failure class ``node_unhealthy``. When the command exits non-zero the device items run
   at once too: on faulty hardware it is never restarted in place (the page's scenario 3, job failed and
   hardware faulty: isolate and re-issue); on sound hardware the exit status decides (scenario 4).
2. Run. The command runs as a child in its own session / process group, with the environment passed
   through plus ``RESILIENT_WORKER_RESTARTS=<restarts so far>`` (and ``PYTHONUNBUFFERED=1`` unless
   already set, so step lines arrive as they are printed). Its stdout is read line by line, copied to ours
   (flushed) and matched against ``--step-pattern``; its stderr is copied to ours too, its last line kept for
   the ``error`` report.
2b. Liveness watchdog (``--hang-seconds``, off by default). A command that writes no ``--step-pattern`` line for
   ``--hang-seconds`` -- counted from its last step line, or from its start with ``--start-seconds`` (the start-up
   and the checkpoint's restore; 0, the default: no watch before the first step line) -- hangs: a collective that
   never returns, a deadlocked data loader. The runner logs ``hang: no step line for ...``, reports guest attribute
   ``hang``, sends the command's process group SIGABRT (a Python workload with ``faulthandler`` enabled prints every
   thread's stack) and SIGKILL ``min(--grace-seconds, --hang-seconds / 10)`` seconds later, and counts the command's
   end as an abort, :data:`HANG_EXIT_CODE` (134 = 128 + SIGABRT) whatever signal ended it -- as PyTorch's NCCL
   watchdog tears down a process whose collective timed out (PyTorch, "PYTORCH ProcessGroupNCCL Environment
   Variables", ``TORCH_NCCL_ASYNC_ERROR_HANDLING``,
   https://pytorch.org/docs/stable/torch_nccl_environment_variables.html). 134 is a ``transient_crash``: on a Cloud
   TPU VM the runner restarts the command in place (3); on Vertex AI (``--max-restarts 0``) the container exits 134,
   which Vertex AI's "Understand the custom training service" names potentially transient (SIGABRT, 6 or 134), and it
   retries the job. The runner's own process is not part of the hang, so it sees one in ``--hang-seconds`` instead of
   the provider's poll of the logs, and the platform restarts the command instead of the provider making a new job or
   node. A hang of the whole VM (the runner frozen too) is still the provider's ``hang_timeout`` to find.
3. Restart in place. The exit status is classified by :func:`classify_exit_status` of :mod:`.protocol`, the
   rule ``airflow_provider_resilient.policy.classify.classify_exit_status`` builds on (a test checks every code):
   6/134/11/139 -> ``transient_crash``; 78 -> ``preflight_failure``; 126/127/128 ->
   ``container_start_error``; SIGKILL/SIGTERM (137/143) -> ``worker_failure``; anything else ->
   ``permanent_user_error``. ``transient_crash`` and ``worker_failure`` are restarted after
   ``--restart-delay`` seconds, up to ``--max-restarts`` times (default 5), as AI Platform Training does
   ("Understanding the AI Platform Training service",
   https://cloud.google.com/ai-platform/training/docs/understanding-training-service): a worker exiting non-zero
   is restarted at once on the same VM, up to five restarts per worker, and a worker that fails because of a
   common error is treated as a permanent error (no restart). After the restarts are spent the job-level
   retries of the operator take over.
4. SIGTERM (maintenance or preemption notice: Cloud TPU, "Manage maintenance events with Cloud TPU Pods"; a Spot
   VM's preemption notice is an ACPI G2 Soft Off, the operating system's SIGTERM, and the ACPI G3 Mechanical Off
   follows 30 seconds later: Compute Engine, "Preemptible VM instances", preemption process,
   https://cloud.google.com/compute/docs/instances/preemptible#preemption-process, and the Compute Engine API's
   ``Scheduling.skipGuestOsShutdown``: "30 seconds for Spot VMs"). First the runner passes a checkpoint
   request ``notice-<VM time>`` to the command as in 4b, reported as guest attributes ``notice_request`` and
   ``notice_ack`` (checkpoint on notice; ``--no-notice-checkpoint``: not),
   then it forwards SIGTERM to the child's process group so the workload can write a checkpoint (the helper
   ``resilient_checkpoint`` keeps a workload that has no SIGTERM handler of its own alive for that save), waits up
   to ``--grace-seconds`` (default 30), then SIGKILLs the group. It never restarts after SIGTERM and exits 143.

4b. Checkpoint requests (upcoming maintenance). With the heartbeat the runner reads the node's
   metadata attribute ``resilient-checkpoint-request`` (:data:`CHECKPOINT_REQUEST_ATTRIBUTE`, set by the
   operator with UpdateNode before a maintenance window). A value it has not passed on yet (a token) is
   written to the file ``$RESILIENT_CHECKPOINT_REQUEST_FILE`` of the command's environment, the command's
   process group gets ``--checkpoint-signal`` when one is given (e.g. ``USR1``; none by default: an
   unhandled SIGUSR1 ends a process) once the command has written a line to stdout (so its handler is in
   place), guest attribute ``checkpoint_request`` reports the token, and the log
   says ``checkpoint requested: <token>``. The workload saves at its next step and writes the token to
   ``$RESILIENT_CHECKPOINT_ACK_FILE`` (the helper ``resilient_checkpoint`` -- ``checkpoint_request.py``
   in the provider -- does both); the runner reports it as guest attribute ``checkpoint_ack``. A token
   acknowledged before a reboot is not passed on again.

5. Secrets (``--secret-env NAME=projects/P/secrets/S/versions/V``, repeatable). Before anything else the
   runner reads each Secret Manager secret version with the VM's service account -- an access token from
   the metadata server (``instance/service-accounts/default/token``), then ``GET
   <endpoint>/v1/<version>:access`` (endpoint ``$RESILIENT_SECRET_MANAGER_ENDPOINT``, default
   ``https://secretmanager.googleapis.com``) -- and puts its value in the command's environment as ``NAME``.
   The value is never written to the node's metadata, the startup script or any log; a secret that cannot
   be read ends the runner with status 1 (a permanent user error: a missing secret or a missing
   ``roles/secretmanager.secretAccessor`` grant is not fixed by a new node), naming the secret and the
   HTTP status.

Exit codes (the operator classifies them with the same policy):

* the child's status -- 0 on success; the status of a permanent failure; the last status once the
  restarts are spent. A child killed by signal ``n`` counts as ``128 + n`` (Python reports ``-n``).
  A command that cannot be started counts as 127 (not found), 126 (not executable) or 128 (other).
* :data:`PREFLIGHT_EXIT_CODE` (78, sysexits ``EX_CONFIG``) -- preflight failed, the command never ran.
* :data:`HANG_EXIT_CODE` (134 = 128 + SIGABRT) -- the watchdog (2b) aborted a hung command and no restart was left.
* :data:`TERMINATED_EXIT_CODE` (143 = 128 + SIGTERM) -- the runner received SIGTERM.
* :data:`USAGE_EXIT_CODE` (2) -- bad usage, e.g. no command after ``--``.

Reporting through guest attributes: when ``GCE_METADATA_HOST`` (``host[:port]``) is set, each value
is PUT as plain text to ``http://$GCE_METADATA_HOST/computeMetadata/v1/instance/guest-attributes/
<--namespace>/<key>`` with header ``Metadata-Flavor: Google`` (2 s timeout, proxies bypassed). A
reporting error never stops the runner; it prints one warning. Keys (namespace default ``resilient``):

* ``status``: ``preflight`` -> ``running`` -> (``restarting`` -> ``running``)* -> one of
  ``succeeded``, ``failed``, ``terminated``, ``preflight_failed``.
* ``exit_code``: on ``restarting``, the status of the child that just exited; at the end, the
  runner's own exit code (so ``classify_exit_status(exit_code)`` gives ``failure_class``).
* ``failure_class``: the class of the latest non-zero ``exit_code`` (``transient_crash``,
  ``worker_failure``, ``permanent_user_error``, ``container_start_error``, ``preflight_failure``).
* ``restarts``: restarts so far, written before each run.
* ``heartbeat``: the VM's clock (``time.time()``, :func:`vm_time`) as a float, every ``--heartbeat-seconds``
  (default 10) while running.
* ``step``: the latest training step, the first group of ``--step-pattern`` (default
  ``(?m)^\\s*step[ =:]+(\\d+)``) in the child's stdout; written with the heartbeat when it changed and
  after each run.
* ``worker_id``: ``$TPU_WORKER_ID``, when set.
* ``preflight``: ``failed: item <item>: <detail>``, the first preflight item that failed.
* ``error``: on a failed end, the last line the command wrote to stderr (a traceback's exception, e.g.
  ``_pickle.UnpicklingError: invalid load key``), at most 300 characters; the operator puts it in the failure.
* ``hardware``: ``faulty: <item>: <detail>`` once a device check failed (preflight or while running).
* ``hang``: ``no step line for <S> s after <step N | its start> (restarts so far: <n>)``, each time the watchdog
  (2b) aborted the command.
* ``checkpoint_request``: the checkpoint request token passed on to the command (4b).
* ``checkpoint_ack``: the token of the last request the command acknowledged after saving (4b).

Example: ``python3 runner.py --preflight --checkpoint-dir gs://b/ckpt -- python3 train.py`` on a
worker whose training segfaults once: status ``preflight``, ``running`` (restarts 0), exit_code 139
failure_class ``transient_crash`` status ``restarting``, ``running`` (restarts 1), ``succeeded``
(exit_code 0); the runner exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import IO

# -- the protocol shared with the provider (worker/protocol.py): report keys and statuses, exit codes, the
# exit-status rule, the checkpoint request and the command's environment. runner_source() ships this file with
# protocol.py's text in place of this import.
from .protocol import (
    CHECKPOINT_ACK_FILE_ENV,
    CHECKPOINT_ON_NOTICE_ENV,
    CHECKPOINT_REQUEST_ATTRIBUTE,
    CHECKPOINT_REQUEST_FILE_ENV,
    DEFAULT_NAMESPACE,
    DEFAULT_STEP_PATTERN,
    KEY_CHECKPOINT_ACK,
    KEY_CHECKPOINT_REQUEST,
    KEY_ERROR,
    KEY_EXIT_CODE,
    KEY_FAILURE_CLASS,
    KEY_HANG,
    KEY_HARDWARE,
    KEY_HEARTBEAT,
    KEY_NOTICE_ACK,
    KEY_NOTICE_REQUEST,
    KEY_PREFLIGHT,
    KEY_RESTARTS,
    KEY_STATUS,
    KEY_STEP,
    KEY_WORKER_ID,
    NODE_UNHEALTHY,
    NOT_EXECUTABLE_EXIT_CODE,
    NOT_FOUND_EXIT_CODE,
    NOTICE_TOKEN_PREFIX,
    PREFLIGHT_EXIT_CODE,
    RESTARTABLE_CLASSES,
    RESTARTS_ENV,
    RUNNER_START_TEXT,
    SECRET_EXIT_CODE,
    START_FAILED_EXIT_CODE,
    STATUS_FAILED,
    STATUS_PREFLIGHT,
    STATUS_PREFLIGHT_FAILED,
    STATUS_RESTARTING,
    STATUS_RUNNING,
    STATUS_SUCCEEDED,
    STATUS_TERMINATED,
    TERMINATED_EXIT_CODE,
    USAGE_EXIT_CODE,
    classify_exit_status,
)

# -- the metadata server and Secret Manager -------------------------------------------------------------

ATTRIBUTES_PATH = "/computeMetadata/v1/instance/attributes"
GUEST_ATTRIBUTES_PATH = "/computeMetadata/v1/instance/guest-attributes"
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
METADATA_HOST_ENV = "GCE_METADATA_HOST"
DEFAULT_METADATA_HOST = "metadata.google.internal"
REPORT_TIMEOUT_SECONDS = 2.0
SECRET_ENDPOINT_ENV = "RESILIENT_SECRET_MANAGER_ENDPOINT"
DEFAULT_SECRET_ENDPOINT = "https://secretmanager.googleapis.com"
WORKER_ID_ENV = "TPU_WORKER_ID"
#: The preflight items that look at the hardware itself (the rest look at the environment).
DEVICE_ITEMS = ("gpu-check", "tpu-check")

# -- defaults -------------------------------------------------------------------------------------------

DEFAULT_DNS_TIMEOUT_SECONDS = 10.0
DEFAULT_HARDWARE_CHECK_SECONDS = 60.0
DEFAULT_MIN_OPEN_FILES = 1024
DEFAULT_MAX_RESTARTS = 5
DEFAULT_RESTART_DELAY_SECONDS = 1.0
DEFAULT_GRACE_SECONDS = 30.0
DEFAULT_HEARTBEAT_SECONDS = 10.0
#: How often the main loop looks at the child and at the SIGTERM flag.
POLL_SECONDS = 0.05
#: The status a command aborted by the liveness watchdog counts as (128 + SIGABRT): a ``transient_crash``.
HANG_EXIT_CODE = 128 + signal.SIGABRT


def normalize_exit_status(returncode: int) -> int:
    """Python's ``returncode`` as a shell would report it: ``-n`` (killed by signal n) -> ``128 + n``."""
    return 128 - returncode if returncode < 0 else returncode


def _log(message: str) -> None:
    print("runner: " + message, file=sys.stderr, flush=True)


class GuestAttributes:
    """Writes guest attributes through the metadata server; does nothing when ``host`` is empty.

    ``put`` never raises: the first error prints a warning, later ones are silent.
    """

    def __init__(self, host: str | None, namespace: str = DEFAULT_NAMESPACE,
                 timeout: float = REPORT_TIMEOUT_SECONDS) -> None:
        host = (host or "").strip().rstrip("/")
        for scheme in ("http://", "https://"):
            if host.startswith(scheme):
                host = host[len(scheme):]
        self.host = host
        self.namespace = namespace
        self.timeout = timeout
        self._warned = False
        self._lock = threading.Lock()
        # The metadata server is link-local: never go through an http_proxy.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    @property
    def enabled(self) -> bool:
        return bool(self.host)

    def url(self, key: str) -> str:
        return f"http://{self.host}{GUEST_ATTRIBUTES_PATH}/{self.namespace}/{key}"

    def get(self, path: str) -> str | None:
        """GET ``/computeMetadata/v1/instance/<path>`` (an attribute, a guest attribute); None when it is not
        set, the server cannot be reached or reporting is off. Never raises."""
        if not self.enabled:
            return None
        request = urllib.request.Request(f"http://{self.host}/computeMetadata/v1/instance/{path}",
                                         headers={"Metadata-Flavor": "Google"})
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return str(response.read().decode("utf-8", "replace"))
        except Exception:
            return None

    def put(self, key: str, value: object) -> bool:
        """PUT ``str(value)`` as ``<namespace>/<key>``; True when the server accepted it."""
        if not self.enabled:
            return False
        request = urllib.request.Request(self.url(key), data=str(value).encode("utf-8"), method="PUT",
                                         headers={"Metadata-Flavor": "Google", "Content-Type": "text/plain"})
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                response.read()
            return True
        except Exception as exc:  # reporting must never stop the training
            with self._lock:
                warn, self._warned = not self._warned, True
            if warn:
                _log(f"warning: cannot write guest attribute {key} ({exc}); further errors are not shown")
            return False


# -- preflight ------------------------------------------------------------------------------------------


#: The thresholds of Huawei Cloud ModelArts' "Training Fault Tolerance Check" (what passing requires), in decimal
#: gigabytes: https://support.huaweicloud.com/intl/en-us/develop-modelarts/modelarts_trouble_0003.html
GB = 1000 ** 3
SEED_004_ROOT_BYTES = 32 * GB  # disk-size root: more than 32 GB free in the container's root
SEED_004_SHM_BYTES = 1 * GB  # disk-size shm: more than 1 GB free in /dev/shm
SEED_004_CACHE_BYTES = 32 * GB  # disk-size cache: more than 32 GB free in /cache
#: That page's ``ulimit`` item, checked when InfiniBand is used, in ``ulimit -a``'s units:
#: (name, resource module constant name, bytes per unit, must be greater than).
SEED_004_IB_LIMITS = (("max locked memory", "RLIMIT_MEMLOCK", 1024, 16000),
                      ("open files", "RLIMIT_NOFILE", 1, 1000000),
                      ("stack size", "RLIMIT_STACK", 1024, 8000),
                      ("max user processes", "RLIMIT_NPROC", 1, 1000000))
#: Where device files live (``/dev``); the emulator points it at a worker's own fake ``/dev``.
DEVICE_ROOT_ENV = "RESILIENT_DEVICE_ROOT"
#: Emulator only: JSON ``{"path": free bytes}`` that stands in for ``statvfs`` of those paths (an emulated
#: VM's disks; a real VM never sets it).
EMULATED_FREE_BYTES_ENV = "RESILIENT_EMULATED_FREE_BYTES"
#: Emulator only: a file holding the platform's time (epoch seconds) when the emulator runs on a manual clock
#: (``testing/emulator/clock.py``, time moves only when a test advances it): an emulated VM's clock, which the
#: heartbeat reads (:func:`vm_time`). A real VM never sets it: its clock is ``time.time()``.
EMULATED_CLOCK_ENV = "RESILIENT_EMULATED_CLOCK"
#: The hosts of a job, where the platform names them: TPU VMs (comma-separated), Vertex AI (JSON).
HOST_ENVS = ("TPU_WORKER_HOSTNAMES", "CLUSTER_SPEC", "TF_CONFIG")

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


def _gb(n: float) -> str:
    return f"{n / GB:.1f} GB"


def vm_time(environ: dict[str, str]) -> float:
    """The VM's clock in epoch seconds: ``time.time()``; on an emulated VM of a manual clock, the platform's
    time (:data:`EMULATED_CLOCK_ENV`; the real clock while that file cannot be read)."""
    path = environ.get(EMULATED_CLOCK_ENV)
    if path:
        with contextlib.suppress(OSError, ValueError), open(path) as clock:
            return float(clock.read())
    return time.time()


def _free_bytes(path: str, environ: dict[str, str]) -> int:
    emulated = environ.get(EMULATED_FREE_BYTES_ENV)
    if emulated:
        table = json.loads(emulated)
        if path in table:
            return int(table[path])
    return shutil.disk_usage(path).free


def job_hosts(environ: dict[str, str]) -> list[str]:
    """The host names of every worker of the job, from ``TPU_WORKER_HOSTNAMES`` (comma-separated) or the
    ``cluster`` of Vertex AI's ``CLUSTER_SPEC`` / ``TF_CONFIG`` (``host:port`` entries), without ports."""
    hosts: list[str] = []
    names = environ.get("TPU_WORKER_HOSTNAMES", "")
    hosts.extend(h.strip() for h in names.split(",") if h.strip())
    for key in ("CLUSTER_SPEC", "TF_CONFIG"):
        try:
            cluster = json.loads(environ.get(key) or "{}").get("cluster") or {}
        except (ValueError, AttributeError):
            continue
        for entries in cluster.values():
            for entry in entries if isinstance(entries, list) else []:
                host = str(entry).rsplit(":", 1)[0] if ":" in str(entry) else str(entry)
                hosts.append(host.strip("[]"))
    seen: list[str] = []
    for host in hosts:
        if host and host not in seen:
            seen.append(host)
    return seen


def _check_dns(hosts: list[str], timeout: float) -> tuple[str, str]:
    """The ``dns`` item: every host of the job resolves."""
    if not hosts:
        return SKIPPED, "the platform names no hosts (TPU_WORKER_HOSTNAMES, CLUSTER_SPEC, TF_CONFIG): one host"
    failures: dict[str, str] = {}

    def resolve(host: str) -> None:
        try:
            socket.getaddrinfo(host, None)
        except OSError as exc:
            failures[host] = str(exc)

    threads = [threading.Thread(target=resolve, args=(h,), daemon=True) for h in hosts]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for index, thread in enumerate(threads):
        host = hosts[index]
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            failures.setdefault(host, f"no answer within {timeout:g} s")
    if failures:
        return FAILED, "cannot resolve " + ", ".join(f"{h} ({w})" for h, w in sorted(failures.items()))
    return OK, "{} hosts resolve: {}".format(len(hosts), ", ".join(hosts))


def _check_disk(path: str, need: int, environ: dict[str, str], optional: bool = False) -> tuple[str, str]:
    if optional and not os.path.isdir(path) and path not in json.loads(environ.get(EMULATED_FREE_BYTES_ENV) or "{}"):
        return SKIPPED, f"{path} does not exist"
    try:
        free = _free_bytes(path, environ)
    except (OSError, ValueError) as exc:
        return FAILED, f"cannot stat {path}: {exc}"
    verdict = OK if free > need else FAILED
    return verdict, f"{_gb(free)} free in {path}, need > {_gb(need)}"


def _infiniband(mode: str, environ: dict[str, str]) -> bool:
    if mode != "auto":
        return mode == "yes"
    root = environ.get("RESILIENT_SYS_CLASS_INFINIBAND", "/sys/class/infiniband")
    try:
        return bool(os.listdir(root))
    except OSError:
        return False


def _check_ulimit(min_open_files: int, infiniband: bool) -> tuple[str, str]:
    """The ``ulimit`` item when InfiniBand is used (its four limits, in ``ulimit -a`` units); without it, ours:
    open files >= ``min_open_files``. An unlimited limit passes."""
    try:
        import resource
    except ImportError:  # not POSIX
        return SKIPPED, "resource limits not available on this system"
    wanted = [("open files", "RLIMIT_NOFILE", 1, min_open_files, ">=")] if not infiniband else [
        (name, constant, unit, above, ">") for name, constant, unit, above in SEED_004_IB_LIMITS]
    short, seen = [], []
    for name, constant, unit, bound, relation in wanted:
        soft = resource.getrlimit(getattr(resource, constant))[0]
        shown = "unlimited" if soft == resource.RLIM_INFINITY else str(soft // unit)
        seen.append(f"{name} {shown}")
        value = soft // unit
        if soft != resource.RLIM_INFINITY and (value < bound if relation == ">=" else value <= bound):
            short.append(f"{name} {shown}, need {relation} {bound}")
    context = "InfiniBand in use" if infiniband else "no InfiniBand"
    if short:
        return FAILED, "{}: {}".format(context, "; ".join(short))
    return OK, "{}: {}".format(context, ", ".join(seen))


def count_devices(device_root: str, kind: str) -> int:
    """Device files of ``kind`` under ``device_root``: ``gpu`` -- ``nvidiaN``; ``tpu`` -- ``accelN`` (TPU v2-v4)
    and ``vfio/N`` (v5e, v5p, v6e)."""
    def numbered(directory: str, prefix: str) -> int:
        try:
            names = os.listdir(directory)
        except OSError:
            return 0
        return sum(1 for n in names if n.startswith(prefix) and n[len(prefix):].isdigit())

    if kind == "gpu":
        return numbered(device_root, "nvidia")
    return numbered(device_root, "accel") + numbered(os.path.join(device_root, "vfio"), "")


def device_checks(options: argparse.Namespace, environ: dict[str, str]) -> list[tuple[str, str, str]]:
    """The ``gpu-check`` item (the GPU is seen) and ours for TPUs, ``tpu-check`` (the TPU chips
    are visible): at least ``--expect-gpus`` / ``--expect-tpu-chips`` device files; skipped when none are
    expected. Run before the command and, every ``--hardware-check-seconds``, while it runs."""
    device_root = environ.get(DEVICE_ROOT_ENV, "/dev")
    results = []
    for item, kind, expected, what in (("gpu-check", "gpu", options.expect_gpus, "GPUs"),
                                       ("tpu-check", "tpu", options.expect_tpu_chips, "TPU chips")):
        if not expected:
            continue
        found = count_devices(device_root, kind)
        results.append((item, OK if found >= expected else FAILED,
                        f"{found} of {expected} {what} visible under {device_root}"))
    return results


def preflight_checks(options: argparse.Namespace, environ: dict[str, str],
                     workdir: str | None = None) -> list[tuple[str, str, str]]:
    """The environment pre-check, every item of ModelArts' table plus ours.

    Items, in order, each ``(item, "ok" | "failed" | "skipped", detail)``; the item names are that page's
    log keywords:

    * ``dns`` -- every host of the job resolves (:func:`job_hosts`), within ``--dns-timeout`` seconds;
    * ``disk-size root`` -- free bytes of ``--root-dir`` (``/``) > ``--min-root-free-bytes`` (32 GB);
    * ``disk-size shm`` -- free bytes of ``$RESILIENT_DEVICE_ROOT/shm`` (``/dev/shm``) > ``--min-shm-free-bytes``
      (1 GB);
    * ``disk-size cache`` -- free bytes of ``--cache-dir`` (``/cache``) > ``--min-cache-free-bytes`` (32 GB);
      skipped where that directory does not exist (Cloud TPU VMs and Vertex AI replicas have none);
    * ``checkpoint-dir`` (ours) -- a local ``--checkpoint-dir`` is writable (``gs://`` is skipped);
    * ``ulimit`` -- with InfiniBand (``--infiniband auto``: ``/sys/class/infiniband`` lists a device) ModelArts'
      max locked memory > 16000, open files > 1000000, stack size > 8000, max user processes > 1000000;
      without, open files >= ``--min-open-files`` (1024);
    * ``gpu-check`` / ``tpu-check`` -- :func:`device_checks`.
    """
    results: list[tuple[str, str, str]] = []
    verdict, detail = _check_dns(list(options.hosts or []) or job_hosts(environ), options.dns_timeout)
    results.append(("dns", verdict, detail))
    device_root = environ.get(DEVICE_ROOT_ENV, "/dev")
    results.append(("disk-size root", *_check_disk(options.root_dir, options.min_root_free_bytes, environ)))
    results.append(("disk-size shm", *_check_disk(os.path.join(device_root, "shm"), options.min_shm_free_bytes,
                                                  environ)))
    results.append(("disk-size cache", *_check_disk(options.cache_dir, options.min_cache_free_bytes, environ,
                                                    optional=True)))
    checkpoint_dir = options.checkpoint_dir
    if checkpoint_dir:
        if "://" in checkpoint_dir:
            results.append(("checkpoint-dir", SKIPPED, f"{checkpoint_dir} is remote, not checked"))
        else:
            try:
                os.makedirs(checkpoint_dir, exist_ok=True)
                fd, probe = tempfile.mkstemp(prefix=".resilient-preflight-", dir=checkpoint_dir)
                try:
                    os.write(fd, b"ok")
                finally:
                    os.close(fd)
                    os.unlink(probe)
                results.append(("checkpoint-dir", OK, f"{checkpoint_dir} is writable"))
            except OSError as exc:
                results.append(("checkpoint-dir", FAILED, f"{checkpoint_dir} is not writable: {exc}"))
    results.append(("ulimit", *_check_ulimit(options.min_open_files, _infiniband(options.infiniband, environ))))
    results.extend(device_checks(options, environ))
    return results


# -- the runner -----------------------------------------------------------------------------------------


class SecretError(Exception):
    """A secret could not be read; the message names it and why, never a value."""


def read_secrets(pairs: list[tuple[str, str]], environ: dict[str, str], timeout: float = 10.0) -> dict[str, str]:
    """``{NAME: value}`` of each ``(NAME, secret version name)``, read from Secret Manager as the module
    docstring says (one token request, one access request per secret).

    Raises:
        SecretError: naming the secret version and the HTTP status or error.
    """
    import base64
    import json

    if not pairs:
        return {}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    host = (environ.get(METADATA_HOST_ENV) or DEFAULT_METADATA_HOST).strip().rstrip("/")
    try:
        request = urllib.request.Request(f"http://{host}{TOKEN_PATH}", headers={"Metadata-Flavor": "Google"})
        with opener.open(request, timeout=timeout) as response:
            token = json.loads(response.read().decode("utf-8"))["access_token"]
    except Exception as exc:
        raise SecretError(f"no access token from the metadata server ({type(exc).__name__}: {exc})") from None
    endpoint = (environ.get(SECRET_ENDPOINT_ENV) or DEFAULT_SECRET_ENDPOINT).rstrip("/")
    values = {}
    for name, version in pairs:
        request = urllib.request.Request(f"{endpoint}/v1/{version}:access",
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with opener.open(request, timeout=timeout) as response:
                data = json.loads(response.read().decode("utf-8"))["payload"]["data"]
        except urllib.error.HTTPError as exc:
            raise SecretError(f"cannot read {version} for {name}: HTTP {exc.code}") from None
        except Exception as exc:
            raise SecretError(f"cannot read {version} for {name}: {type(exc).__name__}") from None
        values[name] = base64.b64decode(data).decode("utf-8")
    return values


class Runner:
    """Runs one command with preflight, in-place restarts, SIGTERM forwarding and reporting.

    :meth:`run` returns the exit code (see the module docstring); :meth:`request_stop` is what the
    SIGTERM handler calls (it only sets a flag: safe in a signal handler).
    """

    def __init__(self, command: list[str], options: argparse.Namespace, reporter: GuestAttributes,
                 environ: dict[str, str] | None = None) -> None:
        self.command = list(command)
        self.options = options
        self.reporter = reporter
        self.environ = dict(os.environ if environ is None else environ)
        self.step_re = re.compile(options.step_pattern)
        self._stop_requested = False
        self._step: str | None = None
        self._published_step: str | None = None
        self._step_lock = threading.Lock()
        self._hardware_failed = False
        self._last_error = ""
        self._requests_dir: str | None = None
        self._served: str | None = None  # the checkpoint request token passed on (or acknowledged before a boot)
        self._acked: str | None = None
        self._notice_acked: str | None = None
        self._ack_lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._child_spoke = False  # the running command wrote a line to stdout (its handlers are in place)
        self._signal_pending = False
        self._progress_at = 0.0  # the watchdog's clock (:meth:`_now`) at the command's start or its last step line
        self._stepped = False  # the running command wrote a step line

    def request_stop(self) -> None:
        self._stop_requested = True

    # reporting

    def _report(self, **values: object) -> None:
        for key, value in values.items():
            self.reporter.put(key, value)

    def _publish_step(self) -> None:
        with self._step_lock:
            step = self._step
            if step is None or step == self._published_step:
                return
            self._published_step = step
            self.reporter.put(KEY_STEP, step)

    def _heartbeat(self, done: threading.Event) -> None:
        while True:
            self.reporter.put(KEY_HEARTBEAT, repr(vm_time(self.environ)))
            self._publish_step()
            self._pass_checkpoint_request()
            if done.wait(self.options.heartbeat_seconds):
                return

    # checkpoint requests (4b)

    def _request_files(self) -> tuple[str, str]:
        """The request and acknowledgement files of the command (made once, empty)."""
        if self._requests_dir is None:
            self._requests_dir = tempfile.mkdtemp(prefix="resilient-checkpoint-")
        return (os.path.join(self._requests_dir, "request"), os.path.join(self._requests_dir, "ack"))

    def _pass_checkpoint_request(self) -> None:
        """Pass a new checkpoint request of the node's metadata on to the command; report its acknowledgement."""
        request_file = self._request_files()[0]
        self._report_ack()
        token = (self.reporter.get(f"attributes/{CHECKPOINT_REQUEST_ATTRIBUTE}") or "").strip()
        if token and token != self._served:
            self._pass_on(token, request_file)
        name = getattr(self.options, "checkpoint_signal", None)
        child = self._child
        # The signal waits until the command has written its first line: before that it may not have installed
        # its handler, and an unhandled SIGUSR1 would end it.
        if self._signal_pending and name and child is not None and child.poll() is None and self._child_spoke:
            self._signal_pending = False
            self._killpg(child.pid, getattr(signal, "SIG" + name))

    def _report_ack(self) -> None:
        """Report the token the command last acknowledged (guest attribute ``checkpoint_ack``), when it is new."""
        with self._ack_lock:  # the heartbeat thread and the main loop both report it
            try:
                with open(self._request_files()[1], encoding="utf-8") as handle:
                    acked = handle.read().strip() or None
            except OSError:
                acked = None
            if not acked or acked in (self._acked, self._notice_acked):
                return
            notice = acked.startswith(NOTICE_TOKEN_PREFIX)
            if notice:
                self._notice_acked = acked
            else:
                self._acked = acked
        self.reporter.put(KEY_NOTICE_ACK if notice else KEY_CHECKPOINT_ACK, acked)
        _log(f"checkpoint saved on request: {acked}")

    def _pass_on(self, token: str, request_file: str) -> None:
        """Write ``token`` to the command's request file and report it (a notice's under its own key: the node's
        request it served, which a reboot reads back, stays the one served)."""
        notice = token.startswith(NOTICE_TOKEN_PREFIX)
        if not notice:
            self._served = token
        partial = request_file + ".partial"
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(token)
        os.replace(partial, request_file)  # the command never reads half a token
        self.reporter.put(KEY_NOTICE_REQUEST if notice else KEY_CHECKPOINT_REQUEST, token)
        _log(f"checkpoint requested: {token}")
        self._signal_pending = True

    # child process

    @staticmethod
    def _copy(stream: IO[bytes], out: object, on_line: Callable[[str], None]) -> None:
        """Copy ``stream`` line by line to ``out`` (a binary stream, flushed), handing each line to ``on_line``;
        keep draining when ``out`` is gone, so the child never blocks on a full pipe."""
        for raw in iter(stream.readline, b""):
            try:
                if out is not None:
                    out.write(raw)  # type: ignore[attr-defined]
                    out.flush()  # type: ignore[attr-defined]
            except (OSError, ValueError):
                pass
            on_line(raw.decode("utf-8", "replace"))
        stream.close()

    def _pump(self, stream: IO[bytes]) -> None:
        """The child's stdout: copied to ours, each line matched against ``--step-pattern`` (a step line also
        resets the liveness watchdog)."""
        def step_of(line: str) -> None:
            self._child_spoke = True
            match = self.step_re.search(line)
            if match:
                value = match.group(1) if self.step_re.groups else match.group(0)
                self._progress_at, self._stepped = self._now(), True  # before the step is seen anywhere
                with self._step_lock:
                    self._step = value.strip()

        self._copy(stream, getattr(sys.stdout, "buffer", None), step_of)

    def _pump_errors(self, stream: IO[bytes]) -> None:
        """The child's stderr: copied to ours, its last non-empty line kept (the exception of a traceback)."""
        def keep(line: str) -> None:
            if line.strip():
                self._last_error = line.strip()[:300]

        self._copy(stream, getattr(sys.stderr, "buffer", None), keep)

    def _killpg(self, pgid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    def _run_once(self, restarts: int) -> int:
        """Run the command once; its normalized exit status. Handles SIGTERM while it runs."""
        env = dict(self.environ)
        env[RESTARTS_ENV] = str(restarts)
        env[CHECKPOINT_REQUEST_FILE_ENV], env[CHECKPOINT_ACK_FILE_ENV] = self._request_files()
        env[CHECKPOINT_ON_NOTICE_ENV] = "1" if getattr(self.options, "notice_checkpoint", True) else ""
        env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                    start_new_session=True)
        except FileNotFoundError as exc:
            _log(f"cannot start {self.command[0]!r}: {exc}")
            return NOT_FOUND_EXIT_CODE
        except PermissionError as exc:
            _log(f"cannot start {self.command[0]!r}: {exc}")
            return NOT_EXECUTABLE_EXIT_CODE
        except OSError as exc:
            _log(f"cannot start {self.command[0]!r}: {exc}")
            return START_FAILED_EXIT_CODE
        self._child, self._child_spoke = proc, False
        self._progress_at, self._stepped = self._now(), False
        pump = threading.Thread(target=self._pump, args=(proc.stdout,), name="runner-stdout", daemon=True)
        errors = threading.Thread(target=self._pump_errors, args=(proc.stderr,), name="runner-stderr", daemon=True)
        self._last_error = ""
        pump.start()
        errors.start()
        returncode = self._wait(proc, restarts)
        # Leftovers of the group would hold the accelerator and the pipes: end them.
        self._killpg(proc.pid, signal.SIGKILL)
        pump.join(timeout=5)
        errors.join(timeout=5)
        return normalize_exit_status(returncode)

    def _now(self) -> float:
        """The watchdog's clock, seconds: the emulated VM's clock when there is one (:func:`vm_time`), else
        ``time.monotonic()``."""
        return vm_time(self.environ) if self.environ.get(EMULATED_CLOCK_ENV) else time.monotonic()

    def _quiet_too_long(self) -> float | None:
        """Seconds the command has gone without a step line, when that passed its allowance (2b: ``--hang-seconds``
        after a step line, ``--start-seconds`` before the first); None otherwise or with the watchdog off."""
        hang = self.options.hang_seconds
        allowance = hang if self._stepped else self.options.start_seconds
        if not hang or not allowance:
            return None
        quiet = self._now() - self._progress_at
        return quiet if quiet >= allowance else None

    def _abort_hung(self, proc: subprocess.Popen[bytes], quiet: float, restarts: int) -> int:
        """End a hung command (2b): SIGABRT to its group, SIGKILL a short grace later; its status counts as an
        abort (``-SIGABRT``, normalized to :data:`HANG_EXIT_CODE`)."""
        grace = min(self.options.grace_seconds, self.options.hang_seconds / 10)
        since = f"step {self._step}" if self._stepped else "its start"
        what = f"no step line for {quiet:.1f} s after {since} (restarts so far: {restarts})"
        _log(f"hang: {what}: SIGABRT to process group {proc.pid}, SIGKILL in {grace:.1f} s")
        self._report(**{KEY_HANG: what})
        self._killpg(proc.pid, signal.SIGABRT)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self._killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return -signal.SIGABRT

    def _wait(self, proc: subprocess.Popen[bytes], restarts: int = 0) -> int:
        while not self._stop_requested:
            try:
                return proc.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                quiet = self._quiet_too_long()
                if quiet is not None:
                    return self._abort_hung(proc, quiet, restarts)
        grace = self.options.grace_seconds
        if getattr(self.options, "notice_checkpoint", True):
            self._pass_on(f"{NOTICE_TOKEN_PREFIX}{vm_time(self.environ):.0f}", self._request_files()[0])
        _log(f"SIGTERM received: forwarding it to process group {proc.pid}, SIGKILL in {grace} s")
        self._killpg(proc.pid, signal.SIGTERM)
        try:
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _log(f"process group {proc.pid} still running after {grace} s: SIGKILL")
            self._killpg(proc.pid, signal.SIGKILL)
            return proc.wait()

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless SIGTERM arrives; True when it did."""
        deadline = time.monotonic() + seconds
        while not self._stop_requested:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(remaining, POLL_SECONDS))
        return True

    # phases

    def _finish(self, status: str, exit_code: int, hardware: bool = False) -> int:
        """Report the end: ``exit_code``, its class (``node_unhealthy`` when ``hardware``: the device check
        failed), then ``status``."""
        failure_class = NODE_UNHEALTHY if hardware else classify_exit_status(exit_code)
        if failure_class is not None and self._last_error:
            self._report(**{KEY_ERROR: self._last_error})
        if failure_class is not None:
            self._report(**{KEY_EXIT_CODE: exit_code, KEY_FAILURE_CLASS: failure_class})
        else:
            self._report(**{KEY_EXIT_CODE: exit_code})
        self._report(**{KEY_STATUS: status})
        _log(f"{status} (exit code {exit_code})")
        return exit_code

    def _preflight(self) -> bool:
        """The pre-check; one line per item, ``preflight <ok|failed|skipped>: item <item>: <detail>``
        (search the logs for the keyword "item"). A failed device check also reports the hardware
        faulty."""
        self._report(**{KEY_STATUS: STATUS_PREFLIGHT})
        ok = True
        for item, verdict, detail in preflight_checks(self.options, self.environ):
            print(f"preflight {verdict}: item {item}: {detail}", file=sys.stderr, flush=True)
            if verdict == FAILED and ok:  # the first failed item, for the operator's attempt history
                self._report(**{KEY_PREFLIGHT: f"failed: item {item}: {detail}"})
            ok = ok and verdict != FAILED
            if verdict == FAILED and item in DEVICE_ITEMS:
                self._report(**{KEY_HARDWARE: f"faulty: {item}: {detail}"})
        return ok

    def _hardware_fault(self) -> str | None:
        """The periodic hardware check: the device items now; the first failure as
        ``"<item>: <detail>"`` (also reported as guest attribute ``hardware`` = ``faulty: ...`` and logged), or
        None when the hardware is fine or no device is expected."""
        for item, verdict, detail in device_checks(self.options, self.environ):
            if verdict == FAILED:
                fault = f"{item}: {detail}"
                _log(f"hardware check failed: item {fault}")
                self._report(**{KEY_HARDWARE: "faulty: " + fault})
                return fault
        return None

    def _watch_hardware(self, done: threading.Event) -> None:
        """Every ``--hardware-check-seconds`` while the command runs: a device check; on a fault the command
        gets SIGTERM (it may checkpoint), as for a maintenance event, and the runner ends ``failed`` -- the
        operator isolates the node and re-issues the job on a new one."""
        while not done.wait(self.options.hardware_check_seconds):
            if self._hardware_fault() is not None:
                self._hardware_failed = True
                self._stop_requested = True
                return

    def run(self) -> int:
        worker_id = self.environ.get(WORKER_ID_ENV)
        if worker_id is not None:
            self._report(**{KEY_WORKER_ID: worker_id})
        try:
            self.environ.update(read_secrets(list(getattr(self.options, "secret_env", None) or []), self.environ))
        except SecretError as exc:
            _log(f"secret: {exc}")
            return self._finish(STATUS_FAILED, SECRET_EXIT_CODE)
        if self.options.preflight and not self._preflight():
            return self._finish(STATUS_PREFLIGHT_FAILED, PREFLIGHT_EXIT_CODE)
        if self._stop_requested:
            return self._finish(STATUS_TERMINATED, TERMINATED_EXIT_CODE)

        # A request acknowledged before this boot (a maintenance event restarted the VM) is not passed on again.
        self._served = self._acked = (self.reporter.get(
            f"guest-attributes/{self.options.namespace}/{KEY_CHECKPOINT_ACK}") or "").strip() or None
        self._request_files()
        done = threading.Event()
        heartbeat = threading.Thread(target=self._heartbeat, args=(done,), name="runner-heartbeat", daemon=True)
        restarts = 0
        self._report(**{KEY_RESTARTS: restarts, KEY_STATUS: STATUS_RUNNING})
        heartbeat.start()
        if self.options.hardware_check_seconds > 0 and (self.options.expect_gpus or self.options.expect_tpu_chips):
            threading.Thread(target=self._watch_hardware, args=(done,), name="runner-hardware", daemon=True).start()
        try:
            while True:
                if restarts:
                    self._report(**{KEY_RESTARTS: restarts, KEY_STATUS: STATUS_RUNNING})
                print(f"{RUNNER_START_TEXT}{self.command} (restarts so far: {restarts})", file=sys.stderr, flush=True)
                status = self._run_once(restarts)
                self._publish_step()
                self._report_ack()
                if self._hardware_failed:
                    _log(f"command ended with status {status} after the hardware check failed")
                    return self._finish(STATUS_FAILED, status, hardware=True)
                if self._stop_requested:
                    _log(f"command ended with status {status} after SIGTERM")
                    return self._finish(STATUS_TERMINATED, TERMINATED_EXIT_CODE)
                failure_class = classify_exit_status(status)
                if failure_class is None:
                    return self._finish(STATUS_SUCCEEDED, status)
                # ModelArts' scenario 3: the job failed and the hardware is faulty -> isolate (no restart here);
                # scenario 4: the hardware is fine -> the exit status decides.
                if self._hardware_fault() is not None:
                    _log(f"exit status {status} on faulty hardware: no restart on this node")
                    return self._finish(STATUS_FAILED, status, hardware=True)
                if failure_class not in RESTARTABLE_CLASSES:
                    _log(f"exit status {status} is {failure_class}: no restart")
                    return self._finish(STATUS_FAILED, status)
                if restarts >= self.options.max_restarts:
                    _log(f"exit status {status} is {failure_class}, restarts exhausted ({restarts})")
                    return self._finish(STATUS_FAILED, status)
                self._report(**{KEY_EXIT_CODE: status, KEY_FAILURE_CLASS: failure_class,
                                KEY_STATUS: STATUS_RESTARTING})
                _log(f"exit status {status} is {failure_class}: restart {restarts + 1} of "
                     f"{self.options.max_restarts} in {self.options.restart_delay} s")
                if self._sleep(self.options.restart_delay):
                    return self._finish(STATUS_TERMINATED, TERMINATED_EXIT_CODE)
                restarts += 1
        finally:
            done.set()
            heartbeat.join(timeout=REPORT_TIMEOUT_SECONDS * 2 + 1)
            if self._requests_dir is not None:  # the request and acknowledgement files: nothing left in /tmp
                shutil.rmtree(self._requests_dir, ignore_errors=True)


# -- command line ---------------------------------------------------------------------------------------


class UsageError(Exception):
    """Bad command line; the runner exits :data:`USAGE_EXIT_CODE`."""


def _non_negative(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"bad regular expression {text!r}: {exc}") from exc
    return text


def _signal_name(text: str) -> str:
    name = text.upper()
    name = name[3:] if name.startswith("SIG") else name
    if name in ("KILL", "STOP", "TERM") or not isinstance(getattr(signal, "SIG" + name, None), int):
        raise argparse.ArgumentTypeError(f"{text!r} is not a signal a workload can handle (e.g. USR1)")
    return name


def _secret_pair(text: str) -> tuple[str, str]:
    name, sep, version = text.partition("=")
    if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name) or not version.startswith("projects/"):
        raise argparse.ArgumentTypeError(f"want NAME=projects/P/secrets/S/versions/V, got {name!r}=...")
    return name, version


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runner.py", usage="%(prog)s [options] -- COMMAND [ARGS...]",
        description="Run a training command on a TPU worker: preflight, restarts, SIGTERM, guest attributes.")
    parser.add_argument("--preflight", action="store_true", help="run the preflight checks first")
    parser.add_argument("--hosts", type=lambda t: [h for h in t.split(",") if h], default=None,
                        help="preflight dns: the job's hosts, comma-separated (default: from the platform's env)")
    parser.add_argument("--dns-timeout", type=_positive_float, default=DEFAULT_DNS_TIMEOUT_SECONDS,
                        help="preflight dns: seconds to resolve every host (default 10)")
    parser.add_argument("--root-dir", default="/", help="preflight disk-size root: the directory measured")
    parser.add_argument("--min-root-free-bytes", type=_non_negative(int), default=SEED_004_ROOT_BYTES,
                        help="preflight disk-size root: free bytes needed (default 32 GB)")
    parser.add_argument("--min-shm-free-bytes", type=_non_negative(int), default=SEED_004_SHM_BYTES,
                        help="preflight disk-size shm: free bytes of /dev/shm needed (default 1 GB)")
    parser.add_argument("--cache-dir", default="/cache", help="preflight disk-size cache: the directory measured")
    parser.add_argument("--min-cache-free-bytes", type=_non_negative(int), default=SEED_004_CACHE_BYTES,
                        help="preflight disk-size cache: free bytes needed (default 32 GB)")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="preflight: a local directory that must be writable (gs:// is skipped)")
    parser.add_argument("--min-open-files", type=_non_negative(int), default=DEFAULT_MIN_OPEN_FILES,
                        help="preflight ulimit without InfiniBand: RLIMIT_NOFILE soft limit needed (default 1024)")
    parser.add_argument("--infiniband", choices=("auto", "yes", "no"), default="auto",
                        help="preflight ulimit: check the InfiniBand limits (auto: when a device is listed)")
    parser.add_argument("--expect-gpus", type=_non_negative(int), default=0,
                        help="gpu-check: GPUs this worker must see (default 0: no check)")
    parser.add_argument("--expect-tpu-chips", type=_non_negative(int), default=0,
                        help="tpu-check: TPU chips this worker must see (default 0: no check)")
    parser.add_argument("--hardware-check-seconds", type=_non_negative(float), default=DEFAULT_HARDWARE_CHECK_SECONDS,
                        help="seconds between device checks while the command runs (default 60; 0: none)")
    parser.add_argument("--max-restarts", type=_non_negative(int), default=DEFAULT_MAX_RESTARTS,
                        help="in-place restarts on transient / worker failures (default 5)")
    parser.add_argument("--restart-delay", type=_non_negative(float), default=DEFAULT_RESTART_DELAY_SECONDS,
                        help="seconds between restarts (default 1)")
    parser.add_argument("--grace-seconds", type=_non_negative(float), default=DEFAULT_GRACE_SECONDS,
                        help="after SIGTERM, seconds before SIGKILL (default 30)")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="guest attribute namespace")
    parser.add_argument("--heartbeat-seconds", type=_positive_float, default=DEFAULT_HEARTBEAT_SECONDS,
                        help="seconds between heartbeats (default 10)")
    parser.add_argument("--secret-env", type=_secret_pair, action="append", default=[], metavar="NAME=VERSION",
                        help="read Secret Manager secret VERSION (projects/P/secrets/S/versions/V) into $NAME")
    parser.add_argument("--checkpoint-signal", type=_signal_name, default=None, metavar="NAME",
                        help="a signal (USR1, USR2 ...) sent to the command with each checkpoint request (default: "
                             "none; the request file is always written)")
    parser.add_argument("--no-notice-checkpoint", dest="notice_checkpoint", action="store_false",
                        help="on SIGTERM, forward it only (default: first pass a checkpoint request 'notice-<time>')")
    parser.add_argument("--step-pattern", type=_regex, default=DEFAULT_STEP_PATTERN,
                        help="regex on stdout lines; its first group is the step")
    parser.add_argument("--hang-seconds", type=_non_negative(float), default=0.0,
                        help="abort the command (SIGABRT, exit 134) after this many seconds without a step line "
                             "(default 0: no watchdog)")
    parser.add_argument("--start-seconds", type=_non_negative(float), default=0.0,
                        help="with --hang-seconds: seconds from the command's start to its first step line "
                             "(start-up and restore; default 0: no watch before the first step line)")
    return parser


def parse_command_line(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Split ``[options] -- COMMAND [ARGS...]``; :class:`UsageError` without a command after ``--``.

    argparse itself exits 2 on a bad option (and 0 for ``--help``).
    """
    parser = build_parser()
    if "--" not in argv:
        if "-h" in argv or "--help" in argv:
            parser.parse_args(argv)
        raise UsageError("missing '--' before the command")
    split = argv.index("--")
    options = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command:
        raise UsageError("no command after '--'")
    return options, command


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        options, command = parse_command_line(argv)
    except UsageError as exc:
        print(build_parser().format_usage().rstrip(), file=sys.stderr)
        print(f"runner.py: error: {exc}", file=sys.stderr)
        return USAGE_EXIT_CODE
    runner = Runner(command, options, GuestAttributes(os.environ.get(METADATA_HOST_ENV), options.namespace))
    signal.signal(signal.SIGTERM, lambda signum, frame: runner.request_stop())
    return runner.run()


if __name__ == "__main__":
    sys.exit(main())
