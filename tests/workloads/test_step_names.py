"""The digits workload reads its step directories' names as the provider does: each name the provider's table
of adversarial names holds is the same step (or no step) for both, within the one naming the workload writes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import fsspec
import pytest

from airflow_provider_resilient.checkpoints import parse_step
from tests.checkpoints.test_step_names import STEP_NAMES

SCRIPT = Path(__file__).resolve().parents[2] / "dags" / "workloads" / "train_digits.py"


@pytest.fixture(scope="module")
def workload() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_digits_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


NAMES = [*STEP_NAMES, "step_0100", "step_" + "9" * 15, "step_" + "9" * 16, "step_\u00b2", "step_12\n", "Step_12"]


@pytest.mark.parametrize("name", NAMES, ids=[repr(n[:24]) for n in NAMES])
def test_each_name_is_the_providers_step(workload: ModuleType, name: str):
    assert workload.step_of(name, workload.ANY_STEP_DIR_RE) == parse_step(name)
    own = workload.step_of(name, workload.STEP_DIR_RE)
    assert own is None or (name.startswith("step_") and own == parse_step(name))


def test_look_alike_folders_and_demoted_junk_are_not_resumed(workload: ModuleType, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    for name in ("step_3", "step_12\n", "step_\uff11\uff12", "step_12 ", "step_+12", "STEP_12",
                 "step_0000000000000012"):
        (tmp_path / name).mkdir()
        (tmp_path / name / workload.MARKER).write_text("")
    monkeypatch.setenv("RESILIENT_DEMOTED_STEPS", "\u00b2, 5,\uff17")  # isdigit() was true for the superscript 2
    found = workload.latest_committed(fsspec.filesystem("file"), str(tmp_path))
    assert found == (3, f"{tmp_path}/step_3")


@pytest.mark.parametrize(("uri", "step_env", "step"), [
    ("/ckpt/step_12", "", 12), ("/ckpt/checkpoint-30/", "", 30), ("/ckpt/12", "", 12), ("/ckpt/x", "7", 7),
    ("/ckpt/step_12\n", "", None), ("/ckpt/step_\uff11\uff12", "", None), ("/ckpt/run2", "", None),
    ("/ckpt/step_12", "+12", None), ("/ckpt/step_12", "1_2", None), ("/ckpt/step_12", "\uff11\uff12", None),
])
def test_the_handed_checkpoints_step_is_read_strictly(workload: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                     uri: str, step_env: str, step: int | None):
    monkeypatch.setenv("RESILIENT_RESUME_STEP", step_env)
    if step is None:
        with pytest.raises(SystemExit, match="cannot tell the step"):
            workload._explicit_point(uri)
    else:
        assert workload._explicit_point(uri)[0] == step
