#!/usr/bin/env bash
# Check docker-compose.yaml's Airflow configuration without docker (not part of CI: it needs PostgreSQL).
#
#   bash scripts/check_postgres.sh               # compose checks, db migrate, `airflow dags test`
#   bash scripts/check_postgres.sh --standalone  # ... then `airflow standalone` as the compose service runs it:
#                                                # trigger the DAG, wait for the run to succeed, check health
#
# 1. Checks docker-compose.yaml: it parses (and `docker compose config` accepts it, when a compose is
#    installed), images are pinned, and the Airflow service's database, emulator and storage settings agree
#    with the postgres and emulator services (names, ports, the emulator's bind and advertised host, mounts).
# 2. Starts a throwaway PostgreSQL cluster (Debian's `postgresql`, installed with apt-get when missing and run
#    as root) on 127.0.0.1:$PGPORT (default 55432) with the compose service's user, password and database.
# 3. Takes the Airflow service's environment from docker-compose.yaml as is, with `postgres` and `emulator`
#    replaced by 127.0.0.1 and /opt/airflow/dags by ./dags, and a temporary AIRFLOW_HOME.
# 4. Starts the emulator with the compose service's command line (the same options; advertised as 127.0.0.1,
#    the fault plan and work dir mapped to this checkout and a temporary directory).
# 5. `airflow db migrate`, then `airflow dags test example_vertex_ai_resilient_training`: the run must succeed
#    and print the held-out accuracy; the dag_run row is read back from PostgreSQL.
# 6. With --standalone: a fresh emulator, `airflow standalone` (api-server on 127.0.0.1:$AIRFLOW_PORT,
#    default 18080); once /api/v2/monitor/health (the compose healthcheck) reports every component healthy,
#    `airflow dags trigger`, and the run must succeed.
#
# Uses the project venv ($VENV, default .venv), installing the `postgres` extra into it when missing.
# Everything it started is stopped at exit; KEEP=1 keeps the temporary directory (logs, AIRFLOW_HOME).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

STANDALONE=0
for arg in "$@"; do
    case "$arg" in
        --standalone) STANDALONE=1 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

VENV="${VENV:-$ROOT/.venv}"
BIN="$VENV/bin"
PGPORT="${PGPORT:-55432}"
AIRFLOW_PORT="${AIRFLOW_PORT:-18080}"
DAG_ID=example_vertex_ai_resilient_training
step() { printf '\n=== %s\n' "$*"; }
http_get() { "$BIN/python" -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }
first() { awk 'NR == 1 { print; found = 1 } END { exit !found }'; }  # first line of all input; fails on none
fail() { echo "FAILED: $*" >&2; exit 1; }

[ -x "$BIN/python" ] || fail "no venv at $VENV: run 'make test' (or 'make demo') first, or set VENV"
if ! "$BIN/python" -c 'import psycopg2, asyncpg' 2>/dev/null; then
    step "installing the postgres extra into $VENV"
    "$BIN/uv" pip install --quiet --python "$BIN/python" -c constraints.txt -e '.[test,demo,postgres]'
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/check-postgres.XXXXXX")"
chmod 755 "$WORK"
EMULATOR_PID="" STANDALONE_PID="" PG_STARTED=0
cleanup() {
    local rc=$?
    set +e
    if [ -n "$STANDALONE_PID" ]; then  # its process group: standalone and the components it started
        kill -INT -- "-$STANDALONE_PID" 2>/dev/null; sleep 5
        kill -- "-$STANDALONE_PID" 2>/dev/null && sleep 5 && kill -KILL -- "-$STANDALONE_PID" 2>/dev/null
    fi
    if [ -n "$EMULATOR_PID" ]; then kill "$EMULATOR_PID" 2>/dev/null; wait "$EMULATOR_PID" 2>/dev/null; fi
    [ "$PG_STARTED" = 1 ] && as_pg "$PG_BIN/pg_ctl" -D "$WORK/pgdata" -m fast -w stop >/dev/null
    if [ "${KEEP:-0}" = 1 ] || [ "$rc" != 0 ]; then echo "logs and AIRFLOW_HOME kept in $WORK"; else rm -rf "$WORK"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- 1. docker-compose.yaml
step "checking docker-compose.yaml"
COMPOSE_BIN=""
if docker compose version >/dev/null 2>&1; then COMPOSE_BIN="docker compose";
elif command -v docker-compose >/dev/null 2>&1; then COMPOSE_BIN="docker-compose"; fi
if [ -n "$COMPOSE_BIN" ]; then
    $COMPOSE_BIN -f docker-compose.yaml config --quiet && echo "$COMPOSE_BIN config: valid"
else
    echo "(no docker compose here: schema not checked by compose itself)"
fi
# Writes $WORK/airflow.env (exports) and $WORK/emulator.args (one argument a line).
PGPORT="$PGPORT" WORK="$WORK" ROOT="$ROOT" "$BIN/python" - <<'PY'
import os, re, shlex, subprocess, sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml

root, work, pgport = Path(os.environ["ROOT"]), Path(os.environ["WORK"]), os.environ["PGPORT"]
compose = yaml.safe_load((root / "docker-compose.yaml").read_text())
problems = []


def check(ok, message):
    if not ok:
        problems.append(message)


def interpolate(value):
    """Compose's variable substitution, for the forms this file uses: ${X}, ${X:-d}, ${X-d}, $$."""
    def sub(m):
        name, op, default = m["name"], m["op"], m["default"] or ""
        if name is None:
            return "$"
        got = os.environ.get(name)
        if op == ":-":
            return got or default
        if op == "-":
            return default if got is None else got
        return got or ""
    return re.sub(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:?-)(?P<default>[^}]*))?\}", sub, value)


services = compose.get("services", {})
check(set(services) >= {"postgres", "emulator", "airflow"}, f"services: {sorted(services)}")
pg, emu, af = services["postgres"], services["emulator"], services["airflow"]
for name, svc in services.items():
    image = svc.get("image", "")
    tag = image.rsplit(":", 1)[1] if ":" in image else ""
    check(tag and tag != "latest", f"{name}: image {image!r} has no pinned tag")
check("healthcheck" in pg, "postgres: no healthcheck")
for dep in ("postgres", "emulator"):
    check((af.get("depends_on") or {}).get(dep, {}).get("condition") == "service_healthy",
          f"airflow: does not wait for {dep} to be healthy")

env = {k: interpolate(str(v)) for k, v in af["environment"].items()}
pg_env = pg["environment"]
url = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
check(url.scheme == "postgresql+psycopg2", f"sql_alchemy_conn scheme {url.scheme}")
check((url.hostname, url.port or 5432) == ("postgres", 5432), f"sql_alchemy_conn host {url.netloc}")
check((url.username, url.password, url.path.lstrip("/")) == (pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"],
                                                            pg_env["POSTGRES_DB"]), "sql_alchemy_conn credentials")
check(env.get("AIRFLOW__CORE__EXECUTOR") == "LocalExecutor", "executor is not LocalExecutor")
check(env.get("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT") == "false", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT is not false")

# The emulator's command line as the container's shell expands it.
emu_env = {k: interpolate(str(v)) for k, v in (emu.get("environment") or {}).items()}
command = emu["command"]
check(command[:2] == ["sh", "-c"], "emulator: command is not `sh -c ...`")
script = interpolate(command[2]).replace("exec resilient-emulator", "printf '%s\\0' resilient-emulator", 1)
argv = subprocess.run(["sh", "-c", script], env={**emu_env, "PATH": os.environ["PATH"]}, check=True,
                      capture_output=True, text=True).stdout.split("\0")[:-1]
check(argv[:1] == ["resilient-emulator"], f"emulator: runs {argv[:1]}")
opts = dict(zip(argv[1::2], argv[2::2], strict=False))
check(opts.get("--host") == "0.0.0.0", "emulator: does not bind 0.0.0.0")
check(opts.get("--advertise-host") == "emulator", "emulator: not advertised under its service name")
ports = {k: opts.get(k) for k in ("--port", "--control-port", "--storage-port")}
check(all(p and p != "0" for p in ports.values()), f"emulator: ports not fixed: {ports}")
check(env["RESILIENT_EMULATOR_HOST"] == f"emulator:{ports['--port']}", "RESILIENT_EMULATOR_HOST != emulator gRPC")
check(env["STORAGE_EMULATOR_HOST"] == f"http://emulator:{ports['--storage-port']}",
      "STORAGE_EMULATOR_HOST != emulator storage")
published = {str(p).rsplit(":", 1)[1] for p in emu.get("ports", [])}
check(published >= set(ports.values()), f"emulator: ports {sorted(ports.values())} not all published")
check(f":{ports['--control-port']}/healthz" in " ".join(emu["healthcheck"]["test"]), "emulator healthcheck port")
check(":8080/api/v2/monitor/health" in " ".join(af["healthcheck"]["test"]), "airflow healthcheck")

dags = env["AIRFLOW__CORE__DAGS_FOLDER"]
for name, svc in (("airflow", af), ("emulator", emu)):
    check(f"./dags:{dags}:ro" in svc.get("volumes", []), f"{name}: ./dags not mounted at {dags}")
plan = opts.get("--fault-plan")
if plan:
    check(plan.startswith(dags + "/") and (root / "dags" / plan[len(dags) + 1:]).is_file(), f"fault plan {plan}")

if problems:
    sys.exit("docker-compose.yaml: " + "; ".join(problems))
print(f"services {sorted(services)}; images {[s.get('image') for s in services.values()]}")
print(f"airflow -> postgres {url.hostname}:{url.port}, emulator {env['RESILIENT_EMULATOR_HOST']}, "
      f"storage {env['STORAGE_EMULATOR_HOST']}; emulator: {' '.join(argv[1:])}")

# Local equivalents: the same settings, the service names replaced by 127.0.0.1.
local = {k: v.replace("@postgres:5432/", f"@127.0.0.1:{pgport}/").replace("emulator:", "127.0.0.1:")
         .replace(dags, str(root / "dags")) for k, v in env.items()}
local["AIRFLOW_HOME"] = str(work / "airflow_home")
(work / "airflow.env").write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(local.items())))
args = [a.replace(dags, str(root / "dags")).replace("/tmp/resilient-emulator", str(work / "emulator"))
        for a in argv[1:]]
args[args.index("--advertise-host") + 1] = "127.0.0.1"
(work / "emulator.args").write_text("\n".join(args) + "\n")
(work / "postgres.env").write_text("".join(f"{k}={shlex.quote(str(v))}\n" for k, v in pg_env.items()))
PY
echo "docker-compose.yaml: consistent"
# shellcheck disable=SC1091
. "$WORK/postgres.env"
mapfile -t EMULATOR_ARGS < "$WORK/emulator.args"

# ---------------------------------------------------------------- 2. PostgreSQL
step "starting PostgreSQL on 127.0.0.1:$PGPORT"
find_pg_bin() { for d in /usr/lib/postgresql/*/bin; do [ -d "$d" ] && echo "$d"; done | sort -V | tail -n 1; }
PG_BIN="${PG_BIN:-$(find_pg_bin)}"
if [ -z "$PG_BIN" ]; then
    [ "$(id -u)" = 0 ] || fail "PostgreSQL is not installed: sudo apt-get install -y postgresql (or set PG_BIN)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    PG_BIN="$(find_pg_bin)"
fi
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir -p "$WORK/pgdata" "$WORK/pgsock"
[ "$(id -u)" = 0 ] && chown postgres "$WORK/pgdata" "$WORK/pgsock"
"$BIN/python" -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$PGPORT))==0)" \
    || fail "port $PGPORT is taken: set PGPORT"
as_pg "$PG_BIN/initdb" -D "$WORK/pgdata" -U postgres --auth-local=trust --auth-host=scram-sha-256 >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$WORK/pgdata" -l "$WORK/pgdata/server.log" -w \
    -o "-p $PGPORT -k $WORK/pgsock -c listen_addresses=127.0.0.1" start >/dev/null
PG_STARTED=1
psql_admin() { as_pg "$PG_BIN/psql" -h "$WORK/pgsock" -p "$PGPORT" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
psql_admin -c "CREATE ROLE \"$POSTGRES_USER\" LOGIN PASSWORD '$POSTGRES_PASSWORD'"
psql_admin -c "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\""
psql_admin -c "SELECT version()"

# ---------------------------------------------------------------- 3. Airflow and the emulator
# shellcheck disable=SC1091
. "$WORK/airflow.env"
export PATH="$BIN:$PATH"
start_emulator() {
    "$BIN/resilient-emulator" "${EMULATOR_ARGS[@]}" >"$WORK/emulator-$1.log" 2>&1 &
    EMULATOR_PID=$!
    local control; control="http://127.0.0.1:$(grep -A1 -x -- --control-port "$WORK/emulator.args" | tail -n 1)"
    for _ in $(seq 120); do
        http_get "$control/healthz" >/dev/null 2>&1 && { echo "emulator up ($control): ${EMULATOR_ARGS[*]}"; return; }
        kill -0 "$EMULATOR_PID" 2>/dev/null || { cat "$WORK/emulator-$1.log"; fail "emulator exited"; }
        sleep 0.5
    done
    fail "emulator not healthy in 60 s"
}
stop_emulator() { kill "$EMULATOR_PID"; wait "$EMULATOR_PID" || true; EMULATOR_PID=""; }

step "airflow db migrate ($AIRFLOW__DATABASE__SQL_ALCHEMY_CONN)"
airflow db migrate >"$WORK/db-migrate.log" 2>&1 || { tail -n 40 "$WORK/db-migrate.log"; fail "airflow db migrate"; }
grep -oE "Context impl \w+|Airflow database tables created|Database migration done!" "$WORK/db-migrate.log" | uniq || true
psql_admin -d "$POSTGRES_DB" -c "SELECT 'alembic_version ' || version_num FROM alembic_version"

step "airflow dags test $DAG_ID"
start_emulator dags-test
started=$(date +%s)
airflow dags test "$DAG_ID" >"$WORK/dags-test.log" 2>&1 || { tail -n 60 "$WORK/dags-test.log"; fail "airflow dags test"; }
echo "airflow dags test exited 0 in $(( $(date +%s) - started )) s"
grep -o "FINAL HELD-OUT ACCURACY.*" "$WORK/dags-test.log" | first || fail "no accuracy in the log"
psql_admin -d "$POSTGRES_DB" -c "SELECT 'dag_run ' || run_id || ' ' || state FROM dag_run WHERE dag_id = '$DAG_ID'"
psql_admin -d "$POSTGRES_DB" -c "SELECT 'task ' || task_id || ' ' || state || ' tries ' || try_number FROM task_instance WHERE dag_id = '$DAG_ID' ORDER BY task_id"
[ "$(psql_admin -d "$POSTGRES_DB" -c "SELECT count(*) FROM dag_run WHERE dag_id = '$DAG_ID' AND state = 'success'")" -ge 1 ] \
    || fail "no successful dag_run in PostgreSQL"
stop_emulator

# ---------------------------------------------------------------- 4. airflow standalone (optional)
if [ "$STANDALONE" = 1 ]; then
    step "airflow standalone (api-server on 127.0.0.1:$AIRFLOW_PORT)"
    export AIRFLOW__API__HOST=127.0.0.1 AIRFLOW__API__PORT="$AIRFLOW_PORT"
    export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$AIRFLOW_PORT/execution/"
    start_emulator standalone
    setsid "$BIN/airflow" standalone >"$WORK/standalone.log" 2>&1 &
    STANDALONE_PID=$!
    # The compose healthcheck's URL: every component must report healthy before anything is triggered
    # (as `make compose-up` waits for it).
    all_healthy() { "$BIN/python" -c "import json,sys; h=json.loads(sys.argv[1]); sys.exit(any((v or {}).get('status') != 'healthy' for v in h.values()))" "$1"; }
    for i in $(seq 90); do
        health=$(http_get "http://127.0.0.1:$AIRFLOW_PORT/api/v2/monitor/health" 2>/dev/null) && all_healthy "$health" && break
        [ "$i" = 90 ] && fail "api-server not healthy: ${health:-no answer}"
        sleep 2
    done
    echo "health: $health"
    RUN_ID="check_postgres__$(date +%s)"
    for i in $(seq 90); do
        airflow dags trigger "$DAG_ID" --run-id "$RUN_ID" >"$WORK/trigger.log" 2>&1 && break
        [ "$i" = 90 ] && { tail -n 20 "$WORK/trigger.log" "$WORK/standalone.log"; fail "could not trigger $DAG_ID"; }
        sleep 2
    done
    echo "triggered $RUN_ID"
    state=""
    for _ in $(seq 300); do
        state=$(psql_admin -d "$POSTGRES_DB" -c "SELECT state FROM dag_run WHERE run_id = '$RUN_ID'")
        case "$state" in success|failed) break ;; esac
        sleep 2
    done
    psql_admin -d "$POSTGRES_DB" -c "SELECT 'task ' || task_id || ' ' || state || ' tries ' || try_number FROM task_instance WHERE run_id = '$RUN_ID' ORDER BY task_id"
    [ "$state" = success ] || { tail -n 40 "$WORK/standalone.log"; fail "run $RUN_ID ended '$state'"; }
    echo "run $RUN_ID: success"
    grep -rhoa "FINAL HELD-OUT ACCURACY[^\"]*" "$AIRFLOW_HOME/logs" | first || fail "no accuracy in the task logs"
fi

step "OK: docker-compose.yaml's Airflow configuration works on PostgreSQL $(psql_admin -c 'SHOW server_version')"
