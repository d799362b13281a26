"""docker-compose.yaml and the native stack that runs it without docker (devtools/stack.py) stay in step.

Starts nothing: reads the compose file, checks it is a sound production topology (pinned images, healthchecks,
start order, loopback-only ports, settings that agree across services), and checks that the native stack's plan
runs the same services with the same commands and environment, changed only by the documented local mapping
(service host names -> 127.0.0.1 and the stack's ports, /opt/airflow/dags -> the dags folder).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from devtools import stack as stack_module
from devtools.stack import (
    COMPOSE_FILE,
    LOCAL_ONLY_SETTINGS,
    NativeStack,
    Ports,
    active_services,
    emulator_argv,
    environment_of,
    interpolate,
    load_compose,
    native_plan,
    option,
)

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_COMPONENTS = {"airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"}
#: Profile `celery`: the broker, two Celery workers and a second triggerer.
CELERY_SERVICES = {"redis", "airflow-worker-1", "airflow-worker-2", "airflow-triggerer-2"}
CELERY_COMPONENTS = CELERY_SERVICES - {"redis"}
JOB_TYPES = {"airflow-scheduler": "SchedulerJob", "airflow-dag-processor": "DagProcessorJob",
             "airflow-triggerer": "TriggererJob"}
# The triggerer's watchdog reports sleep(0.1) + blocked time: 0.2 means "blocked over 0.1 s" (see the compose file).
BLOCKED_THRESHOLD = 0.2
FAKE_PORTS = Ports(postgres=15432, api=18080, emulator=18470, emulator_control=18471, emulator_storage=19023,
                   emulator_modelarts=18472, emulator_obs=19024,
                   worker_log_server=18793, trigger_log_server=18794, redis=16379, spare=(18801, 18802, 18803))
#: The emulator's port options: each a fixed port in the compose command line, published, and mapped by the native
#: stack.
EMULATOR_PORT_OPTIONS = ("--port", "--control-port", "--storage-port", "--modelarts-port", "--obs-port")
# Compose variables as a clean shell has them (none): the file's own defaults.
NO_VARIABLES: dict[str, str] = {}


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_compose(COMPOSE_FILE, NO_VARIABLES)


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def common_env(compose: dict) -> dict[str, str]:
    return environment_of(compose["x-airflow-common"])


@pytest.fixture(scope="module")
def emu_argv(services: dict) -> list[str]:
    return emulator_argv(services["emulator"])


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("stack")
    return native_plan(ports=FAKE_PORTS, dags_folder=work / "dags", work_dir=work, variables=NO_VARIABLES)


@pytest.fixture(scope="module")
def celery_plan(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("celery-stack")
    return native_plan(ports=FAKE_PORTS, dags_folder=work / "dags", work_dir=work,
                       variables={"AIRFLOW_EXECUTOR": "CeleryExecutor"}, profiles=("celery",))


# ---------------------------------------------------------------------------------- interpolation
@pytest.mark.parametrize(("text", "variables", "expected"), [
    ("${X:-d}", {}, "d"), ("${X:-d}", {"X": ""}, "d"), ("${X:-d}", {"X": "v"}, "v"),
    ("${X-d}", {}, "d"), ("${X-d}", {"X": ""}, ""), ("${X-d}", {"X": "v"}, "v"),
    ("${X:+r}", {"X": "v"}, "r"), ("${X:+r}", {"X": ""}, ""), ("${X+r}", {"X": ""}, "r"),
    ("$${X}", {"X": "v"}, "${X}"), ("a$$b", {}, "a$b"), ("$X/${Y}", {"X": "1", "Y": "2"}, "1/2"),
    ("${X}", {}, ""), ("127.0.0.1:${AIRFLOW_PORT:-8080}:8080", {}, "127.0.0.1:8080:8080"),
])
def test_interpolate_as_compose_does(text: str, variables: dict[str, str], expected: str) -> None:
    assert interpolate(text, variables) == expected


def test_interpolate_required_variable() -> None:
    with pytest.raises(ValueError, match="X is required: set it"):
        interpolate("${X:?set it}", {})


# ---------------------------------------------------------------------------------- the compose file itself
def test_services_are_the_production_topology(compose: dict, services: dict) -> None:
    assert set(active_services(compose)) == {"postgres", "emulator", "airflow-init"} | AIRFLOW_COMPONENTS
    assert set(services) - set(active_services(compose)) == CELERY_SERVICES
    assert set(active_services(compose, ["celery"])) == set(services)
    for name in CELERY_SERVICES:
        assert services[name]["profiles"] == ["celery"], name
    for name in AIRFLOW_COMPONENTS | {"airflow-init"}:
        assert services[name]["command"][0] == "airflow", name
    assert services["airflow-init"]["command"] == ["airflow", "db", "migrate"]
    assert services["airflow-apiserver"]["command"] == ["airflow", "api-server"]
    assert services["airflow-scheduler"]["command"] == ["airflow", "scheduler"]
    assert services["airflow-dag-processor"]["command"] == ["airflow", "dag-processor"]
    assert services["airflow-triggerer"]["command"] == ["airflow", "triggerer"]
    assert services["airflow-triggerer-2"]["command"] == ["airflow", "triggerer"]
    for n in (1, 2):  # distinct node names: the workers answer pings and control commands apart
        assert services[f"airflow-worker-{n}"]["command"] == ["airflow", "celery", "worker", "--celery-hostname",
                                                             f"worker-{n}@%h"]
    assert services["redis"]["command"][0] == "redis-server"


def test_images_are_pinned(services: dict) -> None:
    for name, svc in services.items():
        image = svc.get("image", "")
        tag = image.rsplit(":", 1)[1] if ":" in image else ""
        assert tag and tag != "latest", f"{name}: image {image!r} has no pinned tag"
    built = {svc["image"] for svc in services.values() if "build" in svc}
    assert len(built) == 1, f"one image for the emulator and Airflow, not {built}"


def test_every_long_running_service_has_a_healthcheck(services: dict, emu_argv: list[str]) -> None:
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    control = option(emu_argv, "--control-port")
    assert f"127.0.0.1:{control}/healthz" in " ".join(services["emulator"]["healthcheck"]["test"])
    api_port = services["airflow-apiserver"]["ports"][0].rsplit(":", 1)[1]
    api_check = " ".join(services["airflow-apiserver"]["healthcheck"]["test"])
    assert f"127.0.0.1:{api_port}/api/v2/monitor/health" in api_check
    for name, job_type in {**JOB_TYPES, "airflow-triggerer-2": "TriggererJob"}.items():
        test = services[name]["healthcheck"]["test"]
        assert test[:4] == ["CMD", "airflow", "jobs", "check"] and "--local" in test, name
        assert test[test.index("--job-type") + 1] == job_type, name
    for n in (1, 2):
        test = services[f"airflow-worker-{n}"]["healthcheck"]["test"]
        assert test[0] == "CMD-SHELL" and "inspect ping" in test[1] and f"-d worker-{n}@${{HOSTNAME}}" in test[1]
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert "healthcheck" not in services["airflow-init"]


def test_start_order(services: dict) -> None:
    assert services["airflow-init"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["airflow-init"].get("restart") == "no"
    healthy = {"condition": "service_healthy"}
    for name in AIRFLOW_COMPONENTS | CELERY_COMPONENTS:
        # Task workers call the api-server's execution API: they start once it answers (Celery's: and Redis too).
        extra = ({"airflow-apiserver": healthy} if name == "airflow-scheduler" else
                 {"redis": healthy, "airflow-apiserver": healthy} if "worker" in name else {})
        assert services[name]["depends_on"] == {
            "postgres": {"condition": "service_healthy"},
            "emulator": {"condition": "service_healthy"},
            "airflow-init": {"condition": "service_completed_successfully"},
            **extra,
        }, name
        assert services[name]["restart"] == "unless-stopped", name


def test_ports_are_published_on_loopback_only(services: dict, emu_argv: list[str]) -> None:
    for name, svc in services.items():
        for entry in svc.get("ports", []):
            assert str(entry).startswith("127.0.0.1:"), f"{name}: {entry} is published beyond loopback"
    published = {str(p).rsplit(":", 1)[1] for p in services["emulator"]["ports"]}
    assert published >= {option(emu_argv, o) for o in EMULATOR_PORT_OPTIONS}
    assert services["airflow-apiserver"]["ports"] == ["127.0.0.1:8080:8080"]
    for name in set(services) - {"emulator", "airflow-apiserver"}:
        assert "ports" not in services[name], name


def test_every_airflow_service_has_the_common_environment(services: dict, common_env: dict[str, str]) -> None:
    for name in AIRFLOW_COMPONENTS | CELERY_COMPONENTS | {"airflow-init"}:
        assert environment_of(services[name]) == common_env, name


def test_database_settings_agree_with_postgres(services: dict, common_env: dict[str, str]) -> None:
    url = urlsplit(common_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    pg = environment_of(services["postgres"])
    assert url.scheme == "postgresql+psycopg2"
    assert (url.hostname, url.port) == ("postgres", 5432)
    assert (url.username, url.password, url.path.lstrip("/")) == (
        pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"])


def test_emulator_settings_agree_with_the_emulator(common_env: dict[str, str], emu_argv: list[str]) -> None:
    assert option(emu_argv, "--host") == "0.0.0.0"
    assert option(emu_argv, "--advertise-host") == "emulator"
    ports = {o: option(emu_argv, o) for o in EMULATOR_PORT_OPTIONS}
    assert all(p and p != "0" for p in ports.values()), ports
    # The operators reach the emulator through their default connection's extra emulator_host, and only so.
    assert json.loads(common_env["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"]) == {
        "conn_type": "google_cloud_platform", "extra": {"emulator_host": f"emulator:{ports['--port']}"}}
    assert "RESILIENT_EMULATOR_HOST" not in common_env
    assert common_env["STORAGE_EMULATOR_HOST"] == f"http://emulator:{ports['--storage-port']}"
    assert common_env["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] == "false"


def test_modelarts_and_obs_settings_are_the_emulators_own(common_env: dict[str, str], emu_argv: list[str]) -> None:
    """Every Airflow process has the huaweicloud_default connection and the OBS variables that the emulator's env()
    exports (its fake credentials, region and project: Emulator.modelarts_connection), with the service's host name
    and fixed ports."""
    from airflow_provider_resilient.testing import obs
    from airflow_provider_resilient.testing.emulator.modelarts import catalog
    from airflow_provider_resilient.testing.emulator.server import MODELARTS_CONNECTION_ENV

    assert json.loads(common_env[MODELARTS_CONNECTION_ENV]) == {
        "conn_type": "huaweicloud", "login": catalog.FAKE_ACCESS_KEY, "password": catalog.FAKE_SECRET_KEY,
        "extra": {"region": catalog.DEFAULT_REGION, "project_id": catalog.FAKE_PROJECT_ID,
                  "endpoint": f"http://emulator:{option(emu_argv, '--modelarts-port')}"}}
    assert common_env["OBS_ENDPOINT"] == f"http://emulator:{option(emu_argv, '--obs-port')}"
    assert (common_env["OBS_ACCESS_KEY_ID"], common_env["OBS_SECRET_ACCESS_KEY"]) == (obs.ACCESS_KEY_ID,
                                                                                    obs.SECRET_ACCESS_KEY)
    # The reconciler sweeps the ModelArts jobs of every connection it names, and each is defined here.
    for conn_id in common_env["AIRFLOW__RESILIENT__RECONCILE_HUAWEICLOUD_CONN_IDS"].split(","):
        assert "AIRFLOW_CONN_" + conn_id.strip().upper() in common_env, conn_id


def test_dags_are_mounted_where_airflow_and_the_emulator_look(services: dict, common_env: dict[str, str],
                                                              emu_argv: list[str]) -> None:
    dags = common_env["AIRFLOW__CORE__DAGS_FOLDER"]
    assert dags == "/opt/airflow/dags"
    for name in AIRFLOW_COMPONENTS | {"airflow-init", "emulator"}:
        assert f"./dags:{dags}:ro" in services[name]["volumes"], name
    plan_path = option(emu_argv, "--fault-plan")
    assert plan_path and plan_path.startswith(dags + "/")
    assert (ROOT / "dags" / plan_path[len(dags) + 1:]).is_file(), plan_path
    logs = {v for name in AIRFLOW_COMPONENTS for v in services[name]["volumes"] if v.endswith(":/opt/airflow/logs")}
    assert logs == {"airflow-logs:/opt/airflow/logs"}, "task logs: one volume shared by workers and api-server"


def test_the_executor_is_local_unless_the_celery_profile_asks(common_env: dict[str, str]) -> None:
    assert common_env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    celery = environment_of(load_compose(COMPOSE_FILE, {"AIRFLOW_EXECUTOR": "CeleryExecutor"})["x-airflow-common"])
    assert celery["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"


def test_celery_settings_agree_with_redis_and_postgres(services: dict, common_env: dict[str, str]) -> None:
    broker = urlsplit(common_env["AIRFLOW__CELERY__BROKER_URL"])
    assert (broker.scheme, broker.hostname, broker.port) == ("redis", "redis", 6379)
    assert services["redis"]["command"][services["redis"]["command"].index("--port") + 1] == "6379"
    # Celery's database backend takes SQLAlchemy URLs with `db+` and needs the driver named.
    backend = common_env["AIRFLOW__CELERY__RESULT_BACKEND"]
    assert backend == "db+" + common_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert backend.startswith("db+postgresql+psycopg2://")
    # A dead worker's task is found within a minute, not Airflow's default five.
    assert int(common_env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"]) == 60


def test_airflow_settings_of_the_separate_processes(services: dict, common_env: dict[str, str]) -> None:
    env = common_env
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert env["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] == "False"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] == "True"
    assert env["AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL"] == "1"
    api_port = services["airflow-apiserver"]["ports"][0].rsplit(":", 1)[1]
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == f"http://airflow-apiserver:{api_port}/execution/"
    assert env["AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE"] == "True"
    assert float(env["AIRFLOW__TRIGGERER__BLOCKED_MAIN_THREAD_WARNING_THRESHOLD"]) == BLOCKED_THRESHOLD
    # Shared secrets, or each process invents its own: task tokens, log requests and encrypted values fail.
    assert len(env["AIRFLOW__API_AUTH__JWT_SECRET"]) >= 32
    assert len(env["AIRFLOW__API__SECRET_KEY"]) >= 32
    from cryptography.fernet import Fernet

    Fernet(env["AIRFLOW__CORE__FERNET_KEY"].encode())  # a valid key


# ---------------------------------------------------------------------------------- the native stack's plan
def test_native_stack_runs_every_airflow_service_and_no_other(plan, services: dict) -> None:
    assert set(plan.components) == AIRFLOW_COMPONENTS
    for name, service in plan.components.items():
        assert service.command == services[name]["command"], name
        assert service.depends_on == {dep: cond["condition"] for dep, cond in services[name]["depends_on"].items()}
    assert plan.init.command == services["airflow-init"]["command"]
    assert list(plan.components) == [name for name in services if name in AIRFLOW_COMPONENTS]


def _mapped(value: str, dags: Path) -> str:
    """The documented local mapping, written out for this file's values."""
    for container, local in (("postgres:5432", f"127.0.0.1:{FAKE_PORTS.postgres}"),
                             ("redis:6379", f"127.0.0.1:{FAKE_PORTS.redis}"),
                             ("emulator:8470", f"127.0.0.1:{FAKE_PORTS.emulator}"),
                             ("emulator:9023", f"127.0.0.1:{FAKE_PORTS.emulator_storage}"),
                             ("emulator:8472", f"127.0.0.1:{FAKE_PORTS.emulator_modelarts}"),
                             ("emulator:9024", f"127.0.0.1:{FAKE_PORTS.emulator_obs}"),
                             ("airflow-apiserver:8080", f"127.0.0.1:{FAKE_PORTS.api}")):
        value = value.replace(container, local)
    return str(dags) if value == "/opt/airflow/dags" else value


def test_native_stack_environment_is_the_compose_environment(plan, services: dict,
                                                             common_env: dict[str, str]) -> None:
    expected = {k: _mapped(v, plan.dags_folder) for k, v in common_env.items()}
    assert plan.environment == expected
    for name, service in plan.components.items():
        assert service.environment == expected, name
    assert plan.init.environment == expected
    for key, value in plan.environment.items():
        for host in ("postgres:", "emulator:", "airflow-apiserver:", "redis:", "/opt/airflow"):
            assert host not in value.replace("postgresql", "").replace("redis://", ""), \
                f"{key}={value} still names {host}"


def test_native_stack_adds_only_the_one_host_settings(plan, common_env: dict[str, str]) -> None:
    assert set(plan.local_settings) == set(LOCAL_ONLY_SETTINGS)
    assert not set(plan.local_settings) & set(common_env), "compose sets what the native stack overrides"
    assert plan.local_settings["AIRFLOW_HOME"] == str(plan.work_dir / "airflow_home")
    assert plan.local_settings["AIRFLOW__API__HOST"] == "127.0.0.1"
    assert plan.local_settings["AIRFLOW__API__PORT"] == str(FAKE_PORTS.api)
    assert plan.local_settings["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"] == str(FAKE_PORTS.worker_log_server)
    assert plan.local_settings["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"] == str(FAKE_PORTS.trigger_log_server)
    assert plan.local_settings["AIRFLOW__CORE__HOSTNAME_CALLABLE"] == f"{stack_module.__name__}.service_hostname"
    hosts = [service.local_settings[stack_module.HOSTNAME_ENV] for service in plan.components.values()]
    assert hosts == [f"127.0.1.{n}" for n in range(1, len(hosts) + 1)], "each its own address, as each container"
    assert all(set(service.local_settings) == {stack_module.HOSTNAME_ENV}  # the default log ports
               for service in plan.components.values())


def test_native_celery_stack_runs_the_profile(celery_plan, services: dict) -> None:
    assert set(celery_plan.components) == AIRFLOW_COMPONENTS | CELERY_COMPONENTS
    assert celery_plan.environment["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert celery_plan.environment["AIRFLOW__CELERY__BROKER_URL"] == f"redis://127.0.0.1:{FAKE_PORTS.redis}/0"
    assert celery_plan.redis is not None and celery_plan.redis.command == [
        *services["redis"]["command"][:2], str(FAKE_PORTS.redis), *services["redis"]["command"][3:], "--bind",
        "127.0.0.1"]
    assert celery_plan.of_role("triggerer") == ["airflow-triggerer", "airflow-triggerer-2"]
    assert celery_plan.of_role("celery_worker") == ["airflow-worker-1", "airflow-worker-2"]
    # One host: the first triggerer and the first worker (the scheduler serves no logs with Celery) keep the ports
    # the api-server asks; each other log server has a spare port.
    own = {name: {k: v for k, v in svc.local_settings.items() if k != stack_module.HOSTNAME_ENV}
           for name, svc in celery_plan.components.items()}
    assert own["airflow-triggerer"] == own["airflow-worker-1"] == {}
    ports = [own["airflow-triggerer-2"]["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"],
             own["airflow-worker-2"]["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"]]
    assert sorted(map(int, ports)) == list(FAKE_PORTS.spare[:2])
    hosts = {svc.local_settings[stack_module.HOSTNAME_ENV] for svc in celery_plan.components.values()}
    assert len(hosts) == len(celery_plan.components)


def test_a_native_stack_with_the_celery_executor_sets_the_compose_variable() -> None:
    assert NativeStack(executor="celery", variables={}).variables == {"AIRFLOW_EXECUTOR": "CeleryExecutor"}
    assert NativeStack(executor="celery", variables={}).profiles == ("celery",)
    assert NativeStack(variables={}).variables == {}
    with pytest.raises(ValueError, match="executor must be one of"):
        NativeStack(executor="kubernetes")


def test_native_emulator_command_line(plan, emu_argv: list[str], services: dict) -> None:
    native = plan.emulator.command
    assert native[0] == "resilient-emulator"
    changed = {"--host": "127.0.0.1", "--advertise-host": "127.0.0.1", "--port": str(FAKE_PORTS.emulator),
               "--control-port": str(FAKE_PORTS.emulator_control),
               "--storage-port": str(FAKE_PORTS.emulator_storage),
               "--modelarts-port": str(FAKE_PORTS.emulator_modelarts), "--obs-port": str(FAKE_PORTS.emulator_obs),
               "--work-dir": str(plan.work_dir / "emulator"),
               "--fault-plan": option(emu_argv, "--fault-plan").replace("/opt/airflow/dags", str(plan.dags_folder))}
    assert native[1::2] == emu_argv[1::2], "the same options, in the same order"
    for opt, value in zip(emu_argv[1::2], emu_argv[2::2], strict=True):
        assert option(native, opt) == changed.get(opt, value), opt
    assert option(native, "--time-scale") == "0.01"
    assert plan.emulator.environment["RESILIENT_FAULT_PLAN"] == changed["--fault-plan"]


def test_native_postgres_credentials(plan, services: dict) -> None:
    assert plan.postgres == environment_of(services["postgres"])
    assert plan.port_map[("postgres", 5432)] == FAKE_PORTS.postgres


@pytest.mark.parametrize(("variables", "fault_plan", "time_scale"), [
    ({"RESILIENT_FAULT_PLAN": ""}, None, "0.01"),
    ({"RESILIENT_FAULT_PLAN": "/opt/airflow/dags/faults/tpu_demo.yaml", "RESILIENT_TIME_SCALE": "1"},
     "{dags}/faults/tpu_demo.yaml", "1"),
    ({"RESILIENT_FAULT_PLAN": "/elsewhere/plan.yaml"}, "/elsewhere/plan.yaml", "0.01"),
])
def test_compose_variables_reach_the_native_emulator(tmp_path: Path, variables: dict[str, str],
                                                     fault_plan: str | None, time_scale: str) -> None:
    plan = native_plan(ports=FAKE_PORTS, dags_folder=tmp_path / "d", work_dir=tmp_path, variables=variables)
    expected = fault_plan.format(dags=tmp_path / "d") if fault_plan else None
    assert option(plan.emulator.command, "--fault-plan") == expected
    assert option(plan.emulator.command, "--time-scale") == time_scale


def test_native_stack_overrides_are_compose_variables(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.yaml"
    assert NativeStack(fault_plan=None, variables={}).variables == {"RESILIENT_FAULT_PLAN": ""}
    assert NativeStack(fault_plan=plan_file, time_scale=0.5, variables={}).variables == {
        "RESILIENT_FAULT_PLAN": str(plan_file), "RESILIENT_TIME_SCALE": "0.5"}
    assert NativeStack(variables={"X": "1"}).variables == {"X": "1"}


def test_native_stack_rejects_clashing_dags_folders(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "same.py").write_text("")
    with pytest.raises(ValueError, match=r"same\.py is in both"):
        NativeStack(dags=[tmp_path / "a", tmp_path / "b"])
    with pytest.raises(ValueError, match="not a directory"):
        NativeStack(dags=tmp_path / "missing")


def test_unmapped_service_port_is_an_error(tmp_path: Path) -> None:
    text = COMPOSE_FILE.read_text().replace("http://emulator:9023", "http://emulator:9999")
    (tmp_path / "docker-compose.yaml").write_text(text)
    with pytest.raises(ValueError, match="emulator:9999 is no port the native stack maps"):
        native_plan(ports=FAKE_PORTS, dags_folder=tmp_path, work_dir=tmp_path,
                    compose_file=tmp_path / "docker-compose.yaml", variables=NO_VARIABLES)


def test_importing_the_stack_module_is_cheap() -> None:
    code = ("import sys, devtools.stack; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'yaml', 'grpc', 'gcsfs') "
            "or m.startswith('google.cloud.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=stack_module.REPO_ROOT).stdout
    assert out.strip() == "[]"
    assert stack_module.__doc__ and "NativeStack" in stack_module.__doc__


def test_free_ports_are_distinct() -> None:
    ports = Ports.free(spare=4)
    named = [v for k, v in vars(ports).items() if k != "spare"]
    assert len(named) == 10 and len(ports.spare) == 4 and len(set(named) | set(ports.spare)) == 14
