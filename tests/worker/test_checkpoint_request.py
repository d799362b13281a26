"""Checkpoint requests through the worker runner (section 4b) and the workload's helper, against the emulator's
metadata server (node metadata served as attributes, guest attributes stored)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
    try:
        done = run(server, tmp_path, 20, "--checkpoint-signal", "usr1", NEED_SIGNAL="1")
        assert done.returncode == 0, done.stderr
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
    import pytest

    from airflow_provider_resilient.worker.runner import UsageError, parse_command_line

    for bad in ("KILL", "TERM", "NOPE"):
        with pytest.raises(SystemExit):
            parse_command_line(["--checkpoint-signal", bad, "--", "true"])
    assert parse_command_line(["--checkpoint-signal", "SIGUSR2", "--", "true"])[0].checkpoint_signal == "USR2"
    assert UsageError
