"""Step names are read strictly: a folder name is a step only as a framework writes it (ASCII digits, the whole
name), and a look-alike is never a candidate -- nor, when it is a step, chosen without its format's proof."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from airflow_provider_resilient.checkpoints import find_latest_checkpoint, list_checkpoint_saves, parse_step
from airflow_provider_resilient.checkpoints.formats import (
    MAX_STEP_DIGITS,
    is_bare_step,
    parse_tf_step,
    step_number,
    step_order,
)

#: name -> (step it parses to or None, bare number?). Escapes spell the Unicode look-alikes.
STEP_NAMES: dict[str, tuple[int | None, bool]] = {
    # what the frameworks write
    "100": (100, True),  # Orbax's default
    "0": (0, True),
    "0100": (100, True),  # Orbax step_format_fixed_length: one step, two names (judged in a fixed order)
    "00": (0, True),
    "step_100": (100, False),  # Orbax step_prefix="step"
    "step-100": (100, False),  # torchtitan
    "step100": (100, False),
    "checkpoint-100": (100, False),  # Hugging Face Trainer
    "checkpoint_100": (100, False),
    "ckpt-100": (100, False),
    "ckpt_100": (100, False),
    "global_step100": (100, False),  # DeepSpeed
    "global_step_100": (100, False),
    "iter_0000100": (100, False),  # Megatron-LM
    "iteration_100": (100, False),
    "9" * MAX_STEP_DIGITS: (10**MAX_STEP_DIGITS - 1, True),
    # Unicode digits: \d matches them and int() converts them; isdigit() is even true for superscripts
    "\uff11\uff12": (None, False),  # fullwidth 12
    "\u0663": (None, False),  # Arabic-Indic 3
    "\U0001d7d7": (None, False),  # mathematical bold 9
    "\u00b2": (None, False),  # superscript 2: isdigit() but int() raises
    "\uff10": (None, False),  # fullwidth 0
    "step_\uff11\uff12": (None, False),
    "checkpoint-\u0663": (None, False),
    "1\u00b2": (None, False),
    # whitespace, newline, separators, signs: $ matches before a final newline; int() strips and takes _ + -
    "100\n": (None, False),
    "step_100\n": (None, False),
    "\n100": (None, False),
    " 12 ": (None, False),
    "12 ": (None, False),
    "100\t": (None, False),
    "100\r": (None, False),
    "100\x00": (None, False),
    "1_000": (None, False),
    "+5": (None, False),
    "-5": (None, False),
    "step_-5": (None, False),
    "step_+5": (None, False),
    "step__100": (None, False),
    "step 100": (None, False),
    # other ways of writing numbers
    "1e5": (None, False),
    "100.0": (None, False),
    "100.5": (None, False),
    "0x10": (None, False),
    "0b101": (None, False),
    "0o17": (None, False),
    "1,000": (None, False),
    "": (None, False),
    # huge numbers: beyond MAX_STEP_DIGITS (and int64), or past int()'s 4300-digit limit, are refused at once
    "9" * (MAX_STEP_DIGITS + 1): (None, False),
    "9" * 19: (None, False),
    "9" * 26: (None, False),
    "0" * MAX_STEP_DIGITS + "1": (None, False),  # more than MAX_STEP_DIGITS digits, padding included
    "0" * 5000 + "5": (None, False),
    "step_" + "0" * 5000 + "5": (None, False),
    "9" * 100_000: (None, False),
    # prefixes: lower case as the frameworks write them; anything else is not a step
    "STEP_100": (None, False),
    "Step_100": (None, False),
    "CHECKPOINT-100": (None, False),
    "Ckpt_100": (None, False),
    "epoch_100": (None, False),
    "model.ckpt-100": (None, False),  # a TensorFlow prefix (parse_tf_step), not a step directory
    "ckpt-100.index": (None, False),
    "step_100_final": (None, False),
    "checkpoint-100-retry": (None, False),
    "best": (None, False),
    "latest": (None, False),
    "step_": (None, False),
    "step": (None, False),
    # saves in progress
    "100.tmp": (None, False),
    "step_100.tmp": (None, False),
    "100.orbax-checkpoint-tmp": (None, False),
    "100.orbax-checkpoint-tmp-123": (None, False),
    "100~": (None, False),
    "100.partial": (None, False),
    "100.incomplete": (None, False),
    "tmp-100": (None, False),
    "tmp-checkpoint-100": (None, False),
    # object-store spellings: a name is a base name, never a path or a URL-encoded one
    "100%2F": (None, False),
    "100%20": (None, False),
    "100/": (None, False),
    "/100": (None, False),
    "a/100": (None, False),
    "100\\": (None, False),
    "..": (None, False),
}


@pytest.mark.parametrize(("name", "expected"), STEP_NAMES.items(), ids=[repr(n[:24]) for n in STEP_NAMES])
def test_each_adversarial_name_parses_to_its_step_or_is_not_a_step(name: str, expected: tuple[int | None, bool]):
    step, bare = expected
    assert parse_step(name) == step
    assert is_bare_step(name) == bare
    assert step_order(name)[0] == (-1 if step is None else step)


def test_a_huge_name_is_refused_at_once():
    started = time.perf_counter()
    for name in ("9" * 1_000_000, "step_" + "0" * 1_000_000, "1" * 1_000_000 + "\n"):
        assert parse_step(name) is None and not is_bare_step(name) and parse_tf_step(f"ckpt-{name}") is None
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(("digits", "step"), [
    ("0", 0), ("7", 7), ("0100", 100), ("9" * MAX_STEP_DIGITS, 10**MAX_STEP_DIGITS - 1),
    ("", None), ("\uff11", None), ("\u00b2", None), ("1_0", None), ("+1", None), ("-1", None), (" 1", None),
    ("1\n", None), ("1.0", None), ("9" * (MAX_STEP_DIGITS + 1), None), ("0" * 5000 + "1", None),
])
def test_step_number_takes_ascii_digits_only(digits: str, step: int | None):
    assert step_number(digits) == step


@pytest.mark.parametrize(("prefix", "step"), [
    ("ckpt-3", 3), ("ckpt-100", 100), ("model.ckpt-100", 100), ("my-model-7", 7), ("ckpt-0", 0),
    ("ckpt-0100", 100),
    ("ckpt", None), ("ckpt100", None), ("model100", None), ("-100", None), ("ckpt--5", None), ("ckpt-+5", None),
    ("ckpt-1e5", None), ("ckpt-100.0", None), ("ckpt-0x10", None), ("ckpt-1_000", None), ("ckpt-100 ", None),
    ("ckpt-100\n", None), ("ckpt-\uff13", None), ("ckpt-\u0663", None), ("ckpt-" + "9" * 16, None),
    ("ckpt-100.tmp", None), ("ckpt-100.index", None), ("", None),
])
def test_tensorflow_prefixes_end_in_a_dash_and_ascii_digits(prefix: str, step: int | None):
    assert parse_tf_step(prefix) == step


def write(root: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


#: Look-alike folders, each with files that pass the plain-directory fallback (a file, no temporary name) and
#: would win over step_50 if their names were read as the steps they look like.
LOOK_ALIKES = ["100\n", "step_100\n", "step_\uff11\uff12\uff10", "\uff11\uff12\uff10", "\u0663\u0660\u0660",
               "STEP_100", " 100", "100 ", "1_000", "+100", "1e5", "100.0", "0x10", "9" * 16, "0" * 200 + "7",
               "100%2F", "step_100.tmp", "100~"]


@pytest.mark.parametrize("name", LOOK_ALIKES, ids=repr)
def test_a_look_alike_folder_never_shadows_the_complete_save(tmp_path: Path, checkpoint_fixtures: Path, name: str):
    """On main, "100\\n" and "step_100\\n" (read as step 100, and "100\\n" not as a bare number, which needs a
    proof) and "step_" + fullwidth 120 (read as step 120) were chosen over the complete DCP save at step_50."""
    shutil.copytree(checkpoint_fixtures / "dcp" / "step_100", tmp_path / "step_50")
    write(tmp_path, {f"{name}/model.pt": "m", f"{name}/state.json": "{}"})
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and found.step == 50 and found.uri.endswith("/step_50")
    assert [s.step for s in list_checkpoint_saves(str(tmp_path))] == [50]


def test_a_bare_number_without_a_proof_never_shadows_the_complete_save(tmp_path: Path, checkpoint_fixtures: Path):
    shutil.copytree(checkpoint_fixtures / "dcp" / "step_100", tmp_path / "step_50")
    write(tmp_path, {"100/model.pt": "m", "0200/model.pt": "m", "300/sub/model.pt": "m"})
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and found.step == 50
    write(tmp_path, {"0200/DONE": ""})  # the user's marker proves a bare number
    found = find_latest_checkpoint(str(tmp_path), marker="DONE")
    assert found is not None and found.step == 200


def test_a_file_named_like_a_step_is_not_a_candidate(tmp_path: Path, checkpoint_fixtures: Path):
    shutil.copytree(checkpoint_fixtures / "dcp" / "step_100", tmp_path / "step_50")
    write(tmp_path, {"100": "not a directory", "step_200": "neither", "checkpoint-300": "x"})
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and found.step == 50


def test_padded_and_unpadded_bare_names_of_one_step_keep_the_fixed_order(tmp_path: Path, checkpoint_fixtures: Path):
    for name in ("0020", "20", "020"):
        shutil.copytree(checkpoint_fixtures / "orbax" / "20", tmp_path / name)
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and found.step == 20 and found.uri.endswith("/20")  # unpadded first
    shutil.rmtree(tmp_path / "20")
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and found.uri.endswith("/020")  # then by name, in reverse: "020" > "0020"
    assert sorted(["0020", "20", "020", "step_20", "x"], key=step_order, reverse=True) == \
        ["step_20", "20", "020", "0020", "x"]


def test_a_tensorflow_state_file_naming_a_look_alike_prefix_is_skipped(tmp_path: Path):
    for prefix in ("ckpt-2", "ckpt-1e5", "ckpt-\uff19"):
        write(tmp_path, {f"{prefix}.index": "i", f"{prefix}.data-00000-of-00001": "d"})
    write(tmp_path, {"checkpoint": 'model_checkpoint_path: "ckpt-\uff19"\nall_model_checkpoint_paths: "ckpt-2"\n'
                                   'all_model_checkpoint_paths: "ckpt-1e5"\n'})
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and (found.step, found.uri) == (2, str(tmp_path / "ckpt-2"))


@pytest.mark.parametrize(("extra", "complete"), [
    ({}, False),  # shard 1 of 2 is missing
    ({"ckpt-1.data-00001-of-00002": "d"}, True),
    ({"ckpt-1.data-00001-of-00002\n": "d"}, False),  # $ matched before the newline: counted as the shard
    ({"ckpt-1.data-\uff10\uff10\uff10\uff10\uff11-of-00002": "d"}, False),  # int() read fullwidth 00001 as 1
    ({"ckpt-1.data-00001-of-" + "9" * 200: "d"}, False),  # not a shard: a total past 15 digits
])
def test_tensorflow_shards_are_counted_by_their_ascii_names(tmp_path: Path, extra: dict[str, str], complete: bool):
    write(tmp_path, {"step_1/checkpoint": 'model_checkpoint_path: "ckpt-1"\n', "step_1/ckpt-1.index": "i",
                     "step_1/ckpt-1.data-00000-of-00002": "d", **{f"step_1/{k}": v for k, v in extra.items()}})
    found = find_latest_checkpoint(str(tmp_path))
    assert (found is not None) == complete


@pytest.mark.parametrize(("extra", "complete"), [
    ({}, False),
    ({"model-00002-of-00002.safetensors": "s"}, True),
    ({"model-\uff10\uff10\uff10\uff10\uff12-of-00002.safetensors": "s"}, False),
    ({"model-00002-of-00002.safetensors\n": "s"}, False),
])
def test_safetensors_shards_are_counted_by_their_ascii_names(tmp_path: Path, extra: dict[str, str], complete: bool):
    write(tmp_path, {"checkpoint-1/model-00001-of-00002.safetensors": "s",
                     "checkpoint-1/model.safetensors.index.json": "{}",
                     **{f"checkpoint-1/{k}": v for k, v in extra.items()}})
    found = find_latest_checkpoint(str(tmp_path))
    assert (found is not None) == complete


def test_a_shard_count_of_a_quadrillion_is_counted_not_enumerated(tmp_path: Path):
    """``set(range(total))`` of a name claiming 10^15 shards would never end (or run out of memory)."""
    write(tmp_path, {"checkpoint-1/model-00001-of-999999999999999.safetensors": "s",
                     "checkpoint-1/model.safetensors.index.json": "{}",
                     "step_2/checkpoint": 'model_checkpoint_path: "ckpt-2"\n', "step_2/ckpt-2.index": "i",
                     "step_2/ckpt-2.data-00000-of-999999999999999": "d",
                     "checkpoint": 'model_checkpoint_path: "ckpt-3"\n', "ckpt-3.index": "i",
                     "ckpt-3.data-00000-of-999999999999999": "d"})
    started = time.perf_counter()
    assert find_latest_checkpoint(str(tmp_path)) is None
    assert time.perf_counter() - started < 5.0
