"""The worker side: code that runs ON the training machine, not in Airflow.

:mod:`.runner` is a single standard-library-only file. The TPU operator inlines :func:`runner_source`
into the node's startup script and runs it as ``python3 runner.py [options] -- COMMAND``; the
constants below are the contract between that file and the operator (exit codes, guest attribute
namespace, keys and statuses). Importing them runs nothing: ``runner.main()`` only runs as a script.
"""

from __future__ import annotations

from pathlib import Path

from .runner import (
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

#: The runner's file; ship it with ``runner_source()``.
RUNNER_PATH: Path = Path(__file__).with_name("runner.py")


#: The workload's checkpoint-request helper; on a TPU VM it is ``resilient_checkpoint.py`` (``helper_source()``).
HELPER_PATH: Path = Path(__file__).with_name("checkpoint_request.py")


def helper_source() -> str:
    """The text of ``checkpoint_request.py`` (UTF-8), to inline into a startup script as ``resilient_checkpoint``."""
    return HELPER_PATH.read_text(encoding="utf-8")


def runner_source() -> str:
    """The text of ``runner.py`` (UTF-8), to inline into a startup script."""
    return RUNNER_PATH.read_text(encoding="utf-8")


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
