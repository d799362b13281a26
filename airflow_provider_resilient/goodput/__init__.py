"""Goodput accounting: the run's ledger of productive and wasted time (:mod:`.ledger`), the ceiling checkpointing
allows (:mod:`.ceiling`), checkpoint-interval advice (:mod:`.advice`), and a workload's own ml-goodput-measurement
events read back (:mod:`.events`)."""

from .advice import INTERRUPTIONS, CheckpointAdvice, advise_checkpointing, handed_interval
from .ceiling import goodput_ceiling, trace_budget, trace_ceiling, trace_wall_time, young_daly_interval
from .events import WorkloadGoodput, default_logger_name, read_workload_goodput
from .ledger import BADPUT_TYPES, BUCKETS, Ledger, StepReport, goodput_ledger

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
