"""The native production stack: docker-compose.yaml's services as local processes on loopback, without docker.

One :class:`NativeStack` starts, in its own temporary directory:

* PostgreSQL (Debian's ``postgresql`` package, ``/usr/lib/postgresql/<version>/bin``; installed with apt-get
  when missing and running as root), a throwaway cluster with the ``postgres`` service's user, password and
  database;
* the emulator, with the ``emulator`` service's command line;
* with ``executor="celery"`` (compose profile ``celery``), Redis (Debian's ``redis-server``) as the Celery
  broker, and the profile's services among the components below: two ``airflow celery worker`` and a second
  triggerer;
* ``airflow-init``'s command (``airflow db migrate``), then every other ``airflow-*`` service's command
  (api-server, scheduler, dag-processor, triggerer, and the profile's), EACH AS ITS OWN PROCESS in its own
  session, as the containers run them, with the compose file's Airflow environment, in the order of their
  ``depends_on`` (the scheduler once the api-server answers);

waits until ``GET /api/v2/monitor/health`` reports the metadatabase, scheduler, triggerer and dag_processor
healthy, and stops all of it on :meth:`NativeStack.stop`, at interpreter exit, on SIGTERM/SIGHUP (turned into
``KeyboardInterrupt`` while a stack runs, unless the program has handlers of its own, so that ``finally`` blocks
and pytest's fixture teardown run), and, through a small guardian process, even when the process that started
it is killed with SIGKILL (within about 12 s). Linux only (it reads /proc to find every process of the stack).

What the compose file says is mapped, and nothing else changed (:func:`native_plan`; the drift test
``tests/stack/test_compose_drift.py`` checks it): the service host names ``postgres``, ``emulator``,
``airflow-apiserver`` and ``redis`` become 127.0.0.1 with ports chosen free at start (:class:`Ports`),
``/opt/airflow/dags`` becomes the stack's dags folder, ``/tmp/resilient-emulator`` the stack's emulator
directory; the emulator and Redis bind 127.0.0.1. Added, because all components share one host here:
``AIRFLOW_HOME`` (a directory of the stack), the api-server's host and port (``[api] host``/``port``), the log
servers' ports (``[logging] worker_log_server_port``, ``trigger_log_server_port``; each Celery worker and each
triggerer after the first has one of its own), so that two stacks -- or two workers -- never collide, and each
component's address (``[core] hostname_callable``: :func:`service_hostname`), as each container has its own. Compose
variables (``RESILIENT_FAULT_PLAN``, ``RESILIENT_TIME_SCALE``, ...) are read from the environment, as compose
reads the shell's; ``AIRFLOW_*`` variables of the calling environment are not passed on (a container has none).

Use::

    from devtools.stack import NativeStack

    with NativeStack(fault_plan=None) as stack:        # starts everything; about 30 s
        status, dags = stack.api("GET", "/api/v2/dags")
        stack.kill_component("airflow-triggerer")      # SIGKILL its whole process tree
        stack.start_component("airflow-triggerer")     # same command and environment; waits for health
        stack.emulator_get("/calls?method=CreateCustomJob")

or from a shell (``make stack``)::

    python -m devtools.stack [--dags DIR ...] [--keep] [--fault-plan PATH|none]
        [--time-scale X]

Each process's output goes to ``<work_dir>/logs/<service>.log`` (``postgres``, ``emulator``, ``airflow-init``,
``airflow-apiserver``, ...); Airflow's own task and component logs are under ``<airflow_home>/logs``. The
directory is removed at stop unless ``keep=True`` or the start failed (its path is printed then).

Importing this module is cheap: only the standard library at module level (PyYAML inside functions).
"""

from __future__ import annotations

import argparse
import atexit
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
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
#: This module's importable name, also when it runs as ``python -m devtools.stack`` (``__name__`` is then
#: ``__main__``): what the stack's processes import (``[core] hostname_callable``, the guardian), with
#: :data:`REPO_ROOT` on their ``PYTHONPATH``.
MODULE = "devtools.stack"
COMPOSE_FILE = REPO_ROOT / "docker-compose.yaml"
DEFAULT_DAGS_FOLDER = REPO_ROOT / "dags"

#: Paths inside the containers that the native stack maps to its own.
CONTAINER_DAGS_FOLDER = "/opt/airflow/dags"
CONTAINER_EMULATOR_WORK_DIR = "/tmp/resilient-emulator"
#: The official postgres image listens on 5432 in its container.
POSTGRES_CONTAINER_PORT = 5432
#: Compose service names that other services reach by host name; all become 127.0.0.1.
SERVICE_HOSTS = ("postgres", "emulator", "airflow-apiserver", "redis")
APISERVER_SERVICE = "airflow-apiserver"
INIT_SERVICE = "airflow-init"
#: The Celery broker of profile ``celery`` (the official image listens on 6379 in its container); the native
#: stack runs Debian's ``redis-server``.
REDIS_SERVICE = "redis"
REDIS_CONTAINER_PORT = 6379
#: The components /api/v2/monitor/health reports.
HEALTH_COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")
#: The executors a stack runs: the compose profiles each needs and the ``AIRFLOW_EXECUTOR`` compose variable
#: (the compose file's ``AIRFLOW__CORE__EXECUTOR``), as ``make compose-up EXECUTOR=...`` sets them.
EXECUTORS: dict[str, tuple[tuple[str, ...], str]] = {"local": ((), "LocalExecutor"),
                                                     "celery": (("celery",), "CeleryExecutor")}
#: Environment variable carried by every process of one stack (value: the stack's id); how stop() and the
#: guardian find processes that left their component's session (emulator replicas, daemons).
MARKER_ENV = "RESILIENT_STACK_ID"
#: Environment variables set only by the native stack (all components share one host), never by compose.
LOCAL_ONLY_SETTINGS = ("AIRFLOW_HOME", "AIRFLOW__API__HOST", "AIRFLOW__API__PORT",
                       "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT", "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT",
                       "AIRFLOW__CORE__HOSTNAME_CALLABLE")
#: Each component's host as Airflow records it (its jobs' and task instances' ``hostname``): in compose every
#: container has an address of its own; here :func:`service_hostname` answers the component's own loopback address
#: (127.0.1.N), which the api-server can reach -- a log server listens on all of the machine's addresses.
HOSTNAME_ENV = "RESILIENT_STACK_HOSTNAME"
#: What a client in the calling process needs to reach the stack's emulator (:attr:`NativeStack.emulator_env`).
EMULATOR_CLIENT_ENV = ("RESILIENT_EMULATOR_HOST", "STORAGE_EMULATOR_HOST", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT",
                       "OBS_ENDPOINT", "OBS_ACCESS_KEY_ID", "OBS_SECRET_ACCESS_KEY")
#: The compose file's connection that points the operators at the emulator (its extra ``emulator_host``).
EMULATOR_CONNECTION_ENV = "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"

SESSIONS_FILE = "sessions.json"  #: in the work dir: the sessions of the stack's processes, for the guardian
_COMPOSE_DEFAULT: Any = object()  # fault_plan / time_scale not given: what the compose file says


class StackError(RuntimeError):
    """The stack could not start, or a component did not become healthy in time (the message carries the
    tail of each component's log)."""


# ---------------------------------------------------------------------------------------------- compose file
_VARIABLE = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|\$(?P<bare>[A-Za-z_]\w*)")


def interpolate(value: str, variables: Mapping[str, str] | None = None) -> str:
    """Compose's variable substitution of one string: ``$$`` (a literal ``$``), ``$X``, ``${X}``, ``${X:-d}``
    (d when X is unset or empty), ``${X-d}`` (d when unset), ``${X:+r}``/``${X+r}`` (r when set and non-empty /
    set), ``${X:?msg}``/``${X?msg}`` (error when unset or empty / unset). Nested defaults are not supported.

    Args:
        value: the text from the compose file.
        variables: what compose reads from the shell and ``.env`` (default: ``os.environ``).

    Raises:
        ValueError: a required variable (``${X?msg}``) is missing.
    """
    env = os.environ if variables is None else variables

    def sub(m: re.Match[str]) -> str:
        if m[0] == "$$":
            return "$"
        name = m["name"] or m["bare"]
        op, arg = m["op"], m["arg"] or ""
        got = env.get(name)
        if op == ":-":
            return got or arg
        if op == "-":
            return arg if got is None else got
        if op == ":+":
            return arg if got else ""
        if op == "+":
            return "" if got is None else arg
        if op in (":?", "?") and (got is None or (op == ":?" and not got)):
            raise ValueError(f"compose variable {name} is required: {arg or 'unset'}")
        return got or ""

    return _VARIABLE.sub(sub, value)


def _interpolate_tree(node: Any, variables: Mapping[str, str] | None) -> Any:
    if isinstance(node, str):
        return interpolate(node, variables)
    if isinstance(node, list):
        return [_interpolate_tree(v, variables) for v in node]
    if isinstance(node, dict):
        return {k: _interpolate_tree(v, variables) for k, v in node.items()}
    return node


def load_compose(compose_file: str | Path = COMPOSE_FILE, variables: Mapping[str, str] | None = None) -> dict[str, Any]:
    """docker-compose.yaml parsed (YAML anchors and ``<<`` merges resolved) and interpolated with
    ``variables`` (default ``os.environ``; see :func:`interpolate`).

    Raises:
        FileNotFoundError: no compose file (this module reads the repository's; pass ``compose_file`` when
            the package is installed elsewhere).
    """
    import yaml

    data = yaml.safe_load(Path(compose_file).read_text())
    return dict(_interpolate_tree(data, variables))


def environment_of(service: Mapping[str, Any]) -> dict[str, str]:
    """A compose service's (or ``x-`` block's) ``environment``, in either the mapping or the ``K=V`` list
    form, as strings (a bare YAML ``true`` would become ``"True"``: the file quotes booleans)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, os.environ.get(item, "")) for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def emulator_argv(service: Mapping[str, Any]) -> list[str]:
    """The emulator service's command line as its container runs it: a ``sh -c`` script is expanded by
    ``sh`` with the service's environment (``printf`` in place of ``exec``), a list is taken as is.

    Raises:
        ValueError: the command does not run ``resilient-emulator``.
    """
    command = service.get("command")
    if isinstance(command, str):
        command = ["sh", "-c", command]
    if not command:
        raise ValueError("emulator: no command")
    if list(command[:2]) != ["sh", "-c"]:
        argv = [str(a) for a in command]
    else:
        script = str(command[2])
        if "exec resilient-emulator" not in script:
            raise ValueError(f"emulator: the script does not `exec resilient-emulator`: {script!r}")
        script = script.replace("exec resilient-emulator", "printf '%s\\0' resilient-emulator", 1)
        env = {**environment_of(service), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        out = subprocess.run(["sh", "-c", script], env=env, check=True, capture_output=True, text=True).stdout
        argv = out.split("\0")[:-1]
    if argv[:1] != ["resilient-emulator"]:
        raise ValueError(f"emulator: runs {argv[:1]}, not resilient-emulator")
    return argv


def option(argv: Sequence[str], name: str) -> str | None:
    """The value of ``--name value`` in ``argv`` (the last one), or None."""
    value = None
    for i, arg in enumerate(argv[:-1]):
        if arg == name:
            value = argv[i + 1]
    return value


def _replace_option(argv: list[str], name: str, value: str) -> None:
    for i, arg in enumerate(argv[:-1]):
        if arg == name:
            argv[i + 1] = value


def _container_port(ports: Iterable[Any], default: int) -> int:
    """The container side of the first ``ports`` entry (``[host_ip:]host_port:container_port`` or a mapping)."""
    for entry in ports:
        if isinstance(entry, dict):
            return int(entry["target"])
        return int(str(entry).split("/")[0].rsplit(":", 1)[-1])
    return default


# ---------------------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class Ports:
    """The loopback ports of one stack (all TCP)."""

    postgres: int
    api: int  #: api-server: UI, REST API, execution API
    emulator: int  #: emulator gRPC (Vertex AI, Cloud TPU, Cloud Logging, operations)
    emulator_control: int  #: emulator HTTP control API
    emulator_storage: int  #: emulator Cloud Storage
    emulator_modelarts: int  #: emulator Huawei Cloud ModelArts (REST)
    emulator_obs: int  #: emulator Huawei Cloud OBS (S3 API): the ModelArts jobs' obs:// checkpoints
    worker_log_server: int  #: [logging] worker_log_server_port (the scheduler's LocalExecutor workers)
    trigger_log_server: int  #: [logging] trigger_log_server_port (the first triggerer)
    redis: int = 0  #: the Celery broker (profile ``celery``)
    #: More log servers: each further triggerer and each Celery worker serves its logs on a port of its own here
    #: (containers each have their own network; one host does not).
    spare: tuple[int, ...] = ()

    @classmethod
    def free(cls, spare: int = 4) -> Ports:
        """Distinct ports that are free on every interface right now (the log servers bind all of them), with
        ``spare`` more for extra log servers."""
        named = [f.name for f in fields(cls) if f.name != "spare"]
        socks = []
        try:
            for _ in range(len(named) + spare):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.bind(("0.0.0.0", 0))
                socks.append(sock)
            got = [s.getsockname()[1] for s in socks]
            return cls(**dict(zip(named, got, strict=False)), spare=tuple(got[len(named):]))
        finally:
            for sock in socks:
                sock.close()


@dataclass(frozen=True)
class ServicePlan:
    """What the native stack runs for one compose service: ``command`` (argv; ``airflow`` and
    ``resilient-emulator`` are found on PATH, the running interpreter's bin directory first) and the compose
    ``environment`` after the local mapping."""

    name: str
    command: list[str]
    environment: dict[str, str]
    depends_on: dict[str, str] = field(default_factory=dict)  #: service -> condition, as in the compose file
    #: Settings of this service alone, added because the stack shares one host (a log server's port).
    local_settings: dict[str, str] = field(default_factory=dict)

    @property
    def role(self) -> str:
        """What the service is, from its command: ``scheduler``, ``triggerer``, ``dag_processor``,
        ``api_server``, ``celery_worker``, ``migrate``, or its command's first word."""
        return role_of(self.command)


def role_of(command: Sequence[str]) -> str:
    """The role of a compose service's command (see :attr:`ServicePlan.role`)."""
    words = [str(w) for w in command]
    if words[:1] == ["airflow"]:
        if words[1:3] == ["celery", "worker"]:
            return "celery_worker"
        if words[1:3] == ["db", "migrate"]:
            return "migrate"
        return words[1].replace("-", "_") if len(words) > 1 else "airflow"
    return words[0] if words else ""


@dataclass(frozen=True)
class StackPlan:
    """docker-compose.yaml, mapped onto one host (see the module docstring)."""

    ports: Ports
    dags_folder: Path
    work_dir: Path
    postgres: dict[str, str]  #: POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB (the official image's defaults filled)
    emulator: ServicePlan
    init: ServicePlan  #: airflow-init: run to completion before the components
    components: dict[str, ServicePlan]  #: every other airflow-* service of the active profiles, in the file's order
    environment: dict[str, str]  #: x-airflow-common's environment, mapped
    local_settings: dict[str, str]  #: added for one host (LOCAL_ONLY_SETTINGS)
    port_map: dict[tuple[str, int], int] = field(default_factory=dict)  #: (service host, container port) -> local
    redis: ServicePlan | None = None  #: the broker, when profile ``celery`` is active: Debian's redis-server
    profiles: tuple[str, ...] = ()  #: the compose profiles whose services run

    def of_role(self, role: str) -> list[str]:
        """The components with ``role`` (e.g. ``triggerer``, ``celery_worker``), in the compose file's order."""
        return [name for name, svc in self.components.items() if svc.role == role]

    @property
    def airflow_environment(self) -> dict[str, str]:
        """The Airflow settings a process of this stack (or a CLI call against it) runs with."""
        return {**self.environment, **self.local_settings}


def active_services(compose: Mapping[str, Any], profiles: Iterable[str] = ()) -> dict[str, Any]:
    """The services ``docker compose --profile P ...`` starts: those with no ``profiles`` and those with one of
    ``profiles``, in the file's order."""
    wanted = set(profiles)
    services: dict[str, Any] = compose.get("services") or {}
    return {name: svc for name, svc in services.items() if not svc.get("profiles") or wanted & set(svc["profiles"])}


def native_plan(*, ports: Ports, dags_folder: str | Path, work_dir: str | Path,
                compose_file: str | Path = COMPOSE_FILE, variables: Mapping[str, str] | None = None,
                profiles: Sequence[str] = ()) -> StackPlan:
    """What the native stack runs for docker-compose.yaml's services, for each service, with the local mapping.

    Args:
        ports: the stack's loopback ports.
        dags_folder: replaces ``/opt/airflow/dags``.
        work_dir: the stack's directory: ``airflow_home/`` (AIRFLOW_HOME) and ``emulator/`` (the emulator's
            ``--work-dir``) are under it.
        compose_file: docker-compose.yaml.
        variables: compose variables (default ``os.environ``), e.g. ``RESILIENT_FAULT_PLAN``, ``AIRFLOW_EXECUTOR``.
        profiles: the compose profiles to run (``("celery",)``: Redis, the Celery workers, the second triggerer).

    Raises:
        ValueError: the compose file lacks a service the stack needs, or a value names a service host and
            port the stack does not map, or there are more extra log servers than ``ports.spare`` (the message
            says which).
    """
    compose = load_compose(compose_file, variables)
    services = active_services(compose, profiles)
    for needed in ("postgres", "emulator", INIT_SERVICE, APISERVER_SERVICE):
        if needed not in services:
            raise ValueError(f"{compose_file}: no service {needed!r}")
    dags_folder, work_dir = Path(dags_folder), Path(work_dir)

    emu_argv = emulator_argv(services["emulator"])
    port_map = {("postgres", POSTGRES_CONTAINER_PORT): ports.postgres,
                ("airflow-apiserver", _container_port(services[APISERVER_SERVICE].get("ports") or [], 8080)): ports.api}
    for opt, local_port in _emulator_ports(ports):
        value = option(emu_argv, opt)
        if value is None or value == "0":
            raise ValueError(f"emulator: {opt} is not a fixed port in its command line")
        port_map[("emulator", int(value))] = local_port
    every = compose.get("services") or {}
    if REDIS_SERVICE in every:  # the broker URL names it in every profile (unused without the celery profile)
        redis_port = option([str(a) for a in every[REDIS_SERVICE].get("command") or []], "--port")
        port_map[(REDIS_SERVICE, int(redis_port or REDIS_CONTAINER_PORT))] = ports.redis

    service_host = re.compile(r"(?<![\w.-])(?P<host>" + "|".join(map(re.escape, SERVICE_HOSTS)) +
                              r"):(?P<port>\d+)(?!\d)")

    def local(value: str, where: str) -> str:
        def sub(m: re.Match[str]) -> str:
            key = (m["host"], int(m["port"]))
            if key not in port_map:
                raise ValueError(f"{where}: {m[0]} is no port the native stack maps ({sorted(port_map)})")
            return f"127.0.0.1:{port_map[key]}"

        value = service_host.sub(sub, value)
        for container, here in ((CONTAINER_DAGS_FOLDER, dags_folder), (CONTAINER_EMULATOR_WORK_DIR,
                                                                        work_dir / "emulator")):
            if value == container or value.startswith(container + "/"):
                value = str(here) + value[len(container):]
        return value

    def mapped_env(env: Mapping[str, str], where: str) -> dict[str, str]:
        return {k: local(v, f"{where}: {k}") for k, v in env.items()}

    emu_args = [local(a, "emulator command") for a in emu_argv]
    _replace_option(emu_args, "--host", "127.0.0.1")
    _replace_option(emu_args, "--advertise-host", "127.0.0.1")
    for opt, port in _emulator_ports(ports):
        _replace_option(emu_args, opt, str(port))
    emulator = ServicePlan("emulator", emu_args, mapped_env(environment_of(services["emulator"]), "emulator"))

    def airflow_service(name: str) -> ServicePlan:
        command = services[name].get("command")
        if isinstance(command, str):
            command = command.split()
        if not command:
            raise ValueError(f"{name}: no command")
        depends = services[name].get("depends_on") or {}
        if isinstance(depends, list):
            depends = {dep: None for dep in depends}
        return ServicePlan(name, [local(str(a), f"{name} command") for a in command],
                           mapped_env(environment_of(services[name]), name),
                           {dep: (cond or {}).get("condition", "service_started") for dep, cond in depends.items()})

    components = {name: airflow_service(name) for name in services
                  if name.startswith("airflow-") and name != INIT_SERVICE}
    common = compose.get("x-airflow-common") or services[APISERVER_SERVICE]
    celery = environment_of(common).get("AIRFLOW__CORE__EXECUTOR") == "CeleryExecutor"
    components = _with_hosts(components, ports, celery=celery)
    redis = None
    if REDIS_SERVICE in services:
        # Debian's redis-server with the compose command's options, bound to loopback on the stack's port.
        argv = [str(a) for a in services[REDIS_SERVICE].get("command") or ["redis-server"]]
        if argv[0] != "redis-server":
            raise ValueError(f"{REDIS_SERVICE}: runs {argv[0]}, not redis-server")
        _replace_option(argv, "--port", str(ports.redis))
        if "--port" not in argv:
            argv += ["--port", str(ports.redis)]
        redis = ServicePlan(REDIS_SERVICE, [*argv, "--bind", "127.0.0.1"], {})

    pg_env = environment_of(services["postgres"])
    user = pg_env.get("POSTGRES_USER") or "postgres"
    postgres = {"POSTGRES_USER": user, "POSTGRES_PASSWORD": pg_env.get("POSTGRES_PASSWORD", ""),
                "POSTGRES_DB": pg_env.get("POSTGRES_DB") or user}
    local_settings = {
        "AIRFLOW_HOME": str(work_dir / "airflow_home"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(ports.api),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(ports.worker_log_server),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(ports.trigger_log_server),
        "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{MODULE}.service_hostname",
    }
    return StackPlan(ports=ports, dags_folder=dags_folder, work_dir=work_dir, postgres=postgres,
                     emulator=emulator, init=airflow_service(INIT_SERVICE), components=components,
                     environment=mapped_env(environment_of(common), "x-airflow-common"),
                     local_settings=local_settings, port_map=port_map, redis=redis, profiles=tuple(profiles))


def _emulator_ports(ports: Ports) -> tuple[tuple[str, int], ...]:
    """The emulator's port options and the stack's loopback port of each: each must be a fixed port in the compose
    command line (what the containers reach), and is replaced by the stack's own."""
    return (("--port", ports.emulator), ("--control-port", ports.emulator_control),
            ("--storage-port", ports.emulator_storage), ("--modelarts-port", ports.emulator_modelarts),
            ("--obs-port", ports.emulator_obs))


def service_hostname() -> str:
    """Airflow's ``[core] hostname_callable`` in the native stack: the component's own loopback address
    (:data:`HOSTNAME_ENV`), as each container of the compose file has an address of its own -- so that a job or a
    task instance tells which triggerer or worker it runs on, and the api-server reaches its log server there.
    Outside the stack, the machine's fully qualified name."""
    return os.environ.get(HOSTNAME_ENV) or socket.getfqdn()


def _with_hosts(components: dict[str, ServicePlan], ports: Ports, *, celery: bool) -> dict[str, ServicePlan]:
    """Each component with its own loopback address (``127.0.1.N``, :data:`HOSTNAME_ENV`), and each log server
    beyond the first of its kind with a port of its own (from ``ports.spare``): in containers each binds the same
    port at its own address, here they share the machine's. The api-server fetches a running task's log from
    ``<host>:worker_log_server_port`` (a trigger's from ``trigger_log_server_port``): the first triggerer -- and,
    with the CeleryExecutor, whose scheduler serves no logs, the first Celery worker -- keep those ports, and as
    every component writes to the one logs folder, whichever answers serves the right file."""
    spare = iter(ports.spare)
    out: dict[str, ServicePlan] = {}
    firsts = {"triggerer": True, "celery_worker": celery}
    keys = {"triggerer": "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT",
            "celery_worker": "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"}
    for number, (name, svc) in enumerate(components.items(), start=1):
        settings = {HOSTNAME_ENV: f"127.0.1.{number}"}
        if svc.role in keys:
            if firsts[svc.role]:
                firsts[svc.role] = False
            else:
                port = next(spare, None)
                if port is None:
                    raise ValueError(f"{name}: no spare port left for its log server (Ports.free(spare=...))")
                settings[keys[svc.role]] = str(port)
        out[name] = replace(svc, local_settings=settings)
    return out


# ---------------------------------------------------------------------------------------------- processes
def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, process group, session) of a process, or None when it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2:].split()
    return rest[0].decode(), int(rest[1]), int(rest[2]), int(rest[3])


def _pids() -> Iterator[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def processes_of(*, sessions: Iterable[int] = (), pgids: Iterable[int] = (), descendants_of: Iterable[int] = (),
                 marker: str | None = None) -> list[int]:
    """Live (not zombie) processes in one of ``sessions``, in one of the process groups ``pgids``, descending
    from one of the pids ``descendants_of``, or whose environment has ``RESILIENT_STACK_ID=<marker>`` (Linux:
    reads /proc); never this process.

    The marker alone does not find every process: one that rewrites its title (``setproctitle``: Airflow's
    api-server, serve-logs, LocalExecutor workers, task supervisors) overwrites the memory /proc shows as its
    environment. Sessions find those: the stack starts each service in a session of its own; what leaves it
    (the emulator's workloads, a task's daemon) descends from it, or, once orphaned, keeps the marker."""
    sessions, pgids = set(sessions), set(pgids)
    needle = f"{MARKER_ENV}={marker}\0".encode() if marker else None
    table = {pid: stat for pid in _pids() if (stat := _stat(pid)) is not None}
    children: dict[int, list[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat[1], []).append(pid)
    descendants: set[int] = set()
    todo = list(descendants_of)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in descendants:
                descendants.add(child)
                todo.append(child)
    found = []
    for pid, stat in table.items():
        if pid == os.getpid() or stat[0] in ("Z", "X"):
            continue
        hit = stat[3] in sessions or stat[2] in pgids or pid in descendants
        if not hit and needle is not None:
            with contextlib.suppress(OSError):
                hit = needle in Path(f"/proc/{pid}/environ").read_bytes()
        if hit:
            found.append(pid)
    return found


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _wait_gone(find: Any, timeout: float) -> list[int]:
    """Poll ``find()`` until it returns no pid or ``timeout`` seconds pass; the pids left."""
    deadline = time.monotonic() + timeout
    while True:
        left = find()
        if not left or time.monotonic() > deadline:
            return list(left)
        time.sleep(0.1)


def _wait_serving(process: _Process, what: str, probe: Any, timeout: float, *, logs: Any = None,
                  every: float = 0.2) -> None:
    """Poll ``probe()`` every ``every`` seconds (an OSError, ValueError or StackError counts as False) until it is
    true.

    Raises:
        StackError: ``process`` exited, or ``timeout`` seconds passed; the message has ``logs()`` (default: the
            tail of the process's log).
    """
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError, StackError):
            if probe():
                return
        if not process.running:
            code = process.proc.returncode if process.proc else "-"
            raise StackError(f"{process.name} exited ({code}):\n{logs() if logs else _tail(process.log_path)}")
        if time.monotonic() > deadline:
            raise StackError(f"{process.name} did not {what} in {timeout:.0f} s:\n"
                             f"{logs() if logs else _tail(process.log_path)}")
        time.sleep(every)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class _Process:
    """One compose service run as a local process, the leader of its own session."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None
    killed: bool = False  # stopped on purpose (kill_component / stop)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"===== {datetime.now(UTC).isoformat()} start: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.cwd, start_new_session=True)
        self.killed = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def members(self) -> list[int]:
        """Every live process of this service: its session (also task processes, which move to process
        groups of their own), its process group, and its descendants (the emulator's workloads, which run in
        sessions of their own)."""
        if self.proc is None:
            return []
        return processes_of(sessions=[self.proc.pid], pgids=[self.proc.pid], descendants_of=[self.proc.pid])

    def signal_group(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def reap(self, timeout: float = 0.0) -> None:
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)


# ---------------------------------------------------------------------------------------------- PostgreSQL
def _postgres_bin() -> Path:
    """The directory of initdb/pg_ctl/psql: $PG_BIN, the newest /usr/lib/postgresql/*/bin, or on PATH;
    installs Debian's ``postgresql`` with apt-get when none is found and running as root.

    Raises:
        StackError: none found and not root (the message says what to install).
    """
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])

    def find() -> Path | None:
        found = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()]
        if found:
            return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
        initdb = shutil.which("initdb")
        return Path(initdb).parent if initdb else None

    got = find()
    if got is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "postgresql"], env=env, check=True, capture_output=True)
        got = find()
    if got is None:
        raise StackError("PostgreSQL is not installed: sudo apt-get install -y postgresql (or set PG_BIN)")
    return got


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


# ---------------------------------------------------------------------------------------------- clean-up
_LIVE: set[NativeStack] = set()
_LIVE_LOCK = threading.Lock()
_PREVIOUS_HANDLERS: dict[int, Any] = {}
_HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _stop_all() -> None:
    for stack in list(_LIVE):
        stack.stop()


atexit.register(_stop_all)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """SIGTERM/SIGHUP while a stack runs: unwind as Ctrl-C does (``finally`` blocks, pytest's fixture
    teardown, then atexit), so that every stack is stopped. Ignored while a stack is stopping."""
    if any(stack._stopping for stack in list(_LIVE)):
        return
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _install_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _HANDLED_SIGNALS:
        if sig not in _PREVIOUS_HANDLERS and signal.getsignal(sig) == signal.SIG_DFL:
            _PREVIOUS_HANDLERS[sig] = signal.signal(sig, _on_signal)


def _restore_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, previous in list(_PREVIOUS_HANDLERS.items()):
        if signal.getsignal(sig) is _on_signal:
            signal.signal(sig, previous)
        del _PREVIOUS_HANDLERS[sig]


def _guard(parent: int, marker: str, work_dir: str, keep: bool) -> None:
    """The guardian (its own process, started by :meth:`NativeStack.start`): when ``parent`` dies without
    having stopped the stack (SIGKILL, a crash), kill every process of the stack -- the sessions listed in
    ``<work_dir>/sessions.json`` and whatever carries the stack's marker -- (SIGTERM, then SIGKILL after 10 s)
    and remove ``work_dir`` unless ``keep``. stop() ends the guardian once it has stopped everything."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.getppid() == parent:
        time.sleep(0.5)

    def find() -> list[int]:
        try:
            sessions = json.loads((Path(work_dir) / SESSIONS_FILE).read_text())
        except (OSError, ValueError):
            sessions = []
        return processes_of(sessions=sessions, descendants_of=sessions, marker=marker)

    _signal_all(find(), signal.SIGTERM)
    _signal_all(_wait_gone(find, 10.0), signal.SIGKILL)
    _wait_gone(find, 10.0)
    if not keep:
        shutil.rmtree(work_dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- the stack
class NativeStack:
    """docker-compose.yaml's services as native processes on loopback (see the module docstring).

    Args:
        dags: the DAGs folder (``/opt/airflow/dags``), or several, whose entries are then linked into one
            folder ``<work_dir>/dags`` (a name in two of them is a ValueError). Default: the repo's ``dags/``.
        fault_plan: the emulator's fault plan: a path, or None for no faults (default: what the compose file
            says, ``RESILIENT_FAULT_PLAN`` or the Vertex AI demo's plan).
        time_scale: the emulator's ``--time-scale`` (platform latencies multiplied by it; default: the
            compose file's, ``RESILIENT_TIME_SCALE`` or 0.01).
        keep: keep the work directory (logs, AIRFLOW_HOME, database files) after stop.
        health_timeout: seconds to wait for every component to report healthy.
        stop_timeout: seconds a component has to exit after SIGTERM before its processes are SIGKILLed.
        compose_file: docker-compose.yaml.
        variables: compose variables (default ``os.environ``).
        executor: ``"local"`` (the compose file's default: the scheduler's LocalExecutor, one triggerer) or
            ``"celery"`` (profile ``celery``: Redis, two ``airflow celery worker`` and a second triggerer, with the
            ``AIRFLOW_EXECUTOR`` variable set to ``CeleryExecutor``), as ``make compose-up EXECUTOR=...``.
        role_env: more environment variables for the components of a role only (:attr:`ServicePlan.role`), e.g.
            ``{"triggerer": {"PYTHONASYNCIODEBUG": "1"}}``: a diagnostic aimed at one kind of process, which the
            others -- the task workers, the emulator's workloads -- do not run under (asyncio's debug mode also makes
            aiohttp's HTTP parser strict).

    Raises (from :meth:`start`):
        StackError: something did not start (PostgreSQL, emulator, ``airflow db migrate``, a component) or
            the health endpoint did not report every component healthy in ``health_timeout``; everything
            started is stopped and the work directory kept.
    """

    def __init__(self, *, dags: str | Path | Sequence[str | Path] | None = None,
                 fault_plan: str | Path | None = _COMPOSE_DEFAULT, time_scale: float | None = None,
                 keep: bool = False, health_timeout: float = 180.0, stop_timeout: float = 15.0,
                 compose_file: str | Path = COMPOSE_FILE, variables: Mapping[str, str] | None = None,
                 executor: str = "local", role_env: Mapping[str, Mapping[str, str]] | None = None) -> None:
        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {sorted(EXECUTORS)}, got {executor!r}")
        self.executor = executor
        self.profiles, executor_class = EXECUTORS[executor]
        if dags is None:
            dags = [DEFAULT_DAGS_FOLDER]
        elif isinstance(dags, str | Path):
            dags = [dags]
        self._dag_sources = [Path(d).resolve() for d in dags]
        if not self._dag_sources:
            raise ValueError("dags: no folder")
        names: dict[str, Path] = {}
        for folder in self._dag_sources:
            if not folder.is_dir():
                raise ValueError(f"dags: {folder} is not a directory")
            for entry in folder.iterdir():
                if len(self._dag_sources) > 1 and entry.name in names and entry.name != "__pycache__":
                    raise ValueError(f"dags: {entry.name} is in both {names[entry.name]} and {folder}")
                names[entry.name] = folder
        self.variables = dict(os.environ if variables is None else variables)
        if fault_plan is not _COMPOSE_DEFAULT:
            self.variables["RESILIENT_FAULT_PLAN"] = "" if fault_plan is None else str(Path(fault_plan).resolve())
        if time_scale is not None:
            self.variables["RESILIENT_TIME_SCALE"] = repr(float(time_scale))
        if executor != "local" or "AIRFLOW_EXECUTOR" in self.variables:
            self.variables["AIRFLOW_EXECUTOR"] = executor_class
        self.keep = keep
        self.role_env = {role: dict(env) for role, env in (role_env or {}).items()}
        self.health_timeout = health_timeout
        self.stop_timeout = stop_timeout
        self.compose_file = Path(compose_file)
        self.id = uuid.uuid4().hex
        self.plan: StackPlan | None = None
        self._work: Path | None = None
        self._processes: dict[str, _Process] = {}
        self._pg_bin: Path | None = None
        self._pg_started = False
        self._guardian: subprocess.Popen[bytes] | None = None
        self._sessions: list[int] = []  # every session this stack started (pids of the session leaders)
        self._failed = False
        self._started = False
        self._stopping = False
        self._lock = threading.RLock()
        self._token: str | None = None  # the api-server's JWT, on Airflow versions that want one (api())
        self.start_seconds: float | None = None  #: start() to healthy, once started
        self.stop_seconds: float | None = None  #: how long stop() took, once stopped

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> NativeStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> NativeStack:
        """Start PostgreSQL, the emulator, ``airflow db migrate``, then the Airflow components; return once
        the health endpoint reports every component healthy. See the class docstring for errors."""
        with self._lock:
            if self._started:
                raise RuntimeError("this NativeStack was started already (one start per instance)")
            self._started = True
        began = time.monotonic()
        self._work = Path(tempfile.mkdtemp(prefix="resilient-stack-"))
        self._work.chmod(0o755)  # PostgreSQL runs as another user under it
        with _LIVE_LOCK:
            _LIVE.add(self)
            _install_handlers()
        try:
            self._start(began)
        except BaseException:
            self._failed = True
            self.stop()
            raise
        return self

    def _start(self, began: float) -> None:
        work = self.work_dir
        (work / "logs").mkdir()
        self._start_guardian()
        dags = self._dag_sources[0]
        if len(self._dag_sources) > 1:
            dags = work / "dags"
            dags.mkdir()
            for folder in self._dag_sources:
                for entry in folder.iterdir():
                    if entry.name != "__pycache__":
                        (dags / entry.name).symlink_to(entry)
        self.plan = plan = native_plan(ports=Ports.free(), dags_folder=dags, work_dir=work,
                                       compose_file=self.compose_file, variables=self.variables,
                                       profiles=self.profiles)
        Path(plan.local_settings["AIRFLOW_HOME"]).mkdir()
        (work / "emulator").mkdir()

        emulator = self._process(plan.emulator, cwd=work / "emulator")
        self._launch(emulator)  # starts while PostgreSQL and the migration do (compose: init waits for postgres only)
        if plan.redis is not None:
            self._launch(self._process(plan.redis, cwd=work))
        self._start_postgres()
        init = self._process(plan.init, cwd=Path(plan.local_settings["AIRFLOW_HOME"]))
        self._launch(init)
        try:
            code = init.proc.wait(timeout=600) if init.proc else 1
        except subprocess.TimeoutExpired:
            init.signal_group(signal.SIGKILL)
            raise StackError(f"{INIT_SERVICE} did not finish in 600 s:\n{_tail(init.log_path)}") from None
        if code != 0:
            raise StackError(f"{INIT_SERVICE} ({' '.join(plan.init.command)}) exited {code}:\n"
                             f"{_tail(init.log_path)}")
        self._wait_emulator(60.0)
        if plan.redis is not None:
            self._wait_redis(60.0)
        deadline = time.monotonic() + self.health_timeout
        self._start_components(deadline)
        self.wait_healthy(max(1.0, deadline - time.monotonic()), _startup=True)
        triggerers = plan.of_role("triggerer")
        if len(triggerers) > 1:  # the health endpoint reports the newest heartbeat of any of them
            self.wait_jobs("TriggererJob", count=len(triggerers), timeout=max(1.0, deadline - time.monotonic()))
        self.start_seconds = time.monotonic() - began

    def _start_components(self, deadline: float) -> None:
        """Start the components in the order of their ``depends_on`` among themselves (the scheduler after the
        api-server answers); a dependency with condition ``service_healthy`` is waited for (the api-server:
        its health endpoint answers; another component: the endpoint reports it healthy)."""
        plan = self._plan()
        remaining = dict(plan.components)
        while remaining:
            batch = [name for name, svc in remaining.items()
                     if not any(dep in remaining for dep in svc.depends_on)]
            if not batch:
                raise StackError(f"depends_on cycle among {sorted(remaining)}")
            for name in batch:
                self._launch(self._process(remaining.pop(name), cwd=self.airflow_home))
            awaited = {dep for svc in remaining.values() for dep, cond in svc.depends_on.items()
                       if dep in batch and cond == "service_healthy"}
            for name in sorted(awaited):
                timeout = max(1.0, deadline - time.monotonic())
                if name == APISERVER_SERVICE:
                    self._wait_answering(timeout)
                elif plan.components[name].role in HEALTH_COMPONENTS:
                    self.wait_healthy(timeout, components=[plan.components[name].role], _startup=True)
        for name in plan.of_role("celery_worker"):
            self._wait_worker_ready(self._processes[name], 0, max(1.0, deadline - time.monotonic()))

    def _wait_redis(self, timeout: float) -> None:
        """Until Redis answers PING (the compose healthcheck's ``redis-cli ping``)."""
        def pong() -> bool:
            with socket.create_connection(("127.0.0.1", self._plan().ports.redis), timeout=2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")

        _wait_serving(self._processes[REDIS_SERVICE], "answer PING", pong, timeout)

    def _wait_worker_ready(self, process: _Process, offset: int, timeout: float) -> None:
        """Until Celery worker ``process`` logs that it is ready (``<node name> ready.``) after byte ``offset`` of
        its log: it is connected to the broker and takes tasks."""
        def ready() -> bool:
            with process.log_path.open("rb") as log:
                log.seek(offset)
                return re.search(rb"@\S+ ready\.", log.read()) is not None

        _wait_serving(process, "log that it is ready", ready, timeout)

    def _wait_answering(self, timeout: float) -> None:
        """Until the api-server answers its health endpoint (the compose healthcheck), whatever it reports."""
        _wait_serving(self._processes[APISERVER_SERVICE], "answer", lambda: self.health() is not None, timeout,
                      logs=self.tails, every=0.5)

    def _start_guardian(self) -> None:
        code = (f"import sys; from {MODULE} import _guard; "
                "_guard(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == '1')")
        env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        with (self.work_dir / "logs" / "guardian.log").open("ab") as log:
            self._guardian = subprocess.Popen(
                [sys.executable, "-c", code, str(os.getpid()), self.id, str(self.work_dir), "1" if self.keep else "0"],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _base_env(self) -> dict[str, str]:
        """The calling environment without Airflow's variables (a container has none), the interpreter's bin
        directory first on PATH, the repository root first on PYTHONPATH (every Airflow process imports this module
        for ``[core] hostname_callable``), and the stack's marker."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AIRFLOW_", "AIRFLOW__", "_AIRFLOW")) and k != MARKER_ENV}
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "/usr/bin:/bin")])
        env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env[MARKER_ENV] = self.id
        return env

    def _resolve(self, argv: list[str], env: Mapping[str, str]) -> list[str]:
        """``airflow`` / ``resilient-emulator`` as found on the process's PATH, else through this interpreter."""
        if shutil.which(argv[0], path=env.get("PATH")):
            return [shutil.which(argv[0], path=env.get("PATH")) or argv[0], *argv[1:]]
        modules = {"airflow": "airflow", "resilient-emulator": "airflow_provider_resilient.testing.emulator"}
        if argv[0] in modules:
            return [sys.executable, "-m", modules[argv[0]], *argv[1:]]
        return argv

    def _process(self, service: ServicePlan, *, cwd: Path) -> _Process:
        assert self.plan is not None
        env = self._base_env()
        env.update(service.environment)
        if service.name not in ("emulator", REDIS_SERVICE):
            env.update(self.plan.local_settings)
        env.update(service.local_settings)
        env.update(self.role_env.get(service.role, {}))
        process = _Process(service.name, self._resolve(service.command, env), env,
                           self.work_dir / "logs" / f"{service.name}.log", cwd)
        self._processes[service.name] = process
        return process

    def _launch(self, process: _Process) -> None:
        process.start()
        assert process.proc is not None
        self._add_session(process.proc.pid)

    def _add_session(self, pid: int) -> None:
        """Remember the session of ``pid`` (for stop() and for the guardian's file)."""
        stat = _stat(pid)
        session = stat[3] if stat is not None else pid
        if session not in self._sessions and session != os.getsid(0):
            self._sessions.append(session)
            tmp = self.work_dir / f"{SESSIONS_FILE}.tmp"
            tmp.write_text(json.dumps(self._sessions))
            tmp.replace(self.work_dir / SESSIONS_FILE)

    def _as_postgres(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def _start_postgres(self) -> None:
        assert self.plan is not None
        self._pg_bin = pg_bin = _postgres_bin()
        work, port = self.work_dir, self.plan.ports.postgres
        data, sock, log = work / "pgdata", work / "pgsock", work / "logs" / "postgres.log"
        for path in (data, sock):
            path.mkdir(mode=0o700)
        log.touch()
        if os.geteuid() == 0:
            for path in (data, sock, log):
                shutil.chown(path, "postgres")
        env = self._base_env()

        def run(argv: list[str], what: str, **kwargs: Any) -> str:
            done = subprocess.run(self._as_postgres(argv), env=env, cwd=work, capture_output=True, text=True,
                                  **kwargs)
            if done.returncode != 0:
                raise StackError(f"PostgreSQL: {what} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n"
                                 f"{_tail(log)}")
            return str(done.stdout)

        run([str(pg_bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth-local=trust",
             "--auth-host=scram-sha-256", "--encoding=UTF8", "--no-instructions"], "initdb")
        self._pg_started = True
        run([str(pg_bin / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
             "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1", "start"], "pg_ctl start")
        with contextlib.suppress(OSError, ValueError, IndexError):  # pg_ctl puts the postmaster in its own session
            self._add_session(int((data / "postmaster.pid").read_text().split()[0]))
        pg = self.plan.postgres
        user, password, db = pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"]
        statements = [f"ALTER ROLE postgres PASSWORD {_quote_literal(password)}" if user == "postgres" else
                      f"CREATE ROLE {_quote_ident(user)} LOGIN PASSWORD {_quote_literal(password)}"]
        if db != "postgres":
            statements.append(f"CREATE DATABASE {_quote_ident(db)} OWNER {_quote_ident(user)}")
        for sql in statements:
            run([str(pg_bin / "psql"), "-h", str(sock), "-p", str(port), "-U", "postgres", "-d", "postgres",
                 "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql], sql.split(" PASSWORD")[0])

    def _wait_emulator(self, timeout: float) -> None:
        """Until the emulator's /healthz answers ok (the compose healthcheck)."""
        _wait_serving(self._processes["emulator"], "become healthy",
                      lambda: self.emulator_get("/healthz").get("status") == "ok", timeout)

    def stop(self) -> None:
        """Stop the components (SIGTERM to each one's processes, task processes included; after
        ``stop_timeout`` seconds SIGKILL to whatever is left of them), the emulator (and its workloads), then
        PostgreSQL (``pg_ctl stop -m fast``); SIGKILL whatever still carries the stack's marker; remove the
        work directory unless ``keep`` or the start failed (then its path is printed). Idempotent."""
        with self._lock:
            if self._stopping or not self._started or self._work is None:
                return
            self._stopping = True
        began = time.monotonic()
        try:
            components = [p for name, p in self._processes.items() if name != "emulator"]
            self._stop_processes(components, self.stop_timeout)
            if "emulator" in self._processes:
                self._stop_processes([self._processes["emulator"]], 10.0)
            self._stop_postgres()
            _signal_all(self.processes(), signal.SIGKILL)
            left = _wait_gone(self.processes, 10.0)
            if left:
                print(f"NativeStack: processes {left} survived SIGKILL", file=sys.stderr)
            if self._guardian is not None:
                self._guardian.kill()
                self._guardian.wait()
            if self.keep or self._failed:
                print(f"NativeStack: logs and AIRFLOW_HOME kept in {self._work} (logs: {self._work / 'logs'})",
                      file=sys.stderr)
            else:
                shutil.rmtree(self._work, ignore_errors=True)
        finally:
            self.stop_seconds = time.monotonic() - began
            with _LIVE_LOCK:
                _LIVE.discard(self)
                if not _LIVE:
                    _restore_handlers()

    def _stop_processes(self, processes: list[_Process], timeout: float) -> None:
        # SIGTERM to every process of each, not to the main one only (as `docker stop` does): a scheduler would
        # wait for its running tasks to end, here their supervisors end them (operators' on_kill) at once.
        for process in processes:
            process.killed = True
            _signal_all(process.members(), signal.SIGTERM)
            process.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in processes:
            process.reap(max(0.0, deadline - time.monotonic()))
            _wait_gone(process.members, max(0.0, deadline - time.monotonic()))
        for process in processes:
            _signal_all(process.members(), signal.SIGKILL)
            process.signal_group(signal.SIGKILL)
            process.reap(5.0)
            _wait_gone(process.members, 5.0)

    def _stop_postgres(self) -> None:
        if not self._pg_started or self._pg_bin is None:
            return
        self._pg_started = False
        data = self.work_dir / "pgdata"
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(self._as_postgres([str(self._pg_bin / "pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                                              "-t", "30", "stop"]),
                           cwd=self.work_dir, capture_output=True, timeout=40)

    # ------------------------------------------------------------------ components
    def _name(self, name: str) -> str:
        if name in self._processes:
            return name
        if f"airflow-{name}" in self._processes:
            return f"airflow-{name}"
        raise KeyError(f"no service {name!r}; services: {sorted(self._processes)}")

    @property
    def services(self) -> list[str]:
        """The services this stack runs as processes: ``emulator``, ``airflow-init`` and the components."""
        return list(self._processes)

    def pids(self, name: str) -> list[int]:
        """Live processes of service ``name`` (its session and process group)."""
        return self._processes[self._name(name)].members()

    def processes(self) -> list[int]:
        """Every live process of this stack: in the session of a service it started (components, their
        workers and task processes, the emulator, PostgreSQL) or carrying its marker (the emulator's
        workloads, anything else that left its session)."""
        return processes_of(sessions=self._sessions, descendants_of=self._sessions, marker=self.id)

    def kill_component(self, name: str, sig: int = signal.SIGKILL, *, timeout: float = 30.0) -> None:
        """Kill service ``name`` (``airflow-triggerer`` or ``triggerer``, ``emulator``, ...) as a container is
        killed: SIGKILL goes to every process of it -- its process group, session and descendants (task
        processes, the emulator's workloads); another signal (``docker kill --signal``) to its main process
        only, which then shuts the rest down itself. Returns when they are all gone.

        Raises:
            TimeoutError: some are still alive after ``timeout`` seconds (e.g. ``sig`` was SIGTERM and the
                component is still shutting down).
        """
        process = self._processes[self._name(name)]
        process.killed = True
        if sig == signal.SIGKILL:
            _signal_all(process.members(), sig)
            process.signal_group(sig)
        elif process.running and process.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                process.proc.send_signal(sig)
        process.reap(timeout)
        left = _wait_gone(process.members, timeout)
        if left:
            raise TimeoutError(f"{process.name}: processes {left} still alive {timeout:.0f} s after signal {sig}")

    def start_component(self, name: str, *, wait: bool = True, timeout: float = 180.0) -> None:
        """Start service ``name`` again with the same command and environment, appending to its log. With
        ``wait``: return once it is serving again (an Airflow component reports healthy with a heartbeat
        after this call; the api-server answers; the emulator's /healthz answers).

        Raises:
            RuntimeError: it is still running.
            StackError: not healthy again within ``timeout`` seconds.
        """
        process = self._processes[self._name(name)]
        if process.running or process.members():
            raise RuntimeError(f"{process.name} is running; kill_component() it first")
        since = datetime.now(UTC)
        offset = process.log_path.stat().st_size if process.log_path.exists() else 0
        self._launch(process)
        if not wait:
            return
        role = self._plan().components[process.name].role if process.name in self._plan().components else ""
        if process.name == "emulator":
            self._wait_emulator(timeout)
        elif process.name == REDIS_SERVICE:
            self._wait_redis(timeout)
        elif role == "celery_worker":
            self._wait_worker_ready(process, offset, timeout)
        elif role == "triggerer":  # a triggerer of its own: another one may be heartbeating all along
            self.wait_healthy(timeout, since={"triggerer": since})
            self.wait_jobs("TriggererJob", started_since=since, timeout=timeout)
        elif role in HEALTH_COMPONENTS:
            self.wait_healthy(timeout, since={role: since})
        else:
            self.wait_healthy(timeout)

    def pause_component(self, name: str) -> list[int]:
        """Stop every process of service ``name`` with SIGSTOP, as ``docker compose pause`` freezes a container:
        a triggerer or worker that stalls (a long pause, a starved pod) but does not die. Returns the pids."""
        process = self._processes[self._name(name)]
        pids = process.members()
        _signal_all(pids, signal.SIGSTOP)
        return pids

    def resume_component(self, name: str) -> None:
        """SIGCONT every process of service ``name`` (``docker compose unpause``)."""
        _signal_all(self._processes[self._name(name)].members(), signal.SIGCONT)

    def component_of(self, pid: int) -> str | None:
        """The service whose process (or descendant) ``pid`` is, e.g. the Celery worker running a task
        (``GET .../taskInstances/...`` gives its ``pid``); None when it is none of the stack's."""
        for name, process in self._processes.items():
            if pid in process.members():
                return name
        return None

    def component_on(self, hostname: str | None) -> str | None:
        """The service a job or task instance with ``hostname`` runs on (:func:`service_hostname`), or None."""
        for name, service in self._plan().components.items():
            if hostname is not None and service.local_settings.get(HOSTNAME_ENV) == hostname:
                return name
        return None

    def components(self, role: str) -> list[str]:
        """The stack's components with ``role`` (``triggerer``, ``celery_worker``, ``scheduler``, ...)."""
        return self._plan().of_role(role)

    def jobs(self, job_type: str, *, alive: bool | None = True) -> list[dict[str, Any]]:
        """Airflow's jobs of ``job_type`` (``TriggererJob``, ``SchedulerJob``, ...) from ``GET /api/v2/jobs``:
        each with ``id``, ``start_date``, ``latest_heartbeat``; with ``alive``, only those Airflow deems alive
        (a heartbeat within the health threshold).

        Raises:
            StackError: the api-server answered with an error.
        """
        query = f"job_type={job_type}&limit=100" + ("" if alive is None else f"&is_alive={str(alive).lower()}")
        status, body = self.api("GET", f"/api/v2/jobs?{query}", timeout=10)
        if status != 200 or not isinstance(body, dict):
            raise StackError(f"/api/v2/jobs: {status} {body}")
        jobs: list[dict[str, Any]] = body.get("jobs") or []
        return jobs

    def wait_jobs(self, job_type: str, *, count: int = 1, started_since: datetime | None = None,
                  timeout: float = 180.0) -> list[dict[str, Any]]:
        """Wait until at least ``count`` alive jobs of ``job_type`` exist (with ``started_since``: that started at or
        after it); return them.

        Raises:
            StackError: not so within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        got: list[dict[str, Any]] = []
        while True:
            with contextlib.suppress(OSError, StackError):
                got = [j for j in self.jobs(job_type) if started_since is None or (
                    j.get("start_date") and datetime.fromisoformat(j["start_date"]) >= started_since)]
                if len(got) >= count:
                    return got
            if time.monotonic() > deadline:
                raise StackError(f"{count} alive {job_type}(s) started since {started_since}: only {got} after "
                                 f"{timeout:.0f} s\n{self.tails()}")
            time.sleep(1.0)

    def component_log(self, name: str) -> str:
        """Everything service ``name`` printed (stdout and stderr, across restarts): ``postgres``,
        ``emulator``, ``airflow-init``, ``airflow-apiserver`` (or ``apiserver``), ..."""
        path = self.work_dir / "logs" / f"{name}.log"
        if not path.exists():
            path = self.work_dir / "logs" / f"{self._name(name)}.log"
        return path.read_text(errors="replace")

    # ------------------------------------------------------------------ health
    def health(self) -> dict[str, Any]:
        """``GET /api/v2/monitor/health``.

        Raises:
            OSError: the api-server does not answer.
            StackError: it answers with an error status.
        """
        status, body = self.api("GET", "/api/v2/monitor/health", timeout=10)
        if status != 200 or not isinstance(body, dict):
            raise StackError(f"/api/v2/monitor/health: {status} {body}")
        return body

    def wait_healthy(self, timeout: float = 180.0, *, since: Mapping[str, datetime] | None = None,
                     components: Iterable[str] = HEALTH_COMPONENTS, _startup: bool = False) -> dict[str, Any]:
        """Wait until the health endpoint reports ``components`` (default: metadatabase, scheduler, triggerer
        and dag_processor) "healthy", and each component named in ``since`` (``{"triggerer": <aware
        datetime>}``) with a heartbeat at or after that time; return the health document.

        Raises:
            StackError: not so within ``timeout`` seconds, or a component exited meanwhile (without having
                been killed through :meth:`kill_component`); the message has the last health document and
                the tail of each component's log.
        """
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            for process in self._processes.values():
                if process.name != INIT_SERVICE and not process.killed and process.proc is not None \
                        and process.proc.poll() is not None:
                    raise StackError(f"{process.name} exited with {process.proc.returncode}\n" + self.tails())
            try:
                last = self.health()
                if self._all_healthy(last, components, since or {}):
                    return dict(last)
            except (OSError, StackError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                what = "did not start" if _startup else "not healthy"
                raise StackError(f"Airflow {what}: not every component healthy in {timeout:.0f} s; "
                                 f"last health: {last}\n{self.tails()}")
            time.sleep(1.0)

    @staticmethod
    def _all_healthy(health: Mapping[str, Any], components: Iterable[str], since: Mapping[str, datetime]) -> bool:
        for component in components:
            if (health.get(component) or {}).get("status") != "healthy":
                return False
        for component, when in since.items():
            beat = (health.get(component) or {}).get(f"latest_{component}_heartbeat")
            if not beat or datetime.fromisoformat(beat) < when:
                return False
        return True

    def tails(self, lines: int = 30) -> str:
        """The last ``lines`` lines of every component's log, each under its name and path."""
        return "\n".join(f"----- {p.name} ({p.log_path}):\n{_tail(p.log_path, lines)}"
                         for p in self._processes.values())

    # ------------------------------------------------------------------ HTTP
    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:<port>`` of the api-server (the UI, ``/api/v2``, ``/execution``)."""
        return f"http://127.0.0.1:{self._plan().ports.api}"

    @property
    def emulator_url(self) -> str:
        """``http://127.0.0.1:<port>`` of the emulator's HTTP control API."""
        return f"http://127.0.0.1:{self._plan().ports.emulator_control}"

    def api(self, method: str, path: str, body: Any = None, *, accept: str = "application/json",
            timeout: float = 30.0) -> tuple[int, Any]:
        """One request to the api-server, as the UI makes it: ``path`` such as ``/api/v2/dags?limit=100``,
        ``body`` sent as JSON. With ``simple_auth_manager_all_admins`` Airflow 3.3 acts as admin on a request
        without an Authorization header (a header of ours would win and be rejected); Airflow 3.1 answers 401, and
        then every request carries the token that an all-admins server's ``GET /auth/token`` gives.

        Returns:
            (HTTP status, the parsed JSON body, or the text when it is not JSON).

        Raises:
            OSError: the api-server does not answer (connection refused, timeout).
        """
        status, got = _http(method, self.api_url + path, body, accept=accept, timeout=timeout, token=self._token)
        if status == 401:  # no token yet, or an expired one
            token_status, token = _http("GET", self.api_url + "/auth/token", timeout=timeout)
            if token_status in (200, 201) and isinstance(token, dict) and token.get("access_token"):
                self._token = str(token["access_token"])
                status, got = _http(method, self.api_url + path, body, accept=accept, timeout=timeout,
                                    token=self._token)
        return status, got

    def emulator_get(self, path: str) -> Any:
        """GET on the emulator's control API (``/calls?method=CreateCustomJob``, ``/jobs``, ``/faults``,
        ``/healthz``); the parsed JSON.

        Raises:
            StackError: an error status (the message has the body). OSError: no answer.
        """
        return self._emulator("GET", path, None)

    def emulator_post(self, path: str, body: Any = None) -> Any:
        """POST ``body`` as JSON to the emulator's control API (``/faults`` with a fault, ``/reset`` with an
        optional fault plan); the parsed JSON.

        Raises:
            StackError: an error status (e.g. 400 for an invalid fault). OSError: no answer.
        """
        return self._emulator("POST", path, {} if body is None else body)

    def _emulator(self, method: str, path: str, body: Any) -> Any:
        status, got = _http(method, self.emulator_url + path, body, timeout=30.0)
        if status >= 400:
            raise StackError(f"emulator {method} {path}: {status} {got}")
        return got

    # ------------------------------------------------------------------ environment
    def _plan(self) -> StackPlan:
        if self.plan is None:
            raise RuntimeError("the stack is not started")
        return self.plan

    @property
    def env(self) -> dict[str, str]:
        """The environment of an Airflow CLI call against this stack (e.g. ``airflow dags list-import-errors``):
        the calling environment without its AIRFLOW_* variables, the stack's Airflow settings, PATH with this
        interpreter's bin directory first. A process run with it is stopped with the stack."""
        plan = self._plan()
        return {**self._base_env(), **plan.environment, **plan.local_settings}

    @property
    def emulator_env(self) -> dict[str, str]:
        """RESILIENT_EMULATOR_HOST (the emulator's address, from the compose file's connection
        :data:`EMULATOR_CONNECTION_ENV`), STORAGE_EMULATOR_HOST, GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT and the OBS
        variables (OBS_ENDPOINT, OBS_ACCESS_KEY_ID, OBS_SECRET_ACCESS_KEY): what a client in the test process needs
        to reach the stack's emulator (``testing.emulator_clients``, gcsfs, ``ObsFileSystem``)."""
        env = dict(self._plan().environment)
        connection = json.loads(env.get(EMULATOR_CONNECTION_ENV) or "{}")
        if (extra := connection.get("extra")) and extra.get("emulator_host"):
            env["RESILIENT_EMULATOR_HOST"] = str(extra["emulator_host"])
        return {k: env[k] for k in EMULATOR_CLIENT_ENV if k in env}

    @property
    def work_dir(self) -> Path:
        """The stack's directory: ``logs/``, ``airflow_home/``, ``emulator/``, ``pgdata/``, ``dags/`` (when
        several dags folders are combined)."""
        if self._work is None:
            raise RuntimeError("the stack is not started")
        return self._work

    @property
    def airflow_home(self) -> Path:
        """AIRFLOW_HOME of every Airflow process of the stack (task logs under ``logs/``)."""
        return Path(self._plan().local_settings["AIRFLOW_HOME"])

    @property
    def dags_folder(self) -> Path:
        return self._plan().dags_folder


def _http(method: str, url: str, body: Any = None, *, accept: str = "application/json",
          timeout: float = 30.0, token: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Accept": accept})
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw, ctype = response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, raw, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "")
    text = raw.decode("utf-8", "replace")
    if "json" in ctype or (text[:1] in "[{" and text):
        with contextlib.suppress(ValueError):
            return status, json.loads(text)
    return status, text


# ---------------------------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.stack",
        description="Run docker-compose.yaml's services (PostgreSQL, the emulator, Airflow's api-server, scheduler, "
                    "dag-processor and triggerer, each its own process) natively on loopback until Ctrl-C/SIGTERM.")
    parser.add_argument("--dags", action="append", type=Path,
                        help="DAGs folder (repeat to combine several; default: the repo's dags/)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, AIRFLOW_HOME) at exit")
    parser.add_argument("--fault-plan", help="the emulator's fault plan, or 'none' (default: the compose file's)")
    parser.add_argument("--time-scale", type=float, help="the emulator's time scale (default: the compose file's)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for health (default 180)")
    parser.add_argument("--executor", choices=sorted(EXECUTORS), default="local",
                        help="local: the LocalExecutor and one triggerer (default); celery: compose profile celery -- "
                             "Redis, two Celery workers, two triggerers")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Ctrl-C stops the stack even when started in the background of a script (which ignores SIGINT there).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    fault_plan: Any = _COMPOSE_DEFAULT
    if args.fault_plan is not None:
        fault_plan = None if args.fault_plan.lower() in ("none", "") else args.fault_plan
    stack = NativeStack(dags=args.dags, keep=args.keep, fault_plan=fault_plan, time_scale=args.time_scale,
                        health_timeout=args.timeout, executor=args.executor)
    print("starting PostgreSQL, the emulator, airflow db migrate, api-server, scheduler, dag-processor, "
          + ("Redis, two Celery workers, two triggerers" if args.executor == "celery" else "triggerer") + " ...",
          flush=True)
    try:
        with stack:
            plan = stack._plan()
            print(f"healthy in {stack.start_seconds:.1f} s")
            print(f"Airflow UI and REST API: {stack.api_url}")
            print(f"Emulator control API:    {stack.emulator_url}  (GET /calls, /jobs, /faults; POST /faults, /reset)")
            print(f"Emulator gRPC, storage:  127.0.0.1:{plan.ports.emulator}, "
                  f"http://127.0.0.1:{plan.ports.emulator_storage}")
            print(f"ModelArts, OBS:          http://127.0.0.1:{plan.ports.emulator_modelarts}, "
                  f"http://127.0.0.1:{plan.ports.emulator_obs}")
            print(f"PostgreSQL:              127.0.0.1:{plan.ports.postgres} "
                  f"(user {plan.postgres['POSTGRES_USER']}, db {plan.postgres['POSTGRES_DB']})")
            if plan.redis is not None:
                print(f"Redis (Celery broker):   127.0.0.1:{plan.ports.redis}; workers: "
                      f"{', '.join(plan.of_role('celery_worker'))}; triggerers: {', '.join(plan.of_role('triggerer'))}")
            print(f"Logs:                    {stack.work_dir / 'logs'} (task logs: {stack.airflow_home / 'logs'})")
            print(f"DAGs:                    {plan.dags_folder}")
            print("Ctrl-C stops everything.", flush=True)
            reported: set[str] = set()
            while True:
                time.sleep(2)
                for name, process in stack._processes.items():
                    if name != INIT_SERVICE and not process.running and name not in reported:
                        reported.add(name)
                        print(f"WARNING: {name} exited ({process.proc.returncode if process.proc else '-'}); "
                              f"see {process.log_path}", flush=True)
    except KeyboardInterrupt:
        print(f"stopped in {stack.stop_seconds or 0.0:.1f} s", flush=True)
        return 0
    except StackError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
