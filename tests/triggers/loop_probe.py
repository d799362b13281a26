"""Run the provider's triggers in a fresh interpreter, as a triggerer's first triggers run, and report how
long any callback of the event loop took (``python loop_probe.py JOB_NAME NODE_NAME``; the triggers reach the
emulator through the connection ``google_cloud_default`` that ``Emulator.env()`` defines).

Nothing Google is imported before the triggers run, so the first trigger pays the client libraries'
import cost -- the case the triggerer warned about ("Triggerer's async thread was blocked for 4.61
seconds"). The loop runs in asyncio's debug mode with ``slow_callback_duration`` 0.1 s: asyncio logs every
callback (a step of a coroutine) that held the loop longer. A probe task also measures how late a 10 ms
sleep wakes up. Every module the loop's thread imports once the triggers are constructed is recorded too: an import runs
with the loop held, and the Google libraries' and our policy's cost tens of ms to seconds of CPU. Prints one
JSON line: ``{"slow_callbacks": [...], "max_lag_seconds": x, "events": [...], "in_loop_imports": [...]}``.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import json
import logging
import sys
import threading
import time

SLOW_CALLBACK_SECONDS = 0.1


class InLoopImports(importlib.abc.MetaPathFinder):
    """Records every module first imported by the event loop's thread (an import runs with the loop held)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if threading.current_thread() is threading.main_thread():
            self.names.append(name)


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.slow: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing"):
            self.slow.append(message[:400])


async def first(trigger: object) -> dict:
    async for event in trigger.run():  # type: ignore[attr-defined]
        return dict(event.payload)
    return {}


async def main(job_name: str, node_name: str) -> dict:
    loop = asyncio.get_running_loop()
    loop.slow_callback_duration = SLOW_CALLBACK_SECONDS
    lags: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            before = loop.time()
            await asyncio.sleep(0.01)
            lags.append(loop.time() - before - 0.01)

    probing = asyncio.create_task(probe())
    await asyncio.sleep(0.05)  # the probe is running before the first trigger starts

    from airflow_provider_resilient.triggers.tpu import TPUNodeTrigger
    from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger

    # Airflow imports a trigger's class in the loop (cheap: nothing Google); from here on nothing may be.
    in_loop = InLoopImports()
    sys.meta_path.insert(0, in_loop)
    # Each watches a live resource for a few polls, then fires its look-again / is cancelled; then on_kill.
    shared = CustomJobTrigger(job_name, poll_interval=0.05)
    alone = CustomJobTrigger(job_name, poll_interval=0.05, shared_poller=False)
    tpu = TPUNodeTrigger(node_name, look_again_at=time.time() + 1.0, poll_interval=0.05)
    # Named tasks: asyncio's debug report names the task whose step held the loop, so ours can be told
    # apart from the probe's and the loop's own (those only wait for the GIL a thread holds).
    watching = [asyncio.create_task(first(t), name=f"trigger {n}") for n, t in (("shared", shared),
                                                                               ("alone", alone))]
    events = [await asyncio.wait_for(asyncio.create_task(first(tpu), name="trigger tpu"), 30)]
    for task in watching:
        task.cancel()
    await asyncio.gather(*watching, return_exceptions=True)
    await shared.on_kill()
    await TPUNodeTrigger(node_name, look_again_at=time.time(), keep_node=False).on_kill()
    done.set()
    await probing
    sys.meta_path.remove(in_loop)
    return {"events": events, "max_lag_seconds": max(lags), "in_loop_imports": in_loop.names}


if __name__ == "__main__":
    import airflow.triggers.base  # noqa: F401 -- loaded in a triggerer before any trigger is

    collect = Collect()
    logging.getLogger("asyncio").addHandler(collect)
    logging.basicConfig(level=logging.WARNING)
    heavy = ("google.api_core", "google.cloud.aiplatform", "google.cloud.tpu", "grpc")
    assert not any(m.startswith(heavy) for m in sys.modules), "a Google client module was imported before the run"
    result = asyncio.run(main(sys.argv[1], sys.argv[2]), debug=True)
    print(json.dumps({**result, "slow_callbacks": collect.slow}))
