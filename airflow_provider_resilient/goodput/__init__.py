"""Goodput accounting: the run's ledger of productive and wasted time, and checkpoint-interval advice."""

from .ledger import (
    BUCKETS,
    Ledger,
    StepReport,
    checkpoint_advice,
    goodput_ceiling,
    goodput_ledger,
    young_daly_interval,
)

__all__ = ["BUCKETS", "Ledger", "StepReport", "checkpoint_advice", "goodput_ceiling", "goodput_ledger",
           "young_daly_interval"]
