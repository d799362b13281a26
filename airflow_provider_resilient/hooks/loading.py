"""Import the Google client libraries without holding up the triggerer's event loop.

The async hooks call :func:`import_client_modules` from a worker thread (``asyncio.to_thread``): a
triggerer's first trigger of ours pays the libraries' import, about 2 s of CPU (``google.cloud.aiplatform_v1``
imports every service of the API), and that must not run in the event loop every trigger of the process
shares. A thread is not enough on its own: Python's cyclic garbage collector runs with the GIL held, in
whichever thread allocates when a generation fills up, and stops every other thread, the event loop's
included. Measured on the trigger runner's heap (``benchmarks/triggerer_loop.py``, 2 cores): a full
collection takes ~0.1 s with Airflow's triggerer modules loaded and 0.16 s once the client libraries are
too, and the import triggers such collections midway: the loop stalled up to 0.14 s with the import in a
plain thread, 0.014 s this way (1.8 s with the import in the loop).

So the import runs with automatic collection switched off, and the objects it loaded -- modules, classes,
protobuf descriptors, which live as long as the process -- are then moved to the permanent generation with
:func:`gc.freeze`, which later collections skip. Airflow does the same before it forks workers
(``LocalExecutor._spawn_workers_with_gc_freeze``, the dag-processor manager). The cost: a cycle of garbage
that exists at that moment is never collected (a one-off; reference counting still frees everything
else).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import sys
import threading
import time
from collections.abc import Iterable

#: Seconds the import thread waits before it starts: the event loop's step that started the thread runs
#: to its end first rather than sharing the GIL with the import.
IMPORT_YIELD_SECONDS = 0.05

_lock = threading.Lock()


def import_client_modules(modules: Iterable[str], *, yield_seconds: float = IMPORT_YIELD_SECONDS) -> None:
    """Import ``modules`` (dotted names) once per process, then freeze what they loaded; call it in a thread.

    Args:
        modules: dotted module names, e.g. ``"google.cloud.tpu_v2.services.tpu.transports.grpc_asyncio"``.
        yield_seconds: seconds to sleep first when something is left to import (0 in tests).

    Automatic garbage collection is off for the import's duration (when it was on) and is switched back on
    after; calls from several threads are serialised. Raises ``ImportError`` as ``import`` does (the
    collector is restored first).
    """
    wanted = [name for name in modules if not _ready(name)]
    if not wanted:
        return
    if yield_seconds:
        time.sleep(yield_seconds)
    with _lock:
        collecting = gc.isenabled()
        gc.disable()
        try:
            for name in wanted:
                importlib.import_module(name)
        finally:
            gc.freeze()
            if collecting:
                gc.enable()


async def load_off_loop(modules: Iterable[str]) -> None:
    """Await :func:`import_client_modules` in a worker thread; returns at once, with no thread, when every
    module in ``modules`` is loaded already (each call after a process's first)."""
    modules = tuple(modules)
    if not all(_ready(name) for name in modules):
        await asyncio.to_thread(import_client_modules, modules)


def _ready(name: str) -> bool:
    """Whether module ``name`` is imported and done (not half-way through another thread's import)."""
    module = sys.modules.get(name)
    return module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False)
