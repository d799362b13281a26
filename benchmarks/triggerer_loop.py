"""How long the first trigger of ours holds up a triggerer's event loop, and what a full garbage collection
costs the loop afterwards, with the client libraries imported three ways.

    python benchmarks/triggerer_loop.py [--repeat 5] [--quick]

Each way runs in a fresh interpreter that has loaded Airflow's triggerer modules first, as the trigger
runner has. A 2 ms ticker in the event loop records how late it wakes while the async hooks' client
modules are imported:

* ``in the loop``: imported by the coroutine itself (what a trigger importing ``google.cloud`` at first use
  does; the triggerer warned "async thread was blocked for 4.61 seconds");
* ``thread``: ``asyncio.to_thread(importlib.import_module, ...)``, the garbage collector left on;
* ``thread, gc held, frozen``: ``hooks/loading.import_client_modules`` (what the provider does).

Then ``gc.collect()`` is timed: a full collection runs with the GIL held, in whatever thread triggers it, so
it stops the loop for that long whenever it happens. Prints a Markdown table of the worst figure of
``--repeat`` runs (seconds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

WAYS = {"in the loop": "loop", "thread": "thread", "thread, gc held, frozen": "provider"}

CHILD = r"""
import asyncio, gc, importlib, json, sys, time
import airflow.jobs.triggerer_job_runner, airflow.triggers.base  # the trigger runner's own heap
from airflow_provider_resilient.hooks.loading import import_client_modules
from airflow_provider_resilient.hooks.tpu import TPU_ASYNC_MODULES
from airflow_provider_resilient.hooks.vertex_ai import VERTEX_ASYNC_MODULES

MODULES = list(dict.fromkeys(VERTEX_ASYNC_MODULES + TPU_ASYNC_MODULES))
way = sys.argv[1]

def plain():
    for name in MODULES:
        importlib.import_module(name)

async def main():
    lags = []
    done = asyncio.Event()
    async def ticker():
        while not done.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.002)
            lags.append(time.perf_counter() - before - 0.002)
    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    if way == "loop":
        plain()
    elif way == "thread":
        await asyncio.to_thread(plain)
    else:
        await asyncio.to_thread(import_client_modules, MODULES, yield_seconds=0)
    took = time.perf_counter() - started
    await asyncio.sleep(0.05)
    done.set()
    await ticking
    return max(lags), took

lag, took = asyncio.run(main())
before = time.perf_counter()
gc.collect()
print(json.dumps({"lag": lag, "import": took, "collect": time.perf_counter() - before}), flush=True)
gc.freeze()  # measured: exit without one more full collection of the heap
"""


def measure(way: str) -> dict[str, float]:
    """{"lag", "import", "collect"} seconds of one fresh interpreter importing the clients ``way``."""
    out = subprocess.run([sys.executable, "-c", CHILD, way], capture_output=True, text=True, timeout=300,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one run each (CI checks that it works)")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    print(f"| import of the client modules | longest loop stall s (worst of {repeat}) | import s | "
          "full gc.collect() after s |")
    print("| --- | --- | --- | --- |")
    for label, way in WAYS.items():
        runs = [measure(way) for _ in range(repeat)]
        print(f"| {label} | {max(r['lag'] for r in runs):.3f} | {max(r['import'] for r in runs):.2f} | "
              f"{max(r['collect'] for r in runs):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
