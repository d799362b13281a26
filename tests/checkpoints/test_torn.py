"""Torn saves are never chosen (issue 13 item 2): the adversarial cases found beside a real complete DCP save,
and random trees of complete and torn saves in every format, on local disk and on gs://."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.checkpoints import (
    Checkpoint,
    CheckpointFormat,
    find_latest_checkpoint,
    scan_checkpoints,
)
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


#: Step names as the frameworks write them, by step N (the module docstring of checkpoints/formats.py).
VALID_NAMES = {"step": "step_{}", "checkpoint": "checkpoint-{}", "ckpt": "ckpt_{}", "bare": "{}",
               "padded": "step_{:06d}", "bare-padded": "{:08d}", "global": "global_step{}", "iter": "iter_{:07d}",
               "torchtitan": "step-{}"}
BARE = {"bare", "bare-padded"}
#: Names that look like step N and are not steps (on GCS: no CR or LF, which object names may not hold).
LOOK_ALIKES = ["STEP_{}", "Step_{}", "CHECKPOINT-{}", "Ckpt_{}", " {}", "{} ", "step_{} ", "+{}", "-{}", "step_-{}",
               "{}.0", "{}.5", "{}e0", "0x{}", "1_{:03d}", "step__{}", "epoch_{}", "model.ckpt-{}", "step_{}_final",
               "{}.tmp", "{}~", "{}.partial", "{}.incomplete", "{}.orbax-checkpoint-tmp", "{}.orbax-checkpoint-tmp-123",
               "tmp-{}", "{}%2F", "{}%20", "9999999999999999{}", "0000000000000000{}"]
LOCAL_ONLY_LOOK_ALIKES = ["{}\n", "step_{}\n", "\n{}", "{}\r", "{}\t"]
#: Unicode decimal digits that \d matches and int() reads: fullwidth, Arabic-Indic, Devanagari, mathematical bold.
UNICODE_DIGITS = ["\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19",
                  "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669",
                  "\u0966\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e\u096f",
                  "".join(chr(0x1D7CE + d) for d in range(10))]
#: The characters of step names: any other one inserted (not a path separator or NUL) makes a name not a step.
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz_-0123456789"


def _junk(gcs: bool) -> st.SearchStrategy[str]:
    excluded = "".join(_NAME_CHARS) + "/\x00" + ("\r\n#[]*?" if gcs else "")
    chars = st.characters(exclude_categories=["Cs"] + (["Cc"] if gcs else []), exclude_characters=excluded)
    return st.text(chars, min_size=1, max_size=4)


@dataclass(frozen=True)
class Save:
    name: str  # the folder's name
    step: int | None  # the step it is named for, or None: not a step name
    bare: bool  # a bare number: needs a format's proof
    fmt: str
    variant: int
    written_step: int  # the step its files name (a TensorFlow prefix ckpt-N)


@st.composite
def folder_name(draw: st.DrawFn, step: int, gcs: bool) -> tuple[str, int | None, bool]:
    """(name, the step it strictly is or None, bare?): a valid name, a look-alike of one, a valid name with junk
    inserted, or one with a Unicode digit in place of an ASCII one."""
    kind = draw(st.sampled_from(["valid", "valid", "valid", "look-alike", "junk", "unicode"]))
    template = draw(st.sampled_from(sorted(VALID_NAMES)))
    valid = VALID_NAMES[template].format(step)
    if kind == "valid":
        return valid, step, template in BARE
    if kind == "look-alike":
        return draw(st.sampled_from(LOOK_ALIKES + ([] if gcs else LOCAL_ONLY_LOOK_ALIKES))).format(step), None, False
    if kind == "junk":
        at = draw(st.integers(0, len(valid)))
        return valid[:at] + draw(_junk(gcs)) + valid[at:], None, False
    digits = draw(st.sampled_from(UNICODE_DIGITS))
    at = draw(st.sampled_from([i for i, c in enumerate(valid) if c.isdigit()]))
    return valid[:at] + digits[int(valid[at])] + valid[at + 1:], None, False


@st.composite
def trees(draw: st.DrawFn, gcs: bool = False) -> list[Save]:
    """Up to 8 saves, complete and torn, under folder names valid and adversarial; several may name one step."""
    saves: list[Save] = []
    for _ in range(draw(st.integers(0, 8))):
        step = draw(st.one_of(st.integers(0, 99_999), st.sampled_from([0, 7, 100, 1000])))
        name, parsed, bare = draw(folder_name(step, gcs))
        if any(s.name == name for s in saves):
            continue
        fmt = draw(st.sampled_from(["dcp", "orbax", "tensorflow", "safetensors", "plain"]))
        saves.append(Save(name, parsed, bare, fmt, draw(st.integers(0, 2)), step))
    return saves


def build(saves_: list[Save]) -> tuple[dict[str, str], int | None, set[str]]:
    """The tree's files, the step the newest complete save with a step name holds (None: none), and the names
    of the complete saves of that step (any of them may be chosen)."""
    files: dict[str, str] = {}
    complete_steps: dict[str, int] = {}
    for save in saves_:
        content, complete = save_files(save.fmt, save.variant, save.written_step)
        files.update({f"{save.name}/{name}": text for name, text in content.items()})
        complete = complete and not (save.bare and save.fmt == "plain")  # a bare number needs a proof
        if complete and save.step is not None:
            complete_steps[save.name] = save.step
    best = max(complete_steps.values(), default=None)
    return files, best, {name for name, step in complete_steps.items() if step == best}


def check(found: Checkpoint | None, best: int | None, names: set[str], files: dict[str, str]) -> None:
    assert (found.step if found else None) == best, files
    if found is not None:
        assert found.uri.rsplit("/", 1)[-1] in names, (found.uri, names, files)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trees())
def test_the_newest_complete_save_is_always_chosen_on_local_disk(saves_):
    files, best, names = build(saves_)
    root = Path(tempfile.mkdtemp(prefix="torn-"))
    try:
        write(root, files)
        check(find_latest_checkpoint(str(root)), best, names, files)
    finally:
        shutil.rmtree(root)


@pytest.mark.gcs
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trees(gcs=True))
def test_the_newest_complete_save_is_always_chosen_on_gcs(gcs: StorageEmulator, saves_):
    files, best, names = build(saves_)
    prefix = f"trees/{uuid.uuid4().hex}"
    gcs.put_objects("test-bucket", {f"{prefix}/{name}": text.encode() for name, text in files.items()})
    check(find_latest_checkpoint(f"gs://test-bucket/{prefix}"), best, names, files)
