"""A workload's own goodput events, as ml-goodput-measurement records them, read back from Cloud Logging.

A workload that uses Google's ``ml-goodput-measurement`` package records its job start, TPU initialisation,
training preparation, data loading, every step's start and its end with ``GoodputRecorder(job_name,
logger_name, logging_enabled=True)``: one structured entry each, in log ``projects/P/logs/<logger_name>``, with
``jsonPayload.job_name``. The package's ``GoodputCalculator`` turns them into goodput and badput seconds, split the
way only the workload can split them: checkpoint saves, data loading and program start-up are seen from inside.

This module runs that same calculator on the entries, through a ``google.cloud.logging.Client`` the provider
builds (the connection's credentials, or the emulator) -- the package's own logger builds ``Client()`` from
Application Default Credentials, which an Airflow worker may not have and an emulator cannot answer -- and
returns its figures as a :class:`WorkloadGoodput`. The operators read it when the run ends
(``goodput_job_name``) and report it beside their own estimate from checkpoints (:mod:`.ledger`), which is the
better figure when the workload records nothing.

Needs ``ml-goodput-measurement`` (``pip install ml-goodput-measurement``); imported only when called.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: A Cloud Logging LOG_ID: letters, digits, ``/_-.``, at most 512 characters (what the package's logger
#: name becomes).
LOG_ID_RE = re.compile(r"[A-Za-z0-9/_.\-]{1,512}")


def default_logger_name(job_name: str) -> str:
    """The logger name MaxText and the package's examples use for a job: ``goodput_<job_name>``."""
    return f"goodput_{job_name}"


@dataclass(frozen=True)
class WorkloadGoodput:
    """ml-goodput-measurement's figures for one ``job_name``, across all its restarts.

    Attributes:
        job_name: the ``job_name`` the workload recorded under.
        logger_name: the log its entries are in.
        total_seconds: first job start to the last event (the package's ``total_elapsed_time``).
        goodput_seconds: productive training time (seconds).
        badput_seconds: seconds per ``BadputType`` name (e.g. ``WASTED_PROGRESS_FROM_DISRUPTION``,
            ``UNPRODUCTIVE_CHECKPOINT_SAVE_TIME``), custom badput events summed into ``CUSTOM_BADPUT_EVENTS``.
        last_productive_step: the highest step whose progress was kept.
        disruptions: how many restarts the package saw (a new job start after steps).
        excluded_seconds: time the package excludes from the total (its exclusion windows).
    """

    job_name: str
    logger_name: str
    total_seconds: float
    goodput_seconds: float
    badput_seconds: Mapping[str, float] = field(default_factory=dict)
    last_productive_step: int = 0
    disruptions: int = 0
    excluded_seconds: float = 0.0

    @property
    def goodput(self) -> float:
        """Productive time / total time, 0 to 1 (0 for an empty total)."""
        return self.goodput_seconds / self.total_seconds if self.total_seconds > 0 else 0.0

    @classmethod
    def from_details(cls, job_name: str, logger_name: str, details: Mapping[Any, Any]) -> WorkloadGoodput:
        """From ``GoodputCalculator.get_job_goodput_details()``: ``goodput_time`` (by ``GoodputType``),
        ``badput_time`` (by ``BadputType``; ``CUSTOM_BADPUT_EVENTS`` a mapping of event name to seconds),
        ``total_elapsed_time``, ``max_productive_step``, ``disruption_count``, ``total_excluded_time``. Enum keys
        become their names.

        Raises:
            ValueError: a figure is missing or not a number.
        """

        def name(key: Any) -> str:
            return str(getattr(key, "name", key))

        try:
            goodput = {name(k): float(v) for k, v in details["goodput_time"].items()}
            badput: dict[str, float] = {}
            for key, value in details["badput_time"].items():
                badput[name(key)] = (sum(float(v) for v in value.values()) if isinstance(value, Mapping)
                                     else float(value))
            return cls(job_name=job_name, logger_name=logger_name,
                       total_seconds=float(details["total_elapsed_time"]),
                       goodput_seconds=goodput.get("TOTAL", sum(goodput.values())), badput_seconds=badput,
                       last_productive_step=int(details.get("max_productive_step") or 0),
                       disruptions=int(details.get("disruption_count") or 0),
                       excluded_seconds=float(details.get("total_excluded_time") or 0.0))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"ml-goodput-measurement's details for job {job_name!r} are not as expected: "
                             f"{exc!r}") from exc

    def badput_breakdown(self) -> dict[str, float]:
        """Badput in percent of the total per ``BadputType`` name, as ``get_job_goodput(include_badput_breakdown=
        True)`` reports it (and as :meth:`.ledger.Ledger.badput_breakdown` names ours)."""
        if self.total_seconds <= 0:
            return dict.fromkeys(self.badput_seconds, 0.0)
        return {kind: round(100.0 * seconds / self.total_seconds, 2) for kind, seconds in self.badput_seconds.items()}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, ``goodput`` (0 to 1), ``badput_breakdown`` (percent) and the source."""
        return {"source": "ml-goodput-measurement events", "job_name": self.job_name,
                "logger_name": self.logger_name, "total_seconds": round(self.total_seconds, 3),
                "goodput_seconds": round(self.goodput_seconds, 3), "goodput": round(self.goodput, 4),
                "badput_seconds": {k: round(v, 3) for k, v in self.badput_seconds.items()},
                "badput_breakdown": self.badput_breakdown(), "last_productive_step": self.last_productive_step,
                "disruptions": self.disruptions, "excluded_seconds": round(self.excluded_seconds, 3)}

    def summary(self) -> str:
        """One line: goodput and every badput type above zero, in seconds and percent."""
        parts = [f"goodput {self.goodput:.1%} of {self.total_seconds:.0f} s"]
        parts += [f"{kind} {seconds:.0f} s ({seconds / self.total_seconds:.1%})"
                  for kind, seconds in sorted(self.badput_seconds.items(), key=lambda kv: -kv[1])
                  if seconds > 0 and self.total_seconds > 0]
        parts.append(f"{self.disruptions} disruption(s), last productive step {self.last_productive_step}")
        return "; ".join(parts)


def read_workload_goodput(client: Any, job_name: str, logger_name: str | None = None) -> WorkloadGoodput:
    """The goodput ml-goodput-measurement computes from the events the workload recorded as ``job_name``.

    Args:
        client: a ``google.cloud.logging.Client`` of the workload's project (e.g.
            :func:`..logging_clients.logging_client`); its ``logger(logger_name).list_entries`` is what the
            package's own reader calls.
        job_name: the ``job_name`` the workload gave ``GoodputRecorder``.
        logger_name: its ``logger_name``; default :func:`default_logger_name`.

    Raises:
        ImportError: ml-goodput-measurement is not installed (the message says how to install it).
        ValueError: a bad ``job_name`` or ``logger_name`` (not a Cloud Logging LOG_ID), or no events: the
            workload recorded nothing under ``job_name`` in that log (or nothing the package can use).
        google.api_core.exceptions.GoogleAPICallError: the read failed (``PermissionDenied`` without
            ``logging.logEntries.list``, e.g. ``roles/logging.viewer``).
    """
    logger_name = logger_name or default_logger_name(job_name)
    if not job_name or not isinstance(job_name, str):
        raise ValueError(f"goodput_job_name must be a non-empty string, got {job_name!r}")
    if not LOG_ID_RE.fullmatch(logger_name):
        raise ValueError(f"goodput_logger_name {logger_name!r} is not a Cloud Logging log ID: use letters, digits "
                         "and '/_-.', at most 512 characters")
    try:
        from ml_goodput_measurement.src import goodput as package
    except ImportError as exc:
        raise ImportError("reading a workload's goodput events needs ml-goodput-measurement: "
                          "pip install ml-goodput-measurement") from exc

    class ClientLogger(package._CloudLogger):  # type: ignore[misc]
        """The package's Cloud Logging reader (its filter, paging and ordering) on ``client``; reading only, so
        without the asynchronous writer its constructor starts."""

        def __init__(self) -> None:  # the attributes the package's reader uses, as its constructor sets them
            self.job_name = job_name
            self.project_id = client.project
            self.log_name = logger_name
            self.logger = client.logger(logger_name)
            self.job_start_time = None
            self.retention_period = package._CLOUD_LOGGING_DEFAULT_RETENTION

    def missing(why: str) -> ValueError:
        return ValueError(f"no goodput events of job {job_name!r} in log {logger_name!r} (project {client.project}; "
                          f"{why}): does the workload record with GoodputRecorder({job_name!r}, {logger_name!r}, "
                          "logging_enabled=True)?")

    with tempfile.TemporaryDirectory(prefix="resilient-goodput-") as cache:  # the calculator's cache files
        calculator = package.GoodputCalculator(job_name, logger_name, cloud_logger=ClientLogger(), cache_dir=cache)
        try:
            calculator.get_job_goodput(include_badput_breakdown=True)  # reads the events, fills the cache
        except ValueError as exc:  # "total job time is zero" and the like
            raise missing(str(exc)) from exc
        details = calculator.get_job_goodput_details()  # the same figures in seconds
    figures = WorkloadGoodput.from_details(job_name, logger_name, details)
    if figures.total_seconds <= 0:
        raise missing("a total time of 0 s")
    return figures
