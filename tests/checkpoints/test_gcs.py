"""Checkpoint discovery on gs:// served by gcp-storage-emulator in process, through the real gcsfs."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_resilient.checkpoints import CheckpointFormat, find_latest_checkpoint, list_checkpoint_saves
from airflow_provider_resilient.testing.storage import StorageEmulator

pytestmark = pytest.mark.gcs


def upload(gcs: StorageEmulator, local: Path, prefix: str) -> None:
    """Copy a local tree under gs://test-bucket/<prefix>/ (seeded directly: the HTTP path is O(n^2))."""
    objects = {f"{prefix}/{p.relative_to(local).as_posix()}": p.read_bytes() for p in local.rglob("*") if p.is_file()}
    gcs.put_objects("test-bucket", objects)
    gcs.list_calls.clear()


def test_torn_dcp_on_gcs_is_skipped(gcs: StorageEmulator, checkpoint_fixtures: Path):
    upload(gcs, checkpoint_fixtures / "dcp", "run/checkpoints")
    found = find_latest_checkpoint("gs://test-bucket/run/checkpoints")
    assert found is not None
    assert (found.step, found.format, found.uri) == (200, CheckpointFormat.PYTORCH_DCP,
                                                     "gs://test-bucket/run/checkpoints/step_200")
    assert found.time is not None


def test_orbax_tmp_folder_on_gcs_is_skipped(gcs: StorageEmulator, checkpoint_fixtures: Path):
    upload(gcs, checkpoint_fixtures / "orbax", "orbax")
    found = find_latest_checkpoint("gs://test-bucket/orbax/")
    assert found is not None and (found.step, found.format) == (20, CheckpointFormat.ORBAX)


def test_orbax_on_gcs_without_commit_success_is_incomplete(gcs: StorageEmulator, checkpoint_fixtures: Path):
    upload(gcs, checkpoint_fixtures / "orbax_gcs_style", "orbax")
    found = find_latest_checkpoint("gs://test-bucket/orbax")
    assert found is not None and found.step == 20
    # Step 30's commit file arrives: the same call now sees it (listings are not served from a stale cache).
    gcs.put_objects("test-bucket", {"orbax/30/commit_success.txt": b"Checkpoint commit was successful"})
    again = find_latest_checkpoint("gs://test-bucket/orbax")
    assert again is not None and again.step == 30


def test_orbax_on_gcs_needs_commit_success_even_with_a_commit_time(gcs: StorageEmulator, checkpoint_fixtures: Path):
    """Orbax stamps ``commit_timestamp_nsecs`` before it writes ``commit_success.txt``; on GCS a save that
    died between the two is not finalised (Orbax's own reader would refuse it), so it is skipped."""
    upload(gcs, checkpoint_fixtures / "orbax_gcs_style", "orbax")
    committed = (checkpoint_fixtures / "orbax_gcs_style" / "20" / "_CHECKPOINT_METADATA").read_bytes()
    assert b'"commit_timestamp_nsecs": 1' in committed
    gcs.put_objects("test-bucket", {"orbax/30/_CHECKPOINT_METADATA": committed})
    found = find_latest_checkpoint("gs://test-bucket/orbax")
    assert found is not None and found.step == 20
    assert sorted(s.step for s in list_checkpoint_saves("gs://test-bucket/orbax")) == [10, 20]


def test_missing_prefix_on_gcs_gives_none(gcs: StorageEmulator):
    assert find_latest_checkpoint("gs://test-bucket/nothing/here") is None


def test_ten_thousand_step_folders_are_listed_by_prefix_and_delimiter(gcs: StorageEmulator):
    objects = {f"ckpt/step_{n}/model.bin": b"w" for n in range(10_000)}
    objects.update({f"ckpt/step_{n}/COMMITTED": b"" for n in range(9_999)})  # 9999 is partial
    objects["unrelated/big/tree/file"] = b"x"
    gcs.put_objects("test-bucket", objects)
    gcs.list_calls.clear()
    found = find_latest_checkpoint("gs://test-bucket/ckpt", marker="COMMITTED")
    assert found is not None and found.step == 9_998
    calls = [(c.prefix, c.delimiter) for c in gcs.list_calls]
    assert calls == [("ckpt/", "/"), ("ckpt/step_9999/", "/"), ("ckpt/step_9998/", "/")]
