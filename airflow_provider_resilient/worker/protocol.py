"""The worker's protocol: what the runner on a training machine and the provider agree on.

The worker runner (:mod:`.runner`) reports through the node's guest attributes -- the keys and status values
below -- and ends with one of the exit codes below; the provider's core (the policy's classifiers, the TPU
backend, the hooks) reads both. The rule that classes an exit status is here too, written once: the runner
restarts a command in place by it on the VM, and the policy builds its ``Failure`` from it. The operator asks for
a checkpoint through a node metadata attribute, and the runner hands the command its restarts and the
checkpoint request through its environment.

Rules of the file: it imports nothing (standard library only, and none of it needed), Python 3.8 syntax, nothing
runs at import time. The runner ships to the machine as one file: ``runner_source()`` puts this file's text in
place of the runner's ``from .protocol import (...)``.
"""

from __future__ import annotations

# -- exit codes ---------------------------------------------------------------------------------------

#: The runner's exit code when its preflight checks fail: 78 is sysexits.h's ``EX_CONFIG``, "something was found
#: in an unconfigured or misconfigured state" (the environment pre-check of ModelArts' "Training Fault Tolerance
#: Check").
PREFLIGHT_EXIT_CODE = 78
#: The runner's exit code after SIGTERM (128 + 15).
TERMINATED_EXIT_CODE = 143
#: Bad usage (argparse's code too).
USAGE_EXIT_CODE = 2
#: Command not executable / not found / other start failure (shell and container-runtime conventions).
NOT_EXECUTABLE_EXIT_CODE = 126
NOT_FOUND_EXIT_CODE = 127
START_FAILED_EXIT_CODE = 128
#: The runner's exit status when a secret cannot be read (a permanent user error).
SECRET_EXIT_CODE = 1

# -- the exit-status rule: its tables, the failure classes it gives, the rule -----------------------------

#: The "potentially transient" codes of Vertex AI's "Understand the custom training service": SIGABRT as 6 or 134,
#: SIGSEGV as 11 or 139.
TRANSIENT_EXIT_CODES = frozenset({6, 134, 11, 139})
TRANSIENT_SIGNALS = frozenset({6, 11})
#: The command never started: 126 not executable, 127 not found, 128 runtime start failure.
START_ERROR_EXIT_CODES = frozenset({126, 127, 128})
#: SIGKILL and SIGTERM: the OOM killer or the infrastructure stopping the worker.
WORKER_FAILURE_SIGNALS = frozenset({9, 15})

# Failure classes: the values of ``airflow_provider_resilient.policy.failures.FailureClass``.
TRANSIENT_CRASH = "transient_crash"
WORKER_FAILURE = "worker_failure"
PERMANENT_USER_ERROR = "permanent_user_error"
CONTAINER_START_ERROR = "container_start_error"
PREFLIGHT_FAILURE = "preflight_failure"
#: Reported as ``failure_class`` when the device check failed (isolate the faulty hardware).
NODE_UNHEALTHY = "node_unhealthy"
#: Classes restarted in place (non-permanent worker failures, up to five restarts: AI Platform Training,
#: "Understanding the AI Platform Training service").
RESTARTABLE_CLASSES = frozenset({TRANSIENT_CRASH, WORKER_FAILURE})


def exit_code_signal(exit_code: int | None) -> int | None:
    """The signal behind an exit status: ``-n`` and ``128 + n`` (1 <= n <= 64) give ``n``; raw 6, 11 too."""
    if exit_code is None:
        return None
    if exit_code < 0:
        return -exit_code
    if 129 <= exit_code <= 192:
        return exit_code - 128
    if exit_code in TRANSIENT_SIGNALS:
        return exit_code
    return None


def classify_exit_status(exit_code: int | None, signal_number: int | None = None,
                         preflight_exit_code: int = PREFLIGHT_EXIT_CODE) -> str | None:
    """The failure class of an exit status: the rule the runner restarts by and the policy judges by.

    Args:
        exit_code: ``0`` success; ``6``/``11`` raw signal numbers; ``134``/``139`` (``128 + n``); negative ``-n``
            as Python's ``subprocess`` reports signal ``n``; None when unknown.
        signal_number: the killing signal when known apart from the code; else the one the code gives.
        preflight_exit_code: the code meaning that the preflight checks failed.

    Returns ``None`` for a clean exit (0 and no signal), else one of :data:`TRANSIENT_CRASH` (6/134/11/139,
    Vertex AI's "potentially transient" codes), :data:`PREFLIGHT_FAILURE`, :data:`CONTAINER_START_ERROR`
    (126/127/128), :data:`WORKER_FAILURE` (SIGKILL, SIGTERM), :data:`PERMANENT_USER_ERROR` (checked in that
    order) -- the values of the policy's ``FailureClass``.
    """
    sig = signal_number if signal_number is not None else exit_code_signal(exit_code)
    if (exit_code is None or exit_code == 0) and sig is None:
        return None
    if exit_code in TRANSIENT_EXIT_CODES or sig in TRANSIENT_SIGNALS:
        return TRANSIENT_CRASH
    if exit_code == preflight_exit_code:
        return PREFLIGHT_FAILURE
    if exit_code in START_ERROR_EXIT_CODES:
        return CONTAINER_START_ERROR
    if sig in WORKER_FAILURE_SIGNALS:
        return WORKER_FAILURE
    return PERMANENT_USER_ERROR


# -- the report: guest attribute keys and status values ---------------------------------------------------

DEFAULT_NAMESPACE = "resilient"
KEY_STATUS = "status"
KEY_EXIT_CODE = "exit_code"
KEY_FAILURE_CLASS = "failure_class"
KEY_RESTARTS = "restarts"
KEY_HEARTBEAT = "heartbeat"
KEY_STEP = "step"
KEY_WORKER_ID = "worker_id"
#: ``failed: item <item>: <detail>``: the first preflight item that failed.
KEY_PREFLIGHT = "preflight"
#: The last line the command wrote to stderr before it failed (a traceback's exception), at most 300 characters.
KEY_ERROR = "error"
#: ``faulty: <item>: <detail>`` once a device check (``gpu-check`` / ``tpu-check``) failed.
KEY_HARDWARE = "hardware"
#: ``no step line for <seconds> s after <step N | its start> (restarts so far: <n>)``: the runner's liveness
#: watchdog (``--hang-seconds``) aborted the command.
KEY_HANG = "hang"
#: The token of the checkpoint request passed on to the command, and of the last one it acknowledged.
KEY_CHECKPOINT_REQUEST = "checkpoint_request"
KEY_CHECKPOINT_ACK = "checkpoint_ack"
#: The same for a request made on a notice (a SIGTERM: ``notice-<VM time>``), kept apart so that a notice never
#: stands for the node's own request (a request acknowledged before a reboot is not passed on again).
KEY_NOTICE_REQUEST = "notice_request"
KEY_NOTICE_ACK = "notice_ack"
#: The token prefix of a request made on a notice.
NOTICE_TOKEN_PREFIX = "notice-"

STATUS_PREFLIGHT = "preflight"
STATUS_RUNNING = "running"
STATUS_RESTARTING = "restarting"
STATUS_SUCCEEDED = "succeeded"
STATUS_FAILED = "failed"
STATUS_TERMINATED = "terminated"
STATUS_PREFLIGHT_FAILED = "preflight_failed"

# -- what the runner is told and tells the command ---------------------------------------------------------

#: The node metadata attribute the operator sets to request a checkpoint now (a token naming the window).
CHECKPOINT_REQUEST_ATTRIBUTE = "resilient-checkpoint-request"
#: The command's environment: its restarts so far; the file holding the pending checkpoint request's token, and
#: the file it writes the token to once its checkpoint is saved.
RESTARTS_ENV = "RESILIENT_WORKER_RESTARTS"
CHECKPOINT_REQUEST_FILE_ENV = "RESILIENT_CHECKPOINT_REQUEST_FILE"
CHECKPOINT_ACK_FILE_ENV = "RESILIENT_CHECKPOINT_ACK_FILE"
#: Set to ``1`` in the command's environment when the runner passes a request on a notice (SIGTERM): the helper
#: then keeps a SIGTERM from ending the workload before it saved (``--no-notice-checkpoint``: empty).
CHECKPOINT_ON_NOTICE_ENV = "RESILIENT_CHECKPOINT_ON_NOTICE"
#: A training step in the command's output (``step 120``, ``step=120``): the runner's default ``--step-pattern``
#: (the ``step`` it reports is the first group), and how a Vertex AI replica's log is read for its step.
DEFAULT_STEP_PATTERN = r"(?m)^\s*step[ =:]+(\d+)"
#: What the runner writes (stderr) each time it starts the command: in a Vertex AI replica's log, a process of the
#: replica starting -- before the workload's own start-up and restore -- which the operator reads as the start of a
#: restart (``restart_timeout``: the platform restarted the replica's container, or the whole job).
RUNNER_START_TEXT = "runner: running "
#: A process of the workload starting, resuming from a step (``start step 120``, ``resuming from step 120``,
#: printed once the checkpoint is restored and before the first step): how a Vertex AI replica's log shows that the
#: replica was restarted in place -- the goodput ledger's ``in_place_restart`` (:mod:`..goodput.ledger`). A
#: workload that does not print it loses no function: its in-place restarts are then unexplained time in the ledger.
DEFAULT_START_PATTERN = r"(?m)^\s*(?:start|resum(?:e|ed|ing) from) step[ =:]+(\d+)"
