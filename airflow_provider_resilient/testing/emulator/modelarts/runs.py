"""One ModelArts training job's life on the emulated platform, following the public pages "Training Fault Tolerance
Check" (https://support.huaweicloud.com/intl/en-us/usermanual-standard-modelarts/modelarts_trouble_0003.html),
"Viewing Training Job Events" and the API reference of ShowTrainingJobDetails / ListTrainingJobStages.

Theory of operation: :meth:`TrainingRun.advance`, called by the engine's tick with the clock's monotonic time, moves
the run through internal phases; each maps to the API's ``status.phase`` / ``status.secondary_phase``::

    creating  (Creating/Creating) -> queuing (Pending/Queuing) -> [prechecking] -> running (Running/Running)
    running -> Completed/Completed      every node's process exited 0
    running -> Failed/Failed            a process failed on sound hardware (scenario 4: never re-issued), or
                                        hardware failed without fault tolerance
    prechecking|running -> queuing      fault tolerance re-issues the job on new nodes (scenarios 1-3), at most
                                        fault-tolerance/job-retry-num times; one more is "error,exiting" -> Failed
    queuing (a re-issued job) for 30 minutes -> Failed/Failed
    creating|queuing|prechecking|running -> terminating (Terminating/Terminating) -> Terminated/Terminated

Fault tolerance is on when ``metadata.annotations["fault-tolerance/job-retry-num"]`` is "1".."3": the nodes then get
the environment pre-check (``prechecking``: items dns, disk-size root/shm/cache, ulimit on an InfiniBand --
bare-metal -- flavor, gpu-check on a GPU flavor) and a periodic hardware check while the job runs. Without it there is
neither pre-check nor re-issue. The pre-check's lines carry the keyword ``item``, as the page says to search for.

Each issue of the job (the first, then one per re-issue) is a stage record (``record_order`` 1, 2 ...: stages
scheduling, preparing, running, end) and ``platform_attempt`` of faults; each issue that got nodes is a running
record in ``status.running_records``. A queued job looks for capacity every ``modelarts_schedule_seconds``; a
``stockout`` fault that fires on a look keeps it queued.

The run mutates only itself; the service serialises access under its lock.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..config import EmulatorConfig
from ..faults import MODELARTS_BOOT_KINDS, MODELARTS_RUNNING_KINDS, PROVISIONING_KINDS, Fault, FaultBook
from ..runner import ReplicaProcess
from ..vertex.runs import written_step

#: The annotation that turns fault tolerance on ("Training Fault Tolerance Check").
RETRY_ANNOTATION = "fault-tolerance/job-retry-num"
#: Internal phase -> (status.phase, status.secondary_phase), per ShowTrainingJobDetails' Status.
STATUS = {"creating": ("Creating", "Creating"), "queuing": ("Pending", "Queuing"),
          "prechecking": ("Running", "Running"), "running": ("Running", "Running"),
          "terminating": ("Terminating", "Terminating")}
TERMINAL_PHASES = frozenset({"Completed", "Failed", "Terminated"})
#: The recovery policy a fault-tolerance re-issue applies (RunningRecord.end_recover): isolate the faulty node and
#: reschedule the job.
REISSUE = "job_reschedule_with_taint"
_BEIJING = timezone(timedelta(hours=8))  # events' times are written like "2022-11-26T16:03:41+08:00"
_SIGNAL_FOR_EXIT = {6: signal.SIGABRT, 134: signal.SIGABRT, 11: signal.SIGSEGV, 139: signal.SIGSEGV,
                    15: signal.SIGTERM, 143: signal.SIGTERM}
#: The stages of one issue of a job: (name, en_message, zh_message) -- the API's Chinese message as escapes (the
#: source stays ASCII): "job scheduling", "environment preparation", "job running", "job ended".
_STAGES = (("scheduling", "Job scheduling", "\u4f5c\u4e1a\u8c03\u5ea6"),
           ("preparing", "Environment preparation", "\u73af\u5883\u51c6\u5907"),
           ("running", "Job running", "\u4f5c\u4e1a\u8fd0\u884c"),
           ("end", "Job ended", "\u4f5c\u4e1a\u7ed3\u675f"))


def precheck_items(flavor_id: str, gpus: int, region: str) -> list[str]:
    """The pre-check items a node runs: always dns and the three disk sizes; ulimit "when the IB network is used" (a
    bare-metal flavor here); gpu-check "when GPUs and the v2 training engine are used", which the page says is not
    yet offered in cn-north-4."""
    items = ["dns", "disk-size root", "disk-size shm", "disk-size cache"]
    if ".bm." in flavor_id:
        items.append("ulimit")
    if gpus and "npu" not in flavor_id and "kat1" not in flavor_id and region != "cn-north-4":
        items.append("gpu-check")
    return items


@dataclass
class NodePlan:
    """What one node runs: ``worker-<i>``, its argv and complete environment."""

    task: str
    argv: list[str]
    env: dict[str, str]


@dataclass
class TrainingRun:
    """The platform-side state of one training job.

    Attributes:
        job: the job as the API returns it (``kind``, ``metadata``, ``algorithm``, ``spec``); ``status`` is made by
            :meth:`status`.
        key: the fault book's name of the job (``projects/P/locations/REGION/trainingJobs/ID``).
        plans: the node processes to run.
        retry_limit: fault-tolerance/job-retry-num (0: fault tolerance off).
        checkpoint_prefix: ``RESILIENT_CHECKPOINT_DIR`` of the job (a local directory or ``obs://``), watched for
            ``at_step`` faults; ``checkpoint_fs(prefix)`` gives the fsspec filesystem to list it (None: local).
    """

    job: dict[str, Any]
    key: str
    plans: list[NodePlan]
    log_dir: Path
    config: EmulatorConfig
    faults: FaultBook
    clock: Clock
    retry_limit: int = 0
    items: list[str] = field(default_factory=list)
    checkpoint_prefix: str | None = None
    checkpoint_fs: Callable[[str], Any] | None = None
    phase: str = "creating"
    final: str | None = None  # Completed / Failed / Terminated once done
    next_at: float = 0.0
    queued_at: float = 0.0  # monotonic time the current queuing began
    reissues: int = 0
    nodes: dict[str, ReplicaProcess] = field(default_factory=dict)
    forced: dict[str, str] = field(default_factory=dict)  # task -> "crash" / "hardware" (the emulator killed it)
    task_statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    running_records: list[dict[str, Any]] = field(default_factory=list)
    stage_records: list[list[dict[str, Any]]] = field(default_factory=list)
    events: list[dict[str, str]] = field(default_factory=list)
    start_ms: int | None = None
    end_ms: int | None = None
    fired: set[tuple[int, str, int]] = field(default_factory=set)
    log_offsets: dict[str, int] = field(default_factory=dict)
    steps_seen: dict[str, int] = field(default_factory=dict)
    step_baselines: dict[tuple[str, int], int] = field(default_factory=dict)
    last_checkpoint_look: float = 0.0
    checkpoint_step: int | None = None

    # ----------------------------------------------------------------- reading
    @property
    def job_id(self) -> str:
        return str(self.job["metadata"]["id"])

    @property
    def done(self) -> bool:
        return self.final is not None

    @property
    def attempt(self) -> int:
        """The issue of the job: 1, then 2 after the first re-issue (``match.platform_attempt``)."""
        return self.reissues + 1

    def phases(self) -> tuple[str, str]:
        """(status.phase, status.secondary_phase)."""
        return (self.final, self.final) if self.final else STATUS[self.phase]

    def status(self) -> dict[str, Any]:
        phase, secondary = self.phases()
        status: dict[str, Any] = {"phase": phase, "secondary_phase": secondary,
                                  "tasks": [p.task for p in self.plans],
                                  "task_statuses": [self.task_statuses[p.task] for p in self.plans
                                                    if p.task in self.task_statuses],
                                  "running_records": [dict(r) for r in self.running_records]}
        if self.start_ms is not None:
            status["start_time"] = self.start_ms
            status["duration"] = (self.end_ms or self._ms()) - self.start_ms
        else:
            status["duration"] = 0
        return status

    def stage_view(self) -> list[dict[str, Any]]:
        return [{"record_order": n, "stages": [dict(s) for s in stages]}
                for n, stages in enumerate(self.stage_records, 1)]

    def processes(self) -> list[int]:
        return [p.pid for p in self.nodes.values() if p.pid and p.poll() is None]

    # ----------------------------------------------------------------- helpers
    def _ms(self) -> int:
        return int(self.clock.time() * 1000)

    def _later(self, now: float, latency: float) -> float:
        return now + self.config.scaled(latency)

    def event(self, message: str, level: str = "Info", source: str = "Job") -> None:
        when = datetime.fromtimestamp(self.clock.time(), tz=UTC).astimezone(_BEIJING)
        self.events.append({"time": when.isoformat(timespec="seconds"), "level": level, "message": message,
                            "source": source, "_ms": str(self._ms())})

    def _stage(self, name: str) -> None:
        """Begin stage ``name`` of the current stage record (ending the one before)."""
        now = str(self._ms())
        stages = self.stage_records[-1]
        if stages and not stages[-1]["end_time"]:
            stages[-1]["end_time"] = now
        order, (stage, en, zh) = next((n, s) for n, s in enumerate(_STAGES, 1) if s[0] == name)
        stages.append({"job_id": self.job_id, "name": stage, "en_message": en, "zh_message": zh, "start_time": now,
                       "end_time": "" if name != "end" else now, "stage_order": order, "sub_stages": []})

    def _sub_stage(self, name: str, en: str, zh: str) -> None:
        self.stage_records[-1][-1]["sub_stages"].append(
            {"name": name, "en_message": en, "zh_message": zh, "create_time": str(self._ms())})

    def kill_all(self) -> None:
        for proc in self.nodes.values():
            proc.kill()

    # ----------------------------------------------------------------- API-driven transitions
    def start(self, now: float) -> None:
        """At create: Creating; the first stage record begins (scheduling)."""
        self.stage_records.append([])
        self._stage("scheduling")
        self.event("Training job created.")
        self.phase = "creating"
        self.next_at = self._later(now, self.config.latencies.modelarts_create_seconds)

    def terminate(self, now: float) -> None:
        """StopTrainingJob (action ``terminate``): Terminating, the processes killed, Terminated after the latency."""
        name = self.job["metadata"]["name"]
        self.event(f"[Job: modelarts-job-{self.job_id}] ExecuteAction: Start to execute action TerminateJob")
        self.kill_all()
        self._close_record(end_reason=f"training job {name} terminated by the user")
        self.phase = "terminating"
        self.next_at = self._later(now, self.config.latencies.modelarts_terminate_seconds)

    def can_terminate(self) -> bool:
        """Only Creating, Pending or Running jobs can be stopped (StopTrainingJob)."""
        return not self.done and self.phase != "terminating"

    # ----------------------------------------------------------------- the engine's tick
    def advance(self, now: float) -> None:
        if not self.done:
            getattr(self, f"_on_{self.phase}")(now)

    def _on_creating(self, now: float) -> None:
        if now >= self.next_at:
            self._queue(now)

    def _queue(self, now: float) -> None:
        self.phase = "queuing"
        self.queued_at = now
        self.next_at = self._later(now, self.config.latencies.modelarts_schedule_seconds)
        self.event("The training job is queuing and awaiting resource allocation.")

    def _on_queuing(self, now: float) -> None:
        limit = self.config.scaled(self.config.platform.modelarts_requeue_limit_seconds)
        if self.reissues and now - self.queued_at >= limit:
            # "If the waiting time exceeds 30 minutes, the training job will automatically exit."
            self.event("Failed to be queued. The re-issued training job queued for more than 30 minutes: the "
                       "resource pool has no capacity for its flavor.", "Error")
            self._finish("Failed")
            return
        if now < self.next_at:
            return
        for index, _ in self.faults.candidates(PROVISIONING_KINDS, self.key, self.attempt, "modelarts"):
            if self.faults.fire(index, f"{self.key}:{self.attempt}:queue:{now}"):
                self.next_at = self._later(now, self.config.latencies.modelarts_schedule_seconds)
                return
        self._allocate(now)

    def _allocate(self, now: float) -> None:
        """Nodes granted: a running record begins, then the pre-check (fault tolerance) or the workload."""
        self.running_records.append({"start_at": int(self.clock.time()), "start_type": "init_or_rescheduled",
                                     "recover_records": []})
        if len(self.running_records) > 1:  # the re-issue this record comes from has succeeded
            for record in self.running_records[-2].get("recover_records", []):
                record["recover_end_at"] = int(self.clock.time())
                record["recover_result"] = "success"
        self._stage("preparing")
        self.event("The training job starts to run.")
        if self.retry_limit:
            self._sub_stage("environment-pre-check", "Environment pre-check", "\u73af\u5883\u9884\u68c0")
            self.phase = "prechecking"
            self.next_at = self._later(now, self.config.latencies.modelarts_precheck_seconds)
        else:
            self._run_workload(now)

    def _on_prechecking(self, now: float) -> None:
        if now < self.next_at:
            return
        found = None  # (task, item or "hardware")
        for index, fault in self.faults.candidates(MODELARTS_BOOT_KINDS, self.key, self.attempt, "modelarts"):
            if fault.kind == "hardware" and (fault.after_seconds is not None or fault.at_step is not None):
                continue  # a timed hardware fault strikes while running (the periodic check)
            if fault.worker >= len(self.plans) or (fault.kind == "preflight" and fault.item not in self.items):
                continue
            if self.faults.fire(index, f"{self.key}:{self.attempt}:precheck"):
                found = (self.plans[fault.worker].task, fault.item if fault.kind == "preflight" else "hardware")
                break
        seconds = self.config.scaled(self.config.latencies.modelarts_precheck_seconds)
        for plan in self.plans:
            for item in self.items:
                failed = found is not None and found[0] == plan.task and found[1] == item
                self.event(f"[ModelArts Service Log][{plan.task}] environment pre-check item: {item}, result: "
                           f"{'failed' if failed else 'passed'}", "Error" if failed else "Info", "Task")
            if found is not None and found[0] == plan.task and found[1] == "hardware":
                self.event(f"[ModelArts Service Log][{plan.task}] environment pre-check item: hardware, result: "
                           "failed (a hardware fault was found on the node)", "Error", "Task")
        if found is None:
            for plan in self.plans:
                self.event(f"[{plan.task}] [Duration: {seconds:.0f}s] Environment pre-check completed.",
                           source="Task")
            self._run_workload(now)
            return
        task, what = found
        self.event(f"[{task}] Pre-check failed. Error: item {what} failed; the node is isolated.", "Error", "Task")
        self._reissue(now, task, f"environment pre-check item {what} failed on {task}", "node_fault")

    def _run_workload(self, now: float) -> None:
        self._stage("running")
        self.nodes, self.forced = {}, {}
        for plan in self.plans:
            proc = ReplicaProcess(plan.task, plan.argv, plan.env, self.log_dir / f"{plan.task}.log",
                                  f"modelarts-job-{self.job_id} {plan.task} issue {self.attempt}")
            proc.start(now)
            self.nodes[plan.task] = proc
            self.log_offsets[plan.task] = proc.log_offset
            self.steps_seen.pop(plan.task, None)
            self.event(f"[{plan.task}] training started.", source="Task")
        if self.start_ms is None:
            self.start_ms = self._ms()
        self.phase = "running"
        self.event("Training job is running.")
        if not self.retry_limit:  # no pre-check: hardware that is faulty from the start fails under the workload
            for index, fault in self.faults.candidates(frozenset({"hardware"}), self.key, self.attempt, "modelarts"):
                if fault.after_seconds is None and fault.at_step is None and fault.worker < len(self.plans) \
                        and self.faults.fire(index, f"{self.key}:{self.attempt}:boot"):
                    self._strike(fault, self.nodes[self.plans[fault.worker].task])

    def _on_running(self, now: float) -> None:
        self._strike_faults(now)
        self._reap(now)

    def _on_terminating(self, now: float) -> None:
        if now >= self.next_at:
            self.event("The training job has been manually stopped.")
            self._finish("Terminated")

    # ----------------------------------------------------------------- faults
    def _strike_faults(self, now: float) -> None:
        for index, fault in self.faults.candidates(MODELARTS_RUNNING_KINDS, self.key, self.attempt, "modelarts"):
            if fault.kind == "hardware" and fault.after_seconds is None and fault.at_step is None:
                continue  # found at boot (pre-check), not while running
            if fault.worker >= len(self.plans):
                continue
            task = self.plans[fault.worker].task
            proc = self.nodes.get(task)
            if proc is None or proc.poll() is not None or task in self.forced:
                continue
            once = (index, task, proc.serial)
            if once in self.fired or not self._due(fault, proc, now):
                continue
            self.fired.add(once)
            if self.faults.fire(index, f"{self.key}:{self.attempt}:{task}"):
                self._strike(fault, proc)

    def _strike(self, fault: Fault, proc: ReplicaProcess) -> None:
        if fault.kind == "hang":
            self.event(f"[{proc.replica}] The system detects that your training job may be suspended.", "Warning")
            proc.suspend()
        elif fault.kind == "crash":
            self.forced[proc.replica] = "crash"
            proc.signal(_SIGNAL_FOR_EXIT.get(int(fault.exit_code or 137), signal.SIGKILL))
        else:  # hardware: the node's hardware fails and takes the process with it
            self.forced[proc.replica] = "hardware"
            self.event(f"[ModelArts Service Log][{proc.replica}] hardware fault detected on the node.", "Error",
                       "Task")
            proc.signal(signal.SIGKILL)

    def _due(self, fault: Fault, proc: ReplicaProcess, now: float) -> bool:
        if fault.after_seconds is not None and now - proc.started_at < fault.after_seconds:
            return False
        if fault.at_step is not None:
            step = self._observed_step(fault, proc)
            return step is not None and step >= fault.at_step
        return True

    def _observed_step(self, fault: Fault, proc: ReplicaProcess) -> int | None:
        """The step the workload reached since this process started: from its output (``step_source: log``) or the
        newest step directory under ``RESILIENT_CHECKPOINT_DIR``."""
        if fault.step_source == "log":
            text, self.log_offsets[proc.replica] = proc.read_new_output(self.log_offsets.get(proc.replica,
                                                                                             proc.log_offset))
            for match in re.finditer(fault.log_pattern, text):
                try:
                    self.steps_seen[proc.replica] = max(self.steps_seen.get(proc.replica, -1), int(match.group(1)))
                except (IndexError, ValueError):
                    continue
            return self.steps_seen.get(proc.replica)
        key = (proc.replica, proc.serial)
        if key not in self.step_baselines:
            baseline = self._checkpoint_step(fresh=True)
            self.step_baselines[key] = -1 if baseline is None else baseline
            return None
        step = self._checkpoint_step()
        return step if step is not None and step > self.step_baselines[key] else None

    def _checkpoint_step(self, *, fresh: bool = False) -> int | None:
        real = time.monotonic()
        if self.checkpoint_prefix and (fresh or real - self.last_checkpoint_look >= 0.1):
            self.last_checkpoint_look = real
            fs = self.checkpoint_fs(self.checkpoint_prefix) if self.checkpoint_fs else None
            if self.checkpoint_prefix.startswith("obs://") and fs is None:
                return None  # no OBS to look in
            self.checkpoint_step = written_step(self.checkpoint_prefix, fs)
        return self.checkpoint_step

    # ----------------------------------------------------------------- exits
    def _reap(self, now: float) -> None:
        failed: tuple[str, int, str] | None = None
        for task, proc in self.nodes.items():
            code = proc.poll()
            if code is None or task in self.task_statuses:
                continue
            cause = self.forced.get(task, "user")
            message = "" if code == 0 else ("hardware fault" if cause == "hardware" else f"exit code {code}")
            self.task_statuses[task] = {"task": task, "exit_code": code, "message": message}
            self.event(f"[{task}] Training finished. Exit code {code}.", "Info" if code == 0 else "Error", "Task")
            if code and failed is None:
                failed = (task, code, cause)
        if failed is not None:
            task, code, cause = failed
            if cause == "hardware" and self.retry_limit:
                # scenario 3: the periodic check found the hardware fault and the user's process failed
                self.task_statuses.clear()
                self._reissue(now, task, f"hardware fault on {task}; the process exited with {code}", "node_fault")
                return
            self.kill_all()
            reason = "hardware fault" if cause == "hardware" else f"exit code {code}"
            self._close_record(end_reason=f"{task} failed: {reason}", task=task)
            self.event("Failed to run the training job.", "Error")
            self.event("Training job failed.", "Error")
            self._finish("Failed")
            return
        if self.nodes and all(t in self.task_statuses for t in self.nodes):
            self._close_record(end_reason="completed")
            self.event("Training job executed.")
            self._finish("Completed")

    def _close_record(self, *, end_reason: str, task: str | None = None) -> None:
        if self.running_records and "end_at" not in self.running_records[-1]:
            record = self.running_records[-1]
            record["end_at"] = int(self.clock.time())
            record["end_reason"] = end_reason
            if task:
                record["end_related_task"] = task

    def _reissue(self, now: float, task: str, reason: str, scenario: str) -> None:
        """Fault tolerance: the faulty node is isolated and the job issued again on new nodes -- or, with the
        re-issues spent, the job ends Failed ("error,exiting")."""
        self.kill_all()
        spent = self.reissues >= self.retry_limit
        self._close_record(end_reason=reason, task=task)
        record = self.running_records[-1]
        record["end_recover"] = REISSUE
        record["recover_records"] = [{"recover_start_at": int(self.clock.time()), "recover": REISSUE,
                                      "fault_scenario": scenario, "reason": reason, "related_task": task,
                                      "recover_result": "quotaExceeded" if spent else "recovering"}]
        if spent:
            self.event(f"[ModelArts Service Log] fault tolerance: the job has been re-issued {self.reissues} of "
                       f"{self.retry_limit} times and the fault persists ({reason}): error,exiting", "Error")
            self.event("Training job failed.", "Error")
            self._finish("Failed")
            return
        self.reissues += 1
        self.event(f"[ModelArts Service Log] fault tolerance: {reason}; the faulty node is isolated and the job is "
                   f"re-issued on new nodes ({self.reissues}/{self.retry_limit}).", "Warning")
        self.event("The training job has been restarted.", "Warning")
        self._stage("end")
        self.stage_records.append([])
        self._stage("scheduling")
        self._queue(now)

    def _finish(self, final: str) -> None:
        self.kill_all()
        if self.stage_records and (not self.stage_records[-1] or self.stage_records[-1][-1]["name"] != "end"):
            self._stage("end")
        self.final = final
        self.end_ms = self._ms()
