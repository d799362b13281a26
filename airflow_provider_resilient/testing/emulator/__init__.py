"""A local Google Cloud that the real client libraries talk to unchanged, for tests and offline runs.

* :class:`Emulator` -- Vertex AI JobService (CustomJob, HyperparameterTuningJob) over gRPC, Cloud Logging (with
  sinks that route entries to Pub/Sub), Cloud Pub/Sub (:mod:`.pubsub`), ``google.longrunning.Operations``, Cloud
  Storage (gcp-storage-emulator), a lifecycle engine that runs
  each replica's command as a local process and fails the way Google documents its jobs and nodes failing, and
  a control API (Python and HTTP).
* :class:`FaultPlan` / :class:`Fault` -- declarative fault injection (:mod:`.faults`).
* :class:`EmulatorConfig` -- latencies, time scale, platform retry rules, error codes, seed.

Start it standalone with ``python -m airflow_provider_resilient.testing.emulator`` (or
``resilient-emulator``), or in tests with the ``resilient_emulator`` fixture of the pytest plugin
:mod:`.pytest_plugin` (opt in: ``pytest_plugins = ["airflow_provider_resilient.testing.emulator.pytest_plugin"]``
in your ``conftest.py``). Installing: ``pip install 'airflow-provider-resilient[emulator]'``; without that extra,
importing this package raises ImportError naming it.
"""

import importlib.util

#: What the emulator needs beyond the provider's runtime dependencies (the ``emulator`` extra): the emulated Cloud
#: Storage and OBS (moto's S3 server, read through s3fs). Checked before anything is imported, so that a missing
#: extra is one clear ImportError.
EXTRA_MODULES = {"gcp_storage_emulator": "gcp-storage-emulator", "moto": "moto[s3,server]", "s3fs": "s3fs"}

_missing = [dist for module, dist in EXTRA_MODULES.items() if importlib.util.find_spec(module) is None]
if _missing:
    raise ImportError(
        f"airflow_provider_resilient.testing.emulator needs the 'emulator' extra ({', '.join(_missing)} is not "
        "installed): pip install 'airflow-provider-resilient[emulator]'")

from .config import EmulatorConfig, Latencies, PlatformRules, RpcCodes  # noqa: E402
from .faults import Fault, FaultPlan, Match  # noqa: E402
from .server import Emulator  # noqa: E402

__all__ = ["Emulator", "EmulatorConfig", "Fault", "FaultPlan", "Latencies", "Match", "PlatformRules", "RpcCodes"]
