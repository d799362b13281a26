"""Emulator settings: platform latencies, the time scale that compresses them, and error codes.

Latencies are what the real platform takes (seconds); ``time_scale`` multiplies all of them, so ``time_scale=0.01``
turns Vertex AI's ~1 minute error delay (Vertex AI, "Understand the custom training service": about one minute
after a job ends) into 0.6 s. The workload's own run time is never scaled: it is a real process.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Latencies(BaseModel):
    """Platform latencies in (unscaled) seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    queued_seconds: float = Field(5.0, ge=0, description="QUEUED before PENDING")
    provisioning_seconds: float = Field(60.0, ge=0, description="PENDING: VMs being provisioned")
    error_delay_seconds: float = Field(60.0, ge=0, description="the error is set ~1 min after the end")
    restart_seconds: float = Field(10.0, ge=0, description="a platform retry or in-place worker restart")
    cancel_seconds: float = Field(5.0, ge=0, description="CANCELLING before CANCELLED")
    success_seconds: float = Field(5.0, ge=0, description="primary replica exited 0 until SUCCEEDED")
    tpu_create_seconds: float = Field(90.0, ge=0, description="TPU CreateNode: CREATING until READY")
    tpu_repair_seconds: float = Field(300.0, ge=0, description="a maintenance event with recovery: REPAIRING")
    tpu_delete_seconds: float = Field(30.0, ge=0, description="DeleteNode / StopNode")
    tpu_queue_seconds: float = Field(30.0, ge=0, description="queued resource ACCEPTED until PROVISIONING")
    modelarts_create_seconds: float = Field(5.0, ge=0, description="ModelArts training job: Creating until Pending")
    modelarts_schedule_seconds: float = Field(10.0, ge=0, description="ModelArts: Pending (Queuing) until nodes "
                                              "are granted; also how often a queued job looks for capacity again")
    modelarts_precheck_seconds: float = Field(10.0, ge=0, description="ModelArts: the fault-tolerance environment "
                                              "pre-check (only with fault-tolerance/job-retry-num)")
    modelarts_terminate_seconds: float = Field(5.0, ge=0, description="ModelArts: Terminating until Terminated")


class RpcCodes(BaseModel):
    """``google.rpc.Code`` numbers put in ``CustomJob.error.code``. Google does not document the codes of
    OOM, stockout and internal failures, so they are settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_error: int = 3  # INVALID_ARGUMENT, as observed in public threads for exit-code failures
    out_of_memory: int = 8  # RESOURCE_EXHAUSTED
    stockout: int = 8  # RESOURCE_EXHAUSTED
    internal: int = 13  # INTERNAL
    cancelled: int = 1  # CANCELLED
    expired: int = 4  # DEADLINE_EXCEEDED
    trials_failed: int = 9  # FAILED_PRECONDITION: a HyperparameterTuningJob failed by its failed trials


class PlatformRules(BaseModel):
    """How many times the platform retries by itself (Vertex AI, "Understand the custom training service";
    AI Platform Training, "Understanding the AI Platform Training service")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    transient_job_retries: int = 3  # exit 6/134/11/139: "retries the job up to three times"
    stockout_retries: int = 3  # "tries to restart the job up to three times"
    internal_retries: int = 2  # "restarts the job twice (three attempts in total)"
    worker_restarts: int = 5  # non-permanent worker failure: "up to five restarts per worker"
    worker_job_retries: int = 3  # "then retries the whole job up to three times"
    # ModelArts, "Training Fault Tolerance Check"
    # (https://support.huaweicloud.com/intl/en-us/usermanual-standard-modelarts/modelarts_trouble_0003.html):
    # fault-tolerance/job-retry-num "can be an integer ranging from 1 to 3"; the newer "Unconditional Auto Restart"
    # page (https://support.huaweicloud.com/intl/en-us/develop-modelarts/develop-modelarts-0041.html) accepts 1 to
    # 128, which the emulator models; a re-issued job that queues "more than 30 minutes" exits. The 30 minutes are
    # platform time: scaled by time_scale like the latencies.
    modelarts_job_retry_max: int = 128
    modelarts_requeue_limit_seconds: float = 1800.0


class EmulatorConfig(BaseModel):
    """Everything that shapes an emulator run.

    ``seed`` makes a run reproducible: it seeds the fault book's probability draws (faults of the plan and
    faults added at run time alike), job ids and tuning trials' random parameters. Precedence: a seed given
    here (``EmulatorConfig(seed=N)``, ``resilient-emulator --seed N``, the pytest marker's ``seed=N``) wins
    over the fault plan's ``seed``; with None the plan's seed applies (0 without a plan).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    time_scale: float = Field(1.0, gt=0, description="multiplies every platform latency")
    latencies: Latencies = Latencies()
    rpc_codes: RpcCodes = RpcCodes()
    platform: PlatformRules = PlatformRules()
    seed: int | None = Field(None, description="seed of fault draws, ids and trial parameters; "
                                                "None: the fault plan's seed (0 without a plan)")
    tick_seconds: float = Field(0.02, gt=0, description="how often the lifecycle engine looks at jobs")

    def resolved_seed(self, plan_seed: int | None) -> int:
        """The seed in force: this config's when given, else the plan's (``plan_seed``), else 0."""
        if self.seed is not None:
            return self.seed
        return plan_seed if plan_seed is not None else 0

    def scaled(self, seconds: float) -> float:
        """``seconds`` of platform latency in real seconds."""
        return seconds * self.time_scale
