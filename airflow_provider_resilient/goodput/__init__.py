"""Goodput accounting: the run's ledger of productive and wasted time, and checkpoint-interval advice."""

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
    "advise_checkpointing",
    "goodput_ceiling",
    "goodput_ledger",
    "handed_interval",
    "trace_budget",
    "trace_ceiling",
    "trace_wall_time",
    "young_daly_interval",
]
