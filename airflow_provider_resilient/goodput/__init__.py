"""Goodput accounting: the run's ledger of productive and wasted time, checkpoint-interval advice, and a
workload's own ml-goodput-measurement events read back (:mod:`.events`)."""

from .events import WorkloadGoodput, default_logger_name, read_workload_goodput
from .ledger import (
    BADPUT_TYPES,
    BUCKETS,
    INTERRUPTIONS,
    CheckpointAdvice,
    Ledger,
    StepReport,
    advise_checkpointing,
    goodput_ceiling,
    goodput_ledger,
    handed_interval,
    trace_budget,
    trace_ceiling,
    trace_wall_time,
    young_daly_interval,
)

__all__ = [
    "BADPUT_TYPES",
    "BUCKETS",
    "INTERRUPTIONS",
    "CheckpointAdvice",
    "Ledger",
    "StepReport",
    "WorkloadGoodput",
    "advise_checkpointing",
    "default_logger_name",
    "goodput_ceiling",
    "goodput_ledger",
    "handed_interval",
    "read_workload_goodput",
    "trace_budget",
    "trace_ceiling",
    "trace_wall_time",
    "young_daly_interval",
]
