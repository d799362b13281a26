"""Checkpoint discovery: the newest complete checkpoint under a ``gs://``, ``obs://`` or local prefix.

Pure apart from the listing it does through fsspec; imports neither Airflow nor Google libraries
(gcsfs is loaded by fsspec only when a ``gs://`` prefix is looked at, s3fs and :mod:`.obs` only for ``obs://``).
"""

from .discovery import CheckpointScan, TornSave, find_latest_checkpoint, list_checkpoint_saves, scan_checkpoints
from .formats import Checkpoint, CheckpointFormat, CheckpointSave, judge_directory, parse_step

__all__ = ["Checkpoint", "CheckpointFormat", "CheckpointSave", "CheckpointScan", "TornSave", "find_latest_checkpoint",
           "judge_directory", "list_checkpoint_saves", "parse_step", "scan_checkpoints"]
