"""Vertex AI's JobState facts the provider's rules read (Vertex AI API reference, "JobState":
https://cloud.google.com/vertex-ai/docs/reference/rest/v1/JobState). Pure data."""

from __future__ import annotations

#: The JobState values after which a CustomJob or HyperparameterTuningJob never changes again.
TERMINAL_STATES = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED",
                             "JOB_STATE_EXPIRED", "JOB_STATE_PARTIALLY_SUCCEEDED"})
#: The terminal states in which a job did what it was asked (PARTIALLY_SUCCEEDED is success for a CustomJob: some
#: of a tuning job's trials failed).
SUCCEEDED_STATES = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED"})

#: Huawei Cloud ModelArts training job phases (``status.phase``; ModelArts API reference, "Querying the Details About
#: a Training Job": https://support.huaweicloud.com/intl/en-us/api-modelarts/ShowTrainingJobDetails.html): Creating,
#: Pending, Running, Failed, Completed, Terminating, Terminated, Abnormal. A job in these never changes again
#: ("Stopping a Training Job", https://support.huaweicloud.com/intl/en-us/api-modelarts/StopTrainingJob.html: only a
#: Creating, Pending or Running job can be stopped); Abnormal is the platform's own failure and is not waited on.
MODELARTS_TERMINAL_PHASES = frozenset({"Completed", "Failed", "Terminated", "Abnormal"})
#: The ModelArts phase in which a training job did what it was asked.
MODELARTS_SUCCEEDED_PHASES = frozenset({"Completed"})

__all__ = ["MODELARTS_SUCCEEDED_PHASES", "MODELARTS_TERMINAL_PHASES", "SUCCEEDED_STATES", "TERMINAL_STATES"]
