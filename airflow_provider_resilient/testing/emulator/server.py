"""The emulator as one object: gRPC services, Cloud Storage, the lifecycle engine and the control API.

The gRPC port serves Vertex AI's JobService, Cloud TPU, Cloud Logging (entries and sinks), Cloud Pub/Sub
(Publisher, Subscriber) and ``google.longrunning.Operations``. Cloud Logging's sinks route entries to topics of
:attr:`Emulator.pubsub` (the LogStore's router is the Pub/Sub store's ``publish``).

The in-process pytest fixture, the standalone command and the demo all use :class:`Emulator`::

    with Emulator(fault_plan=FaultPlan.load("faults.yaml"), config=EmulatorConfig(time_scale=0.01)) as emu:
        os.environ.update(emu.env())          # AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT (emulator_host), STORAGE_EMULATOR_HOST
        client = vertex_job_client("us-central1", emulator=emu.address)   # the real JobServiceClient, on it
        ...                                   # operators with gcp_conn_id="google_cloud_default" use it too
        emu.calls.list("CreateCustomJob")     # the record of every API call

Stopping it kills every replica process it started.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from .calls import CallLog
from .clock import Clock, ManualClock, SystemClock
from .config import EmulatorConfig
from .faults import Fault, FaultBook, FaultPlan
from .operations import OperationStore

#: The emulator's gRPC address (``host:port``) in :meth:`Emulator.env`: for the emulator's own tools and workloads
#: (``testing.emulator_clients``, ``testing.goodput_events``). The provider's operators and hooks never read it:
#: they use an emulator only when their Airflow connection says so (:data:`CONNECTION_ENV`).
EMULATOR_HOST_ENV = "RESILIENT_EMULATOR_HOST"
#: The Airflow connection :meth:`Emulator.env` defines (``google_cloud_default``, the operators' default
#: ``gcp_conn_id``), whose extra ``emulator_host`` points the provider's operators at the emulator.
DEFAULT_CONN_ID = "google_cloud_default"
CONNECTION_ENV = "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"
#: The Airflow connection on the emulated ModelArts that :meth:`Emulator.env` defines (``huaweicloud_default``).
MODELARTS_CONNECTION_ENV = "AIRFLOW_CONN_HUAWEICLOUD_DEFAULT"
ADVANCE_STEP_SECONDS = 1.0  # the longest span of manual time the platform goes without a look (Emulator.advance)

log = logging.getLogger(__name__)


def emulator_connection(address: str) -> str:
    """An Airflow connection (JSON, the value of an ``AIRFLOW_CONN_<ID>`` variable) whose extra ``emulator_host``
    points the provider's operators at the emulator at ``address`` (``host:port``)."""
    return json.dumps({"conn_type": "google_cloud_platform", "extra": {"emulator_host": address}})

#: Bind addresses meaning "every interface": a client cannot dial them, so they are not advertised.
_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", ""})


class Emulator:
    """A local Google Cloud for tests, demos and offline runs.

    Args:
        host: address to bind, loopback by default; ``0.0.0.0`` serves every interface (in a container).
        port: gRPC port (0: a free one).
        fault_plan: faults to inject (see :mod:`.faults`).
        config: latencies, time scale, platform rules, seed. Its ``seed``, when given, seeds fault draws
            (also of faults added at run time and of plans loaded by :meth:`reset`) and wins over
            ``fault_plan.seed``; when None, the plan's seed applies (0 without a plan).
        work_dir: where replica logs go (default: a temporary directory removed at stop).
        storage: also run the Cloud Storage emulator (gcp-storage-emulator) in process.
        control_port: port of the HTTP control API (0: a free one; None: no HTTP API).
        storage_port: port of Cloud Storage (0: a free one).
        advertise_host: the host name clients reach it by, in :attr:`address`, :attr:`control_url`,
            :meth:`env` and so in every replica's environment (default: ``host``, or 127.0.0.1 when ``host``
            is a wildcard address such as 0.0.0.0). In docker compose: the service name.
        clock: where every verb and engine tick reads the time (:mod:`.clock`). Default: real time. With a
            :class:`~.clock.ManualClock` the platform acts only when :meth:`advance` moves time on.
        modelarts_port: port of the emulated Huawei Cloud ModelArts REST API (0: a free one; :attr:`modelarts_url`).
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, fault_plan: FaultPlan | None = None,
                 config: EmulatorConfig | None = None, work_dir: str | Path | None = None, storage: bool = True,
                 control_port: int | None = None, storage_port: int = 0, advertise_host: str | None = None,
                 clock: Clock | None = None, modelarts_port: int = 0, obs_port: int = 0) -> None:
        self.host = host
        self.clock: Clock = clock or SystemClock()
        self.advertise_host = advertise_host or ("127.0.0.1" if host in _WILDCARD_HOSTS else host)
        self._port = port
        self._storage_port = storage_port
        config = config or EmulatorConfig()
        # The backends see the seed in force; the fault book keeps the explicit one (None: each plan's own).
        self.config = config.model_copy(update={"seed": config.resolved_seed(fault_plan.seed if fault_plan
                                                                             else None)})
        self.faults = FaultBook(fault_plan, self.clock.monotonic, seed=config.seed)
        self.calls = CallLog(self.clock.time)
        self.operations = OperationStore()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if work_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="resilient-emulator-")
            work_dir = self._tmp.name
        self.work_dir = Path(work_dir)
        self._with_storage = storage
        self._control_port = control_port
        self.storage: Any = None
        self._storage_fs: Any = None
        self._grpc: Any = None
        self._http: ThreadingHTTPServer | None = None
        self._stop = threading.Event()
        self._engine: threading.Thread | None = None
        from .cloud_logging.service import LogStore
        from .pubsub.service import PubSubStore
        from .tpu.service import TPU_SERVICE, TpuService
        from .vertex.service import VertexService

        #: Cloud Pub/Sub's topics and subscriptions (:mod:`.pubsub`), served on :attr:`address`; Cloud Logging's
        #: sinks publish the entries they route through it.
        self.pubsub = PubSubStore(self.clock)
        self.logging = LogStore(self.clock.now, faults=self.faults, router=self.pubsub.publish)
        self.vertex = VertexService(self.config, self.faults, self.operations, self.work_dir, self.workload_env,
                                    self.ensure_bucket, self.storage_filesystem, self.clock, logs=self.logging)

        def audit(project: str, **entry: Any) -> None:
            self.logging.add_audit_entry(project, service_name=TPU_SERVICE, **entry)

        self.tpu = TpuService(self.config, self.faults, self.operations, self.work_dir, self.workload_env, audit,
                              self.clock)
        from .secret_manager import SecretStore

        #: Secret Manager's secrets, read by workers through :attr:`secret_manager_url` (``add_secret``).
        self.secrets = SecretStore()
        self._secret_manager: Any = None
        from .modelarts.service import ModelArtsService

        #: Huawei Cloud ModelArts training jobs (:mod:`.modelarts`), served at :attr:`modelarts_url`.
        self.modelarts = ModelArtsService(self.config, self.faults, self.work_dir, self.workload_env, self.clock,
                                          host=self.advertise_host, checkpoint_fs=self._obs_checkpoint_fs)
        #: Huawei Cloud OBS (moto's S3 server, :class:`~..obs.ObsEmulator`), beside Cloud Storage: where ModelArts
        #: workloads write their ``obs://`` checkpoints.
        self.obs: Any = None
        self._obs_port = obs_port
        self._obs_buckets: set[str] = set()
        self._modelarts_port = modelarts_port
        self._modelarts: Any = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Emulator:
        from concurrent import futures

        import grpc

        from .cloud_logging.wire import config_service_handler, logging_service_handler
        from .pubsub.wire import publisher_handler, subscriber_handler
        from .tpu.wire import locations_handler, tpu_service_handler, tpu_v2alpha1_handler
        from .vertex.wire import job_service_handler
        from .wire import operations_handler

        if self._with_storage:
            from ..storage import StorageEmulator

            self.storage = StorageEmulator(host=self.host, port=self._storage_port).start()
            from ..obs import ObsEmulator

            self.obs = ObsEmulator(host=self.host, port=self._obs_port).start()
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="emulator-grpc"))
        self._grpc.add_generic_rpc_handlers((job_service_handler(self.vertex, self.calls),
                                             tpu_service_handler(self.tpu, self.calls),
                                             tpu_v2alpha1_handler(self.tpu, self.calls),
                                             locations_handler(self.calls),
                                             logging_service_handler(self.logging, self.calls),
                                             config_service_handler(self.logging, self.calls),
                                             publisher_handler(self.pubsub, self.calls),
                                             subscriber_handler(self.pubsub, self.calls),
                                             operations_handler(self.operations, self.calls)))
        self.port = self._grpc.add_insecure_port(f"{self.host}:{self._port}")
        self._grpc.start()
        from .secret_manager import SecretManagerServer

        self._secret_manager = SecretManagerServer(self.secrets, host=self.host)
        from .modelarts.wire import ModelArtsServer

        self._modelarts = ModelArtsServer(self.modelarts, self.calls, host=self.host, port=self._modelarts_port)
        self._engine = threading.Thread(target=self._run_engine, name="emulator-engine", daemon=True)
        self._engine.start()
        if self._control_port is not None:
            self._http = ThreadingHTTPServer((self.host, self._control_port), _control_handler(self))
            threading.Thread(target=self._http.serve_forever, name="emulator-control", daemon=True).start()
        _at_exit(self.stop)
        return self

    def stop(self) -> None:
        """Stop serving and kill every replica process. Safe to call twice."""
        self._stop.set()
        if self._engine is not None:
            self._engine.join(timeout=5)
            self._engine = None
        self.vertex.shutdown()
        self.tpu.shutdown()
        self.modelarts.shutdown()
        self.pubsub.shutdown()  # waiting pulls answer at once instead of holding the server's threads
        if self._modelarts is not None:
            self._modelarts.stop()
            self._modelarts = None
        if self._grpc is not None:
            self._grpc.stop(grace=None)
            self._grpc = None
        if self._http is not None:
            from .httpd import stop_at_once

            stop_at_once(self._http)
            self._http = None
        if self._secret_manager is not None:
            self._secret_manager.stop()
            self._secret_manager = None
        if self.storage is not None:
            self.storage.stop()
            self.storage = None
        if self.obs is not None:
            self.obs.stop()
            self.obs = None
            self._storage_fs = None
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self._tmp.cleanup()
        atexit.unregister(self.stop)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run_engine(self) -> None:
        while not self._stop.wait(self.config.tick_seconds):
            self._tick()

    def _tick(self) -> None:
        """One look at every job and node at the clock's time (the workloads' processes run in real time, so
        the engine looks every ``tick_seconds`` whatever the clock)."""
        now = self.clock.monotonic()
        for platform in (self.vertex, self.tpu, self.modelarts):  # one platform's error never stops another
            try:
                platform.tick(now)
            except Exception:  # keep the platform alive; the error is in the log
                log.exception("emulator engine tick failed")

    def advance(self, seconds: float) -> None:
        """Move a manual clock on by ``seconds`` of platform time and let the platform act on it before
        returning: after ``advance(300)`` a 300 s repair is over and the node is READY again.

        The platform looks at least once every :data:`ADVANCE_STEP_SECONDS` of the span, so a long advance
        passes through every state on the way at its own second (``advance(65)``: QUEUED for 5 s, PENDING
        for 60 s, then RUNNING) -- as many steps of 1 s as one step of 65 s.

        Raises:
            TypeError: the emulator runs on real time (no :class:`~.clock.ManualClock`).
            ValueError: ``seconds`` is negative.
        """
        if not isinstance(self.clock, ManualClock):
            raise TypeError(f"advance() needs an emulator on a ManualClock, this one runs on {self.clock!r}")
        if seconds < 0:
            raise ValueError(f"a clock only moves forward: advance({seconds})")
        left = seconds
        while True:
            step = min(left, ADVANCE_STEP_SECONDS)
            self.clock.advance(step)
            left -= step
            self._tick()
            if left <= 0:
                self.pubsub.wake()  # an ack deadline may be over: waiting pulls look again
                return

    # ------------------------------------------------------------------ addresses and environment
    @property
    def address(self) -> str:
        """``host:port`` of the gRPC services (a connection's ``emulator_host``), with the advertised host."""
        return f"{self.advertise_host}:{self.port}"

    @property
    def control_url(self) -> str | None:
        if self._http is None:
            return None
        return f"http://{self.advertise_host}:{self._http.server_address[1]}"

    @property
    def storage_url(self) -> str | None:
        """``http://host:port`` of Cloud Storage (the value of ``STORAGE_EMULATOR_HOST``), or None without it."""
        if self.storage is None:
            return None
        return f"http://{self.advertise_host}:{self.storage.port}"

    @property
    def modelarts_url(self) -> str | None:
        """``http://host:port`` of the emulated ModelArts REST API (the SDK's endpoint), or None before start."""
        if self._modelarts is None:
            return None
        return f"http://{self.advertise_host}:{self._modelarts.port}"

    def modelarts_connection(self) -> str:
        """The Airflow connection (JSON) on the emulated ModelArts: ``{"conn_type": "huaweicloud", "login": <AK>,
        "password": <SK>, "extra": {"region": "cn-north-4", "project_id": <32 hex>, "endpoint": <modelarts_url>}}``
        (fake credentials: the emulator checks that requests are signed, not the signature)."""
        from .modelarts import catalog

        return json.dumps({"conn_type": "huaweicloud", "login": catalog.FAKE_ACCESS_KEY,
                           "password": catalog.FAKE_SECRET_KEY,
                           "extra": {"region": self.modelarts.region, "project_id": catalog.FAKE_PROJECT_ID,
                                     "endpoint": self.modelarts_url}})

    def connection(self) -> str:
        """The Airflow connection (JSON, the value of an ``AIRFLOW_CONN_<ID>`` variable) that points the provider's
        operators, sensors, triggers and hooks at this emulator: ``{"conn_type": "google_cloud_platform", "extra":
        {"emulator_host": "<address>"}}``."""
        return emulator_connection(self.address)

    def connection_env(self, conn_id: str = DEFAULT_CONN_ID) -> dict[str, str]:
        """``{"AIRFLOW_CONN_<CONN_ID>": connection()}``: exported, Airflow knows the connection ``conn_id``."""
        return {"AIRFLOW_CONN_" + conn_id.upper(): self.connection()}

    def env(self) -> dict[str, str]:
        """What a process exports to use this emulator: the Airflow connection ``google_cloud_default`` on it
        (:meth:`connection_env`, what switches the provider's operators to it), ``STORAGE_EMULATOR_HOST`` and the
        gcsfs settings for Cloud Storage, :data:`EMULATOR_HOST_ENV` for the emulator's own tools, and the Airflow
        connection ``huaweicloud_default`` on the emulated ModelArts (:data:`MODELARTS_CONNECTION_ENV`)."""
        env = {EMULATOR_HOST_ENV: self.address, **self.connection_env()}
        if self._modelarts is not None:
            env[MODELARTS_CONNECTION_ENV] = self.modelarts_connection()
        if self.storage is not None:
            env.update(self.storage.env())
            env["STORAGE_EMULATOR_HOST"] = str(self.storage_url)
        if self.obs is not None:  # what ObsFileSystem (obs:// URLs) reads, with the advertised host
            env.update({**self.obs.env(), "OBS_ENDPOINT": f"http://{self.advertise_host}:{self.obs.port}"})
        return env

    def workload_env(self) -> dict[str, str]:
        """The environment every replica starts from: the emulator's own, plus storage and unbuffered output, and
        ``TMPDIR`` in the work directory -- a container's or a VM's ``/tmp`` ends with it, so what the worker runner
        and its wrapper write there (the runner's text, the checkpoint helper, request files) never piles up in this
        machine's ``/tmp``; the work directory goes at stop."""
        env = dict(os.environ)
        env.update(self.env())
        env["PYTHONUNBUFFERED"] = "1"
        tmp = self.work_dir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(tmp)
        if self._secret_manager is not None:  # what a worker's runner reads secrets from (worker/runner.py)
            env["RESILIENT_SECRET_MANAGER_ENDPOINT"] = f"http://{self.advertise_host}:{self._secret_manager.port}"
        # "python3" on an emulated VM is the emulator's interpreter (with the workload's libraries).
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        return env

    def _obs_checkpoint_fs(self, prefix: str) -> Any:
        """The filesystem a ModelArts job's ``RESILIENT_CHECKPOINT_DIR`` is listed through (an ``at_step`` fault):
        None (the local file system) for a local directory; for ``obs://`` the emulated OBS, whose bucket is made on
        demand (as Cloud Storage's are here); None without OBS (``storage=False``: such a fault then waits)."""
        if not prefix.startswith("obs://") or self.obs is None:
            return None
        bucket = prefix[len("obs://"):].split("/", 1)[0]
        if bucket and bucket not in self._obs_buckets:
            self.obs.create_bucket(bucket)
            self._obs_buckets.add(bucket)
        return self.obs.filesystem()

    def storage_filesystem(self) -> Any:
        """A gcsfs filesystem on the emulated Cloud Storage (one per emulator), for the emulator's own reads."""
        if self.storage is None:
            raise RuntimeError("this emulator runs without Cloud Storage (storage=False)")
        if self._storage_fs is None:
            self._storage_fs = self.storage.filesystem()
        return self._storage_fs

    def ensure_bucket(self, bucket: str) -> None:
        """Create a Cloud Storage bucket unless it exists (buckets are made on demand)."""
        if self.storage is not None:
            self.storage.create_bucket(bucket)

    # ------------------------------------------------------------------ control API (Python)
    def add_fault(self, fault: Fault | dict[str, Any]) -> int:
        """Add a fault at run time; returns its index."""
        return self.faults.add(fault if isinstance(fault, Fault) else Fault.model_validate(fault))

    def end_fault(self, index: int) -> int:
        """End fault ``index`` (from :meth:`add_fault`): it fires no more. Returns how many times it fired.

        Raises:
            IndexError: no fault ``index``.
        """
        return self.faults.end(index)

    def add_secret(self, secret: str, value: str) -> str:
        """Add a version of Secret Manager secret ``secret`` (``projects/P/secrets/S``); returns its name
        (``.../versions/N``). Workers read it with ``--secret-env`` (the TPU operator's ``secret_env``)."""
        return self.secrets.add(secret, value)

    def reset(self, fault_plan: FaultPlan | None = None) -> None:
        """Forget jobs, calls, faults, secrets, log entries, sinks, topics and subscriptions; kill replica
        processes; optionally load a new plan."""
        self.secrets.clear()
        self.vertex.reset()
        self.tpu.reset()
        self.modelarts.reset()
        self.logging.reset()
        self.pubsub.reset()
        self.calls.clear()
        self.operations.clear()
        self.faults.reset(fault_plan)
        if self.storage is not None:
            self.storage.wipe()
        if self.obs is not None:
            self.obs.wipe()
            self._obs_buckets.clear()

    def replica_log(self, job_name: str, replica: str = "workerpool0-0") -> str:
        """Everything replica ``replica`` of job ``job_name`` printed, across restarts."""
        path = self.vertex.log_dir(job_name) / f"{replica}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def job_events(self, job_name: str) -> list[str]:
        """The platform's story of a CustomJob (states, faults, platform retries) or HyperparameterTuningJob
        (states, trials' states), in order."""
        return self.vertex.events(job_name)

    def wait_for_state(self, job_name: str, states: Iterable[str], timeout: float = 60.0) -> str:
        """Block until the state name (``JOB_STATE_*``) of a CustomJob or HyperparameterTuningJob is one of
        ``states``; return it.

        Raises:
            TimeoutError: naming the state it was left in.
        """
        wanted = set(states)
        deadline = time.monotonic() + timeout
        while True:
            state = self.vertex.state_name(job_name)
            if state in wanted:
                return str(state)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{job_name} is still {state} after {timeout}s, wanted one of {sorted(wanted)}")
            self._stop.wait(self.config.tick_seconds)

    def processes(self) -> list[int]:
        """PIDs of replica, TPU worker and ModelArts node processes still alive."""
        with self.vertex.lock:
            runs = list(self.vertex.runs.values()) + [r for t in self.vertex.tuning.values() for r in t.current]
            pids = [p.pid for r in runs for p in r.replicas.values() if p.pid and p.poll() is None]
        return pids + self.tpu.processes() + self.modelarts.processes()


def _at_exit(stop: Any) -> None:
    """Stop the emulator when the interpreter exits, before it joins the gRPC server's threads (a plain
    ``atexit`` hook would run only after that join, which never ends while the server serves)."""
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        with contextlib.suppress(RuntimeError):  # interpreter already shutting down
            register(stop)
            return
    atexit.register(stop)


def _control_handler(emulator: Emulator) -> type[BaseHTTPRequestHandler]:
    """The HTTP control API: GET /calls[?method=M], GET /faults, POST /faults, POST /faults/end ({"index": i}: the
    fault fires no more), POST /reset, GET /jobs (CustomJobs
    with their state and story), GET /nodes (TPU nodes and queued resources with their state: what a leak
    check reads), GET /modelarts-jobs (ModelArts training jobs: id, name, phase, secondary_phase, running records)."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body, default=str).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/calls":
                method = parse_qs(url.query).get("method", [None])[0]
                self._reply(200, [c.to_dict() for c in emulator.calls.list(method)])
            elif url.path == "/faults":
                self._reply(200, emulator.faults.faults())
            elif url.path == "/jobs":
                with emulator.vertex.lock:
                    jobs = [{"name": n, "state": r.job.state.name, "events": r.events}
                            for n, r in emulator.vertex.runs.items()]
                self._reply(200, jobs)
            elif url.path == "/nodes":
                with emulator.tpu.lock:
                    nodes = [{"name": n, "state": r.node.state.name, "health": r.node.health.name,
                              "accelerator_type": r.node.accelerator_type, "labels": dict(r.node.labels),
                              "queued_resource": r.node.queued_resource or None}
                             for n, r in emulator.tpu.nodes.items()]
                    queued = [{"name": n, "state": q["qr"].state.state.name} for n, q in emulator.tpu.queued.items()]
                self._reply(200, {"nodes": nodes, "queued_resources": queued})
            elif url.path == "/modelarts-jobs":
                self._reply(200, emulator.modelarts.summary())
            elif url.path == "/healthz":
                self._reply(200, {"status": "ok"})
            else:
                self._reply(404, {"error": f"no such path {url.path}"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path == "/faults":
                    self._reply(200, {"index": emulator.add_fault(body)})
                elif self.path == "/faults/end":
                    index = body.get("index") if isinstance(body, dict) else None
                    if not isinstance(index, int) or isinstance(index, bool):
                        raise ValueError(f'POST /faults/end takes {{"index": <int>}}, got {body!r}')
                    try:
                        self._reply(200, {"index": index, "fired": emulator.end_fault(index)})
                    except IndexError:
                        self._reply(404, {"error": f"no fault {index}"})
                elif self.path == "/reset":
                    emulator.reset(FaultPlan.model_validate(body) if body else None)
                    self._reply(200, {"status": "reset"})
                else:
                    self._reply(404, {"error": f"no such path {self.path}"})
            except ValueError as exc:
                self._reply(400, {"error": str(exc)})

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("control API: " + format, *args)

    return Handler
