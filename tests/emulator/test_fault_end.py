"""A fault added at run time can be ended: a quota or capacity outage that is over (``POST /faults/end``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from google.api_core import exceptions as gexc

from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig
from airflow_provider_resilient.testing.emulator_clients import vertex_job_client
from airflow_provider_resilient.testing.storage import patched_environ

PARENT = "projects/test-project/locations/us-central1"
JOB = {"display_name": "j", "job_spec": {"worker_pool_specs": [{
    "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
    "container_spec": {"image_uri": "x", "command": ["python", "-c", "print('ok')"]}}]}}


def post(url: str, body: object) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    """An emulator with its HTTP control API (the fixture's has none)."""
    with Emulator(control_port=0, config=EmulatorConfig(time_scale=0.002)) as emu, patched_environ(emu.env()):
        yield emu


def test_an_ended_fault_fires_no_more(emulator):
    client = vertex_job_client("us-central1")
    status, added = post(f"{emulator.control_url}/faults", {"kind": "quota", "times": None})
    assert status == 200
    for _ in range(2):
        with pytest.raises(gexc.ResourceExhausted):
            client.create_custom_job(parent=PARENT, custom_job=JOB)
    assert post(f"{emulator.control_url}/faults/end", added) == (200, {"index": added["index"], "fired": 2})
    client.create_custom_job(parent=PARENT, custom_job=JOB)  # the outage is over
    assert [f["ended"] for f in emulator.faults.faults()] == [True]
    assert [c.code for c in emulator.calls.list("CreateCustomJob")] == ["RESOURCE_EXHAUSTED"] * 2 + ["OK"]


def test_ending_an_unknown_or_unnamed_fault_is_refused(emulator):
    assert post(f"{emulator.control_url}/faults/end", {"index": 7})[0] == 404
    assert post(f"{emulator.control_url}/faults/end", {"index": "0"})[0] == 400
    with pytest.raises(IndexError):
        emulator.end_fault(0)
