"""The TPU worker runner, run as a real subprocess against a fake metadata server.

Every scenario starts ``runner.py`` as it ships (``runner_source()``: :mod:`.shipped`) with ``sys.executable``; the
child commands are tiny Python scripts that count their runs in files under ``tmp_path``, so nothing depends on
timing except the heartbeat and SIGTERM cases, which wait for files the child writes.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from airflow_provider_resilient import worker
from airflow_provider_resilient.policy import classify as policy
from airflow_provider_resilient.worker import protocol, runner

from .shipped import shipped_runner

RUN_TIMEOUT = 20


# -- fake metadata server -----------------------------------------------------------------------------


@dataclass
class MetadataServer:
    """Records guest-attribute PUTs as ``(namespace, key, value, Metadata-Flavor header)``."""

    host: str = ""
    puts: list[tuple[str, str, str, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, path: str, body: str, flavor: str | None) -> bool:
        prefix = runner.GUEST_ATTRIBUTES_PATH + "/"
        if not path.startswith(prefix):
            return False
        namespace, _, key = path[len(prefix):].partition("/")
        with self.lock:
            self.puts.append((namespace, key, body, flavor))
        return True

    def values(self, key: str, namespace: str = "resilient") -> list[str]:
        with self.lock:
            return [v for ns, k, v, _ in self.puts if k == key and ns == namespace]

    def last(self, key: str, namespace: str = "resilient") -> str | None:
        values = self.values(key, namespace)
        return values[-1] if values else None

    def statuses(self) -> list[str]:
        return self.values("status")


def _handler(server: MetadataServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
            ok = server.record(self.path, body, self.headers.get("Metadata-Flavor"))
            self.send_response(200 if ok else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def metadata() -> Iterator[MetadataServer]:
    """A fake GCE metadata server on 127.0.0.1 (free port) that records guest attribute PUTs."""
    server = MetadataServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    server.host = f"127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    httpd.shutdown()
    httpd.server_close()


# -- helpers --------------------------------------------------------------------------------------------


def script(body: str) -> list[str]:
    """A child command: ``sys.executable -c <body>``."""
    return [sys.executable, "-c", textwrap.dedent(body)]


def counting(counter: Path, body: str) -> list[str]:
    """A child that increments ``counter`` (a file) first; ``n`` is its run number from 0."""
    header = textwrap.dedent(f"""
        import os, signal, sys, time
        from pathlib import Path
        counter = Path({str(counter)!r})
        n = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(n + 1))
    """)
    return script(header + textwrap.dedent(body))


def runner_env(metadata: MetadataServer | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GCE_METADATA_HOST", "TPU_WORKER_ID")}
    if metadata is not None:
        env["GCE_METADATA_HOST"] = metadata.host
    env.update(extra)
    return env


def runner_argv(options: list[str], command: list[str]) -> list[str]:
    return [sys.executable, str(shipped_runner()), "--restart-delay", "0", "--heartbeat-seconds", "0.1",
            *options, "--", *command]


def run_runner(options: list[str], command: list[str], metadata: MetadataServer | None = None,
               cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(runner_argv(options, command), env=runner_env(metadata, **env), cwd=cwd,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)


def wait_for(path: Path, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


# -- (a)..(d), (j): exit codes and restarts ------------------------------------------------------------


def test_transient_crash_twice_then_success_restarts_in_place(tmp_path: Path, metadata: MetadataServer) -> None:
    counter = tmp_path / "runs"
    command = counting(counter, """
        print("loading data")
        print(f"step {5 + n}")
        sys.exit(139 if n < 2 else 0)
    """)
    result = run_runner([], command, metadata, TPU_WORKER_ID="3")
    assert result.returncode == 0, result.stderr
    assert counter.read_text() == "3"
    assert result.stdout.count("loading data") == 3  # the child's stdout is tee'd
    assert metadata.statuses() == ["running", "restarting", "running", "restarting", "running", "succeeded"]
    assert metadata.values("restarts") == ["0", "1", "2"]
    assert metadata.values("exit_code") == ["139", "139", "0"]
    assert metadata.values("failure_class") == ["transient_crash", "transient_crash"]
    assert metadata.last("step") == "7"
    assert metadata.last("worker_id") == "3"
    assert {flavor for *_, flavor in metadata.puts} == {"Google"}


def test_permanent_user_error_is_not_restarted(tmp_path: Path, metadata: MetadataServer) -> None:
    counter = tmp_path / "runs"
    result = run_runner([], counting(counter, "raise SystemExit(1)"), metadata)
    assert result.returncode == 1
    assert counter.read_text() == "1"
    assert metadata.statuses() == ["running", "failed"]
    assert metadata.last("exit_code") == "1"
    assert metadata.last("failure_class") == "permanent_user_error"


def test_worker_failure_sigkill_restarts_five_times_then_exits_137(tmp_path: Path, metadata: MetadataServer) -> None:
    counter = tmp_path / "runs"
    result = run_runner([], counting(counter, "os.kill(os.getpid(), signal.SIGKILL)"), metadata)
    assert result.returncode == 137  # Python's -9, reported as 128 + 9
    assert counter.read_text() == "6"  # first run + seed 000's five restarts
    assert metadata.values("restarts") == ["0", "1", "2", "3", "4", "5"]
    assert metadata.statuses()[-1] == "failed"
    assert metadata.last("exit_code") == "137"
    assert set(metadata.values("failure_class")) == {"worker_failure"}


def test_max_restarts_option_is_respected(tmp_path: Path, metadata: MetadataServer) -> None:
    counter = tmp_path / "runs"
    result = run_runner(["--max-restarts", "2"], counting(counter, "sys.exit(137)"), metadata)
    assert result.returncode == 137
    assert counter.read_text() == "3"
    assert metadata.last("restarts") == "2"


def test_max_restarts_zero_never_restarts(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    result = run_runner(["--max-restarts", "0"], counting(counter, "sys.exit(134)"))
    assert result.returncode == 134
    assert counter.read_text() == "1"


@pytest.mark.parametrize("code", [126, 127, 128, 78])
def test_start_error_and_preflight_codes_of_the_child_are_permanent(
    tmp_path: Path, metadata: MetadataServer, code: int
) -> None:
    counter = tmp_path / "runs"
    result = run_runner([], counting(counter, f"sys.exit({code})"), metadata)
    assert result.returncode == code
    assert counter.read_text() == "1"
    assert metadata.statuses() == ["running", "failed"]
    expected = "preflight_failure" if code == 78 else "container_start_error"
    assert metadata.last("failure_class") == expected


def test_command_not_found_exits_127_without_restart(tmp_path: Path, metadata: MetadataServer) -> None:
    result = run_runner([], [str(tmp_path / "no-such-command")], metadata)
    assert result.returncode == 127
    assert "cannot start" in result.stderr
    assert metadata.statuses() == ["running", "failed"]
    assert metadata.last("failure_class") == "container_start_error"


def test_command_not_executable_exits_126(tmp_path: Path) -> None:
    path = tmp_path / "train.sh"
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o644)
    result = run_runner([], [str(path)])
    assert result.returncode == 126


def test_restart_count_is_visible_to_the_child(tmp_path: Path) -> None:
    counter, seen = tmp_path / "runs", tmp_path / "seen"
    command = counting(counter, f"""
        with open({str(seen)!r}, "a") as f:
            f.write(os.environ["RESILIENT_WORKER_RESTARTS"] + "\\n")
        sys.exit(6 if n < 2 else 0)
    """)
    assert run_runner([], command).returncode == 0
    assert seen.read_text().split() == ["0", "1", "2"]


# -- (e): SIGTERM -----------------------------------------------------------------------------------------


def test_sigterm_is_forwarded_to_the_child_which_checkpoints(tmp_path: Path, metadata: MetadataServer) -> None:
    ready, checkpointed, counter = tmp_path / "ready", tmp_path / "checkpointed", tmp_path / "runs"
    command = counting(counter, f"""
        def on_term(signum, frame):
            Path({str(checkpointed)!r}).write_text("saved")
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_term)
        Path({str(ready)!r}).write_text("1")
        time.sleep(30)
    """)
    proc = subprocess.Popen(runner_argv(["--grace-seconds", "10"], command), env=runner_env(metadata),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(ready)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr
    assert checkpointed.read_text() == "saved"
    assert counter.read_text() == "1"  # no restart after SIGTERM
    assert metadata.statuses() == ["running", "terminated"]
    assert metadata.last("exit_code") == "143"
    assert metadata.last("failure_class") == "worker_failure"


def test_child_ignoring_sigterm_is_killed_after_grace(tmp_path: Path, metadata: MetadataServer) -> None:
    ready, pid_file = tmp_path / "ready", tmp_path / "pid"
    command = script(f"""
        import os, signal, time
        from pathlib import Path
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        Path({str(pid_file)!r}).write_text(str(os.getpid()))
        Path({str(ready)!r}).write_text("1")
        time.sleep(60)
    """)
    proc = subprocess.Popen(runner_argv(["--grace-seconds", "0.5"], command), env=runner_env(metadata),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(ready)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr
    assert 0.5 <= elapsed < 10
    assert "SIGKILL" in stderr
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
    assert metadata.statuses() == ["running", "terminated"]


# -- (f): preflight ---------------------------------------------------------------------------------------


#: Thresholds every machine passes, so that one test fails one item at a time.
LENIENT = ["--min-root-free-bytes", "0", "--min-shm-free-bytes", "0", "--min-open-files", "1"]


def fake_dev(tmp_path: Path, accel: int = 0, nvidia: int = 0, vfio: int = 0) -> Path:
    """A fake ``/dev`` (``RESILIENT_DEVICE_ROOT``) with TPU chips (``accelN``, ``vfio/N``), GPUs (``nvidiaN``)
    and a ``shm`` directory."""
    dev = tmp_path / "dev"
    (dev / "shm").mkdir(parents=True, exist_ok=True)
    for n in range(accel):
        (dev / f"accel{n}").touch()
    for n in range(nvidia):
        (dev / f"nvidia{n}").touch()
    if vfio:
        (dev / "vfio").mkdir(exist_ok=True)
        (dev / "vfio" / "vfio").touch()  # the control device: not a chip
        for n in range(vfio):
            (dev / "vfio" / str(n)).touch()
    return dev


def checks(options: list[str], **environ: str) -> dict[str, tuple[str, str]]:
    parsed, _ = runner.parse_command_line([*LENIENT, *options, "--", "true"])
    return {item: (verdict, detail) for item, verdict, detail in runner.preflight_checks(parsed, environ)}


@pytest.mark.parametrize(
    ("options", "env", "item"),
    [
        (["--min-root-free-bytes", str(10**18)], {}, "disk-size root"),
        (["--min-shm-free-bytes", str(10**18)], {}, "disk-size shm"),
        (["--cache-dir", "{tmp}", "--min-cache-free-bytes", str(10**18)], {}, "disk-size cache"),
        (["--min-open-files", str(2**62)], {}, "ulimit"),
        (["--checkpoint-dir", "{file}/ckpt"], {}, "checkpoint-dir"),
        (["--hosts", "localhost,worker-1.invalid", "--dns-timeout", "5"], {}, "dns"),
        ([], {"TPU_WORKER_HOSTNAMES": "localhost,worker-1.invalid"}, "dns"),
        (["--expect-tpu-chips", "4"], {"RESILIENT_DEVICE_ROOT": "{dev3}"}, "tpu-check"),
        (["--expect-gpus", "1"], {"RESILIENT_DEVICE_ROOT": "{dev3}"}, "gpu-check"),
    ],
)
def test_preflight_failure_exits_78_without_running_the_command(
    tmp_path: Path, metadata: MetadataServer, options: list[str], env: dict[str, str], item: str
) -> None:
    """Seed 004: each item of its table fails on its own, logged under its keyword "item"."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    subs = {"{file}": str(a_file), "{tmp}": str(tmp_path), "{dev3}": str(fake_dev(tmp_path, accel=3))}

    def sub(text: str) -> str:
        for key, value in subs.items():
            text = text.replace(key, value)
        return text

    ran = tmp_path / "ran"
    result = run_runner(["--preflight", *LENIENT, *map(sub, options)], script(f"open({str(ran)!r}, 'w').close()"),
                        metadata, **{k: sub(v) for k, v in env.items()})
    assert result.returncode == runner.PREFLIGHT_EXIT_CODE == 78
    assert not ran.exists()
    failed = [line for line in result.stderr.splitlines() if line.startswith("preflight failed: item ")]
    assert [line.split(": ")[1] for line in failed] == [f"item {item}"], result.stderr
    assert metadata.statuses() == ["preflight", "preflight_failed"]
    assert metadata.last("exit_code") == "78"
    assert metadata.last("failure_class") == "preflight_failure"
    assert (metadata.last("hardware") or "").startswith("faulty: ") == (item in runner.DEVICE_ITEMS)


def test_preflight_passes_and_logs_each_item(tmp_path: Path, metadata: MetadataServer) -> None:
    ckpt = tmp_path / "ckpt"
    options = ["--preflight", *LENIENT, "--checkpoint-dir", str(ckpt), "--hosts", "localhost",
               "--expect-tpu-chips", "4"]
    result = run_runner(options, script("print('step 1')"), metadata, cwd=tmp_path,
                        RESILIENT_DEVICE_ROOT=str(fake_dev(tmp_path, accel=4)))
    assert result.returncode == 0, result.stderr
    for item in ("dns", "disk-size root", "disk-size shm", "checkpoint-dir", "ulimit", "tpu-check"):
        assert f"preflight ok: item {item}: " in result.stderr
    assert "preflight skipped: item disk-size cache: /cache does not exist" in result.stderr
    assert ckpt.is_dir() and not list(ckpt.iterdir())  # the probe file is removed
    assert metadata.statuses() == ["preflight", "running", "succeeded"]
    assert metadata.last("hardware") is None


def test_seed_004_defaults_and_what_is_skipped(tmp_path: Path) -> None:
    parsed, _ = runner.parse_command_line(["--", "true"])
    assert (parsed.min_root_free_bytes, parsed.min_shm_free_bytes, parsed.min_cache_free_bytes) == (
        32 * 10**9, 10**9, 32 * 10**9)  # seed 004: > 32GB, > 1GB, > 32GB
    found = checks(["--checkpoint-dir", "gs://bucket/ckpt", "--cache-dir", str(tmp_path / "none")])
    assert found["checkpoint-dir"][0] == found["disk-size cache"][0] == found["dns"][0] == "skipped"
    assert "gpu-check" not in found and "tpu-check" not in found  # no device expected: no item


def test_emulated_disks_stand_in_for_statvfs(tmp_path: Path) -> None:
    """An emulated VM's disks (``RESILIENT_EMULATED_FREE_BYTES``): the emulator's TPU VMs have their own."""
    dev = fake_dev(tmp_path)
    table = json.dumps({"/": 5 * 10**9, str(dev / "shm"): 64 * 2**20, "/cache": 40 * 10**9})
    found = checks(["--min-root-free-bytes", str(32 * 10**9), "--min-shm-free-bytes", str(10**9)],
                   RESILIENT_EMULATED_FREE_BYTES=table, RESILIENT_DEVICE_ROOT=str(dev))
    assert found["disk-size root"] == ("failed", "5.0 GB free in /, need > 32.0 GB")
    assert found["disk-size shm"][0] == "failed"  # Docker's default 64 MiB /dev/shm
    assert found["disk-size cache"][0] == "ok"  # an emulated /cache exists


@pytest.mark.parametrize(("env", "hosts"), [
    ({"TPU_WORKER_HOSTNAMES": "10.0.0.2,10.0.0.3"}, ["10.0.0.2", "10.0.0.3"]),
    ({"CLUSTER_SPEC": json.dumps({"cluster": {"workerpool0": ["cmle-training-workerpool0-ab-0:2222"],
                                              "workerpool1": ["cmle-training-workerpool1-ab-0:2222",
                                                              "cmle-training-workerpool1-ab-1:2222"]},
                                  "task": {"type": "workerpool0", "index": 0}})},
     ["cmle-training-workerpool0-ab-0", "cmle-training-workerpool1-ab-0", "cmle-training-workerpool1-ab-1"]),
    ({"TF_CONFIG": json.dumps({"cluster": {"chief": ["[::1]:2222"], "worker": ["w-0:2222"]}})}, ["::1", "w-0"]),
    ({"TF_CONFIG": "not json"}, []),
])
def test_the_job_hosts_come_from_the_platforms_environment(env: dict[str, str], hosts: list[str]) -> None:
    assert runner.job_hosts(env) == hosts


def test_tpu_chips_count_accel_and_vfio_devices_and_gpus_nvidia_ones(tmp_path: Path) -> None:
    dev = fake_dev(tmp_path, accel=2, vfio=2, nvidia=8)
    assert runner.count_devices(str(dev), "tpu") == 4  # /dev/vfio/vfio is not a chip
    assert runner.count_devices(str(dev), "gpu") == 8
    assert checks(["--expect-tpu-chips", "4", "--expect-gpus", "8"], RESILIENT_DEVICE_ROOT=str(dev))["tpu-check"][0] \
        == "ok"


def test_infiniband_brings_seed_004_limits(tmp_path: Path) -> None:
    import resource

    found = checks(["--infiniband", "yes"])
    verdict, detail = found["ulimit"]
    assert detail.startswith("InfiniBand in use")
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY and soft <= 1_000_000:
        assert verdict == "failed" and f"open files {soft}, need > 1000000" in detail
    ib = tmp_path / "infiniband"
    (ib / "mlx5_0").mkdir(parents=True)
    assert checks([], RESILIENT_SYS_CLASS_INFINIBAND=str(ib))["ulimit"][1].startswith("InfiniBand in use")
    assert checks([], RESILIENT_SYS_CLASS_INFINIBAND=str(tmp_path / "none"))["ulimit"][1].startswith("no InfiniBand")


def test_a_chip_lost_while_running_stops_the_command_and_reports_the_hardware(tmp_path: Path,
                                                                               metadata: MetadataServer) -> None:
    """Seed 004's periodic hardware check: a chip vanishes while training runs -> SIGTERM (the workload may
    checkpoint), no restart in place, failure class node_unhealthy."""
    dev = fake_dev(tmp_path, accel=4)
    started, saved = tmp_path / "started", tmp_path / "saved"
    command = script(f"""
        import signal, sys, time
        def save(signum, frame):
            open({str(saved)!r}, "w").close()
            sys.exit(143)
        signal.signal(signal.SIGTERM, save)
        open({str(started)!r}, "w").close()
        time.sleep(60)
    """)
    proc = subprocess.Popen(runner_argv(["--expect-tpu-chips", "4", "--hardware-check-seconds", "0.05"], command),
                            env=runner_env(metadata, RESILIENT_DEVICE_ROOT=str(dev)), stderr=subprocess.PIPE,
                            text=True)
    wait_for(started)
    (dev / "accel2").unlink()
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    assert saved.exists()
    assert proc.returncode == 143
    assert "hardware check failed: item tpu-check: 3 of 4 TPU chips visible" in stderr
    assert metadata.statuses() == ["running", "failed"]
    assert metadata.last("failure_class") == "node_unhealthy"
    assert metadata.last("hardware").startswith("faulty: tpu-check: 3 of 4")


@pytest.mark.parametrize("hardware_faulty", [True, False], ids=["scenario-3-hardware-faulty", "scenario-4-fine"])
def test_a_failed_command_on_faulty_hardware_is_not_restarted_here(tmp_path: Path, metadata: MetadataServer,
                                                                   hardware_faulty: bool) -> None:
    """Seed 004 scenario 3 (the job failed, the hardware is faulty: isolate) against scenario 4 (the hardware
    is fine: the exit status decides -- a transient crash is restarted in place, as seed 000 says)."""
    dev = fake_dev(tmp_path, accel=4)
    counter = tmp_path / "runs"
    lose = f"import os; os.unlink({str(dev / 'accel0')!r})" if hardware_faulty else "pass"
    command = counting(counter, f"""
        if n == 0:
            {lose}
        sys.exit(139 if n == 0 else 0)
    """)
    result = run_runner(["--expect-tpu-chips", "4", "--hardware-check-seconds", "0", "--restart-delay", "0"],
                        command, metadata, RESILIENT_DEVICE_ROOT=str(dev))
    if hardware_faulty:
        assert result.returncode == 139 and counter.read_text() == "1"
        assert metadata.last("failure_class") == "node_unhealthy"
        assert "no restart on this node" in result.stderr
    else:
        assert result.returncode == 0 and counter.read_text() == "2"
        assert metadata.last("hardware") is None


# -- (g), (h): heartbeats and reporting -------------------------------------------------------------------


def test_heartbeats_keep_coming_while_the_child_runs(metadata: MetadataServer) -> None:
    result = run_runner([], script("import time; time.sleep(0.5)"), metadata)
    assert result.returncode == 0
    beats = [float(v) for v in metadata.values("heartbeat")]
    assert len(beats) >= 3
    assert beats == sorted(beats) and len(set(beats)) == len(beats)
    assert abs(beats[-1] - time.time()) < 60


def test_on_an_emulated_vm_of_a_manual_clock_the_heartbeat_is_the_platforms_time(tmp_path: Path,
                                                                                  metadata: MetadataServer) -> None:
    """The emulator on a manual clock keeps the platform's time in a file (``RESILIENT_EMULATED_CLOCK``): the VM's
    clock, which the heartbeat reports (the operator judges it against the same time); a real VM's is
    ``time.time()`` (above)."""
    clock = tmp_path / "clock"
    clock.write_text("1234567890.5")
    result = run_runner([], script("print('step 1')"), metadata, RESILIENT_EMULATED_CLOCK=str(clock))
    assert result.returncode == 0
    assert {float(v) for v in metadata.values("heartbeat")} == {1234567890.5}


def test_custom_namespace_and_step_pattern(metadata: MetadataServer) -> None:
    options = ["--namespace", "train", "--step-pattern", r"global_step=(\d+)"]
    result = run_runner(options, script("print('loss=1.0 global_step=41'); print('global_step=42')"), metadata)
    assert result.returncode == 0
    assert metadata.statuses() == []
    assert metadata.last("status", namespace="train") == "succeeded"
    assert metadata.last("step", namespace="train") == "42"


def test_runs_without_a_metadata_server(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    result = run_runner([], counting(counter, "print('step 3'); sys.exit(11 if n == 0 else 0)"))
    assert result.returncode == 0
    assert counter.read_text() == "2"
    assert "warning" not in result.stderr


def test_unreachable_metadata_server_warns_once_and_keeps_running(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: connections are refused
    counter = tmp_path / "runs"
    result = run_runner([], counting(counter, "sys.exit(139 if n == 0 else 0)"), GCE_METADATA_HOST=f"127.0.0.1:{port}")
    assert result.returncode == 0
    assert counter.read_text() == "2"
    assert result.stderr.count("warning: cannot write guest attribute") == 1


# -- usage ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--"], [], ["--max-restarts", "1"], ["python3", "train.py"]])
def test_missing_command_is_a_usage_error(argv: list[str]) -> None:
    result = subprocess.run([sys.executable, str(shipped_runner()), *argv], capture_output=True, text=True,
                            timeout=RUN_TIMEOUT, env=runner_env(None))
    assert result.returncode == runner.USAGE_EXIT_CODE == 2
    assert "usage:" in result.stderr


def test_bad_option_is_a_usage_error() -> None:
    result = run_runner(["--max-restarts", "-1"], ["true"])
    assert result.returncode == 2


# -- (i): agreement with the policy, and the file's own rules ---------------------------------------------


def test_the_policy_judges_exit_statuses_by_the_runners_one_rule() -> None:
    """The exit-status rule is written once, in the worker's protocol: the runner restarts by it on the VM, the policy
    builds its Failure from it, so the two agree on every code by construction -- checked here over every code
    anyway."""
    assert policy.exit_status_class is protocol.classify_exit_status is runner.classify_exit_status
    assert runner.PREFLIGHT_EXIT_CODE == worker.PREFLIGHT_EXIT_CODE == protocol.PREFLIGHT_EXIT_CODE
    assert [runner.classify_exit_status(code) for code in (0, 1, 6, 11, 78, 126, 134, 137, 139, 143, -9, -11)] == [
        None, "permanent_user_error", "transient_crash", "transient_crash", "preflight_failure",
        "container_start_error", "transient_crash", "worker_failure", "transient_crash", "worker_failure",
        "worker_failure", "transient_crash"]
    assert runner.classify_exit_status(0, signal_number=9) == "worker_failure"
    assert runner.classify_exit_status(3, preflight_exit_code=3) == "preflight_failure"
    for code in range(-64, 256):
        failure = policy.classify_exit_status(code)
        expected = failure.failure_class.value if failure is not None else None
        assert runner.classify_exit_status(code) == expected, code
        if code < 0:  # what the runner reports for Python's -n agrees too
            assert runner.classify_exit_status(runner.normalize_exit_status(code)) == expected, code


def test_restartable_classes_are_the_policys_restart_in_place_classes() -> None:
    from airflow_provider_resilient.policy import FailureClass

    assert {FailureClass(c) for c in runner.RESTARTABLE_CLASSES} == {
        FailureClass.TRANSIENT_CRASH, FailureClass.WORKER_FAILURE}
    assert runner.classify_exit_status(runner.TERMINATED_EXIT_CODE) == FailureClass.WORKER_FAILURE.value


@pytest.mark.parametrize(("source", "lazy"), [(worker.runner_source(), set()),
                                               (worker.helper_source(), {"torch"})])  # the helper's PyTorch form
def test_runner_and_helper_are_stdlib_only_and_python38_syntax(source: str, lazy: set[str]) -> None:
    tree = ast.parse(source, feature_version=(3, 8))
    modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert modules - {"__future__"} - lazy <= sys.stdlib_module_names, modules
    assert not any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))
    assert 'if __name__ == "__main__":' in source or source == worker.helper_source()
    assert worker.RUNNER_PATH.name == "runner.py" and worker.RUNNER_PATH.is_file()


def test_the_shipped_runner_is_one_file_with_the_protocol_inlined() -> None:
    """``runner_source()`` puts ``protocol.py`` in place of the runner's one import of it: the text defines every name
    of the protocol, imports nothing of the package, and reads the same as the two files apart."""
    source = worker.runner_source()
    tree = ast.parse(source)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {"." * node.level + (node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.startswith((".", "airflow_provider_resilient"))}, imported
    defined = {target.id for node in tree.body if isinstance(node, ast.Assign) for target in node.targets
               if isinstance(target, ast.Name)} | {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    protocol_names = {name for name in vars(protocol) if not name.startswith("_") and name != "annotations"}
    assert protocol_names <= defined, protocol_names - defined
    protocol_text = worker.PROTOCOL_PATH.read_text(encoding="utf-8").replace("from __future__ import annotations\n", "")
    assert protocol_text in source and source.count("from __future__ import annotations") == 1


def test_threads_that_submit_at_once_parse_the_runner_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Operators submit from several threads (the maintenance benchmark's pool did) and CPython 3.11's ``ast.parse``
    fails when two threads run it at once: the first ``runner_source()`` builds the text under a lock, every later
    call, in any thread, gets that text without parsing again."""
    calls: list[str] = []
    real_parse = ast.parse
    barrier = threading.Barrier(8)

    def counting_parse(source: str, *args: object, **kwargs: object) -> ast.Module:
        calls.append(threading.current_thread().name)
        return real_parse(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(worker, "_RUNNER_SOURCE", [], raising=False)  # built afresh in this test
    monkeypatch.setattr(worker.ast, "parse", counting_parse)
    texts: list[str] = []

    def submit() -> None:
        barrier.wait()
        texts.append(worker.runner_source())

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(texts) == 8 and len(set(texts)) == 1
    assert len(calls) == 2, calls  # runner.py and protocol.py, once each, in one thread
    assert len(set(calls)) == 1


@pytest.mark.parametrize("how", ["shipped", "in the source tree"])
def test_the_runner_starts_alone_or_as_the_packages_module(tmp_path: Path, how: str) -> None:
    """Shipped: the file alone in a directory, Python without site-packages (``-I -S``: no package on the path);
    in the source tree: ``python -m airflow_provider_resilient.worker.runner``."""
    if how == "shipped":
        copy = tmp_path / "runner.py"
        copy.write_text(worker.runner_source(), encoding="utf-8")
        argv = [sys.executable, "-I", "-S", str(copy)]
    else:
        argv = [sys.executable, "-m", "airflow_provider_resilient.worker.runner"]
    result = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "--step-pattern" in result.stdout and result.stderr == ""


def _python38() -> str | None:
    """A working Python 3.8 interpreter, if this machine has one (pyenv shims may exist but not work)."""
    for candidate in (str(Path.home() / ".pyenv/versions/3.8.18/bin/python3.8"), shutil.which("python3.8")):
        if not candidate or not Path(candidate).is_file():
            continue
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                               capture_output=True, text=True, timeout=RUN_TIMEOUT)
        if probe.returncode == 0 and probe.stdout.strip() == "(3, 8)":
            return candidate
    return None


PYTHON38 = _python38()


@pytest.mark.skipif(PYTHON38 is None, reason="no python3.8 on this machine")
def test_runner_runs_under_python38_as_a_standalone_file(tmp_path: Path) -> None:
    copy = tmp_path / "runner.py"  # as the startup script does: the bare file, no package around it
    copy.write_text(worker.runner_source(), encoding="utf-8")
    counter = tmp_path / "runs"
    argv = [str(PYTHON38), str(copy), "--restart-delay", "0", "--",
            *counting(counter, "sys.exit(139 if n == 0 else 0)")]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, env=runner_env(None))
    assert result.returncode == 0, result.stderr
    assert counter.read_text() == "2"


# -- secrets ----------------------------------------------------------------------------------------------


def test_secrets_are_read_with_the_vms_token_into_the_command_and_never_printed() -> None:
    """``--secret-env``: the emulator's Secret Manager and a worker's metadata server (token) as a VM has them."""
    from airflow_provider_resilient.testing.emulator.secret_manager import SecretManagerServer, SecretStore
    from airflow_provider_resilient.testing.emulator.tpu.metadata import MetadataServer as VmMetadata

    store = SecretStore()
    store.add("projects/p/secrets/db", "s3cr3t-value-123")
    secret_manager, vm = SecretManagerServer(store), VmMetadata(0, lambda: {})
    env = {"GCE_METADATA_HOST": vm.address,
           "RESILIENT_SECRET_MANAGER_ENDPOINT": f"http://127.0.0.1:{secret_manager.port}"}
    try:
        read = run_runner(["--secret-env", "DB_PASSWORD=projects/p/secrets/db/versions/latest"],
                          script("import os; print('same:', os.environ['DB_PASSWORD'][::-1] == '321-eulav-t3rc3s')"),
                          None, **env)
        assert read.returncode == 0 and "same: True" in read.stdout
        assert "s3cr3t" not in read.stdout + read.stderr
        missing = run_runner(["--secret-env", "X=projects/p/secrets/nope/versions/latest"], script("print('ran')"),
                             None, **env)
        assert missing.returncode == runner.SECRET_EXIT_CODE == 1 and "ran" not in missing.stdout
        assert "cannot read projects/p/secrets/nope/versions/latest for X: HTTP 404" in missing.stderr
        assert vm.guest("resilient/status") == {"resilient/status": "failed"}
    finally:
        secret_manager.stop()
        vm.stop()


def test_a_failed_command_reports_its_last_stderr_line(metadata: MetadataServer) -> None:
    """The exception of a traceback reaches the operator's failure (guest attribute ``error``), and the stderr
    still reaches the worker log."""
    result = run_runner([], script("import pickle; pickle.loads(b'\\\\x00 not a pickle')"), metadata)
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert metadata.last("error").startswith("_pickle.UnpicklingError: invalid load key")
    ok = run_runner([], script("import sys; print('fine', file=sys.stderr)"))
    assert ok.returncode == 0 and "fine" in ok.stderr


# -- liveness watchdog (--hang-seconds) -----------------------------------------------------------------


def run_acting(options: list[str], command: list[str], metadata: MetadataServer, act: Callable[[], object],
               clock: Path) -> tuple[subprocess.Popen[str], str]:
    """Run the runner on an emulated VM clock (the file ``clock``), call ``act`` while it runs, wait for its end;
    the process and its stderr."""
    env = runner_env(metadata, RESILIENT_EMULATED_CLOCK=str(clock))
    proc = subprocess.Popen(runner_argv(options, command), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        act()
        _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc, stderr


def _wait_for_value(metadata: MetadataServer, key: str, value: str) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    while metadata.last(key) != value:
        assert time.monotonic() < deadline, f"{key} never became {value!r}: {metadata.values(key)}"
        time.sleep(0.01)


def test_a_command_quiet_past_hang_seconds_is_aborted_and_restarted_in_place(tmp_path: Path,
                                                                            metadata: MetadataServer) -> None:
    """The first run logs step 5 and hangs; once the (emulated) VM clock passes ``--hang-seconds`` after that line
    the runner aborts it (134, a transient crash) and restarts it in place; the second run finishes."""
    clock, counter = tmp_path / "clock", tmp_path / "runs"
    clock.write_text("1000")
    command = counting(counter, """
        print(f"step {5 + n}", flush=True)
        if n == 0:
            time.sleep(60)  # hung: no step line follows
    """)
    def hang() -> None:
        _wait_for_value(metadata, "step", "5")  # the runner has read the step line
        clock.write_text("1029")  # 29 s after the step line: still within the allowance
        clock.write_text("1031")

    proc, stderr = run_acting(["--hang-seconds", "30"], command, metadata, hang, clock)
    assert proc.returncode == 0, stderr
    assert counter.read_text() == "2"
    assert metadata.statuses() == ["running", "restarting", "running", "succeeded"]
    assert metadata.values("exit_code") == ["134", "0"]
    assert metadata.values("failure_class") == ["transient_crash"]
    assert metadata.values("hang") == ["no step line for 31.0 s after step 5 (restarts so far: 0)"]
    assert "hang: no step line for 31.0 s after step 5" in stderr and "SIGABRT" in stderr


def test_a_hung_command_that_ignores_sigabrt_is_killed_and_counts_as_aborted(tmp_path: Path,
                                                                             metadata: MetadataServer) -> None:
    """``--max-restarts 0`` (a Vertex AI replica's runner): the abort ends the runner with 134, which Vertex AI
    retries as a crash; a command that ignores SIGABRT is SIGKILLed and still counts as aborted. Before its first
    step line the allowance is ``--start-seconds``."""
    clock, ready, pid_file = tmp_path / "clock", tmp_path / "ready", tmp_path / "pid"
    clock.write_text("1000")
    command = script(f"""
        import os, signal, time
        from pathlib import Path
        signal.signal(signal.SIGABRT, signal.SIG_IGN)
        Path({str(pid_file)!r}).write_text(str(os.getpid()))
        Path({str(ready)!r}).write_text("1")
        time.sleep(60)
    """)
    options = ["--max-restarts", "0", "--hang-seconds", "2", "--start-seconds", "50", "--grace-seconds", "0.1"]
    proc, stderr = run_acting(options, command, metadata, lambda: (wait_for(ready), clock.write_text("1050")), clock)
    assert proc.returncode == runner.HANG_EXIT_CODE == 134, stderr
    assert metadata.statuses() == ["running", "failed"]
    assert metadata.last("failure_class") == "transient_crash"
    assert metadata.values("hang") == ["no step line for 50.0 s after its start (restarts so far: 0)"]
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


@pytest.mark.parametrize(("options", "stepped", "quiet", "due"), [
    ([], True, 10_000.0, None),  # no --hang-seconds: no watchdog
    (["--hang-seconds", "30"], True, 29.9, None),
    (["--hang-seconds", "30"], True, 30.0, 30.0),
    (["--hang-seconds", "30"], False, 10_000.0, None),  # no --start-seconds: no watch before the first step
    (["--hang-seconds", "30", "--start-seconds", "120"], False, 119.0, None),
    (["--hang-seconds", "30", "--start-seconds", "120"], False, 120.0, 120.0),
])
def test_the_watchdogs_allowance(tmp_path: Path, options: list[str], stepped: bool, quiet: float,
                                 due: float | None) -> None:
    clock = tmp_path / "clock"
    clock.write_text(str(5000.0 + quiet))
    parsed, command = runner.parse_command_line([*options, "--", "true"])
    run = runner.Runner(command, parsed, runner.GuestAttributes(None), {"RESILIENT_EMULATED_CLOCK": str(clock)})
    run._progress_at, run._stepped = 5000.0, stepped
    assert run._quiet_too_long() == due
