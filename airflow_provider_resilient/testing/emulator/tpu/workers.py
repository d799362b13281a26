"""The worker VMs of an emulated TPU node as local processes: each runs the node's startup script with bash
in a session of its own; stopping a VM kills the whole process tree below it (the worker runner starts the
training command in a session of its own too, so a process-group kill is not enough)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..runner import descendants as _descendants
from ..runner import freeze_tree
from ..runner import process_state as _state
from ..runner import running as _running
from .metadata import MetadataServer


def _stopped_or_ended(pid: int, timeout: float = 0.5) -> bool:
    """Wait (bounded) until a SIGSTOP sent to ``pid`` took effect: True when it is stopped, False when it ended first
    (a short-lived process -- a shell loop's ``sleep`` -- exits between the look and the signal)."""
    deadline = time.monotonic() + timeout
    while (state := _state(pid)) not in (None, "Z", "T", "t"):
        if time.monotonic() >= deadline:
            return True  # still running after the signal: leave it to the caller's next look, as before
        time.sleep(0.005)
    return state in ("T", "t")


@dataclass
class Worker:
    """One worker VM: its metadata server and its startup-script process."""

    index: int
    metadata: MetadataServer
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    killed: set[int] = field(default_factory=set)

    def start(self, script: str, env: dict[str, str]) -> None:
        self.stop()
        self.starts += 1
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            out.write(f"===== worker {self.index} boot {self.starts} =====\n".encode())
            out.flush()
            self.proc = subprocess.Popen(["bash", "-c", script], env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.log_path.parent)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal_group(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def signal_workload(self, sig: int) -> bool:
        """Send ``sig`` to the newest process under the startup script (the training command). A SIGSTOP (a
        ``hang``) is sent again to the then newest process while its target ends before it is stopped: a workload
        of short-lived processes (a shell loop's ``sleep 0.05``) must not slip past its hang."""
        for _ in range(50):
            if not self.alive():
                return False
            assert self.proc is not None
            target = (_descendants(self.proc.pid) or [self.proc.pid])[-1]
            try:
                os.kill(target, sig)
            except (ProcessLookupError, PermissionError):
                continue
            if sig != signal.SIGSTOP or _stopped_or_ended(target):
                return True
        return False

    def stop(self) -> None:
        """Power the VM off: kill the startup script and every process below it.

        The worker runner starts the training command in a session of its own, so killing the script's
        process group is not enough; the tree is frozen (SIGSTOP, so nothing forks meanwhile), then
        killed. Pids killed this way are remembered so :meth:`leftovers` can prove none survived.
        """
        if self.proc is None:
            return
        tree = [self.proc.pid]
        if self.alive():
            tree = freeze_tree(self.proc.pid)  # frozen until no new process appears under the script
            self.signal_group(signal.SIGKILL)
            for pid in tree:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self.killed.update(tree[1:])
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        # A VM that is off runs nothing: wait (a bounded while) until the kernel has ended every killed process --
        # on a loaded machine a SIGKILLed process can stay runnable for a moment after the signal.
        deadline = time.monotonic() + 5.0
        while any(_running(pid) for pid in tree[1:]) and time.monotonic() < deadline:
            time.sleep(0.01)

    def leftovers(self) -> list[int]:
        """Processes this worker started that are still alive: the script, its descendants, and any
        process killed by :meth:`stop` that is somehow still running (never expected)."""
        alive = []
        if self.alive():
            assert self.proc is not None
            alive = [self.proc.pid, *_descendants(self.proc.pid)]
        alive += [pid for pid in sorted(self.killed) if _running(pid)]
        return list(dict.fromkeys(alive))
