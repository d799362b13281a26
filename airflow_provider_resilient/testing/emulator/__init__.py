"""A local Google Cloud that the real client libraries talk to unchanged, for tests and offline runs.

* :class:`Emulator` -- Vertex AI JobService (CustomJob, HyperparameterTuningJob) over gRPC,
  ``google.longrunning.Operations``, Cloud Storage (gcp-storage-emulator), a lifecycle engine that runs
  each replica's command as a local process and fails the way Google's training service pages say, and a
  control API (Python and HTTP).
* :class:`FaultPlan` / :class:`Fault` -- declarative fault injection (:mod:`.faults`).
* :class:`EmulatorConfig` -- latencies, time scale, platform retry rules, error codes, seed.

Start it standalone with ``python -m airflow_provider_resilient.testing.emulator`` (or
``resilient-emulator``), or in tests with the ``resilient_emulator`` pytest fixture.
"""

from .config import EmulatorConfig, Latencies, PlatformRules, RpcCodes
from .faults import Fault, FaultPlan, Match
from .server import Emulator

__all__ = ["Emulator", "EmulatorConfig", "Fault", "FaultPlan", "Latencies", "Match", "PlatformRules", "RpcCodes"]
