"""Fault-tolerance checks as an operator argument: which checks the worker runner makes, with what thresholds,
before the training command runs and while it runs.

The checks follow Huawei Cloud ModelArts' "Training Fault Tolerance Check"
(https://support.huaweicloud.com/intl/en-us/develop-modelarts/modelarts_trouble_0003.html), which names two:
the environment pre-check and the periodic hardware check; when either finds a fault, the faulty hardware is
isolated and the job re-issued. Its check items and what passing requires::

    dns              every host of the job resolves
    disk-size root   > 32GB
    disk-size shm    > 1GB
    disk-size cache  > 32GB
    ulimit           with InfiniBand: max locked memory > 16000, open files > 1000000, stack size > 8000,
                     max user processes > 1000000
    gpu-check        the GPU is seen

Ours beside them: ``checkpoint-dir`` (a local checkpoint directory is writable), ``tpu-check`` (the TPU chips
of the worker VM are visible: ``/dev/accel*`` on v2-v4, ``/dev/vfio/N`` on v5e, v5p and v6e), and, without
InfiniBand, ``ulimit`` as open files >= :attr:`Preflight.min_open_files`.

The defaults are that page's thresholds, and fit both machines we run on: a Cloud TPU VM (100 GB boot disk, ``/dev/shm``
half its memory) and a Vertex AI replica (100 GB boot disk by default); neither has ``/cache``, so
``disk-size cache`` is skipped there unless :attr:`Preflight.cache_dir` names a directory that exists.

ModelArts runs the checks only when ``fault-tolerance/job-retry-num`` is set (1 to 3 re-issues; without it, 0: no
re-issue and no environment check). Ours are on by default: they cost about a second per boot, and a VM with a lost
chip otherwise fails minutes later, deep in the framework's start-up, with an error no rule can tell from a user's
bug. ``preflight=False`` turns them off (ModelArts' 0); the re-issue count is the policy's ``preflight`` budget (0
to 3, default 3).

Pure: no I/O; importing it imports pydantic only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..worker import runner
from .common import SpecError, seconds_problems

# The thresholds are the worker runner's own defaults (ModelArts' thresholds, in decimal gigabytes).
GB = runner.GB


class Preflight(BaseModel):
    """The worker runner's checks and their thresholds; see the module docstring.

    Attributes:
        min_root_free_bytes: ``disk-size root``: free bytes of ``/`` must exceed it (default 32 GB).
        min_shm_free_bytes: ``disk-size shm``: free bytes of ``/dev/shm`` must exceed it (default 1 GB).
        cache_dir: ``disk-size cache``: the cache directory (default ``/cache``); skipped where it does not
            exist.
        min_cache_free_bytes: its free bytes must exceed it (default 32 GB).
        min_open_files: ``ulimit`` without InfiniBand: the open-files soft limit must be at least this.
        infiniband: ``ulimit`` checks ModelArts' InfiniBand limits: ``"auto"`` (when
            ``/sys/class/infiniband`` lists a device), ``"yes"``, ``"no"``.
        dns_timeout_seconds: ``dns``: seconds for every host of the job to resolve.
        device_check: ``tpu-check`` / ``gpu-check``: the worker VM's TPU chips (or GPUs) must be visible, before
            the command and every ``hardware_check_seconds`` while it runs.
        hardware_check_seconds: seconds between device checks while the command runs (0: only before it and
            when it fails).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_root_free_bytes: int = Field(runner.SEED_004_ROOT_BYTES, ge=0)
    min_shm_free_bytes: int = Field(runner.SEED_004_SHM_BYTES, ge=0)
    cache_dir: str = Field("/cache", min_length=1)
    min_cache_free_bytes: int = Field(runner.SEED_004_CACHE_BYTES, ge=0)
    min_open_files: int = Field(runner.DEFAULT_MIN_OPEN_FILES, ge=0)
    infiniband: Literal["auto", "yes", "no"] = "auto"
    dns_timeout_seconds: float = Field(runner.DEFAULT_DNS_TIMEOUT_SECONDS, gt=0)
    device_check: bool = True
    hardware_check_seconds: float = Field(runner.DEFAULT_HARDWARE_CHECK_SECONDS, ge=0)

    def runner_args(self, *, expect_tpu_chips: int = 0, expect_gpus: int = 0) -> list[str]:
        """The worker runner's options for these checks (``--preflight ...``); ``expect_tpu_chips`` /
        ``expect_gpus``: the devices each worker VM must see (0: no device check)."""
        args = ["--preflight", "--dns-timeout", repr(float(self.dns_timeout_seconds)),
                "--min-root-free-bytes", str(self.min_root_free_bytes),
                "--min-shm-free-bytes", str(self.min_shm_free_bytes),
                "--cache-dir", self.cache_dir, "--min-cache-free-bytes", str(self.min_cache_free_bytes),
                "--min-open-files", str(self.min_open_files), "--infiniband", self.infiniband,
                "--hardware-check-seconds", repr(float(self.hardware_check_seconds))]
        if self.device_check and expect_tpu_chips:
            args += ["--expect-tpu-chips", str(int(expect_tpu_chips))]
        if self.device_check and expect_gpus:
            args += ["--expect-gpus", str(int(expect_gpus))]
        return args


def watchdog_args(hang_seconds: float | None, start_seconds: float | None = None) -> list[str]:
    """The worker runner's liveness watchdog options: ``--hang-seconds`` (seconds a running command may go without
    a step line before the runner aborts it: SIGABRT, exit 134, a transient crash the platform or the runner
    restarts in place) and ``--start-seconds`` (seconds from the command's start to its first step line: the
    start-up and the checkpoint's restore); [] when ``hang_seconds`` is None or 0 (no watchdog). ``start_seconds``
    None or 0: no watch before the first step line. See the runner's module docstring, 2b."""
    if not hang_seconds:
        return []
    args = ["--hang-seconds", repr(float(hang_seconds))]
    return [*args, "--start-seconds", repr(float(start_seconds))] if start_seconds else args


def watchdog_problems(worker_hang_timeout: object, hang_timeout: object) -> list[SpecError]:
    """Problems of an operator's ``worker_hang_timeout``: None, or seconds > 0 and -- with a ``hang_timeout`` --
    less than it (the runner sees a step line at once, the provider only at a later look: a longer one never acts
    first)."""
    worker, hang = worker_hang_timeout, hang_timeout
    problems = seconds_problems("worker_hang_timeout", worker, optional=True)
    if worker is None or problems or hang is None or seconds_problems("hang_timeout", hang):
        return problems
    seconds = [v.total_seconds() if isinstance(v, timedelta) else float(v) for v in (worker, hang)]  # type: ignore[arg-type]
    if seconds[0] >= seconds[1]:
        problems.append(SpecError("worker_hang_timeout", f"{worker_hang_timeout!r} must be less than hang_timeout "
                                                         f"({hang_timeout} s): the runner sees a step line at once, "
                                                         "the provider only at a later look"))
    return problems


#: Ends the runner's text in the wrapper's heredoc (the runner's text must not hold it).
RUNNER_HEREDOC = "RESILIENT_RUNNER_EOF"


def wrap_container_command(command: list[str], args: list[str], *, runner_source: str,
                           runner_args: list[str], helper_source: str = "") -> list[str]:
    """A Vertex AI replica's container command that runs under the worker runner: ``/bin/sh -c`` writes the runner
    (standard library only; the image needs ``python3``) to ``$TMPDIR`` and runs ``runner.py <runner_args>
    --max-restarts 0 -- <command> <args>`` -- no restart in place: Vertex AI restarts replicas itself (Vertex AI,
    "Understand the custom training service"). With the fault-tolerance checks in ``runner_args`` a failed check
    exits 78, which Vertex AI reports as "The replica workerpool0-0 exited with a non-zero status of 78" and the
    policy reads as ``preflight_failure`` (a new job on new machines); otherwise the exit status is the command's,
    so every other rule reads it as before. ``helper_source``: the workload's checkpoint-request helper
    (:mod:`..worker.checkpoint_request`), written as ``resilient_checkpoint.py`` into a directory put first on the
    command's ``PYTHONPATH`` (checkpoint on notice: the runner turns the replica's SIGTERM into a request the
    helper reads).

    Raises:
        ValueError: an empty ``command`` (an image's ENTRYPOINT cannot be wrapped), or a runner or helper text
            holding :data:`RUNNER_HEREDOC`.
    """
    if not command:
        raise ValueError("the worker runner needs container_spec.command: an image's ENTRYPOINT cannot be wrapped")
    if RUNNER_HEREDOC in runner_source or RUNNER_HEREDOC in helper_source:
        raise ValueError(f"the runner or helper source contains the heredoc marker {RUNNER_HEREDOC}")
    helper = (f'h="${{TMPDIR:-/tmp}}/resilient-helpers-$$"\nmkdir -p "$h"\n'
              f"cat > \"$h/resilient_checkpoint.py\" <<'{RUNNER_HEREDOC}'\n{helper_source.rstrip()}\n{RUNNER_HEREDOC}\n"
              f'export PYTHONPATH="$h${{PYTHONPATH:+:$PYTHONPATH}}"\n') if helper_source else ""
    script = (f'{helper}f="${{TMPDIR:-/tmp}}/resilient-runner-$$.py"\ncat > "$f" <<\'{RUNNER_HEREDOC}\'\n'
              f"{runner_source.rstrip()}\n{RUNNER_HEREDOC}\nexec python3 \"$f\" \"$@\"\n")
    return ["/bin/sh", "-c", script, "resilient-runner", *runner_args, "--max-restarts", "0", "--",
            *command, *args]


def preflight_of(value: object, field: str = "preflight") -> Preflight | None:
    """The checks an operator's ``preflight`` argument asks for: ``True`` -- the default thresholds; ``False`` /
    ``None`` -- none (ModelArts' ``job-retry-num`` 0); a :class:`Preflight`; or a mapping of its fields.

    Raises:
        SpecError: naming ``field.<name>`` and the fix, one line per bad field (an unknown name too).
    """
    if value is None or value is False:
        return None
    if value is True:
        return Preflight()
    if isinstance(value, Preflight):
        return value
    if not isinstance(value, Mapping):
        raise SpecError(field, f"give True (the default checks), False (none), a Preflight or a dict of its fields, "
                               f"got {type(value).__name__}")
    try:
        return Preflight(**{str(k): v for k, v in value.items()})
    except ValidationError as exc:
        errors = [SpecError(f"{field}.{'.'.join(str(p) for p in e['loc'])}", _fix(e)) for e in exc.errors()]
        raise SpecError.of_many(errors) from None


def _fix(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return f"unknown check setting; the settings are {', '.join(Preflight.model_fields)}"
    return f"{error['msg']} (got {error.get('input')!r})"


__all__ = ["GB", "RUNNER_HEREDOC", "Preflight", "preflight_of", "watchdog_args", "watchdog_problems",
           "wrap_container_command"]
