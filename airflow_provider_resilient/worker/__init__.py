"""The worker side: code that runs ON the training machine, not in Airflow.

:mod:`.runner` is the process that runs the training command on each machine. The TPU operator inlines
:func:`runner_source` into the node's startup script (and the Vertex AI checks into the container's command) and
runs it as ``python3 runner.py [options] -- COMMAND``. :mod:`.protocol` is the contract between that process and
the provider (exit codes, the exit-status rule, guest attribute namespace, keys and statuses); the runner imports
it, and :func:`runner_source` puts its text in place of that import, so the shipped runner is one standard-library
file. The names below are the protocol's. Importing this package runs nothing and does not import the runner.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from .protocol import (
    CHECKPOINT_REQUEST_ATTRIBUTE,
    DEFAULT_NAMESPACE,
    KEY_CHECKPOINT_ACK,
    KEY_CHECKPOINT_REQUEST,
    KEY_ERROR,
    KEY_EXIT_CODE,
    KEY_FAILURE_CLASS,
    KEY_HARDWARE,
    KEY_HEARTBEAT,
    KEY_PREFLIGHT,
    KEY_RESTARTS,
    KEY_STATUS,
    KEY_STEP,
    KEY_WORKER_ID,
    PREFLIGHT_EXIT_CODE,
    RESTARTS_ENV,
    STATUS_FAILED,
    STATUS_PREFLIGHT,
    STATUS_PREFLIGHT_FAILED,
    STATUS_RESTARTING,
    STATUS_RUNNING,
    STATUS_SUCCEEDED,
    STATUS_TERMINATED,
    TERMINATED_EXIT_CODE,
    USAGE_EXIT_CODE,
)

#: The runner's file; ship it with ``runner_source()`` (it imports :data:`PROTOCOL_PATH`, which that inlines).
RUNNER_PATH: Path = Path(__file__).with_name("runner.py")
#: The protocol's file (:mod:`.protocol`).
PROTOCOL_PATH: Path = Path(__file__).with_name("protocol.py")


#: The workload's checkpoint-request helper; on a TPU VM it is ``resilient_checkpoint.py`` (``helper_source()``).
HELPER_PATH: Path = Path(__file__).with_name("checkpoint_request.py")


def helper_source() -> str:
    """The text of ``checkpoint_request.py`` (UTF-8), to inline into a startup script as ``resilient_checkpoint``."""
    return HELPER_PATH.read_text(encoding="utf-8")


#: ``runner_source()``'s text once built, and the lock its first build holds.
_RUNNER_SOURCE: list[str] = []
_RUNNER_SOURCE_LOCK = threading.Lock()


def runner_source() -> str:
    """The runner as one standalone file (UTF-8 text), to inline into a startup script: ``runner.py`` with the text
    of ``protocol.py`` in place of its ``from .protocol import (...)``, between two comment lines naming it.

    The protocol's ``from __future__ import annotations`` is left out (the runner has its own, at its top). Built
    once per process, under a lock: operators submit from several threads (a benchmark's pool, a worker's threads),
    and CPython 3.11's ``ast.parse`` is not safe to run in two threads at once (it fails with "AST constructor
    recursion depth mismatch"; python/cpython#106905).

    Raises:
        RuntimeError: ``runner.py`` does not import ``protocol.py`` exactly once by its own names.
    """
    with _RUNNER_SOURCE_LOCK:
        if not _RUNNER_SOURCE:
            _RUNNER_SOURCE.append(_build_runner_source())
        return _RUNNER_SOURCE[0]


def _build_runner_source() -> str:
    runner = RUNNER_PATH.read_text(encoding="utf-8").splitlines(keepends=True)
    protocol = PROTOCOL_PATH.read_text(encoding="utf-8").splitlines(keepends=True)
    imports = [node for node in ast.parse("".join(runner)).body
               if isinstance(node, ast.ImportFrom) and node.level and node.module == "protocol"]
    if len(imports) != 1 or any(alias.asname for alias in imports[0].names):
        raise RuntimeError(f"{RUNNER_PATH} must import {PROTOCOL_PATH.name} once, by its own names")
    first, last = imports[0].lineno - 1, imports[0].end_lineno or imports[0].lineno
    future = {node.lineno - 1 for node in ast.parse("".join(protocol)).body
              if isinstance(node, ast.ImportFrom) and node.module == "__future__"}
    inlined = [line for number, line in enumerate(protocol) if number not in future]
    return "".join([*runner[:first], f"# ---- {PROTOCOL_PATH.name}, inlined by runner_source() ----\n", *inlined,
                    f"# ---- end of {PROTOCOL_PATH.name} ----\n", *runner[last:]])


__all__ = [
    "CHECKPOINT_REQUEST_ATTRIBUTE",
    "DEFAULT_NAMESPACE",
    "HELPER_PATH",
    "KEY_CHECKPOINT_ACK",
    "KEY_CHECKPOINT_REQUEST",
    "KEY_ERROR",
    "KEY_EXIT_CODE",
    "KEY_FAILURE_CLASS",
    "KEY_HARDWARE",
    "KEY_HEARTBEAT",
    "KEY_PREFLIGHT",
    "KEY_RESTARTS",
    "KEY_STATUS",
    "KEY_STEP",
    "KEY_WORKER_ID",
    "PREFLIGHT_EXIT_CODE",
    "PROTOCOL_PATH",
    "RESTARTS_ENV",
    "RUNNER_PATH",
    "STATUS_FAILED",
    "STATUS_PREFLIGHT",
    "STATUS_PREFLIGHT_FAILED",
    "STATUS_RESTARTING",
    "STATUS_RUNNING",
    "STATUS_SUCCEEDED",
    "STATUS_TERMINATED",
    "TERMINATED_EXIT_CODE",
    "USAGE_EXIT_CODE",
    "helper_source",
    "runner_source",
]
