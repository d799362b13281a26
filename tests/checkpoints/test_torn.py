"""Torn saves are never chosen (issue 13 item 2): the adversarial cases found beside a real complete DCP save,
and random trees of complete and torn saves in every format, on local disk and on gs://."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.checkpoints import CheckpointFormat, find_latest_checkpoint, scan_checkpoints
from airflow_provider_resilient.testing.storage import StorageEmulator


def write(root: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


#: Each torn save the first adversarial read found chosen over a real complete DCP save at step_100.
TORN_BESIDE_STEP_100 = {
    "tf-shard-missing": {"step_300/checkpoint": 'model_checkpoint_path: "ckpt-300"\n',
                         "step_300/ckpt-300.index": "i", "step_300/ckpt-300.data-00000-of-00002": "d"},
    "tf-no-state-file": {"step_400/ckpt-400.index": "i", "step_400/ckpt-400.data-00000-of-00001": "d"},
    "safetensors-tmp": {"checkpoint-2000/model.safetensors.tmp": "half", "checkpoint-2000/config.json": "{}"},
    "dcp-metadata-tmp": {"step_2100/.metadata.tmp": "half"},
    "orbax-item-only": {"510/default/array": "a"},
    "junk-26-digits": {f"step_{'9' * 26}/x": "x"},
    "date-folder": {"20260101/report.txt": "x"},
    "zero-padded-twin": {"step_200/__0_0.distcp": "d", "step_0200/__0_0.distcp": "d"},
    "safetensors-shard-missing": {"checkpoint-900/model-00001-of-00002.safetensors": "s",
                                  "checkpoint-900/model.safetensors.index.json": "{}"},
    "plain-with-tmp": {"ckpt_700/model.pt": "m", "ckpt_700/optimizer.pt.partial": "o"},
}


@pytest.mark.parametrize("case", sorted(TORN_BESIDE_STEP_100))
def test_each_torn_save_loses_to_the_complete_dcp_save(tmp_path: Path, checkpoint_fixtures: Path, case: str):
    shutil.copytree(checkpoint_fixtures / "dcp" / "step_100", tmp_path / "step_100")
    write(tmp_path, TORN_BESIDE_STEP_100[case])
    scan = scan_checkpoints(str(tmp_path))
    assert scan.latest is not None and (scan.latest.step, scan.latest.format) == (100, CheckpointFormat.PYTORCH_DCP)
    assert scan.torn or case == "junk-26-digits"  # junk is not a step at all; the rest are reported torn
    assert all(t.why for t in scan.torn)


def test_a_hundred_and_fifty_torn_saves_newer_than_the_good_one_do_not_hide_it(tmp_path: Path,
                                                                               checkpoint_fixtures: Path):
    """A cap on the candidates looked at turned this into "no checkpoint": a silent fresh start from step 0."""
    shutil.copytree(checkpoint_fixtures / "dcp" / "step_100", tmp_path / "step_100")
    write(tmp_path, {f"step_{1000 + n}/__0_0.distcp": "d" for n in range(150)})
    scan = scan_checkpoints(str(tmp_path))
    assert scan.latest is not None and scan.latest.step == 100
    assert len(scan.torn) == 150 and scan.torn[0].step == 1149


def test_only_torn_saves_are_reported_so_the_caller_can_say_so(tmp_path: Path):
    write(tmp_path, {"step_5/__0_0.distcp": "d", "step_9/.metadata.tmp": "m"})
    scan = scan_checkpoints(str(tmp_path))
    assert scan.latest is None and [t.step for t in scan.torn] == [9, 5]


def test_two_names_of_one_step_are_judged_in_a_fixed_order(tmp_path: Path, checkpoint_fixtures: Path):
    shutil.copytree(checkpoint_fixtures / "dcp" / "step_100", tmp_path / "step_0100")
    shutil.copytree(checkpoint_fixtures / "dcp" / "step_100", tmp_path / "step_100")
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and found.uri.endswith("/step_100")  # the name without leading zeros first


def test_a_bare_number_counts_with_a_proof_or_the_users_marker(tmp_path: Path, checkpoint_fixtures: Path):
    write(tmp_path, {"20260101/report.txt": "x"})
    assert find_latest_checkpoint(str(tmp_path)) is None
    shutil.copytree(checkpoint_fixtures / "orbax" / "20", tmp_path / "20")
    assert find_latest_checkpoint(str(tmp_path)).step == 20  # Orbax's default naming, proven by its commit
    write(tmp_path, {"40/state.bin": "s", "40/DONE": ""})
    assert find_latest_checkpoint(str(tmp_path), marker="DONE").step == 40


# ------------------------------------------------------------------ random trees
#: (format, complete?) -> the files of one save at step N, relative to its step directory.
def save_files(fmt: str, variant: int, step: int) -> tuple[dict[str, str], bool]:
    """The files of one save and whether it is complete. ``variant`` 0 is the complete save; the others are
    torn ways of that format."""
    committed = json.dumps({"commit_timestamp_nsecs": 1})
    uncommitted = json.dumps({"init_timestamp_nsecs": 1})
    layouts: dict[str, list[dict[str, str]]] = {
        "dcp": [{".metadata": "m", "__0_0.distcp": "d"}, {"__0_0.distcp": "d"},
                {"__0_0.distcp": "d", ".metadata.tmp": "m"}],
        "orbax": [{"_CHECKPOINT_METADATA": committed, "commit_success.txt": "", "default/array": "a"},
                  {"default/array": "a"}, {"_CHECKPOINT_METADATA": uncommitted, "default/array": "a"}],
        "tensorflow": [{"checkpoint": f'model_checkpoint_path: "ckpt-{step}"\n', f"ckpt-{step}.index": "i",
                        f"ckpt-{step}.data-00000-of-00002": "d", f"ckpt-{step}.data-00001-of-00002": "d"},
                       {"checkpoint": f'model_checkpoint_path: "ckpt-{step}"\n', f"ckpt-{step}.index": "i",
                        f"ckpt-{step}.data-00000-of-00002": "d"},
                       {f"ckpt-{step}.index": "i", f"ckpt-{step}.data-00000-of-00001": "d"}],
        "safetensors": [{"model-00001-of-00002.safetensors": "s", "model-00002-of-00002.safetensors": "s",
                         "model.safetensors.index.json": "{}"},
                        {"model-00001-of-00002.safetensors": "s", "model.safetensors.index.json": "{}"},
                        {"model.safetensors.tmp": "s", "config.json": "{}"}],
        "plain": [{"model.pt": "m"}, {"model.pt": "m", "optim.pt.tmp": "o"}, {"sub/model.pt": "m"}],
    }
    options = layouts[fmt]
    return options[variant % len(options)], variant % len(options) == 0


NAMES = {"step": "step_{}", "checkpoint": "checkpoint-{}", "ckpt": "ckpt_{}", "bare": "{}", "padded": "step_{:06d}"}
saves = st.lists(st.tuples(st.integers(0, 99_999), st.sampled_from(["dcp", "orbax", "tensorflow", "safetensors",
                                                                       "plain"]),
                           st.integers(0, 2), st.sampled_from(sorted(NAMES))),
                 max_size=8, unique_by=lambda s: s[0])


def build(saves_: list[tuple[int, str, int, str]]) -> tuple[dict[str, str], int | None]:
    """The tree's files and the step the newest complete save holds (None: none)."""
    files: dict[str, str] = {}
    best = None
    for step, fmt, variant, naming in saves_:
        content, complete = save_files(fmt, variant, step)
        directory = NAMES[naming].format(step)
        files.update({f"{directory}/{name}": text for name, text in content.items()})
        complete = complete and not (naming == "bare" and fmt == "plain")  # a bare number needs a proof
        if complete and (best is None or step > best):
            best = step
    return files, best


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(saves)
def test_the_newest_complete_save_is_always_chosen_on_local_disk(saves_):
    files, best = build(saves_)
    root = Path(tempfile.mkdtemp(prefix="torn-"))
    try:
        write(root, files)
        found = find_latest_checkpoint(str(root))
        assert (found.step if found else None) == best, files
    finally:
        shutil.rmtree(root)


@pytest.mark.gcs
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(saves)
def test_the_newest_complete_save_is_always_chosen_on_gcs(gcs: StorageEmulator, saves_):
    files, best = build(saves_)
    prefix = f"trees/{uuid.uuid4().hex}"
    gcs.put_objects("test-bucket", {f"{prefix}/{name}": text.encode() for name, text in files.items()})
    found = find_latest_checkpoint(f"gs://test-bucket/{prefix}")
    assert (found.step if found else None) == best, files
