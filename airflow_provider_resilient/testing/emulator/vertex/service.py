"""Vertex AI JobService resources and verbs (moto-style backend): state keyed by project and location.

Verbs are named after the RPCs (``create_custom_job``, ``get_custom_job`` ...) and take and return
proto-plus messages of ``google.cloud.aiplatform_v1``; the wire layer only unpacks and packs. Getters
never advance state: :meth:`VertexService.tick`, called by the engine thread, does.
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import tarfile
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..clock import Clock, SystemClock
from ..config import EmulatorConfig
from ..errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, Unavailable
from ..faults import CREATE_KINDS, GET_KINDS, FaultBook
from ..filters import FilterError, compile_filter
from ..operations import OperationStore
from .runs import JobRun
from .specs import parse_parent, plan_replicas, validate_job_spec, validate_labels
from .tuning import TERMINAL, TuningRun

log = logging.getLogger(__name__)

#: The log of a job's service entries, before the job id (``ml.googleapis.com/<job_id>``, URL-encoded).
SERVICE_LOG_ID = "ml.googleapis.com%2F"


def _log_target(job_name: str) -> tuple[str, str]:
    """(project, job id) of a job's Cloud Logging entries: ``projects/P/locations/L/customJobs/ID`` -> (P, ID); a
    trial's (``.../hyperparameterTuningJobs/ID/trials/N``) -> (P, the tuning job's ID)."""
    return job_name.split("/")[1], job_name.split("/trials/")[0].rsplit("/", 1)[-1]


def _types() -> Any:
    from google.cloud.aiplatform_v1 import types

    return types


class VertexService:
    """All CustomJobs and HyperparameterTuningJobs of the emulator.

    Args:
        config: latencies, time scale, platform rules.
        faults: the fault book shared with the other services.
        operations: where DeleteCustomJob's long-running operations are kept.
        work_dir: replica log files go to ``work_dir/vertex/<job id>/<replica>.log``.
        workload_env: the environment every replica starts from (PATH, STORAGE_EMULATOR_HOST ...).
        ensure_bucket: creates a Cloud Storage bucket if missing; called for ``base_output_directory``.
        storage_fs: returns the fsspec filesystem of the emulated Cloud Storage (to watch checkpoints).
        clock: where every verb and tick reads the time (:mod:`..clock`; default: real time).
        logs: the emulated Cloud Logging (:class:`~..cloud_logging.service.LogStore`): each replica's output goes
            there as Vertex AI ships it (:meth:`log_sink`); None: to the log files only.
    """

    def __init__(self, config: EmulatorConfig, faults: FaultBook, operations: OperationStore, work_dir: Path,
                 workload_env: Callable[[], dict[str, str]],
                 ensure_bucket: Callable[[str], None] = lambda bucket: None,
                 storage_fs: Callable[[], Any] | None = None, clock: Clock | None = None, logs: Any = None) -> None:
        self.config = config
        self.logs = logs
        self.clock: Clock = clock or SystemClock()
        self.faults = faults
        self.operations = operations
        self.work_dir = work_dir
        self.workload_env = workload_env
        self.ensure_bucket = ensure_bucket
        self.storage_fs = storage_fs
        self.lock = threading.RLock()
        self.runs: dict[str, JobRun] = {}  # CustomJob name -> run
        self.tuning: dict[str, TuningRun] = {}  # HyperparameterTuningJob name -> run
        self._broken: set[int] = set()  # resources whose advance() raised (logged once)
        self._ids = itertools.count(1_000_000_000_000_000_000 + (config.seed or 0) * 1000)

    # ------------------------------------------------------------------ helpers
    def _new_id(self) -> str:
        return str(next(self._ids))

    def _run(self, name: str) -> JobRun:
        run = self.runs.get(name)
        if run is None:
            raise NotFound(f'The CustomJob "{name}" does not exist.')
        return run

    def log_dir(self, name: str) -> Path:
        return self.work_dir / "vertex" / name.rsplit("/", 1)[-1]

    def log_sink(self, job_name: str, trial_id: str | None = None) -> Callable[[str, list[str]], None] | None:
        """What ships a job's replica output to Cloud Logging, as Vertex AI does (the filter ``gcloud ai
        custom-jobs stream-logs`` uses: ``resource.type="ml_job" resource.labels.job_id="<id>"``, and
        ``resource.labels.task_name`` for one replica): an INFO entry per line in log
        ``projects/P/logs/<replica>`` (``workerpool0-0``), resource ``ml_job`` with labels ``project_id``,
        ``job_id`` (a trial's: its tuning job's) and ``task_name``; a trial's entries carry label
        ``ml.googleapis.com/trial_id``. None without :attr:`logs`."""
        if self.logs is None:
            return None
        store, (project, job_id) = self.logs, _log_target(job_name)
        labels = {"ml.googleapis.com/trial_id": trial_id} if trial_id else None

        def ship(replica: str, lines: list[str]) -> None:
            resource = {"type": "ml_job", "labels": {"project_id": project, "job_id": job_id, "task_name": replica}}
            store.write_log_entries(f"projects/{project}/logs/{replica}", resource, labels,
                                    [{"text_payload": line, "severity": "INFO"} for line in lines])

        return ship

    def service_log(self, job_name: str, trial_id: str | None = None) -> Callable[[str, str], None] | None:
        """What writes the Vertex AI service's own entries about a job (``(severity, text)``: a replica's non-zero
        exit, the job's end; :class:`~.runs.JobRun` says when): one entry in log
        ``projects/P/logs/ml.googleapis.com%2F<job_id>``, resource ``ml_job`` with labels ``project_id``,
        ``job_id`` (a trial's: its tuning job's) and ``task_name`` = ``service``; a trial's entry carries label
        ``ml.googleapis.com/trial_id``, as :meth:`log_sink`'s do. The writer never raises (a failed write is
        logged). None without :attr:`logs`."""
        if self.logs is None:
            return None
        store, (project, job_id) = self.logs, _log_target(job_name)
        labels = {"ml.googleapis.com/trial_id": trial_id} if trial_id else None
        resource = {"type": "ml_job", "labels": {"project_id": project, "job_id": job_id, "task_name": "service"}}

        def write(severity: str, text: str) -> None:
            try:
                store.write_log_entries(f"projects/{project}/logs/{SERVICE_LOG_ID}{job_id}", resource, labels,
                                        [{"text_payload": text, "severity": severity}])
            except Exception:  # Cloud Logging's trouble is never the job's
                log.warning("emulator: writing the service entry of %s failed", job_name, exc_info=True)

        return write

    def _check_create_faults(self, display_name: str, labels: dict[str, str], key: str, parent: str) -> None:
        fault = self.faults.on_call(CREATE_KINDS, display_name, labels, key, parent)
        if fault is not None:
            raise ResourceExhausted(f"The following quota metrics exceed quota limits: {fault.quota_metric}")

    def _check_get_faults(self, display_name: str, labels: dict[str, str], key: str, name: str) -> None:
        if self.faults.on_call(GET_KINDS, display_name, labels, key, name) is not None:
            raise Unavailable("The service is currently unavailable.")

    def make_run(self, job: Any, region: str, *, extra_args: list[str] | None = None,
                  trial_id: str | None = None, log_dir: Path | None = None) -> JobRun:
        job_id = job.name.rsplit("/", 1)[-1]
        base = job.job_spec.base_output_directory.output_uri_prefix
        if base.startswith("gs://"):
            self.ensure_bucket(base[5:].split("/", 1)[0])
        env = self.workload_env()
        packages = self._fetch_packages(job, log_dir or self.log_dir(job.name))
        if packages:
            env["PYTHONPATH"] = os.pathsep.join([*packages, *filter(None, [env.get("PYTHONPATH")])])
        plans = plan_replicas(job.job_spec, job_id=job_id, base_env=env, extra_args=extra_args, trial_id=trial_id)
        checkpoint = dict(plans[0].env).get("AIP_CHECKPOINT_DIR")
        return JobRun(job=job, plans=plans, log_dir=log_dir or self.log_dir(job.name), config=self.config,
                      faults=self.faults, region=region, checkpoint_prefix=checkpoint, storage_fs=self.storage_fs,
                      clock=self.clock, log_sink=self.log_sink(job.name, trial_id),
                      service_log=self.service_log(job.name, trial_id))

    def _fetch_packages(self, job: Any, log_dir: Path) -> list[str]:
        """What Vertex AI does with ``python_package_spec.package_uris`` before ``python -m``: the packages stored
        in the emulated Cloud Storage (a source distribution ``.tar.gz``, or a ``.whl`` / ``.zip``) are fetched
        and unpacked under the job's log directory; the directories to put on ``PYTHONPATH`` (pure-Python
        packages only: nothing is built). A URI not in the emulated storage is left alone: the module must then
        be importable as it is (the emulator's older habit, which tests of other things rely on)."""
        uris = [u for pool in job.job_spec.worker_pool_specs if "python_package_spec" in pool
                for u in pool.python_package_spec.package_uris if u.startswith("gs://")]
        if not uris or self.storage_fs is None:
            return []
        roots: list[str] = []
        for n, uri in enumerate(dict.fromkeys(uris)):
            try:
                data = self.storage_fs().cat_file(uri[5:])
            except FileNotFoundError:
                continue
            target = log_dir / "packages" / str(n)
            target.mkdir(parents=True, exist_ok=True)
            if uri.endswith((".tar.gz", ".tgz")):
                with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                    archive.extractall(target, filter="data")
                # an sdist holds one top directory (name-version/) with the package inside
                tops = [p for p in target.iterdir() if p.is_dir()]
                roots += [str(tops[0])] if len(tops) == 1 else [str(target)]
            else:
                with zipfile.ZipFile(io.BytesIO(data)) as archive:
                    archive.extractall(target)
                roots.append(str(target))
        return roots

    # ------------------------------------------------------------------ CustomJob verbs
    def create_custom_job(self, parent: str, custom_job: Any) -> Any:
        """CreateCustomJob: validate, assign an id, QUEUED. Raises InvalidArgument / ResourceExhausted."""
        _, region = parse_parent(parent)
        if not custom_job.display_name:
            raise InvalidArgument("List of found errors: 1.Field: custom_job.display_name; "
                                  "Message: Required field is not set.")
        validate_labels(dict(custom_job.labels), "custom_job.labels")
        validate_job_spec(custom_job.job_spec)
        self._check_create_faults(custom_job.display_name, dict(custom_job.labels), f"create:{parent}", parent)
        types = _types()
        with self.lock:
            job = types.CustomJob(custom_job)
            job.name = f"{parent}/customJobs/{self._new_id()}"
            now = self.clock.now()
            job.create_time = now
            job.update_time = now
            for output_only in ("state", "start_time", "end_time", "error"):
                if output_only in job:
                    delattr(job, output_only)
            run = self.make_run(job, region)
            self.runs[job.name] = run
            self.faults.job_created(job.name, job.display_name, dict(job.labels))
            run.start(self.clock.monotonic())
            return types.CustomJob(job)

    def get_custom_job(self, name: str) -> Any:
        with self.lock:
            run = self._run(name)
            self._check_get_faults(run.job.display_name, dict(run.job.labels), f"get:{name}", name)
            return _types().CustomJob(run.job)

    def list_custom_jobs(self, parent: str, filter_text: str = "", page_size: int = 0,
                         page_token: str = "") -> tuple[list[Any], str]:
        """ListCustomJobs with the filter language (labels, state, display_name, create_time; AND/OR/NOT)."""
        if self.faults.on_call(GET_KINDS, "", {}, f"list:{parent}:{page_token}", parent, calls="list") is not None:
            raise Unavailable("The service is currently unavailable.")
        return self._list(self.runs, _types().CustomJob, parent, filter_text, page_size, page_token)

    def cancel_custom_job(self, name: str) -> None:
        with self.lock:
            run = self._run(name)
            if run.done:
                raise FailedPrecondition(f'Cannot cancel CustomJob "{name}": it is already in state '
                                         f"{run.job.state.name}.")
            run.cancel(self.clock.monotonic())

    def delete_custom_job(self, name: str) -> Any:
        """DeleteCustomJob: only a job in a terminal state; returns a done long-running operation."""
        with self.lock:
            run = self._run(name)
            if not run.done:
                raise FailedPrecondition(f'CustomJob "{name}" is in state {run.job.state.name}; only jobs in a '
                                         "terminal state can be deleted. Cancel it first.")
            del self.runs[name]
        return self.operations.done_delete(name)

    # ------------------------------------------------------------------ HyperparameterTuningJob verbs
    def create_hyperparameter_tuning_job(self, parent: str, tuning_job: Any) -> Any:
        _, region = parse_parent(parent)
        if not tuning_job.display_name:
            raise InvalidArgument("List of found errors: 1.Field: hyperparameter_tuning_job.display_name; "
                                  "Message: Required field is not set.")
        if tuning_job.max_trial_count <= 0:
            raise InvalidArgument("List of found errors: 1.Field: hyperparameter_tuning_job.max_trial_count; "
                                  "Message: must be positive.")
        if not tuning_job.study_spec.parameters or not tuning_job.study_spec.metrics:
            raise InvalidArgument("List of found errors: 1.Field: hyperparameter_tuning_job.study_spec; "
                                  "Message: metrics and parameters are required.")
        validate_labels(dict(tuning_job.labels), "hyperparameter_tuning_job.labels")
        validate_job_spec(tuning_job.trial_job_spec, "hyperparameter_tuning_job.trial_job_spec")
        self._check_create_faults(tuning_job.display_name, dict(tuning_job.labels), f"create:{parent}", parent)
        types = _types()
        with self.lock:
            job = types.HyperparameterTuningJob(tuning_job)
            job.name = f"{parent}/hyperparameterTuningJobs/{self._new_id()}"
            job.create_time = job.update_time = self.clock.now()
            job.state = types.JobState.JOB_STATE_QUEUED
            self.tuning[job.name] = TuningRun(self, job, region)
            return types.HyperparameterTuningJob(job)

    def _tuning_run(self, name: str) -> TuningRun:
        run = self.tuning.get(name)
        if run is None:
            raise NotFound(f'The HyperparameterTuningJob "{name}" does not exist.')
        return run

    def get_hyperparameter_tuning_job(self, name: str) -> Any:
        with self.lock:
            run = self._tuning_run(name)
            self._check_get_faults(run.job.display_name, dict(run.job.labels), f"get:{name}", name)
            return _types().HyperparameterTuningJob(run.job)

    def list_hyperparameter_tuning_jobs(self, parent: str, filter_text: str = "", page_size: int = 0,
                                        page_token: str = "") -> tuple[list[Any], str]:
        return self._list(self.tuning, _types().HyperparameterTuningJob, parent, filter_text, page_size, page_token)

    def cancel_hyperparameter_tuning_job(self, name: str) -> None:
        """CancelHyperparameterTuningJob: CANCELLING at once, CANCELLED after the cancel latency (see
        :meth:`TuningRun.cancel`). Raises FailedPrecondition for a job already in a terminal state."""
        with self.lock:
            self._tuning_run(name).cancel(self.clock.monotonic())

    def state_name(self, name: str) -> str:
        """The ``JOB_STATE_*`` name of a CustomJob or HyperparameterTuningJob. Raises NotFound."""
        with self.lock:
            run: JobRun | TuningRun | None = self.runs.get(name) or self.tuning.get(name)
            if run is None:
                raise NotFound(f'The job "{name}" does not exist.')
            return str(run.job.state.name)

    def events(self, name: str) -> list[str]:
        """The platform's story of a CustomJob or HyperparameterTuningJob (states, faults, retries, trials)."""
        with self.lock:
            run: JobRun | TuningRun | None = self.runs.get(name) or self.tuning.get(name)
            if run is None:
                raise NotFound(f'The job "{name}" does not exist.')
            return list(run.events)

    def delete_hyperparameter_tuning_job(self, name: str) -> Any:
        with self.lock:
            run = self._tuning_run(name)
            if run.job.state.name not in TERMINAL:
                raise FailedPrecondition(f'HyperparameterTuningJob "{name}" is in state {run.job.state.name}; '
                                         "only jobs in a terminal state can be deleted.")
            del self.tuning[name]
        return self.operations.done_delete(name)

    # ------------------------------------------------------------------ engine
    def tick(self, now: float | None = None) -> None:
        """Advance every job as far as ``now`` (monotonic seconds) allows."""
        now = self.clock.monotonic() if now is None else now
        with self.lock:
            resources: list[JobRun | TuningRun] = [*(r for r in self.runs.values() if not r.done),
                                                   *self.tuning.values()]
            for resource in resources:
                try:
                    resource.advance(now)
                except Exception:  # one job's error must never stop the others; logged once per job
                    if id(resource) not in self._broken:
                        self._broken.add(id(resource))
                        log.exception("emulator: advancing %s failed", resource.job.name)

    def shutdown(self) -> None:
        """Kill every replica process."""
        with self.lock:
            for run in self.runs.values():
                run.kill_all()
            for tuning in self.tuning.values():
                tuning.kill_all()

    def reset(self) -> None:
        self.shutdown()
        with self.lock:
            self.runs.clear()
            self.tuning.clear()

    # ------------------------------------------------------------------ list helpers
    def _list(self, store: dict[str, Any], message_type: Any, parent: str, filter_text: str, page_size: int,
              page_token: str) -> tuple[list[Any], str]:
        """One page of the jobs under ``parent`` that match the filter, as copies of ``message_type``."""
        parse_parent(parent)
        matches = self._compile(filter_text, self.clock.now)
        with self.lock:
            jobs = [r.job for n, r in store.items() if n.startswith(parent + "/") and matches(_as_dict(r.job))]
            return self._page([message_type(j) for j in jobs], page_size, page_token)

    @staticmethod
    def _compile(filter_text: str, now: Callable[[], Any]) -> Callable[[Any], bool]:
        try:
            return compile_filter(filter_text or "", now)
        except FilterError as exc:
            raise InvalidArgument(f"Invalid filter {filter_text!r}: {exc}") from exc

    @staticmethod
    def _page(items: list[Any], page_size: int, page_token: str) -> tuple[list[Any], str]:
        start = int(page_token) if page_token.isdigit() else 0
        if page_token and not page_token.isdigit():
            raise InvalidArgument(f"Invalid page_token {page_token!r}.")
        size = page_size if page_size > 0 else 100
        end = start + size
        return items[start:end], (str(end) if end < len(items) else "")


def _as_dict(message: Any) -> dict[str, Any]:
    """A proto-plus message as the dict the filter language evaluates (enum names, RFC 3339 times)."""
    cls = type(message)
    data: dict[str, Any] = cls.to_dict(message, use_integers_for_enums=False, preserving_proto_field_name=True)
    return data


# Workloads inherit the emulator's PATH etc.; this is the default env factory when none is given.
def default_workload_env() -> dict[str, str]:
    return dict(os.environ)
