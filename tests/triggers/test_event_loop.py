"""No trigger of ours blocks the triggerer's event loop: the triggers run cold in a fresh interpreter (the
first trigger of a triggerer pays the Google client libraries' import), in asyncio's debug mode, and no
callback may hold the loop for more than 0.1 s (tests/triggers/loop_probe.py). The same is checked against
the real triggerer by the stack tests (tests/stack/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_resilient.clients import tpu_client, vertex_job_client

pytestmark = pytest.mark.resilient_emulator(time_scale=0.01)
PROBE = Path(__file__).with_name("loop_probe.py")


def test_a_cold_triggerer_loop_is_never_blocked_over_100_ms_by_our_triggers(resilient_emulator):
    job = vertex_job_client("us-central1").create_custom_job(
        parent="projects/test-project/locations/us-central1", custom_job={
            "display_name": "watched", "job_spec": {"worker_pool_specs": [{
                "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                "container_spec": {"image_uri": "x", "command": ["sleep", "600"]}}]}})
    node = tpu_client().create_node(parent="projects/test-project/locations/us-central2-b", node_id="probe", node={
        "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "sleep 600"}}).result(timeout=60)
    resilient_emulator.wait_for_state(job.name, ["JOB_STATE_RUNNING"], 60)

    out = subprocess.run([sys.executable, str(PROBE), job.name, node.name], capture_output=True, text=True,
                         timeout=120, check=False, env={**resilient_emulator.env(), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"max event-loop lag {result['max_lag_seconds'] * 1000:.0f} ms; events {result['events']}")
    assert result["events"][0]["status"] == "look_again"  # the TPU trigger watched its node to the end
    assert result["slow_callbacks"] == [], "\n".join(result["slow_callbacks"])
    resilient_emulator.wait_for_state(job.name, ["JOB_STATE_CANCELLED"], 60)  # on_kill worked, off the loop
