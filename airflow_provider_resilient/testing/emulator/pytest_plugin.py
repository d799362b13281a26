"""pytest plugin: the ``resilient_emulator`` fixture. It never loads itself: opt in from your ``conftest.py``
(the top-level one of your test directory)::

    pytest_plugins = ["airflow_provider_resilient.testing.emulator.pytest_plugin"]

or on the command line, ``pytest -p airflow_provider_resilient.testing.emulator.pytest_plugin``. It needs the
``emulator`` extra (``pip install 'airflow-provider-resilient[emulator]'``).

``resilient_emulator`` starts an :class:`~.server.Emulator` in process on free ports with a compressed
time scale, exports its environment for the test (:meth:`~.server.Emulator.env`: the Airflow connection
``google_cloud_default`` with the extra ``emulator_host``, which is what points the provider's operators at the
emulator, ``STORAGE_EMULATOR_HOST`` for Cloud Storage, and the connection ``huaweicloud_default`` on the
emulated ModelArts), and stops it afterwards -- killing every replica
process, also when the test failed mid-job.
Configure it with the marker ``@pytest.mark.resilient_emulator(time_scale=..., fault_plan=..., seed=...)``;
other keyword arguments are :class:`~.config.EmulatorConfig` fields (``latencies={...}``, ``rpc_codes={...}``).
``seed`` seeds fault draws and wins over the plan's seed; without it the plan's seed applies (0 without one).

``clock="manual"`` runs the platform on a :class:`~.clock.ManualClock`: nothing the platform times (latencies,
fault ``after_seconds`` / ``grace_seconds``, queued resources' expiry) happens until the test moves time on
with ``resilient_emulator.advance(seconds)``, which returns once the platform has acted. A test then says
when a maintenance event strikes instead of guessing how fast the machine is::

    @pytest.mark.resilient_emulator(clock="manual", time_scale=1.0)
    def test_repair(resilient_emulator):
        resilient_emulator.add_fault({"kind": "maintenance", "after_seconds": 60})
        ...
        resilient_emulator.advance(60)      # the node is REPAIRING now, not "soon"

This module imports nothing heavy at import time (the emulator is imported when the fixture is first used).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "resilient_emulator(time_scale=0.01, fault_plan=None, seed=None, clock='real'): configure the "
        "emulator fixture (seed: fault draws; None: the plan's seed; clock='manual': time moves only by advance())")


@pytest.fixture
def resilient_emulator(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A running emulator (time scale 0.01 unless the marker says otherwise), stopped after the test."""
    from ..storage import patched_environ
    from .clock import ManualClock
    from .config import EmulatorConfig
    from .faults import FaultPlan
    from .server import Emulator

    marker = request.node.get_closest_marker("resilient_emulator")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    plan = options.pop("fault_plan", None)
    clock_kind = options.pop("clock", "real")
    if clock_kind not in ("real", "manual"):
        raise pytest.UsageError(f"resilient_emulator(clock=...) is 'real' or 'manual', got {clock_kind!r}")
    if isinstance(plan, dict):
        plan = FaultPlan.model_validate(plan)
    config = EmulatorConfig(time_scale=options.pop("time_scale", 0.01), **options)  # seed: given or None
    emulator = Emulator(fault_plan=plan, config=config, clock=ManualClock() if clock_kind == "manual" else None)
    with emulator, patched_environ(emulator.env()):
        yield emulator
