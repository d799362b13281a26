"""The native production stack for the tests marked ``stack`` (see devtools/stack.py).

``make test`` skips them; ``make stack-test`` runs them (``RESILIENT_STACK_TESTS=1 pytest -m stack tests/stack``).
They need PostgreSQL (Debian's ``postgresql``; installed with apt-get when missing and running as root).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.stack import DEFAULT_DAGS_FOLDER, NativeStack

#: DAGs of the stack tests, served next to the repo's dags/ (the two folders are linked into one).
TEST_DAGS = Path(__file__).parent / "dags"
ENABLE_ENV = "RESILIENT_STACK_TESTS"
#: ``local`` (default: the LocalExecutor, one triggerer) or ``celery`` (Redis, two Celery workers, two triggerers):
#: which stack the session runs (``make stack-test STACK_EXECUTOR=celery``).
EXECUTOR_ENV = "RESILIENT_STACK_EXECUTOR"
#: Set to 1 to keep the stack's work directory (component logs, task logs, database) after the session.
KEEP_ENV = "RESILIENT_STACK_KEEP"
#: dags/resilient_reconcile.py's interval in the stack tests (seconds; 60 by default).
RECONCILE_SECONDS = 15


def stack_executor() -> str:
    """The executor of this session's stack (:data:`EXECUTOR_ENV`)."""
    return os.environ.get(EXECUTOR_ENV) or "local"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "stack: starts the native production stack (PostgreSQL, emulator, api-server, scheduler, "
                   f"dag-processor, triggerer); skipped unless {ENABLE_ENV}=1 (make stack-test)")
    config.addinivalue_line(
        "markers", "needs_executor(name): a stack test of the topology of one executor only (celery: Celery workers "
                   f"and two triggerers); skipped on the other stack ({EXECUTOR_ENV})")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    executor = stack_executor()
    for item in items:
        marker = item.get_closest_marker("needs_executor")
        if marker is not None and marker.args[0] != executor:
            item.add_marker(pytest.mark.skip(reason=f"needs the {marker.args[0]} stack; this session runs the "
                                                    f"{executor} one ({EXECUTOR_ENV}={marker.args[0]})"))
    if os.environ.get(ENABLE_ENV) == "1":
        return
    skip = pytest.mark.skip(reason=f"starts the native Airflow stack: run with `make stack-test` "
                                   f"({ENABLE_ENV}=1 pytest -m stack tests/stack)")
    for item in items:
        if item.get_closest_marker("stack") is not None:
            item.add_marker(skip)


def stack_dags() -> list[Path]:
    """The repo's dags/ and, when it exists, tests/stack/dags/."""
    return [DEFAULT_DAGS_FOLDER, *([TEST_DAGS] if TEST_DAGS.is_dir() else [])]


@pytest.fixture(scope="session")
def stack() -> Iterator[NativeStack]:
    """One native stack for the session: docker-compose.yaml's services as processes on loopback, healthy,
    with the compose file's fault plan and time scale (RESILIENT_FAULT_PLAN / RESILIENT_TIME_SCALE if set).
    At teardown it is stopped, and no process of it may remain."""
    # No fault plan: each test adds the faults of its own runs (matched by their labels). The reconciler runs
    # every RECONCILE_SECONDS, so that a leak's bound is short enough to wait for.
    # PYTHONASYNCIODEBUG, in the triggerers only: their event loop reports every callback that held it over 0.1 s
    # with the asyncio task's name -- a trigger's task is named after the trigger -- so the tests can tell ours apart.
    # Not in the task workers nor the emulator's workloads: asyncio's debug mode makes aiohttp's HTTP parser strict,
    # and the s3fs clients of OBS then refuse the emulated OBS's replies (moto's server sends two Server headers).
    native = NativeStack(dags=stack_dags(), fault_plan=None, keep=os.environ.get(KEEP_ENV) == "1",
                         variables={**os.environ, "RESILIENT_RECONCILE_SECONDS": str(RECONCILE_SECONDS)},
                         executor=stack_executor(), role_env={"triggerer": {"PYTHONASYNCIODEBUG": "1"}})
    native.start()
    print(f"\nnative {native.executor} stack healthy in {native.start_seconds:.1f} s: {native.api_url}, "
          f"logs {native.work_dir / 'logs'}")
    try:
        yield native
    finally:
        native.stop()
        print(f"\nnative stack stopped in {native.stop_seconds:.1f} s")
    left = native.processes()
    assert not left, f"processes of the stack survived stop(): {left}"


#: Task instance states that have not ended; a failed stack test reports every task instance in one of them.
UNFINISHED = ("scheduled", "queued", "running", "deferred", "up_for_retry", "up_for_reschedule", "restarting",
              None)


def what_was_going_on(stack: NativeStack, lines: int = 40) -> str:
    """For a failed stack test's report: every unfinished task instance (state, try, trigger) with the tail of
    its current try's log, the TPU nodes and ModelArts jobs the emulator holds, and the tail of each component's
    log. CI keeps no work directory, so this is all a red run leaves to read."""
    parts: list[str] = []
    try:
        status, body = stack.api("GET", "/api/v2/dags/~/dagRuns/~/taskInstances?limit=200")
        for ti in (body.get("task_instances") or []) if status == 200 else []:
            if ti.get("state") not in UNFINISHED:
                continue
            where = f"{ti['dag_id']}/{ti['dag_run_id']}/{ti['task_id']} try {ti.get('try_number')}"
            parts.append(f"----- task instance {where}: state {ti.get('state')}, trigger {ti.get('trigger')}")
            status, log = stack.api("GET", f"/api/v2/dags/{ti['dag_id']}/dagRuns/{ti['dag_run_id']}/taskInstances/"
                                           f"{ti['task_id']}/logs/{max(ti.get('try_number') or 1, 1)}"
                                           "?full_content=true")
            events = [str(line.get("event", "")) for line in (log.get("content") or [])] if status == 200 else []
            parts.append("\n".join(events[-lines:]) or f"(no log: HTTP {status})")
        parts.append(f"----- emulator nodes: {stack.emulator_get('/nodes')}")
        parts.append(f"----- emulator ModelArts jobs: {stack.emulator_get('/modelarts-jobs')}")
    except Exception as exc:  # a report of a failure must not fail itself
        parts.append(f"(could not read the stack: {exc!r})")
    parts.append(stack.tails(lines))
    return "\n".join(parts)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    native = getattr(item, "funcargs", {}).get("stack")
    if report.when == "call" and report.failed and isinstance(native, NativeStack):
        report.sections.append(("what the stack was doing", what_was_going_on(native)))
