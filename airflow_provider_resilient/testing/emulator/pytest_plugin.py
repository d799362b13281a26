"""pytest plugin (registered through the ``pytest11`` entry point): the ``resilient_emulator`` fixture.

``resilient_emulator`` starts an :class:`~.server.Emulator` in process on free ports with a compressed
time scale, exports its environment (``RESILIENT_EMULATOR_HOST``, ``STORAGE_EMULATOR_HOST``) for the
test, and stops it afterwards -- killing every replica process, also when the test failed mid-job.
Configure it with the marker ``@pytest.mark.resilient_emulator(time_scale=..., fault_plan=..., seed=...)``;
other keyword arguments are :class:`~.config.EmulatorConfig` fields (``latencies={...}``, ``rpc_codes={...}``).
``seed`` seeds fault draws and wins over the plan's seed; without it the plan's seed applies (0 without one).

This module imports nothing heavy at import time: pytest loads it in every session of a user who has
the provider installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "resilient_emulator(time_scale=0.01, fault_plan=None, seed=None): configure the emulator fixture "
        "(seed: fault draws; None: the plan's seed)")


@pytest.fixture
def resilient_emulator(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A running emulator (time scale 0.01 unless the marker says otherwise), stopped after the test."""
    from ..storage import patched_environ
    from .config import EmulatorConfig
    from .faults import FaultPlan
    from .server import Emulator

    marker = request.node.get_closest_marker("resilient_emulator")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    plan = options.pop("fault_plan", None)
    if isinstance(plan, dict):
        plan = FaultPlan.model_validate(plan)
    config = EmulatorConfig(time_scale=options.pop("time_scale", 0.01), **options)  # seed: given or None
    emulator = Emulator(fault_plan=plan, config=config)
    with emulator, patched_environ(emulator.env()):
        yield emulator
