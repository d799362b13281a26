"""The digits training workload, run as a subprocess the way a Vertex AI replica runs it.

It checkpoints to ``step_N/{model.pkl,state.json,COMMITTED}`` and a resumed run must end exactly like an
uninterrupted one: same printed accuracy, same weights.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from airflow_provider_resilient.testing.storage import StorageEmulator

SCRIPT = Path(__file__).resolve().parents[2] / "dags" / "workloads" / "train_digits.py"
OUR_VARS = ("AIP_CHECKPOINT_DIR", "AIP_MODEL_DIR", "RESILIENT_RESUME_FROM", "RESILIENT_RESUME_STEP",
            "RESILIENT_ATTEMPT", "RESILIENT_FAILURE_CLASS", "STORAGE_EMULATOR_HOST",
            "RESILIENT_CHECKPOINT_INTERVAL_SECONDS", "RESILIENT_CHECKPOINT_DIR", "CLOUD_ML_HP_METRIC_FILE")
ACCURACY_RE = re.compile(r"^final test accuracy: (0\.\d{4})$", re.MULTILINE)


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def accuracy(self) -> str:
        found = ACCURACY_RE.findall(self.stdout)
        assert len(found) == 1, self.stdout + self.stderr
        return found[0]


def train(*args: str, env: dict[str, str] | None = None, check: bool = True) -> Run:
    base = {k: v for k, v in os.environ.items() if k not in OUR_VARS}
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120)
    run = Run(proc.returncode, proc.stdout, proc.stderr)
    if check:
        assert run.returncode == 0, run.stdout + run.stderr
    return run


def weights(data: bytes) -> list[np.ndarray]:
    model = pickle.loads(data)
    return [*model.coefs_, *model.intercepts_]


def assert_same_weights(a: bytes, b: bytes) -> None:
    wa, wb = weights(a), weights(b)
    assert len(wa) == len(wb) and all(np.array_equal(x, y) for x, y in zip(wa, wb, strict=True))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    """An uninterrupted 12-epoch run (checkpoints at 3, 6, 9, 12), shared by the module."""
    ckpt = tmp_path_factory.mktemp("reference") / "checkpoints"
    return ckpt, train("--epochs", "12", "--checkpoint-dir", str(ckpt))


def test_uninterrupted_run_learns_and_writes_complete_checkpoints(reference: tuple[Path, Run], tmp_path: Path):
    ckpt, run = reference
    assert "resuming from step 0" in run.stdout
    assert [int(m) for m in re.findall(r"^step (\d+) loss \d+\.\d+$", run.stdout, re.MULTILINE)] == list(range(1, 13))
    assert float(run.accuracy) > 0.9
    assert sorted(p.name for p in ckpt.iterdir()) == ["step_12", "step_3", "step_6", "step_9"]
    for step in (3, 6, 9, 12):
        assert sorted(p.name for p in (ckpt / f"step_{step}").iterdir()) == ["COMMITTED", "model.pkl", "state.json"]
        assert (ckpt / f"step_{step}" / "COMMITTED").read_bytes() == b""
        assert f'"step": {step}' in (ckpt / f"step_{step}" / "state.json").read_text()


def test_a_handed_checkpoint_interval_replaces_the_epoch_rule(reference: tuple[Path, Run], tmp_path: Path):
    """``RESILIENT_CHECKPOINT_INTERVAL_SECONDS``: a save is due that long after the last one instead of every
    ``--checkpoint-every`` epochs (an interval longer than the run: only the final epoch is saved); the model
    is the same."""
    ckpt = tmp_path / "checkpoints"
    run = train("--epochs", "12", "--checkpoint-dir", str(ckpt),
                env={"RESILIENT_CHECKPOINT_INTERVAL_SECONDS": "100000.000"})
    assert "checkpoint interval: 100000 s (RESILIENT_CHECKPOINT_INTERVAL_SECONDS)" in run.stdout
    assert sorted(p.name for p in ckpt.iterdir()) == ["step_12"]
    assert run.accuracy == reference[1].accuracy


def test_model_dir_gets_model_and_metrics_from_env(tmp_path: Path):
    run = train("--epochs", "2", env={"AIP_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
                                      "AIP_MODEL_DIR": str(tmp_path / "model")})
    assert (tmp_path / "ckpt" / "step_2" / "COMMITTED").exists()  # the last epoch is always saved
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert f"{metrics['test_accuracy']:.4f}" == run.accuracy
    assert (tmp_path / "model" / "model.pkl").exists()


def test_automatic_resume_from_latest_checkpoint_is_bit_for_bit(reference: tuple[Path, Run], tmp_path: Path):
    first = train("--epochs", "6", "--checkpoint-dir", str(tmp_path))
    assert "resuming from step 0" in first.stdout
    second = train("--epochs", "12", "--checkpoint-dir", str(tmp_path))
    assert "resuming from step 6" in second.stdout
    assert re.search(r"^step 7 loss", second.stdout, re.MULTILINE)
    assert not re.search(r"^step [1-6] loss", second.stdout, re.MULTILINE)
    assert second.accuracy == reference[1].accuracy
    assert_same_weights((tmp_path / "step_12" / "model.pkl").read_bytes(),
                        (reference[0] / "step_12" / "model.pkl").read_bytes())


def test_resume_from_env_when_the_checkpoint_dir_has_nothing_newer(reference: tuple[Path, Run], tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    run = train("--epochs", "12", "--checkpoint-dir", str(ckpt),
                env={"RESILIENT_RESUME_FROM": str(reference[0] / "step_3"), "RESILIENT_RESUME_STEP": "3",
                     "RESILIENT_ATTEMPT": "2", "RESILIENT_FAILURE_CLASS": "transient-crash"})
    assert "resuming from step 3" in run.stdout
    assert "RESILIENT_ATTEMPT=2" in run.stdout and "RESILIENT_FAILURE_CLASS=transient-crash" in run.stdout
    assert re.search(r"^step 4 loss", run.stdout, re.MULTILINE)
    assert run.accuracy == reference[1].accuracy


def test_a_newer_checkpoint_than_the_env_one_wins(reference: tuple[Path, Run], tmp_path: Path):
    """A platform restart within an attempt keeps the attempt's RESILIENT_RESUME_FROM; progress since counts."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference[0] / "step_6", ckpt / "step_6")
    run = train("--epochs", "12", "--checkpoint-dir", str(ckpt),
                env={"RESILIENT_RESUME_FROM": str(reference[0] / "step_3"), "RESILIENT_RESUME_STEP": "3"})
    assert "resuming from step 6" in run.stdout
    assert run.accuracy == reference[1].accuracy


def test_torn_checkpoint_is_ignored(reference: tuple[Path, Run], tmp_path: Path):
    for step in (3, 6):
        shutil.copytree(reference[0] / f"step_{step}", tmp_path / f"step_{step}")
    (tmp_path / "step_9").mkdir()
    (tmp_path / "step_9" / "model.pkl").write_bytes(b"garbage, not a pickle")  # no COMMITTED: torn
    run = train("--epochs", "12", "--checkpoint-dir", str(tmp_path))
    assert "skipping torn checkpoint" in run.stdout
    assert "resuming from step 6" in run.stdout
    assert run.accuracy == reference[1].accuracy
    assert (tmp_path / "step_9" / "COMMITTED").exists()  # rewritten whole when training got there again


@pytest.fixture(scope="module")
def emulator() -> Iterator[StorageEmulator]:
    with StorageEmulator() as emu:
        emu.create_bucket("train")
        yield emu


@pytest.mark.gcs
def test_checkpoints_and_resume_on_gcs(emulator: StorageEmulator, reference: tuple[Path, Run]):
    prefix = "gs://train/run/checkpoints"
    first = train("--epochs", "6", "--checkpoint-dir", prefix, env=emulator.env())
    assert "resuming from step 0" in first.stdout
    fs = emulator.filesystem()
    for step in (3, 6):
        assert fs.exists(f"train/run/checkpoints/step_{step}/COMMITTED")
        assert fs.exists(f"train/run/checkpoints/step_{step}/model.pkl")
    fs.pipe_file("train/run/checkpoints/step_9/model.pkl", b"torn")  # no marker
    second = train("--epochs", "12", "--checkpoint-dir", prefix, "--model-dir", "gs://train/run/model",
                   env=emulator.env())
    assert "resuming from step 6" in second.stdout
    assert second.accuracy == reference[1].accuracy
    fs.invalidate_cache()
    assert fs.exists("train/run/checkpoints/step_12/COMMITTED")
    assert fs.exists("train/run/model/metrics.json")
    assert_same_weights(fs.cat_file("train/run/checkpoints/step_12/model.pkl"),
                        (reference[0] / "step_12" / "model.pkl").read_bytes())


def test_missing_checkpoint_dir_exits_2():
    run = train("--epochs", "1", check=False)
    assert run.returncode == 2
    assert "--checkpoint-dir" in run.stderr and "AIP_CHECKPOINT_DIR" in run.stderr
