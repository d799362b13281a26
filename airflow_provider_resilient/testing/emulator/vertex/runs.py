"""One CustomJob's life on the emulated platform, following Vertex AI's "Understand the custom training service"
(https://cloud.google.com/vertex-ai/docs/training/understanding-training-service) and AI Platform Training's
"Understanding the AI Platform Training service"
(https://cloud.google.com/ai-platform/training/docs/understanding-training-service).

Theory of operation: a :class:`JobRun` is advanced by :meth:`JobRun.advance`, called by the engine's
tick with the current monotonic time. It moves through internal phases::

    queued -> provisioning -> running -> succeeding -> SUCCEEDED
                   |  ^            |  \\-> restarting -> running     (platform retry: all replicas anew)
                   |  stockout     |   \\-> failing -> FAILED       (after the ~1 min error delay)
                   \\-> failing     \\-> EXPIRED (scheduling.timeout)
    any -> cancelling -> CANCELLED

The Vertex AI service's own entries in the job's logs (log ``ml.googleapis.com%2F<job_id>``, resource ``ml_job``
with ``task_name`` ``service``; :meth:`JobRun._service_entry`): an ERROR entry for each replica that exits with a
non-zero status -- the sentence the job's error carries for that exit, written as the replica exits, whether the job
then fails, is retried or restarts the replica in place -- and an INFO entry when the job ends
(:data:`END_TEXTS`). A Cloud Logging sink can route them to Pub/Sub as they are written.

Platform rules (configurable in :class:`~..config.PlatformRules`): a user-code exit with 6/134/11/139
retries the job up to 3 times; any other user-code exit fails it ("common error", permanent); an
out-of-memory kill fails it with the "ran out of memory" text; a lost worker (``worker_failure``; a Spot VM
reclaimed, ``preemption``, after its SIGTERM notice of ``grace_seconds``: Compute Engine's preemption process) is
restarted in place up to 5 times, then the job is retried up to 3 times; a stockout is retried 3 times
during provisioning; an internal error retries the job twice. ``scheduling.disable_retries`` turns
every platform retry off. Each platform retry restarts every replica's process; the workload sees the
same ``AIP_CHECKPOINT_DIR``.

The run never talks to the client: it mutates its ``CustomJob`` message under the backend's lock.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clock import Clock, SystemClock
from ..config import EmulatorConfig
from ..faults import PROVISIONING_KINDS, RUNNING_KINDS, Fault, FaultBook
from ..runner import HEADER_PREFIX, ReplicaProcess, read_appended
from .specs import ReplicaPlan

log = logging.getLogger(__name__)

TRANSIENT_EXIT_CODES = frozenset({6, 134, 11, 139})
PRIMARY = "workerpool0-0"
#: An emulated replica's disks (for the worker runner's ``disk-size`` checks): a 100 GB boot disk with 80 GB free,
#: 50 GB of ``/dev/shm``.
REPLICA_ROOT_FREE_BYTES = 80 * 1000**3
REPLICA_SHM_FREE_BYTES = 50 * 1000**3
_SIGNAL_FOR_EXIT = {6: signal.SIGABRT, 134: signal.SIGABRT, 11: signal.SIGSEGV, 139: signal.SIGSEGV}


#: A step directory directly under AIP_CHECKPOINT_DIR: ``step_300``, ``checkpoint-300``, ``ckpt_300`` or ``300``.
STEP_DIR_RE = re.compile(r"^(?:(?:step|checkpoint|ckpt)[_-]?)?(\d+)$", re.IGNORECASE)


def written_step(prefix: str, fs: Any = None) -> int | None:
    """The highest step whose directory directly under ``prefix`` holds at least one object; None when there is
    none (or the prefix cannot be listed yet).

    This is what an ``at_step`` fault waits for: the point the workload reached, as the platform could see it
    in storage. It is deliberately not the provider's rule for a *complete* checkpoint (``checkpoints/``,
    which the tests judge): the emulator shares no code with the provider it tests.

    Args:
        prefix: ``gs://bucket/path`` (listed through ``fs``, the emulated Cloud Storage) or a local directory.
        fs: an fsspec filesystem; None: the local file system.
    """
    if fs is None:
        import fsspec

        fs = fsspec.filesystem("file")
    try:
        fs.invalidate_cache(prefix.rstrip("/"))  # gcsfs caches listings: each look must see new writes
        names = fs.ls(prefix.rstrip("/"), detail=False)
    except Exception:  # the bucket or the prefix may not exist yet: nothing written
        return None
    steps = sorted(((int(m[1]), name) for name in names
                    if (m := STEP_DIR_RE.match(str(name).rstrip("/").rsplit("/", 1)[-1]))), reverse=True)
    for step, name in steps:
        try:
            if fs.ls(str(name).rstrip("/"), detail=False):
                return step
        except Exception:  # removed between the two listings
            continue
    return None


#: The text of the Vertex AI service's INFO entry when a job reaches each terminal state (:meth:`JobRun._finish`).
END_TEXTS = {"SUCCEEDED": "Job completed successfully.", "FAILED": "Job failed.", "CANCELLED": "Job was cancelled.",
             "EXPIRED": "Job expired."}

#: Real seconds between two shipments of a job's replica output to Cloud Logging: each line's entry is stamped
#: within this of when it was written (0.05 s real = 2.5 platform seconds at the benchmarks' time scale 0.02, under
#: half a benchmark step).
LOG_SHIP_SECONDS = 0.05

@dataclass
class Exit:
    """Why a replica's process ended, when the emulator caused it."""

    code: int
    cause: str  # "user", "oom", "infra", "start" (the command could not be started)


@dataclass
class JobRun:
    """The platform-side state of one CustomJob (or one tuning trial).

    Attributes:
        job: the ``CustomJob`` proto the API returns; mutated here.
        plans: the replicas to run (commands and environment).
        log_dir: where ``<replica>.log`` files go.
        checkpoint_prefix: ``AIP_CHECKPOINT_DIR``, watched for ``at_step`` faults.
        log_sink: ``(replica, lines)``: ships the replicas' output to Cloud Logging, as Vertex AI does
            (:meth:`_ship_logs`); None: kept in the log files only.
        service_log: ``(severity, text)``: writes one entry of the Vertex AI service about the job
            (:meth:`_service_entry`: an ERROR entry per non-zero replica exit, an INFO entry when the job ends);
            None: none are written.
    """

    job: Any
    plans: list[ReplicaPlan]
    log_dir: Path
    config: EmulatorConfig
    faults: FaultBook
    region: str
    checkpoint_prefix: str | None = None
    storage_fs: Any = None  # () -> the emulated Cloud Storage's fsspec filesystem
    clock: Clock = field(default_factory=SystemClock)  # the emulator's (:mod:`..clock`)
    phase: str = "queued"
    next_at: float = 0.0
    platform_attempt: int = 1
    retries: dict[str, int] = field(default_factory=lambda: {"transient": 0, "internal": 0, "stockout": 0,
                                                             "worker_job": 0})
    worker_restarts: dict[str, int] = field(default_factory=dict)
    replicas: dict[str, ReplicaProcess] = field(default_factory=dict)
    forced: dict[str, Exit] = field(default_factory=dict)
    restart_at: dict[str, float] = field(default_factory=dict)
    kill_at: dict[str, float] = field(default_factory=dict)  # replica -> when its preemption notice ends (SIGKILL)
    pending: tuple[str, int, str] | None = None  # (final state, rpc code, message)
    fired: set[tuple[int, str, int]] = field(default_factory=set)
    steps_seen: dict[str, int] = field(default_factory=dict)  # replica -> highest step in its log
    step_baselines: dict[tuple[str, int], int] = field(default_factory=dict)  # checkpoint step at start
    starts: dict[str, int] = field(default_factory=dict)  # replica -> processes started (for fault draws)
    log_offsets: dict[str, int] = field(default_factory=dict)
    log_sink: Callable[[str, list[str]], None] | None = None
    service_log: Callable[[str, str], None] | None = None
    shipped: dict[str, int] = field(default_factory=dict)  # replica -> bytes of its log file shipped
    last_shipping: float = 0.0
    logs_closed: bool = False  # the job ended and its last lines were shipped
    last_checkpoint_look: float = 0.0
    checkpoint_step: int | None = None
    events: list[str] = field(default_factory=list)

    # ----------------------------------------------------------------- helpers
    @property
    def name(self) -> str:
        return str(self.job.name)

    @property
    def done(self) -> bool:
        return self.phase == "done"

    def _set_state(self, state: str) -> None:
        from google.cloud.aiplatform_v1.types import JobState

        self.job.state = getattr(JobState, f"JOB_STATE_{state}")
        now = self.clock.now()
        self.job.update_time = now
        if state == "RUNNING" and "start_time" not in self.job:
            self.job.start_time = now
        if state in ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"):
            self.job.end_time = now
        self.events.append(state)

    def _later(self, now: float, latency: float) -> float:
        return now + self.config.scaled(latency)

    def _disable_retries(self) -> bool:
        return bool(self.job.job_spec.scheduling.disable_retries)

    def _replica(self, plan: ReplicaPlan, restart: int) -> ReplicaProcess:
        header = (f"{self.name} {plan.name} platform attempt {self.platform_attempt}"
                  + (f" restart {restart}" if restart else ""))
        return ReplicaProcess(plan.name, list(plan.argv), {**dict(plan.env), **self._machine_env(plan)},
                              self.log_dir / f"{plan.name}.log", header)

    def _machine_env(self, plan: ReplicaPlan) -> dict[str, str]:
        """The replica's machine as the worker runner's fault-tolerance checks see it: its own ``/dev``
        (``RESILIENT_DEVICE_ROOT``: ``nvidiaN`` per GPU of its machine spec, ``shm``) and disks (a 100 GB boot
        disk with 80 GB free, ``/dev/shm`` of 50 GB: ``RESILIENT_EMULATED_FREE_BYTES``)."""
        dev = self.log_dir / f"dev-{plan.name}"
        (dev / "shm").mkdir(parents=True, exist_ok=True)
        for n in range(plan.gpus):
            (dev / f"nvidia{n}").touch()
        free = {"/": REPLICA_ROOT_FREE_BYTES, str(dev / "shm"): REPLICA_SHM_FREE_BYTES}
        return {"RESILIENT_DEVICE_ROOT": str(dev), "RESILIENT_EMULATED_FREE_BYTES": json.dumps(free)}

    def _start_all(self, now: float) -> None:
        self.replicas = {}
        self.forced.clear()
        self.restart_at.clear()
        self.kill_at.clear()
        for plan in self.plans:
            self._start(plan, now, restart=0)

    def _start(self, plan: ReplicaPlan, now: float, restart: int) -> None:
        proc = self._replica(plan, restart)
        proc.start(now)
        self.replicas[plan.name] = proc
        self.starts[plan.name] = self.starts.get(plan.name, 0) + 1
        self.log_offsets[plan.name] = proc.log_offset
        self.steps_seen.pop(plan.name, None)
        self.forced.pop(plan.name, None)
        self.kill_at.pop(plan.name, None)

    def kill_all(self) -> None:
        for proc in self.replicas.values():
            proc.kill()

    # ----------------------------------------------------------------- API-driven transitions
    def start(self, now: float) -> None:
        """Called once at create: QUEUED."""
        self._set_state("QUEUED")
        self.phase = "queued"
        self.next_at = self._later(now, self.config.latencies.queued_seconds)

    def cancel(self, now: float) -> None:
        """CancelCustomJob: CANCELLING, processes killed, CANCELLED after the cancel latency."""
        if self.phase in ("done", "cancelling"):
            return
        self._set_state("CANCELLING")
        self.kill_all()
        self.phase = "cancelling"
        self.next_at = self._later(now, self.config.latencies.cancel_seconds)

    # ----------------------------------------------------------------- the engine's tick
    def advance(self, now: float) -> None:
        """Move the run on as far as ``now`` (monotonic seconds) allows."""
        handler = getattr(self, f"_on_{self.phase}")
        handler(now)
        self._ship_logs()

    def _ship_logs(self, now: bool = False) -> None:
        """Hand the complete lines each replica wrote since the last call to :attr:`log_sink`, at most every
        :data:`LOG_SHIP_SECONDS` of real time (the replicas write in real time; ``now``: at once -- before the
        service's entry about a replica's exit or the job's end, so what the replicas wrote is stamped before it,
        as it was written) and once more when the job has ended (then everything, an unfinished last line too).
        Each entry's timestamp is when it was shipped: within :data:`LOG_SHIP_SECONDS` of when the line was
        written, as a container runtime stamps a line when it sees it (the goodput ledger times steps and in-place
        restarts by these timestamps). What Vertex AI does with a CustomJob's stdout and stderr: an entry per line
        in Cloud Logging (the emulator's replicas write both to one file, so every entry is INFO; the header lines
        the emulator adds at each start are not the workload's and are left out)."""
        if self.log_sink is None or self.logs_closed:
            return
        real, done = time.monotonic(), self.phase == "done"
        if not done and not now and real - self.last_shipping < LOG_SHIP_SECONDS:
            return
        self.last_shipping = real
        for plan in self.plans:
            offset = self.shipped.get(plan.name, 0)
            data = read_appended(self.log_dir / f"{plan.name}.log", offset)
            end = len(data) if done else data.rfind(b"\n") + 1
            if end <= 0:
                continue
            self.shipped[plan.name] = offset + end
            lines = [line for line in data[:end].decode("utf-8", "replace").splitlines()
                     if line and not line.startswith(HEADER_PREFIX)]
            if lines:
                self.log_sink(plan.name, lines)
        self.logs_closed = done

    def _on_done(self, now: float) -> None:
        return None

    def _on_queued(self, now: float) -> None:
        if now >= self.next_at:
            self._set_state("PENDING")
            self.phase = "provisioning"
            self.next_at = self._later(now, self.config.latencies.provisioning_seconds)

    def _on_provisioning(self, now: float) -> None:
        if now < self.next_at:
            return
        for index, fault in self.faults.candidates(PROVISIONING_KINDS, self.name, self.platform_attempt):
            if self.faults.fire(index, f"{self.name}:provision:{self.retries['stockout']}"):
                region = fault.region or self.region
                self.events.append(f"stockout in {region}")
                if not self._disable_retries() and self.retries["stockout"] < self.config.platform.stockout_retries:
                    self.retries["stockout"] += 1
                    self.next_at = self._later(now, self.config.latencies.provisioning_seconds)
                    return
                self._fail(now, self.config.rpc_codes.stockout,
                           f"Resources are insufficient in region: {region}. "
                           "Try a different region or use a different accelerator.")
                return
        self._start_all(now)
        self._set_state("RUNNING")
        self.phase = "running"

    def _on_restarting(self, now: float) -> None:
        if now >= self.next_at:
            self._start_all(now)
            self.phase = "running"

    def _on_failing(self, now: float) -> None:
        if now >= self.next_at and self.pending is not None:
            self._finish(*self.pending)

    def _on_cancelling(self, now: float) -> None:
        if now >= self.next_at:
            self._finish("CANCELLED", self.config.rpc_codes.cancelled, "CANCELED")

    def _on_succeeding(self, now: float) -> None:
        if now >= self.next_at:
            self._finish("SUCCEEDED", 0, "")

    def _service_entry(self, severity: str, text: str) -> None:
        """One entry of the Vertex AI service in the job's logs (:attr:`service_log`); never raises."""
        if self.service_log is None:
            return
        try:
            self.service_log(severity, text)
        except Exception:  # Cloud Logging's trouble is never the job's
            log.warning("emulator: the service entry of %s was not written", self.name, exc_info=True)

    def _finish(self, state: str, code: int, message: str) -> None:
        """The one place a run reaches a terminal state (SUCCEEDED, FAILED, CANCELLED, EXPIRED); writes the INFO
        service entry :data:`END_TEXTS` gives for it."""
        self.kill_all()
        if code:
            self.job.error = {"code": code, "message": message}
        self._set_state(state)
        self._ship_logs(now=True)  # what the replicas wrote comes before the end's entry (the rest: the last ship)
        self.phase = "done"
        self._service_entry("INFO", END_TEXTS[state])

    def _fail(self, now: float, code: int, message: str, state: str = "FAILED") -> None:
        """The error appears on the job about a minute after it ends (Vertex AI, "Understand the custom training
        service")."""
        self.kill_all()
        self.events.append(f"fail: {message}")
        self.pending = (state, code, message)
        self.phase = "failing"
        self.next_at = self._later(now, self.config.latencies.error_delay_seconds)

    def _retry_job(self, now: float, reason: str) -> None:
        self.kill_all()
        self.platform_attempt += 1
        self.worker_restarts.clear()
        self.events.append(f"platform retry {self.platform_attempt - 1}: {reason}")
        self.phase = "restarting"
        self.next_at = self._later(now, self.config.latencies.restart_seconds)

    def _on_running(self, now: float) -> None:
        timeout = self.job.job_spec.scheduling.timeout if "scheduling" in self.job.job_spec else None
        if timeout and timeout.total_seconds() > 0 and "start_time" in self.job:
            ran = self.clock.time() - self.job.start_time.timestamp()
            if ran >= timeout.total_seconds():
                self.kill_all()
                self._finish("EXPIRED", self.config.rpc_codes.expired,
                             f"Job exceeded its scheduling.timeout of {timeout.total_seconds():.0f}s.")
                return
        self._restart_due_replicas(now)
        self._end_notices(now)
        if self._strike_faults(now):
            return
        self._reap(now)

    def _end_notices(self, now: float) -> None:
        """SIGKILL each preempted replica whose notice is over and that still runs: the VM stops."""
        for name, at in list(self.kill_at.items()):
            if now >= at:
                del self.kill_at[name]
                proc = self.replicas.get(name)
                if proc is not None and proc.poll() is None:
                    proc.kill()

    def _restart_due_replicas(self, now: float) -> None:
        for name, at in list(self.restart_at.items()):
            if now >= at:
                del self.restart_at[name]
                plan = next(p for p in self.plans if p.name == name)
                self._start(plan, now, restart=self.worker_restarts.get(name, 0))

    # ----------------------------------------------------------------- faults
    def _checkpoint_step(self, now: float, *, fresh: bool = False) -> int | None:
        """The newest step the workload has written under AIP_CHECKPOINT_DIR (looked up at most every 0.1 s of
        real time -- a bound on the emulator's reads, not platform time: the workload writes in real time):
        :func:`written_step`."""
        real = time.monotonic()
        if self.checkpoint_prefix and (fresh or real - self.last_checkpoint_look >= 0.1):
            self.last_checkpoint_look = real
            fs = self.storage_fs() if self.storage_fs and self.checkpoint_prefix.startswith("gs://") else None
            self.checkpoint_step = written_step(self.checkpoint_prefix, fs)
        return self.checkpoint_step

    def _observed_step(self, fault: Fault, proc: ReplicaProcess, now: float) -> int | None:
        """The step the workload reached since this process started (progress made before it does not count)."""
        if fault.step_source == "log":
            offset = self.log_offsets.get(proc.replica, proc.log_offset)
            text, self.log_offsets[proc.replica] = proc.read_new_output(offset)
            for match in re.finditer(fault.log_pattern, text):
                try:
                    self.steps_seen[proc.replica] = max(self.steps_seen.get(proc.replica, -1), int(match.group(1)))
                except (IndexError, ValueError):
                    continue
            return self.steps_seen.get(proc.replica)
        key = (proc.replica, proc.serial)
        if key not in self.step_baselines:
            baseline = self._checkpoint_step(now, fresh=True)
            self.step_baselines[key] = -1 if baseline is None else baseline
            return None
        step = self._checkpoint_step(now)
        return step if step is not None and step > self.step_baselines[key] else None

    def _due(self, fault: Fault, proc: ReplicaProcess, now: float) -> bool:
        if fault.after_seconds is not None and now - proc.started_at < fault.after_seconds:
            return False
        if fault.at_step is not None:
            step = self._observed_step(fault, proc, now)
            return step is not None and step >= fault.at_step
        return True

    def _strike_faults(self, now: float) -> bool:
        """Fire due running faults; True when the run left the running phase."""
        for index, fault in self.faults.candidates(RUNNING_KINDS, self.name, self.platform_attempt):
            target = PRIMARY if fault.kind == "internal_error" else fault.replica
            proc = self.replicas.get(target)
            if proc is None or proc.poll() is not None or target in self.forced:
                continue
            once = (index, target, proc.serial)  # at most once per process start
            if once in self.fired or not self._due(fault, proc, now):
                continue
            self.fired.add(once)
            if not self.faults.fire(index, f"{self.name}:{self.platform_attempt}:{target}:{self.starts[target]}"):
                continue
            self.events.append(f"fault {fault.kind} on {target}")
            if fault.kind == "internal_error":
                self._internal_error(now)
                return True
            if fault.kind == "hang":
                proc.suspend()
            elif fault.kind == "crash":
                assert fault.exit_code is not None
                self.forced[target] = Exit(fault.exit_code, "user")
                proc.signal(_SIGNAL_FOR_EXIT.get(fault.exit_code, signal.SIGKILL))
            elif fault.kind == "preemption":  # the notice: SIGTERM now, the machine stops grace_seconds later
                self.forced[target] = Exit(143, "infra")
                proc.signal(signal.SIGTERM)
                self.kill_at[target] = now + fault.grace_seconds
            else:
                self.forced[target] = Exit(137, "oom" if fault.kind == "oom" else "infra")
                proc.signal(signal.SIGKILL)
        return False

    def _internal_error(self, now: float) -> None:
        if not self._disable_retries() and self.retries["internal"] < self.config.platform.internal_retries:
            self.retries["internal"] += 1
            self._retry_job(now, "internal error")
        else:
            self._fail(now, self.config.rpc_codes.internal, "Internal error occurred for the current attempt.")

    # ----------------------------------------------------------------- exits
    def _reap(self, now: float) -> None:
        for name, proc in list(self.replicas.items()):
            if name in self.restart_at:
                continue
            status = proc.poll()
            if status is None:
                continue
            exit_ = self.forced.pop(name, None) or Exit(status, "start" if proc.start_error is not None else "user")
            if exit_.code == 0:
                if name == PRIMARY:
                    self.kill_all()  # the primary replica succeeded: the other workers are stopped
                    self.phase = "succeeding"
                    self.next_at = self._later(now, self.config.latencies.success_seconds)
                    return
                del self.replicas[name]  # a worker that finished early
                continue
            if self._on_exit(now, name, exit_):
                return

    def _on_exit(self, now: float, name: str, exit_: Exit) -> bool:
        """Apply the platform rules to a replica's non-zero exit; True when the phase changed. Whatever follows
        (the job fails, is retried, or the replica is restarted in place), the service writes one ERROR entry with
        the sentence the job's error carries for this exit."""
        rules = self.config.platform
        no_retries = self._disable_retries()
        reason = "StartError" if exit_.cause == "start" else "Error"
        message = f"The replica {name} exited with a non-zero status of {exit_.code}. Termination reason: {reason}."
        out_of_memory = f"The replica {name} ran out of memory and exited with a non-zero status of {exit_.code}."
        self._ship_logs(now=True)
        self._service_entry("ERROR", out_of_memory if exit_.cause == "oom" else message)
        if exit_.cause == "oom":
            self._fail(now, self.config.rpc_codes.out_of_memory, out_of_memory)
            return True
        if exit_.cause == "infra":
            restarts = self.worker_restarts.get(name, 0)
            if not no_retries and restarts < rules.worker_restarts:
                self.worker_restarts[name] = restarts + 1
                self.events.append(f"restart {name} in place ({restarts + 1}/{rules.worker_restarts})")
                due = self._later(now, self.config.latencies.restart_seconds)
                if self.job.job_spec.scheduling.restart_job_on_worker_restart:
                    for other in self.replicas.values():
                        other.kill()
                    self.restart_at.update({p.name: due for p in self.plans})
                else:
                    self.restart_at[name] = due
                return False
            if not no_retries and self.retries["worker_job"] < rules.worker_job_retries:
                self.retries["worker_job"] += 1
                self._retry_job(now, f"{name} failed after {restarts} restarts")
                return True
            self._fail(now, self.config.rpc_codes.user_error, message)
            return True
        if exit_.code in TRANSIENT_EXIT_CODES and not no_retries and \
                self.retries["transient"] < rules.transient_job_retries:
            self.retries["transient"] += 1
            self._retry_job(now, f"{name} exited with {exit_.code}")
            return True
        self._fail(now, self.config.rpc_codes.user_error, message)
        return True


