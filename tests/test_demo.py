"""The README's first command: the offline demos train a real model through the injected faults, on
Vertex AI, on a 2-worker TPU slice and on ModelArts.

It must finish, show every attempt with the step it resumed from, never restart from step 0 once a
complete checkpoint exists -- by the workload's own word, its ``resuming from step N`` line in the replica
logs, for new attempts and for the platform's restarts alike -- and end with the accuracy of an
uninterrupted run of the same workload.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The platform's latencies of the examples run with ``--dag`` (``RESILIENT_DEMO_TIME_SCALE``; the demo's own is
#: 0.01): their stories depend on no latency -- what fails and when is their fault plans' count of runs and steps,
#: and every wait of the operators and workloads is theirs, in real time -- so their platform waits (provisioning,
#: restarts, the error delay, a TPU node's create and delete) pass 5 times sooner. The offline demo's test runs it
#: exactly as ``make demo`` does.
EXAMPLE_TIME_SCALE = "0.002"
#: The examples' workloads sleep this long per epoch (``RESILIENT_DEMO_EPOCH_SECONDS``; the demo's pace is 0.1 s):
#: their faults strike at steps, not times, and the held-out accuracy does not depend on it.
EXAMPLE_EPOCH_SECONDS = "0.02"
#: The tuning example's best learning rate in every run so far (the grid's largest; training is deterministic): its
#: uninterrupted run starts with the study, and another runs after it only if the study picks another point.
LIKELY_BEST = "0.01"


@pytest.fixture(scope="module")
def airflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Airflow SQLite database after ``airflow db migrate``, made once for the examples' runs: each copies it
    into its fresh demo directory, where ``run_demo.py`` then finds Airflow set up. (The offline demo's test sets
    Airflow up itself, as a new user's first ``make demo`` does.)"""
    home = tmp_path_factory.mktemp("airflow_home")
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
                   env={**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"},
                   capture_output=True, text=True, timeout=300, check=True)
    return home / "airflow.db"


def run_example(tmp_path: Path, dag_id: str, airflow_db: Path) -> str:
    """``run_demo.py --dag dag_id`` in a fresh demo directory (Airflow's database copied from ``airflow_db``; the
    platform's latencies at :data:`EXAMPLE_TIME_SCALE`, epochs of :data:`EXAMPLE_EPOCH_SECONDS`); its stdout (the run
    must exit 0)."""
    (tmp_path / "demo" / "airflow_home").mkdir(parents=True)
    shutil.copy(airflow_db, tmp_path / "demo" / "airflow_home" / "airflow.db")
    env = {**os.environ, "RESILIENT_DEMO_DIR": str(tmp_path / "demo"), "RESILIENT_DEMO_TIME_SCALE": EXAMPLE_TIME_SCALE,
           "RESILIENT_DEMO_EPOCH_SECONDS": EXAMPLE_EPOCH_SECONDS}
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_demo.py"), "--dag", dag_id],
                         capture_output=True, text=True, env=env, timeout=600, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Setting up Airflow" not in out.stdout  # it found the copied database
    return out.stdout


class Uninterrupted:
    """The demo workload trained ``epochs`` epochs without a failure, in a process of its own started at once, so
    that it trains while the test's demo runs; :meth:`accuracy` waits for its held-out accuracy."""

    def __init__(self, directory: Path, epochs: int, learning_rate: str | None = None) -> None:
        lr = ["--learning-rate", learning_rate] if learning_rate is not None else []
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "dags" / "workloads" / "train_digits.py"), "--epochs",
                                      str(epochs), "--checkpoint-every", "3", *lr, "--checkpoint-dir", str(directory)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def accuracy(self) -> float:
        """The run's ``final test accuracy`` (it must exit 0)."""
        stdout, stderr = self.proc.communicate(timeout=300)
        assert self.proc.returncode == 0, stdout[-2000:] + stderr[-2000:]
        return float(re.search(r"final test accuracy: ([0-9.]+)", stdout).group(1))


@pytest.fixture
def uninterrupted(tmp_path: Path) -> Iterator[Callable[..., Uninterrupted]]:
    """Start an :class:`Uninterrupted` run (``epochs``, optional ``learning_rate``); one still running when the
    test ends (it failed first) is killed."""
    runs: list[Uninterrupted] = []

    def start(epochs: int, learning_rate: str | None = None) -> Uninterrupted:
        runs.append(Uninterrupted(tmp_path / f"baseline-{len(runs)}", epochs, learning_rate))
        return runs[-1]

    yield start
    for run in runs:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.communicate()


def test_offline_demo_matches_an_uninterrupted_run(tmp_path: Path, uninterrupted: Callable[..., Uninterrupted]):
    baseline_run = uninterrupted(30)
    env = {**os.environ, "RESILIENT_DEMO_DIR": str(tmp_path / "demo")}
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_demo.py")], capture_output=True, text=True,
                         env=env, timeout=600, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    vertex, rest = out.stdout.split("##### example_tpu_resilient_training")
    tpu, modelarts = rest.split("##### example_modelarts_resilient_training")
    rows = [line.split() for line in vertex.splitlines() if re.match(r"^\d+\s+\d{10,}", line)]
    assert [r[0] for r in rows] == ["1", "2", "3", "4"]
    assert [r[2] for r in rows] == ["-", "-", "1", "1"]  # attempts 3 and 4 on fallback 1 (europe-west4)
    assert rows[0][3] == "-"  # the first attempt starts from scratch ...
    assert all(r[3] == "step" and int(r[4]) >= 9 for r in rows[1:])  # ... no later one does
    happened = [" ".join(r[5:-1]) if r[3] == "step" else " ".join(r[4:-1]) for r in rows]
    assert happened[0].startswith("transient_crash exit 139") and happened[1] == "capacity_stockout"
    assert happened[2] == "internal_error" and happened[3] == "succeeded"
    assert [r[-1] for r in rows] == ["resubmit", "resubmit", "resubmit", "-"]
    # The workload's own word (replica logs, one line per run of a replica, in order): the first run starts
    # from scratch; every later one -- a new attempt or a platform restart -- from the newest checkpoint saved.
    runs = re.findall(r"^  workload: \S+/(\d+) (\S+) platform attempt (\d+)(?: restart (\d+))?: "
                      r"resuming from step (\d+|\?); saved up to step (\d+|-)$", vertex, re.MULTILINE)
    assert runs and len(runs) == vertex.count("  workload: "), vertex[-3000:]
    assert list(dict.fromkeys(r[0] for r in runs)) == [rows[0][1], rows[2][1], rows[3][1]]  # 2 never ran
    assert sum(1 for r in runs if r[2] != "1") >= 3  # the platform's own restarts of exit 139 and internal errors
    # Only a run the internal-error fault (after 1 s) stopped before it said anything may be silent, and then
    # it saved nothing.
    assert all(r[0] == rows[2][1] and r[5] == "-" for r in runs if r[4] == "?"), runs
    newest_saved: int | None = None
    for job, replica, platform_attempt, _, resumed, saved in runs:
        if resumed == "?":
            continue
        if newest_saved is None:
            assert int(resumed) == 0, runs  # nothing saved yet
        else:
            assert int(resumed) > 0 and int(resumed) >= newest_saved, (job, replica, platform_attempt, runs)
        if saved != "-":
            newest_saved = max(newest_saved or 0, int(saved))
    later_attempts = [r for r in runs if r[0] != rows[0][1] and r[2] == "1" and not r[3]]  # first runs
    assert len(later_attempts) == 2 and all(r[4] == "?" or int(r[4]) > 0 for r in later_attempts)
    assert later_attempts[-1][4] != "?"  # the attempt that succeeded said where it resumed
    accuracy = float(re.search(r"FINAL HELD-OUT ACCURACY: ([0-9.]+)", vertex).group(1))
    tpu_rows = [line for line in tpu.splitlines() if re.match(r"^\d+\s+example-tpu", line)]
    assert "maintenance_event node REPAIRING" in tpu_rows[0] and tpu_rows[0].endswith("wait")
    assert "node TERMINATED (Maintenance event without automatic recovery)" in tpu_rows[1]
    assert tpu_rows[1].endswith("recreate_node") and "step " in tpu_rows[2] and "succeeded" in tpu_rows[2]
    assert tpu.count("DeleteNode") == 2  # both nodes it created are gone
    # The announced window: the operator asked for a checkpoint before it, the workload saved one on request, and
    # after the repair it resumed from that checkpoint -- newer than its periodic one (every 12 steps).
    assert "asking the workload for a checkpoint (scheduled maintenance at" in tpu
    boots = re.findall(r"^  workload: node \S+-a(\d) worker 0 boot (\d+): resuming from step (\d+); saved up to "
                       r"step (\d+|-)(?:; saved step (\d+) on request \(scheduled maintenance at \S+\))?"
                       r"(?:; saved step (\d+) on the SIGTERM's notice)?$", tpu, re.MULTILINE)
    assert [(b[0], b[1]) for b in boots] == [("1", "1"), ("1", "2"), ("2", "1")], tpu[-3000:]
    asked = int(boots[0][4])
    # The save asked for is of a step from the window's announcement (step 13) on -- the step in progress when the
    # request came, on a loaded machine the announcing step itself -- newer than the periodic one (every 12 steps).
    # After the repair it resumed from the newest save: the one asked for, or one on the window's SIGTERM after it.
    assert asked >= 13 and int(boots[1][2]) == int(boots[0][3]) >= asked and asked % 12 != 0
    assert not boots[1][4], "the node's request, saved before the reboot, was passed on again"
    assert int(boots[2][2]) == int(boots[1][3])  # the new node resumed from the newest save of the old one
    tpu_accuracy = float(re.search(r"TPU FINAL HELD-OUT ACCURACY: ([0-9.]+)", tpu).group(1))
    # The run summary: the goodput ledger (from step reports) and the checkpoint-interval advice.
    assert re.search(r"=== GOODPUT: goodput [0-9.]+% of \d+ s; .*\[from steps\] ===", vertex), vertex[-2000:]
    assert re.search(r"=== TPU GOODPUT: goodput [0-9.]+% of \d+ s; .*\[from steps\] ===", tpu), tpu[-2000:]
    assert re.search(r"=== TPU BADPUT \(ml-goodput-measurement types, % of the run\): WASTED_PROGRESS_FROM_DISRUPTION "
                     r"[0-9.]+, INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION [0-9.]+, ", tpu), tpu[-2000:]
    assert "=== CHECKPOINTING: checkpoints every" in vertex and "Cloud TPU: about every 3600 s" in vertex

    # ModelArts: the platform re-issued the first job once after a hardware fault (its own fault tolerance) and
    # gave up at the second; the operator's new job resumed from the checkpoint in OBS, queued on a sold-out flavor
    # past the queue timeout, and the next ran on the fallback flavor, resumed again.
    ma_rows = [line.split() for line in modelarts.splitlines() if re.match(r"^\d+\s+[0-9a-f]{8}-", line)]
    assert [(r[0], r[-1]) for r in ma_rows] == [("1", "resubmit"), ("2", "resubmit"), ("3", "-")], modelarts[-3000:]
    assert "node_unhealthy" in ma_rows[0] and "queue_timeout" in " ".join(ma_rows[1])
    assert "(after 1 platform re-issue)" in " ".join(ma_rows[0])  # the platform's own, in the history
    # A fault "at step N" strikes once step N's checkpoint directory holds an object: step N - 3's save is complete
    # by then, step N's may be cut short (on a loaded machine it was), so a resume is from N - 3 at least.
    assert ma_rows[2][2] == "1" and all(r[3] == "step" and int(r[4]) >= 9 for r in ma_rows[1:])
    assert re.search(r"ModelArts digits-mlp-\w+-a1 \(\S+\): Failed, re-issued 1 time\(s\) by its own fault "
                     r"tolerance", modelarts), modelarts[-3000:]
    issues = re.findall(r"^  workload: job \S+-a(\d) issue (\d): resuming from step (\d+); saved up to step (\d+)$",
                        modelarts, re.MULTILINE)
    assert [(i[0], i[1]) for i in issues] == [("1", "1"), ("1", "2"), ("3", "1")], modelarts[-3000:]
    assert int(issues[0][2]) == 0 and int(issues[1][2]) >= 3 and int(issues[2][2]) >= 9
    assert int(issues[1][2]) >= int(issues[0][3]) and int(issues[2][2]) >= int(issues[1][3])  # from the newest save
    ma_accuracy = float(re.search(r"MODELARTS FINAL HELD-OUT ACCURACY: ([0-9.]+) \(checkpoint obs://", modelarts)[1])

    baseline = baseline_run.accuracy()
    assert abs(accuracy - baseline) <= 0.01
    assert abs(tpu_accuracy - baseline) <= 0.01
    assert abs(ma_accuracy - baseline) <= 0.01


def test_the_fault_tolerance_checks_example_isolates_both_faulty_nodes(tmp_path: Path, airflow_db: Path,
                                                                        uninterrupted: Callable[..., Uninterrupted]):
    """``run_demo.py --dag example_tpu_fault_tolerance_checks`` (seed 004): the node that boots with a chip
    missing never runs the job (its pre-check fails), the node that loses one while training is stopped by the
    periodic check; each is isolated -- deleted, a new one created -- and the third trains to the end from the
    latest checkpoint, to the accuracy of an uninterrupted run."""
    baseline_run = uninterrupted(24)
    stdout = run_example(tmp_path, "example_tpu_fault_tolerance_checks", airflow_db)
    rows = [line.split() for line in stdout.splitlines() if re.match(r"^\d+\s+example-tpu", line)]
    assert [(r[0], r[-1]) for r in rows] == [("1", "recreate_node"), ("2", "recreate_node"), ("3", "-")]
    assert "preflight_failure exit 78" in " ".join(rows[0]) and "node_unhealthy" in rows[1]
    assert rows[2][3] == "step" and int(rows[2][4]) >= 12 and "succeeded" in rows[2]  # resumed past the fault
    assert stdout.count("CreateNode") == stdout.count("DeleteNode") == 3
    log = (tmp_path / "demo" / "example_tpu_fault_tolerance_checks.log").read_text(errors="replace")
    assert "preflight failed: item tpu-check: 3 of 4 TPU chips visible" in log, log[-3000:]
    accuracy = float(re.search(r"TPU FINAL HELD-OUT ACCURACY: ([0-9.]+)", stdout).group(1))
    assert abs(accuracy - baseline_run.accuracy()) <= 0.01


def test_the_legacy_ai_platform_example_trains_through_its_faults(tmp_path: Path, airflow_db: Path,
                                                                   uninterrupted: Callable[..., Uninterrupted]):
    """``run_demo.py --dag example_ai_platform_legacy_training``: the Google provider's own example call of the
    removed ``MLEngineStartTrainingJobOperator``, import line changed, runs its package on (emulated) Vertex AI
    through a crash and internal errors, each new attempt resuming from the latest checkpoint under ``jobDir``."""
    baseline_run = uninterrupted(30)
    stdout = run_example(tmp_path, "example_ai_platform_legacy_training", airflow_db)
    rows = [line.split() for line in stdout.splitlines() if re.match(r"^\d+\s+\d{10,}", line)]
    assert [(r[0], r[-1]) for r in rows] == [("1", "resubmit"), ("2", "resubmit"), ("3", "-")]
    assert "transient_crash exit 139" in " ".join(rows[0]) and "internal_error" in rows[1]
    assert all(r[3] == "step" and int(r[4]) >= 9 for r in rows[1:])  # never from scratch again
    accuracy = float(re.search(r"FINAL HELD-OUT ACCURACY: ([0-9.]+)", stdout).group(1))
    assert abs(accuracy - baseline_run.accuracy()) <= 0.01


def test_the_tuning_example_finishes_its_study_without_running_a_finished_trial_again(
        tmp_path: Path, airflow_db: Path, uninterrupted: Callable[..., Uninterrupted]):
    """``run_demo.py --dag example_vertex_ai_hyperparameter_tuning``: a 5-point learning-rate grid through a trial
    that crashes past step 9 and one that meets internal errors. Attempt 2 runs only the two failed points and the
    one never reached; the crashed point resumes from its own checkpoint; the best trial's accuracy is that of an
    uninterrupted run at its learning rate."""
    likely = uninterrupted(18, LIKELY_BEST)  # trains while the study runs
    stdout = run_example(tmp_path, "example_vertex_ai_hyperparameter_tuning", airflow_db)
    trials = [line.split() for line in stdout.splitlines() if re.match(r"^\d+\s+\d+\s+learning_rate=", line)]
    first = sorted(t[2] for t in trials if t[0] == "1" and t[3] == "SUCCEEDED")
    second = sorted(t[2] for t in trials if t[0] == "2")
    assert not set(first) & set(second) and len(first) + len(second) == 5  # every point once, none again
    assert all(t[3] == "SUCCEEDED" for t in trials if t[0] == "2")
    assert "0 re-run" in stdout
    resumes = re.findall(r"workload: \S+ trial \d+ workerpool0-0 platform attempt \d+: resuming from step (\d+)",
                         stdout)
    assert any(int(step) >= 9 for step in resumes)  # the crashed point went on from its checkpoint
    best = re.search(r"BEST TRIAL: \{'learning_rate': ([0-9.e-]+)\} accuracy ([0-9.]+)", stdout)
    baseline_run = likely if best[1] == LIKELY_BEST else uninterrupted(18, best[1])
    assert abs(float(best[2]) - baseline_run.accuracy()) <= 1e-4
