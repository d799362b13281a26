"""Checkpoint requests through the worker runner (section 4b) and the workload's helper, against the emulator's
metadata server (node metadata served as attributes, guest attributes stored)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_provider_resilient import worker
from airflow_provider_resilient.testing.emulator.tpu.metadata import MetadataServer
from airflow_provider_resilient.worker import checkpoint_request

from .shipped import shipped_runner

TIMEOUT = 30

#: A workload that trains until it is asked for a checkpoint -- with ``NEED_SIGNAL`` set, also signalled
#: (SIGUSR1) -- saves it (a file), acknowledges and ends; or ends with 3 when nothing was asked within
#: ``patience`` seconds.
WORKLOAD = """
import os, signal, sys, time
from pathlib import Path
from resilient_checkpoint import save_if_requested
signal.signal(signal.SIGUSR1, lambda *a: Path(os.environ["OUT"], "signalled").touch())
print("ready", flush=True)  # the runner signals only once the command has spoken
deadline = time.monotonic() + float(sys.argv[1])
step = 0
while time.monotonic() < deadline:
    step += 1
    ready = Path(os.environ["OUT"], "signalled").exists() or not os.environ.get("NEED_SIGNAL")
    if ready and save_if_requested(step, lambda s: Path(os.environ["OUT"], f"step_{s}").touch()):
        sys.exit(0)
    time.sleep(0.02)
sys.exit(3)
"""


def run(server: MetadataServer, tmp_path: Path, patience: float, *options: str,
        **extra: str) -> subprocess.CompletedProcess[str]:
    helpers = tmp_path / "helpers"
    helpers.mkdir(exist_ok=True)
    (helpers / "resilient_checkpoint.py").write_text(worker.helper_source())  # as the startup script does
    env = {**os.environ, "GCE_METADATA_HOST": server.address, "OUT": str(tmp_path), "PYTHONPATH": str(helpers),
           **extra}
    argv = [sys.executable, str(shipped_runner()), "--heartbeat-seconds", "0.05", *options, "--",
            sys.executable, "-c", textwrap.dedent(WORKLOAD), str(patience)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def test_the_runner_passes_a_request_on_and_reports_its_acknowledgement_once(tmp_path):
    server = MetadataServer(0, lambda: {"resilient-checkpoint-request": "scheduled maintenance at X"})
    temp = tmp_path / "tmp"
    temp.mkdir()
    try:
        done = run(server, tmp_path, 20, "--checkpoint-signal", "usr1", NEED_SIGNAL="1", TMPDIR=str(temp))
        assert done.returncode == 0, done.stderr
        assert not list(temp.iterdir())  # the request and acknowledgement files went with the runner
        assert "checkpoint requested: scheduled maintenance at X" in done.stderr
        assert list(tmp_path.glob("step_*")) and (tmp_path / "signalled").exists()
        guest = server.guest("resilient/")
        token = "scheduled maintenance at X"
        assert guest["resilient/checkpoint_request"] == guest["resilient/checkpoint_ack"] == token
        # The VM boots again (a maintenance event): the request it acknowledged is not passed on again (the
        # workload waits 0.3 s for it: 6 heartbeats of the runner, each of which would pass a request on).
        again = run(server, tmp_path, 0.3)
        assert again.returncode == 3 and "checkpoint requested" not in again.stderr
    finally:
        server.stop()


def files(tmp_path: Path) -> dict[str, str]:
    return {checkpoint_request.REQUEST_FILE_ENV: str(tmp_path / "r"),
            checkpoint_request.ACK_FILE_ENV: str(tmp_path / "a")}


def test_without_the_runner_nothing_is_ever_requested(tmp_path):
    saved = []
    assert checkpoint_request.requested({}) is None
    assert not checkpoint_request.save_if_requested(5, saved.append, {})
    env = files(tmp_path)
    (tmp_path / "r").write_text("tok")
    assert checkpoint_request.save_if_requested(5, saved.append, env) and saved == [5]
    assert checkpoint_request.requested(env) is None  # acknowledged: not asked again


def test_the_orbax_form_forces_a_save_and_waits_for_it(tmp_path):
    calls = []

    class Manager:  # orbax.checkpoint.CheckpointManager's two methods used
        def save(self, step, args=None, force=False):
            calls.append(("save", step, force))

        def wait_until_finished(self):
            calls.append(("wait",))

    env = files(tmp_path)
    assert not checkpoint_request.orbax_save_if_requested(Manager(), 7, environ=env)
    (tmp_path / "r").write_text("tok")
    assert checkpoint_request.orbax_save_if_requested(Manager(), 7, environ=env)
    assert calls == [("save", 7, True), ("wait",)] and (tmp_path / "a").read_text() == "tok"


def test_a_signal_the_workload_cannot_handle_is_refused():
    from airflow_provider_resilient.worker.runner import UsageError, parse_command_line

    for bad in ("KILL", "TERM", "NOPE"):
        with pytest.raises(SystemExit):
            parse_command_line(["--checkpoint-signal", bad, "--", "true"])
    assert parse_command_line(["--checkpoint-signal", "SIGUSR2", "--", "true"])[0].checkpoint_signal == "USR2"
    assert UsageError


#: A workload with no SIGTERM handler of its own: a step every 20 ms, a save only when asked (``step_N`` files),
#: ``ready`` once it trained a step.
NOTICE_WORKLOAD = """
import os, sys, time
from pathlib import Path
from resilient_checkpoint import save_if_requested
step = 0
while step < 5000:
    step += 1
    time.sleep(0.02)
    save_if_requested(step, lambda s: Path(os.environ["OUT"], f"step_{s}").touch())
    if step == 3:
        Path(os.environ["OUT"], "ready").touch()
sys.exit(3)
"""


def notice(server: MetadataServer, tmp_path: Path, *options: str,
           ready: Callable[[], bool] = lambda: True) -> tuple[int, str]:
    """Start the workload under the shipped runner, send the runner SIGTERM (a Spot VM's preemption notice) once
    the workload trains and ``ready()``; the runner's exit status and its stderr."""
    helpers = tmp_path / "helpers"
    helpers.mkdir(exist_ok=True)
    (helpers / "resilient_checkpoint.py").write_text(worker.helper_source())
    env = {**os.environ, "GCE_METADATA_HOST": server.address, "OUT": str(tmp_path), "PYTHONPATH": str(helpers)}
    argv = [sys.executable, str(shipped_runner()), "--heartbeat-seconds", "0.05", "--grace-seconds", "10", *options,
            "--", sys.executable, "-c", textwrap.dedent(NOTICE_WORKLOAD)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not ((tmp_path / "ready").exists() and ready()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, stderr


def test_a_preemption_notice_makes_a_workload_without_a_handler_save_before_it_ends(tmp_path):
    """SIGTERM is the notice: the runner passes a ``notice-`` request first, the helper keeps the SIGTERM from ending
    the workload, which saves at its next step, acknowledges and ends with 143; the runner reports both tokens."""
    server = MetadataServer(0, dict)
    try:
        status, stderr = notice(server, tmp_path)
        assert status == 143, stderr
        saved = sorted(int(p.name.split("_")[1]) for p in tmp_path.glob("step_*"))
        assert len(saved) == 1 and saved[0] >= 3, saved  # one save, at the step after the notice
        guest = server.guest("resilient/")
        assert guest["resilient/notice_request"].startswith("notice-")
        assert guest["resilient/notice_ack"] == guest["resilient/notice_request"]
        assert "resilient/checkpoint_request" not in guest  # the node asked for nothing
        assert guest["resilient/status"] == "terminated"
    finally:
        server.stop()


def test_without_checkpoint_on_notice_the_sigterm_ends_the_workload_unsaved(tmp_path):
    """``--no-notice-checkpoint``: the behaviour before it -- the SIGTERM ends a workload that has no handler at once,
    nothing is saved, nothing requested."""
    server = MetadataServer(0, dict)
    try:
        status, stderr = notice(server, tmp_path, "--no-notice-checkpoint")
        assert status == 143, stderr
        assert not list(tmp_path.glob("step_*"))
        assert "resilient/checkpoint_request" not in server.guest("resilient/")
        assert "resilient/notice_request" not in server.guest("resilient/")
    finally:
        server.stop()


def test_a_notice_after_the_nodes_request_does_not_bring_that_request_back_after_a_reboot(tmp_path):
    """A maintenance window's request is saved and acknowledged, then the window's SIGTERM is a notice, saved too; the
    VM boots again after the repair: the node's request, acknowledged before, is not passed on again (the notice's
    acknowledgement is reported apart and never stands for it)."""
    server = MetadataServer(0, lambda: {"resilient-checkpoint-request": "window X"})
    try:
        status, stderr = notice(server, tmp_path,
                                ready=lambda: server.guest("resilient/").get("resilient/checkpoint_ack") == "window X")
        assert status == 143, stderr
        guest = server.guest("resilient/")
        assert guest["resilient/checkpoint_request"] == guest["resilient/checkpoint_ack"] == "window X"
        assert guest["resilient/notice_ack"].startswith("notice-")
        boot2 = tmp_path / "boot2"
        boot2.mkdir()
        again = run(server, boot2, 0.3)  # the workload ends 3 when nothing is asked within 0.3 s
        assert again.returncode == 3 and "checkpoint requested" not in again.stderr
    finally:
        server.stop()


def test_a_sigterm_without_the_runners_request_is_still_a_notice(tmp_path, monkeypatch):
    """The helper alone (the runner's request not read yet, or a container runtime's SIGTERM): a kept SIGTERM is
    requested as ``notice-sigterm``, its acknowledgement ends the process with 143; a later SIGTERM ends it at once."""
    env = {**files(tmp_path), checkpoint_request.ON_NOTICE_ENV: "1"}
    monkeypatch.setattr(checkpoint_request, "_notice", {"handler": False, "sigterm": False, "saved": False})
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert checkpoint_request.requested(env) is None
        assert signal.getsignal(signal.SIGTERM) is checkpoint_request._on_sigterm
        os.kill(os.getpid(), signal.SIGTERM)  # kept: this test process goes on
        token = checkpoint_request.requested(env)
        assert token == "notice-sigterm"
        with pytest.raises(SystemExit) as ended:
            checkpoint_request.acknowledge(token, env)
        assert ended.value.code == 143 and (tmp_path / "a").read_text() == "notice-sigterm"
        assert checkpoint_request.requested(env) is None  # saved once
        with pytest.raises(SystemExit):
            checkpoint_request._on_sigterm(signal.SIGTERM, None)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_handler_of_the_workloads_own_is_left_alone(tmp_path, monkeypatch):
    env = {**files(tmp_path), checkpoint_request.ON_NOTICE_ENV: "1"}
    monkeypatch.setattr(checkpoint_request, "_notice", {"handler": False, "sigterm": False, "saved": False})
    previous = signal.getsignal(signal.SIGTERM)

    def own(signum, frame):
        return None

    signal.signal(signal.SIGTERM, own)
    try:
        assert checkpoint_request.requested(env) is None
        assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, previous)
