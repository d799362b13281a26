"""Checkpoint discovery on local disk, over the real DCP and Orbax fixtures and hand-made layouts."""

from __future__ import annotations

import shutil
from pathlib import Path

import fsspec
import pytest

from airflow_provider_resilient.checkpoints import CheckpointFormat, find_latest_checkpoint, parse_step


def test_pytorch_dcp_skips_the_torn_save_without_metadata(checkpoint_fixtures: Path):
    found = find_latest_checkpoint(str(checkpoint_fixtures / "dcp"))
    assert found is not None
    assert (found.step, found.format) == (200, CheckpointFormat.PYTORCH_DCP)
    assert found.uri == str(checkpoint_fixtures / "dcp" / "step_200")
    assert found.time is not None and found.time.tzinfo is not None


def test_orbax_skips_the_in_progress_tmp_directory(checkpoint_fixtures: Path):
    found = find_latest_checkpoint(str(checkpoint_fixtures / "orbax"))
    assert found is not None
    assert (found.step, found.format) == (20, CheckpointFormat.ORBAX)


def test_orbax_commit_file_layout_without_commit_success_is_incomplete(checkpoint_fixtures: Path):
    found = find_latest_checkpoint(str(checkpoint_fixtures / "orbax_gcs_style"))
    assert found is not None and found.step == 20


def test_old_orbax_tmp_names_with_a_timestamp_are_skipped(tmp_path: Path, checkpoint_fixtures: Path):
    shutil.copytree(checkpoint_fixtures / "orbax" / "20", tmp_path / "20")
    shutil.copytree(checkpoint_fixtures / "orbax" / "20", tmp_path / "40.orbax-checkpoint-tmp-1795302433")
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and found.step == 20


def test_orbax_commit_time_in_metadata_counts_without_commit_success(tmp_path: Path, checkpoint_fixtures: Path):
    """Orbax releases that rename atomically but write no commit_success.txt stamp the commit time."""
    shutil.copytree(checkpoint_fixtures / "orbax" / "20", tmp_path / "20")
    (tmp_path / "20" / "commit_success.txt").unlink()
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and (found.step, found.format) == (20, CheckpointFormat.ORBAX)


def write(path: Path, content: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


def test_tensorflow_state_file_names_the_newest_complete_checkpoint(tmp_path: Path):
    for n in (1, 2):
        write(tmp_path / f"ckpt-{n}.index")
        write(tmp_path / f"ckpt-{n}.data-00000-of-00002")
        write(tmp_path / f"ckpt-{n}.data-00001-of-00002")
    write(tmp_path / "ckpt-3.index")  # shard 1 of 2 missing: torn
    write(tmp_path / "ckpt-3.data-00000-of-00002")
    write(tmp_path / "checkpoint", 'model_checkpoint_path: "ckpt-3"\nall_model_checkpoint_paths: "ckpt-1"\n'
                                   'all_model_checkpoint_paths: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-3"\n')
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None
    assert (found.step, found.format, found.uri) == (2, CheckpointFormat.TENSORFLOW, str(tmp_path / "ckpt-2"))


def test_plain_step_folders_with_a_user_marker(tmp_path: Path):
    write(tmp_path / "step_5" / "model.pkl")
    write(tmp_path / "step_5" / "COMMITTED")
    write(tmp_path / "step_7" / "model.pkl")  # marker not yet written: partial
    found = find_latest_checkpoint(str(tmp_path), marker="COMMITTED")
    assert found is not None and (found.step, found.format) == (5, CheckpointFormat.DIRECTORY)
    unmarked = find_latest_checkpoint(str(tmp_path))
    assert unmarked is not None and unmarked.step == 7


def test_a_configured_marker_is_required_whatever_the_format(tmp_path: Path, checkpoint_fixtures: Path):
    shutil.copytree(checkpoint_fixtures / "dcp" / "step_100", tmp_path / "step_100")
    shutil.copytree(checkpoint_fixtures / "dcp" / "step_200", tmp_path / "step_200")
    write(tmp_path / "step_100" / "COMMITTED")
    found = find_latest_checkpoint(str(tmp_path), marker="COMMITTED")
    assert found is not None and found.step == 100


def test_step_names_and_temporary_names():
    assert [parse_step(n) for n in ("step_100", "step-7", "checkpoint-30", "ckpt_4", "global_step12", "000050",
                                    "iter_0000100")] == [100, 7, 30, 4, 12, 50, 100]
    for name in ("30.orbax-checkpoint-tmp", "tmp-checkpoint-5", "step_5.tmp", "step_5.partial", "latest",
                 "step_", "model", "epoch-3-of-9"):
        assert parse_step(name) is None, name


def test_mixed_naming_picks_the_highest_step(tmp_path: Path):
    write(tmp_path / "checkpoint-10" / "a")
    write(tmp_path / "step_000020" / "a")
    write(tmp_path / "tmp-checkpoint-90" / "a")
    found = find_latest_checkpoint(str(tmp_path))
    assert found is not None and found.step == 20 and found.uri.endswith("step_000020")


@pytest.mark.parametrize("layout", ["missing", "empty", "only-torn"])
def test_nothing_complete_gives_none(tmp_path: Path, layout: str, checkpoint_fixtures: Path):
    root = tmp_path / "ckpt"
    if layout == "empty":
        root.mkdir()
        (root / "step_3").mkdir()
    elif layout == "only-torn":
        shutil.copytree(checkpoint_fixtures / "dcp" / "step_300", root / "step_300")
        shutil.copytree(checkpoint_fixtures / "orbax" / "30.orbax-checkpoint-tmp", root / "30.orbax-checkpoint-tmp")
    assert find_latest_checkpoint(str(root)) is None


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="prefix"):
        find_latest_checkpoint("")


class CountingFS:
    """Wraps a filesystem and counts listing calls; any tree walk is an error."""

    def __init__(self, fs):
        self._fs = fs
        self.ls_calls: list[str] = []

    def ls(self, path, detail=True, **kwargs):
        self.ls_calls.append(path)
        return self._fs.ls(path, detail=detail, **kwargs)

    def find(self, *args, **kwargs):
        raise AssertionError("find() walks a whole tree")

    walk = glob = du = find

    def __getattr__(self, name):
        return getattr(self._fs, name)


def test_ten_thousand_step_folders_cost_two_listings(tmp_path: Path):
    for n in range(10_000):
        (tmp_path / f"step_{n}").mkdir()
    for n in (9_999, 9_998):
        write(tmp_path / f"step_{n}" / "model.pkl")  # 9999 and 9998 are torn: no marker
    write(tmp_path / "step_9997" / "COMMITTED")
    fs = CountingFS(fsspec.filesystem("file"))
    found = find_latest_checkpoint(str(tmp_path), marker="COMMITTED", fs=fs)
    assert found is not None and found.step == 9_997
    # One listing of the prefix, then one per candidate, newest first, until a complete one.
    assert fs.ls_calls == [str(tmp_path), f"{tmp_path}/step_9999", f"{tmp_path}/step_9998", f"{tmp_path}/step_9997"]
