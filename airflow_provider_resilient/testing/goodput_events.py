"""ml-goodput-measurement's ``GoodputRecorder`` writing to the emulator's Cloud Logging, for workloads run offline.

The package's recorder builds ``google.cloud.logging.Client()`` itself, which reaches Google's endpoint with
Application Default Credentials. A workload run on the emulator gets the same recorder -- the package's own
entries, batching and background thread -- on a client the provider points at the emulator
(:func:`.emulator_clients.logging_client`, ``RESILIENT_EMULATOR_HOST``), so the operators read its events back
as they would on Google Cloud (:mod:`..goodput.events`). On Google Cloud, build ``GoodputRecorder`` directly.
"""

from __future__ import annotations

import threading
from typing import Any

_BUILDING = threading.Lock()  # the package's Client is swapped while one recorder is built


def goodput_recorder(job_name: str, logger_name: str | None = None, *, project: str,
                     emulator: str | None = None, max_latency_seconds: float = 0.2) -> Any:
    """A real ``ml_goodput_measurement.goodput.GoodputRecorder(job_name, logger_name, logging_enabled=True)``
    whose entries go to the emulator's Cloud Logging in ``project``.

    Args:
        job_name: the run's name, the same across its restarts (the operator's ``goodput_job_name``).
        logger_name: the log ID; default ``goodput_<job_name>`` (:func:`..goodput.events.default_logger_name`).
        project: the project the entries are written to (the operator's ``project_id``).
        emulator: ``host:port``; default ``RESILIENT_EMULATOR_HOST``.
        max_latency_seconds: the longest an entry waits in the recorder's background queue (the package's
            ``background_max_latency_s``, 2 s by default; short, so that a workload killed by a fault has sent
            nearly everything, as a long-running one has).

    Raises:
        ImportError: ml-goodput-measurement is not installed.
        RuntimeError: no emulator address is given or in the environment.
    """
    from unittest import mock

    import google.cloud.logging

    from ..goodput.events import default_logger_name
    from .emulator_clients import logging_client

    client = logging_client(project, emulator=emulator)  # RuntimeError without an address
    from ml_goodput_measurement.src import goodput as package

    with _BUILDING, mock.patch.object(google.cloud.logging, "Client", lambda *args, **kwargs: client):
        return package.GoodputRecorder(job_name, logger_name or default_logger_name(job_name), logging_enabled=True,
                                       background_max_latency_s=max_latency_seconds)
