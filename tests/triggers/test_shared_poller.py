"""CustomJobTriggers of one event loop share one ListCustomJobs poller per location (real emulator, real
async client). Waits are on events with timeouts, never on guessed sleeps."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest
from google.api_core import exceptions as gexc

from airflow_provider_resilient.backends.vertex import list_filter
from airflow_provider_resilient.hooks.vertex_ai import AsyncResilientVertexAIHook
from airflow_provider_resilient.specs.common import job_labels
from airflow_provider_resilient.testing.emulator_clients import vertex_job_client
from airflow_provider_resilient.triggers.vertex_ai import CustomJobTrigger, active_pollers

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
PARENT = "projects/test-project/locations/us-central1"
POLL = 0.05  # seconds
TIMEOUT = 60.0  # seconds: a bound on every wait, never a measured time


def create(code: str, *, labelled: bool = True, attempt: int = 1, region: str = "us-central1") -> str:
    """A job running ``python -c code``; ``labelled``: with the labels our operator puts on its jobs."""
    labels = job_labels("dag", "task", "run", -1, attempt) if labelled else {}
    parent = f"projects/test-project/locations/{region}"
    job = vertex_job_client(region).create_custom_job(parent=parent, custom_job={
        "display_name": "watched", "labels": labels, "job_spec": {"worker_pool_specs": [{
            "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": "x", "command": ["python", "-c", code]}}]}})
    return str(job.name)


async def first_event(trigger: CustomJobTrigger) -> dict:
    async for event in trigger.run():
        return event.payload
    raise AssertionError("no event")


async def until(condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Yield to the loop until ``condition()`` holds; fail after ``timeout`` seconds."""
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


def run(main: Callable[[], Awaitable[object]]) -> object:
    return asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def gets(emulator, name: str | None = None) -> int:
    return len([c for c in emulator.calls.list("GetCustomJob") if name is None or c.resource == name])


def test_triggers_of_one_region_share_one_poller_that_lists_instead_of_getting_each_job(resilient_emulator):
    ok = [create("import time; time.sleep(0.5)", attempt=n) for n in (1, 2)]
    bad = create("import time; time.sleep(0.5); raise SystemExit(3)", attempt=3)

    async def main() -> list[dict]:
        tasks = [asyncio.create_task(first_event(CustomJobTrigger(n, poll_interval=POLL))) for n in [*ok, bad]]
        await until(lambda: any(p.cycles >= 2 for p in active_pollers().values()))
        (poller,) = active_pollers().values()  # one poller for the three triggers
        assert sorted(poller.job_names) == sorted([*ok, bad])
        events = await asyncio.gather(*tasks)
        assert active_pollers() == {}  # the last trigger to finish stopped it
        return events

    events = run(main)
    assert [e["status"] for e in events] == ["terminal"] * 3
    assert [e["job"]["state"] for e in events] == ["JOB_STATE_SUCCEEDED"] * 2 + ["JOB_STATE_FAILED"]
    assert "non-zero status of 3" in events[2]["job"]["error_message"]
    lists = resilient_emulator.calls.list("ListCustomJobs")
    assert len(lists) >= 2 and all(list_filter() in c.request for c in lists)
    # Ended jobs leave the listing: each trigger read its job once, when it had ended -- not once per cycle.
    assert gets(resilient_emulator) == 3


def test_a_job_without_our_labels_is_read_with_get_custom_job(resilient_emulator):
    labelled = create("import time; time.sleep(0.5)")
    foreign = create("import time; time.sleep(0.5)", labelled=False)

    async def main() -> list[dict]:
        triggers = [CustomJobTrigger(labelled, poll_interval=POLL), CustomJobTrigger(foreign, poll_interval=POLL)]
        return list(await asyncio.gather(*(first_event(t) for t in triggers)))

    events = run(main)
    assert [e["job"]["state"] for e in events] == ["JOB_STATE_SUCCEEDED"] * 2
    assert gets(resilient_emulator, labelled) == 1
    assert gets(resilient_emulator, foreign) >= 2  # polled every cycle, until it ended


def test_an_unreadable_job_still_ends_its_trigger_with_an_error(resilient_emulator):
    event = run(lambda: first_event(CustomJobTrigger(f"{PARENT}/customJobs/404", poll_interval=POLL)))
    assert event["status"] == "error" and "404" in event["message"]


def test_when_listing_fails_every_trigger_reads_its_own_job(resilient_emulator, monkeypatch):
    async def denied(*args: object, **kwargs: object) -> None:
        raise gexc.PermissionDenied("aiplatform.customJobs.list denied")

    monkeypatch.setattr(AsyncResilientVertexAIHook, "list_custom_jobs", denied)
    names = [create("import time; time.sleep(0.3)", attempt=n) for n in (1, 2)]

    async def main() -> list[dict]:
        return list(await asyncio.gather(*(first_event(CustomJobTrigger(n, poll_interval=POLL)) for n in names)))

    assert [e["job"]["state"] for e in run(main)] == ["JOB_STATE_SUCCEEDED"] * 2
    assert all(gets(resilient_emulator, n) >= 1 for n in names)


def test_cancelling_one_trigger_unsubscribes_it_and_the_others_carry_on(resilient_emulator):
    stuck = create("import time; time.sleep(600)", attempt=1)
    quick = [create("import time; time.sleep(0.5)", attempt=n) for n in (2, 3)]

    async def main() -> list[dict]:
        cancelled = asyncio.create_task(first_event(CustomJobTrigger(stuck, poll_interval=POLL)))
        others = [asyncio.create_task(first_event(CustomJobTrigger(n, poll_interval=POLL))) for n in quick]
        await until(lambda: any(p.cycles >= 1 for p in active_pollers().values()))
        (poller,) = active_pollers().values()
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert stuck not in poller.job_names and len(poller.job_names) == 2
        cycles = poller.cycles
        events = list(await asyncio.gather(*others))
        assert poller.cycles > cycles and active_pollers() == {}
        return events

    assert [e["job"]["state"] for e in run(main)] == ["JOB_STATE_SUCCEEDED"] * 2
    vertex_job_client("us-central1").cancel_custom_job(name=stuck)


def test_the_poller_cycles_at_the_smallest_poll_interval_and_there_is_one_per_location(resilient_emulator):
    name = create("import time; time.sleep(600)")
    elsewhere = create("import time; time.sleep(600)", region="europe-west4")

    async def main() -> None:
        slow = asyncio.create_task(first_event(CustomJobTrigger(name, poll_interval=3600)))
        await until(lambda: any(p.cycles >= 1 for p in active_pollers().values()))
        (poller,) = active_pollers().values()
        assert poller.interval == 3600
        fast = asyncio.create_task(first_event(CustomJobTrigger(name, poll_interval=POLL)))
        await until(lambda: poller.cycles >= 3)  # without the fast subscriber: an hour away
        assert poller.interval == POLL
        other = asyncio.create_task(first_event(CustomJobTrigger(elsewhere, poll_interval=POLL)))
        await until(lambda: len(active_pollers()) == 2)
        assert sorted(key[1] for key in active_pollers()) == ["europe-west4", "us-central1"]
        for task in (slow, fast, other):
            task.cancel()
        await asyncio.gather(slow, fast, other, return_exceptions=True)
        assert active_pollers() == {}

    run(main)
    for job in (name, elsewhere):
        vertex_job_client("us-central1").cancel_custom_job(name=job)


def test_triggers_in_two_event_loops_do_not_share_a_poller(resilient_emulator):
    name = create("import time; time.sleep(600)")
    both_polling = threading.Barrier(2)
    seen: list[list[int]] = []

    async def main() -> None:
        task = asyncio.create_task(first_event(CustomJobTrigger(name, poll_interval=POLL)))
        await until(lambda: any(p.cycles >= 1 for p in active_pollers().values()))
        await asyncio.to_thread(both_polling.wait, TIMEOUT)  # both loops have a live poller now
        seen.append([id(p) for p in active_pollers().values()])
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    threads = [threading.Thread(target=run, args=(main,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert [len(ids) for ids in seen] == [1, 1] and seen[0] != seen[1]
    vertex_job_client("us-central1").cancel_custom_job(name=name)


def test_per_job_polling_stays_available_and_is_serialized(resilient_emulator):
    name = create("import time; time.sleep(0.3)")
    trigger = CustomJobTrigger(name, poll_interval=POLL, shared_poller=False)
    classpath, kwargs = trigger.serialize()
    assert kwargs["shared_poller"] is False and CustomJobTrigger(**kwargs).serialize() == (classpath, kwargs)
    assert run(lambda: first_event(trigger))["job"]["state"] == "JOB_STATE_SUCCEEDED"
    assert resilient_emulator.calls.list("ListCustomJobs") == [] and gets(resilient_emulator, name) >= 2


def test_restart_timeout_is_serialized_only_when_set():
    """A trigger without ``restart_timeout`` serializes without the key, so a triggerer still on a provider version
    before it can re-create the trigger during a rolling upgrade; with it, it round-trips."""
    name = "projects/p/locations/us-central1/customJobs/1"
    _, plain = CustomJobTrigger(name, hang_timeout=60.0, checkpoint_dir="gs://b/c/", read_step_logs=True).serialize()
    assert "restart_timeout" not in plain and CustomJobTrigger(**plain).restart_timeout is None
    classpath, kwargs = CustomJobTrigger(name, hang_timeout=60.0, checkpoint_dir="gs://b/c/", read_step_logs=True,
                                         restart_timeout=600.0).serialize()
    assert kwargs["restart_timeout"] == 600.0 and CustomJobTrigger(**kwargs).serialize() == (classpath, kwargs)
    with pytest.raises(ValueError, match="restart_timeout must be > 0 seconds, got 0"):
        CustomJobTrigger(name, restart_timeout=0)
