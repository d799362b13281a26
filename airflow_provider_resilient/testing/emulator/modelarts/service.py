"""ModelArts training jobs and their verbs (moto-style backend): jobs keyed by project id, verbs named after the SDK's
operations (``create_training_job``, ``show_training_job_details`` ...) taking and returning the API's JSON shapes
(dicts, as in ``huaweicloudsdkmodelarts.v1.model``). The wire layer only unpacks and packs. Getters never advance
state: :meth:`ModelArtsService.tick`, called by the engine thread, does.

Every node of a job runs ``algorithm.command`` with ``bash -c`` as a local process (through the emulator's runner,
like a Vertex AI replica). Its environment: the emulator's workload environment, ModelArts' preset variables
("Managing Environment Variables of a Training Container",
https://support.huaweicloud.com/intl/en-us/usermanual-standard-modelarts/develop-modelarts-0104.html) -- ``MA_HOME``,
``MA_JOB_DIR``, ``MA_MOUNT_PATH``, ``MA_LOG_DIR`` (directories of the node under the emulator's work directory),
``MA_CURRENT_IP`` (the emulator's advertised host), ``MA_NUM_GPUS`` (the flavor's accelerators), ``MA_TASK_NAME``
(``worker``), ``MA_NUM_HOSTS`` / ``VC_WORKER_NUM`` (``node_count``), ``VC_TASK_INDEX`` (0..n-1), ``VC_WORKER_HOSTS``
(every node's host, comma-separated: the advertised host, since all nodes are local) and ``MA_VJ_NAME``
(``ma-job-<id>``, the job-metadata variable training scripts read) -- then ``algorithm.environments``, which override
the presets as the page allows.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..config import EmulatorConfig
from ..faults import CREATE_KINDS, GET_KINDS, FaultBook
from . import catalog, errors
from .runs import RETRY_ANNOTATION, NodePlan, TrainingRun, precheck_items

log = logging.getLogger(__name__)

#: The environment variable naming a job's checkpoint directory (local or ``obs://``), watched by ``at_step`` faults.
CHECKPOINT_ENV = "RESILIENT_CHECKPOINT_DIR"
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _dict(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise errors.invalid_param(where)
    return value


class ModelArtsService:
    """All training jobs of the emulated ModelArts.

    Args:
        config: latencies, time scale, platform rules.
        faults: the fault book shared with the other services (``service: modelarts`` faults strike here).
        work_dir: node logs go to ``work_dir/modelarts/<job id>/worker-<i>.log``.
        workload_env: the environment every node starts from.
        clock: the emulator's clock.
        region: the region served (``match.location`` of faults).
        host: the advertised host (``MA_CURRENT_IP``, ``VC_WORKER_HOSTS``).
        checkpoint_fs: ``(prefix) -> fsspec filesystem or None`` to list an ``obs://`` checkpoint directory for
            ``at_step`` faults (None: only local directories are watched).
    """

    def __init__(self, config: EmulatorConfig, faults: FaultBook, work_dir: Path,
                 workload_env: Callable[[], dict[str, str]], clock: Clock, *, region: str = catalog.DEFAULT_REGION,
                 host: str = "127.0.0.1", checkpoint_fs: Callable[[str], Any] | None = None) -> None:
        self.config = config
        self.faults = faults
        self.work_dir = work_dir
        self.workload_env = workload_env
        self.clock = clock
        self.region = region
        self.host = host
        self.checkpoint_fs = checkpoint_fs
        self.lock = threading.RLock()
        self.runs: dict[str, TrainingRun] = {}  # job id -> run
        self.projects: dict[str, str] = {}  # job id -> project id
        self.tags: dict[str, dict[str, str]] = {}  # job id -> TMS tags
        self._rng = random.Random(f"modelarts:{config.seed or 0}")

    # ------------------------------------------------------------------ helpers
    def _key(self, project: str, job_id: str) -> str:
        return f"projects/{project}/locations/{self.region}/trainingJobs/{job_id}"

    def _run(self, project: str, job_id: str) -> TrainingRun:
        run = self.runs.get(job_id)
        if run is None or self.projects.get(job_id) != project:
            raise errors.job_not_found(job_id)
        return run

    def _labels(self, run: TrainingRun) -> dict[str, str]:
        return {**(run.job["metadata"].get("annotations") or {}), **self.tags.get(run.job_id, {})}

    def _view(self, run: TrainingRun) -> dict[str, Any]:
        return {**run.job, "status": run.status()}

    def _retry_limit(self, annotations: dict[str, Any]) -> int:
        value = annotations.get(RETRY_ANNOTATION)
        if value is None:
            return 0
        maximum = self.config.platform.modelarts_job_retry_max
        if not isinstance(value, str) or not value.isdigit() or not 1 <= int(value) <= maximum:
            raise errors.invalid_param(f"metadata.annotations.{RETRY_ANNOTATION}: an integer from 1 to {maximum}, "
                                       f"got {value!r}")
        return int(value)

    def _plans(self, job_id: str, algorithm: dict[str, Any], nodes: int, gpus: int) -> list[NodePlan]:
        command = algorithm.get("command")
        if not command:
            args = " ".join(f"--{p['name']}={p.get('value', '')}" for p in algorithm.get("parameters") or []
                            if isinstance(p, dict) and p.get("name"))
            command = f"python {algorithm['boot_file']} {args}".strip()
        user_env = {str(k): str(v) for k, v in _dict(algorithm.get("environments"), "algorithm.environments").items()}
        base = self.workload_env()
        plans = []
        for index in range(nodes):
            home = self.work_dir / "modelarts" / job_id / f"worker-{index}"
            preset = {"MA_HOME": str(home), "MA_MOUNT_PATH": str(home / "modelarts"),
                      "MA_JOB_DIR": str(home / "modelarts" / "user-job-dir"),
                      "MA_LOG_DIR": str(home / "modelarts" / "log"), "MA_CURRENT_IP": self.host,
                      "MA_NUM_GPUS": str(gpus), "MA_TASK_NAME": "worker", "MA_NUM_HOSTS": str(nodes),
                      "VC_TASK_INDEX": str(index), "VC_WORKER_NUM": str(nodes),
                      "VC_WORKER_HOSTS": ",".join([self.host] * nodes), "MA_VJ_NAME": f"ma-job-{job_id}"}
            for directory in ("MA_JOB_DIR", "MA_LOG_DIR"):
                Path(preset[directory]).mkdir(parents=True, exist_ok=True)
            plans.append(NodePlan(f"worker-{index}", ["bash", "-c", command], {**base, **preset, **user_env}))
        return plans

    # ------------------------------------------------------------------ training job verbs
    def create_training_job(self, project: str, body: Any) -> dict[str, Any]:
        """CreateTrainingJob. Raises ModelArtsError: 2788 (invalid parameter: name, job-retry-num, node count ...),
        2806 (no command), 2781 (unknown flavor), 2793 (too many nodes), 2751 (name in use), 2815 (quota fault)."""
        body = _dict(body, "body")
        metadata = _dict(body.get("metadata"), "metadata")
        name = metadata.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise errors.invalid_param("metadata.name")
        annotations = _dict(metadata.get("annotations"), "metadata.annotations")
        if not all(isinstance(v, str) for v in annotations.values()):
            raise errors.invalid_param("metadata.annotations: values are strings")
        retry_limit = self._retry_limit(annotations)
        algorithm = _dict(body.get("algorithm"), "algorithm")
        engine = _dict(algorithm.get("engine"), "algorithm.engine")
        if not algorithm.get("command") and (engine.get("image_url") or not algorithm.get("boot_file")):
            raise errors.must_have_command()
        resource = _dict(_dict(body.get("spec"), "spec").get("resource"), "spec.resource")
        nodes = resource.get("node_count", 1)
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
            raise errors.invalid_param("spec.resource.node_count")
        flavor_id = resource.get("flavor_id")
        entry = catalog.flavor(flavor_id) if isinstance(flavor_id, str) else None
        if not resource.get("pool_id"):  # a dedicated pool has flavors of its own
            if entry is None:
                raise errors.flavor_not_found(str(flavor_id))
            if nodes > entry["max_num"]:
                raise errors.flavor_out_of_range(nodes, entry["max_num"])
        with self.lock:
            if any(self.projects[i] == project and r.job["metadata"]["name"] == name for i, r in self.runs.items()):
                raise errors.duplicate_name(name)
        fault = self.faults.on_call(CREATE_KINDS, name, annotations, f"create:{project}:{name}",
                                    f"projects/{project}/locations/{self.region}", service="modelarts")
        if fault is not None:
            default = "aiplatform.googleapis.com/custom_model_training_cpus"
            raise errors.quota_exceeded(fault.quota_metric if fault.quota_metric != default else str(flavor_id))
        with self.lock:
            job_id = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            job = {"kind": body.get("kind") or "job",
                   "metadata": {"id": job_id, "name": name, "workspace_id": metadata.get("workspace_id") or "0",
                                "description": metadata.get("description") or "",
                                "create_time": int(self.clock.time() * 1000), "user_name": "emulator",
                                "annotations": dict(annotations)},
                   "algorithm": {**algorithm, "environments": [dict(algorithm.get("environments") or {})]},
                   "spec": {**_dict(body.get("spec"), "spec"), "resource": {**resource, "node_count": nodes}}}
            gpus = catalog.accelerators(entry)
            user_env = algorithm.get("environments") or {}
            if self.checkpoint_fs is not None and str(user_env.get(CHECKPOINT_ENV, "")).startswith("obs://"):
                self.checkpoint_fs(str(user_env[CHECKPOINT_ENV]))  # its bucket exists before the workload writes
            plans = self._plans(job_id, algorithm, nodes, gpus)
            run = TrainingRun(job=job, key=self._key(project, job_id), plans=plans,
                              log_dir=self.work_dir / "modelarts" / job_id, config=self.config, faults=self.faults,
                              clock=self.clock, retry_limit=retry_limit,
                              items=precheck_items(str(flavor_id), gpus, self.region),
                              checkpoint_prefix=user_env.get(CHECKPOINT_ENV), checkpoint_fs=self.checkpoint_fs)
            self.runs[job_id] = run
            self.projects[job_id] = project
            self.faults.job_created(run.key, name, annotations, service="modelarts")
            run.start(self.clock.monotonic())
            return self._view(run)

    def show_training_job_details(self, project: str, job_id: str) -> dict[str, Any]:
        """ShowTrainingJobDetails. Raises 2775 (not found), 0010 (an ``unavailable`` fault)."""
        with self.lock:
            run = self._run(project, job_id)
            if self.faults.on_call(GET_KINDS, run.job["metadata"]["name"], self._labels(run), f"get:{job_id}",
                                   run.key, calls="get", service="modelarts") is not None:
                raise errors.internal_error()
            return self._view(run)

    def stop_training_job(self, project: str, job_id: str, body: Any) -> dict[str, Any]:
        """StopTrainingJob (``{"action_type": "terminate"}``). Raises 2812 (another action), 2796 (not stoppable)."""
        action = _dict(body, "body").get("action_type")
        if action != "terminate":
            raise errors.unsupported_action(str(action))
        with self.lock:
            run = self._run(project, job_id)
            if not run.can_terminate():
                raise errors.not_allowed_to_terminate()
            run.terminate(self.clock.monotonic())
            return self._view(run)

    def delete_training_job(self, project: str, job_id: str) -> None:
        """DeleteTrainingJob: the job goes (its processes killed if it still ran)."""
        with self.lock:
            run = self._run(project, job_id)
            run.kill_all()
            del self.runs[job_id], self.projects[job_id]
            self.tags.pop(job_id, None)

    def list_training_job_events(self, project: str, job_id: str, query: dict[str, str]) -> dict[str, Any]:
        """ListTrainingJobEvents: ``offset`` (a page number), ``limit`` (1-100, default 50), ``order`` (asc/desc, by
        time), ``level`` (Info/Warning/Error), ``pattern`` (a substring), ``start_time`` + ``end_time`` (ms)."""
        offset, limit = _int(query, "offset", 0, 0), _int(query, "limit", 50, 1, 100)
        order = query.get("order", "asc")
        if order not in ("asc", "desc"):
            raise errors.invalid_param("order")
        if ("start_time" in query) != ("end_time" in query):
            raise errors.invalid_param("start_time and end_time go together")
        with self.lock:
            events = list(self._run(project, job_id).events)
        if "start_time" in query:
            start, end = _int(query, "start_time", 0, 0), _int(query, "end_time", 0, 0)
            events = [e for e in events if start <= int(e["_ms"]) <= end]
        if query.get("level"):
            events = [e for e in events if e["level"] == query["level"]]
        if query.get("pattern"):
            events = [e for e in events if query["pattern"] in e["message"]]
        if order == "desc":
            events.reverse()
        page = [{k: v for k, v in e.items() if k != "_ms"} for e in events[offset * limit:(offset + 1) * limit]]
        return {"total": len(events), "limit": limit, "offset": offset, "order": order,
                "start_time": query.get("start_time", ""), "end_time": query.get("end_time", ""), "events": page}

    def list_training_job_stages(self, project: str, job_id: str) -> dict[str, Any]:
        """ListTrainingJobStages: one stage record per issue of the job (the largest ``record_order`` is current)."""
        with self.lock:
            records = self._run(project, job_id).stage_view()
        return {"total_count": len(records), "running_records": records}

    def list_training_job_tasks(self, project: str, job_id: str) -> list[dict[str, Any]]:
        with self.lock:
            run = self._run(project, job_id)
            return [{"task": p.task, "ip": self.host, "host_ip": self.host, "schedule_count": run.attempt}
                    for p in run.plans]

    def list_training_jobs(self, project: str, body: Any) -> dict[str, Any]:
        """ListTrainingJobs (POST training-job-searches): ``filters`` [{key, operator, value}] on ``name`` (like: a
        substring; in; not) and ``phase`` (in; not), ``tags`` [{key, values}], ``offset`` (a page) and ``limit`` (1-50,
        default 10), newest first unless ``order`` is ``asc``."""
        body = _dict(body, "body")
        if self.faults.on_call(GET_KINDS, "", {}, f"list:{project}", f"projects/{project}/locations/{self.region}",
                               calls="list", service="modelarts") is not None:
            raise errors.internal_error()
        offset, limit = _int(body, "offset", 0, 0), _int(body, "limit", 10, 1, 50)
        with self.lock:
            runs = [r for i, r in self.runs.items() if self.projects[i] == project]
            total = len(runs)
            for condition in body.get("filters") or []:
                runs = [r for r in runs if _filter_matches(_dict(condition, "filters"), r)]
            for tag in body.get("tags") or []:
                runs = [r for r in runs if _tag_matches(_dict(tag, "tags"), self.tags.get(r.job_id, {}))]
            runs.sort(key=lambda r: r.job["metadata"]["create_time"], reverse=body.get("order", "desc") != "asc")
            items = [self._view(r) for r in runs[offset * limit:(offset + 1) * limit]]
        return {"total": total, "count": len(runs), "limit": limit, "offset": offset, "sort_by": "create_time",
                "order": body.get("order", "desc"), "workspace_id": body.get("workspace_id", "0"), "items": items}

    # ------------------------------------------------------------------ TMS tags
    def create_train_job_tags(self, project: str, job_id: str, body: Any) -> dict[str, Any]:
        """CreateTrainJobTags: add or overwrite ``tags`` [{key, value}]."""
        tags = _tag_list(body)
        with self.lock:
            self._run(project, job_id)
            self.tags.setdefault(job_id, {}).update(tags)
        return {}

    def delete_train_job_tags(self, project: str, job_id: str, body: Any) -> dict[str, Any]:
        """DeleteTrainJobTags: remove the keys of ``tags`` [{key, value}] (a value, when given, must match)."""
        tags = _tag_list(body, values_optional=True)
        with self.lock:
            self._run(project, job_id)
            mine = self.tags.setdefault(job_id, {})
            for key, value in tags.items():
                if key in mine and (not value or mine[key] == value):
                    del mine[key]
        return {}

    def show_train_job_tags(self, project: str, job_id: str) -> dict[str, Any]:
        with self.lock:
            self._run(project, job_id)
            return {"tags": [{"key": k, "value": v} for k, v in self.tags.get(job_id, {}).items()]}

    def list_training_job_tags(self, project: str) -> dict[str, Any]:
        """ListTrainingJobTags: every tag key of the project's jobs with its values."""
        with self.lock:
            keys: dict[str, list[str]] = {}
            for job_id, tags in self.tags.items():
                if self.projects.get(job_id) == project:
                    for key, value in tags.items():
                        keys.setdefault(key, [])
                        if value not in keys[key]:
                            keys[key].append(value)
        return {"tags": [{"key": k, "values": v} for k, v in keys.items()]}

    def _tagged(self, project: str, body: Any) -> list[TrainingRun]:
        body = _dict(body, "body")
        with self.lock:
            runs = [r for i, r in self.runs.items() if self.projects[i] == project]
            if body.get("without_any_tag"):
                runs = [r for r in runs if not self.tags.get(r.job_id)]
            for tag in body.get("tags") or []:
                runs = [r for r in runs if _tag_matches(_dict(tag, "tags"), self.tags.get(r.job_id, {}))]
            for match in body.get("matches") or []:
                match = _dict(match, "matches")
                if match.get("key") != "resource_name":
                    raise errors.invalid_param(f"matches.key {match.get('key')!r}: only resource_name")
                runs = [r for r in runs if str(match.get("value", "")) in r.job["metadata"]["name"]]
            return sorted(runs, key=lambda r: r.job["metadata"]["create_time"])

    def list_training_jobs_by_tags(self, project: str, body: Any, query: dict[str, str]) -> dict[str, Any]:
        """ListTrainingJobsByTags (resource-instances/filter): ``tags`` [{key, values}] (every key present, with one
        of ``values`` when given), ``matches`` [{key: resource_name, value}] (a substring of the name),
        ``without_any_tag``; ``offset`` (an index) and ``limit`` (default 1000) in the query."""
        runs = self._tagged(project, body)
        offset, limit = _int(query, "offset", 0, 0), _int(query, "limit", 1000, 1, 1000)
        with self.lock:
            resources = [{"resource_id": r.job_id, "resource_name": r.job["metadata"]["name"], "resource_detail": {},
                          "workspace_id": r.job["metadata"]["workspace_id"],
                          "tags": [{"key": k, "value": v} for k, v in self.tags.get(r.job_id, {}).items()]}
                         for r in runs[offset:offset + limit]]
        return {"resources": resources, "total_count": len(runs)}

    def count_training_jobs_by_tags(self, project: str, body: Any) -> dict[str, Any]:
        return {"total_count": len(self._tagged(project, body))}

    # ------------------------------------------------------------------ flavors
    def show_training_job_flavors(self, flavor_type: str | None = None) -> dict[str, Any]:
        """ShowTrainingJobFlavors, optionally of one ``flavor_type`` (CPU, GPU, Ascend)."""
        if flavor_type and flavor_type not in ("CPU", "GPU", "Ascend"):
            raise errors.invalid_param("flavor_type")
        flavors = [dict(f) for f in catalog.FLAVORS if not flavor_type or f["flavor_type"] == flavor_type]
        return {"total_count": len(flavors), "flavors": flavors}

    # ------------------------------------------------------------------ engine and lifecycle
    def tick(self, now: float) -> None:
        with self.lock:
            runs = list(self.runs.values())
        for run in runs:
            with self.lock:
                if run.job_id not in self.runs:
                    continue
                try:
                    run.advance(now)
                except Exception:  # one broken job never stops the others; the error is in the log
                    log.exception("ModelArts training job %s: advance failed", run.job_id)

    def processes(self) -> list[int]:
        with self.lock:
            return [pid for run in self.runs.values() for pid in run.processes()]

    def summary(self) -> list[dict[str, Any]]:
        """What a leak check reads (control API ``GET /modelarts-jobs``)."""
        with self.lock:
            return [{"id": i, "project_id": self.projects[i], "name": r.job["metadata"]["name"],
                     "phase": r.phases()[0], "secondary_phase": r.phases()[1],
                     "running_records": len(r.running_records), "stage_records": len(r.stage_records)}
                    for i, r in self.runs.items()]

    def reset(self) -> None:
        with self.lock:
            self.shutdown()
            self.runs.clear()
            self.projects.clear()
            self.tags.clear()

    def shutdown(self) -> None:
        with self.lock:
            for run in self.runs.values():
                run.kill_all()


def _int(source: dict[str, Any], key: str, default: int, low: int, high: int | None = None) -> int:
    value = source.get(key, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise errors.invalid_param(key) from None
    if number < low or (high is not None and number > high):
        raise errors.invalid_param(key)
    return number


def _tag_list(body: Any, *, values_optional: bool = False) -> dict[str, str]:
    tags = _dict(body, "body").get("tags")
    if not isinstance(tags, list) or not tags:
        raise errors.invalid_param("tags")
    out = {}
    for tag in tags:
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str) or not tag["key"] \
                or not (values_optional or isinstance(tag.get("value"), str)):
            raise errors.invalid_param("tags")
        out[tag["key"]] = str(tag.get("value") or "")
    return out


def _tag_matches(condition: dict[str, Any], tags: dict[str, str]) -> bool:
    key, values = condition.get("key"), condition.get("values") or []
    return key in tags and (not values or tags[key] in values)


def _filter_matches(condition: dict[str, Any], run: TrainingRun) -> bool:
    key, operator, values = condition.get("key"), condition.get("operator", "in"), condition.get("value") or []
    if key == "name":
        actual = run.job["metadata"]["name"]
    elif key in ("phase", "status"):
        actual = run.phases()[0]
    else:
        raise errors.invalid_param(f"filters.key {key!r}: name or phase")
    if operator == "like":
        return any(str(v) in actual for v in values)
    if operator == "in":
        return actual in values
    if operator == "not":
        return actual not in values
    raise errors.invalid_param(f"filters.operator {operator!r}: like, in or not")
