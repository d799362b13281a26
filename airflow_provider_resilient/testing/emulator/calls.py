"""The record of every API call the emulator received, for assertions and benchmarks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class CallRecord:
    """One RPC: ``method`` (e.g. ``CreateCustomJob``), a one-line ``request`` summary, the resource it
    named, the status code name it was answered with, and ``time`` (seconds since the epoch)."""

    method: str
    request: str
    resource: str
    code: str
    time: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CallLog:
    """Thread-safe, append-only list of :class:`CallRecord`.

    Args:
        clock: epoch seconds for :attr:`CallRecord.time` (the emulator's clock; default: real time).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._calls: list[CallRecord] = []

    def add(self, record: CallRecord) -> None:
        with self._lock:
            self._calls.append(record)

    def list(self, method: str | None = None) -> list[CallRecord]:
        """All calls so far, oldest first, optionally only those of ``method``."""
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def count(self, method: str) -> int:
        return len(self.list(method))

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()
