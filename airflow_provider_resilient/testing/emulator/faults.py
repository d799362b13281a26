"""The declarative fault plan: what goes wrong, to which job, and when.

A plan is a list of faults (YAML or JSON file, or the same as Python objects)::

    seed: 7
    faults:
      - kind: crash                 # the workload dies with exit code 139 ...
        exit_code: 139
        match: {display_name: "train-*", labels: {team: ml}}
        at_step: 300                # ... once it has written the checkpoint of step 300
        times: 4                    # in 4 runs: the platform's 3 retries do not save it
      - kind: stockout              # the 1st create's provisioning stocks out 4 times -> job FAILED
        match: {nth: 1}
        times: 4
      - kind: unavailable           # the 3rd GetCustomJob call answers UNAVAILABLE
        match: {nth: 3}

Kinds and where they strike:

============== =================================================================================
create time    ``quota`` (the create call is refused: 429 RESOURCE_EXHAUSTED naming ``quota_metric``;
               ``service: tpu`` refuses CreateNode / CreateQueuedResource)
get time       ``unavailable`` (a Get call -- or with ``calls: list`` a ListCustomJobs call -- answers
               UNAVAILABLE; ``service: tpu`` for GetNode / GetGuestAttributes / GetQueuedResource
               and ListNodes / ListQueuedResources, ``service: logging`` for ListLogEntries)
provisioning   ``stockout`` (one provisioning attempt of the job finds no capacity)
running        ``crash`` (exit ``exit_code``), ``oom``, ``worker_failure`` (the VM is lost: the
               platform restarts the worker in place), ``internal_error``, ``hang`` (the
               workload stops making progress: SIGSTOP of the command's tree -- under the worker runner of the
               training command it started, the runner living on), ``preemption`` (a Spot VM reclaimed: the
               replica's processes get SIGTERM, ``grace_seconds`` later SIGKILL, then the platform
               restarts the worker on another VM as for ``worker_failure``); TPU: ``maintenance``, ``preemption``,
               ``unhealthy``, ``crash``, ``hang``, ``hardware`` (chips vanish), ``scheduled_maintenance``
               (announced in ``Node.upcoming_maintenance`` -- v2alpha1 GetNode -- ``notice_seconds`` before
               its window; at the window the node has a maintenance event it recovers from, REPAIRING for
               ``window_seconds``)
TPU boot       ``hardware`` (chips missing), ``preflight`` (an environment item fails)
============== =================================================================================

``service: modelarts`` aims a fault at Huawei Cloud ModelArts training jobs (and only at them: a fault of another
service never strikes a ModelArts job, nor counts one for ``match.nth``). ``match.display_name`` is the job's
``metadata.name``, ``match.labels`` its annotations and TMS tags, ``match.location`` the region served
(``cn-north-4``), ``match.platform_attempt`` the job's issue (1, then 2 after the first fault-tolerance re-issue):
``quota`` refuses CreateTrainingJob (400 ``ModelArts.2815``), ``unavailable`` answers a ShowTrainingJobDetails
(``calls: get``) or a training-job search (``calls: list``) with 500 ``ModelArts.0010``, ``stockout`` keeps the job
Pending (Queuing) for each look at capacity it fires on (a re-issued job that queues 30 minutes exits), ``crash`` /
``hang`` strike node ``worker``'s process, ``hardware`` fails node ``worker``'s hardware (with a timing: while it
runs, found by the periodic check; without: found by the environment pre-check, or -- with fault tolerance off --
when the workload starts), ``preflight`` fails pre-check ``item`` (only with fault tolerance on: without it the
pre-check does not run). See ``modelarts/runs.py``.

``match.nth`` counts, per fault, the matching calls of its RPC for create/get-time faults, and the
matching jobs in creation order for the others. A TPU node's display name is its node id, so a fault can strike
one slice of a multislice group: ``match: {display_name: "*-a1-1"}`` is slice 1 of an attempt's first group.
Running faults strike ``after_seconds`` of real time
after the job's processes started, or when the workload reaches ``at_step`` (seen from a complete
checkpoint under ``AIP_CHECKPOINT_DIR`` -- ``step_source: checkpoint`` -- or a log line matching
``log_pattern``, whose first group is the step -- ``step_source: log``); with neither, at once.
``times`` is how many times the fault fires in all (``null``: every time); ``probability`` draws from
the run's seed, so a run is reproducible. The seed is the emulator's configured one when it is given
(``EmulatorConfig(seed=N)``, ``resilient-emulator --seed N``, the pytest marker's ``seed=N``), else the
plan's ``seed`` (0 without a plan); it applies to faults added at run time as much as to the plan's.
``active_seconds: [from, until]`` limits a fault to a window of real seconds since the plan was loaded
(the emulator started or was reset), e.g. a capacity outage::

      - kind: stockout              # us-central1 has no capacity from 30 s to 90 s; other regions do
        match: {location: us-central1}
        times: null
        active_seconds: [30, 90]
"""

from __future__ import annotations

import fnmatch
import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FaultKind = Literal["crash", "oom", "worker_failure", "stockout", "internal_error", "hang", "quota", "unavailable",
                    "maintenance", "preemption", "unhealthy", "never_provision", "hardware", "preflight",
                    "scheduled_maintenance"]
CREATE_KINDS = frozenset({"quota"})
GET_KINDS = frozenset({"unavailable"})
PROVISIONING_KINDS = frozenset({"stockout"})
RUNNING_KINDS = frozenset({"crash", "oom", "worker_failure", "internal_error", "hang", "preemption"})
#: Faults of a running Cloud TPU node. ``crash`` and ``hang`` strike the workload process
#: of worker ``worker`` (the newest process of its startup script): a crash whose exit code means a signal
#: (6/134 SIGABRT, 11/139 SIGSEGV, 15/143 SIGTERM) delivers that signal; any other code is a SIGKILL
#: (the process reports 137), since the emulator cannot make a process exit with a chosen code.
TPU_RUNNING_KINDS = frozenset({"crash", "hang", "maintenance", "preemption", "unhealthy", "hardware",
                               "scheduled_maintenance"})
#: Faults of a TPU VM's make-up, struck as its workers boot (before the startup script runs); the worker
#: runner's pre-check finds them: ``hardware`` without ``at_step`` / ``after_seconds`` (``chips`` of worker ``worker``'s
#: TPU device files are missing; with a timing they vanish while it runs, for the periodic check), and
#: ``preflight`` (the environment fails ``item`` on sound hardware: ``dns`` -- a host of the slice does not
#: resolve; ``disk-size root`` -- 1 GB free; ``disk-size shm`` -- Docker's 64 MiB ``/dev/shm``).
TPU_BOOT_KINDS = frozenset({"hardware", "preflight"})
QUEUED_RESOURCE_KINDS = frozenset({"never_provision"})
#: Faults of a running ModelArts training job (``service: modelarts``): ``crash`` / ``hang`` strike node ``worker``'s
#: process; ``hardware`` with a timing fails the node's hardware under it (the process dies with it).
MODELARTS_RUNNING_KINDS = frozenset({"crash", "hang", "hardware"})
#: Faults a ModelArts job's fault-tolerance environment pre-check finds as its nodes start: ``preflight`` (``item``
#: fails) and ``hardware`` without a timing.
MODELARTS_BOOT_KINDS = frozenset({"hardware", "preflight"})
#: The pre-check items of a TPU VM's worker runner; ModelArts adds ``disk-size cache``, ``ulimit`` and ``gpu-check``.
TPU_PREFLIGHT_ITEMS = frozenset({"dns", "disk-size root", "disk-size shm"})


class Match(BaseModel):
    """Which jobs (or calls) a fault applies to. Empty: all."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    display_name: str | None = Field(None, description="shell-style pattern, e.g. 'train-*'")
    labels: dict[str, str] = Field(default_factory=dict, description="all must be present and equal")
    nth: int | None = Field(None, ge=1, description="the n-th matching job (or call, for quota/unavailable)")
    platform_attempt: int | None = Field(None, ge=1, description="only in this platform attempt of the job")
    location: str | None = Field(None, description="only jobs in this Vertex AI region or TPU zone; a region "
                                                   "also matches its zones ('us-central1' matches 'us-central1-a')")

    def selects(self, display_name: str, labels: Mapping[str, str], name: str = "") -> bool:
        """Whether a job (or call) with this display name, labels and resource name
        (``projects/P/locations/L/...``; empty when unknown) is matched."""
        if self.display_name is not None and not fnmatch.fnmatchcase(display_name, self.display_name):
            return False
        if self.location is not None:
            parts = name.split("/")
            where = parts[3] if len(parts) > 3 and parts[2] == "locations" else ""
            if where != self.location and not where.startswith(self.location + "-"):
                return False
        return all(labels.get(k) == v for k, v in self.labels.items())


class Fault(BaseModel):
    """One fault. See the module docstring for kinds and timing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: FaultKind
    match: Match = Match()
    exit_code: int | None = Field(None, description="crash: the exit status the replica reports")
    replica: str = Field("workerpool0-0", description="the replica struck, e.g. workerpool1-0")
    after_seconds: float | None = Field(None, ge=0, description="real seconds after the processes started")
    at_step: int | None = Field(None, ge=0)
    step_source: Literal["checkpoint", "log"] = "checkpoint"
    log_pattern: str = r"(?m)^\s*step[ =:]+(\d+)"
    times: int | None = Field(1, ge=1, description="how many times it fires; null: always")
    probability: float = Field(1.0, ge=0, le=1)
    quota_metric: str = "aiplatform.googleapis.com/custom_model_training_cpus"
    calls: Literal["get", "list"] = Field("get", description="unavailable: Get calls or List calls")
    service: Literal["aiplatform", "tpu", "logging", "modelarts"] = Field(
        "aiplatform", description="quota / unavailable: the API whose calls are refused (tpu: CreateNode and "
                                  "CreateQueuedResource for quota; logging: ListLogEntries); modelarts: every kind "
                                  "strikes ModelArts training jobs only")
    region: str | None = Field(None, description="stockout: the region named (default: the job's)")
    worker: int = Field(0, ge=0, description="TPU: the worker VM struck by crash / hang; ModelArts: the node "
                                             "(VC_TASK_INDEX) struck by crash / hang / hardware / preflight")
    recover: bool = Field(True, description="maintenance: recovers by itself (REPAIRING -> READY) or TERMINATED")
    terminate_reason: str = "Maintenance event without automatic recovery"
    grace_seconds: float = Field(1.0, ge=0, description="preemption (and TPU's terminating maintenance event): "
                                                        "SIGTERM to SIGKILL, real seconds -- the notice (a TPU node "
                                                        "shows READY until it ends)")
    notice_seconds: float = Field(5.0, ge=0, description="scheduled_maintenance: real seconds from the "
                                  "announcement (upcoming_maintenance PENDING) to the window's start")
    window_seconds: float | None = Field(None, ge=0, description="scheduled_maintenance: how long the node is "
                                         "REPAIRING (real seconds; null: the emulator's tpu_repair_seconds)")
    maintenance_type: Literal["SCHEDULED", "UNSCHEDULED"] = "SCHEDULED"
    can_reschedule: bool = True
    health: Literal["TIMEOUT", "UNHEALTHY_TENSORFLOW"] = "TIMEOUT"
    symptoms: tuple[str, ...] = ()
    chips: int | None = Field(None, ge=1, description="hardware: TPU chips of the worker lost (null: all)")
    item: Literal["dns", "disk-size root", "disk-size shm", "disk-size cache", "ulimit", "gpu-check"] = Field(
        "dns", description="preflight: the pre-check item the VM's environment fails (disk-size cache, ulimit and "
                           "gpu-check: ModelArts only)")
    active_seconds: tuple[float, float] | None = Field(
        None, description="[from, until): real seconds since the plan was loaded in which the fault may fire")

    @model_validator(mode="after")
    def _check(self) -> Fault:
        if self.active_seconds is not None and not 0 <= self.active_seconds[0] < self.active_seconds[1]:
            raise ValueError(f"active_seconds must be [from, until) with 0 <= from < until, got "
                             f"{list(self.active_seconds)}")
        if self.kind == "preflight" and self.service != "modelarts" and self.item not in TPU_PREFLIGHT_ITEMS:
            raise ValueError(f"preflight item {self.item!r} is a ModelArts pre-check item (service: modelarts); a TPU "
                             f"VM checks {sorted(TPU_PREFLIGHT_ITEMS)}")
        if self.kind == "crash" and self.exit_code is None:
            raise ValueError("a crash fault needs exit_code (e.g. 139 for SIGSEGV)")
        if self.kind == "crash" and self.exit_code == 0:
            raise ValueError("a crash fault's exit_code must not be 0")
        if self.kind not in RUNNING_KINDS | TPU_RUNNING_KINDS and (self.after_seconds is not None
                                                                   or self.at_step is not None):
            raise ValueError(f"after_seconds / at_step apply to running faults, not to {self.kind}")
        return self


class FaultPlan(BaseModel):
    """A seed and a list of faults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    faults: tuple[Fault, ...] = ()

    @classmethod
    def load(cls, path: str | Path) -> FaultPlan:
        """Read a plan from a ``.yaml``/``.yml`` or ``.json`` file.

        Raises:
            ValueError: naming the file and the bad field.
        """
        text = Path(path).read_text()
        data: Any
        if str(path).endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
        try:
            return cls.model_validate(data or {})
        except ValueError as exc:
            raise ValueError(f"fault plan {path}: {exc}") from exc


class FaultBook:
    """The run-time state of a plan: which jobs and calls each fault matched, how often it fired.

    Thread-safe. The emulator asks it at each point where a fault may strike.

    Args:
        plan: the faults to start with (more can be added at run time with :meth:`add`).
        clock: monotonic seconds, for ``active_seconds``.
        seed: seeds every probability draw, overriding ``plan.seed`` (and the seed of any plan loaded later
            by :meth:`reset`); None: the plan's seed. The emulator passes its configured seed here when one
            was given explicitly.
    """

    def __init__(self, plan: FaultPlan | None = None, clock: Callable[[], float] = time.monotonic, *,
                 seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._seed_override = seed
        self._load(plan)

    def _load(self, plan: FaultPlan | None) -> None:
        self._loaded_at = self._clock()
        self._plan = plan or FaultPlan()
        self._faults: list[Fault] = list(self._plan.faults)
        self._fired: list[int] = [0] * len(self._faults)
        self._jobs: list[list[str]] = [[] for _ in self._faults]  # matching job names, creation order
        self._calls: list[int] = [0] * len(self._faults)  # matching calls counted
        self._created: list[tuple[str, str, dict[str, str], str | None]] = []  # (name, display, labels, service)
        self._ended: set[int] = set()  # faults ended at run time (end()): they fire no more

    @property
    def seed(self) -> int:
        """The seed of the probability draws: the one given to the book when given, else the plan's."""
        return self._plan.seed if self._seed_override is None else self._seed_override

    def add(self, fault: Fault) -> int:
        """Add a fault at run time; returns its index. It applies to matching jobs that exist already too
        (``match.nth`` counts them in creation order)."""
        with self._lock:
            self._faults.append(fault)
            self._fired.append(0)
            self._jobs.append([name for name, display, labels, service in self._created
                               if fault.kind not in CREATE_KINDS | GET_KINDS and _serves(fault, service)
                               and fault.match.selects(display, labels, name)])
            self._calls.append(0)
            return len(self._faults) - 1

    def end(self, index: int) -> int:
        """End fault ``index`` (as returned by :meth:`add`): it fires no more, as if its ``times`` were used up --
        a capacity or quota outage that is over. Returns how many times it fired.

        Raises:
            IndexError: no fault ``index``.
        """
        with self._lock:
            fired = self._fired[index]
            self._ended.add(index)
            return fired

    def faults(self) -> list[dict[str, Any]]:
        """The faults with how often each fired (and ``ended`` for those :meth:`end` stopped)."""
        with self._lock:
            return [{**f.model_dump(), "fired": n, "ended": i in self._ended}
                    for i, (f, n) in enumerate(zip(self._faults, self._fired, strict=True))]

    def fired(self, index: int) -> int:
        """How many times fault ``index`` (as returned by :meth:`add`) has fired."""
        with self._lock:
            return self._fired[index]

    def reset(self, plan: FaultPlan | None = None) -> None:
        with self._lock:
            self._load(plan)

    def job_created(self, name: str, display_name: str, labels: Mapping[str, str], service: str | None = None) -> None:
        """Note a new job so that ``match.nth`` can count jobs in creation order. ``service="modelarts"``: a ModelArts
        training job, seen only by ``service: modelarts`` faults (None: a Google job, seen by the others)."""
        with self._lock:
            self._created.append((name, display_name, dict(labels), service))
            for i, fault in enumerate(self._faults):
                if fault.kind not in CREATE_KINDS | GET_KINDS and _serves(fault, service) \
                        and fault.match.selects(display_name, labels, name):
                    self._jobs[i].append(name)

    def _available(self, i: int) -> bool:
        if i in self._ended:
            return False
        fault = self._faults[i]
        if fault.active_seconds is not None:
            since = self._clock() - self._loaded_at
            if not fault.active_seconds[0] <= since < fault.active_seconds[1]:
                return False
        return fault.times is None or self._fired[i] < fault.times

    def _draw(self, i: int, key: str) -> bool:
        p = self._faults[i].probability
        return p >= 1.0 or random.Random(f"{self.seed}:{i}:{key}:{self._fired[i]}").random() < p

    def on_call(self, kinds: frozenset[str], display_name: str, labels: Mapping[str, str], key: str,
                name: str = "", calls: str = "get", service: str = "aiplatform") -> Fault | None:
        """A create/get-time fault that fires for this call, counting the call for ``match.nth``. ``name``:
        the resource (or the create call's parent, ``projects/P/locations/L``) for ``match.location``.

        With ``nth=k`` the fault fires on the k-th matching call and, while ``times`` allows, the ones after.
        """
        with self._lock:
            for i, fault in enumerate(self._faults):
                if fault.kind not in kinds or not fault.match.selects(display_name, labels, name):
                    continue
                if fault.kind in GET_KINDS and fault.calls != calls:
                    continue
                if fault.service != service:
                    continue
                self._calls[i] += 1
                if fault.match.nth is not None and self._calls[i] < fault.match.nth:
                    continue
                if self._available(i) and self._draw(i, f"{key}:{self._calls[i]}"):
                    self._fired[i] += 1
                    return fault
            return None

    def candidates(self, kinds: frozenset[str], job_name: str, platform_attempt: int,
                   service: str | None = None) -> list[tuple[int, Fault]]:
        """Faults of ``kinds`` that may still strike this job in this platform attempt (``service``: as for
        :meth:`job_created`)."""
        with self._lock:
            out = []
            for i, fault in enumerate(self._faults):
                if fault.kind not in kinds or job_name not in self._jobs[i] or not self._available(i) \
                        or not _serves(fault, service):
                    continue
                nth = fault.match.nth
                if nth is not None and self._jobs[i].index(job_name) + 1 != nth:
                    continue
                if fault.match.platform_attempt not in (None, platform_attempt):
                    continue
                out.append((i, fault))
            return out

    def fire(self, index: int, key: str) -> bool:
        """Fire fault ``index`` if it still may and its probability draw succeeds."""
        with self._lock:
            if not self._available(index) or not self._draw(index, key):
                return False
            self._fired[index] += 1
            return True


def _serves(fault: Fault, service: str | None) -> bool:
    """Whether ``fault`` may strike a job of ``service`` ("modelarts"; None: a Google job -- Vertex AI or TPU)."""
    return (fault.service == "modelarts") == (service == "modelarts")
