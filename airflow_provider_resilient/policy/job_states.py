"""Vertex AI's JobState facts the provider's rules read (Vertex AI API reference, "JobState":
https://cloud.google.com/vertex-ai/docs/reference/rest/v1/JobState). Pure data."""

from __future__ import annotations

#: The JobState values after which a CustomJob or HyperparameterTuningJob never changes again.
TERMINAL_STATES = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED",
                             "JOB_STATE_EXPIRED", "JOB_STATE_PARTIALLY_SUCCEEDED"})
#: The terminal states in which a job did what it was asked (PARTIALLY_SUCCEEDED is success for a CustomJob: some
#: of a tuning job's trials failed).
SUCCEEDED_STATES = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED"})

__all__ = ["SUCCEEDED_STATES", "TERMINAL_STATES"]
