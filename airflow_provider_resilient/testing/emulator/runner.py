"""Replica processes: a job's replica runs as a local subprocess in its own process group.

The runner only starts, polls, signals and kills processes and writes their output to a log file; the
lifecycle rules live in the Vertex AI model, which feeds exit statuses into its state machine.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
from pathlib import Path


def exit_status(returncode: int) -> int:
    """A Popen return code as a container reports it: signal ``n`` (``-n``) becomes ``128 + n``."""
    return 128 - returncode if returncode < 0 else returncode


#: The exit status a container runtime gives a command it cannot start ("Termination reason: StartError"): 127
#: not found, 126 not executable; 128 for any other start failure.
START_ERROR_STATUS: dict[type[OSError], int] = {FileNotFoundError: 127, NotADirectoryError: 127,
                                                PermissionError: 126, IsADirectoryError: 126}

_SERIALS = itertools.count(1)


#: How the header line the emulator writes before each start of a replica's command begins.
HEADER_PREFIX = "===== "


def read_appended(path: Path, offset: int) -> bytes:
    """The bytes a log file holds past byte ``offset`` (b"" when the file is not there yet). A replica's log
    outlives its processes (one file per replica across restarts), so readers keep an offset per file."""
    try:
        with path.open("rb") as log:
            log.seek(offset)
            return log.read()
    except FileNotFoundError:
        return b""


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents before children (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            out.append(child)
            todo.append(child)
    return out


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` (``R``, ``S``, ``T`` stopped, ``Z`` zombie ...; from /proc), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie waiting to be reaped)."""
    return process_state(pid) not in (None, "Z")


def freeze_tree(root: int) -> list[int]:
    """SIGSTOP ``root``'s process group and every process below ``root`` (one that left the group too: the worker
    runner starts the training command in a session of its own), again until no new process appears; returns the
    frozen tree, ``root`` first."""
    tree = [root]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(root, signal.SIGSTOP)
    for _ in range(5):
        found = [root, *descendants(root)]
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        if set(found) <= set(tree) and len(tree) > 1:
            break
        tree = list(dict.fromkeys([*tree, *found]))
    return tree


def workload_root(root: int) -> int:
    """The process a hang freezes below a replica's ``root``: the first process under it that leads a session of its
    own -- the training command the worker runner started (the runner, the container's main process, is not the
    workload) -- else ``root`` itself (a bare command, or a runner that has not started its command yet)."""
    for pid in descendants(root):
        with contextlib.suppress(OSError):
            if os.getsid(pid) == pid:
                return pid
    return root


class ReplicaProcess:
    """One run of one replica's command.

    Args:
        replica: the replica name, e.g. ``workerpool0-0``.
        argv: the command and its arguments.
        env: the complete environment of the process.
        log_path: stdout and stderr are appended here; a header line marks each start.
        header: the text of that header line.
    """

    def __init__(self, replica: str, argv: list[str], env: dict[str, str], log_path: Path, header: str) -> None:
        self.replica = replica
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.header = header
        self.started_at = 0.0  # the emulator clock's monotonic() at start
        self.serial = next(_SERIALS)  # unique per process start, whatever the clock says
        self.log_offset = 0  # size of the log file when it started: what the process wrote comes after
        self._proc: subprocess.Popen[bytes] | None = None
        self._suspended = False
        #: The exit status of a command that could not be started at all (None: it started).
        self.start_error: int | None = None

    def start(self, now: float) -> None:
        """Start the command; ``now``: the emulator clock's ``monotonic()``, kept as :attr:`started_at`."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"{HEADER_PREFIX}{self.header} =====\n".encode())
            log.flush()
            self.log_offset = log.tell()
            try:
                self._proc = subprocess.Popen(
                    self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True, cwd=self.log_path.parent,
                )
            except OSError as exc:  # the command cannot be run: it ends at once, as a container's would
                self.start_error = START_ERROR_STATUS.get(type(exc), 128)
                log.write(f"exec {self.argv[0] if self.argv else ''!r} failed: {exc}\n".encode())
        self.started_at = now

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def poll(self) -> int | None:
        """The exit status once it has exited (``128 + n`` for signal ``n``), else None."""
        if self._proc is None:
            return self.start_error
        code = self._proc.poll()
        return None if code is None else exit_status(code)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process group (the command and anything it spawned)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def suspend(self) -> None:
        """Freeze the workload's whole process tree (a hang: alive, no progress; :func:`freeze_tree`): under a worker
        runner the training command, which runs in a session of its own (:func:`workload_root`) -- the runner lives
        on, as beside a collective that never returns, and its watchdog may abort the command --, else the
        command's. Cloud TPU workers' hangs strike the training command too (``tpu/workers.py``)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        freeze_tree(workload_root(self._proc.pid))
        self._suspended = True

    def kill(self) -> None:
        """SIGKILL the command's whole process tree -- the group and what left it (a worker runner's training
        command, in a session of its own: the machine is gone) -- and reap it."""
        if self._proc is None:
            return
        tree = freeze_tree(self._proc.pid) if self._proc.poll() is None else []
        self.signal(signal.SIGKILL)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)

    def read_new_output(self, offset: int) -> tuple[str, int]:
        """Text appended to the log since byte ``offset``, and the new offset."""
        data = read_appended(self.log_path, offset)
        return data.decode("utf-8", "replace"), offset + len(data)
