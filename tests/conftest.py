"""Shared fixtures: the in-process Cloud Storage emulator and the real checkpoint fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_resilient.testing.storage import StorageEmulator, patched_environ

pytest_plugins = ["pytester"]

FIXTURES = Path(__file__).parent / "fixtures"
CHECKPOINT_FIXTURES = FIXTURES / "checkpoints"


@pytest.fixture(scope="session")
def storage_emulator() -> Iterator[StorageEmulator]:
    """One Cloud Storage emulator for the session (127.0.0.1, free port), with its env exported."""
    with StorageEmulator() as emulator, patched_environ(emulator.env()):
        yield emulator


@pytest.fixture
def gcs(storage_emulator: StorageEmulator) -> Iterator[StorageEmulator]:
    """The emulator, emptied, with bucket ``test-bucket``; its listing record cleared after set-up."""
    storage_emulator.wipe()
    storage_emulator.create_bucket("test-bucket")
    yield storage_emulator
    storage_emulator.wipe()


@pytest.fixture
def checkpoint_fixtures() -> Path:
    """Real DCP and Orbax checkpoints (see tests/fixtures/checkpoints/README.md)."""
    return CHECKPOINT_FIXTURES


@pytest.fixture
def recorded_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """``asyncio.sleep`` made instant; the seconds each call asked for, in order (to check a trigger's
    waits without waiting)."""
    import asyncio

    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(seconds: float, *args: object) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", recording_sleep)
    return waits
