"""Checkpoint on request: the workload's side of the operator's early checkpoint before a maintenance window.

On a Cloud TPU VM this file is importable as ``resilient_checkpoint`` (the TPU operator writes it beside the
worker runner and puts its directory on ``PYTHONPATH``; so does a Vertex AI replica's wrapped command with
``checkpoint_on_notice=True``); in Airflow it is
``airflow_provider_resilient.worker.checkpoint_request``. Standard library only, Python 3.8 syntax, nothing
happens at import time.

The protocol (the worker runner's side: :mod:`.runner`, section 4b). When Cloud TPU announces maintenance
(``Node.upcoming_maintenance``), the operator sets the node's metadata ``resilient-checkpoint-request`` to a
token shortly before the window; each worker's runner writes the token to ``$RESILIENT_CHECKPOINT_REQUEST_FILE``
(and, with ``--checkpoint-signal``, signals the command). The workload checks :func:`requested` once per step;
when it returns a token, it saves a complete checkpoint at once and calls :func:`acknowledge` -- the runner
reports the token back (guest attribute ``checkpoint_ack``) and the operator knows the progress is safe (with
``maintenance_policy="move"`` it then moves the run to a fresh node). Checkpoints are the key to short
recoveries after maintenance events (Cloud TPU, "Manage maintenance events with Cloud TPU Pods",
https://cloud.google.com/tpu/docs/maintenance-events): a checkpoint written just before the window loses almost
nothing.

Plain Python::

    from resilient_checkpoint import save_if_requested
    for step in range(start, steps):
        train_step()
        save_if_requested(step, lambda s: save_checkpoint(s))   # True when it saved on request

JAX / Orbax (``orbax.checkpoint.CheckpointManager``; every host must take the same decision -- Orbax saves are
collective -- so broadcast process 0's view first)::

    from jax.experimental import multihost_utils
    from resilient_checkpoint import orbax_save_if_requested, requested
    wanted = bool(multihost_utils.broadcast_one_to_all(requested() is not None))
    orbax_save_if_requested(manager, step, args=ocp.args.StandardSave(state), when=wanted)

PyTorch (``torch.distributed.checkpoint``; all ranks call it, as DCP saves are collective)::

    from resilient_checkpoint import torch_dcp_save_if_requested
    torch_dcp_save_if_requested({"model": model.state_dict(), "optim": optim.state_dict()},
                                f"{ckpt_dir}/step_{step}", step)

Outside a TPU VM (the variables unset) :func:`requested` is always None, so the same code runs anywhere.

Checkpoint on notice. A Spot VM's preemption notice reaches the workload as SIGTERM 30 seconds before the machine
stops (Compute Engine, "Preemptible VM instances", preemption process:
https://cloud.google.com/compute/docs/instances/preemptible#preemption-process); a maintenance event's as SIGTERM
too, with the runner's ``--grace-seconds`` before SIGKILL. The runner then passes a request
``notice-<VM time>`` before it forwards the SIGTERM. A Python process without a SIGTERM handler would die of that
signal before it read the request, so the first :func:`requested` under the runner (with
``$RESILIENT_CHECKPOINT_ON_NOTICE`` = 1, the runner's default), in the main thread, puts a handler in place when the
process has none of its own (a framework's handler is left alone): the SIGTERM is kept, the next :func:`requested`
returns the notice's token, and :func:`acknowledge` of it ends the process with 143 (SIGTERM's status) once the
checkpoint is saved -- nothing it did after would outlive the machine. A SIGTERM that comes after a notice's
checkpoint was acknowledged ends the process at once. A save longer than the notice does not finish: the machine
stops first, and the previous checkpoint stands.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

REQUEST_FILE_ENV = "RESILIENT_CHECKPOINT_REQUEST_FILE"
ACK_FILE_ENV = "RESILIENT_CHECKPOINT_ACK_FILE"
#: ``1`` when the runner checkpoints on notice (its default; ``--no-notice-checkpoint``: empty).
ON_NOTICE_ENV = "RESILIENT_CHECKPOINT_ON_NOTICE"
#: The token prefix of a request made on a notice (the runner's, or this module's own after a SIGTERM).
NOTICE_PREFIX = "notice-"
#: Exit status after a checkpoint saved on notice: 128 + SIGTERM, as the signal would have ended the process.
NOTICE_EXIT_CODE = 143
#: This process's view of the notice: whether the SIGTERM handler is in place, whether a SIGTERM came, whether a
#: notice's checkpoint was acknowledged.
_notice = {"handler": False, "sigterm": False, "saved": False}


def _on_sigterm(signum: int, frame: Any) -> None:
    if _notice["saved"]:
        raise SystemExit(NOTICE_EXIT_CODE)
    _notice["sigterm"] = True


def _keep_sigterm() -> None:
    """Put :func:`_on_sigterm` in place once, in the main thread, when SIGTERM has no handler of the process's own."""
    if _notice["handler"] or threading.current_thread() is not threading.main_thread():
        return
    _notice["handler"] = True
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _read(path: str | None) -> str | None:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def requested(environ: Mapping[str, str] | None = None) -> str | None:
    """The token of a checkpoint request not acknowledged yet, or None (no request, or not under the runner).

    Args:
        environ: the environment to read the two file paths from (default ``os.environ``).
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    if not env.get(REQUEST_FILE_ENV):
        return None
    if env.get(ON_NOTICE_ENV) == "1":
        _keep_sigterm()
    token, acked = _read(env.get(REQUEST_FILE_ENV)), _read(env.get(ACK_FILE_ENV))
    if token is not None and token != acked:
        return token
    if _notice["sigterm"] and not _notice["saved"]:  # a SIGTERM the runner's request has not reached yet
        return NOTICE_PREFIX + "sigterm"
    return None


def acknowledge(token: str, environ: Mapping[str, str] | None = None) -> None:
    """Tell the runner the checkpoint asked for by ``token`` is saved and complete (written atomically).

    A notice's token (``notice-...``) after a SIGTERM: the process then ends with :data:`NOTICE_EXIT_CODE`
    (``SystemExit``), as the SIGTERM it kept would have ended it.

    Raises:
        OSError: the acknowledgement file cannot be written.
        SystemExit: 143, after the acknowledgement of a notice's token once a SIGTERM came.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    path = env.get(ACK_FILE_ENV)
    if not path:
        return
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(token)
    os.replace(partial, path)
    if token.startswith(NOTICE_PREFIX):
        _notice["saved"] = True
        if _notice["sigterm"]:
            print(f"checkpoint saved on notice ({token}): exiting {NOTICE_EXIT_CODE}", flush=True)
            raise SystemExit(NOTICE_EXIT_CODE)


def save_if_requested(step: int, save: Callable[[int], Any], environ: Mapping[str, str] | None = None) -> bool:
    """When a checkpoint is requested: ``save(step)`` (it must return once the checkpoint is complete), then
    :func:`acknowledge`. Returns True when it saved. Errors of ``save`` propagate (nothing is acknowledged)."""
    token = requested(environ)
    if token is None:
        return False
    save(step)
    acknowledge(token, environ)
    return True


def orbax_save_if_requested(manager: Any, step: int, args: Any = None, when: bool | None = None,
                            environ: Mapping[str, str] | None = None) -> bool:
    """The Orbax form of :func:`save_if_requested`: ``manager.save(step, args=args, force=True)`` (``force``:
    regardless of the manager's own interval) and ``manager.wait_until_finished()`` (an async save must be
    complete before it is acknowledged). ``when``: the caller's agreed decision on a multi-host slice (see
    the module docstring); None: this host's own view."""
    token = requested(environ)
    if not (token is not None if when is None else when):
        return False
    manager.save(step, args=args, force=True)
    manager.wait_until_finished()
    if token is not None:
        acknowledge(token, environ)
    return True


def torch_dcp_save_if_requested(state_dict: Any, checkpoint_id: str, step: int,
                                environ: Mapping[str, str] | None = None) -> bool:
    """The PyTorch form of :func:`save_if_requested`: ``torch.distributed.checkpoint.save(state_dict,
    checkpoint_id=checkpoint_id)`` (its ``.metadata`` file is written last: the checkpoint is complete when it
    returns). ``step`` is for the log only."""
    token = requested(environ)
    if token is None:
        return False
    import torch.distributed.checkpoint as dcp

    dcp.save(state_dict, checkpoint_id=checkpoint_id)
    acknowledge(token, environ)
    print(f"saved checkpoint of step {step} on request {token}", flush=True)
    return True


__all__ = ["ACK_FILE_ENV", "NOTICE_EXIT_CODE", "NOTICE_PREFIX", "ON_NOTICE_ENV", "REQUEST_FILE_ENV",
           "acknowledge", "orbax_save_if_requested", "requested", "save_if_requested", "torch_dcp_save_if_requested"]
